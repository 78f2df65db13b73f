// Issue 13: picking through the real overlay on the demo app (real `vite dev` + plugin + engine, React
// dev build): the hover label names the component and file:line, clicks never reach the app, Shift stays,
// Esc leaves, arrows walk; acceptance 1 (j): a text selection ("Target this text") and an area drag
// ("Select an area") each become the right cards. Mouse and keys only; no client API from the test.
import assert from "node:assert/strict";
import { test } from "node:test";

import { openApp, shot } from "../support/browser-support.mjs";
import { openPanel, panelOf } from "../support/overlay-flow-helpers.mjs";
import { around, drag, waitLabel } from "../support/overlay-picker-helpers.mjs";

async function openDemoPanel(t) {
  const app = await openApp(t, { app: "demo", script: null });
  await app.page.setViewportSize({ width: 1280, height: 800 });
  await app.page.getByRole("button", { name: "Save", exact: true }).waitFor();
  await openPanel(app.page);
  return app;
}

const pickButton = (page, pressed) => page.getByRole("button", { name: "Pick elements", pressed });

test("demo: labels show component and file:line; clicks never reach the app; Shift stays, arrows walk, Enter picks, Esc leaves", async (t) => {
  const { page } = await openDemoPanel(t);
  const panel = panelOf(page);
  await pickButton(page).click();
  await pickButton(page, true).waitFor();

  const save = page.getByRole("button", { name: "Save", exact: true });
  await save.hover();
  await waitLabel(page, "button · ProductCard · src/components/ProductCard.tsx:12");
  await shot(page, "picker-demo-hover");
  await save.click({ modifiers: ["Shift"] });
  const card1 = panel.getByRole("group", { name: "Target 1" });
  await card1.getByText("src/components/ProductCard.tsx:12").waitFor();
  assert.match(await card1.innerText(), /<button> · ProductCard/);
  await pickButton(page, true).waitFor(); // Shift+click: still picking

  // The heading, then ArrowUp to its <header>, Enter picks it and leaves pick mode.
  await page.getByRole("heading", { name: "SpotPatch demo shop" }).hover();
  await waitLabel(page, "h1 · Header · src/components/Header.tsx:");
  await page.keyboard.press("ArrowUp");
  await waitLabel(page, "header · Header · src/components/Header.tsx:");
  await page.keyboard.press("ArrowDown");
  await waitLabel(page, "h1 · Header");
  await page.keyboard.press("ArrowUp");
  await waitLabel(page, "header · Header");
  await page.keyboard.press("Enter");
  const card2 = panel.getByRole("group", { name: "Target 2" });
  await card2.waitFor();
  assert.match(await card2.innerText(), /<header> · Header/);
  await pickButton(page, false).waitFor();

  // Esc leaves pick mode without a pick.
  await pickButton(page).click();
  await pickButton(page, true).waitFor();
  await page.locator("span.price").hover();
  await waitLabel(page, "span · ProductCard · src/components/ProductCard.tsx:11");
  await page.keyboard.press("Escape");
  await pickButton(page, false).waitFor();
  assert.equal(await panel.getByRole("group", { name: /^Target \d$/ }).count(), 2);

  // The app never saw the clicks: its Save handler would show a notice.
  assert.equal(await page.getByText("Saved to your list.").count(), 0);
  // Out of pick mode the app works as before.
  await save.click();
  await page.getByText("Saved to your list.").waitFor();
  assert.deepEqual(page.errors, []);
});

test("(j) a text selection and an area drag each become the right targets", async (t) => {
  const { page } = await openDemoPanel(t);
  const panel = panelOf(page);

  // Text: select a word of the product name; "Target this text" makes a card of the <h2> with the quote.
  const name = page.getByRole("heading", { name: "Cotton T-shirt" });
  const box = await name.boundingBox();
  await page.mouse.dblclick(box.x + 12, box.y + box.height / 2);
  assert.equal(await page.evaluate(() => getSelection().toString().trim()), "Cotton");
  await panel.getByRole("button", { name: "Target this text" }).click();
  const card1 = panel.getByRole("group", { name: "Target 1" });
  await card1.waitFor();
  assert.match(await card1.innerText(), /<h2> · ProductCard/);
  await card1.getByText("src/components/ProductCard.tsx:10").waitFor();
  assert.equal((await card1.locator(".sp-quote").innerText()).replace(/^Selected text:\s*/, "").trim(), "Cotton");

  // Area over the product card: one target, the card's <section> (outermost located), not its children.
  await panel.getByRole("button", { name: "Select an area" }).click();
  await panel.getByRole("button", { name: "Select an area", pressed: true }).waitFor();
  await drag(page, ...(await around(page.locator("section.card"))));
  const card2 = panel.getByRole("group", { name: "Target 2" });
  await card2.waitFor();
  assert.match(await card2.innerText(), /<section> · ProductCard/);
  await card2.getByText("src/components/ProductCard.tsx:9").waitFor();
  assert.equal(await panel.getByRole("group", { name: /^Target \d$/ }).count(), 2);

  // Area over two list items: two targets in document order.
  await panel.getByRole("button", { name: "Select an area" }).click();
  const items = page.locator("ul.items li");
  const [first] = await around(items.nth(0), 3);
  const [, last] = await around(items.nth(1), 3);
  await drag(page, first, last);
  await panel.getByRole("group", { name: "Target 4" }).waitFor();
  assert.match(await panel.getByRole("group", { name: "Target 3" }).innerText(), /Canvas tote bag/);
  assert.match(await panel.getByRole("group", { name: "Target 4" }).innerText(), /Enamel mug/);

  // Area over empty page space (nothing located inside): one region target. The space is below the list and
  // must not be under the panel (which may dock at the bottom, off the picked elements, while picking).
  await panel.getByRole("button", { name: "Select an area" }).click();
  const listBottom = (await page.locator("ul.items").boundingBox()).y + (await page.locator("ul.items").boundingBox()).height;
  const empty = [[40, Math.ceil(listBottom) + 16], [240, Math.ceil(listBottom) + 136]];
  const pb = await panel.boundingBox();
  const covered = !(empty[1][0] <= pb.x || empty[0][0] >= pb.x + pb.width || empty[1][1] <= pb.y || empty[0][1] >= pb.y + pb.height);
  assert.ok(!covered, `the empty area ${JSON.stringify(empty)} is under the panel ${JSON.stringify(pb)}`);
  await drag(page, ...empty);
  const card5 = panel.getByRole("group", { name: "Target 5" });
  await card5.waitFor();
  assert.match(await card5.innerText(), /Area 200 × 120 px/);
  await shot(page, "picker-demo-area");
  // Badges 1-5 are pinned on the page.
  const badges = await page.evaluate(() =>
    [...document.querySelector("spotpatch-overlay").shadowRoot.querySelectorAll("[data-spotpatch-badge]")].map((b) => b.textContent).sort(),
  );
  assert.deepEqual(badges, ["1", "2", "3", "4", "5"]);
  assert.equal(await page.getByText("Saved to your list.").count(), 0);
  assert.deepEqual(page.errors, []);
});
