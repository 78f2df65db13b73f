// The overlay stays usable on pages that fight it (breaker findings F1, F2, F4, F7, F9): a containing
// block on <html> (transform, filter, contain, will-change), a page's modal <dialog> or popover, a page
// key hotkey, an input method's Esc, and a script that removes unknown children of <html>. Through the
// real overlay only: launcher, panel, picking, typing, Submit.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { HOST } from "../support/browser-support.mjs";
import { openDemo, openPanel, panelOf, snap } from "../support/overlay-flow-helpers.mjs";

const VIEW = { width: 1280, height: 800 };
const inside = (box) =>
  !!box && box.x >= 0 && box.y >= 0 && box.x + box.width <= VIEW.width && box.y + box.height <= VIEW.height;

for (const rule of ["transform: translateZ(0)", "filter: saturate(1.01)", "contain: paint", "will-change: transform"]) {
  test(`(F1) html { ${rule} } on a scrolled page: launcher and panel stay in the viewport, the pick box is on the element`, async (t) => {
    const { page } = await openDemo(t, {
      edit(root) {
        writeFileSync(
          path.join(root, "src/styles.css"),
          `\nhtml { ${rule}; } body { min-height: 3000px; }\n`,
          { flag: "a" },
        );
      },
    });
    await page.evaluate(() => {
      const p = document.createElement("p");
      p.id = "far";
      p.textContent = "far down";
      p.style.cssText = "position:absolute;top:1500px;left:100px;width:200px;height:40px;margin:0;background:#eee";
      document.body.append(p);
      scrollTo(0, 1200);
    });
    await page.waitForFunction(() => scrollY === 1200);
    const launcher = page.getByRole("button", { name: "SpotPatch", exact: true });
    assert.ok(inside(await launcher.boundingBox()), `launcher off-screen: ${JSON.stringify(await launcher.boundingBox())}`);
    await openPanel(page);
    assert.ok(inside(await panelOf(page).boundingBox()), "panel off-screen");
    await page.getByRole("button", { name: "Pick elements" }).click();
    const far = await page.locator("#far").boundingBox();
    await page.mouse.move(far.x + 50, far.y + 20);
    const canvas = page.locator(`${HOST} canvas[data-spotpatch-picker=highlight]`);
    await page.waitForFunction(
      (h) => document.querySelector(h).shadowRoot.querySelector("canvas[data-label]")?.dataset.label?.startsWith("p"),
      HOST,
    );
    // The canvas is drawn in viewport coordinates: it must sit at the viewport's origin.
    const cbox = await canvas.boundingBox();
    assert.deepEqual([Math.round(cbox.x), Math.round(cbox.y)], [0, 0]);
    const drawn = (await canvas.getAttribute("data-box")).split(",").map(Number);
    assert.deepEqual(drawn.map(Math.round), [far.x, far.y, far.width, far.height].map(Math.round));
    await page.mouse.click(far.x + 50, far.y + 20);
    await page.getByRole("textbox", { name: "Instruction for target 1" }).fill("Bold.");
    assert.equal(await page.getByRole("textbox", { name: "Instruction for target 1" }).inputValue(), "Bold.");
    await snap(page, `F1-${rule.split(":")[0]}`);
    assert.deepEqual(page.errors, []);
  });
}

test("(F2) a page's modal dialog: launcher opens the panel over it, pick inside it, type, Submit; closing the dialog keeps the panel", async (t) => {
  const { page } = await openDemo(t);
  await page.evaluate(() => {
    const d = document.createElement("dialog");
    d.id = "modal";
    d.innerHTML = "<p>Modal</p><button id=mb>Inside modal</button>";
    d.style.cssText = "width:90vw;height:90vh;max-width:none;max-height:none";
    document.body.append(d);
    d.showModal();
  });
  await page.getByRole("button", { name: "SpotPatch", exact: true }).click({ timeout: 5000 });
  await panelOf(page).waitFor();
  await page.getByRole("button", { name: "Pick elements" }).click({ timeout: 5000 });
  await page.locator("#mb").click();
  const box = page.getByRole("textbox", { name: "Instruction for target 1" });
  await box.fill("Say hello.");
  assert.equal(await box.inputValue(), "Say hello.");
  await snap(page, "F2-modal");
  await panelOf(page).getByRole("button", { name: "Submit" }).click({ timeout: 5000 });
  // The job reaches its review (a job still running at teardown would race the temp repo's removal).
  await panelOf(page).getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  // The page closes its dialog: the overlay goes back under <html> and stays usable.
  await page.evaluate(() => document.getElementById("modal").close());
  await page.waitForFunction((h) => document.querySelector(h).parentNode === document.documentElement, HOST);
  await panelOf(page).getByRole("button", { name: "Apply" }).click({ trial: true, timeout: 5000 });
  assert.deepEqual(page.errors, []);
});

