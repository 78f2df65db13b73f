import { ProductPage } from "./pages/ProductPage";

export function App() {
  return <ProductPage />;
}
