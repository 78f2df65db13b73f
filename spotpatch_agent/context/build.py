"""One call that gathers everything the prompt says about the project: checked locations and conventions."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from spotpatch_agent.context.conventions import ContextFile, Conventions, collect_conventions
from spotpatch_agent.context.excerpt import LocationCheck, check_locations
from spotpatch_agent.protocol.models import CheckConfig, Limits, SpotAnnotation
from spotpatch_agent.tools.context import WorktreeContext


@dataclass(frozen=True)
class PromptContext:
    """What ``engine.prompt`` renders about the project for one annotation: ``locations`` by target index,
    the ``conventions``, and ``build_ms`` (wall time of :func:`build_prompt_context`, milliseconds)."""

    locations: dict[int, LocationCheck] = field(default_factory=dict)
    conventions: Conventions = Conventions("", "", ())
    build_ms: float = 0.0

    @property
    def files(self) -> tuple[ContextFile, ...]:
        """The files whose content the prompt offers, with their SHA-256: the targets' files (kind
        ``target``, once each), then the conventions and samples."""
        targets: dict[str, ContextFile] = {}
        for index in sorted(self.locations):
            check = self.locations[index]
            if check.ok and check.rel is not None and check.sha256 is not None:
                targets.setdefault(check.rel, ContextFile(check.rel, check.sha256, "target"))
        return (*targets.values(), *self.conventions.files)


async def build_prompt_context(
    ctx: WorktreeContext, annotation: SpotAnnotation, *, checks: tuple[CheckConfig, ...] | list[CheckConfig] = (),
) -> PromptContext:
    """Check every target's location and collect the conventions, reading through ``ctx`` (its path
    policy and per-version cache). ``checks``: the trusted config's, whose commands never appear."""
    started = time.perf_counter()
    sources = [t.source.file if t.source is not None else None for t in annotation.targets]
    conventions = await collect_conventions(ctx, sources, check_commands=[(c.command, list(c.args)) for c in checks])
    locations = await check_locations(ctx, annotation.targets)  # the targets' files are cached by now
    return PromptContext(locations=locations, conventions=conventions,
                         build_ms=(time.perf_counter() - started) * 1000)


async def project_prompt_context(
    root: Path, annotation: SpotAnnotation, *, limits: Limits, checks: tuple[CheckConfig, ...] | list[CheckConfig] = (),
) -> PromptContext:
    """:func:`build_prompt_context` over the user's project at ``root`` (``prompt/render``, ``run``)."""
    return await build_prompt_context(WorktreeContext(root, limits), annotation, checks=checks)
