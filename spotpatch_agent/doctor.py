"""``spotpatch-agent doctor``: is this set-up ready for a job? A checklist with the fix for each item.

Items, in order (docs/configuration.md "spotpatch-agent doctor"):

- ``git`` (required): ``git --version`` runs;
- ``engine``: this engine's version and Python (informational, always passes);
- ``project`` (required): the project is a git top level and not ``blocked`` — the health display of
  ``run`` (reasons, paths, fixes); local changes are a warning (``run`` then needs
  ``--include-local-changes``);
- ``gitdir-files`` (required, only when there is a problem): nothing SpotPatch keeps under the git
  directory (``spotpatch/`` and its folders) is a symlink — one there is never followed;
- ``committed-venv:<folder>`` (warning): a folder at the project root holding ``pyvenv.cfg`` has files
  tracked by git (the fix: ``git rm -r --cached`` it and add it to ``.gitignore``);
- ``config`` (required): ``spotpatch.config.json`` (or ``--config``) is valid JSON matching
  ``TrustedConfig`` — the errors are listed by location, never with the values; an absent file is a warning;
- ``providers`` (required): at least one provider is configured;
- ``key:<providerId>`` (required): the provider's ``apiKeyEnv`` variable is set — the name only, never
  the value;
- ``probe:<modelProfileId>`` (required unless ``--no-probe``): the provider's first model answers the
  capability probe (``provider/probe``: the model listing, then one forced tool round trip) within
  ``--probe-timeout`` seconds; skipped when its key is unset.

Exit 0 when every required item passes, 1 otherwise. ``--json`` prints ``{ok, exitCode, items}`` instead.
Everything shown goes through the redactor (provider messages can quote what a server answered).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from spotpatch_agent import __version__
from spotpatch_agent.errors import GitError
from spotpatch_agent.git_runner import run_git_sync
from spotpatch_agent.policy.redact import REDACTOR, register_provider_secrets, shorten_paths

__all__ = ["Item", "run_doctor", "checklist", "DEFAULT_PROBE_TIMEOUT"]

#: Seconds allowed for one provider's whole probe (listing and both turns) unless ``--probe-timeout``.
DEFAULT_PROBE_TIMEOUT = 30.0
CONFIG_FILE = "spotpatch.config.json"
_MARKS = {"pass": "\u2713", "fail": "\u2717", "warn": "!", "skip": "-"}

Status = Literal["pass", "fail", "warn", "skip"]


@dataclass
class Item:
    """One checklist line: ``status`` ``pass`` / ``fail`` / ``warn`` / ``skip``; a ``required`` item that does
    not pass makes the exit code 1. ``lines`` are indented sub-lines (health details, config errors)."""

    id: str
    title: str
    status: Status
    required: bool
    detail: str
    fix: str | None = None
    lines: list[str] = field(default_factory=list)
    data: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.required and self.status == "fail"


def _clean(text: str) -> str:
    return shorten_paths(REDACTOR(text))


def check_git() -> Item:
    try:
        res = run_git_sync(["--version"], timeout=10, read_only=True, max_bytes=64 * 1024)
    except (OSError, GitError) as exc:
        reason = "TimeoutExpired" if isinstance(exc, GitError) else type(exc).__name__
        return Item("git", "git", "fail", True, f"git does not run ({reason})",
                    "install git and make sure it is on PATH (SpotPatch runs every job in a git worktree).")
    stdout = res.stdout.decode("utf-8", "replace")
    if res.returncode != 0 or not stdout.startswith("git version"):
        return Item("git", "git", "fail", True, f"`git --version` exited {res.returncode}",
                    "repair the git installation (`git --version` must work).")
    return Item("git", "git", "pass", True, stdout.strip())


def check_engine() -> Item:
    where = " in a virtualenv" if sys.prefix != sys.base_prefix else ""
    return Item("engine", "engine", "pass", False,
                f"spotpatch-agent {__version__}, Python {platform.python_version()}{where}")


def load_config_file(file: Path, explicit: bool) -> tuple[Any, Item]:
    """``(TrustedConfig or None, the config item)``."""
    from spotpatch_agent.protocol.models import TrustedConfig
    from spotpatch_agent.run_cli import ConfigFileError, read_config_file

    name = str(file) if explicit else file.name
    if not file.exists():
        if explicit:
            return None, Item("config", "config", "fail", True, f"{name} does not exist",
                              "give --config the path of an existing file.")
        return TrustedConfig(), Item(
            "config", "config", "warn", True, f"no {CONFIG_FILE} at the project root: defaults, no provider",
            f"create {CONFIG_FILE} (docs/configuration.md; `spotpatch-agent schema --config` prints its schema), "
            "or give the Vite plugin its options.")
    try:
        config = read_config_file(file)
    except ConfigFileError as exc:
        fix = ("fix the keys listed (docs/configuration.md; unknown keys are errors)." if exc.lines else
               "fix the file: valid JSON in UTF-8 (an editor using the file's \"$schema\" shows where).")
        return None, Item("config", "config", "fail", True, f"{name} {_clean(exc.reason)}", fix,
                          [_clean(line) for line in exc.lines])
    return config, Item("config", "config", "pass", True,
                        f"{name} is valid ({len(config.providers)} provider(s), {len(config.checks)} check(s))")


async def check_project(project: Path, config: Any) -> Item:
    from spotpatch_agent.protocol.models import Limits
    from spotpatch_agent.run_cli import format_health
    from spotpatch_agent.worktree.health import repo_health

    health = await repo_health(project, config.limits if config is not None else Limits())
    lines = [line[2:] for line in format_health(health)[1:]]  # "- reason: paths", "  fix: …"
    data = health.dump()
    if health.state == "clean":
        return Item("project", "project health", "pass", True, "clean: a job can start", data=data)
    if health.state == "consent-required":
        c = health.counts
        return Item("project", "project health", "warn", True,
                    f"local changes ({c.staged} staged, {c.unstaged} unstaged, {c.untracked} untracked)",
                    "commit or stash them, or let jobs include them (the page's box, "
                    "`spotpatch-agent run --include-local-changes`).", lines, data)
    return Item("project", "project health", "fail", True, "blocked: " + ", ".join(health.reasons),
                None, lines, data)  # each reason's fix is in its lines


def check_keys(config: Any) -> list[Item]:
    if config is None:
        return []
    if not config.providers:
        # Not required: your own agent over MCP does jobs without a model (docs/mcp.md).
        return [Item("providers", "providers", "warn", False, "no provider is configured: Submit cannot run "
                     "(the page offers Copy prompt, and Send to my agent with your own agent: see below)",
                     f"add a provider to {CONFIG_FILE} (docs/configuration.md, Providers).")]
    items = []
    for p in config.providers:
        if os.environ.get(p.api_key_env):
            items.append(Item(f"key:{p.id}", f"provider {p.id} key", "pass", True, f"{p.api_key_env} is set"))
        else:
            items.append(Item(f"key:{p.id}", f"provider {p.id} key", "fail", True, f"{p.api_key_env} is not set",
                              f"set {p.api_key_env} in the environment of the shell that runs Vite or "
                              "`spotpatch-agent run` (never in the config file)."))
    return items


async def check_probes(config: Any, *, probe: bool, timeout: float) -> list[Item]:
    if config is None:
        return []
    items = []
    for p in config.providers:
        if not p.models:
            continue
        model = p.models[0]
        item_id, title = f"probe:{model.id}", f"provider {p.id} probe ({model.id})"
        if not probe:
            items.append(Item(item_id, title, "skip", False, "skipped (--no-probe)"))
        elif not os.environ.get(p.api_key_env):
            items.append(Item(item_id, title, "skip", False, f"skipped: {p.api_key_env} is not set"))
        else:
            items.append(await _probe(p, model, item_id, title, timeout))
    return items


async def _probe(provider: Any, model: Any, item_id: str, title: str, timeout: float) -> Item:
    from spotpatch_agent.engine.service import make_adapter
    from spotpatch_agent.errors import SpotPatchError
    from spotpatch_agent.provider.probe import run_probe

    key = os.environ.get(provider.api_key_env) or None
    register_provider_secrets(provider.base_url, key, provider.headers)
    adapter = make_adapter(provider)
    started = anyio.current_time()
    vision: bool | None = None
    try:
        with anyio.fail_after(timeout + 5):  # run_probe bounds itself; this only guards its clean-up
            outcome = await run_probe(adapter, model=model.model, base_url=provider.base_url, api_key=key,
                                      headers=provider.headers, timeout=timeout,
                                      max_output_tokens=model.output_cap, vision=model.vision)
        ok, message, code, vision = outcome.tool_calling, outcome.message, outcome.code, outcome.vision
    except SpotPatchError as exc:
        ok, message, code = False, exc.message, exc.code
    except TimeoutError:
        ok, message, code = False, f"no answer within {timeout:g} s", None
    finally:
        with anyio.CancelScope(shield=True):
            await adapter.aclose()
    ms = int((anyio.current_time() - started) * 1000)
    text = _clean(message)[:500]
    if ok and vision is False:  # "vision": true, but the provider refused the image part (issue 26)
        return Item(item_id, title, "warn", False, f"reachable, tool calling works; {text} ({ms} ms)",
                    "remove \"vision\" from the model profile, or choose a model that accepts images.")
    if ok:
        images = ", images accepted" if vision else ""
        return Item(item_id, title, "pass", True, f"reachable, tool calling works{images} ({ms} ms)")
    prefix = f"{code.value}: " if code is not None else ""
    return Item(item_id, title, "fail", True, f"{prefix}{text} ({ms} ms)",
                "check baseUrl, the key and the model name (docs/configuration.md, Probe and inline proof); "
                "--no-probe skips this check.")


def check_committed_venvs(project: Path) -> list[Item]:
    """A ``committed-venv`` warning per folder at the project root that holds a ``pyvenv.cfg`` (a Python
    virtualenv) and has files tracked by git: the health check sees a clean tree, but every job's worktree
    then copies the whole virtualenv."""
    items: list[Item] = []
    for venv in sorted(p for p in project.iterdir() if p.is_dir() and (p / "pyvenv.cfg").is_file()):
        try:
            res = run_git_sync(["ls-files", "-z", "--", venv.name], cwd=project, timeout=30, read_only=True)
        except (OSError, GitError):
            continue
        tracked = [f for f in res.stdout.split(b"\0") if f] if res.returncode == 0 else []
        if tracked:
            items.append(Item(f"committed-venv:{venv.name}", f"virtualenv {venv.name}/", "warn", False,
                              f"`{venv.name}/` is committed ({len(tracked)} tracked files)",
                              f"remove it from git (`git rm -r --cached {venv.name}`) and add it to `.gitignore`."))
    return items


def check_gitdir_files(common_dir: Path, git_dir: Path) -> list[Item]:
    """A ``gitdir-files`` failure when something SpotPatch keeps under the git directory (``spotpatch/``,
    its ``audit``, ``journal``, ``quarantine``, ``reviews`` folders, ``write.lock``) is a symlink or not a
    directory: SpotPatch never follows one there (worktree/gitdir_files.py), so jobs, the ledger or crash
    recovery refuse to write. Nothing when all is well."""
    from spotpatch_agent.worktree.gitdir_files import unsafe_entries

    found = sorted({*unsafe_entries(common_dir), *unsafe_entries(git_dir)})
    if not found:
        return []
    return [Item("gitdir-files", "SpotPatch files under .git", "fail", True,
                 f"{len(found)} symlink(s) (or a file where a folder belongs), never followed: jobs, the audit "
                 "ledger or crash recovery cannot write there",
                 "remove it (`rm` the link, not what it points to); SpotPatch makes the folder again. Nothing "
                 "SpotPatch keeps in the git directory is ever a link.",
                 [f"<git dir>/{entry}" for entry in found[:20]])]


async def check_agents(project: Path) -> Item:
    """Bring your own agent (docs/mcp.md): the client set-up line, and whether a dev server's engine of this project
    listens for agents now. Informational: never required."""
    from spotpatch_agent.handoff import channel

    # Path-free like every doctor line; --print-config fills in this machine's command and project.
    setup = ("set up your client once: `spotpatch-agent mcp --print-config claude-code --project .` (or codex, "
             "vscode, cursor) in the app's folder prints its lines (docs/mcp.md)")
    lines = [setup]
    title = "your own agent (MCP)"
    try:
        path = channel.socket_path(await channel.repository_toplevel(project))
        client = await channel.ChannelClient.connect(path)
    except channel.ChannelUnavailable as exc:
        return Item("agents", title, "skip", False, f"not attachable now: {exc}", lines=lines)
    await client.aclose()
    return Item("agents", title, "pass", False, "this project's engine (its dev server) listens for agents: "
                "Send to my agent works once your client runs `spotpatch-agent mcp`", lines=lines)


def run_doctor(project: Path, config_path: Path | None, *, probe: bool = True,
               timeout: float = DEFAULT_PROBE_TIMEOUT) -> list[Item]:
    """Every checklist item for ``project`` (see the module docstring), in order."""
    from spotpatch_agent.worktree.repo import locate

    items = [check_git(), check_engine()]
    config, config_item = load_config_file(config_path or project / CONFIG_FILE, config_path is not None)

    async def main() -> list[Item]:
        found: list[Item] = []
        if items[0].status == "pass":
            layout = await locate(project)
            if layout is None:
                found.append(Item("project", "project health", "fail", True,
                                  f"{project.name or 'the folder'} is not a git repository",
                                  "run `git init` and make a first commit in the project folder."))
            else:
                found.append(await check_project(project, config))
                found.extend(check_gitdir_files(layout.common_dir, layout.git_dir))
                found.extend(check_committed_venvs(project))
        found.append(config_item)
        found.extend(check_keys(config))
        found.extend(await check_probes(config, probe=probe, timeout=timeout))
        if items[0].status == "pass":
            found.append(await check_agents(project))
        return found

    return items + anyio.run(main)


def checklist(items: list[Item]) -> str:
    """The checklist as text: ``✓ title: detail`` per item, its sub-lines and ``fix:`` indented, then the verdict."""
    out = []
    for item in items:
        out.append(f"{_MARKS[item.status]} {item.title}: {item.detail}")
        out.extend(f"    {line}" for line in item.lines)
        if item.fix and item.status in ("fail", "warn"):
            out.append(f"    fix: {item.fix}")
    failed = [i for i in items if i.failed]
    out.append(f"\n{len(failed)} required item(s) failed: " + ", ".join(i.title for i in failed) if failed
               else "\nReady: every required item passed.")
    return "\n".join(out) + "\n"


def doctor_command(project: Path, config_path: Path | None, *, probe: bool, timeout: float, as_json: bool) -> int:
    """``doctor``: print the checklist (or ``{ok, exitCode, items}`` with ``as_json``); 0 when every
    required item passed, else 1."""
    items = run_doctor(project.resolve(), config_path, probe=probe, timeout=timeout)
    code = 1 if any(i.failed for i in items) else 0
    if as_json:
        body = {"ok": code == 0, "exitCode": code, "items": [
            {k: v for k, v in asdict(i).items() if v is not None} for i in items]}
        sys.stdout.write(json.dumps(body, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(checklist(items))
    sys.stdout.flush()
    return code
