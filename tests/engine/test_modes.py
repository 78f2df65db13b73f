"""The three apply modes (docs/design.md §10; spec "审阅、应用与撤销", issue 8 acceptance 2) through the real engine:
every combination of applyMode × trusted ``modes`` × ``trustedFastModeConsent`` × gate outcome gives the status
and error the spec requires; ``auto`` never applies with a failed, missing or stale required check, a
deletion or a ``package.json`` change."""

from __future__ import annotations

import secrets
from pathlib import Path

import anyio
import pytest
from pydantic import ValidationError

from spotpatch_agent import PROTOCOL_VERSION
from spotpatch_agent.engine import gates
from spotpatch_agent.engine.loop import LoopStats
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.models import (
    CheckConfig,
    FileStat,
    InitializeParams,
    JobCreateParams,
    Modes,
    ProviderProbeParams,
    TrustedConfig,
)
from tests.conftest import git
from tests.engine._gates_support import (
    APP,
    DELETE_OLD,
    DONE,
    KEY_ENV,
    OLD,
    PACKAGE,
    TARGET,
    call,
    edit,
    new_repo,
    py_check,
    run_check,
    run_one_job,
    template_repo,
)

VERIFY = "import sys; sys.exit(1 if 'FORBIDDEN' in open('src/App.tsx').read() else 0)"
BUMP = edit("p", '"version": "1.0.0"', '"version": "1.0.1"', "package.json")
#: gate outcome → (model turns, checks). "unproven" also switches the job's inline proof off (no probe ran).
SCENARIOS: dict[str, tuple[list, list[dict]]] = {
    "all-pass": ([edit("w"), DONE], [py_check("verify", VERIFY)]),
    "check-failed": ([edit("w"), DONE], [py_check("verify", "raise SystemExit(2)")]),
    "check-missing": ([edit("w"), DONE], [{"id": "verify", "name": "Verify", "command": "spotpatch-no-such-check"}]),
    "check-stale": ([edit("w"), run_check("c", "verify"), edit("w2", ">Start<", ">FORBIDDEN<"), DONE],
                    [py_check("verify", VERIFY)]),
    "deletion": ([edit("w"), DELETE_OLD, DONE], [py_check("verify", VERIFY)]),
    "package-json": ([edit("w"), BUMP, DONE], [py_check("verify", VERIFY)]),
    "capability-unproven": ([edit("w"), DONE], [py_check("verify", VERIFY)]),
}
#: The trusted config's ``modes`` and the modes the spec lets the page offer for it.
CONFIGS = {"none": {}, "auto": {"auto": True}, "trusted": {"trustedAuto": True},
           "both": {"auto": True, "trustedAuto": True}}
OFFERED = {"none": {"review"}, "auto": {"review", "auto"}, "trusted": {"review", "trusted-auto"},
           "both": {"review", "trusted-auto"}}
ABSENT = "absent"
#: The reason auto names when it falls back to review (gate outcome → words in the status message).
FALLBACK_REASON = {"deletion": "deletes src/old.ts", "package-json": "dependency files: package.json",
                   "capability-unproven": "not proven"}


def expected(mode: str, config: str, consent: object, gate: str) -> tuple[str, str | None]:
    """(status, error code) the spec requires; status ``refused``: ``job/create`` answers the error."""
    if mode not in OFFERED[config]:
        return "refused", "INVALID_REQUEST"  # mode not enabled by the trusted config
    if (mode == "trusted-auto") != (consent is True):
        return "refused", "INVALID_REQUEST"  # trusted-auto without literal consent, or consent with another mode
    if mode == "trusted-auto":  # no checks run, deletion and package.json allowed by the consent
        return ("awaiting-review", None) if gate == "capability-unproven" else ("applied", None)
    if gate in ("check-failed", "check-missing", "check-stale"):
        return "failed", "CHECK_FAILED"  # required check not passed on the final version: never applicable
    if mode == "review" or gate != "all-pass":
        return "awaiting-review", None
    return "applied", None


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return template_repo(tmp_path_factory.mktemp("modes"))


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-canary-" + secrets.token_hex(12))


