/**
 * The engine's stdout, checked against the framing bounds before vscode-jsonrpc buffers it
 * (docs/node-shim.md "The engine process"): each header block ends with a blank line within
 * `MAX_HEADER_BYTES` and names a `Content-Length` of at most `MAX_BODY_BYTES`. vscode-jsonrpc buffers a
 * declared body whole, however large: an executable that announced a huge body and streamed (a wrong
 * `command`, a broken engine) made the dev server hold 7 GB within the 20 s start-up deadline.
 *
 * The bytes pass through unchanged; a violation fails the stream with a `FrameLimitError` (engine.ts
 * then stops the engine). The engine's own decoder has the same header bound (spotpatch_agent/rpc/framing.py).
 */

import { Transform, type TransformCallback } from "node:stream";

export const MAX_HEADER_BYTES = 8 * 1024;
/** Far above the largest frame the engine sends (a job's diff is capped at 2 MiB by `limits.maxDiffBytes`). */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

export class FrameLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FrameLimitError";
  }
}

const END = Buffer.from("\r\n\r\n");

/** A pass-through `Transform` enforcing the bounds on the stream of frames it carries. */
export function frameGuard({ maxHeaderBytes = MAX_HEADER_BYTES, maxBodyBytes = MAX_BODY_BYTES } = {}): Transform {
  let header = Buffer.alloc(0); // the current header block so far (it holds no END yet)
  let body = 0; // body bytes of the current frame still to come
  const check = (chunk: Buffer): string | undefined => {
    let offset = 0;
    while (offset < chunk.length) {
      if (body > 0) {
        const n = Math.min(body, chunk.length - offset);
        body -= n;
        offset += n;
        continue;
      }
      const before = header.length;
      header = Buffer.concat([header, chunk.subarray(offset, offset + maxHeaderBytes + END.length)]);
      const end = header.indexOf(END);
      if (end < 0 || end > maxHeaderBytes) {
        if (header.length >= maxHeaderBytes + END.length || end > maxHeaderBytes) {
          return `a header block longer than ${maxHeaderBytes} bytes (not a protocol frame)`;
        }
        offset = chunk.length; // all of it is header so far (at most maxHeaderBytes + END)
        continue;
      }
      const match = /(?:^|\r\n)content-length:[ \t]*(\d{1,16})[ \t]*(?:\r\n|$)/i.exec(header.subarray(0, end).toString("latin1"));
      if (!match) return "a header block without a Content-Length (not a protocol frame)";
      const length = Number(match[1]);
      if (length > maxBodyBytes) return `a frame of ${length} bytes, over the ${maxBodyBytes}-byte limit`;
      offset += end + END.length - before;
      header = Buffer.alloc(0);
      body = length;
    }
    return undefined;
  };
  return new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
      const problem = check(chunk);
      if (problem) done(new FrameLimitError(`the engine's stdout carried ${problem}`));
      else done(null, chunk);
    },
  });
}
