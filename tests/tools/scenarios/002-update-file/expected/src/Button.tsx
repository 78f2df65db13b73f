export function Button() {
  return <button>Save changes</button>;
}