def _no_inline_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every job's inline proof absent (a real loop always has one before validation)."""
    monkeypatch.setattr(LoopStats, "tool_round_trip_proven", property(lambda self: False, lambda self, value: None))


def _tree(root: Path) -> dict[str, str | None]:
    return {rel: (root / rel).read_text() if (root / rel).exists() else None
            for rel in ("src/App.tsx", "src/old.ts", "package.json")}


UNCHANGED = {"src/App.tsx": APP, "src/old.ts": OLD, "package.json": PACKAGE}


COMBINATIONS = [(config, consent) for config in CONFIGS for consent in (ABSENT, False, True)]


@pytest.mark.anyio
@pytest.mark.parametrize("gate", list(SCENARIOS))
@pytest.mark.parametrize("mode", ["review", "auto", "trusted-auto"])
async def test_mode_matrix(
        template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, gate: str) -> None:
    """One test per mode × gate outcome; its 12 trusted-config × consent combinations run concurrently (each
    in its own repository and engine), so the whole matrix of 252 stays fast. Every combination is asserted."""
    if gate == "capability-unproven":
        _no_inline_proof(monkeypatch)  # for every job of this test: they share the gate outcome
    problems: dict[str, str] = {}

    async def one(config: str, consent: object) -> None:
        label = f"{mode} × modes-{config} × consent-{consent} × {gate}"
        try:
            await _check_combination(template, tmp_path / f"{config}-{consent}", mode, config, consent, gate)
        except AssertionError as exc:
            problems[label] = str(exc)[:2000]

    async with anyio.create_task_group() as tg:
        for config, consent in COMBINATIONS:
            tg.start_soon(one, config, consent)
    assert not problems, "\n\n".join(f"{k}:\n{v}" for k, v in sorted(problems.items()))


async def _check_combination(template: Path, base: Path, mode: str, config: str, consent: object, gate: str) -> None:
    status, code = expected(mode, config, consent, gate)
    root = new_repo(template, base / "repo")
    turns, checks = SCENARIOS[gate]
    request: dict = {"applyMode": mode} | ({} if consent is ABSENT else {"trustedFastModeConsent": consent})
    result = await run_one_job(root, turns, checks=checks, modes=CONFIGS[config], request=request)

    if status == "refused":
        assert result.refused is not None and result.refused.code.value == code, result.snap
        assert result.events == [] and result.server.requests == []
        assert _tree(root) == UNCHANGED
        return
    snap = result.snap
    assert snap is not None and result.refused is None, result.refused
    assert (snap.status, snap.error.code.value if snap.error else None) == (status, code), (snap, result.statuses)
    assert snap.apply_mode == mode
    assert ("run_check" in result.offered_tools()) == (mode != "trusted-auto")
    checks_shown = result.kinds("check")
    if mode == "trusted-auto":  # it never claims a check passed
        assert [(c["checkId"], c["status"], c["ok"]) for c in checks_shown] == [("verify", "skipped", False)]
        assert "skipped, not passed" in (snap.message or "")
    else:
        assert [c["checkId"] for c in checks_shown] == ["verify"]
        assert all(c["status"] != "skipped" for c in checks_shown)

    if status == "applied":
        assert result.statuses[-3:] == ["validating", "applying", "applied"]
        assert "awaiting-review" not in result.statuses
        tree = _tree(root)
        assert ">Start<" in tree["src/App.tsx"] or ">FORBIDDEN<" in tree["src/App.tsx"]
        assert (tree["src/old.ts"] is None) == (gate == "deletion")
        assert ('"1.0.1"' in tree["package.json"]) == (gate == "package-json")
        if mode == "auto":
            assert snap.message == "Applied automatically: every gate passed."
            assert [c["status"] for c in checks_shown] == ["passed"]
        return
    # Not applied: the user's tree is exactly as before, the diff is kept.
    assert "applying" not in result.statuses and _tree(root) == UNCHANGED
    assert git(root, "status", "--porcelain") == ""
    assert ">Start<" in result.diff.diff or ">FORBIDDEN<" in result.diff.diff
    if status == "awaiting-review" and mode != "review":
        assert snap.message.startswith("Not applied automatically:")
        assert FALLBACK_REASON[gate] in snap.message
    if status == "failed":
        assert [c["ok"] for c in checks_shown] == [False]


