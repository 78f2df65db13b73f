"""The agent channel's local checks (docs/security.md §10): a private directory or nothing, a 0600 socket, a dead
engine's socket replaced, a live one never taken over; and ``mcp --print-config`` for each client."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest

from spotpatch_agent.handoff import channel
from spotpatch_agent.handoff.setup import config_text
from tests.engine_client import engine_command

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the agent channel is a Unix socket")


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    return run


def test_the_socket_lives_in_a_private_directory_keyed_by_the_repository(runtime: Path) -> None:
    a, b = channel.socket_path(Path("/x/app")), channel.socket_path(Path("/x/other"))
    assert a.parent == b.parent == runtime / "spotpatch" and a != b
    assert stat.S_IMODE(os.lstat(a.parent).st_mode) == 0o700
    assert len(os.fsencode(a)) < 100  # AF_UNIX paths are short


def test_an_unsafe_directory_is_refused(runtime: Path, tmp_path: Path) -> None:
    (runtime / "spotpatch").mkdir(mode=0o700)
    os.chmod(runtime / "spotpatch", 0o755)
    with pytest.raises(channel.ChannelUnavailable, match="not a private directory"):
        channel.socket_path(Path("/x/app"))
    os.rmdir(runtime / "spotpatch")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (runtime / "spotpatch").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(channel.ChannelUnavailable, match="not a private directory"):
        channel.socket_path(Path("/x/app"))


def test_a_runtime_dir_that_is_not_ours_falls_back_to_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    assert channel.socket_path(Path("/x/app")).parent == Path(f"/tmp/spotpatch-{os.getuid()}")


@pytest.mark.anyio
async def test_a_dead_engines_socket_is_replaced_and_a_live_one_is_never_taken_over(runtime: Path) -> None:
    path = channel.socket_path(Path("/x/app"))
    import socket as sk

    dead = sk.socket(sk.AF_UNIX)
    dead.bind(str(path))
    dead.close()  # the file stays, nobody listens: a crashed engine
    listener = await channel.listen(path)
    async with listener:
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        with pytest.raises(channel.ChannelUnavailable, match="another SpotPatch engine already serves"):
            await channel.listen(path)
    path.unlink(missing_ok=True)
    path.write_text("not a socket")
    with pytest.raises(channel.ChannelUnavailable, match="holds something else"):
        await channel.listen(path)
    assert path.read_text() == "not a socket"


@pytest.mark.anyio
async def test_the_peer_uid_is_read_from_the_connection(runtime: Path) -> None:
    path = channel.socket_path(Path("/x/peer"))
    seen: list[int | None] = []
    listener = await channel.listen(path)

    async def handle(stream) -> None:
        seen.append(channel.peer_uid(stream))
        await stream.aclose()

    async with anyio.create_task_group() as tg, listener:
        tg.start_soon(listener.serve, handle)
        client = await anyio.connect_unix(path)
        with anyio.fail_after(5):
            while not seen:
                await anyio.sleep(0.01)
        await client.aclose()
        tg.cancel_scope.cancel()
    assert seen == [os.getuid() if sys.platform.startswith("linux") else None]


def test_print_config_gives_each_clients_own_format(tmp_path: Path) -> None:
    command, project = "/opt/venv/bin/spotpatch-agent", Path("/home/me/app")
    claude = config_text("claude-code", command, project)
    assert "claude mcp add spotpatch -- /opt/venv/bin/spotpatch-agent mcp --project /home/me/app" in claude
    codex = tomllib.loads(config_text("codex", command, project).split("\n", 1)[1])
    assert codex == {"mcp_servers": {"spotpatch": {"command": command, "args": ["mcp", "--project", str(project)]}}}
    vscode = json.loads(config_text("vscode", command, project).split("\n", 1)[1])
    assert vscode["servers"]["spotpatch"] == {"type": "stdio", "command": command,
                                              "args": ["mcp", "--project", "${workspaceFolder}"]}
    cursor = json.loads(config_text("cursor", command, project).split("\n", 1)[1])
    assert cursor["mcpServers"]["spotpatch"]["args"] == ["mcp", "--project", "${workspaceFolder}"]
    printed = subprocess.run([*engine_command()[:-1], "mcp", "--print-config", "codex", "--project", str(tmp_path)],
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert printed.returncode == 0 and f'"{tmp_path.resolve()}"' in printed.stdout
