import { useState } from "react";
import { Header } from "./components/Header";
import { ItemList } from "./components/ItemList";
import { ProductCard } from "./components/ProductCard";

const ITEMS = ["Canvas tote bag", "Enamel mug", "Linen notebook"];

export function App() {
  const [saved, setSaved] = useState(false);
  return (
    <>
      <Header title="SpotPatch demo shop" />
      <main className="container">
        <ProductCard name="Cotton T-shirt" price={19.5} onSave={() => setSaved(true)} />
        {saved && <p className="notice">Saved to your list.</p>}
        <ItemList items={ITEMS} />
      </main>
    </>
  );
}
