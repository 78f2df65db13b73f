import { Card } from "../components/Card";

export function ProductPage() {
  return (
    <main>
      <h1>Products</h1>
      <Card title="Lamp" />
      <Card title="Chair" />
    </main>
  );
}
