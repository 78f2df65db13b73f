"""Issue 25: a confined check's view of the host is an allowlist, and nothing it sees leads home.

Each test once failed: with ``/`` shown read-only minus the homes and the checkout, a check read a sibling
project's ``.env``, a WSL-style ``/mnt/c/Users/<u>/.aws``, a ``0600`` file in ``/var/tmp``, another job's
worktree under a ``TMPDIR`` that is not ``/tmp``, and (as root, as in CI) ``/etc/wireguard/*.conf`` and
``/etc/krb5.keytab``; it opened a FIFO outside the worktree and read ``/sys``; and ``$HOME``, its working
directory, ``/proc/1/cmdline`` (bwrap's whole argv) and its ``PATH`` named the host's home and checkout,
so a check printing them base64-encoded handed them past the output's relativizer to the model.

The places outside ``/tmp`` are created for the test as root (CI runs as root) and removed after.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotpatch_agent.checks.runner import run_check_process
from spotpatch_agent.checks.sandbox.plan import SANDBOX_MODULES, SANDBOX_WORK, build_plan, etc_masks
from spotpatch_agent.protocol.models import CheckConfig, Limits
from tests.checks._support import FILES, run_job_with_check
from tests.conftest import make_repo

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the confinement proven here is Linux's")
as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="creates files in /, /mnt, /var/tmp and /etc (CI runs as root)")

READ_PROBE = r'''
import os, sys
for number, path in enumerate(sys.argv[1:]):
    try:
        if os.path.isdir(path):
            got = "listed " + ",".join(sorted(os.listdir(path)))
        else:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO: opened, never waited on
            got = "read " + os.read(fd, 200).decode("utf-8", "replace")
            os.close(fd)
        print(f"PROBE {number}: SUCCEEDED: {got}")
    except OSError as exc:
        print(f"PROBE {number}: DENIED: {type(exc).__name__}")
'''


def probe_check(*paths: str) -> CheckConfig:
    return CheckConfig.model_validate({"id": "probe", "name": "Probe", "command": sys.executable,
                                       "args": ["probe.py", *paths], "timeoutSec": 30})


class Places:
    """Files and directories created outside the test's temp dir; each removed by :meth:`cleanup`."""

    def __init__(self) -> None:
        self.created: list[Path] = []

    def file(self, path: Path, text: str, mode: int = 0o644) -> Path:
        missing = [p for p in [path.parent, *path.parent.parents] if not p.exists()]
        path.parent.mkdir(parents=True, exist_ok=True)
        self.created += sorted(missing, key=lambda p: len(p.parts))[:1]  # the outermost new directory
        path.write_text(text)
        path.chmod(mode)
        if not missing:
            self.created.append(path)
        return path

    def cleanup(self) -> None:
        for path in reversed(self.created):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


@pytest.fixture
def places() -> Iterator[Places]:
    found = Places()
    try:
        yield found
    finally:
        found.cleanup()


@pytest.fixture
def canary() -> str:
    return "sk-view-canary-" + secrets.token_hex(10)


