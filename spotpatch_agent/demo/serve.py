"""``spotpatch-agent demo --serve``: the bundled demo app under ``vite dev`` with the plugin and the overlay.

Copies ``demo/app`` into a temp git repository (like ``demo``), gives it the demo's ``typecheck`` check
when TypeScript can be had (demo/typecheck.py), starts the offline scripted provider (the demo conversation,
replayed for every job: no model is involved) or, with ``OPENAI_API_KEY``, that provider, and runs
``node-shim/scripts/demo-serve.mjs``: Vite's ``createServer`` with this repository's ``vite-plugin-spotpatch``
(engine: ``<this python> -m spotpatch_agent serve``) and ``@vitejs/plugin-react``. It needs Node ≥ 20 and
the repository's ``node-shim/`` (a clone, not a wheel); it runs ``npm ci`` there when ``node_modules`` is
missing and ``npm run build`` when ``dist/`` is missing or older than ``src/``, saying so.

Prints the page URL and runs until Ctrl-C (SIGINT) or SIGTERM; then it stops the dev server (which stops
the engine), kills whatever is left of the launcher's process group, stops the provider and removes the
temp directory. Exit code 0 after such a stop, 1 when something failed (the reason is printed), 2 when
Node or node-shim is unavailable.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from contextlib import ExitStack
from pathlib import Path
from types import FrameType

from spotpatch_agent.demo.runner import DEMO_KEY_ENV, _config, _sandbox_choice, make_demo_project
from spotpatch_agent.demo.script import replaying_demo_turns
from spotpatch_agent.protocol.models import Limits

NODE_SHIM = Path(__file__).resolve().parents[2] / "node-shim"
LAUNCHER = NODE_SHIM / "scripts" / "demo-serve.mjs"
URL_LINE = re.compile(r"^SPOTPATCH_DEMO_URL (http://\S+/)$")
#: Seconds for ``vite dev`` to listen (dependency pre-bundling happens on the first page load, not here).
START_TIMEOUT_SEC = 60
#: Seconds the launcher gets to close the dev server and the engine before its process group is killed.
STOP_TIMEOUT_SEC = 15
#: node-shim/node_modules entries not linked into the demo project (tools, caches, types the app does not use).
_NOT_LINKED = {".bin", ".vite", ".package-lock.json", "@types"}


class DemoServeError(Exception):
    """A step of ``demo --serve`` failed; ``exit_code`` 2 when Node or node-shim is missing, else 1."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def serve_demo(*, host: str = "127.0.0.1", port: int = 5173) -> int:
    """Run the demo dev server until Ctrl-C or SIGTERM; see the module docstring for exit codes."""
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _serve(host, port)
    except DemoServeError as exc:
        print(f"spotpatch-agent demo --serve: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\nStopped.", flush=True)
        return 0
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _ignore_signals() -> None:
    """From here on a second Ctrl-C or SIGTERM cannot cut the cleanup short (serve_demo restores them)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _serve(host: str, port: int) -> int:
    node = _node()
    _prepare_node_shim()
    with ExitStack() as stack:
        tmp = Path(tempfile.mkdtemp(prefix="spotpatch-demo-serve-"))
        stack.callback(shutil.rmtree, tmp, True)
        try:
            return _run(stack, tmp, node, host, port)
        finally:
            _ignore_signals()  # before the stack's cleanup: launcher, engine, provider, temp dir


def _run(stack: ExitStack, tmp: Path, node: str, host: str, port: int) -> int:
    project = make_demo_project(tmp / "demo-app")
    scripted = not os.environ.get("OPENAI_API_KEY")
    base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")  # with a model (OPENAI_API_KEY set)
    model = os.environ.get("SPOTPATCH_MODEL", "gpt-4o-mini")
    if scripted:
        print("SpotPatch demo (serve) — NO MODEL IS INVOLVED: OPENAI_API_KEY is not set, so a scripted local provider\n"
              "on 127.0.0.1 plays the demo's fixed tool-calling conversation through the real engine for every job,\n"
              "whatever you pick or write: it makes the Save button primary and shows the price with two decimals\n"
              "(Revert before running it again). Set OPENAI_API_KEY (optionally OPENAI_BASE_URL, SPOTPATCH_MODEL)\n"
              "to use a model.", flush=True)
    else:
        print(f"SpotPatch demo (serve) — using model {model!r} at {base.split('//', 1)[-1].split('/', 1)[0]} "
              "(OpenAI-compatible Chat Completions).", flush=True)
    print("Demo project: a fresh git copy of the bundled Vite + React app in a temp directory (removed on exit).",
          flush=True)

    from spotpatch_agent.demo.typecheck import prepare_typecheck

    sandbox, note = _sandbox_choice(scripted)  # how the check runs: confined, or said plainly (issue 14)
    print(note, flush=True)
    typecheck = prepare_typecheck(project, Limits(), sandbox=sandbox) if sandbox is not None else None
    if typecheck is not None:
        print(typecheck.message, flush=True)
    check = typecheck.check if typecheck is not None else None
    _link_node_modules(NODE_SHIM / "node_modules", project / "node_modules")
    if scripted:
        from spotpatch_agent.provider.scripted import ScriptedProviderServer

        server = stack.enter_context(ScriptedProviderServer(replaying_demo_turns(check_id=check.id if check else None)))
        os.environ[DEMO_KEY_ENV] = "sk-demo-" + secrets.token_hex(12)  # the engine inherits it through Vite
        config = _config(server.base_url, DEMO_KEY_ENV, "scripted-demo", check, sandbox=sandbox or "required")
    else:
        config = _config(base, "OPENAI_API_KEY", model, check, sandbox=sandbox or "required")
    config_file = tmp / "spotpatch-config.json"
    config_file.write_text(json.dumps(config.dump()), "utf-8")

    launcher = subprocess.Popen(
        [node, str(LAUNCHER), "--root", str(project), "--cache-dir", str(tmp / "vite-cache"),
         "--config", str(config_file), "--python", sys.executable, "--host", host, "--port", str(port)],
        cwd=NODE_SHIM, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, errors="replace",
        start_new_session=True,  # Ctrl-C reaches this process only; it stops the launcher in order
    )
    stack.callback(_stop, launcher)
    url = _wait_for_url(launcher)
    print(f"\nOpen {url}\n  Click the SpotPatch button (bottom right) or press Alt+Shift+S, pick elements, write an "
          "instruction for each, Submit.\n  Alt+click picks directly. Ctrl-C stops the server.\n", flush=True)
    from spotpatch_agent.handoff.setup import engine_command

    print("  Your own coding agent instead of the model (docs/mcp.md): point its MCP set-up at this demo project,\n"
          f"  e.g. `claude mcp add spotpatch-demo -- {engine_command()} mcp --project {project}`\n"
          "  (the project is new on every run), then Send to my agent on the page.\n", flush=True)
    try:
        code = launcher.wait()
    except KeyboardInterrupt:
        print("\nStopping: closing the dev server and the engine…", flush=True)
        return 0
    print(f"The dev server stopped on its own (exit {code}).", file=sys.stderr)
    return 1


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise DemoServeError("Node.js ≥ 20 is needed to serve the page (node is not on PATH).", 2)
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise DemoServeError(f"`node --version` failed ({exc}).", 2) from exc
    major = re.match(r"v(\d+)\.", version.strip())
    if not major or int(major.group(1)) < 20:
        raise DemoServeError(f"Node.js ≥ 20 is needed to serve the page (found {version.strip() or 'unknown'}).", 2)
    return node


def _prepare_node_shim() -> None:
    """``npm ci`` when node-shim has no ``node_modules``; ``npm run build`` when ``dist`` is missing or stale."""
    if not LAUNCHER.is_file() or not (NODE_SHIM / "package.json").is_file():
        raise DemoServeError("this needs the SpotPatch repository's node-shim/ next to spotpatch_agent/ "
                             "(run it from a clone, installed with pip install -e .).", 2)
    npm = shutil.which("npm")
    if not (NODE_SHIM / "node_modules").is_dir():
        print("node-shim has no node_modules yet: running `npm ci` in node-shim/ (once)…", flush=True)
        _npm(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
    built = [NODE_SHIM / "dist" / name for name in ("index.js", "overlay.js", "overlay-loader.js")]
    sources = [p for p in (NODE_SHIM / "src").rglob("*") if p.is_file()]
    newest = max((p.stat().st_mtime for p in sources), default=0.0)
    if not all(p.is_file() for p in built) or min(p.stat().st_mtime for p in built) < newest:
        print("Building node-shim (`npm run build` in node-shim/: the plugin and the overlay)…", flush=True)
        _npm(npm, "run", "build", "--silent")


def _npm(npm: str | None, *args: str) -> None:
    if npm is None:
        raise DemoServeError("npm is not on PATH: it is needed once to install and build node-shim.", 2)
    done = subprocess.run([npm, *args], cwd=NODE_SHIM, stdin=subprocess.DEVNULL, check=False, timeout=900)
    if done.returncode != 0:
        raise DemoServeError(f"`npm {' '.join(args)}` in node-shim/ failed (exit {done.returncode}).")


def _link_node_modules(source: Path, dest: Path) -> None:
    """Symlink each package of node-shim's ``node_modules`` into the project's (React for the page; Vite
    resolves the app's imports from the app's directory). Entries already there (the typecheck's own
    TypeScript and React types) stay. ``node_modules`` is ignored by the demo app's ``.gitignore``."""
    dest.mkdir(exist_ok=True)
    for entry in sorted(source.iterdir()):
        if entry.name in _NOT_LINKED:
            continue
        target = dest / entry.name
        if entry.name.startswith("@") and entry.is_dir():
            _link_node_modules(entry, target)
        elif not target.exists() and not target.is_symlink():
            target.symlink_to(entry, target_is_directory=entry.is_dir())


