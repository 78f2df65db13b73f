// The request guard (guard.ts) and the path rule (schema.ts) on their own, including the cases a real
// Vite 8 server stops before they reach the plugin (its own Host check) and setups tests cannot bind.
import assert from "node:assert/strict";
import { test } from "node:test";

import { accessPolicy, exposureOf, isHostAllowed, isLoopbackHost, isSameOrigin, refusalOf } from "../../dist/server/guard.js";
import { isPagePath, isRelativeSourcePath } from "../../dist/protocol/schema.js";
import { parseSseBlock } from "../../dist/protocol/client.js";

const TOKEN = "t0ken-t0ken-t0ken";
// Named hosts in allowedHosts (a tunnel, a LAN name) expose the server: this policy opted in to remote access.
const policy = accessPolicy({ host: "127.0.0.1", allowedHosts: ["dev.example", ".corp.example"] }, true);
const ok = { host: "127.0.0.1:5173", "content-type": "application/json", "x-spotpatch-token": TOKEN };

test("loopback hosts and exposure", () => {
  for (const host of [undefined, "localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "app.localhost"]) assert.ok(isLoopbackHost(host), String(host));
  for (const host of [true, "0.0.0.0", "::", "192.168.1.5", "example.com"]) assert.ok(!isLoopbackHost(host), String(host));
  assert.equal(exposureOf({}), null);
  assert.match(exposureOf({ host: "0.0.0.0" }), /server\.host is "0\.0\.0\.0"/);
  assert.match(exposureOf({ host: true }), /server\.host is true/);
  assert.match(exposureOf({ allowedHosts: true }), /allowedHosts/);
  assert.match(exposureOf({ cors: true }), /cors/);
  assert.match(exposureOf({ cors: { origin: "*" } }), /cors/);
  assert.equal(exposureOf({ cors: { origin: /^http:\/\/localhost/ } }), null);
});

test("Host: Vite's rule (IPs, localhost, allowed names), and a missing Host is refused", () => {
  const allowed = policy.allowedHosts;
  for (const host of ["127.0.0.1:5173", "localhost:5173", "a.localhost", "[::1]:5173", "dev.example:5173", "corp.example", "x.corp.example:1"]) {
    assert.ok(isHostAllowed(host, allowed), host);
  }
  for (const host of [undefined, "", "evil.example:5173", "dev.example.evil.com", "xcorp.example", "[nope]:1", "a:b:c"]) {
    assert.ok(!isHostAllowed(host, allowed), String(host));
  }
});

test("Origin must be the page's own origin", () => {
  assert.ok(isSameOrigin("http://127.0.0.1:5173", "127.0.0.1:5173", "http"));
  assert.ok(isSameOrigin("http://localhost", "localhost:80", "http"));
  assert.ok(!isSameOrigin("https://127.0.0.1:5173", "127.0.0.1:5173", "http"));
  assert.ok(!isSameOrigin("http://127.0.0.1:3000", "127.0.0.1:5173", "http"));
  assert.ok(!isSameOrigin("null", "127.0.0.1:5173", "http"));
});

test("refusalOf: order and codes", () => {
  const code = (method, headers, p = policy) => refusalOf(method, headers, p, TOKEN)?.code ?? null;
  assert.equal(code("POST", ok), null);
  assert.equal(code("POST", { ...ok, origin: "http://127.0.0.1:5173", "sec-fetch-site": "same-origin" }), null);
  assert.equal(code("POST", { ...ok, host: "evil.example:5173", origin: "http://evil.example:5173" }), "FORBIDDEN_HOST");
  assert.equal(code("POST", { ...ok, host: undefined }), "FORBIDDEN_HOST");
  assert.equal(code("POST", { ...ok, origin: "http://evil.example" }), "FORBIDDEN_ORIGIN");
  assert.equal(code("POST", { ...ok, "sec-fetch-site": "same-site" }), "FORBIDDEN_ORIGIN");
  assert.equal(code("GET", ok), "METHOD_NOT_ALLOWED");
  assert.equal(code("POST", { ...ok, "x-spotpatch-token": undefined }), "BAD_TOKEN");
  assert.equal(code("POST", { ...ok, "x-spotpatch-token": TOKEN.toUpperCase() }), "BAD_TOKEN");
  assert.equal(code("POST", { ...ok, "content-type": "text/plain;charset=UTF-8" }), "UNSUPPORTED_MEDIA_TYPE");
  assert.equal(code("POST", { ...ok, "content-type": "application/json; charset=utf-8" }), null);
  const exposed = accessPolicy({ host: "0.0.0.0" }, false);
  assert.equal(code("POST", ok, exposed), "REMOTE_ACCESS_DISABLED");
  assert.equal(code("POST", ok, accessPolicy({ host: "0.0.0.0" }, true)), null);
  assert.equal(accessPolicy({ https: {} }, false).scheme, "https");
});

test("source.file must be project-relative; pageUrl a same-origin path", () => {
  for (const file of ["src/App.tsx", "a/b-c_d.e/F.jsx", "src/ünïcode.tsx"]) assert.ok(isRelativeSourcePath(file), file);
  for (const file of ["", "/abs", "../x", "a/../b", "./a", "a//b", "a/", "C:x", "c:/x", "\\\\server\\x", "a\\b", "file:x", "http://h/x", "a\u0000b"]) {
    assert.ok(!isRelativeSourcePath(file), JSON.stringify(file));
  }
  for (const url of ["/", "/products?id=3"]) assert.ok(isPagePath(url), url);
  for (const url of ["", "//evil.example/", "https://x/", "products", "/a\nb"]) assert.ok(!isPagePath(url), JSON.stringify(url));
});

test("SSE blocks", () => {
  assert.deepEqual(parseSseBlock('id: 3\nevent: job-event\ndata: {"a":1}'), { event: "job-event", data: '{"a":1}', id: "3" });
  assert.deepEqual(parseSseBlock("data:x\r\ndata: y"), { event: "message", data: "x\ny" });
  assert.equal(parseSseBlock(": keep-alive"), null);
});

import { exposureOf as exposureOf2, isHostAllowed as isHostAllowed2 } from "../../dist/server/guard.js";
import { CLIENT_URL } from "../../dist/server/plugin.js";
import { isForeignRequest } from "../../dist/server/module-guard.js";
import { test as test2 } from "node:test";
import assert2 from "node:assert/strict";

test2("a tunnel or proxy name in allowedHosts, or a remote server.origin, counts as exposure", () => {
  assert2.match(exposureOf2({ host: "127.0.0.1", allowedHosts: ["dev.tunnel.example"] }), /allowedHosts/);
  assert2.equal(exposureOf2({ host: "127.0.0.1", allowedHosts: ["localhost", ".localhost"] }), null);
  assert2.match(exposureOf2({ host: "127.0.0.1", origin: "https://dev.example.com" }), /origin/);
  assert2.match(exposureOf2({ host: "127.0.0.1", cors: { origin: /.*/ } }), /cors/);
  assert2.equal(exposureOf2({ host: "127.0.0.1", cors: { origin: /^https?:\/\/(?:(?:[^:]+\.)?localhost|127\.0\.0\.1|\[::1\])(?::\d+)?$/ } }), null);
});

test2("Host values with path, query, fragment or backslash characters are refused", () => {
  for (const host of ["evil.com/.localhost", "evil.com#.localhost", "evil.com?.localhost", "evil.com\\.localhost", "a b"]) {
    assert2.equal(isHostAllowed2(host, []), false, host);
  }
  assert2.equal(isHostAllowed2("localhost:5173", []), true);
});

test2("the client module (it holds the token) is refused to other origins and sites", () => {
  const policy = { scheme: "http" };
  const foreign = (headers) => isForeignRequest({ url: CLIENT_URL, headers: { host: "127.0.0.1:5173", ...headers } }, policy);
  assert2.equal(foreign({}), false);
  assert2.equal(foreign({ origin: "http://127.0.0.1:5173", "sec-fetch-site": "same-origin" }), false);
  assert2.equal(foreign({ "sec-fetch-site": "none" }), false);
  assert2.equal(foreign({ origin: "http://localhost:3000" }), true);
  assert2.equal(foreign({ origin: "null" }), true);
  assert2.equal(foreign({ "sec-fetch-site": "cross-site" }), true);
  assert2.equal(foreign({ "sec-fetch-site": "same-site" }), true);
});
