"""Breaker findings on the check sandbox (issue 14): each test is one way out that once worked.

- a Unix socket file in a path the sandbox shows (read-only) could still be connected to: ``connect()``
  needs write permission on the socket inode, not a writable mount (fixed: seccomp refuses
  ``socket(AF_UNIX)``, seccomp.py);
- a check could rewrite the worktree's ``.git`` gitfile to a git directory it built itself, whose config
  names a clean filter: the engine's own ``git add --all`` then ran that command on the host, unconfined.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import sys
from pathlib import Path

import pytest

from spotpatch_agent.checks.runner import run_check_process
from spotpatch_agent.checks.sandbox.seccomp import filter_bytes
from spotpatch_agent.protocol.models import CheckConfig, Limits
from tests.checks._support import FILES, run_job_with_check
from tests.conftest import make_repo

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
    try:
        run = await run_check_process(_probe_check(str(path), network=network), worktree, Limits(),
                                      project_root=project)
        server.setblocking(False)  # a connect() completes into the backlog: nothing may be waiting there
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
    assert run.sandbox == "confined" and run.network is network
    assert "UNIX: DENIED: PermissionError" in run.output and "SOCKETPAIR: pair" in run.output, run.output


def test_the_filter_exists_for_this_machine() -> None:
    """The filter is not silently absent here (x86-64/aarch64); an unknown machine gets none, said so."""
    assert filter_bytes() is not None and len(filter_bytes() or b"") % 8 == 0
    assert filter_bytes("riscv64") is None


GITFILE_ATTACK = r'''
import os, subprocess, sys
marker = sys.argv[1]
# A git directory of the check's own making, with a clean filter that runs whatever it names ...
subprocess.run(["git", "init", "-q", "--bare", ".evilgit"], check=True)
with open(".evilgit/config", "a") as f:
    f.write("[core]\n\tbare = false\n[filter \"x\"]\n\tclean = \"touch '" + marker + "'; cat\"\n")
with open(".gitattributes", "w") as f:
    f.write("* filter=x\n")
# ... and the worktree's .git gitfile pointed at it: the engine's next git command in the worktree reads it.
# Written in place, replaced by a rename, or removed and created again: any one is enough.
errors = []
for how in ("write", "rename", "unlink"):
    try:
        if how == "write":
            with open(".git", "w") as f:
                f.write("gitdir: .evilgit\n")
        elif how == "rename":
            with open("gitfile.tmp", "w") as f:
                f.write("gitdir: .evilgit\n")
            os.replace("gitfile.tmp", ".git")
        else:
            os.unlink(".git")
            with open(".git", "w") as f:
                f.write("gitdir: .evilgit\n")
        print("GITFILE: PLANTED by " + how)
        sys.exit(0)
    except OSError as exc:
        errors.append(f"{how}: {exc.strerror}")
print("GITFILE: DENIED: " + "; ".join(errors))
'''


def test_a_check_cannot_redirect_the_engines_git_to_its_own_config(tmp_path: Path) -> None:
    """The check rewrites the worktree's .git file (it may write anything in the worktree); the engine's
    ``git add --all`` for the review must not run a command that check configured, on the host."""
    home = tmp_path / "home"
    home.mkdir()
    project = make_repo(tmp_path / "project", {**FILES, ".gitignore": "node_modules\n"})
    marker = home / f"escaped-{secrets.token_hex(4)}"
    final, _events, text = run_job_with_check(home, project, GITFILE_ATTACK, [str(marker)])
    # The gitfile is shown as an empty read-only device (its text names the checkout's path: issue 25).
    assert re.search(r"GITFILE: DENIED: write: (Read-only file system|Permission denied); "
                     r"rename: Device or resource busy", text), text
    assert not marker.exists(), "a command the check configured ran on the host (unconfined)"
    assert final["status"] in ("failed", "awaiting-review"), final


def test_a_visible_unix_socket_is_refused_through_the_engine(tmp_path: Path) -> None:
    """The same socket attack as above, run by the model's run_check in a real job."""
    home = tmp_path / "home"
    home.mkdir()
    project = make_repo(tmp_path / "project", {**FILES, ".gitignore": "node_modules\n"})
    service = tmp_path / "srv"
    service.mkdir()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(service / "svc.sock"))
    server.listen(4)
    try:
        _final, _events, text = run_job_with_check(home, project, UNIX_PROBE, [str(service / "svc.sock")])
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
    assert "UNIX: DENIED: PermissionError" in text and "Ran confined (sandbox): no network" in text, text


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("how", ["PATH=$HOME", "PATH=checkout", "PATH=checkout's parent", "readPaths symlink to home",
                                 "readPaths symlink to checkout"])
