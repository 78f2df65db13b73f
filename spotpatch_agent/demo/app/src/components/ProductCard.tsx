type ProductCardProps = {
  name: string;
  price: number;
  onSave: () => void;
};

export function ProductCard({ name, price, onSave }: ProductCardProps) {
  return (
    <section className="card">
      <h2>{name}</h2>
      <span className="price">${price}</span>
      <button className="btn btn-secondary" onClick={onSave}>Save</button>
    </section>
  );
}
