// `npm test`: node's test runner on the test/**/*.test.mjs files only — the helpers and fixtures
// (test/support/, test/apps/) are not test files, which `node --test test/` would assume — one file at a
// time, without shell globbing (Windows). Extra arguments go to `node --test`.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const files = readdirSync(new URL("../test/", import.meta.url), { recursive: true })
  .map((name) => name.split("\\").join("/"))
  .filter((name) => name.endsWith(".test.mjs") && !name.startsWith("apps/") && !name.startsWith("support/"))
  .sort()
  .map((name) => `test/${name}`);
const { status, signal } = spawnSync(process.execPath, ["--test", "--test-concurrency=1", ...process.argv.slice(2), ...files], {
  cwd: root,
  stdio: "inherit",
});
process.exit(status ?? (signal ? 1 : 0));
