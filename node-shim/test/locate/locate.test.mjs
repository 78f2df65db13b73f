// Tests for spotpatch:locate (src/locate/locate.ts): data-spotpatch-loc="<file>:<line>:<col>" on intrinsic JSX.
// Every location is checked against the ORIGINAL source: the text at (line, col) must be `<tag`.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { parse } from "@babel/parser";

import { injectLocations, jsxAttributeValue, spotpatchLocate } from "../../dist/locate/locate.js";
import {
  engineLines,
  genPos,
  locOf,
  locValues,
  makePlugin,
  originalPositionFor,
  textAt,
  transform,
} from "../support/locate-helpers.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const pkgDir = path.resolve(here, "../..");
const ROOT = path.resolve(os.tmpdir(), "spotpatch-locate-root"); // lexical only; transform never reads disk
const id = (rel) => path.join(ROOT, rel);

/** Transform `code` as `rel` under ROOT and return the output plus its parsed locations. */
function run(code, rel = "src/App.tsx", opts) {
  const { plugin } = makePlugin(ROOT, opts);
  const out = transform(plugin, code, id(rel));
  return { out, locs: out ? locValues(out.code, { typescript: rel.endsWith(".tsx") }) : [] };
}

/** Each location names `rel` and points at `<tag` in `source`. */
function assertPointsAtTags(source, locs, rel = "src/App.tsx") {
  for (const l of locs) {
    assert.equal(l.file, rel);
    const text = textAt(source, l.line, l.col);
    assert.ok(text?.startsWith(`<${l.tag}`), `${l.value} should point at <${l.tag}, found ${JSON.stringify(text?.slice(0, 20))}`);
  }
}

describe("plugin shape", () => {
  test("name, enforce pre, serve only, object transform hook with an id filter", () => {
    const p = spotpatchLocate();
    assert.equal(p.name, "spotpatch:locate");
    assert.equal(p.enforce, "pre");
    assert.equal(p.apply, "serve");
    assert.equal(typeof p.transform.handler, "function");
    const include = p.transform.filter.id.include;
    assert.ok(include.test("/a/B.tsx") && include.test("/a/b.jsx?t=1") && include.test("/a/b.ts") && !include.test("/a/b.css"));
    assert.ok(p.transform.filter.id.exclude.test("/a/node_modules/x/b.jsx"));
  });
});

