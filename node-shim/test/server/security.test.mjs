// Issue 4, acceptance 2: the browser surface refuses, with a clear error and without creating a job:
// no token, a wrong token, a foreign Origin, a foreign Host, a text/plain body, a method outside the
// whitelist, params with an absolute path / '..' / extra fields; and it is off by default when the dev
// server is reachable from other machines or sites.
import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";

import {
  CANARY,
  TOUCHED,
  demoAnnotation,
  engineProcesses,
  makeDemoProject,
  pageSession,
  providerConfig,
  rawPost,
  startDevServer,
  startProvider,
} from "../support/support.mjs";

/** A POST with an arbitrary Host header (fetch cannot set Host). */
function postWithHost(url, route, host, body, headers) {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port, method: "POST", path: `/__spotpatch/${route}`, headers: { ...headers, Host: host } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode, text }));
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

test("every refused request gets a clear error and no job is created", async (t) => {
  const project = makeDemoProject(t);
  const provider = await startProvider(t, "demo");
  const { url } = await startDevServer(t, project, { options: providerConfig(provider.baseUrl) });
  const { token, html, client } = await pageSession(url);
  assert.ok(!html.includes(token), "the token is delivered only inside the client module, never in the HTML");

  const create = { annotation: demoAnnotation(), modelProfileId: "m1" };
  const port = new URL(url).port;
  const refused = async (what, status, code, { route = "rpc/job/create", body = create, ...options }) => {
    const res = await rawPost(url, route, body, options);
    assert.equal(res.status, status, `${what}: ${res.text}`);
    assert.equal(res.body?.error?.code, code, `${what}: ${res.text}`);
    const fromEngine = code === "JOB_NOT_FOUND"; // the engine's own wording
    assert.ok(res.body.error.message.length > 20 && (fromEngine || res.body.error.message.includes("SpotPatch")), `${what}: unclear message`);
    assert.equal(res.headers.get("access-control-allow-origin"), null, `${what}: a CORS header was sent`);
    return res.body.error.message;
  };

  assert.match(await refused("no token", 401, "BAD_TOKEN", {}), /X-SpotPatch-Token/);
  await refused("wrong token", 401, "BAD_TOKEN", { token: `${token.slice(0, -2)}xx` });
  await refused("token of the wrong length", 401, "BAD_TOKEN", { token: "short" });
  await refused("foreign origin", 403, "FORBIDDEN_ORIGIN", { token, headers: { Origin: "https://evil.example" } });
  await refused("same site, other port", 403, "FORBIDDEN_ORIGIN", { token, headers: { Origin: "http://127.0.0.1:1" } });
  await refused("opaque origin", 403, "FORBIDDEN_ORIGIN", { token, headers: { Origin: "null" } });
  await refused("cross-site fetch metadata", 403, "FORBIDDEN_ORIGIN", { token, headers: { "Sec-Fetch-Site": "cross-site" } });
  // The classic CSRF: a cross-site form/fetch posting text/plain needs no preflight.
  assert.match(
    await refused("text/plain body", 415, "UNSUPPORTED_MEDIA_TYPE", { token, contentType: "text/plain", body: JSON.stringify(create) }),
    /application\/json/,
  );
  await refused("form body", 415, "UNSUPPORTED_MEDIA_TYPE", { token, contentType: "application/x-www-form-urlencoded", body: "a=1" });
  await refused("text/plain without token", 401, "BAD_TOKEN", { contentType: "text/plain", body: JSON.stringify(create) });
  for (const method of ["provider/probe", "initialize", "shutdown", "exit", "$/cancelRequest", "nope"]) {
    await refused(`method ${method}`, 404, "UNKNOWN_METHOD", { token, route: `rpc/${method}`, body: {} });
  }
  await refused("unknown endpoint", 404, "NOT_FOUND", { token, route: "admin", body: {} });

  const withSource = (file) => ({ annotation: demoAnnotation({ 1: { file, line: 12, column: 7 } }), modelProfileId: "m1" });
  for (const file of ["/etc/passwd", `${project.root}/${TOUCHED}`, "../../etc/passwd", "src/../../x.tsx", "C:\\Windows\\x", "C:/x.tsx", "file:///etc/passwd", "https://evil.example/a.tsx", "src\\x.tsx"]) {
    const message = await refused(`source.file ${file}`, 400, "INVALID_PARAMS", { token, body: withSource(file) });
    assert.match(message, /targets\/0\/source\/file: must be a project-relative path/);
    assert.ok(!message.includes(file), "the refused value is not echoed");
  }
  await refused("pageUrl as a URL", 400, "INVALID_PARAMS", {
    token,
    body: { annotation: { ...demoAnnotation(), pageUrl: "https://evil.example/" }, modelProfileId: "m1" },
  });
  assert.match(await refused("extra top-level field", 400, "INVALID_PARAMS", { token, body: { ...create, config: { providers: [] } } }), /config/);
  const extraInTarget = demoAnnotation();
  extraInTarget.targets[0].command = "rm -rf /";
  await refused("extra field in a target", 400, "INVALID_PARAMS", { token, body: { annotation: extraInTarget, modelProfileId: "m1" } });
  await refused("wrong type", 400, "INVALID_PARAMS", { token, body: { annotation: demoAnnotation(), modelProfileId: 7 } });
  await refused("params on health/get", 400, "INVALID_PARAMS", { token, route: "rpc/health/get", body: { x: 1 } });
  await refused("not JSON", 400, "INVALID_JSON", { token, body: "{nope" });
  await refused("JSON array", 400, "INVALID_JSON", { token, body: "[]" });
  await refused("too large", 413, "BODY_TOO_LARGE", { token, body: JSON.stringify({ pad: "x".repeat(1_100_000) }) });
  await refused("events of an unknown job", 404, "JOB_NOT_FOUND", { token, route: "events", body: { jobId: "job_nope" } });

  const get = await fetch(`${url}/__spotpatch/rpc/job/list`, { headers: { "X-SpotPatch-Token": token } });
  assert.equal(get.status, 405);
  assert.equal((await get.json()).error.code, "METHOD_NOT_ALLOWED");

  // A foreign Host (DNS rebinding: the attacker's name resolving to 127.0.0.1, with a matching Origin).
  for (const host of [`evil.example:${port}`, `evil.example`]) {
    const res = await postWithHost(url, "rpc/job/create", host, create, {
      "Content-Type": "application/json",
      "X-SpotPatch-Token": token,
      Origin: `http://${host}`,
    });
    assert.equal(res.status, 403, res.text);
    assert.match(res.text, /host/i);
  }

  // Nothing above reached the engine as a job; a proper request still works.
  assert.deepEqual((await client.listJobs()).jobs, []);
  const ok = await rawPost(url, "rpc/job/list", {}, { token, headers: { Origin: url, "Sec-Fetch-Site": "same-origin" } });
  assert.equal(ok.status, 200);
  assert.deepEqual(ok.body, { result: { jobs: [] } });
  assert.ok(!JSON.stringify(ok.body).includes(CANARY));
});

