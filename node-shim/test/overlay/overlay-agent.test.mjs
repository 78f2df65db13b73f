// Issue 28, "bring your own agent": a coding agent attached over MCP (the official MCP SDK's stdio client starting
// `spotpatch-agent mcp`, test/support/mcp_agent.py) does the job the page sends with Send to my agent, through the real
// engine the Vite plugin runs; the page shows the agent's job, its review, and Apply and Revert as for a model.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

import { bytesOf, openDemo, openPanel, panelOf, pickSaveAndPrice, snap, waitFor } from "../support/overlay-flow-helpers.mjs";
import { AGENT, CANARY, PYTHON } from "../support/support.mjs";

/** test/support/mcp_agent.py against `root`: its JSON lines as they come, and its exit. */
function startAgent(t, root, env = {}) {
  const child = spawn(PYTHON, [fileURLToPath(new URL("../support/mcp_agent.py", import.meta.url)), AGENT, root], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  const lines = [];
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  createInterface({ input: child.stdout }).on("line", (l) => lines.push(JSON.parse(l)));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  t.after(() => child.kill("SIGKILL"));
  const step = (name) =>
    waitFor(() => lines.find((l) => l.step === name || l.status === name), { timeoutMs: 60_000, what: `the agent's ${name}` }).catch(
      (error) => {
        throw new Error(`${error.message}; its lines ${JSON.stringify(lines)}; its stderr:\n${stderr.slice(-3000)}`);
      },
    );
  return { lines, exited, step, stderr: () => stderr };
}

test("Send to my agent: an MCP client takes the job, edits through SpotPatch's tools and submits; the page reviews, applies and reverts", async (t) => {
  const { page, project } = await openDemo(t);
  const original = bytesOf(project);
  const agent = startAgent(t, project.root, { MCP_AGENT_TAKE_DELAY: "6" });
  await agent.step("attached");

  await openPanel(page);
  const panel = panelOf(page);
  await panel.getByText("Your agent is connected: test-agent.", { exact: false }).waitFor({ timeout: 15_000 });
  await pickSaveAndPrice(page);
  await panel.getByRole("textbox", { name: "Instruction for target 1" }).fill("Make the Save button primary.");
  await panel.getByRole("textbox", { name: "Instruction for target 2" }).fill("Show the price with two decimals.");
  await panel.getByRole("button", { name: "Send to my agent" }).click();
  await panel.getByText("Sent to your agent over MCP").waitFor({ timeout: 15_000 });
  // Until the agent takes it the job says it waits for the agent (not "The model is working").
  await panel.getByRole("status").filter({ hasText: "Waiting for your agent" }).first().waitFor();
  await panel.getByText("ask it to “Do the SpotPatch job”", { exact: false }).waitFor();
  await snap(page, "agent-waiting");

  const taken = await agent.step("taken");
  assert.equal(taken.targets, 2, "the agent got both targets");
  await agent.step("submitted");
  const apply = panel.getByRole("button", { name: "Apply" });
  await apply.waitFor({ timeout: 30_000 });
  await snap(page, "agent-review");
  await panel.getByText("Target 1: the Save button is primary. Target 2: the price shows two decimals.", { exact: true }).waitFor();
  await panel.getByText("Your agent: Target 1: the Save button is primary.", { exact: false }).waitFor({ state: "attached" });
  assert.deepEqual(bytesOf(project), original, "nothing reached the files before Apply");
  await apply.click();
  await panel.getByRole("button", { name: "Revert" }).waitFor({ timeout: 30_000 });
  const applied = bytesOf(project).toString("utf8");
  assert.match(applied, /btn btn-primary/);
  assert.match(applied, /\$\{price\.toFixed\(2\)\}/);
  await agent.step("applied"); // the agent sees the user's decision
  await panel.getByRole("button", { name: "Revert" }).click();
  await agent.step("reverted");
  assert.deepEqual(bytesOf(project), original, "Revert restored the file byte for byte");
  assert.equal(await agent.exited, 0, agent.stderr());
  const html = await page.content();
  assert.ok(!html.includes(CANARY), "no key in the page");
});

test("no agent attached: the page explains the one-line set-up instead of offering Send to my agent", async (t) => {
  const { page } = await openDemo(t);
  await openPanel(page);
  const panel = panelOf(page);
  await panel.getByText("spotpatch-agent mcp --print-config claude-code", { exact: false }).waitFor();
  assert.equal(await panel.getByRole("button", { name: "Send to my agent" }).count(), 0);
});
