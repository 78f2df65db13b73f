"""Providers for the engine service: the adapter of a profile, the job runner's preload, and the session's
proof of tool calling (``provider/list``, ``provider/probe``, a job's inline proof: docs/design.md §3, §11).

Light to import (``initialize`` does not pay for it: cold start, issue 3): the adapters, the probe and the
job runner are imported where first needed.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

import anyio

from spotpatch_agent.engine.events import error_info
from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.policy.redact import REDACTOR, register_provider_secrets, shorten_paths
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import (
    ModelProfile,
    ProbeResult,
    ProviderInfo,
    ProviderListResult,
    ProviderModelInfo,
    ProviderProbeParams,
    ProviderProfile,
    TrustedConfig,
)

if TYPE_CHECKING:
    from spotpatch_agent.engine.job import Job
    from spotpatch_agent.protocol.jobs import JobCreateParams
    from spotpatch_agent.provider.base import ProviderAdapter

#: What a proven tool round trip is valid for (:func:`probe_key`).
ProbeKey = tuple[str, str, str, str]
#: Builds the adapter of a provider profile (the service's seam; :func:`make_adapter` by default).
AdapterFactory = Callable[[ProviderProfile], "ProviderAdapter"]


def make_adapter(provider: ProviderProfile) -> ProviderAdapter:
    """The adapter for ``provider`` (``api``: ``responses`` or ``chat``) with its key read from ``apiKeyEnv``
    (never logged: docs/design.md §11)."""
    key = os.environ.get(provider.api_key_env) or None
    register_provider_secrets(provider.base_url, key, provider.headers)
    if provider.api == "responses":
        from spotpatch_agent.provider.responses import ResponsesAdapter

        return ResponsesAdapter(base_url=provider.base_url, api_key=key, headers=provider.headers)
    from spotpatch_agent.provider.chat import ChatCompletionsAdapter

    return ChatCompletionsAdapter(base_url=provider.base_url, api_key=key, headers=provider.headers)


#: What the first job imports (engine.job pulls in the tool loop, the tools and the adapters' base).
_JOB_RUNNER = ("spotpatch_agent.engine.job", "spotpatch_agent.provider.chat", "spotpatch_agent.provider.responses")


async def preload_job_runner() -> None:
    """Import the job runner in a worker thread after ``initialize``'s reply, while the start-up health check
    waits on git (issue 17: the imports moved out of initialize are not paid by the first job instead).
    Never raises: a failed import is raised again where the module is first used."""
    import importlib

    for name in _JOB_RUNNER:
        try:
            await anyio.to_thread.run_sync(importlib.import_module, name)
        except Exception:  # noqa: BLE001 - see the docstring
            return


def probe_key(provider: ProviderProfile, model: ModelProfile) -> ProbeKey:
    """What a proven tool round trip is valid for: the model profile at this endpoint, API and model name."""
    return model.id, provider.api, provider.base_url, model.model


@functools.cache
def agent_profile() -> tuple[ProviderProfile, ModelProfile]:
    """The profile of a job done by an attached agent (``job/create`` with ``agent: true``): no URL is called and
    no key is read. The ledger's provider becomes ``mcp:<client>`` once an agent took the job (engine/job.py).
    Built on first use (cold start)."""
    provider = ProviderProfile(id="mcp", display_name="Your agent (MCP)", base_url="http://127.0.0.1",
                               api_key_env="SPOTPATCH_MCP_NO_KEY",
                               models=[ModelProfile(id="mcp", model="mcp", display_name="Your agent (MCP)")])
    return provider, provider.models[0]


def job_profile(config: TrustedConfig, params: JobCreateParams) -> tuple[ProviderProfile, ModelProfile]:
    """Who does a ``job/create``'s turns: the agent profile, or the config's model whose key variable is set;
    raises ``INVALID_REQUEST`` (unknown id) or ``AI_DISABLED`` (key variable unset)."""
    if params.agent:
        return agent_profile()
    found = config.find_model(params.model_profile_id or "")
    if found is None:
        raise SpotPatchError(ErrorCode.INVALID_REQUEST,
                             "Unknown modelProfileId: it must be the id of a model in the trusted config.")
    provider, model = found
    if not os.environ.get(provider.api_key_env):
        raise SpotPatchError(ErrorCode.AI_DISABLED, f"AI is off for {provider.display_name}: "
                             f"its key variable {provider.api_key_env} is not set.")
    return provider, model


def list_providers(config: TrustedConfig) -> ProviderListResult:
    """Profiles with ids and display names only — never URLs, headers or key names (docs/design.md §3)."""
    return ProviderListResult(providers=[
        ProviderInfo(id=p.id, display_name=p.display_name, api=p.api,
                     available=bool(os.environ.get(p.api_key_env)),
                     models=[ProviderModelInfo(id=m.id, display_name=m.display_name) for m in p.models])
        for p in config.providers
    ])


class JobProbeFacts(TypedDict):
    """What a new job takes from this session's probes (:meth:`ProbeCache.job_facts`; ``engine.job.Job``'s fields)."""

    capability_probed: bool
    tool_calling_known: bool
    vision: bool
    constrained_tool_calls: bool | None


class ProbeCache:
    """Proven tool calling for one engine session, per :func:`probe_key`: explicit probes that passed, a
    job's inline proof, and the explicit probes that found no tool calling (the suggestion lane's "probe
    failed")."""

    def __init__(self) -> None:
        self.results: dict[ProbeKey, ProbeResult] = {}
        self.failures: set[ProbeKey] = set()
        #: The model profiles whose passed probe found a llama.cpp server (:meth:`constrained`).
        self.llamacpp: set[ProbeKey] = set()

    def passed(self, provider: ProviderProfile, model: ModelProfile) -> bool:
        """Whether the explicit probe (``provider/probe``, not a job's inline proof) passed this session
        for this model profile: the ``auto`` capability gate at job creation (docs/design.md §10)."""
        probe = self.results.get(probe_key(provider, model))
        return probe is not None and probe.ok and getattr(probe, "source", "probe") == "probe"

    def proven(self, provider: ProviderProfile, model: ModelProfile) -> bool:
        """Whether tool calling is proven for this model profile (the probe or a job's inline proof)."""
        return probe_key(provider, model) in self.results

    def vision(self, provider: ProviderProfile, model: ModelProfile) -> bool:
        """Whether the targets' pictures may be sent (issue 26): the profile says ``vision`` and this session's
        explicit probe saw the provider accept an image part."""
        probe = self.results.get(probe_key(provider, model))
        return model.vision and probe is not None and probe.vision is True

    def job_facts(self, provider: ProviderProfile, model: ModelProfile) -> JobProbeFacts:
        """:meth:`passed`, :meth:`proven`, :meth:`vision` and :meth:`constrained`, as a new job's fields."""
        return JobProbeFacts(capability_probed=self.passed(provider, model),
                             tool_calling_known=self.proven(provider, model), vision=self.vision(provider, model),
                             constrained_tool_calls=self.constrained(provider, model))

    def constrained(self, provider: ProviderProfile, model: ModelProfile) -> bool | None:
        """Whether this model profile's jobs send ``tool_choice: "required"`` where a call is due (issue 27):
        ``constrainedToolCalls`` ``on``, or ``auto`` and this session found a llama.cpp server (a passed probe's
        model list, or an earlier job's stream); None (``auto``, not known yet): from the turn after the job's
        own stream shows one."""
        if model.constrained_tool_calls != "auto":
            return model.constrained_tool_calls == "on"
        return True if probe_key(provider, model) in self.llamacpp else None

    def failed(self, provider: ProviderProfile, model: ModelProfile) -> bool:
        """Whether this session's explicit probe found no tool calling for this model profile."""
        return probe_key(provider, model) in self.failures

    def note_inline_proof(self, job: Job) -> None:
        """Inline proof (docs/design.md §11): a job whose first tool call was answered and continued proves tool
        calling for its model profile, so a later ``provider/probe`` answers from the cache."""
        key = probe_key(job.provider, job.model)
        if job.stats.server == "llama.cpp":  # the next job's first turn is constrained too (``auto``)
            self.llamacpp.add(key)
        if job.stats.tool_round_trip_proven and key not in self.results:
            self.results[key] = ProbeResult(
                model_profile_id=job.model.id, ok=True, tool_calling=True, cached=False, duration_ms=0,
                source="inline",
                message="Tool calling proven inline: a job's tool call and its continuation succeeded.")

    async def probe(self, config: TrustedConfig, params: ProviderProbeParams, *,
                    adapter_factory: AdapterFactory) -> ProbeResult:
        """Explicit probe (docs/design.md §11, provider/probe.py): list models, then one forced tool round trip.

        A success — or a job's inline proof (:meth:`note_inline_proof`) — is cached for the session per
        model profile, base URL and model; a cached answer costs no request. Raises ``INVALID_REQUEST``
        (unknown profile) and ``AI_DISABLED`` (key variable unset); provider failures, a missing model and
        ``MODEL_TOOL_CALL_UNSUPPORTED`` are a result with ``ok: false`` and the error, not an RPC error."""
        found = config.find_model(params.model_profile_id)
        if found is None:
            raise SpotPatchError(ErrorCode.INVALID_REQUEST,
                                 "Unknown modelProfileId: it must be the id of a model in the trusted config.")
        provider, model = found
        key = os.environ.get(provider.api_key_env) or None
        if key is None:
            raise SpotPatchError(ErrorCode.AI_DISABLED,
                                 f"AI is off for {provider.display_name}: its key variable is not set.")
        cached = self.results.get(probe_key(provider, model))
        if cached is not None and not (model.vision and cached.vision is None):  # inline proof: images unasked
            return cached.model_copy(update={"cached": True})
        from spotpatch_agent.provider.probe import ProbeOutcome, run_probe

        adapter = adapter_factory(provider)
        started = anyio.current_time()
        try:
            outcome = await run_probe(adapter, model=model.model, base_url=provider.base_url, api_key=key,
                                      headers=provider.headers, max_output_tokens=model.output_cap,
                                      vision=model.vision)
        except SpotPatchError as exc:
            outcome = ProbeOutcome(False, exc.message, exc.code, retryable=exc.retryable)
        finally:
            with anyio.CancelScope(shield=True):
                await adapter.aclose()
        message = shorten_paths(REDACTOR(outcome.message))
        error = None if outcome.code is None else error_info(
            SpotPatchError(outcome.code, message, retryable=outcome.retryable))
        result = ProbeResult(model_profile_id=model.id, ok=outcome.tool_calling, tool_calling=outcome.tool_calling,
                             cached=False, duration_ms=int((anyio.current_time() - started) * 1000),
                             message=message, error=error, source="probe",
                             models=None if outcome.models is None else [REDACTOR(m) for m in outcome.models],
                             vision=outcome.vision)
        if result.ok:
            self.results[probe_key(provider, model)] = result
            if outcome.server == "llama.cpp":
                self.llamacpp.add(probe_key(provider, model))
        elif outcome.code == ErrorCode.MODEL_TOOL_CALL_UNSUPPORTED:
            self.failures.add(probe_key(provider, model))
        return result
