type ItemListProps = {
  items: string[];
};

export function ItemList({ items }: ItemListProps) {
  return (
    <ul className="items">
      {items.map((item) => (
        <li key={item}>{item}</li>
      ))}
    </ul>
  );
}
