"""``job/suggest`` for the engine service: the read-only suggestion lane's preconditions, the one request
(``spotpatch_agent.suggestion``) and its audit record (docs/design.md §13, §14).

Light to import: the lane itself is imported at the first suggestion (cold start, issue 3).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from spotpatch_agent.engine.apply_revert import persist_ledger
from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from spotpatch_agent.engine.job import Job
    from spotpatch_agent.engine.providers import AdapterFactory
    from spotpatch_agent.protocol.models import SuggestionResult, Suggestions

log = logging.getLogger("spotpatch.engine")


async def draft_suggestion(job: Job, settings: Suggestions, *, probe_failed: bool, running: set[str],
                           adapter_factory: AdapterFactory) -> SuggestionResult:
    """The read-only suggestion lane for ``job`` (see ``EngineService.job_suggest`` for the refusals).
    ``probe_failed``: this session's explicit probe found no tool calling for the job's model profile.
    ``running``: the ids of the jobs whose suggestion is being drafted now (this adds and removes ``job``'s)."""
    if not settings.enabled:
        raise SpotPatchError(ErrorCode.INVALID_REQUEST,
                             "The suggestion lane is off: set suggestions.enabled to true in the trusted config.")
    capability_failed = (job.error is not None and job.error.code == ErrorCode.MODEL_TOOL_CALL_UNSUPPORTED) or (
        probe_failed)
    if job.status != "failed" or not capability_failed:
        raise SpotPatchError(ErrorCode.INVALID_STATE, (
            "A suggestion is only for a failed job whose model cannot call tools (MODEL_TOOL_CALL_UNSUPPORTED, "
            f"or its probe failed); this job is {job.status!r}" + (
                f" with {job.error.code.value}." if job.error is not None else ".")))
    if job.job_id in running:
        raise SpotPatchError(ErrorCode.INVALID_STATE, "A suggestion for this job is already being drafted.")
    if not os.environ.get(job.provider.api_key_env):
        raise SpotPatchError(ErrorCode.AI_DISABLED,
                             f"AI is off for {job.provider.display_name}: its key variable is not set.")
    from spotpatch_agent.suggestion import run_suggestion

    running.add(job.job_id)
    try:
        run = await run_suggestion(
            job_id=job.job_id, annotation=job.params.annotation, root=job.root, limits=job.limits,
            settings=settings, adapter=adapter_factory(job.provider),
            provider_name=job.provider.display_name, model=job.model.model,
            max_output_tokens=job.model.output_cap)
    finally:
        running.discard(job.job_id)
    result = run.result
    try:  # the audit ledger (docs/design.md §13) is fail-open: recording never costs the user the draft
        job.ledger.record_suggestion(excerpts=run.ledger_excerpts(), breaker=result.breaker,
                                     verified=result.verified, unverified=result.unverified,
                                     outcome=result.outcome)
    except Exception as exc:  # noqa: BLE001 - logged, never raised
        log.warning("audit ledger: recording the suggestion run of job %s failed (%s)", job.job_id,
                    type(exc).__name__)
    await persist_ledger(job)
    return result
