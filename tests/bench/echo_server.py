"""Baseline for the benchmarks: a minimal framed JSON-RPC echo server (tests/bench/README.md).

Plain Python, no threads, no imports beyond the standard library: reads ``Content-Length`` frames from
stdin, writes frames to stdout. Every request is answered with ``{"result": params}``; the request
``bench/flood {count, template}`` first writes ``count`` ``job/event`` notifications (``template`` with
``seq`` 1..count, one ``os.write`` per frame, like the engine's writer) and then its reply. Stops on EOF
or the ``exit`` notification.
"""

import json
import os
import sys


def encode(message):
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def write(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def main():
    in_fd, out_fd = sys.stdin.fileno(), sys.stdout.fileno()
    buf = b""
    while True:
        chunk = os.read(in_fd, 65536)
        if not chunk:
            return 0
        buf += chunk
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            length = 0
            for line in buf[:end].split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(buf) < end + 4 + length:
                break
            msg = json.loads(buf[end + 4:end + 4 + length])
            buf = buf[end + 4 + length:]
            if "id" not in msg:
                if msg.get("method") == "exit":
                    return 0
                continue
            params = msg.get("params")
            if msg.get("method") == "bench/flood":
                template = params["template"]
                for seq in range(1, params["count"] + 1):
                    write(out_fd, encode({"jsonrpc": "2.0", "method": "job/event", "params": {**template, "seq": seq}}))
            write(out_fd, encode({"jsonrpc": "2.0", "id": msg["id"], "result": params}))


if __name__ == "__main__":
    sys.exit(main())
