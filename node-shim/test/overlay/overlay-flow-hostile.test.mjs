// Issue 13, acceptance 1 (h): a hostile page stylesheet does not break the overlay and the overlay changes
// nothing in the page's layout or styles; HTML/script payloads in element text, instructions, model
// messages, a file name, diff lines and check output are shown as text and never run; the session token
// is neither on `window` nor in the DOM (or storage). Every payload calls __pwn(n) if it ever runs.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { HOST } from "../support/browser-support.mjs";
import { PYTHON } from "../support/support.mjs";
import { PRICE_INSTRUCTION, openDemo, openPanel, panelOf, snap } from "../support/overlay-flow-helpers.mjs";

const HOSTILE_CSS = `
* { all: unset !important; }
button { display: none !important; }
.header { position: fixed !important; top: 0 !important; left: 0 !important; right: 0 !important; height: 120px !important;
  z-index: 2147483647 !important; background: #222 !important; color: #fff !important; }
div, section, main, span, ul, li { z-index: 999999999 !important; position: relative !important; }
main, ul, li { display: block !important; }
main { padding-top: 140px !important; }
`;
const ITEM_PAYLOAD = "<img src=x onerror=__pwn(1)>";
const INSTRUCTION_PAYLOAD = "<img src=x onerror=__pwn(2)><script>__pwn(3)</script> make it bold";
const CHECK = {
  id: "lint",
  name: "Lint <img src=x onerror=__pwn(14)>",
  command: PYTHON,
  args: ["-c", "print('<img src=x onerror=__pwn(12)><script>__pwn(13)</script>')"],
};

/** Every page element's box and a few computed styles, plus the document's own style state. */
function pageLayout(page) {
  return page.evaluate((host) => {
    const props = [
      "display",
      "position",
      "zIndex",
      "color",
      "backgroundColor",
      "fontSize",
      "margin",
      "padding",
      "overflow",
      "cursor",
      "pointerEvents",
      "userSelect",
    ];
    const elements = [...document.querySelectorAll("body *, html, body")].filter(
      (el) => el.localName !== host && !el.closest(host),
    );
    return {
      elements: elements.map((el) => {
        const r = el.getBoundingClientRect();
        const cs = getComputedStyle(el);
        return [
          el.localName,
          el.className?.toString?.() ?? "",
          Math.round(r.x),
          Math.round(r.y),
          Math.round(r.width),
          Math.round(r.height),
          ...props.map((p) => cs[p]),
        ];
      }),
      htmlAttrs: [...document.documentElement.attributes].map((a) => `${a.name}=${a.value}`),
      bodyAttrs: [...document.body.attributes].map((a) => `${a.name}=${a.value}`),
      sheets: document.styleSheets.length,
      adopted: document.adoptedStyleSheets.length,
      scroll: [scrollX, scrollY, document.documentElement.scrollWidth, document.documentElement.scrollHeight],
    };
  }, HOST);
}

