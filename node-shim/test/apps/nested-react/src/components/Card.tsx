import { Button } from "./Button";

export function Card({ title }: { title: string }) {
  return (
    <section className="card">
      <h2>{title}</h2>
      <Button label={`Buy ${title}`} />
    </section>
  );
}
