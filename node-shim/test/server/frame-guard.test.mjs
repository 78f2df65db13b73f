// The frame guard on the engine's stdout (src/server/frame-guard.ts): real frames pass byte for byte however
// they are split into chunks; a header block that never ends, lacks Content-Length or announces a body
// over the limit fails the stream before anything is buffered.
import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { text } from "node:stream/consumers";
import { test } from "node:test";

import { frameGuard } from "../../dist/server/frame-guard.js";

const frame = (body) => `Content-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n${body}`;

async function through(chunks, options) {
  return text(Readable.from(chunks.map((c) => (Buffer.isBuffer(c) ? c : Buffer.from(c)))).pipe(frameGuard(options)));
}

test("frames pass unchanged, whole or split at every byte (a header split across chunks included)", async () => {
  const stream = frame('{"jsonrpc":"2.0","id":1,"result":{"é":"\\r\\n\\r\\n"}}') + frame('{"jsonrpc":"2.0","method":"x"}');
  assert.equal(await through([stream]), stream);
  const bytes = Buffer.from(stream);
  assert.equal(await through([...bytes].map((b) => Buffer.from([b]))), stream);
  for (let cut = 1; cut < bytes.length; cut += 7) assert.equal(await through([bytes.subarray(0, cut), bytes.subarray(cut)]), stream);
});

test("not frames: an endless header, a header without Content-Length, a body over the limit", async () => {
  await assert.rejects(through(["x".repeat(100_000)], { maxHeaderBytes: 1024 }), /a header block longer than 1024 bytes/);
  await assert.rejects(through(["x".repeat(600), "y".repeat(600)], { maxHeaderBytes: 1024 }), /a header block longer than 1024 bytes/);
  await assert.rejects(through(["Content-Type: text/plain\r\n\r\n{}"]), /a header block without a Content-Length/);
  await assert.rejects(through([frame("{}"), "Content-Length: 101\r\n\r\n"], { maxBodyBytes: 100 }), /a frame of 101 bytes, over the 100-byte limit/);
  assert.equal(await through(["Content-Length: 100\r\n\r\n", "z".repeat(100)], { maxBodyBytes: 100 }), `Content-Length: 100\r\n\r\n${"z".repeat(100)}`);
});