async def test_a_path_entry_or_read_path_naming_a_hidden_root_does_not_unhide_it(
        tmp_path: Path, anyio_backend: str, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``PATH`` entry that is the home itself (or the checkout, or a directory holding it), or a
    ``readPaths`` entry that passes validation but is a symlink resolving to a home or the checkout,
    once showed that whole directory: an API key outside the listed secret stores, the checkout's .env."""
    home = tmp_path / "home"
    (home / ".config" / "openai").mkdir(parents=True)
    (home / ".config" / "openai" / "key").write_text("HOME-SECRET\n")
    monkeypatch.setenv("HOME", str(home))
    project = make_repo(home / "code" / "project", {**FILES, ".gitignore": "node_modules\n.env\n"})
    (project / ".env").write_text("DOTENV-SECRET\n")
    worktree = project / "node_modules" / ".spotpatch" / "job-x"
    worktree.mkdir(parents=True)
    (worktree / "probe.py").write_text(
        "import sys\nfor p in sys.argv[1:]:\n    try:\n        print(open(p).read().strip())\n"
        "    except OSError as e:\n        print('DENIED', type(e).__name__)\n")
    links = tmp_path / "opt"
    links.mkdir()
    (links / "h").symlink_to(home)
    (links / "p").symlink_to(project)
    read_paths: list[str] = []
    if how.startswith("PATH"):
        entry = {"PATH=$HOME": home, "PATH=checkout": project, "PATH=checkout's parent": project.parent}[how]
        monkeypatch.setenv("PATH", f"{entry}{os.pathsep}{os.environ['PATH']}")
    else:
        read_paths = [str(links / ("h" if "home" in how else "p"))]
    check = CheckConfig.model_validate({"id": "probe", "name": "Probe", "command": sys.executable,
                                        "args": ["probe.py", str(home / ".config/openai/key"), str(project / ".env")],
                                        "required": True, "timeoutSec": 30, "readPaths": read_paths})
    run = await run_check_process(check, worktree, Limits(), project_root=project)
    assert run.sandbox == "confined" and run.output.count("DENIED") == 2, run.output
    assert "SECRET" not in run.output


@pytest.mark.parametrize("raw", ["~/.SSH", "~/.Aws/credentials", "/Users/me/.GNUPG", "~/Library/keychains"])
def test_a_secret_store_spelled_in_another_case_is_refused_in_read_paths(raw: str) -> None:
    """On a case-insensitive filesystem (macOS, the Seatbelt sandbox) ``~/.SSH`` opens ``~/.ssh``."""
    from spotpatch_agent.checks.sandbox.plan import read_path_problem

    assert "secret store" in (read_path_problem(raw) or ""), raw


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_filter_loads_without_memfd(tmp_path: Path, anyio_backend: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """An old kernel without memfd_create: the filter goes through an unlinked temp file, still enforced."""
    monkeypatch.delattr(os, "memfd_create")
    monkeypatch.setenv("HOME", str(tmp_path))
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "probe.py").write_text(UNIX_PROBE)
    run = await run_check_process(_probe_check(str(tmp_path / "none.sock")), worktree, Limits())
    assert run.sandbox == "confined" and "UNIX: DENIED: PermissionError" in run.output, run.output


def _run_bpf(program: bytes, nr: int, arch: int, arg0: int, arg1: int = 0) -> int:
    """A classic-BPF interpreter for the few instructions the filter uses (ld abs, and, jeq, jset, ret)."""
    import struct

    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, arg1, 0, 0, 0, 0)
    insns = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code == 0x54:
            acc &= k
            pc += 1
        elif code in (0x15, 0x45):
            hit = acc == k if code == 0x15 else bool(acc & k)
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")


