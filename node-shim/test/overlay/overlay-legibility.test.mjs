// Issue 26's small findings, one browser test each (real `vite dev`, real engine, Debian chromium): what a
// new user met, measured in the page — contrast by the WCAG formula on computed colours, wrapping by client
// rects, reordering by the glyphs' boxes — never by reading our own source.
import assert from "node:assert/strict";
import { appendFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { HOST, axeScan, seriousViolations } from "../support/browser-support.mjs";
import {
  PRICE_INSTRUCTION,
  SAVE_INSTRUCTION,
  inBodyView,
  openDemo,
  openPanel,
  panelOf,
  pickSaveAndPrice,
  snap,
  submitDemoJob,
} from "../support/overlay-flow-helpers.mjs";

/** The demo app with its job ready for review (Apply shown). */
async function review(t, opts) {
  const app = await openDemo(t, opts);
  await submitDemoJob(app.page);
  await panelOf(app.page).getByRole("button", { name: "Apply" }).waitFor({ timeout: 30_000 });
  return app;
}

/**
 * In the page: the WCAG 2 contrast ratio of each element's text against what is painted under it (its own
 * background composed over its ancestors', through the shadow root, up to the first opaque one).
 * Returns `{ selector, count, min, worst }`.
 */
function measureContrast([host, selector]) {
  const root = document.querySelector(host).shadowRoot;
  const parse = (css) => {
    const m = /rgba?\(([^)]*)\)/.exec(css);
    if (!m) throw new Error(`unparsed colour ${css}`);
    const [r, g, b, a = 1] = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
    return [r, g, b, a];
  };
  const over = ([r, g, b, a], [R, G, B]) => [r * a + R * (1 - a), g * a + G * (1 - a), b * a + B * (1 - a), 1];
  const lum = ([r, g, b]) => {
    const c = [r, g, b].map((v) => {
      const s = v / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  };
  const ratio = (el) => {
    const layers = [];
    for (let n = el; n; n = n.parentElement ?? n.getRootNode().host) {
      const bg = parse(getComputedStyle(n).backgroundColor);
      layers.push(bg);
      if (bg[3] === 1) break;
    }
    let base = [255, 255, 255, 1];
    for (const layer of layers.reverse()) base = over(layer, base);
    const fg = over(parse(getComputedStyle(el).color), base);
    const [hi, lo] = [lum(fg), lum(base)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const els = [...root.querySelectorAll(selector)].filter((el) => el.textContent.trim());
  const ratios = els.map((el) => ({ ratio: ratio(el), text: el.textContent.trim().slice(0, 30) }));
  ratios.sort((a, b) => a.ratio - b.ratio);
  return { selector, count: els.length, min: ratios[0]?.ratio ?? 0, worst: ratios[0]?.text };
}

test("finding 1: the diff's CHANGED tag, hunk header and line numbers have contrast ≥ 4.5:1 in light and dark", async (t) => {
  const { page } = await review(t);
  for (const scheme of ["light", "dark"]) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const selector of [".sp-diff .d2h-tag", ".sp-diff td.d2h-info", ".sp-diff .d2h-code-linenumber"]) {
      const m = await page.evaluate(measureContrast, [HOST, selector]);
      assert.ok(m.count > 0, `${scheme}: no ${selector} in the diff`);
      assert.ok(m.min >= 4.5, `${scheme}: ${selector} ${m.min.toFixed(2)}:1 on "${m.worst}" (want ≥ 4.5:1)`);
    }
    await snap(page, `findings-1-diff-${scheme}`);
  }
  assert.deepEqual(page.errors, []);
});

test("finding 2: zh-CN has no English left in the review (CHANGED, the seconds) and 成功 never wraps in a timeline row", async (t) => {
  const { page } = await review(t);
  const panel = panelOf(page);
  await panel.getByRole("combobox").first().selectOption("zh-CN");
  await panel.getByRole("button", { name: "应用" }).waitFor();
  const tag = panel.locator(".sp-diff .d2h-tag").first();
  assert.doesNotMatch(await tag.innerText(), /[A-Z]{3}/, "the diff's file tag is in Chinese");
  assert.match(await panel.getByText(/^已用时间：/).innerText(), /^已用时间：(\d+ 秒|\d+:\d\d)$/);
  await panel.locator("summary", { hasText: "进度" }).click();
  const outcomes = panel.locator(".sp-timeline .sp-add, .sp-timeline .sp-del");
  assert.ok((await outcomes.count()) > 0, "the timeline has tool outcomes");
  assert.ok((await outcomes.allInnerTexts()).includes("成功"));
  // Every panel width a phone or a narrow window gives (the panel is min(440px, 100vw − 24px)).
  for (let width = 340; width <= 470; width += 2) {
    await page.setViewportSize({ width, height: 844 });
    const broken = await outcomes.evaluateAll((els) =>
      els.filter((el) => el.getClientRects().length > 1).map((el) => el.textContent),
    );
    assert.deepEqual(broken, [], `viewport ${width} px: an outcome wraps across lines`);
  }
  await snap(page, "findings-2-zh-timeline");
  assert.deepEqual(page.errors, []);
});

/** In the page: for each element of `selector`, whether `after` (a text inside it) is drawn right of `before`. */
function drawnInOrder([host, selector, before, after]) {
  const root = document.querySelector(host).shadowRoot;
  const xOf = (el, text) => {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const at = node.data.indexOf(text);
      if (at < 0) continue;
      const range = document.createRange();
      range.setStart(node, at);
      range.setEnd(node, at + text.length);
      return range.getBoundingClientRect().left;
    }
    return null;
  };
  return [...root.querySelectorAll(selector)].map((el) => {
    const [a, b] = [xOf(el, before), xOf(el, after)];
    return { text: el.textContent, found: a !== null && b !== null, inOrder: a !== null && b !== null && a < b };
  });
}

test("finding 3: text and paths with an RTL override stay isolated: the rest of their line keeps its order", async (t) => {
  const { page } = await openDemo(t);
  // Page-derived strings with U+202E (RIGHT-TO-LEFT OVERRIDE) and no closing PDF: the element's text and an
  // attribute value.
  await page.evaluate(() => {
    const b = document.createElement("button");
    b.title = "\u202Eexe.gnp";
    b.className = "rtl-probe";
    b.textContent = "\u202Eevil.txt";
    document.querySelector("main").prepend(b);
  });
  await openPanel(page);
  await page.getByRole("button", { name: "Pick elements" }).click();
  await page.locator("button.rtl-probe").click();
  await page.getByRole("textbox", { name: "Instruction for target 1" }).waitFor();
  const card = panelOf(page).locator(".sp-card").first();
  // The quoted text: the closing quote stays right of the text (the override reverses only the text).
  const quoted = await page.evaluate(drawnInOrder, [HOST, ".sp-card p.sp-muted", "evil", "”"]);
  assert.ok(quoted.some((q) => q.found), `the card shows the quoted text: ${JSON.stringify(quoted)}`);
  assert.ok(quoted.filter((q) => q.found).every((q) => q.inOrder), `the quote is reordered: ${JSON.stringify(quoted)}`);
  // The attributes line: `title="‮…"` then `class="rtl-probe"`, which keeps its own order.
  const attrs = await page.evaluate(drawnInOrder, [HOST, ".sp-card p.sp-code", "class", "rtl-probe"]);
  const found = attrs.filter((a) => a.found);
  assert.ok(found.length > 0, `the card shows both attributes: ${JSON.stringify(attrs)}`);
  assert.ok(found.every((a) => a.inOrder), `the attributes line is reordered: ${JSON.stringify(attrs)}`);
  // Every page- or repo-derived string of the card is isolated (paths included).
  const isolated = await card.evaluate((el) =>
    [...el.querySelectorAll("[data-sp-iso]")].map((n) => getComputedStyle(n).unicodeBidi),
  );
  assert.ok(isolated.length >= 2, `isolated strings on the card: ${isolated.length}`);
  assert.ok(isolated.every((u) => u === "isolate"), `unicode-bidi: ${isolated}`);
  await snap(page, "findings-3-rtl-override");
  assert.deepEqual(page.errors, []);
});

test("finding 4: `direction: rtl` on the page's html does not mirror the panel", async (t) => {
  const { page } = await openDemo(t);
  await page.evaluate(() => {
    document.documentElement.setAttribute("dir", "rtl");
    document.documentElement.style.direction = "rtl";
  });
  await openPanel(page);
  const panel = panelOf(page);
  assert.equal(await panel.evaluate((el) => getComputedStyle(el).direction), "ltr");
  assert.equal(await panel.getAttribute("dir"), "ltr");
  const title = await panel.getByRole("heading", { name: "SpotPatch" }).boundingBox();
  const close = await panel.getByRole("button", { name: "Close panel" }).boundingBox();
  assert.ok(title.x < close.x, `the title (${title.x}) is left of Close (${close.x})`);
  const submit = await panel.getByRole("button", { name: "Submit" }).boundingBox();
  const copy = await panel.getByRole("button", { name: "Copy prompt" }).boundingBox();
  assert.ok(submit.x < copy.x, `Submit (${submit.x}) is left of Copy prompt (${copy.x})`);
  const hint = panel.getByText(/^Shortcut /);
  assert.equal(await hint.evaluate((el) => getComputedStyle(el).direction), "ltr");
  const serious = seriousViolations(await axeScan(page));
  assert.deepEqual(serious, [], `axe: ${JSON.stringify(serious, null, 1)}`);
  await snap(page, "findings-4-page-rtl");
  assert.deepEqual(page.errors, []);
});

test("finding 5: with no checks configured, the review says so plainly and how to add one", async (t) => {
  const { page } = await review(t, { options: { checks: [] } });
  const panel = panelOf(page);
  const note = panel.locator("[data-sp-no-checks]");
  await note.waitFor();
  assert.match(await note.innerText(), /^No checks are configured for this project/);
  assert.equal(await note.locator("code").innerText(), "spotpatch-agent checks suggest");
  assert.equal(await panel.getByText("No check result was reported.").count(), 0);
  await panel.getByRole("combobox").first().selectOption("zh-CN");
  assert.match(await note.innerText(), /^此项目没有配置检查/);
  await snap(page, "findings-5-no-checks");
  assert.deepEqual(page.errors, []);
});

test("finding 7: with local changes needing consent, Submit is disabled with its reason shown and announced until consent", async (t) => {
  const { page, project } = await openDemo(t);
  appendFileSync(path.join(project.root, "src/styles.css"), "\n/* a local edit */\n");
  await openPanel(page);
  const panel = panelOf(page);
  await panel.getByText(/^Your working tree has local changes/).waitFor();
  await pickSaveAndPrice(page);
  await panel.getByRole("textbox", { name: "Instruction for target 1" }).fill(SAVE_INSTRUCTION);
  await panel.getByRole("textbox", { name: "Instruction for target 2" }).fill(PRICE_INSTRUCTION);
  const submit = panel.getByRole("button", { name: "Submit" });
  assert.equal(await submit.isDisabled(), true, "Submit waits for the consent");
  const why = panel.locator("#sp-submit-why");
  assert.match(await why.innerText(), /^Submit waits for your choice: tick “Include my local changes”/);
  assert.equal(await why.getAttribute("role"), "status", "the reason is announced");
  assert.equal(await submit.getAttribute("aria-describedby"), "sp-submit-why");
  await snap(page, "findings-7-consent-needed");
  await panel.getByRole("combobox").first().selectOption("zh-CN");
  assert.match(await why.innerText(), /^提交需要你先做出选择/);
  await panel.getByRole("combobox").first().selectOption("en");
  await panel.getByRole("checkbox", { name: /Include my local changes/ }).check();
  assert.equal(await submit.isDisabled(), false, "consent given: Submit is enabled");
  assert.equal(await why.innerText(), "");
  assert.equal(await submit.getAttribute("aria-describedby"), null);
  assert.deepEqual(page.errors, []);
});

test("finding 8: Submit with an empty instruction in a scrolled panel: the empty box takes the focus, is aria-invalid and says why in view", async (t) => {
  const { page } = await openDemo(t);
  await openPanel(page);
  const panel = panelOf(page);
  await page.getByRole("button", { name: "Pick elements" }).click();
  const items = page.locator("ul.items li");
  for (const el of [page.getByRole("button", { name: "Save", exact: true }), page.locator("span.price"), items.nth(0), items.nth(1)])
    await el.click({ modifiers: ["Shift"] });
  await items.nth(2).click();
  await panel.getByRole("textbox", { name: "Instruction for target 5" }).waitFor();
  for (let n = 2; n <= 5; n += 1)
    await panel.getByRole("textbox", { name: `Instruction for target ${n}` }).fill(`Change target ${n}.`);
  await panel.locator(".sp-body").evaluate((el) => el.scrollTo(0, el.scrollHeight));
  const empty = panel.getByRole("textbox", { name: "Instruction for target 1" });
  assert.equal(await empty.evaluate(inBodyView), false, "the empty box starts out of view");
  await panel.getByRole("button", { name: "Submit" }).click();
  await page.waitForTimeout(300);
  assert.equal(await empty.evaluate((el) => el.getRootNode().activeElement === el), true, "the empty box has the focus");
  assert.equal(await empty.getAttribute("aria-invalid"), "true");
  assert.equal(await empty.evaluate(inBodyView), true, "the empty box is in view");
  const why = panel.locator(".sp-card").getByText("Write an instruction for every target.");
  assert.equal(await why.evaluate(inBodyView), true, "the message is in view, next to the box");
  assert.match(await empty.getAttribute("aria-describedby"), new RegExp(`^${await why.getAttribute("id")} `));
  for (let n = 2; n <= 5; n += 1)
    assert.equal(await panel.getByRole("textbox", { name: `Instruction for target ${n}` }).getAttribute("aria-invalid"), null);
  await snap(page, "findings-8-empty-instruction");
  await empty.fill("Change target 1.");
  assert.equal(await empty.getAttribute("aria-invalid"), null, "typing clears it");
  assert.deepEqual(page.errors, []);
});

test("finding 8: the Copy prompt and Open in editor confirmations appear in view in a scrolled panel", async (t) => {
  const { page } = await openDemo(t);
  await openPanel(page);
  const panel = panelOf(page);
  await page.getByRole("button", { name: "Pick elements" }).click();
  const items = page.locator("ul.items li");
  for (const el of [page.getByRole("button", { name: "Save", exact: true }), page.locator("span.price"), items.nth(0), items.nth(1)])
    await el.click({ modifiers: ["Shift"] });
  await items.nth(2).click();
  await panel.getByRole("textbox", { name: "Instruction for target 5" }).waitFor();
  const body = panel.locator(".sp-body");
  await body.evaluate((el) => el.scrollTo(0, el.scrollHeight));
  await panel.getByRole("button", { name: "Copy prompt" }).click();
  const notice = panel.locator(".sp-body > .sp-note[role]").first();
  await notice.waitFor();
  assert.match(await notice.innerText(), /The prompt for 5 targets is on the clipboard\./);
  assert.equal(await notice.evaluate(inBodyView), true, `the confirmation is in view: ${await notice.innerText()}`);
  await snap(page, "findings-8-copied-in-view");
  await panel.getByRole("button", { name: "Dismiss" }).first().click();
  await body.evaluate((el) => el.scrollTo(0, el.scrollHeight));
  await panel.getByRole("button", { name: "Open in editor" }).last().click();
  await notice.waitFor();
  assert.match(await notice.innerText(), /editor/i);
  assert.equal(await notice.evaluate(inBodyView), true, `the editor confirmation is in view: ${await notice.innerText()}`);
  assert.deepEqual(page.errors, []);
});

test("finding 9: the live timeline uses the panel's height, shows its newest row whole", async (t) => {
  const { page } = await openDemo(t, { script: "stall-demo" });
  await page.setViewportSize({ width: 1280, height: 420 });
  await submitDemoJob(page);
  const panel = panelOf(page);
  await panel.getByRole("status").filter({ hasText: "The model is working" }).waitFor();
  await page.waitForTimeout(500);
  const list = panel.locator("ol.sp-timeline");
  const look = await list.evaluate((ol) => ({
    maxHeight: getComputedStyle(ol).maxHeight,
    ownScroll: ol.scrollHeight > ol.clientHeight + 1,
  }));
  assert.deepEqual(look, { maxHeight: "none", ownScroll: false }, "no fixed box of its own");
  const rows = list.locator("li");
  assert.ok((await rows.count()) > 1);
  assert.equal(await rows.last().evaluate(inBodyView), true, "the newest row is in view, whole");
  await snap(page, "findings-9-timeline-live");
  assert.deepEqual(page.errors, []);
});

test("finding 12: Open in editor says what was asked and how to choose the editor (LAUNCH_EDITOR)", async (t) => {
  const { page } = await openDemo(t);
  await openPanel(page);
  await pickSaveAndPrice(page);
  const panel = panelOf(page);
  await panel.getByRole("button", { name: "Open in editor" }).first().click();
  const notice = panel.locator(".sp-body > .sp-note[role]").first();
  await notice.waitFor();
  const text = await notice.innerText();
  assert.match(text, /Asked the dev server to open src\/components\/ProductCard\.tsx:\d+/);
  assert.match(text, /LAUNCH_EDITOR=code/);
  await panel.getByRole("combobox").first().selectOption("zh-CN");
  await panel.getByRole("button", { name: "在编辑器中打开" }).first().click();
  await panel.getByText(/环境变量 LAUNCH_EDITOR/).waitFor();
  await snap(page, "findings-12-open-in-editor");
  assert.deepEqual(page.errors, []);
});

test("finding 16: Copy prompt shows the engine's prompt/render warnings (a source line past the file's end)", async (t) => {
  const { page, project } = await openDemo(t);
  await openPanel(page);
  await page.getByRole("button", { name: "Pick elements" }).click();
  await page.locator("ul.items li").first().click();
  const panel = panelOf(page);
  await panel.getByRole("textbox", { name: "Instruction for target 1" }).fill("Make it bold.");
  // The list's file shrinks to three lines (Vite hot-updates the page): the target's line is past its end.
  writeFileSync(
    path.join(project.root, "src/components/ItemList.tsx"),
    'export function ItemList({ items }: { items: string[] }) {\n  return <ul className="items">{items.map((item) => <li key={item}>{item}</li>)}</ul>;\n}\n',
  );
  await page.waitForTimeout(800);
  await panel.getByRole("button", { name: "Copy prompt" }).click();
  const notice = panel.locator(".sp-body > .sp-note[role]").first();
  await notice.waitFor();
  const text = await notice.innerText();
  assert.match(text, /The prompt for 1 target is on the clipboard\. Check the prompt: Target 1: .*line 9 is past the end/);
  assert.doesNotMatch(text, /Target 1: Target 1/);
  await snap(page, "findings-16-prompt-warnings");
});