for (const [name, serverOptions, reason] of [
  ["cors: true", { cors: true }, /server\.cors allows every origin/],
  ["allowedHosts: true", { allowedHosts: true }, /server\.allowedHosts is true/],
]) {
  test(`${name}: SpotPatch is off unless allowRemoteAccess, and says why`, async (t) => {
    const project = makeDemoProject(t);
    const off = await startDevServer(t, project, { server: serverOptions });
    assert.ok(off.logger.lines.some((l) => l.level === "warn" && reason.test(l.msg)), "a warning at start-up");
    const { token } = await pageSession(off.url);
    const res = await rawPost(off.url, "rpc/health/get", {}, { token });
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, "REMOTE_ACCESS_DISABLED");
    assert.match(res.body.error.message, reason);
    assert.match(res.body.error.message, /allowRemoteAccess: true/);
    assert.deepEqual(await engineProcesses(), [], "no engine was started");
    await off.server.close();

    const on = await startDevServer(t, project, { server: serverOptions, options: { allowRemoteAccess: true } });
    const session = await pageSession(on.url);
    assert.equal((await session.client.health()).state, "clean");
  });
}

test("invalid plugin options fail when spotpatch() is called, naming the problem", async () => {
  const { spotpatch } = await import("../../dist/index.js");
  assert.throws(() => spotpatch({ providerz: [] }), /unknown option\(s\) providerz/);
  assert.throws(() => spotpatch({ command: "a", python: "b" }), /either command or python/);
  assert.throws(() => spotpatch({ limits: { maxTurns: "5" } }), /trusted config \/limits\/maxTurns/);
  assert.throws(() => spotpatch({ providers: [{ id: "x" }] }), /trusted config \/providers\/0/);
  assert.throws(() => spotpatch({ sandbox: "off" }), /trusted config \/sandbox/);
  // The check sandbox's keys reach the engine's trusted config unfiltered (issue 14).
  const { resolveOptions } = await import("../../dist/server/options.js");
  const checks = [{ id: "t", name: "T", command: "tsc", network: true, readPaths: ["~/.cache/tools"] }];
  assert.deepEqual(resolveOptions({ sandbox: "warn", checks }).config, { sandbox: "warn", checks });
  const plugins = spotpatch({ modes: { auto: false } });
  assert.deepEqual(plugins.map((p) => [p.name, p.apply, p.enforce]), [
    ["spotpatch:server", "serve", undefined],
    ["spotpatch:locate", "serve", "pre"],
    ["spotpatch:locate-vue", "serve", "pre"],
    ["spotpatch:locate-svelte", "serve", "pre"],
    ["spotpatch:locate-svelte-registry", "serve", undefined],
  ]);
});

