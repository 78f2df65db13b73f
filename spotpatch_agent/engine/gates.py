"""Apply modes, the final check stage and the auto-apply gates (docs/design.md §9, §10; spec "验证",
"审阅、应用与撤销").

Three parts; everything but :func:`run_final_checks` is pure:

- **Mode policy** (``initialize`` and ``job/create``; defined in the light engine/modes.py, re-exported
  here, so that ``engine.service`` answers ``initialize`` without importing this module).
  :func:`offered_modes` is the single list of modes the engine accepts and the page may offer: ``review``
  always; ``trusted-auto`` when the trusted config sets ``modes.trustedAuto`` (then exactly ``review`` and
  ``trusted-auto``: docs/design.md §10, spec
  "只提供 review | trusted-auto"); else ``auto`` when it sets ``modes.auto``. :func:`check_mode_request`
  raises ``INVALID_REQUEST`` for any mismatch between that policy, ``applyMode`` and
  ``trustedFastModeConsent``.
- **Final checks** (:func:`run_final_checks`, review and auto only): the required checks in config
  order, each either the model's own ``run_check`` result on the final worktree version (reused, not run
  again) or run now by the host; a non-required check is shown only when the model ran it on the final
  version. Around every host run the worktree fingerprint is re-read: a check that changed it fails the
  job (``CHECK_FAILED``) and its writes never reach the diff. The trusted config has no separate class of
  "static format/syntax checks" (docs/design.md §9 step 2): such a check is an ordinary check listed first.
- **Auto gates** (:func:`auto_apply_blockers`): the reasons, if any, why ``auto`` must fall back to
  review instead of applying: the named path classes below, then any other file outside the allowlist of
  what ``auto`` may write (engine/auto_allow.py). Baselines are checked by Apply itself (``APPLY_CONFLICT``
  → review).

Consent is never stored by the engine beyond the job's frozen ``JobCreateParams`` in memory: it is
checked per request and covers only that job, its mode and its provider (spec: "同意不写盘、不跨模式、
会话或 provider 继承").
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from spotpatch_agent.engine.auto_allow import added_loader_rules, executable_files, review_kind
from spotpatch_agent.engine.modes import check_mode_request, includes_local_changes, offered_modes
from spotpatch_agent.errors import JobFailure
from spotpatch_agent.policy.paths import is_protected
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import CheckConfig, FileStat, Limits

if TYPE_CHECKING:
    from spotpatch_agent.checks.runner import CheckRun

__all__ = [
    "DEPENDENCY_FILES",
    "UNPROVEN",
    "FinalCheck",
    "GateFacts",
    "auto_apply_blockers",
    "check_input_paths",
    "check_mode_request",
    "checks_failure",
    "includes_local_changes",
    "is_check_config",
    "is_dependency_file",
    "is_dev_server_config",
    "is_tooling_config",
    "offered_modes",
    "run_final_checks",
]

# ---------------------------------------------------------------- path classes of the auto gates

#: File names (any directory, case-insensitive) that declare, pin or configure dependencies.
DEPENDENCY_FILES = frozenset({
    "package.json", "package-lock.json", "npm-shrinkwrap.json", "pnpm-lock.yaml", "pnpm-workspace.yaml",
    ".pnpmfile.cjs", "yarn.lock", ".yarnrc", ".yarnrc.yml", "bun.lockb", "bun.lock", ".npmrc",
    "deno.json", "deno.jsonc", "deno.lock",
    "requirements.txt", "pyproject.toml", "poetry.lock", "uv.lock", "pipfile", "pipfile.lock",
    "cargo.toml", "cargo.lock", "go.mod", "go.sum", "gemfile", "gemfile.lock", "composer.json", "composer.lock",
})
#: File names whose change needs the dev server restarted or changes how it builds (case-insensitive).
_DEV_SERVER_CONFIG = re.compile(
    r"(?:vite|next|nuxt|svelte|astro|remix|postcss|tailwind|babel|webpack|rollup)\.config\.[^/]+"
    r"|spotpatch\.config\.json|[tj]sconfig[^/]*\.json|\.postcssrc(?:\.[^/]*)?|\.babelrc(?:\.[^/]*)?"
)


def _name(path: str) -> str:
    return PurePosixPath(path).name.casefold()


#: Package-manager configuration by pattern (any directory, case-insensitive): ``.yarnrc``, ``.yarnrc.yml``,
#: any other ``.yarnrc*``; the pnpm hook file in every module flavour (``.pnpmfile.cjs``, ``.mjs``, ``.js``).
_DEPENDENCY_PATTERN = re.compile(r"\.yarnrc[^/]*|\.pnpmfile\.[cm]?js|\.?bunfig\.toml")


def is_dependency_file(path: str) -> bool:
    """Whether a relative POSIX path is a dependency manifest, lockfile or package-manager config
    (``.npmrc``, ``.yarnrc*``, ``.pnpmfile.*``, ``bunfig.toml``: they change what an install fetches and runs)."""
    name = _name(path)
    return name in DEPENDENCY_FILES or _DEPENDENCY_PATTERN.fullmatch(name) is not None


#: File names that configure how a check judges the code (linters, formatters, test runners): a change to one
#: can make a check pass without the code being right, so auto does not trust that check's pass.
_CHECK_CONFIG = re.compile(
    r"(?:eslint|prettier|stylelint|biome|vitest|vitest\.workspace|jest|playwright|cypress|karma|ava|lint-staged"
    r"|commitlint|oxlint|dprint)\.config\.[^/]+|\.(?:eslintrc|prettierrc|stylelintrc|mocharc|swcrc)(?:\.[^/]*)?"
    r"|\.eslintignore|\.prettierignore|biome\.jsonc?|\.oxlintrc\.json|dprint\.jsonc?|deno\.jsonc?"
    r"|conftest\.py|pytest\.ini|tox\.ini|setup\.cfg|\.flake8|\.pylintrc|ruff\.toml|\.ruff\.toml|mypy\.ini|\.mypy\.ini"
)


def is_check_config(path: str) -> bool:
    """Whether a relative POSIX path configures a linter, formatter or test runner (``eslint.config.js``,
    ``.eslintrc.json``, ``vitest.config.ts``, ``conftest.py`` …; case-insensitive, any directory)."""
    return _CHECK_CONFIG.fullmatch(_name(path)) is not None


def check_input_paths(checks: Sequence[CheckConfig]) -> set[str]:
    """Relative POSIX paths (casefolded, ``./`` dropped) that a check's ``command`` or ``args`` name: a
    worktree file the check executes or reads by name (``./scripts/check.sh``, ``node scripts/verify.mjs``,
    ``--config=lint.json``). Absolute paths and plain words are kept too; they simply never match a changed
    relative path."""
    found: set[str] = set()
    for check in checks:
        for token in (check.command, *check.args):
            for part in (token, token.partition("=")[2]):
                part = part.strip().replace("\\", "/")
                while part.startswith("./"):
                    part = part[2:]
                if part:
                    found.add(part.casefold())
    return found


def is_dev_server_config(path: str) -> bool:
    """Whether a relative POSIX path is dev-server or build configuration (``vite.config.*``,
    ``tsconfig*.json`` — any name starting ``tsconfig`` and ending ``.json``, so ``tsconfig.build.json`` and
    ``tsconfig-app.json`` too; it also configures a type-check —, ``spotpatch.config.json``,
    PostCSS/Tailwind/Babel configs …). ``.env`` and ``.env.*`` are protected paths, rejected before this gate;
    other ``.env*`` names are :func:`is_tooling_config`."""
    return _DEV_SERVER_CONFIG.fullmatch(_name(path)) is not None


#: Directories (any depth, case-insensitive) whose files configure git hooks or CI: what runs on the next
#: ``git commit``/``push`` or in CI with its secrets.
_TOOLING_DIRS = frozenset({".github", ".husky", ".githooks", ".circleci", ".gitlab"})
#: File names (any directory, case-insensitive) that change how git or the user's tools treat the project:
#: git attributes (filters, diff/merge drivers, eol), ignore rules, submodules, hook managers, CI, and
#: ``.env*`` names that are not already protected (``.envrc`` is run by direnv on ``cd``).
_TOOLING_NAME = re.compile(
    r"\.git(?:attributes|ignore|modules)|\.env[^/]*|\.gitlab-ci\.ya?ml|\.pre-commit-config\.ya?ml"
    r"|\.?lefthook(?:-local)?\.ya?ml|\.travis\.yml|azure-pipelines\.ya?ml|jenkinsfile"
)


def is_tooling_config(path: str) -> bool:
    """Whether a relative POSIX path configures git, git hooks, CI or the shell environment
    (``.gitattributes``, ``.gitignore``, ``.gitmodules`` in any directory; anything under ``.github/``,
    ``.husky/``, ``.githooks/``, ``.circleci/``, ``.gitlab/``; ``.gitlab-ci.yml``, ``.pre-commit-config.yaml``,
    ``lefthook.yml``; ``.envrc`` and other ``.env*`` names). Such a change alters what git or a tool does
    with the project outside this job, so ``auto`` leaves it to review."""
    segments = path.casefold().split("/")
    return (any(s in _TOOLING_DIRS for s in segments[:-1])
            or _TOOLING_NAME.fullmatch(segments[-1]) is not None)


# ---------------------------------------------------------------- final checks


@dataclass(frozen=True)
class FinalCheck:
    """One check result of the final stage: ``run`` and whether it is the model's own run on the final
    worktree version (``reused``: the host did not run it again)."""

    run: CheckRun
    reused: bool


async def run_final_checks(
    checks: Sequence[CheckConfig],
    *,
    cwd: Path,
    limits: Limits,
    fresh: Mapping[str, CheckRun],
    fingerprint: Callable[[], Awaitable[str]],
    on_result: Callable[[FinalCheck], None],
    project_root: Path | None = None,
    sandbox: str = "required",
) -> list[FinalCheck]:
    """The check stage of docs/design.md §9, in config order; ``on_result`` is called for each result as it is
    known (the job emits a ``check`` event).

    ``fresh``: ``checkId → CheckRun`` of the model's runs on the current worktree version. A required check
    with a fresh result is reused; any other required check is run by the host
    (:func:`spotpatch_agent.checks.runner.run_check_process`) in ``cwd``. A non-required check appears only
    with a fresh result (the host never runs it). ``fingerprint()`` is awaited before and after every host
    run. Raises ``JobFailure(CHECK_FAILED)`` when a host-run check changed the worktree (its writes are
    never collected: the diff was taken before this stage) or left what host git must not meet (a ``.git``,
    a special file, a new oversized file: worktree/scan.py, scanned before each fingerprint and removed
    before any git command reads the tree; issue 25). A failed required check is a result, not an
    exception: see :func:`checks_failure`. ``sandbox``: the trusted config's policy (checks/runner.py); raises
    ``SandboxUnavailable`` (``CHECK_FAILED``) when it is ``required`` and nothing can confine the check.
    Cancellation kills the running check."""
    # Imported here, not at the top: engine.service imports this module and must stay light (cold start).
    from spotpatch_agent.checks.runner import run_check_process
    from spotpatch_agent.worktree.scan import after_check, before_check, left_behind

    results: list[FinalCheck] = []
    for check in checks:
        run = fresh.get(check.id)
        if run is not None:
            result = FinalCheck(run=run, reused=True)
        elif check.required:
            # Scanned before every host git command around the check (issue 25, worktree/scan.py).
            cap = limits.get("editableFileMaxBytes")
            scanned = await before_check(cwd, max_file_bytes=cap)
            before = await fingerprint()
            try:
                run = await run_check_process(check, cwd, limits, project_root=project_root,
                                              sandbox="warn" if sandbox == "warn" else "required")
            finally:
                found = await after_check(cwd, max_file_bytes=cap, before=scanned)
            result = FinalCheck(run=run, reused=False)
            if found:
                on_result(result)
                raise JobFailure(ErrorCode.CHECK_FAILED, left_behind(f"{check.id} ({check.name})", found)
                                 + " The job stops; fix the check's command.")
            if await fingerprint() != before:
                on_result(result)
                raise JobFailure(
                    ErrorCode.CHECK_FAILED,
                    f"Check {check.id} ({check.name}) changed files in the worktree; checks must not write "
                    "files. Its changes were discarded and the job stops; fix the check's command.",
                )
        else:
            continue
        results.append(result)
        on_result(result)
    return results


def checks_failure(checks: Sequence[CheckConfig], results: Sequence[FinalCheck]) -> JobFailure | None:
    """``JobFailure(CHECK_FAILED)`` naming every required check that did not pass, or ``None``.

    A failed required check fails the job in review and auto alike (spec "required check 失败时": the
    job returns the diff, the failed checks and their bounded logs; there is no "apply anyway")."""
    by_id = {r.run.check_id: r.run for r in results}
    failed = []
    for check in checks:
        if not check.required:
            continue
        run = by_id.get(check.id)
        if run is None:
            failed.append(f"{check.id} (did not run)")
        elif not run.ok:
            failed.append(f"{check.id} ({run.outcome()})")
    if not failed:
        return None
    return JobFailure(
        ErrorCode.CHECK_FAILED,
        "Required check failed: " + ", ".join(failed) + ". The diff and the check output are kept for "
        "diagnosis; this change cannot be applied. Refine the instructions and start a new job, or copy the prompt.",
    )


# ---------------------------------------------------------------- auto gates


#: The capability gate's reason (also used by trusted-auto, fail-closed).
UNPROVEN = "the model's tool calling is not proven (no passed probe, no tool round trip)"


@dataclass(frozen=True)
class GateFacts:
    """What the auto gates look at (docs/design.md §10 ``auto``).

    ``capability_proven``: the explicit probe passed this session, or this job completed a tool round
    trip. ``files``: the validated changeset. ``checks``: the trusted checks; ``results``: the final stage."""

    capability_proven: bool
    files: Sequence[FileStat]
    checks: Sequence[CheckConfig]
    results: Sequence[FinalCheck]
    #: A ``run_check`` of the model changed the worktree during the run: its writes are in the diff but
    #: were never made by the path-policed file tools (tools/executor.py ``checks_changed_files``).
    check_wrote: bool = False
    #: The change's unified diff (``Job.diff``), scanned for executable files and for stylesheet rules that
    #: load a module into Node (engine/auto_allow.py).
    diff: str = ""


def _paths(paths: list[str]) -> str:
    shown = ", ".join(paths[:5])
    return shown + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


def _not_auto_writable(paths: Sequence[str]) -> list[str]:
    """``"<path> is <kind>"`` for each of ``paths`` outside auto's allowlist (engine/auto_allow.py), the first
    five, then how many more."""
    found = [(path, kind) for path in paths if (kind := review_kind(path)) is not None]
    reasons = [f"{path} is {kind}" for path, kind in found[:5]]
    if len(found) > 5:
        reasons.append(f"{len(found) - 5} more files are outside what auto may write")
    return reasons


def auto_apply_blockers(facts: GateFacts) -> list[str]:
    """Every reason ``auto`` must not apply (empty: all gates hold). Each reason is a short sentence
    fragment for the status message, e.g. ``"the change deletes src/old.ts"`` or, for a file outside the
    allowlist of engine/auto_allow.py that no earlier reason named, ``".vscode/tasks.json is under a
    dot-directory (.vscode/: editor, tool or CI configuration)"``."""
    reasons: list[str] = []
    if not facts.capability_proven:
        reasons.append(UNPROVEN)
    by_id = {r.run.check_id: r.run for r in facts.results}
    for check in facts.checks:
        if check.required:
            run = by_id.get(check.id)
            if run is None or not run.ok:
                reasons.append(f"required check {check.id} did not pass on the final version")
    deleted = [f.path for f in facts.files if f.status == "deleted"]
    if deleted:
        reasons.append("the change deletes " + _paths(deleted))
    dependency = [f.path for f in facts.files if is_dependency_file(f.path)]
    if dependency:
        reasons.append("the change touches dependency files: " + _paths(dependency))
    protected = [f.path for f in facts.files if is_protected(f.path, for_write=True)]
    if protected:
        reasons.append("the change touches protected paths: " + _paths(protected))
    config = [f.path for f in facts.files if is_dev_server_config(f.path) and not is_dependency_file(f.path)]
    if config:
        reasons.append("the change touches dev-server configuration: " + _paths(config))
    tooling = [f.path for f in facts.files
               if is_tooling_config(f.path) and not is_dependency_file(f.path) and not is_dev_server_config(f.path)]
    if tooling:
        reasons.append("the change touches git, hook, CI or environment configuration: " + _paths(tooling))
    inputs = check_input_paths(facts.checks)
    judged = [f.path for f in facts.files if f.path.casefold() in inputs
              or (is_check_config(f.path) and not is_dependency_file(f.path))]
    if judged:
        reasons.append("the change touches files the checks run or are configured by: " + _paths(judged))
    named = {*deleted, *dependency, *protected, *config, *tooling, *judged}
    reasons.extend(_not_auto_writable([f.path for f in facts.files if f.path not in named]))
    # An executable off the allowlist was just named; one whose name the diff quotes (shown "a file") stays.
    changed = {f.path for f in facts.files}
    executables = [p for p in executable_files(facts.diff)
                   if p not in named and (p not in changed or review_kind(p) is None)]
    if executables:
        reasons.append("the change edits executable files (run as commands): " + _paths(executables))
    loaders = added_loader_rules(facts.diff)
    if loaders:
        reasons.append("the change adds a stylesheet rule that loads a JavaScript module into Node (@plugin, "
                       "@config) to " + _paths(loaders))
    if facts.check_wrote:
        reasons.append("a check run during the job changed files (its writes are part of the diff)")
    return reasons
