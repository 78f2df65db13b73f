"""``spotpatch-agent demo --serve`` (issue 13, "Try it in one command"): the real command serves the demo app
with ``vite dev``, the plugin and the overlay loader, its engine answers the page, and Ctrl-C (SIGINT) ends
every child process and removes the temp project."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOADER_URL = "/@id/__x00__virtual:spotpatch/loader"
CLIENT_URL = "/@id/__x00__virtual:spotpatch/client"

def descendants(pid: int) -> dict[int, str]:
    """``{pid: args}`` of every live descendant of ``pid`` (from ``ps``)."""
    out = subprocess.run(["ps", "-ww", "-A", "-o", "pid=,ppid=,args="], capture_output=True, text=True,
                         check=True).stdout
    rows = [m.groups() for m in (re.match(r"\s*(\d+)\s+(\d+)\s+(.*)", line) for line in out.splitlines()) if m]
    children: dict[int, list[tuple[int, str]]] = {}
    for child, parent, args in rows:
        children.setdefault(int(parent), []).append((int(child), args))
    found: dict[int, str] = {}
    todo = [pid]
    while todo:
        for child, args in children.get(todo.pop(), []):
            found[child] = args
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return " Z " not in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:3]
    except OSError:
        return True


def fetch(url: str, data: dict | None = None, headers: dict[str, str] | None = None) -> str:
    body = json.dumps(data).encode() if data is not None else None
    request = urllib.request.Request(url, data=body, headers={**(headers or {}),
                                                              **({"Content-Type": "application/json"} if body else {})})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - 127.0.0.1 only
        return response.read().decode()


def test_demo_serve_serves_the_overlay_and_ctrl_c_ends_everything(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update(TMPDIR=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"), SPOTPATCH_DEMO_OFFLINE="1")
    proc = subprocess.Popen([sys.executable, "-m", "spotpatch_agent", "demo", "--serve", "--port", "0"], cwd=REPO,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    lines: list[str] = []
    opened = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Open http://"):
                opened.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # A stale node-shim/dist is rebuilt first (the command says so): allow for that.
        assert opened.wait(300), "no URL printed:\n" + "".join(lines)
        url = next(line.split()[1] for line in lines if line.startswith("Open http://"))
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url)
        output = "".join(lines)
        assert "NO MODEL IS INVOLVED" in output and "scripted" in output
        # Your own agent (docs/mcp.md): the set-up line names this run's demo project (printed after the URL line
        # the wait above returned on).
        agent_line = re.compile(r"claude mcp add spotpatch-demo -- \S+ mcp --project \S+/demo-app")
        deadline = time.monotonic() + 15
        while not agent_line.search("".join(lines)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert agent_line.search("".join(lines)), "".join(lines)

        html = fetch(url)
        assert f'<script type="module" src="{LOADER_URL}"></script>' in html
        loader = fetch(url.rstrip("/") + LOADER_URL)
        assert "virtual:spotpatch/overlay" in loader and '"launcher":"bottom-right"' in loader
        client = fetch(url.rstrip("/") + CLIENT_URL)
        token = re.search(r'createSpotPatchClient\(\{ token: "([^"]+)"', client).group(1)
        session = json.loads(fetch(url.rstrip("/") + "/__spotpatch/rpc/session/get", {},
                                   {"X-SpotPatch-Token": token}))["result"]
        assert session["aiEnabled"] is True and session["applyModes"] == ["review"]
        health = json.loads(fetch(url.rstrip("/") + "/__spotpatch/rpc/health/get", {}, {"X-SpotPatch-Token": token}))
        assert health["result"]["state"] == "clean"  # the symlinked node_modules is ignored, the copy committed

        children = descendants(proc.pid)
        assert any("demo-serve.mjs" in args for args in children.values()), children
        assert any("spotpatch_agent serve" in args for args in children.values()), children
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("spotpatch-demo-serve-")]

        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(10)
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [args for pid, args in children.items() if alive(pid)] == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("spotpatch-demo-serve-")] == []
    with pytest.raises(urllib.error.URLError):
        fetch(url)
    assert "Stopping" in "".join(lines)


def test_the_replayed_script_starts_every_job_at_turn_one() -> None:
    from spotpatch_agent.demo.script import demo_turns, replaying_demo_turns

    turns = demo_turns(check_id="typecheck")
    script = replaying_demo_turns(check_id="typecheck", jobs=2)
    assert len(script) == 2 * len(turns)
    history: list[dict] = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    for job in range(2):
        for n, expected in enumerate(turns):
            messages = history + [{"role": "assistant", "content": "x"}, {"role": "tool", "content": "y"}] * n
            assert script[job * len(turns) + n]({"messages": messages}) == expected