test("session/get (issue 13) is guarded like every page method and reveals no key, URL or path", async (t) => {
  const project = makeDemoProject(t);
  const provider = await startProvider(t, "demo");
  const { url, server } = await startDevServer(t, project, {
    options: { ...providerConfig(provider.baseUrl), limits: { maxTargets: 4 }, modes: { auto: true } },
  });
  const { token, client } = await pageSession(url);
  const route = "rpc/session/get";
  for (const [what, status, code, options] of [
    ["no token", 401, "BAD_TOKEN", {}],
    ["wrong token", 401, "BAD_TOKEN", { token: `${token.slice(0, -2)}xx` }],
    ["foreign origin", 403, "FORBIDDEN_ORIGIN", { token, headers: { Origin: "https://evil.example" } }],
    ["cross-site fetch metadata", 403, "FORBIDDEN_ORIGIN", { token, headers: { "Sec-Fetch-Site": "cross-site" } }],
    ["text/plain body", 415, "UNSUPPORTED_MEDIA_TYPE", { token, contentType: "text/plain" }],
  ]) {
    const res = await rawPost(url, route, {}, options);
    assert.equal(res.status, status, `${what}: ${res.text}`);
    assert.equal(res.body?.error?.code, code, `${what}: ${res.text}`);
  }
  const extra = await rawPost(url, route, { projectRoot: "/" }, { token });
  assert.equal(extra.status, 400, extra.text);
  assert.equal(extra.body.error.code, "INVALID_PARAMS");
  const foreignHost = await postWithHost(url, route, "evil.example", {}, { "Content-Type": "application/json", "X-SpotPatch-Token": token });
  assert.equal(foreignHost.status, 403, foreignHost.text);

  const { agents, ...session } = await client.session();
  // The agent channel (docs/mcp.md): starting or listening by now, no agent attached, no path in its reason.
  assert.deepEqual(agents.clients, []);
  assert.ok(agents.available || agents.reason === "the agent channel is starting", JSON.stringify(agents));
  assert.deepEqual(session, {
    aiEnabled: true,
    applyModes: ["review", "auto"],
    limits: { maxTargets: 4, maxInstructionChars: 2000 },
    recovered: [],
    suggestions: false,
  });
  const text = JSON.stringify({ ...session, agents });
  for (const secret of [CANARY, provider.baseUrl, "127.0.0.1", project.root, "KEY"]) assert.ok(!text.includes(secret), secret);
  const { validatorFor } = await import("../../dist/protocol/schema.js");
  assert.ok(validatorFor("SessionGetResult")({ ...session, agents }));
  await server.close();
});