describe("locations on transformed output", () => {
  test("several elements on one line get their own columns", () => {
    const src = `export const A = () => <p><b>one</b> <i>two</i><br/></p>;\n`;
    const { locs } = run(src);
    assert.deepEqual(
      locs.map((l) => l.value),
      ["src/App.tsx:1:24", "src/App.tsx:1:27", "src/App.tsx:1:38", "src/App.tsx:1:48"],
    );
    assertPointsAtTags(src, locs);
  });

  test("nested JSX over several lines", () => {
    const src = [
      "export function App() {",
      "  return (",
      "    <main>",
      "      <section>",
      "        <ul>",
      "          {items.map((x) => <li key={x}>{x}</li>)}",
      "        </ul>",
      "      </section>",
      "    </main>",
      "  );",
      "}",
      "",
    ].join("\n");
    const { locs } = run(src);
    assert.deepEqual(
      locs.map((l) => [l.tag, l.line, l.col]),
      [["main", 3, 5], ["section", 4, 7], ["ul", 5, 9], ["li", 6, 29]],
    );
    assertPointsAtTags(src, locs);
  });

  test("fragments get nothing, their children are located", () => {
    const src = [
      'import React, { Fragment } from "react";',
      "export const F = () => (",
      "  <>",
      "    <h1>a</h1>",
      "    <React.Fragment key=\"k\"><h2>b</h2></React.Fragment>",
      "    <Fragment><h3>c</h3></Fragment>",
      "  </>",
      ");",
      "",
    ].join("\n");
    const { out, locs } = run(src);
    assert.deepEqual(locs.map((l) => [l.tag, l.line, l.col]), [["h1", 4, 5], ["h2", 5, 29], ["h3", 6, 15]]);
    assert.match(out.code, /^ {2}<>$/m);
    assert.match(out.code, /<React\.Fragment key="k">/);
    assert.match(out.code, /<Fragment><h3 /);
    assertPointsAtTags(src, locs);
  });

  test("self-closing elements, with and without attributes", () => {
    const src = `const S = () => <div><img src="a.png" /><br/><input\n  type="text"\n/></div>;\n`;
    const { out, locs } = run(src);
    assert.deepEqual(locs.map((l) => [l.tag, l.line, l.col]), [["div", 1, 17], ["img", 1, 22], ["br", 1, 41], ["input", 1, 46]]);
    assert.ok(out.code.includes(`<br data-spotpatch-loc="src/App.tsx:1:41"/>`));
    assertPointsAtTags(src, locs);
  });

  test("attributes spanning lines: location is the line of '<', attribute goes right after the tag name", () => {
    const src = [
      "const M = () => (",
      "  <button",
      '    className="primary"',
      "    onClick={() => {",
      "      go();",
      "    }}",
      "  >",
      "    Save",
      "  </button>",
      ");",
    ].join("\n");
    const { out, locs } = run(src);
    assert.deepEqual(locs.map((l) => l.value), ["src/App.tsx:2:3"]);
    assert.ok(out.code.includes(`  <button data-spotpatch-loc="src/App.tsx:2:3"\n    className="primary"`));
    assert.equal(out.code.split("\n").length, src.split("\n").length, "no line is added");
  });

  test("components get nothing, custom elements and dashed names do", () => {
    const src = `const C = () => <Card title="t"><card-x/><ui.Button/><Foo-bar/><svg><path d="M0"/></svg></Card>;`;
    const { locs } = run(src);
    assert.deepEqual(locs.map((l) => l.tag), ["card-x", "Foo-bar", "svg", "path"]);
    assertPointsAtTags(src, locs);
  });

  test("an element that already has data-spotpatch-loc is left untouched", () => {
    const src = `const K = () => <div data-spotpatch-loc="keep:1:1"><span/></div>;`;
    const { out, locs } = run(src);
    assert.deepEqual(locs.map((l) => l.value), ["keep:1:1", "src/App.tsx:1:52"]);
    assert.equal((out.code.match(/data-spotpatch-loc/g) ?? []).length, 2);
    // only already-stamped elements: nothing to change
    assert.equal(run(`const K = () => <div data-spotpatch-loc={"x:1:1"} />;`).out, null);
    // running the plugin on its own output changes nothing (idempotent)
    assert.equal(run(out.code).out, null);
  });

  test("non-ASCII text before an element: columns count code points, lines match read_file", () => {
    const src = [
      "\uFEFFconst T = () => <p>é 中文 😀<b>x</b></p>;", // BOM on line 1 is not counted
      "const U = () => <p title=\"a\u2028b\">&amp; 😀😀<i>y</i></p>;", // U+2028 inside a string: same line
      "const V = () => <p>\r", // CRLF line endings
      "  <em>z</em></p>;\r",
      "",
    ].join("\n");
    const { locs } = run(src);
    assert.deepEqual(
      locs.map((l) => [l.tag, l.line, l.col]),
      [["p", 1, 17], ["b", 1, 26], ["p", 2, 17], ["i", 2, 40], ["p", 3, 17], ["em", 4, 3]],
    );
    assert.deepEqual(locOf(src, "<b>"), { line: 1, col: 26 });
    assertPointsAtTags(src, locs);
    assert.equal(engineLines(src).length, 4);
  });

  test("same lines and columns as the engine's read_file (Python display_lines), when the venv exists", (t) => {
    const python = path.resolve(pkgDir, "..", ".venv", "bin", "python");
    if (!existsSync(python)) return t.skip("no engine venv");
    const src = "\uFEFFconst T = () => <p>é 中文 😀<b>x</b></p>;\r\nconst U = () => <p title=\"a\u2028b\">\r\n  𝒳<i>y</i></p>;\n";
    const { locs } = run(src);
    const script = [
      "import json, sys",
      "from spotpatch_agent.tools.context import display_lines",
      "data = sys.stdin.buffer.read()",
      "lines = display_lines(data)",
      "locs = json.loads(sys.argv[1])",
      "print(json.dumps([lines[l['line'] - 1][l['col'] - 1:] for l in locs]))",
    ].join("\n");
    const r = spawnSync(python, ["-c", script, JSON.stringify(locs)], { input: Buffer.from(src, "utf8"), cwd: path.resolve(pkgDir, "..") });
    assert.equal(r.status, 0, r.stderr.toString());
    const texts = JSON.parse(r.stdout.toString());
    assert.equal(texts.length, 4);
    texts.forEach((text, i) => assert.ok(text.startsWith(`<${locs[i].tag}`), `${locs[i].value} -> ${text}`));
  });

  test("paths with spaces, non-ASCII characters and quotes stay valid JSX and read back exactly", () => {
    const src = `export const X = () => <b>x</b>;\n`;
    for (const rel of ["src/my comp/Ünïcödé 组件.tsx", `src/it's "quoted" & {braced}.jsx`, "src/back\\slash.tsx"]) {
      const { out, locs } = run(src, rel);
      assert.ok(out, rel);
      assert.doesNotThrow(() => parse(out.code, { sourceType: "module", plugins: ["jsx", "typescript"] }));
      assert.deepEqual(locs.map((l) => l.value), [`${rel.replace(/\\/g, "\\")}:1:24`]);
    }
    assert.equal(jsxAttributeValue("src/a b/ü.tsx:1:2"), `"src/a b/ü.tsx:1:2"`);
    assert.equal(jsxAttributeValue(`a"&.tsx:1:2`), `{"a\\"&.tsx:1:2"}`);
    assert.equal(jsxAttributeValue("a\u2028b"), `{"a\\u2028b"}`);
  });

  test("HMR-style edit that shifts lines: transforming the edited source gives the new lines", () => {
    const v1 = `export const A = () => (\n  <div>\n    <span>x</span>\n  </div>\n);\n`;
    const v2 = `import { x } from "./x";\n\n// new comment\n${v1.replace("<span>x</span>", "<span>x</span>\n    <em>new</em>")}`;
    const { plugin } = makePlugin(ROOT);
    const a = locValues(transform(plugin, v1, id("src/App.tsx")).code);
    const b = locValues(transform(plugin, v2, id("src/App.tsx")).code);
    assert.deepEqual(a.map((l) => [l.tag, l.line]), [["div", 2], ["span", 3]]);
    assert.deepEqual(b.map((l) => [l.tag, l.line]), [["div", 5], ["span", 6], ["em", 7]]);
    assertPointsAtTags(v2, b);
  });

  test("a typed .tsx with generics and satisfies parses; TypeScript in .jsx is a parse error -> null", () => {
    const tsx = `const id = <T,>(x: T): T => x;\nexport const G = <P extends object>(p: P) => <div {...(p as any)}>{id<string>("a")}</div>;\nconst o = {} satisfies object;\n`;
    assert.deepEqual(run(tsx).locs.map((l) => [l.line, l.col]), [[2, 46]]);
    assert.equal(run(`const a = (x: number) => <div/>;`, "src/a.jsx").out, null);
    assert.equal(run(`const a = () => <div>;`).out, null, "syntax error is left to the real compiler");
  });
});