@as_root
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_secrets_outside_home_and_checkout_are_not_visible(places: Places, canary: str, anyio_backend: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The project lives outside /tmp and the home (``/spotpatch-test-*/code/app``, as in a container's
    ``/work`` or ``/srv``), without ``node_modules``, so its worktree goes to ``TMPDIR`` — which is not /tmp."""
    tag = secrets.token_hex(4)
    base = Path(f"/spotpatch-test-{tag}")
    places.file(base / "code" / "sibling" / ".env", f"SIBLING_KEY={canary}\n")
    project = make_repo(base / "code" / "app", FILES)
    tmpdir = base / "tmp"
    other = places.file(tmpdir / "spotpatch-worktrees" / "job-other" / "secret.txt", canary)
    worktree = tmpdir / "spotpatch-worktrees" / "job-mine"
    worktree.mkdir()
    (worktree / "probe.py").write_text(READ_PROBE)
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setattr("tempfile.tempdir", None)
    home = base / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    aws = places.file(Path(f"/mnt/spotpatch-test-{tag}/c/Users/u/.aws/credentials"),
                      f"aws_secret_access_key = {canary}\n")
    var_tmp = places.file(Path(f"/var/tmp/spotpatch-test-{tag}.secret"), canary, 0o600)
    fifo = Path(f"/var/tmp/spotpatch-test-{tag}.fifo")
    os.mkfifo(fifo)
    places.created.append(fifo)
    base_fifo = base / "code" / "pipe"
    os.mkfifo(base_fifo)
    wireguard = Path("/etc/wireguard")
    made_wireguard = not wireguard.exists()
    if made_wireguard:
        wireguard.mkdir(mode=0o700)
        places.created.append(wireguard)
    wg = wireguard / f"spotpatch-test-{tag}.conf"
    places.file(wg, f"[Interface]\nPrivateKey = {canary}\n", 0o600)
    keytab = Path("/etc/krb5.keytab")
    probes = [base / "code" / "sibling" / ".env", base / "code", aws, aws.parents[1], var_tmp, fifo, base_fifo,
              other, tmpdir / "spotpatch-worktrees", wg, Path("/etc/shadow"), Path("/mnt"), Path("/media"),
              Path("/srv"), Path("/home"), Path("/root/.bashrc"), Path("/var/lib")]
    if not keytab.exists():  # never clobber a real one
        places.file(keytab, canary, 0o600)
        probes.append(keytab)
    run = await run_check_process(probe_check(*map(str, probes)), worktree, Limits(), project_root=project)
    assert run.sandbox == "confined", run.output
    for number, path in enumerate(probes):
        assert f"PROBE {number}: DENIED" in run.output, (path, run.output)
    assert canary not in run.output and "SUCCEEDED" not in run.output, run.output
    assert other.read_text() == canary and var_tmp.read_text() == canary


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_sys_is_hidden_but_the_cpu_topology(tmp_path: Path, anyio_backend: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``/sys`` names the machine (DMI serials, network interfaces, block devices, the host's cgroups): a
    check sees only ``/sys/devices/system/cpu``, which glibc reads for the CPU count."""
    monkeypatch.setenv("HOME", str(tmp_path))
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "probe.py").write_text(READ_PROBE + "print('CPUS', os.cpu_count())\n")
    hidden = ["/sys/class", "/sys/class/net", "/sys/kernel", "/sys/firmware", "/sys/fs/cgroup", "/sys/block",
              "/sys/devices/virtual/dmi"]
    run = await run_check_process(probe_check(*hidden, "/sys/devices/system/cpu/online"), worktree, Limits())
    for number, path in enumerate(hidden):
        assert f"PROBE {number}: DENIED" in run.output, (path, run.output)
    assert f"PROBE {len(hidden)}: SUCCEEDED" in run.output, run.output
    assert f"CPUS {os.cpu_count()}" in run.output


LEAK_PROBE = r'''
import base64, json, os
def b64(data):
    return base64.b64encode(data if isinstance(data, bytes) else data.encode()).decode()
def raw(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        return type(exc).__name__.encode()
out = {"home": b64(os.environ.get("HOME", "")), "pwd": b64(os.getcwd()), "realpwd": b64(os.path.realpath(".")),
       "cmdline1": b64(raw("/proc/1/cmdline")), "cmdline": b64(raw("/proc/self/cmdline")),
       "environ": b64(raw("/proc/self/environ")), "env": b64(json.dumps(dict(os.environ))),
       "gitfile": b64(raw(".git")), "mountinfo": b64(raw("/proc/self/mountinfo"))}
print("LEAK " + json.dumps(out))
'''


def decoded(text: str) -> dict[str, str]:
    line = next(line for line in text.splitlines() if line.startswith("LEAK "))
    return {k: base64.b64decode(v).decode("utf-8", "replace") for k, v in json.loads(line[5:]).items()}