def _wait_for_url(launcher: subprocess.Popen[str]) -> str:
    """Forward the launcher's stdout to ours until its URL line; returns the URL. Keeps forwarding after."""
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert launcher.stdout is not None
        for line in launcher.stdout:
            match = URL_LINE.match(line.rstrip("\n"))
            if match and not found:
                found.append(match.group(1))
                ready.set()
            else:
                sys.stdout.write(line)
                sys.stdout.flush()
        ready.set()

    threading.Thread(target=pump, name="demo-serve-stdout", daemon=True).start()
    if not ready.wait(START_TIMEOUT_SEC) or not found:
        raise DemoServeError("the Vite dev server did not start (see the messages above).")
    return found[0]


def _stop(launcher: subprocess.Popen[str]) -> None:
    """SIGTERM the launcher (it closes Vite, which stops the engine), wait, then kill its process group."""
    group = launcher.pid  # start_new_session: the launcher leads its own group
    if launcher.poll() is None:
        launcher.send_signal(signal.SIGTERM)
        try:
            launcher.wait(STOP_TIMEOUT_SEC)
        except subprocess.TimeoutExpired:
            print("The dev server did not stop in time: killing it.", file=sys.stderr)
    try:
        os.killpg(group, signal.SIGKILL)  # anything of the group still alive (the launcher, an engine)
    except (ProcessLookupError, PermissionError):
        pass
    launcher.wait()
