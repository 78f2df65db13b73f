"""The one place the engine starts git: fixed argv, ``shell=False``, hardened, bounded, killable.

Every git command of the package — the worktree's (:func:`spotpatch_agent.worktree.git.run_git`), the
file tools' (:func:`spotpatch_agent.tools._git.tool_git`), the path policy's ``check-ignore``, ``doctor``
and the demo's project set-up — runs through :func:`run_git_process` (async) or :func:`run_git_sync`
(blocking, for the command-line helpers); ``tests/architecture/test_single_git_runner.py`` fails on any other
subprocess use of git in the package. docs/design.md §8: "Only fixed-argv git subcommands; model text is
never put on a command line" — data that may come from the model travels on stdin or as one argv element
after ``-e``/``--``, never through a shell.

Each call gets a hardened prefix of ``-c`` options so the user's configuration cannot change what we parse
or run: no hooks (``core.hooksPath`` points at the null device), no fsmonitor daemon, no colour, no
column field in ``git grep``, no path quoting, no automatic ``gc``/maintenance (a commit in a linked
worktree would otherwise run ``gc --auto`` on the user's repository), no signing (gpg), git's canonical diff headers and
blank context lines, no ``core.safecrlf`` refusal; never into a submodule (no recursion, submodules ignored
by status and diff), no untracked cache, no transport (every ``protocol.*.allow`` is ``never``, no
credential helper, ``GIT_NO_LAZY_FETCH=1``): nothing a worktree holds makes host git run a program of its
choosing (issue 25). Diffs we parse also pass ``--no-ext-diff --no-textconv`` (``diff.external`` and
textconv drivers are programs, and would change the text).
The user's git configuration and attribute files are otherwise read as git reads them (see
:mod:`spotpatch_agent.worktree.git` for why).

The environment is allowlisted (:data:`GIT_ENV_ALLOWLIST`: provider keys and tokens never reach git, nor
variables that would redirect git to another repository such as ``GIT_DIR``), plus
``GIT_TERMINAL_PROMPT=0`` and ``LC_ALL=C``; read-only calls also set ``GIT_OPTIONAL_LOCKS=0`` so that e.g.
``git status`` never refreshes (writes) the user's index.

Bounds: ``timeout`` seconds (then :class:`~spotpatch_agent.errors.GitError`), ``max_bytes`` of stdout (then
the run is marked ``truncated`` and git is killed), :data:`STDERR_KEEP_BYTES` of stderr kept. git and every
process it started (filters, helpers) run in a session of their own on POSIX, so a timeout, a truncation or
a cancellation kills the whole tree (:func:`spotpatch_agent.process.kill_tree`); cancellation propagates.
When git exits and its output closes, whatever is left in its group (a filter's background child) is killed too.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from spotpatch_agent.errors import GitError
from spotpatch_agent.process import NEW_SESSION, kill_tree

__all__ = [
    "GIT_ENV_ALLOWLIST",
    "CACHED_DIFF_SUBMODULES",
    "HARDENED_PREFIX",
    "STDERR_KEEP_BYTES",
    "GitRun",
    "git_env",
    "run_git_process",
    "run_git_sync",
    "subcommand",
]

#: Environment variables passed through to git; everything else (keys, tokens, GIT_DIR…) is dropped.
GIT_ENV_ALLOWLIST = (
    "PATH",
    "HOME",
    "USERPROFILE",
    "SYSTEMROOT",
    "WINDIR",
    "TMPDIR",
    "TEMP",
    "TMP",
    "XDG_CONFIG_HOME",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
)

#: Options placed before every subcommand (see the module docstring).
HARDENED_PREFIX = (
    "-c", "core.quotepath=false",
    "-c", f"core.hooksPath={os.devnull}",
    "-c", "core.fsmonitor=false",
    "-c", "color.ui=false",
    # search_text parses git grep's ``path\0line\0text`` records: a column field would shift them.
    "-c", "grep.column=false",
    # Never let a command of ours start git's housekeeping in the user's repository (gc packs refs,
    # expires reflogs and prunes worktree registrations; maintenance may run after we exit).
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    # The engine's commits (a worktree's baseline, the demo's set-up) are its own: never signed, so a user's
    # commit.gpgSign never starts gpg.program (a pinentry prompt, a hardware key to touch).
    "-c", "commit.gpgSign=false",
    "-c", "tag.gpgSign=false",
    # The review's text is git's canonical diff whatever the user's diff settings (hunk layout aside:
    # diff.algorithm may place hunks differently, never change what they say).
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "diff.suppressBlankEmpty=false",
    "-c", "diff.relative=false",
    # core.safecrlf only refuses (or warns about) staging a file whose line endings a checkout would change;
    # it never changes bytes. Validation judges that itself (worktree/checkout_form.py), with a clear reason.
    "-c", "core.safecrlf=false",
    # Nothing a job worktree holds may make host git run a program (issue 25; docs/security.md §6). A check
    # can turn a gitlink's empty directory into a repository of its own, with its own config (filters,
    # fsmonitor, hooks…): git must never descend into a submodule — no recursion (checkout, grep, …), no
    # submodule status or summary in status/diff (git status would run the planted repository's filters).
    "-c", "submodule.recurse=false",
    "-c", "diff.ignoreSubmodules=all",
    "-c", "status.submoduleSummary=false",
    # The untracked cache trusts directory mtimes a check controls; without it git lists untracked files
    # by reading the directories every time (and never writes the cache into the index).
    "-c", "core.untrackedCache=false",
    # No transport, ever: the engine never fetches, so a lazy fetch of a partial clone's missing object,
    # an ext:: URL (runs a command) or ssh (core.sshCommand, GIT_SSH*) can never start from a worktree's
    # objects or .gitmodules. protocol.allow covers every protocol without a protocol.<name>.allow of its
    # own: those the user's config may set are pinned one by one. No credential helper either.
    "-c", "protocol.allow=never",
    "-c", "protocol.file.allow=never",
    "-c", "protocol.git.allow=never",
    "-c", "protocol.ssh.allow=never",
    "-c", "protocol.http.allow=never",
    "-c", "protocol.https.allow=never",
    "-c", "protocol.ext.allow=never",
    "-c", "credential.helper=",
)

#: Options of a diff of the index against a commit (``--cached``) that must still show a changed gitlink (the
#: changeset's validation rejects one): ``dirty`` never looks into the submodule's own worktree (for
#: ``--cached`` nothing does), and a gitlink's patch is one ``Subproject commit`` line, never a log or a diff
#: run inside the submodule (a user's ``diff.submodule=diff`` would run git, and its filters, in there).
#: Every other diff or status in a worktree passes ``--ignore-submodules=all`` (docs/security.md §6).
CACHED_DIFF_SUBMODULES = ("--ignore-submodules=dirty", "--submodule=short")

#: Bytes of git's stderr kept (the head: git's first lines say why it failed).
STDERR_KEEP_BYTES = 64 * 1024

#: Default bound of stdout, in bytes, when a caller gives none.
DEFAULT_MAX_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class GitRun:
    """What a git process left: ``returncode`` (None when it was killed because its stdout passed
    ``max_bytes`` or the sink said stop), the raw stdout bytes (empty with a sink), the kept head of stderr,
    and whether stdout was cut (``truncated``)."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    truncated: bool