# ---------------------------------------------------------------- capabilities and request policy


@pytest.mark.anyio
@pytest.mark.parametrize("config", list(CONFIGS))
async def test_initialize_offers_exactly_the_enabled_modes(template: Path, tmp_path: Path, config: str) -> None:
    root = new_repo(template, tmp_path / "repo")
    service = EngineService(send_event=lambda _event: None)
    async with service.running():
        result = await service.initialize(InitializeParams.model_validate(
            {"protocolVersion": PROTOCOL_VERSION, "projectRoot": str(root), "config": {"modes": CONFIGS[config]}}))
    wanted = {"none": ["review"], "auto": ["review", "auto"], "trusted": ["review", "trusted-auto"],
              "both": ["review", "trusted-auto"]}[config]
    assert result.capabilities.apply_modes == wanted


@pytest.mark.parametrize("value", ["true", 1, "yes", 1.0, "on"])
def test_consent_must_be_the_json_literal_true(value: object) -> None:
    with pytest.raises(ValidationError):
        JobCreateParams.model_validate({"annotation": TARGET, "modelProfileId": "m", "applyMode": "trusted-auto",
                                        "trustedFastModeConsent": value})
    with pytest.raises(ValidationError):
        TrustedConfig.model_validate({"modes": {"trustedAuto": value}})


@pytest.mark.parametrize(("mode", "consent", "words"), [
    ("auto", None, "modes.auto is off"),
    ("trusted-auto", True, "modes.trustedAuto is off"),
    ("review", True, "only valid with applyMode 'trusted-auto'"),
])
def test_mode_refusals_say_what_to_change(mode: str, consent: object, words: str) -> None:
    with pytest.raises(SpotPatchError) as refused:
        gates.check_mode_request(Modes(), mode, consent)
    assert refused.value.code.value == "INVALID_REQUEST" and words in refused.value.message


def test_both_modes_enabled_offer_trusted_auto_not_auto() -> None:
    both = Modes(auto=True, trusted_auto=True)
    with pytest.raises(SpotPatchError, match="not offered while modes.trustedAuto"):
        gates.check_mode_request(both, "auto", None)
    with pytest.raises(SpotPatchError, match="trustedFastModeConsent: true"):
        gates.check_mode_request(both, "trusted-auto", False)
    gates.check_mode_request(both, "trusted-auto", True)
    gates.check_mode_request(both, "review", False)


# ---------------------------------------------------------------- the gates, pure


@pytest.mark.parametrize(("path", "dependency", "config"), [
    ("package.json", True, False), ("apps/web/package.json", True, False), ("pnpm-lock.yaml", True, False),
    ("npm-shrinkwrap.json", True, False), ("vite.config.ts", False, True), ("web/vite.config.mjs", False, True),
    ("tsconfig.json", False, True), ("tsconfig.app.json", False, True), ("spotpatch.config.json", False, True),
    ("postcss.config.cjs", False, True), ("src/App.tsx", False, False), ("src/package.ts", False, False),
    ("src/config.ts", False, False),
])
def test_dependency_and_dev_server_config_paths(path: str, dependency: bool, config: bool) -> None:
    assert gates.is_dependency_file(path) is dependency
    assert gates.is_dev_server_config(path) is config


def test_every_auto_gate_reports_its_reason() -> None:
    check = CheckConfig(id="types", name="Types", command="tsc")
    files = [FileStat(path="src/old.ts", added=0, removed=1, status="deleted"),
             FileStat(path="package.json", added=1, removed=1, status="modified"),
             FileStat(path="vite.config.ts", added=1, removed=0, status="modified")]
    reasons = gates.auto_apply_blockers(gates.GateFacts(capability_proven=False, files=files, checks=[check],
                                                        results=[]))
    assert reasons == [gates.UNPROVEN, "required check types did not pass on the final version",
                       "the change deletes src/old.ts", "the change touches dependency files: package.json",
                       "the change touches dev-server configuration: vite.config.ts"]
    ok = [FileStat(path="src/App.tsx", added=1, removed=1, status="modified")]
    assert gates.auto_apply_blockers(gates.GateFacts(capability_proven=True, files=ok, checks=[], results=[])) == []


