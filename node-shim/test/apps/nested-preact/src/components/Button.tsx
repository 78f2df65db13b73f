type Props = { label: string } & Record<string, unknown>;

// A props spread onto the element: the usage prop reaches the DOM too, and must never overwrite the
// element's own location.
export function Button({ label, ...rest }: Props) {
  return (
    <button class="btn" {...rest}>
      {label}
    </button>
  );
}