def git_env(*, read_only: bool = True, index_file: Path | str | None = None) -> dict[str, str]:
    """The allowlisted environment of a git call: :data:`GIT_ENV_ALLOWLIST` plus C locale and no prompts;
    ``GIT_OPTIONAL_LOCKS=0`` when ``read_only``; ``GIT_INDEX_FILE`` when ``index_file`` is given."""
    env = {key: os.environ[key] for key in GIT_ENV_ALLOWLIST if key in os.environ}
    # GIT_NO_LAZY_FETCH (git 2.44+; older gits ignore it, protocol.allow=never stops them): a missing object
    # of a partial clone is an error, never a fetch from the promisor remote.
    env.update({"LC_ALL": "C", "LANGUAGE": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_NO_LAZY_FETCH": "1"})
    if read_only:
        env["GIT_OPTIONAL_LOCKS"] = "0"
    if index_file is not None:
        env["GIT_INDEX_FILE"] = os.fspath(index_file)
    return env


def subcommand(args: Sequence[str]) -> str:
    """The git subcommand ``args`` runs (the first word that is not an option), for messages."""
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("-c", "-C"):
            skip = True
            continue
        if not arg.startswith("-"):
            return arg
    return "command"


def _argv(args: Sequence[str], config: Sequence[str]) -> list[str]:
    return ["git", *HARDENED_PREFIX, *(part for item in config for part in ("-c", item)), *args]


async def run_git_process(
    args: Sequence[str],
    *,
    cwd: Path,
    input: bytes | None = None,
    timeout: float | None = 60,
    read_only: bool = False,
    index_file: Path | str | None = None,
    config: Sequence[str] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    sink: Callable[[bytes], Awaitable[bool]] | None = None,
) -> GitRun:
    """Run ``git <hardened prefix> [-c config…] <args>`` in ``cwd`` and collect what it leaves.

    ``args`` is a fixed argv (never model text as an option); ``input`` is fed to stdin (stdin is the null
    device otherwise, so the engine's own stdin — the JSON-RPC channel — is never inherited). ``timeout`` is
    in seconds (None: the caller's deadline bounds it). ``config`` adds ``-c key=value`` options. Past
    ``max_bytes`` of stdout git is killed and the result is ``truncated`` (not an error: the caller decides
    what partial output means). With ``sink`` stdout is not kept: each chunk is awaited in ``sink`` as it
    arrives and ``sink`` returning False stops git like passing the bound.

    Never raises for git's exit status. Raises :class:`GitError` (``git <subcommand> timed out after N s``)
    on timeout and :class:`OSError` when git cannot be started. On timeout or cancellation git and its
    process tree are killed.
    """
    argv = _argv(args, config)
    try:
        with anyio.fail_after(timeout):
            return await _run(argv, cwd, input or None, git_env(read_only=read_only, index_file=index_file),
                              max_bytes, sink)
    except TimeoutError:
        raise GitError(f"git {subcommand(args)} timed out after {timeout:g} s") from None


async def _run(argv: list[str], cwd: Path, input: bytes | None, env: dict[str, str], max_bytes: int,
               sink: Callable[[bytes], Awaitable[bool]] | None) -> GitRun:
    chunks: list[bytes] = []
    stderr = bytearray()
    size = 0
    truncated = False

    async def drain_stderr(stream: ByteReceiveStream) -> None:
        async for chunk in stream:
            if len(stderr) < STDERR_KEEP_BYTES:
                stderr.extend(chunk[: STDERR_KEEP_BYTES - len(stderr)])

    async def feed(process: Process) -> None:
        assert process.stdin is not None
        try:
            await process.stdin.send(input or b"")
            await process.stdin.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError, ConnectionResetError):
            pass  # git stopped reading (it failed early, or was stopped at the bound); its exit says why

    # Shielded: a cancellation inside the start would leave a started git to asyncio, which kills git alone,
    # never what git already started; delivered at the next checkpoint, it kills the whole tree below.
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            argv,
            stdin=subprocess.PIPE if input else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=NEW_SESSION,
        )
    try:
        async with anyio.create_task_group() as tg:
            assert process.stdout is not None and process.stderr is not None
            tg.start_soon(drain_stderr, process.stderr)
            if input:
                tg.start_soon(feed, process)
            async for chunk in process.stdout:
                if sink is not None:
                    size += len(chunk)
                    if size > max_bytes or not await sink(chunk):
                        truncated = True
                        kill_tree(process)
                        break
                    continue
                if size + len(chunk) > max_bytes:
                    chunks.append(chunk[: max_bytes - size])
                    truncated = True
                    kill_tree(process)
                    break
                chunks.append(chunk)
                size += len(chunk)
            # stdout is at its end (or cut): once git exits, what it started and left running (a filter's
            # background child, perhaps holding git's stderr) is killed, so stderr ends too.
            returncode = await process.wait()
            _kill_group(process.pid)
    except BaseException:
        kill_tree(process)  # also when git itself exited: a process it started may still hold its output
        raise
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                kill_tree(process)
            await process.aclose()
    return GitRun(None if truncated else returncode, b"".join(chunks), bytes(stderr), truncated)