test("(F2) a page's popover (and a modal opened while the panel is open) does not cover the panel", async (t) => {
  const { page } = await openDemo(t);
  await openPanel(page);
  await page.evaluate(() => {
    const d = document.createElement("div");
    d.popover = "manual";
    d.style.cssText = "inset:0;width:100vw;height:100vh;background:rgba(255,0,0,.3);margin:0;border:0";
    document.body.append(d);
    d.showPopover();
  });
  await panelOf(page).getByRole("button", { name: "Pick elements" }).click({ timeout: 5000 });
  await page.keyboard.press("Escape"); // leave pick mode
  await page.evaluate(() => {
    const d = document.createElement("dialog");
    d.textContent = "modal";
    d.id = "modal2";
    document.body.append(d);
    d.showModal();
  });
  await panelOf(page).getByRole("button", { name: "Pick elements" }).click({ timeout: 5000 });
  await page.keyboard.press("Escape");
  // The page removes its open dialog (no close): the host, which sat inside it, is back under <html>.
  await page.evaluate(() => document.getElementById("modal2").remove());
  await page.waitForFunction((h) => document.querySelector(h)?.parentNode === document.documentElement, HOST);
  await panelOf(page).getByRole("button", { name: "Pick elements" }).click({ timeout: 5000 });
  assert.deepEqual(page.errors, []);
});

const HOTKEY =
  "<script>addEventListener('keydown',e=>{const t=e.target;if(t.closest&&t.closest('input,textarea,[contenteditable]'))return;" +
  "if(e.key==='/'){e.preventDefault();document.getElementById('q')?.focus();}});" +
  "document.addEventListener('keyup',()=>{window.__keyups=(window.__keyups||0)+1});" +
  "addEventListener('DOMContentLoaded',()=>{const i=document.createElement('input');i.id='q';i.placeholder='search';document.body.prepend(i);});</script>";

test("(F4) a page '/' hotkey does not steal what is typed in the overlay; the shortcut still works", async (t) => {
  const { page } = await openDemo(t, {
    edit(root) {
      const f = path.join(root, "index.html");
      writeFileSync(f, readFileSync(f, "utf8").replace("<head>", `<head>${HOTKEY}`));
    },
  });
  await page.locator("#q").waitFor();
  await openPanel(page);
  await page.getByRole("button", { name: "Pick elements" }).click();
  await page.getByRole("button", { name: "Save", exact: true }).click();
  const box = page.getByRole("textbox", { name: "Instruction for target 1" });
  await box.click();
  const before = await page.evaluate(() => window.__keyups || 0);
  await page.keyboard.type("use a/b ratio");
  assert.equal(await box.inputValue(), "use a/b ratio");
  assert.equal(await page.locator("#q").inputValue(), "");
  assert.equal(await page.evaluate(() => window.__keyups || 0), before); // the page saw none of those keys
  await page.keyboard.press("Alt+Shift+S"); // the shortcut (pick mode) from inside the text box
  await page.getByRole("button", { name: "Pick elements", pressed: true }).waitFor({ timeout: 5000 });
  // Outside the overlay the page's hotkey still works.
  await page.getByRole("button", { name: "Pick elements", pressed: true }).click();
  await page.getByRole("button", { name: "Pick elements", pressed: false }).waitFor();
  await page.mouse.click(600, 790);
  await page.waitForFunction(() => document.activeElement === document.body);
  await page.keyboard.press("/");
  await page.waitForFunction(() => document.activeElement?.id === "q");
});

test("(F7) Esc during an input method's composition does not close the panel", async (t) => {
  const { page } = await openDemo(t);
  await openPanel(page);
  await page.getByRole("button", { name: "Pick elements" }).click();
  await page.getByRole("button", { name: "Save", exact: true }).click();
  const box = page.getByRole("textbox", { name: "Instruction for target 1" });
  await box.focus();
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Input.imeSetComposition", { text: "ni", selectionStart: 2, selectionEnd: 2 });
  // Chromium reports Esc during composition as keyCode 229 / isComposing.
  await box.dispatchEvent("keydown", { key: "Escape", keyCode: 229, isComposing: true, bubbles: true, composed: true });
  await cdp.send("Input.insertText", { text: "你" });
  assert.equal(await panelOf(page).count(), 1);
  assert.equal(await box.inputValue(), "你");
  await page.keyboard.press("Escape"); // a plain Esc still closes, and the draft is kept
  await panelOf(page).waitFor({ state: "detached" });
  await page.getByRole("button", { name: "SpotPatch", exact: true }).click();
  assert.equal(await page.getByRole("textbox", { name: "Instruction for target 1" }).inputValue(), "你");
});

test("(F9) a page that removes the overlay's host gets it back; one warning if it keeps doing so", async (t) => {
  const { page } = await openDemo(t);
  const warnings = [];
  page.on("console", (m) => m.type() === "warning" && m.text().includes("SpotPatch") && warnings.push(m.text()));
  await page.evaluate((h) => document.querySelector(h).remove(), HOST);
  await page.waitForFunction((h) => document.querySelector(h)?.isConnected, HOST);
  await openPanel(page);
  // A page script that always removes unknown children of <html>.
  await page.evaluate((h) => {
    new MutationObserver(() => document.querySelector(h)?.remove()).observe(document.documentElement, {
      childList: true,
    });
    document.querySelector(h).remove();
  }, HOST);
  await page.waitForFunction(() => !document.querySelector("spotpatch-overlay"));
  await page.waitForTimeout(100); // let any re-attach loop run (it must stop)
  assert.equal(warnings.length, 1, warnings.join("\n"));
  assert.deepEqual(page.errors, []);
});
