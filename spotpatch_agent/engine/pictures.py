"""The targets' pictures for a vision model (issue 26): what the first user message carries when the probe
proved the job's model profile accepts images (engine/providers.py ``ProbeCache.vision``).

The pictures live in the job's memory only (its ``job/create`` params) until its run ends
(:func:`drop_pictures`): they are never written to an event, a log or the audit ledger, which records each
picture's SHA-256 and size (spotpatch_agent/audit/ledger.py).
"""

from __future__ import annotations

from spotpatch_agent.protocol.annotation import SpotAnnotation
from spotpatch_agent.provider.base import ImagePart

__all__ = ["drop_pictures", "picture_note", "target_pictures"]


def target_pictures(annotation: SpotAnnotation) -> tuple[ImagePart, ...]:
    """One image part per target that carries a picture, in target order (already bounded and checked as PNG or
    WebP by :class:`~spotpatch_agent.protocol.annotation.TargetImage`)."""
    return tuple(ImagePart(t.image.media_type, t.image.data) for t in annotation.targets if t.image is not None)


def picture_note(annotation: SpotAnnotation) -> str:
    """The task's closing paragraph naming which attached picture shows which target (empty without pictures)."""
    shown = [t.index for t in annotation.targets if t.image is not None]
    if not shown:
        return ""
    pairs = ", ".join(f"picture {n} shows target {index}" for n, index in enumerate(shown, 1))
    return (f"\n\nAttached pictures ({len(shown)}): how the page rendered the picked elements before this job; "
            f"{pairs}. Use them to see what the user sees; the source files remain the truth.")


def drop_pictures(annotation: SpotAnnotation) -> None:
    """Forget the targets' pictures once the job's run ended (the ledger recorded their hashes at job start);
    the job record keeps its text, which later methods (``job/suggest``) still read."""
    for target in annotation.targets:
        target.image = None
