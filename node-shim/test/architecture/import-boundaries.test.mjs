// The import boundaries between the rooms of src/ (each room's README.md; eslint.config.mjs `boundary`): ESLint's own
// Node API, with the package's config, lints a forbidden import as if it were the text of a real file of a room
// (an overlay module importing server code, the server importing the overlay, …) and must report
// `no-restricted-imports`; the same file importing protocol/ must not. So the rule is shown to fail, not only
// to pass on today's tree (`npm run lint` runs it on every file).
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { ESLint } from "eslint";

// typescript-eslint's "single run" mode (on when CI=true) builds its program from the files on disk once and
// would lint today's file instead of the text given here: this test lints text, so it turns that mode off.
process.env.TSESTREE_SINGLE_RUN = "false";

const NODE_SHIM = fileURLToPath(new URL("../..", import.meta.url));
const eslint = new ESLint({ cwd: NODE_SHIM });

/** The `no-restricted-imports` messages for `code` linted as the file `file` (relative to node-shim/). */
async function boundaryErrors(file, code) {
  const [result] = await eslint.lintText(code, { filePath: path.join(NODE_SHIM, file) });
  assert.equal(result.fatalErrorCount, 0, JSON.stringify(result.messages));
  return result.messages.filter((m) => m.ruleId === "no-restricted-imports").map((m) => m.message);
}

const use = (spec) => `import * as other from "${spec}";\nexport const probe: unknown = other;\n`;

test("the overlay never imports server code: an overlay module importing ../server/… is a lint error", async () => {
  const [message, ...rest] = await boundaryErrors("src/overlay/loader.ts", use("../server/plugin.js"));
  assert.match(message ?? "", /Import boundary: the overlay runs in the page/);
  assert.deepEqual(rest, []);
  // From a folder deeper in the overlay, and as a re-export.
  assert.equal((await boundaryErrors("src/overlay/panel/jobs.ts", use("../../server/http.js"))).length, 1);
  assert.equal((await boundaryErrors("src/overlay/panel/jobs.ts", `export { spotpatchServer } from "../../server/plugin.js";\n`)).length, 1);
  // Nor the locators (Node code, Babel).
  assert.equal((await boundaryErrors("src/overlay/picker/chain.ts", use("../../locate/locate.js"))).length, 1);
});

test("the server never imports overlay code: a server module importing ../overlay/… is a lint error", async () => {
  const [message] = await boundaryErrors("src/server/plugin.ts", use("../overlay/loader.js"));
  assert.match(message ?? "", /Import boundary: the dev-server side imports only protocol\//);
});

test("protocol/ and the locators are leaves; init/ stands alone", async () => {
  assert.equal((await boundaryErrors("src/protocol/schema.ts", use("../server/guard.js"))).length, 1);
  assert.equal((await boundaryErrors("src/protocol/client.ts", use("../overlay/i18n.js"))).length, 1);
  assert.equal((await boundaryErrors("src/locate/locate.ts", use("../server/plugin.js"))).length, 1);
  assert.equal((await boundaryErrors("src/init/config-edit.ts", use("../protocol/client.js"))).length, 1);
});

test("imports the rooms allow are no boundary error: protocol/ from either side, a room's own modules", async () => {
  assert.deepEqual(await boundaryErrors("src/overlay/loader.ts", use("../protocol/client.js")), []);
  assert.deepEqual(await boundaryErrors("src/overlay/panel/jobs.ts", use("../../protocol/protocol.generated.js")), []);
  assert.deepEqual(await boundaryErrors("src/overlay/visual/shots.ts", use("./locate.js")), []);
  assert.deepEqual(await boundaryErrors("src/server/plugin.ts", use("../protocol/overlay.js")), []);
  assert.deepEqual(await boundaryErrors("src/server/plugin.ts", use("./engine-locate.js")), []);
});
