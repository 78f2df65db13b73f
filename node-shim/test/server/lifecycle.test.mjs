// Issue 4, acceptance 3, with the real engine: the engine starts lazily once per dev-server instance,
// closing the dev server leaves no engine process, a killed engine fails its in-flight job visibly and is
// restarted, and `server.restart()` leaves exactly one engine.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  collectEvents,
  demoAnnotation,
  engineProcesses,
  isAlive,
  isStatus,
  makeDemoProject,
  pageSession,
  providerConfig,
  rawPost,
  startDevServer,
  startProvider,
  waitFor,
} from "../support/support.mjs";

test("the engine starts on the first request, once; closing the dev server ends it", async (t) => {
  const project = makeDemoProject(t);
  const { server, url } = await startDevServer(t, project);
  const { client } = await pageSession(url);
  assert.deepEqual(await engineProcesses(), [], "nothing is spawned before the page asks");
  await Promise.all([client.health(), client.providers(), client.listJobs()]);
  const engines = await engineProcesses();
  assert.equal(engines.length, 1, JSON.stringify(engines));
  const [{ pid }] = engines;

  await server.close();
  assert.equal(isAlive(pid), false, `engine ${pid} outlived the dev server`);
  assert.deepEqual(await engineProcesses(), []);
  await server.close(); // teardown is idempotent
});

test("killing the engine fails the in-flight job visibly; the next request works after the restart", async (t) => {
  const project = makeDemoProject(t);
  const provider = await startProvider(t, "stall-demo"); // job 1's model turn never ends; job 2 gets the demo
  const { url, logger } = await startDevServer(t, project, { options: providerConfig(provider.baseUrl) });
  const { client } = await pageSession(url);

  const job = await client.createJob({ annotation: demoAnnotation(), modelProfileId: "m1" });
  const seen = await collectEvents(client, job.jobId, isStatus("running"));
  const lastSeq = seen.at(-1).seq;
  // Kill only once job 1's model turn has reached the provider (its stalled turn is then used up; killed
  // earlier — the job builds its context after "running" — job 2 would get the stall instead of the demo).
  await provider.waitForRequests(1);
  const [{ pid }] = await engineProcesses();
  // A page watching the job while the engine dies (wherever the stream is when it happens).
  const tail = collectEvents(client, job.jobId, isStatus("failed"), { afterSeq: lastSeq });
  process.kill(pid, "SIGKILL");

  const failure = await tail;
  assert.deepEqual(failure.map((e) => [e.seq, e.kind]), [[lastSeq + 1, "error"], [lastSeq + 2, "status"]]);
  assert.equal(failure[0].error.code, "INTERNAL");
  assert.match(failure[0].error.message, /engine stopped \(killed by SIGKILL\) while this job ran; nothing was applied/);
  assert.equal(failure[1].status, "failed");
  // A page reconnecting later still learns how the job ended.
  const replay = await collectEvents(client, job.jobId, isStatus("failed"), { afterSeq: lastSeq });
  assert.deepEqual(replay, failure);
  assert.ok(logger.lines.some((l) => l.level === "error" && /engine stopped unexpectedly \(killed by SIGKILL\); 1 unfinished job/.test(l.msg)));

  assert.equal((await client.health()).state, "clean", "the next request works");
  const engines = await engineProcesses();
  assert.equal(engines.length, 1);
  assert.notEqual(engines[0].pid, pid);

  // The restarted engine runs a whole new job (the dead one's worktree and lock are gone).
  const again = await client.createJob({ annotation: demoAnnotation(), modelProfileId: "m1" });
  const events = await collectEvents(client, again.jobId, isStatus("awaiting-review", "failed"));
  assert.equal(events.at(-1).status, "awaiting-review", JSON.stringify(events.at(-1)));
});

test("server.restart() leaves exactly one engine, and the old token stops working", async (t) => {
  const project = makeDemoProject(t);
  const { server, url } = await startDevServer(t, project);
  const before = await pageSession(url);
  await before.client.health();
  const [{ pid: first }] = await engineProcesses();

  for (let i = 0; i < 2; i += 1) {
    await server.restart();
    const after = await pageSession(url);
    assert.notEqual(after.token, before.token, "a new session token per start");
    const stale = await rawPost(url, "rpc/health/get", {}, { token: before.token });
    assert.equal(stale.status, 401);
    assert.equal((await after.client.health()).state, "clean");
    const engines = await engineProcesses();
    assert.equal(engines.length, 1, JSON.stringify(engines));
    assert.equal(isAlive(first), false);
  }
  const [{ pid: last }] = await engineProcesses();
  await server.close();
  await waitFor(() => !isAlive(last), { timeoutMs: 1000, what: "the last engine to end" });
  assert.deepEqual(await engineProcesses(), []);
});

test("closing the dev server during a running job with an open event stream: prompt, no engine left", async (t) => {
  const project = makeDemoProject(t);
  const provider = await startProvider(t, "stall-demo");
  const { server, url } = await startDevServer(t, project, { options: providerConfig(provider.baseUrl) });
  const { client } = await pageSession(url);
  const job = await client.createJob({ annotation: demoAnnotation(), modelProfileId: "m1" });
  const seen = [];
  const stream = (async () => {
    for await (const event of client.watch(job.jobId)) seen.push(event);
    return "ended";
  })().catch((error) => error);
  await waitFor(() => seen.some(isStatus("running")), { what: "the job to run" });
  const [{ pid }] = await engineProcesses();

  const started = Date.now();
  await server.close();
  assert.ok(Date.now() - started < 5000, `close took ${Date.now() - started} ms`);
  assert.equal(isAlive(pid), false);
  const end = await stream; // the dev server drops open connections when it closes
  assert.ok(end === "ended" || (end.name === "SpotPatchError" && end.code === "NETWORK"), String(end));
});