describe("source map", () => {
  test("generated positions of located elements map back to the original line and column", async () => {
    const src = `export const A = () => (\n  <ul className="l">\n    <li>😀 é</li><li id="b">b</li>\n  </ul>\n);\n`;
    const { out } = run(src);
    assert.equal(out.map.sources[0], id("src/App.tsx"));
    assert.equal(out.map.sourcesContent[0], src);
    // The `<` of the second <li> follows an emoji: the attribute counts code points (1-based 17), the map
    // counts UTF-16 units (0-based 17, i.e. 1-based 18).
    const second = out.code.indexOf("<li", out.code.indexOf("<li") + 1);
    const pos = await originalPositionFor(out.map, ...Object.values(genPos(out.code, second)));
    assert.deepEqual([pos.line, pos.column], [2, 17]);
    assert.equal(locValues(out.code)[2].value, "src/App.tsx:3:17");
    // a token after an inserted attribute (className, `id`) maps to its original column
    for (const token of ['className="l"', 'id="b"']) {
      const g = genPos(out.code, out.code.indexOf(token));
      const o = genPos(src, src.indexOf(token));
      const p = await originalPositionFor(out.map, g.line, g.column);
      assert.deepEqual([p.line, p.column], [o.line - 1, o.column], token);
    }
  });
});

