// Issue 12, defect 4: the client module (it holds the session token) is never served to another origin
// or site, whatever spelling of its URL is asked for and whatever Vite's `base` is. The test fuzzes the
// spellings Vite decodes to the same module (percent-encoding of every character, `/@id/virtual:…`,
// `\0` spelled `__x00__` or `%00`, Vite's own queries, doubled slashes, `.map`, `?raw`/`?url`/`?inline`),
// sends each with cross-origin `Origin` and `Sec-Fetch-Site: cross-site|same-site` headers, and asserts
// that no response body carries the token, in clear or inside a base64 source map. Same-origin pages
// still get the module.
import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";

import react from "@vitejs/plugin-react";
import { createServer } from "vite";

import { spotpatch } from "../../dist/index.js";
import { candidateUrls, spotpatchModuleOf } from "../../dist/server/module-guard.js";
import { AGENT, CLIENT_URL, makeDemoProject, recordingLogger } from "../support/support.mjs";

/** A GET with a raw request path and exact headers (fetch would normalise the path and forbid `Origin`). */
function rawGet(port, rawPath, headers) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "GET", path: rawPath, headers: { Host: `127.0.0.1:${port}`, ...headers } }, (res) => {
      const chunks = [];
      res.on("data", (chunk) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString("latin1") }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Serves `leak.body` at `/leak` (after SpotPatch's guard): stands for any path that might carry the token. */
function leakPlugin(leak) {
  return {
    name: "test:leak",
    configureServer(server) {
      server.middlewares.use("/leak", (_req, res) => {
        res.setHeader("Access-Control-Allow-Origin", "*");
        res.end(leak.body);
      });
    },
  };
}

async function startServer(t, base, leak = { body: "" }) {
  const project = makeDemoProject(t);
  const server = await createServer({
    configFile: false,
    root: project.root,
    base,
    cacheDir: project.cacheDir,
    customLogger: recordingLogger(),
    clearScreen: false,
    optimizeDeps: { noDiscovery: true, include: [] },
    server: { host: "127.0.0.1", port: 0, strictPort: false },
    plugins: [spotpatch({ command: [AGENT, "serve"] }), react(), leakPlugin(leak)],
  });
  t.after(() => server.close());
  await server.listen();
  return { server, port: server.httpServer.address().port, leak };
}

/** The token's base64 spellings at each of the three byte alignments (standard and URL alphabets). */
function base64Forms(token) {
  const forms = [];
  for (let skip = 0; skip < 3; skip += 1) {
    const bytes = Buffer.from(token.slice(skip));
    const whole = bytes.subarray(0, bytes.length - (bytes.length % 3));
    forms.push(whole.toString("base64"), whole.toString("base64url"));
  }
  return forms;
}

/** The token in clear, or inside any base64 payload (Vite appends an inline source map holding the source). */
function carriesToken(body, token) {
  if (body.includes(token)) return true;
  if (base64Forms(token).some((form) => body.includes(form))) return true;
  for (const [, b64] of body.matchAll(/base64,([A-Za-z0-9+/=_-]+)/g)) {
    if (Buffer.from(b64, "base64").toString("latin1").includes(token)) return true;
  }
  return false;
}

const pct = (ch) => `%${ch.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`;

/** Spellings of the client module's path (without `base`) that Vite may map to `\0virtual:spotpatch/client`. */
function spellings() {
  const canonical = CLIENT_URL; // /@id/__x00__virtual:spotpatch/client
  const out = new Set([
    canonical,
    "/@id/virtual:spotpatch/client",
    "/@id/%00virtual:spotpatch/client",
    "/@id/__x00__virtual%3Aspotpatch%2Fclient",
    `/${"@id/__x00__virtual:spotpatch/client"}`.replace("/", "//"),
    "/@id//__x00__virtual:spotpatch/client",
    "//@id/virtual:spotpatch/client",
    "/@id/__x00__virtual:spotpatch//client",
    "/@id/__x00__virtual:spotpatch/client.map",
    "/@id/__x00__virtual:spotpatch/client.js",
    "/@fs/__x00__virtual:spotpatch/client",
    "/__x00__virtual:spotpatch/client",
    "/virtual:spotpatch/client",
    "/@id/__x00__virtual:spotpatch/loader",
    "/@id/__x00__virtual:spotpatch/overlay",
    "/@id/virtual:spotpatch/loader",
  ]);
  // Percent-encoding of each single character, upper and lower hex, and of every character at once.
  for (let i = 1; i < canonical.length; i += 1) {
    const enc = pct(canonical[i]);
    out.add(canonical.slice(0, i) + enc + canonical.slice(i + 1));
    out.add(canonical.slice(0, i) + enc.toLowerCase() + canonical.slice(i + 1));
  }
  out.add(`/${[...canonical.slice(1)].map(pct).join("")}`);
  out.add(`/@id/${[..."virtual:spotpatch/client"].map(pct).join("")}`);
  const queries = ["?import", "?t=1700000000000", "?v=abc123", "?import&t=1700000000000", "?t=1700000000000&import", "?raw", "?url", "?inline", "?direct", "?worker", "?x=1#frag", "?"];
  for (const base of [...out]) {
    if (base.includes("%")) continue;
    for (const q of queries) out.add(base + q);
  }
  for (const q of queries) out.add(`/@id/%00virtual:spotpatch/client${q}`);
  return [...out];
}

const FOREIGN = [
  { Origin: "http://localhost:3000" },
  { Origin: "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "script" },
  { "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "script" },
  { "Sec-Fetch-Site": "same-site" },
  { Origin: "https://evil.example", "Sec-Fetch-Site": "cross-site", Accept: "*/*" },
];

for (const base of ["/", "/app/"]) {
  test(`no spelling of the client module's URL serves the token to another origin (base ${base})`, async (t) => {
    const { server, port } = await startServer(t, base);
    const prefix = base.replace(/\/$/, "");
    const html = (await rawGet(port, `${prefix}/`, { Accept: "text/html", "Sec-Fetch-Site": "same-origin" })).body;
    // The page loads the overlay's loader, which imports the client module (the token's only holder).
    const loader = `${prefix}/@id/__x00__virtual:spotpatch/loader`;
    assert.ok(html.includes(`src="${loader}"`), `the page loads the loader from ${loader}`);
    const src = `${prefix}${CLIENT_URL}`;
    const own = await rawGet(port, src, { Origin: `http://127.0.0.1:${port}`, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Dest": "script" });
    assert.equal(own.status, 200, "the page's own request gets the module");
    const token = /createSpotPatchClient\(\{ token: "([^"]+)"/.exec(own.body)?.[1];
    assert.ok(token, "the same-origin module holds the token");

    const paths = spellings().flatMap((p) => (prefix ? [prefix + p, p, `${prefix}/${p}`] : [p]));
    let refused = 0;
    let servedSameOrigin = 0;
    for (const p of paths) {
      for (const headers of FOREIGN) {
        const res = await rawGet(port, p, headers);
        assert.ok(!carriesToken(res.body, token), `${p} with ${JSON.stringify(headers)} served the token (status ${res.status})`);
        if (res.status === 403) refused += 1;
      }
      // The same spellings from the page itself: nothing is refused that Vite would serve it.
      const mine = await rawGet(port, p, { "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Dest": "script" });
      assert.notEqual(mine.status, 403, `${p} refused to the page's own origin`);
      if (carriesToken(mine.body, token)) {
        servedSameOrigin += 1;
        // Layer 1 on its own: Vite's own resolution of this spelling names the virtual module.
        assert.equal(await spotpatchModuleOf(server, p), "\0virtual:spotpatch/client", `${p} not resolved to the client module`);
      }
    }
    // Vite maps many spellings to the module; each of those was refused above, not merely missed.
    assert.ok(servedSameOrigin >= 20, `only ${servedSameOrigin} spellings reach the module`);
    assert.ok(refused >= servedSameOrigin * FOREIGN.length, `${refused} refusals for ${servedSameOrigin} live spellings`);
  });
}

test("a response carrying the token (clear or base64, any alignment) is refused to a foreign request whatever its URL", async (t) => {
  const { port, leak } = await startServer(t, "/");
  const own = await rawGet(port, CLIENT_URL, { "Sec-Fetch-Site": "same-origin" });
  const token = /createSpotPatchClient\(\{ token: "([^"]+)"/.exec(own.body)[1];
  const bodies = [`const t = "${token}";`, ...[0, 1, 2].map((pad) => `x:${Buffer.from(`${"p".repeat(pad)}{"s":"${token}"}`).toString("base64")}`)];
  for (const body of bodies) {
    leak.body = body;
    for (const headers of FOREIGN) {
      const res = await rawGet(port, "/leak", headers);
      assert.equal(res.status, 403, `${body.slice(0, 12)}… served to ${JSON.stringify(headers)}`);
      assert.ok(!carriesToken(res.body, token));
      assert.equal(res.headers["access-control-allow-origin"], undefined);
    }
    assert.equal((await rawGet(port, "/leak", { "Sec-Fetch-Site": "same-origin" })).body, body, "the page's own request is untouched");
  }
  leak.body = "nothing secret";
  assert.equal((await rawGet(port, "/leak", FOREIGN[0])).status, 200, "other foreign responses are untouched");
});

test("the URLs Vite derives from a request: base stripped, decoded, __x00__, /@id/, ?import and ?t= removed", () => {
  const urls = candidateUrls("/app/@id/%5F_x00__virtual:spotpatch/client?import&t=1700000000000", "/app/");
  assert.ok(urls.includes("\0virtual:spotpatch/client"), JSON.stringify(urls));
  assert.ok(candidateUrls("/@id/__x00__virtual:spotpatch/client.map", "/").includes("\0virtual:spotpatch/client"));
  assert.ok(candidateUrls("/%E0%A4%A", "/").includes("/%E0%A4%A"), "a malformed URI is still checked as sent");
});
