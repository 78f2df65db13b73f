"""The trusted configuration (docs/design.md §12): Vite plugin options or ``spotpatch.config.json``.

Providers and their model profiles, checks, limits, modes, the suggestion lane and the audit ledger's
persistence. Every key is validated here (unknown keys are errors); ``spotpatch-agent schema --config``
renders :class:`TrustedConfig` as the config file's JSON Schema.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt, field_validator, model_validator
from pydantic.alias_generators import to_camel

from spotpatch_agent.protocol.base import InModel
from spotpatch_agent.protocol.credentials import looks_like_credential
from spotpatch_agent.protocol.limits import LIMITS

__all__ = [
    "AUDIT_KEEP_DEFAULT", "AUDIT_KEEP_MAX", "DEFAULT_MAX_OUTPUT_TOKENS", "MAX_OUTPUT_TOKENS_CAP", "AuditConfig",
    "CheckConfig", "CheckLimits", "Limits", "ModelProfile", "Modes", "ProviderProfile", "Suggestions", "TrustedConfig",
]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")


#: The output cap sent with every turn and the probe when a model profile gives no ``maxOutputTokens``.
DEFAULT_MAX_OUTPUT_TOKENS = 8192
#: Largest ``maxOutputTokens`` a model profile may give.
MAX_OUTPUT_TOKENS_CAP = 262_144

#: How the model edits files (docs/design.md §6, "Edit formats"): ``replace`` offers ``replace_text`` and
#: ``apply_patch``; ``anchors`` shows every line of ``read_file``/``search_text`` with a ``12#KT`` anchor and
#: offers ``edit_lines`` (a line range named by two anchors) instead of ``replace_text``, and ``apply_patch``.
EditFormat = Literal["replace", "anchors"]
EDIT_FORMATS: tuple[EditFormat, ...] = ("replace", "anchors")


class ModelProfile(InModel):
    id: str = Field(pattern=_ID.pattern)
    model: str = Field(min_length=1, max_length=200)
    display_name: str = Field(min_length=1, max_length=120)
    #: The output cap of every turn and of the probe, in tokens (Chat ``max_completion_tokens``, Responses
    #: ``max_output_tokens``); absent: :data:`DEFAULT_MAX_OUTPUT_TOKENS`; ``0``: no cap is sent (for a relay
    #: that rejects the field — the engine's own per-turn text budget still ends the turn).
    max_output_tokens: StrictInt | None = Field(default=None, ge=0, le=MAX_OUTPUT_TOKENS_CAP)
    #: The model accepts images (issue 26): the probe then sends one tiny image part and, once the provider
    #: accepted it, each job's first message carries the targets' pictures. JSON ``true`` only; without the
    #: probe's proof no image is sent (``provider/probe``'s ``vision`` says why).
    vision: StrictBool = False
    #: The edit format the model gets (:data:`EditFormat`); absent: ``replace``.
    edit_format: EditFormat = "replace"
    #: Constrained tool calls (issue 27): ``tool_choice: "required"`` on a job's first turn and on the turn after
    #: a call with invalid arguments, so that a llama.cpp server (``--jinja``) samples the call under a grammar it
    #: builds from the tool schemas and a small model can only write a valid call. ``auto``: only when this
    #: session's probe found a llama.cpp server (its model list says ``owned_by: "llamacpp"``); ``on``: always
    #: (another server that honours ``required``); ``off``: never.
    constrained_tool_calls: Literal["auto", "on", "off"] = "auto"

    @property
    def output_cap(self) -> int | None:
        """The cap to send: ``maxOutputTokens``, its default when absent, None when it is ``0``."""
        if self.max_output_tokens is None:
            return DEFAULT_MAX_OUTPUT_TOKENS
        return self.max_output_tokens or None


class ProviderProfile(InModel):
    id: str = Field(pattern=_ID.pattern)
    display_name: str = Field(min_length=1, max_length=120)
    api: Literal["chat", "responses"] = "chat"
    base_url: str = Field(min_length=1, max_length=2000)
    api_key_env: str = Field(pattern=_ENV_NAME.pattern)
    headers: dict[str, str] = Field(default_factory=dict)
    models: list[ModelProfile] = Field(min_length=1)

    @field_validator("headers")
    @classmethod
    def _http_headers(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}", name):
                raise ValueError("header names must be HTTP tokens (letters, digits, '-', …)")
            if not re.fullmatch(r"[\x20-\x7e]{0,4096}", value):
                raise ValueError("header values must be printable ASCII (at most 4096 characters)")
        return v

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not re.match(r"^https?://", v):
            raise ValueError("baseUrl must start with http:// or https://")
        return v.rstrip("/")


def _check_limit(low: int, high: int, default: int | None, doc: str, alias: str | None = None) -> Any:
    """A ``CheckLimits`` field: absent or null takes the default (checks/limits.py), else ``low..high``."""
    extra: dict[str, Any] = {"description": doc}
    if default is not None:
        extra["default"] = default
    return Field(default=None, alias=alias, ge=low, le=high, json_schema_extra=extra)


class CheckLimits(InModel):
    """Kernel-enforced resource limits of one check run (docs/configuration.md, ``checks[].limits``;
    checks/limits.py). Every key optional: absent takes the default shown in the schema (``memoryMiB``:
    half of the machine's RAM). Counts, MiB (2^20 bytes) and CPU seconds."""

    processes: StrictInt | None = _check_limit(
        8, 65_536, 2048, "Processes and threads of the check together (cgroup pids.max; RLIMIT_NPROC in its "
        "own user namespace).")
    memory_mib: StrictInt | None = _check_limit(
        16, 1_048_576, None, "MiB of memory of the check together (cgroup memory limit; private temp files "
        "count) and of any one process (RLIMIT_DATA). Default: half of the machine's RAM.", "memoryMiB")
    file_size_mib: StrictInt | None = _check_limit(
        1, 1_048_576, 1024, "MiB: the largest file the check may write (RLIMIT_FSIZE).", "fileSizeMiB")
    tmp_mib: StrictInt | None = _check_limit(
        1, 1_048_576, 1024, "MiB: the size of the private temp dir (/tmp, a tmpfs: its pages are memory).", "tmpMiB")
    cpu_sec: StrictInt | None = _check_limit(
        1, 86_400, 1800, "CPU seconds of any one process of the check (RLIMIT_CPU: SIGXCPU, SIGKILL 2 s later).")
    open_files: StrictInt | None = _check_limit(
        64, 1_048_576, 8192, "Open file descriptors of any one process (RLIMIT_NOFILE).")
    disk_mib: StrictInt | None = _check_limit(
        1, 1_048_576, 4096, "MiB the check may write into the worktree while it runs (the engine's watchdog "
        "stops it past that).", "diskMiB")


class CheckConfig(InModel):
    id: str = Field(pattern=_ID.pattern)
    name: str = Field(min_length=1, max_length=120)
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    required: bool = True
    timeout_sec: int | None = Field(default=None, ge=1)
    #: Extra engine variables the check receives (docs/design.md §9 allowlist); only ``NODE_OPTIONS`` may be listed.
    pass_env: list[Literal["NODE_OPTIONS"]] = Field(default_factory=list)
    #: Per-check opt-out of the sandbox's network rule (trusted config only): the check may use the network.
    network: StrictBool = False
    #: Per-check extra paths the sandboxed check may read (absolute, or ``~/…``); secret stores are refused.
    read_paths: list[str] = Field(default_factory=list, max_length=32)
    #: Resource limits of each run (processes, memory, file size, temp size, CPU, open files, disk).
    limits: CheckLimits = Field(default_factory=CheckLimits)

    @field_validator("pass_env", mode="before")
    @classmethod
    def _no_credentials(cls, v: Any) -> Any:
        for name in v if isinstance(v, list) else ():
            if isinstance(name, str) and looks_like_credential(name):
                raise ValueError(f"passEnv: {name!r} looks like a credential; checks never receive credentials")
        if isinstance(v, list) and len(v) != len(set(map(str, v))):
            raise ValueError("passEnv: a variable is listed twice")
        return v

    @field_validator("read_paths")
    @classmethod
    def _no_secret_stores(cls, v: list[str]) -> list[str]:
        from spotpatch_agent.protocol.read_paths import read_path_problem  # the sandbox's rule, loaded when used

        for raw in v:
            problem = read_path_problem(raw)
            if problem is not None:
                raise ValueError(f"readPaths: {raw[:200]!r} {problem}")
        return v


def _limit(name: str) -> Any:
    """A ``Limits`` field: absent or null takes the default; the schema shows default, 1 and the hard cap."""
    default, cap = LIMITS[name]
    return Field(default=None, json_schema_extra={"default": default, "minimum": 1, "maximum": cap})


class Limits(InModel):
    """Every key optional; an absent key takes its default, a given one must be 1..hard cap."""

    max_targets: StrictInt | None = _limit("maxTargets")
    max_instruction_chars: StrictInt | None = _limit("maxInstructionChars")
    max_turns: StrictInt | None = _limit("maxTurns")
    max_tool_calls: StrictInt | None = _limit("maxToolCalls")
    max_repeated_failed_calls: StrictInt | None = _limit("maxRepeatedFailedCalls")
    job_timeout_sec: StrictInt | None = _limit("jobTimeoutSec")
    tool_timeout_sec: StrictInt | None = _limit("toolTimeoutSec")
    check_timeout_sec: StrictInt | None = _limit("checkTimeoutSec")
    read_max_lines: StrictInt | None = _limit("readMaxLines")
    read_max_bytes: StrictInt | None = _limit("readMaxBytes")
    list_max_results: StrictInt | None = _limit("listMaxResults")
    search_max_results: StrictInt | None = _limit("searchMaxResults")
    editable_file_max_bytes: StrictInt | None = _limit("editableFileMaxBytes")
    max_changed_files: StrictInt | None = _limit("maxChangedFiles")
    max_diff_bytes: StrictInt | None = _limit("maxDiffBytes")
    local_snapshot_max_files: StrictInt | None = _limit("localSnapshotMaxFiles")
    local_snapshot_max_bytes: StrictInt | None = _limit("localSnapshotMaxBytes")
    check_output_max_bytes: StrictInt | None = _limit("checkOutputMaxBytes")
    write_jobs_per_project: StrictInt | None = _limit("writeJobsPerProject")

    @model_validator(mode="after")
    def _within_caps(self) -> Limits:
        for field in type(self).model_fields:
            value = getattr(self, field)
            name = to_camel(field)
            default, cap = LIMITS[name]
            if value is None:
                setattr(self, field, default)
            elif not 1 <= value <= cap:
                raise ValueError(f"limits.{name} must be between 1 and {cap}")
        return self

    def get(self, name: str) -> int:
        """The effective value of a limit by its wire name (e.g. ``"maxTurns"``)."""
        value: int = getattr(self, _snake(name))
        return value


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


class Modes(InModel):
    """Which apply modes besides ``review`` the project allows (docs/design.md §10); JSON booleans only."""

    auto: StrictBool = False
    trusted_auto: StrictBool = False


class Suggestions(InModel):
    """The read-only suggestion lane (docs/design.md §14, docs/configuration.md ``suggestions``): off unless
    ``enabled`` is JSON ``true``. ``timeoutSec``: wall-clock seconds for the one request, 1..600 (default
    60); ``maxOutputBytes``: UTF-8 bytes of answer read before the stream is closed, 1024..262144 (default
    16384)."""

    enabled: StrictBool = False
    timeout_sec: StrictInt = Field(default=60, ge=1, le=600)
    max_output_bytes: StrictInt = Field(default=16384, ge=1024, le=262_144)


#: Default and largest ``audit.keep``: ledger files kept per repository.
AUDIT_KEEP_DEFAULT = 100
AUDIT_KEEP_MAX = 10_000


class AuditConfig(InModel):
    """The audit ledger's persistence (docs/design.md §13). ``persist``: also write each job's ledger as
    JSONL under ``<git-common-dir>/spotpatch/audit/`` (default false: memory only, ``job/audit``);
    ``keep``: ledger files kept there, the oldest removed beyond it (1..10000, default 100)."""

    persist: StrictBool = False
    keep: StrictInt = Field(default=AUDIT_KEEP_DEFAULT, ge=1, le=AUDIT_KEEP_MAX)


class TrustedConfig(InModel):
    """The trusted configuration (docs/design.md §12): Vite plugin options or ``spotpatch.config.json``."""

    providers: list[ProviderProfile] = Field(default_factory=list)
    checks: list[CheckConfig] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)
    modes: Modes = Field(default_factory=Modes)
    #: When checks cannot be confined (no sandbox on this platform): ``required`` (default) fails the job
    #: closed before the check runs; ``warn`` runs it unconfined and every surface says so.
    sandbox: Literal["required", "warn"] = "required"
    #: The read-only suggestion lane for models that cannot call tools (off by default).
    suggestions: Suggestions = Field(default_factory=Suggestions)
    #: The ``"$schema"`` line of ``spotpatch.config.json`` (editors complete and validate the file with
    #: protocol/spotpatch.config.schema.json); accepted in the file and in ``initialize``, and ignored.
    json_schema: str | None = Field(default=None, alias="$schema", max_length=2048)
    audit: AuditConfig = Field(default_factory=AuditConfig)

    @model_validator(mode="after")
    def _unique_ids(self) -> TrustedConfig:
        seen: set[str] = set()
        for p in self.providers:
            for m in p.models:
                if m.id in seen:
                    raise ValueError(f"model profile id {m.id!r} is used twice")
                seen.add(m.id)
        ids = [c.id for c in self.checks]
        if len(ids) != len(set(ids)):
            raise ValueError("check ids must be unique")
        return self

    def find_model(self, model_profile_id: str) -> tuple[ProviderProfile, ModelProfile] | None:
        for p in self.providers:
            for m in p.models:
                if m.id == model_profile_id:
                    return p, m
        return None
