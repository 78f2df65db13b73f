"""Breaker findings on the check sandbox (issue 14): each test is one way out that once worked.

- a Unix socket file in a path the sandbox shows (read-only) could still be connected to: ``connect()``
  needs write permission on the socket inode, not a writable mount (fixed: seccomp refuses
  ``socket(AF_UNIX)``, seccomp.py);
- a check could rewrite the worktree's ``.git`` gitfile to a git directory it built itself, whose config
  names a clean filter: the engine's own ``git add --all`` then ran that command on the host, unconfined.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import threading
from pathlib import Path

import pytest

from spotpatch_agent.checks.runner import run_check_process
from spotpatch_agent.checks.sandbox.seccomp import filter_bytes
from spotpatch_agent.protocol.models import CheckConfig, Limits
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.checks.test_hostile_checks import FILES, KEY_ENV, call, create_file_patch
from tests.conftest import make_repo
from tests.engine_client import EngineProcess

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the confinement proven here is Linux's")

UNIX_PROBE = r'''
import socket, sys
path = sys.argv[1]
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b"stolen")
    print("UNIX: SUCCEEDED connected to " + path)
    sys.exit(0)
except OSError as exc:
    print(f"UNIX: DENIED: {type(exc).__name__}: {exc}")
a, b = socket.socketpair()  # what Node and Python use for a child's stdio: must keep working
a.sendall(b"pair")
print("SOCKETPAIR:", b.recv(4).decode())
sys.exit(1)
'''


def _probe_check(*args: str, network: bool = False) -> CheckConfig:
    return CheckConfig.model_validate({"id": "probe", "name": "Probe", "command": sys.executable,
                                       "args": ["probe.py", *args], "required": True, "timeoutSec": 30,
                                       "network": network})


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("network", [False, True])
async def test_a_unix_socket_in_a_visible_path_cannot_be_connected(tmp_path: Path, anyio_backend: str,
                                                                    network: bool,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A service socket outside the hidden directories (like LXD's under /var/snap, or a socket in the
    project's node_modules) sits on a read-only mount in the sandbox; connect() must still fail."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    project = make_repo(tmp_path / "project", FILES)
    worktree = project / "node_modules" / ".spotpatch" / "job-x"
    worktree.mkdir(parents=True)
    (worktree / "probe.py").write_text(UNIX_PROBE)
    service = tmp_path / "srv"  # visible to the check: not a home, not the checkout, not /run
    service.mkdir()
    path = service / "svc.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    got: list[bytes] = []

    def accept() -> None:
        try:
            conn, _ = server.accept()
            got.append(conn.recv(16))
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        run = await run_check_process(_probe_check(str(path), network=network), worktree, Limits(),
                                      project_root=project)
    finally:
        server.close()
        thread.join(5)
    assert run.sandbox == "confined" and run.network is network
    assert "UNIX: DENIED: PermissionError" in run.output and "SOCKETPAIR: pair" in run.output, run.output
    assert got == []


def test_the_filter_exists_for_this_machine() -> None:
    """The filter is not silently absent here (x86-64/aarch64); an unknown machine gets none, said so."""
    assert filter_bytes() is not None and len(filter_bytes() or b"") % 8 == 0
    assert filter_bytes("riscv64") is None
