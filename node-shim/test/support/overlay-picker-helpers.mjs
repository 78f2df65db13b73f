// Helpers of the picker's browser tests through the real overlay (issue 13): the hover label a person sees
// (drawn on the picker's canvas, which says what it drew in `data-label`), and a mouse drag.
import { HOST } from "./browser-support.mjs";

/** The highlight label's text while it is shown ("" when hidden or still being written). */
export function hoverLabel(page) {
  return page.evaluate((host) => {
    const canvas = document.querySelector(host)?.shadowRoot?.querySelector('[data-spotpatch-picker="highlight"]');
    return canvas && canvas.style.display !== "none" ? canvas.getAttribute("data-label") ?? "" : "";
  }, HOST);
}

/** Wait until the hover label shows `text` (a substring); the error says what it showed instead. */
export async function waitLabel(page, text, timeout = 10_000) {
  try {
    await page.waitForFunction(
      ([host, text]) => {
        const canvas = document.querySelector(host)?.shadowRoot?.querySelector('[data-spotpatch-picker="highlight"]');
        return !!canvas && canvas.style.display !== "none" && (canvas.getAttribute("data-label") ?? "").includes(text);
      },
      [HOST, text],
      { timeout },
    );
  } catch (error) {
    throw new Error(`the hover label never showed ${JSON.stringify(text)} (it shows ${JSON.stringify(await hoverLabel(page))}): ${error.message}`, { cause: error });
  }
}

/** Press at (x0, y0), move in steps to (x1, y1), release. */
export async function drag(page, [x0, y0], [x1, y1]) {
  await page.mouse.move(x0, y0);
  await page.mouse.down();
  await page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, { steps: 4 });
  await page.mouse.move(x1, y1, { steps: 4 });
  await page.mouse.up();
}

/** The viewport box of `locator` with a margin: [[left, top], [right, bottom]]. */
export async function around(locator, margin = 6) {
  const b = await locator.boundingBox();
  return [
    [b.x - margin, b.y - margin],
    [b.x + b.width + margin, b.y + b.height + margin],
  ];
}
