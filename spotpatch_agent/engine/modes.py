"""Apply-mode policy (docs/design.md §10): which modes the engine offers and accepts, and what consent each needs.

Pure and light: ``engine.service`` needs it to answer ``initialize`` and ``job/create`` and must not import
the job-only parts of engine/gates.py (final checks, auto gates) at start-up (cold start, issue 3).
engine/gates.py re-exports these functions; its module docstring describes the policy.
"""

from __future__ import annotations

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import ApplyMode, Modes

__all__ = ["check_mode_request", "includes_local_changes", "offered_modes"]


def offered_modes(modes: Modes) -> list[ApplyMode]:
    """The apply modes ``initialize`` advertises and ``job/create`` accepts, in this order (see module doc).

    ``modes.trustedAuto`` wins over ``modes.auto``: with both enabled, ``auto`` is neither offered nor
    accepted (the page offers exactly ``review`` and ``trusted-auto``: docs/design.md §10)."""
    if modes.trusted_auto:
        return ["review", "trusted-auto"]
    if modes.auto:
        return ["review", "auto"]
    return ["review"]


def check_mode_request(modes: Modes, apply_mode: str, consent: object) -> None:
    """Raise ``SpotPatchError(INVALID_REQUEST)`` unless ``apply_mode`` is offered and ``consent``
    (``trustedFastModeConsent``) matches it: exactly ``True`` for ``trusted-auto``; absent (``None``) or
    ``False`` for the other modes (docs/design.md §10, spec "trusted-auto 可信极速模式")."""
    if apply_mode not in offered_modes(modes):
        if apply_mode == "auto" and modes.auto:
            why = "applyMode 'auto' is not offered while modes.trustedAuto is enabled; use 'review' or 'trusted-auto'."
        else:
            key = "modes.trustedAuto" if apply_mode == "trusted-auto" else "modes.auto"
            why = f"applyMode {apply_mode!r} is not enabled by the trusted config ({key} is off)."
        raise SpotPatchError(ErrorCode.INVALID_REQUEST, why)
    if apply_mode == "trusted-auto":
        if consent is not True:
            raise SpotPatchError(
                ErrorCode.INVALID_REQUEST,
                "applyMode 'trusted-auto' needs trustedFastModeConsent: true, given after the page explained "
                "that project checks are skipped and the change is applied without review.",
            )
    elif consent is not None and consent is not False:
        raise SpotPatchError(ErrorCode.INVALID_REQUEST,
                             "trustedFastModeConsent is only valid with applyMode 'trusted-auto'.")


def includes_local_changes(apply_mode: str, trusted_consent: object, local_consent: object) -> bool:
    """Whether a job may take the user's local changes into its baseline (include-local-changes, docs/design.md §8):
    with ``localChangesConsent: true``, or in ``trusted-auto`` with the literal ``trustedFastModeConsent: true``,
    since that one consent covers "sending project context to that provider, including bounded local changes
    in the baseline" (docs/design.md §10). A ``blocked`` tree stays blocked either way."""
    return local_consent is True or (apply_mode == "trusted-auto" and trusted_consent is True)