def test_a_check_printing_paths_in_base64_hands_the_model_no_host_path(tmp_path: Path) -> None:
    """Through the real engine (``serve``, a scripted provider): the model writes a probe that prints
    base64 of ``$HOME``, its working directory, ``/proc/1/cmdline``, its environment and the worktree's
    ``.git``; the tool result it gets back, decoded, names neither the home, nor the checkout, nor the job
    worktree. The engine's ``PATH`` holds a directory in the home that is not there and the project's
    ``node_modules/.bin`` (as ``npm run dev`` sets it): the check's ``PATH`` has neither host spelling. (A
    toolchain installed under the home is shown at its own path, which names the home: docs/security.md.)"""
    home = tmp_path / "home"
    home.mkdir()
    project = make_repo(tmp_path / "project", {**FILES, ".gitignore": "node_modules\n"})
    (project / "node_modules" / ".bin").mkdir(parents=True)
    path = os.pathsep.join([str(home / "bin"), str(project / "node_modules" / ".bin"), str(project / "bin"),
                            os.environ["PATH"]])
    final, _events, text = run_job_with_check(home, project, LEAK_PROBE, [], extra_env={"PATH": path})
    seen = decoded(text)
    forbidden = {str(home), str(project), os.path.realpath(home), os.path.realpath(project)}
    for name in ("home", "pwd", "realpwd", "cmdline1", "cmdline", "environ", "env", "gitfile"):
        for host in forbidden:
            assert host not in seen[name], (name, seen[name])
    assert seen["pwd"] == SANDBOX_WORK and seen["home"] == "/tmp/home"
    argv1 = seen["cmdline1"].split("\0")
    assert argv1[1] == "--args" and argv1[2].isdigit() and argv1[3] == "--", argv1  # bwrap's options in a descriptor
    env_path = json.loads(seen["env"])["PATH"].split(os.pathsep)
    assert SANDBOX_MODULES + "/.bin" in env_path and str(home / "bin") not in env_path
    # Known and documented (docs/security.md): the kernel lists each bind mount's source directory in
    # mountinfo, so the worktree's host path shows there. The home, holding no toolchain, does not.
    assert str(home) not in seen["mountinfo"] and SANDBOX_WORK in seen["mountinfo"]
    assert final["status"] in ("failed", "awaiting-review"), final