def run_git_sync(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    timeout: float = 60,
    read_only: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> GitRun:
    """:func:`run_git_process` for blocking callers (``doctor``, the demo's set-up): same argv prefix,
    environment, bounds and tree kill, no stdin. ``cwd`` None: the current directory. Raises
    :class:`GitError` on timeout and :class:`OSError` when git cannot be started; never for git's exit
    status."""
    process = subprocess.Popen(
        _argv(args, ()),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=git_env(read_only=read_only),
        start_new_session=NEW_SESSION,
    )
    out = bytearray()
    err = bytearray()
    cut = threading.Event()

    def drain(stream: io.BufferedReader, sink: bytearray, bound: int, stop: bool) -> None:
        read = stream.read1
        while chunk := read(65536):
            room = bound - len(sink)
            sink.extend(chunk[: max(room, 0)])
            if stop and len(chunk) > room:
                cut.set()
                kill_tree(process)
                return

    readers = [threading.Thread(target=drain, args=(process.stdout, out, max_bytes, True), daemon=True),
               threading.Thread(target=drain, args=(process.stderr, err, STDERR_KEEP_BYTES, False), daemon=True)]
    deadline = time.monotonic() + timeout
    try:
        for reader in readers:
            reader.start()
        try:
            returncode = process.wait(timeout)
            # git exited; its stdout closes when the last process holding it does
            readers[0].join(max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            raise GitError(f"git {subcommand(args)} timed out after {timeout:g} s") from None
        if readers[0].is_alive():  # a process git started still holds its output
            raise GitError(f"git {subcommand(args)} timed out after {timeout:g} s")
        _kill_group(process.pid)  # git is done and its output closed: what it left running goes too,
        readers[1].join(max(deadline - time.monotonic(), 0))  # so stderr ends
    finally:
        if process.returncode is None or any(reader.is_alive() for reader in readers):
            kill_tree(process)
            process.wait()
            for reader in readers:
                if reader.is_alive():
                    reader.join(5)  # the tree is gone: its pipes are at end of file
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    truncated = cut.is_set()
    return GitRun(None if truncated else returncode, bytes(out), bytes(err), truncated)


def _kill_group(pid: int) -> None:
    """SIGKILL what is left in the process group of git ``pid`` once git itself exited (POSIX; nothing on
    Windows, where git's children are not grouped). The group id stays taken while a member lives, so it
    names only git's leftovers; an empty group is no error."""
    if NEW_SESSION:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