@pytest.mark.parametrize("machine,arch,nrs", [
    ("x86_64", 0xC000003E, {"socket": 41, "add_key": 248, "request_key": 249, "keyctl": 250, "read": 0,
                            "socketpair": 53, "connect": 42, "clone": 56}),
    ("aarch64", 0xC00000B7, {"socket": 198, "add_key": 217, "request_key": 218, "keyctl": 219, "read": 63,
                             "socketpair": 199, "connect": 203, "clone": 220}),
])
def test_the_filter_refuses_exactly_what_it_says(machine: str, arch: int, nrs: dict[str, int]) -> None:
    program = filter_bytes(machine)
    assert program is not None
    allow, eperm = 0x7FFF0000, 0x00050001
    for family in (2, 10, 16):  # AF_INET, AF_INET6, AF_NETLINK
        assert _run_bpf(program, nrs["socket"], arch, family) == allow
    # AF_UNIX, AF_PACKET, AF_BLUETOOTH, AF_ALG, AF_VSOCK, AF_XDP, and any other (issue 25: an allowlist)
    for family in (1, 17, 31, 38, 40, 44, 45, 0xFFFF):
        assert _run_bpf(program, nrs["socket"], arch, family) == eperm, family
    for name in ("add_key", "request_key", "keyctl"):
        assert _run_bpf(program, nrs[name], arch, 0) == eperm, name
    assert _run_bpf(program, 425, arch, 0) == eperm  # io_uring_setup
    for name in ("read", "connect", "clone"):
        assert _run_bpf(program, nrs[name], arch, 1) == allow, name
    # socketpair(AF_UNIX, type): stream and seqpacket, with SOCK_CLOEXEC/SOCK_NONBLOCK; never datagram or raw
    for kind in (1, 5, 1 | 0o2000000, 5 | 0o4000, 1 | 0o2000000 | 0o4000):
        assert _run_bpf(program, nrs["socketpair"], arch, 1, kind) == allow, kind
    for kind in (2, 2 | 0o2000000, 2 | 0o4000, 3, 10, 1 | 0x100):
        assert _run_bpf(program, nrs["socketpair"], arch, 1, kind) == eperm, kind
    assert _run_bpf(program, 41, 0x40000003, 1) == eperm  # i386: another ABI
    if machine == "x86_64":
        assert _run_bpf(program, 0x40000000 | 41, arch, 1) == eperm  # x32


KEYRING_PROBE = r'''
import ctypes, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
keyctl = {"x86_64": 250, "aarch64": 219}[platform.machine()]
key = libc.syscall(keyctl, 10, ctypes.c_int(-3), b"user", sys.argv[1].encode(), 0)  # KEYCTL_SEARCH @s
buf = ctypes.create_string_buffer(200)
n = libc.syscall(keyctl, 11, key, buf, 200) if key > 0 else -1  # KEYCTL_READ
print("KEYRING:", f"SUCCEEDED {buf.raw[:n]!r}" if n > 0 else f"DENIED errno {ctypes.get_errno()}")
'''


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_check_cannot_read_the_engines_session_keyring(tmp_path: Path, anyio_backend: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel keyring is not namespaced: a check inherits the engine's session keyring (on a desktop,
    the login session's) and, as a possessor, could read every key in it."""
    import ctypes
    import platform

    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("the filter covers x86-64 and aarch64")
    libc = ctypes.CDLL(None, use_errno=True)
    add_key = {"x86_64": 248, "aarch64": 217}[platform.machine()]
    name = f"spotpatch-breaker-{secrets.token_hex(4)}"
    secret = b"keyring-canary-" + secrets.token_hex(8).encode()
    if libc.syscall(add_key, b"user", name.encode(), secret, len(secret), ctypes.c_int(-3)) < 0:
        pytest.skip(f"this machine refuses add_key (errno {ctypes.get_errno()})")
    monkeypatch.setenv("HOME", str(tmp_path))
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "probe.py").write_text(KEYRING_PROBE)
    run = await run_check_process(_probe_check(name), worktree, Limits())
    assert run.sandbox == "confined" and "KEYRING: DENIED errno 1" in run.output, run.output
    assert secret.decode() not in run.output


@pytest.mark.anyio
async def test_a_check_command_installed_under_tmp_runs_and_the_rest_of_tmp_stays_hidden(tmp_path: Path) -> None:
    """A clean clone in /tmp runs its checks with the clone's own venv (``/tmp/…/.venv/bin/python``): the
    private /tmp must not hide the check's command. Only the command's install prefix is shown (read-only);
    a file beside it in the host's /tmp stays invisible and nothing can be written there."""
    if not str(tmp_path.resolve()).startswith(os.path.realpath("/tmp") + "/"):
        pytest.fail(f"this test needs its temp dir under /tmp, got {tmp_path}")
    tool = tmp_path / "toolchain"
    (tool / "bin").mkdir(parents=True)
    script = tool / "bin" / "tool"
    script.write_text("#!/bin/sh\necho ran-from-tmp\n"
                      f"cat {tmp_path / 'beside.txt'} 2>/dev/null && echo LEAK\n"
                      f"echo x > {tool / 'written'} 2>/dev/null && echo WROTE\nexit 0\n")
    script.chmod(0o755)
    (tmp_path / "beside.txt").write_text("SECRET-BESIDE\n")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    check = CheckConfig.model_validate({"id": "tool", "name": "Tool", "command": str(script)})
    run = await run_check_process(check, worktree, Limits())
    assert run.sandbox == "confined" and run.ok, run.output
    assert "ran-from-tmp" in run.output
    assert "LEAK" not in run.output and "SECRET-BESIDE" not in run.output and "WROTE" not in run.output
    assert not (tool / "written").exists()