DGRAM_PROBE = r'''
import socket, sys
for label, attempt in (
        ("DGRAM-PAIR", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)),
        ("VSOCK", lambda: socket.socket(40, socket.SOCK_STREAM)),
        ("ALG", lambda: socket.socket(38, socket.SOCK_SEQPACKET))):
    try:
        got = attempt()
        if label == "DGRAM-PAIR":
            for target in sys.argv[1:]:
                try:
                    got[0].sendto(b"stolen", target)
                    print(f"{label}: SUCCEEDED: sent to {target}")
                except OSError as exc:
                    print(f"{label}: sendto {target}: {type(exc).__name__}")
        else:
            print(f"{label}: SUCCEEDED")
    except OSError as exc:
        print(f"{label}: DENIED: {type(exc).__name__}")
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
a.sendall(b"pair")
print("STREAM-PAIR:", b.recv(4).decode())
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
a.sendall(b"seq")
print("SEQPACKET-PAIR:", b.recv(4).decode())
'''


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("network", [False, True])
async def test_no_datagram_socketpair_or_vsock(tmp_path: Path, anyio_backend: str, network: bool,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A datagram socket bound under the project's ``node_modules`` (visible, read-only): an unconnected
    datagram socket from ``socketpair`` could ``sendto`` it (seccomp refused only ``socket(AF_UNIX)``);
    ``AF_VSOCK`` (a VM's or WSL2's host services) and ``AF_ALG`` were not filtered. Stream and seqpacket
    pairs, what runtimes use for a child's stdio, keep working."""
    import socket

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    project = make_repo(tmp_path / "project", FILES)
    worktree = project / "node_modules" / ".spotpatch" / "job-x"
    worktree.mkdir(parents=True)
    (worktree / "probe.py").write_text(DGRAM_PROBE)
    target = project / "node_modules" / "dgram.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(target))
    try:
        check = CheckConfig.model_validate({"id": "probe", "name": "Probe", "command": sys.executable,
                                            "args": ["probe.py", str(target), SANDBOX_MODULES + "/dgram.sock"],
                                            "network": network})
        run = await run_check_process(check, worktree, Limits(), project_root=project)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.recv(64)
    finally:
        server.close()
    for label in ("DGRAM-PAIR", "VSOCK", "ALG"):
        assert f"{label}: DENIED: PermissionError" in run.output, run.output
    assert "STREAM-PAIR: pair" in run.output and "SEQPACKET-PAIR: seq" in run.output, run.output


def test_etc_masks_are_what_other_users_cannot_read(tmp_path: Path) -> None:
    """The ``/etc`` rule on a made-up tree: files without ``o+r`` and directories without ``o+rx`` are
    masked (a directory whole); world-readable entries and symlinks are left alone."""
    etc = tmp_path / "etc"
    for rel, mode in (("passwd", 0o644), ("shadow", 0o640), ("krb5.keytab", 0o600), ("ssl/certs/ca.pem", 0o644),
                      ("wireguard/wg0.conf", 0o600), ("sudoers.d/x", 0o440), ("traverse-only/f", 0o644)):
        (etc / rel).parent.mkdir(parents=True, exist_ok=True)
        (etc / rel).write_text("x")
        (etc / rel).chmod(mode)
    (etc / "wireguard").chmod(0o700)
    (etc / "traverse-only").chmod(0o711)
    (etc / "link").symlink_to(etc / "shadow")
    got = etc_masks(str(etc))
    assert got == sorted(str(etc / r) for r in ("krb5.keytab", "shadow", "sudoers.d/x", "traverse-only",
                                                "wireguard")), got
    assert stat.S_IMODE((etc / "passwd").stat().st_mode) == 0o644


def test_a_path_entry_in_a_sibling_checkout_shows_its_bin_not_the_checkout(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``PATH`` entry ``<sibling>/bin`` used to be harmless (everything was visible); with an allowlist
    its install prefix would show the sibling project whole, ``.env`` and all. A prefix that holds a
    project (``.git``, ``package.json``, ``.env``) is not shown; an install prefix (``/opt/node/bin`` →
    ``/opt/node``) is. Entries under ``/mnt``, ``/media``, ``/var`` or ``/run`` are never shown, and the
    check's ``PATH`` keeps only what it can see, as it sees it."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    sibling = tmp_path / "sibling"
    (sibling / "bin").mkdir(parents=True)
    (sibling / ".env").write_text("KEY=x\n")
    install = tmp_path / "node-v20"
    (install / "bin").mkdir(parents=True)
    (install / "lib").mkdir()
    project = make_repo(tmp_path / "project", FILES)
    (project / "node_modules" / ".bin").mkdir(parents=True)
    worktree = project / "node_modules" / ".spotpatch" / "job-x"
    worktree.mkdir(parents=True)
    entries = [str(sibling / "bin"), str(install / "bin"), "/mnt/c/Windows/System32", "/run/user/0/bin",
               str(project / "node_modules" / ".bin"), str(tmp_path / "home" / "bin"), "/usr/bin"]
    plan = build_plan(cwd=worktree, temp_dir=tmp_path / "t", network=False, env={"PATH": os.pathsep.join(entries)},
                      project_root=project)
    assert sibling / "bin" in plan.read_only and sibling not in plan.read_only
    assert install in plan.read_only
    assert plan.path_inside(os.pathsep.join(entries), relocate=True).split(os.pathsep) == [
        str(sibling / "bin"), str(install / "bin"), SANDBOX_MODULES + "/.bin", "/usr/bin"]
    assert plan.inside(worktree / "src", relocate=True) == SANDBOX_WORK + "/src"
    assert plan.inside(project / ".env", relocate=True) is None
    assert plan.inside(project / "node_modules" / ".spotpatch" / "job-other", relocate=True) is None
