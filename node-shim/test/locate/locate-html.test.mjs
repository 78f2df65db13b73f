// Issue 15: locations for HTML pages (transformIndexHtml) and for markup written into innerHTML /
// outerHTML / insertAdjacentHTML literals of plain modules. Values are checked against the ORIGINAL text
// with an independent reading (parse5 on the output, engine lines on the input).
import assert from "node:assert/strict";
import { test } from "node:test";

import { parse, parseFragment } from "parse5";

import { spotpatchLocate } from "../../dist/locate/locate.js";
import { makePlugin, splitLoc, textAt, transform } from "../support/locate-helpers.mjs";

/** Every data-spotpatch-loc in an HTML document/fragment, with its element's tag, in document order. */
function htmlLocs(html, fragment = false) {
  const root = fragment ? parseFragment(html) : parse(html);
  const out = [];
  const visit = (n) => {
    if (n.tagName) for (const a of n.attrs) if (a.name === "data-spotpatch-loc") out.push({ tag: n.tagName, value: a.value, ...splitLoc(a.value) });
    for (const c of n.childNodes ?? []) visit(c);
    if (n.content) visit(n.content);
  };
  visit(root);
  return out;
}

function assertAtTags(source, locs) {
  for (const l of locs) {
    const at = textAt(source, l.line, l.col);
    assert.ok(at?.toLowerCase().startsWith(`<${l.tag.toLowerCase()}`), `${l.value} should point at <${l.tag}, found ${JSON.stringify(at?.slice(0, 20))}`);
  }
}

function indexHtml(plugin, html, filename) {
  const hook = plugin.transformIndexHtml;
  assert.equal(hook.order, "pre");
  return hook.handler(html, { filename, path: "/index.html" });
}

test("index.html: every written start tag is stamped at its own line and column (CRLF, BOM, non-BMP, template, svg)", () => {
  const { plugin } = makePlugin("/repo");
  const html =
    "\uFEFF<!doctype html>\r\n<html lang=\"en\">\r\n  <head><meta charset=\"UTF-8\" /><title>é😀</title></head>\r\n" +
    "  <body>\r\n    <div id=\"app\">😀<p>x</P></div>\r\n<template><b>t</b></template>\r\n" +
    "    <svg viewBox=\"0 0 1 1\"><linearGradient id=\"g\"/></svg>\r\n    <script type=\"module\" src=\"/src/main.ts\"></script>\r\n  </body>\r\n</html>\r\n";
  const out = indexHtml(plugin, html, "/repo/web/index.html");
  const locs = htmlLocs(out.slice(1));
  assert.deepEqual(locs.map((l) => `${l.tag}@${l.line}:${l.col}`), [
    "html@2:1", "head@3:3", "meta@3:9", "title@3:33", "body@4:3", "div@5:5", "p@5:20", "template@6:1", "b@6:11",
    "svg@7:5", "linearGradient@7:28", "script@8:5",
  ]);
  assert.ok(locs.every((l) => l.file === "web/index.html"));
  assertAtTags(html, locs);
  assert.ok(out.includes("</P>") && out.includes("😀"), "nothing else changes");
});

test("index.html: implied elements get nothing, an existing location is kept, a file outside the root or in node_modules is untouched", () => {
  const { plugin } = makePlugin("/repo");
  const out = indexHtml(plugin, "<p>one<p data-spotpatch-loc=\"x:1:1\">two", "/repo/a.html");
  assert.deepEqual(htmlLocs(out).map((l) => l.value), ["a.html:1:1", "x:1:1"]);
  const html = "<div></div>";
  assert.equal(indexHtml(plugin, html, "/elsewhere/index.html"), html);
  assert.equal(indexHtml(plugin, html, "/repo/node_modules/pkg/index.html"), html);
});

test("index.html: a path with quotes and ampersands reads back exactly", () => {
  const { plugin } = makePlugin("/repo");
  const out = indexHtml(plugin, "<main></main>", '/repo/a"b&c/index.html');
  assert.deepEqual(htmlLocs(out).map((l) => l.value), ['a"b&c/index.html:1:1']);
});

test("innerHTML template literal in a .ts module (the vanilla template): each tag stamped, expressions untouched", async () => {
  const { plugin } = makePlugin("/repo");
  const src = [
    "import logo from './logo.svg'",
    "const tag = 'em'",
    "document.querySelector<HTMLDivElement>('#app')!.innerHTML = `",
    "<section id=\"center\">",
    "  <img src=\"${logo}\" class=\"x\" alt=\"${'<b>'}\">😀<a href=\"#\">go</a>",
    "  <${tag}>dynamic</${tag}> <span ${'hidden'}>s</span>",
    "</section>`",
    "el.insertAdjacentHTML('beforeend', '<li class=\"it\">x</li>')",
    "other = `<p>not a sink</p>`",
    "",
  ].join("\n");
  const out = transform(plugin, src, "/repo/src/main.ts");
  assert.ok(out, "stamped");
  const run = new Function("document", "el", "logo", "other", out.code.replace(/^import .*$/m, "").replace("<HTMLDivElement>", "").replace(")!.", ")."));
  const app = { innerHTML: "" };
  const el = { added: "", insertAdjacentHTML(_p, h) { this.added += h; } };
  run({ querySelector: () => app }, el, "LOGO", undefined);
  const locs = htmlLocs(app.innerHTML, true);
  assert.deepEqual(locs.map((l) => `${l.tag}@${l.line}:${l.col}`), ["section@4:1", "img@5:3", "a@5:48", "span@6:28"]);
  assert.match(app.innerHTML, /src="LOGO"/);
  assert.match(app.innerHTML, /<em>dynamic<\/em>/, "a tag named by an expression is left alone");
  assertAtTags(src, locs);
  assert.deepEqual(htmlLocs(el.added, true).map((l) => l.value), ["src/main.ts:8:37"]);
  assert.ok(!/<p data-spotpatch-loc/.test(out.code), "a literal that is not written to a markup sink is untouched");
  assert.equal(transform(plugin, "const x = `<p>no sink</p>`\n", "/repo/src/a.ts"), null);
});

test("the transform never touches .d.ts, node_modules or ?raw script ids", () => {
  const { plugin } = makePlugin("/repo");
  const src = "el.innerHTML = '<p>x</p>'\n";
  assert.ok(transform(plugin, src, "/repo/src/a.js"));
  assert.equal(transform(plugin, src, "/repo/src/a.d.ts"), null);
  assert.equal(transform(plugin, src, "/repo/node_modules/x/a.js"), null);
  assert.equal(transform(plugin, src, "/repo/src/a.js?raw"), null);
});

test("spotpatchLocate is dev-only, so transformIndexHtml never runs in a build", () => {
  assert.equal(spotpatchLocate().apply, "serve");
});
