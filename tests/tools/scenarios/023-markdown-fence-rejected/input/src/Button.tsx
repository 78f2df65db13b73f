export function Button() {
  return <button>Save</button>;
}