describe("what is left alone", () => {
  test("node_modules, .ts/.js files, virtual modules, foreign queries, files outside the root", () => {
    const jsx = `export const A = () => <div/>;`;
    const { plugin } = makePlugin(ROOT);
    const t = (code, i) => transform(plugin, code, i);
    assert.equal(t(jsx, id("node_modules/pkg/A.jsx")), null);
    assert.equal(t(jsx, id("packages/ui/node_modules/pkg/A.tsx")), null);
    assert.equal(t(`export const a: number = 1 < 2 ? 1 : 2;`, id("src/a.ts")), null);
    assert.equal(t(jsx, id("src/a.js")), null);
    assert.equal(t(jsx, "\0virtual:A.tsx"), null);
    assert.equal(t(jsx, id("src/A.tsx?raw")), null);
    assert.equal(t(jsx, id("src/A.tsx?worker_file&type=module")), null);
    assert.equal(t(jsx, path.resolve(ROOT, "..", "elsewhere", "A.tsx")), null);
    assert.equal(t(jsx, "src/relative/A.tsx"), null);
    // a cache-busting query is fine
    assert.deepEqual(locValues(t(jsx, id("src/A.tsx?t=123")).code).map((l) => l.value), ["src/A.tsx:1:24"]);
    // components get their usage site in data-spotpatch-use (never data-spotpatch-loc); fragments nothing
    const used = t(`export const B = () => <><Card><Other/></Card><React.Fragment/><Fragment/></>;`, id("src/B.tsx")).code;
    assert.equal(used, `export const B = () => <><Card data-spotpatch-use="src/B.tsx:1:26"><Other data-spotpatch-use="src/B.tsx:1:32"/></Card><React.Fragment/><Fragment/></>;`);
    // an existing usage prop is kept; with usage stamping off (Solid) a component-only file is unchanged
    assert.equal(t(`export const C = () => <Card data-spotpatch-use="x:1:1"/>;`, id("src/C.tsx")), null);
    assert.equal(injectLocations(`export const B = () => <Card><Other/></Card>;`, "src/B.tsx", { typescript: true, usage: false }), null);
  });

  test("under Solid (a plugin named 'solid'), component usages get no data-spotpatch-use; elements keep their location", () => {
    const { plugin } = makePlugin(ROOT, {}, { plugins: [spotpatchLocate(), { name: "solid", transform() {} }] });
    const out = transform(plugin, `export const B = () => <Card><p/></Card>;`, id("src/B.tsx")).code;
    assert.equal(out, `export const B = () => <Card><p data-spotpatch-loc="src/B.tsx:1:30"/></Card>;`);
  });

  test("options.root overrides config.root; a relative one is resolved against config.root", () => {
    const jsx = `export const A = () => <div/>;`;
    const app = path.join(ROOT, "packages", "web");
    const { plugin } = makePlugin(app, { root: "../.." });
    assert.deepEqual(locValues(transform(plugin, jsx, path.join(app, "src/A.tsx")).code).map((l) => l.file), ["packages/web/src/A.tsx"]);
    const { plugin: p2 } = makePlugin(app);
    assert.deepEqual(locValues(transform(p2, jsx, path.join(app, "src/A.tsx")).code).map((l) => l.file), ["src/A.tsx"]);
  });

  test("a symlinked root still gives root-relative paths for real-path ids (no doubled paths)", async (t) => {
    const real = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "sp-loc-real-")));
    const link = `${real}-link`;
    t.after(() => Promise.all([fs.rm(real, { recursive: true, force: true }), fs.rm(link, { force: true })]));
    await fs.symlink(real, link);
    const { plugin } = makePlugin(link);
    const out = transform(plugin, `export const A = () => <div/>;`, path.join(real, "src", "A.tsx"));
    assert.deepEqual(locValues(out.code).map((l) => l.file), ["src/A.tsx"]);
  });

  test("warns when a JSX compiler runs before it, and when a .tsx arrives already compiled", () => {
    const compiler = { name: "vite:react-compiler", enforce: "pre", transform() {} };
    const self = spotpatchLocate();
    const warnings = [];
    const logger = { warnOnce: (m) => warnings.push(m) };
    self.configResolved({ root: ROOT, logger, plugins: [compiler, self] });
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /vite:react-compiler transforms JSX before spotpatch:locate/);
    const compiled = `import { jsxDEV as _jsxDEV } from "react/jsx-dev-runtime";\nexport const A = () => _jsxDEV("div", {});\n`;
    assert.equal(transform(self, compiled, id("src/A.tsx")), null);
    assert.match(warnings[1], /src\/A\.tsx reached spotpatch:locate already compiled/);
    const quiet = makePlugin(ROOT, undefined, { plugins: [{ name: "vite:react-babel", enforce: "pre" }] });
    assert.deepEqual(quiet.warnings, [], "plugin-react 6's vite:react-babel has no transform hook");
  });

  test("injectLocations alone: null when there is no '<' at all", () => {
    assert.equal(injectLocations("export const a = 1;", "src/a.tsx", { typescript: true }), null);
  });
});