test("(h) hostile stylesheet and script payloads: the overlay works, shows text only, changes nothing on the page, keeps the token", async (t) => {
  const { page, url } = await openDemo(t, {
    script: "hostile",
    options: { checks: [CHECK] },
    edit(root) {
      writeFileSync(path.join(root, "src/styles.css"), HOSTILE_CSS, { flag: "a" });
      const app = path.join(root, "src/App.tsx");
      writeFileSync(
        app,
        readFileSync(app, "utf8").replace('"Linen notebook"]', `"Linen notebook", ${JSON.stringify(ITEM_PAYLOAD)}]`),
      );
    },
  });
  await page.evaluate(() => {
    window.__pwned = [];
    window.__pwn = (n) => window.__pwned.push(n);
  });
  await page.locator("ul.items li").last().waitFor();
  const before = await pageLayout(page);
  await snap(page, "h-0-hostile-page");

  await openPanel(page);
  const panel = panelOf(page);
  const pick = panel.getByRole("button", { name: "Pick elements" });
  assert.ok(await pick.isVisible(), "the page's `button { display: none }` does not reach the overlay");
  const box = await panel.boundingBox();
  assert.ok(box && box.width > 300 && box.height > 300, `the panel keeps its size: ${JSON.stringify(box)}`);
  const onTop = await page.evaluate(({ host, x, y }) => document.elementFromPoint(x, y)?.localName === host, {
    host: HOST,
    x: box.x + box.width / 2,
    y: box.y + 20,
  });
  assert.ok(onTop, "the panel is above the page's fixed header with a huge z-index");

  await pick.click();
  await page.locator("span.price").click({ modifiers: ["Shift"] });
  await page.locator("ul.items li").last().click();
  await page.getByRole("textbox", { name: "Instruction for target 2" }).waitFor();
  await panel.getByText(`“${ITEM_PAYLOAD}”`).waitFor(); // the element's text, as text
  await page.getByRole("textbox", { name: "Instruction for target 1" }).fill(PRICE_INSTRUCTION);
  await page.getByRole("textbox", { name: "Instruction for target 2" }).fill(INSTRUCTION_PAYLOAD);
  await snap(page, "h-1-composer");
  await panel.getByRole("button", { name: "Submit" }).click();
  await panel.getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  await panel.getByText(/^Progress \(\d+\)$/).click();

  // Every payload is on screen as text.
  const diff = panel.getByRole("region", { name: "Diff" });
  await diff.getByText("src/<img src=x onerror=__pwn(5)>.txt").first().waitFor();
  const diffText = await diff.innerText();
  for (const payload of [
    "<img src=x onerror=__pwn(9)><script>__pwn(10)</script>",
    "<script>__pwn(6)</script><img src=x onerror=__pwn(7)>",
  ]) {
    assert.ok(diffText.includes(payload), `diff shows ${payload}`);
  }
  const text = await panel.innerText();
  for (const payload of [
    "<img src=x onerror=__pwn(4)> reading <b>the</b> card",
    "<script>__pwn(8)</script> editing",
    '<iframe srcdoc="<script>parent.__pwn(11)</script>"></iframe> done',
    "<img src=x onerror=__pwn(12)><script>__pwn(13)</script>",
    "Lint <img src=x onerror=__pwn(14)>",
    "src/<img src=x onerror=__pwn(5)>.txt",
  ]) {
    assert.ok(text.includes(payload), `the panel shows ${payload} as text`);
  }
  await snap(page, "h-2-review");

  // Nothing ran and no element was made from a payload.
  const made = await page.evaluate((host) => {
    const root = document.querySelector(host).shadowRoot;
    return ["img", "script", "iframe", "b", "object", "embed"].map((tag) => root.querySelectorAll(tag).length);
  }, HOST);
  assert.deepEqual(made, [0, 0, 0, 0, 0, 0]);
  assert.deepEqual(await page.evaluate(() => window.__pwned), []);
  assert.deepEqual(page.errors, []);

  // The token stays in the client module: not on window, not in the DOM (shadow included), not in storage.
  const clientSource = await (await fetch(new URL("@id/__x00__virtual:spotpatch/client", url))).text();
  const token = /token: "([^"]+)"/.exec(clientSource)?.[1];
  assert.ok(token && token.length > 20, "the client module holds the token");
  const leak = await page.evaluate(
    ({ token, host }) => {
      const found = [];
      for (const key of Object.getOwnPropertyNames(window)) {
        let value;
        try {
          value = window[key];
        } catch {
          continue;
        }
        if (typeof value === "string" && value.includes(token)) found.push(`window.${key}`);
        else if (value && typeof value === "object" && !(value instanceof Node) && value !== window) {
          try {
            if (JSON.stringify(value)?.includes(token)) found.push(`window.${key} (JSON)`);
          } catch {
            /* cyclic or exotic: not a plain holder */
          }
        }
      }
      if (document.documentElement.outerHTML.includes(token)) found.push("DOM");
      if (document.querySelector(host).shadowRoot.innerHTML.includes(token)) found.push("shadow DOM");
      if (JSON.stringify({ ...localStorage }).includes(token) || JSON.stringify({ ...sessionStorage }).includes(token))
        found.push("storage");
      return found;
    },
    { token, host: HOST },
  );
  assert.deepEqual(leak, []);

  // The overlay changed nothing in the page's layout or styles.
  await panel.getByRole("button", { name: "Back to edit" }).click();
  await panel.getByRole("button", { name: "Submit" }).waitFor();
  assert.deepEqual(await pageLayout(page), before);
  await panel.getByRole("button", { name: "Close panel" }).click();
  assert.deepEqual(await pageLayout(page), before);
});
