// Issue 13, "Runtime §1" of the overlay: how the plugin serves the overlay. With the default `overlay`
// option the page gets ONE module script, the loader (`dist/overlay-loader.js` started with the client
// and the overlay options); the overlay itself is a separate module fetched on first open; `overlay:
// false` injects only the client (API, no UI); bad `overlay` options fail `spotpatch()` up front. The
// token stays in the client module; the project's path never reaches the page.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { spotpatch } from "../../dist/index.js";
import { projectKey } from "../../dist/server/plugin.js";
import { launchBrowser, newPage } from "../support/browser-support.mjs";
import {
  CLIENT_URL,
  LOADER_URL,
  OVERLAY_URL,
  makeDemoProject,
  pageSession,
  startDevServer,
} from "../support/support.mjs";

const SCRIPT_TAG = /<script\b[^>]*>/g;
/** The page's scripts whose src is SpotPatch's (the app's own scripts carry `data-spotpatch-loc`, issue 15). */
const spotpatchScripts = (html) => [...html.matchAll(SCRIPT_TAG)].map((m) => m[0]).filter((tag) => /\bsrc="[^"]*spotpatch/.test(tag));

/** The options object the loader module passes to `startLoader` (Vite appends an inline source map). */
function loaderOptions(served) {
  const loader = served.replace(/\n\/\/# sourceMappingURL=\S*\s*$/, "\n");
  const json = /load: \(\) => import\("[^"]*virtual:spotpatch\/overlay"\), options: (\{[^\n]*\}) \}\);\s*$/.exec(loader)?.[1];
  assert.ok(json, `no startLoader call at the end of the loader:\n${loader.slice(-400)}`);
  return JSON.parse(json);
}

test("default: one loader script; the loader starts with the client and the options; the overlay is its own module", async (t) => {
  const project = makeDemoProject(t);
  const { url } = await startDevServer(t, project);
  const { html, token, source: client } = await pageSession(url);
  assert.deepEqual(spotpatchScripts(html), [`<script type="module" src="${LOADER_URL}">`]);

  const loader = await (await fetch(`${url}${LOADER_URL}`)).text();
  assert.match(loader, new RegExp(`import \\{ spotpatch as __spotpatchClient \\} from "${CLIENT_URL.replaceAll("$", "\\$")}";`));
  assert.deepEqual(loaderOptions(loader), { shortcut: "Alt+Shift+S", launcher: "bottom-right", projectKey: projectKey(project.root) });
  assert.match(projectKey(project.root), /^[0-9a-f]{12}$/);
  assert.ok(loader.includes(readFileSync(new URL("../../dist/overlay-loader.js", import.meta.url), "utf8").slice(0, 200)));

  const overlayResponse = await fetch(`${url}${OVERLAY_URL}`);
  assert.equal(overlayResponse.status, 200);
  const overlay = await overlayResponse.text();
  assert.match(overlay, /export\s*\{[^}]*\bas mountOverlay\b/);
  assert.ok(client.includes(token));
  for (const [name, text] of [["client", client], ["loader", loader], ["overlay", overlay]]) {
    assert.doesNotMatch(text, /sourceMappingURL/, `Vite appended a source map to the ${name} module (its own text again)`);
  }
  for (const [name, text] of [["html", html], ["loader", loader], ["overlay", overlay]]) {
    assert.ok(!text.includes(token), `the token is in the ${name}`);
    assert.ok(!text.includes(project.root) && !text.includes(project.dir), `the project path is in the ${name}`);
  }
});

test("overlay: false injects only the client; the overlay modules are not served", async (t) => {
  const project = makeDemoProject(t);
  const { url } = await startDevServer(t, project, { options: { overlay: false } });
  const { html } = await pageSession(url);
  assert.deepEqual(spotpatchScripts(html), [`<script type="module" src="${CLIENT_URL}">`]);
  for (const path of [LOADER_URL, OVERLAY_URL]) {
    const res = await fetch(`${url}${path}`); // Vite's fallback answers with the page's HTML
    assert.doesNotMatch(res.headers.get("content-type") ?? "", /javascript/, `${path} is served as a module`);
    assert.doesNotMatch(await res.text(), /startLoader|mountOverlay/);
  }
});

test("overlay: { shortcut, launcher } reaches the loader", async (t) => {
  const project = makeDemoProject(t);
  const { url } = await startDevServer(t, project, { options: { overlay: { shortcut: "Ctrl+Alt+K", launcher: false } } });
  const loader = await (await fetch(`${url}${LOADER_URL}`)).text();
  assert.deepEqual(loaderOptions(loader), { shortcut: "Ctrl+Alt+K", launcher: false, projectKey: projectKey(project.root) });
  const { url: url2 } = await startDevServer(t, project, { options: { overlay: { launcher: "top-left" } } });
  const loader2 = await (await fetch(`${url2}${LOADER_URL}`)).text();
  assert.deepEqual(loaderOptions(loader2), { shortcut: "Alt+Shift+S", launcher: "top-left", projectKey: projectKey(project.root) });
});

test("bad overlay options fail spotpatch() with a message naming the problem", () => {
  const cases = [
    ["yes", /overlay must be true, false or an object/],
    [[], /overlay must be true, false or an object/],
    [null, /overlay must be true, false or an object/],
    [{ position: "left" }, /unknown overlay option\(s\) position/],
    [{ launcher: "middle" }, /overlay\.launcher must be one of bottom-right, bottom-left, top-right, top-left or false/],
    [{ launcher: true }, /overlay\.launcher must be one of/],
    [{ shortcut: "" }, /overlay\.shortcut must look like "Alt\+Shift\+S"/],
    [{ shortcut: 5 }, /overlay\.shortcut must look like/],
    [{ shortcut: "S" }, /a key without a modifier would fire while typing/],
    [{ shortcut: "Alt+Shift" }, /it has no key after the modifiers/],
    [{ shortcut: "Hyper+S" }, /unknown modifier Hyper/],
    [{ shortcut: "Alt++" }, /overlay\.shortcut must look like/],
    [{ shortcut: "Alt+Page Up" }, /unknown key "Page Up"/],
  ];
  for (const [overlay, message] of cases) {
    assert.throws(() => spotpatch({ overlay }), (error) => {
      assert.match(error.message, /^vite-plugin-spotpatch: invalid options: /);
      assert.match(error.message, message, JSON.stringify(overlay));
      return true;
    });
  }
  for (const overlay of [true, false, {}, { shortcut: "Meta+K" }, { shortcut: "F2" }, { shortcut: "ctrl+shift+1", launcher: false }]) {
    assert.doesNotThrow(() => spotpatch({ overlay }), JSON.stringify(overlay));
  }
});

test("in the browser: the host exists, only the loader and client load at first, no token on window or in the DOM", async (t) => {
  const project = makeDemoProject(t);
  const { url } = await startDevServer(t, project, { optimizeDeps: {} });
  const { token } = await pageSession(url);
  const browser = await launchBrowser(t);
  const context = await browser.newContext();
  t.after(() => context.close());
  const page = await newPage(context);
  const requested = [];
  page.on("request", (request) => requested.push(new URL(request.url()).pathname));
  await page.goto(`${url}/`);
  await page.waitForSelector("spotpatch-overlay", { state: "attached" });
  await page.waitForLoadState("networkidle");
  assert.deepEqual(page.errors, []);
  assert.ok(requested.includes(LOADER_URL) && requested.includes(CLIENT_URL), requested.join("\n"));
  assert.ok(!requested.includes(OVERLAY_URL), "the overlay module is fetched only on first open");

  const exposed = await page.evaluate((token) => {
    const found = [];
    for (const key of Object.getOwnPropertyNames(window)) {
      let value;
      try {
        value = window[key];
      } catch {
        continue;
      }
      if (typeof value === "string" && value.includes(token)) found.push(key);
    }
    const host = document.querySelector("spotpatch-overlay");
    const dom = document.documentElement.outerHTML + (host?.shadowRoot?.innerHTML ?? "");
    return { found, inDom: dom.includes(token), open: host?.shadowRoot?.mode };
  }, token);
  assert.deepEqual(exposed, { found: [], inDom: false, open: "open" });
});

test("exportedLocal reads the local name of an export, minified or not", async () => {
  const { exportedLocal } = await import("../../dist/server/plugin.js");
  assert.equal(exportedLocal("function o(){}\nexport { o as startLoader };", "startLoader"), "o");
  assert.equal(exportedLocal("function a(){}function b(){}export{a as other,b as startLoader};", "startLoader"), "b");
  assert.equal(exportedLocal("function startLoader(){}\nexport { startLoader };", "startLoader"), "startLoader");
  assert.equal(exportedLocal("export function startLoader(args) {}", "startLoader"), "startLoader");
  assert.throws(() => exportedLocal("export { o as startLoaderX };", "startLoader"), /does not export startLoader \(rebuild the package\)/);
});