# ---------------------------------------------------------------- auto and trusted-auto end to end


@pytest.mark.anyio
async def test_auto_falls_back_to_review_for_a_dev_server_config_change(template: Path, tmp_path: Path) -> None:
    root = new_repo(template, tmp_path / "repo")
    create = {"toolCalls": [call("v", "apply_patch", {"patch": (
        "diff --git a/vite.config.ts b/vite.config.ts\nnew file mode 100644\n--- /dev/null\n+++ b/vite.config.ts\n"
        "@@ -0,0 +1 @@\n+export default {};\n")})]}
    result = await run_one_job(root, [edit("w"), create, DONE], checks=[py_check("verify", VERIFY)],
                               modes={"auto": True}, request={"applyMode": "auto"})
    assert result.snap is not None and result.snap.status == "awaiting-review"
    assert "dev-server configuration: vite.config.ts" in result.snap.message
    assert not (root / "vite.config.ts").exists() and _tree(root) == UNCHANGED


@pytest.mark.anyio
async def test_auto_trusts_an_explicit_probe_when_the_job_has_no_inline_proof(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = new_repo(template, tmp_path / "repo")
    _no_inline_proof(monkeypatch)
    probe = [{"toolCalls": [call("p1", "report_ready", {"ready": True})]}, {"text": "ready", "finishReason": "stop"}]

    async def probe_first(service: EngineService) -> None:
        assert (await service.provider_probe(ProviderProbeParams(model_profile_id="m"))).ok

    result = await run_one_job(root, [*probe, edit("w"), DONE], checks=[py_check("verify", VERIFY)],
                               modes={"auto": True}, request={"applyMode": "auto"}, before_job=probe_first)
    assert result.snap is not None and result.snap.status == "applied", result.snap
    assert ">Start<" in (root / "src/App.tsx").read_text()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "trusted-auto"])
async def test_an_apply_conflict_in_an_auto_mode_leaves_the_job_awaiting_review(
    template: Path, tmp_path: Path, mode: str,
) -> None:
    root = new_repo(template, tmp_path / "repo")
    mine = APP.replace(">Go<", ">Mine<")

    def user_edits_meanwhile(_body: dict) -> dict:
        (root / "src/App.tsx").write_text(mine)  # the user saves the same file while the job runs
        return DONE

    modes = {"auto": True} if mode == "auto" else {"trustedAuto": True}
    request = {"applyMode": mode} | ({"trustedFastModeConsent": True} if mode == "trusted-auto" else {})
    result = await run_one_job(root, [edit("w"), user_edits_meanwhile], checks=[py_check("verify", VERIFY)],
                               modes=modes, request=request)
    assert result.snap is not None and result.snap.status == "awaiting-review", result.snap
    assert result.statuses[-3:] == ["validating", "applying", "awaiting-review"]
    assert result.snap.message.startswith("Not applied automatically:") and "src/App.tsx" in result.snap.message
    assert result.snap.error is None
    assert (root / "src/App.tsx").read_text() == mine  # the user's edit is never overwritten


@pytest.mark.anyio
async def test_trusted_consent_is_never_written_to_disk(template: Path, tmp_path: Path) -> None:
    root = new_repo(template, tmp_path / "repo")
    result = await run_one_job(root, [edit("w"), DONE], modes={"trustedAuto": True},
                               request={"applyMode": "trusted-auto", "trustedFastModeConsent": True})
    assert result.snap is not None and result.snap.status == "applied"
    for path in root.rglob("*"):
        if path.is_file():
            assert b"onsent" not in path.read_bytes(), path.relative_to(root)
