// Placeholder (skeleton): the overlay entry, loaded on first open.
import { render } from "preact";

export function mountOverlay(host: ShadowRoot): void {
  render(<div>SpotPatch</div>, host);
}