describe("through a real Vite dev server with @vitejs/plugin-react", () => {
  let root;
  const files = {
    "src/App.tsx": [
      'import { Card } from "./Card";',
      "export function App() {",
      "  return (",
      '    <main className="app"><h1>Hi</h1>',
      "      <Card><p>inside</p></Card>",
      "    </main>",
      "  );",
      "}",
      "",
    ].join("\n"),
    "src/Card.tsx": "export function Card(p: { children?: unknown }) {\n  return <section>{p.children as any}</section>;\n}\n",
    "src/my comp/Ünï 组件.tsx": "export const X = () => <b>é 😀</b>;\n",
  };

  before(async () => {
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "sp-loc-vite-")));
    for (const [rel, text] of Object.entries(files)) {
      await fs.mkdir(path.dirname(path.join(root, rel)), { recursive: true });
      await fs.writeFile(path.join(root, rel), text);
    }
    // react/jsx-dev-runtime must resolve from the temp root
    await fs.symlink(path.join(pkgDir, "node_modules"), path.join(root, "node_modules"), "dir");
  });
  after(() => fs.rm(root, { recursive: true, force: true }));

  async function withServer(plugins, fn) {
    const { createServer } = await import("vite");
    const server = await createServer({
      configFile: false,
      root,
      cacheDir: path.join(root, ".vite-cache"),
      optimizeDeps: { noDiscovery: true },
      plugins,
      server: { port: 0, host: "127.0.0.1" },
      logLevel: "silent",
    });
    await server.listen();
    try {
      return await fn(server, server.resolvedUrls.local[0]);
    } finally {
      await server.close();
    }
  }

  async function get(base, rel) {
    const res = await fetch(new URL(rel.split("/").map(encodeURIComponent).join("/"), base));
    const text = await res.text();
    assert.equal(res.status, 200, text.slice(0, 500));
    return text;
  }

  const locsIn = (served) => [...served.matchAll(/"data-spotpatch-loc": ("(?:[^"\\]|\\.)*")/g)].map((m) => JSON.parse(m[1]));

  for (const order of ["locate first", "react first"]) {
    test(`served module has locations from the original source (${order})`, async () => {
      const { default: react } = await import("@vitejs/plugin-react");
      const plugins = order === "locate first" ? [spotpatchLocate(), react()] : [react(), spotpatchLocate()];
      await withServer(plugins, async (server, base) => {
        const served = await get(base, "src/App.tsx");
        assert.match(served, /_jsxDEV\("main"/, "plugin-react compiled the JSX after us");
        assert.deepEqual(locsIn(served), ["src/App.tsx:4:5", "src/App.tsx:4:27", "src/App.tsx:5:13"]);
        assert.match(served, /_jsxDEV\(Card, \{\s*"data-spotpatch-use": "src\/App.tsx:5:7",\s*children:/, "the component got its usage site, not a location");
        assert.deepEqual(locsIn(await get(base, "src/my comp/Ünï 组件.tsx")), ["src/my comp/Ünï 组件.tsx:1:24"]);

        // the served inline map still leads back to the original file and its exact text
        const b64 = /\/\/# sourceMappingURL=data:application\/json;base64,([A-Za-z0-9+/=]+)/.exec(served)[1];
        const map = JSON.parse(Buffer.from(b64, "base64").toString("utf8"));
        assert.equal(map.sourcesContent[0], files["src/App.tsx"]);
        const pos = await originalPositionFor(map, ...Object.values(genPos(served, served.indexOf('_jsxDEV("h1"'))));
        assert.equal(pos.line + 1, 4, "the h1 call maps to original line 4");
      });
    });
  }

  test("after an edit on disk that shifts lines, the re-served module has the new lines", async () => {
    const { default: react } = await import("@vitejs/plugin-react");
    await withServer([spotpatchLocate(), react()], async (server, base) => {
      assert.deepEqual(locsIn(await get(base, "src/Card.tsx")), ["src/Card.tsx:2:10"]);
      const file = path.join(root, "src/Card.tsx");
      await fs.writeFile(file, `// one\n// two\n${files["src/Card.tsx"]}`);
      const deadline = Date.now() + 10_000;
      let locs;
      do {
        await new Promise((r) => setTimeout(r, 50));
        locs = locsIn(await get(base, "src/Card.tsx"));
      } while (locs[0] !== "src/Card.tsx:4:10" && Date.now() < deadline);
      assert.deepEqual(locs, ["src/Card.tsx:4:10"]);
    });
  });
});
