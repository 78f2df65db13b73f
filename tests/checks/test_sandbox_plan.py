"""The platform-neutral plan and the two renderings of it (issue 14): what is hidden, shown and masked,
and the order of the bwrap mounts and Seatbelt rules (a later one wins in both). The macOS profile is
only checked as text here: no macOS runs these tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spotpatch_agent.checks.sandbox.bwrap import bwrap_argv
from spotpatch_agent.checks.sandbox.plan import build_plan
from spotpatch_agent.checks.sandbox.seatbelt import seatbelt_profile


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    home = tmp_path / "home"
    project = home / "code" / "app"
    worktree = project / "node_modules" / ".spotpatch" / "job-1"
    worktree.mkdir(parents=True)
    for rel in (".nvm/versions/node/v20/bin", ".ssh", ".config/gcloud", ".local/bin", ".local/share/keyrings",
                ".cache/ms-playwright", "tools/bin", ".venv"):
        (home / rel).mkdir(parents=True, exist_ok=True)
    (home / ".npmrc").write_text("//r/:_authToken=x\n")
    (project / ".venv").mkdir()
    monkeypatch.setenv("HOME", str(home))
    return {"home": home, "project": project, "worktree": worktree, "tmp": tmp_path}


def plan_for(layout: dict[str, Path], **extra: object):
    env = {"PATH": f"{layout['home']}/.nvm/versions/node/v20/bin:{layout['home']}/tools/bin:/usr/bin:/bin"}
    return build_plan(cwd=layout["worktree"], temp_dir=layout["tmp"] / "t", network=False, env=env,
                      project_root=layout["project"], **extra)


def test_plan_hides_home_and_checkout_and_shows_only_toolchains(layout: dict[str, Path]) -> None:
    home, project = layout["home"], layout["project"]
    plan = plan_for(layout, read_paths=["~/.local"])
    assert home in plan.hidden and project in plan.hidden and plan.writable == (layout["worktree"],)
    shown = set(plan.read_only)
    assert {home / ".nvm", home / "tools/bin", home / ".cache/ms-playwright", project / ".venv",
            home / ".local"} <= shown
    assert plan.modules == project / "node_modules" and project / "node_modules" not in shown
    assert home / "tools" not in shown  # a PATH entry's prefix, but never a whole top-level home directory
    assert not any(p == home / ".ssh" or home / ".ssh" in p.parents for p in shown)
    # A secret store inside a shown path is masked again; other jobs' worktrees are masked too.
    assert home / ".local/share/keyrings" in plan.masked and project / "node_modules/.spotpatch" in plan.masked
    assert home / ".ssh" not in plan.masked  # not shown, nothing to mask


def test_bwrap_mounts_hide_before_show_before_mask_before_the_worktree(layout: dict[str, Path]) -> None:
    plan = plan_for(layout)
    argv = bwrap_argv("/usr/bin/bwrap", plan, ["/bin/true"])
    joined = " ".join(argv)
    for flag in ("--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop ALL", "--die-with-parent",
                 "--new-session", "--ro-bind /usr /usr", "--proc /proc", "--dev /dev", "--tmpfs /run"):
        assert flag in joined
    assert "--share-net" not in argv and "--ro-bind / /" not in joined  # an allowlist, not the whole root
    order = [joined.index(s) for s in (
        "--ro-bind /usr /usr", f"--ro-bind {layout['home']}/.nvm",
        f"--ro-bind {layout['project']}/node_modules /spotpatch/node_modules",
        "--tmpfs /spotpatch/node_modules/.spotpatch",
        f"--bind {layout['worktree']} /spotpatch/work", "--remount-ro /spotpatch/node_modules/.spotpatch",
        "--remount-ro / ")]
    assert order == sorted(order), joined
    # The home itself lies in no shown directory: nothing of it is mounted but its toolchains.
    assert f"--tmpfs {layout['home']} " not in joined and "--chdir /spotpatch/work" in joined
    assert argv[-2:] == ["--", "/bin/true"] and "--setenv TMPDIR /tmp" in joined
    network = build_plan(cwd=layout["worktree"], temp_dir=layout["tmp"], network=True, env={},
                         project_root=layout["project"])
    assert "--share-net" in bwrap_argv("/usr/bin/bwrap", network, ["/bin/true"])


def test_seatbelt_profile_denies_by_default_and_orders_allow_then_deny(layout: dict[str, Path]) -> None:
    plan = plan_for(layout, read_paths=["~/.local"])
    profile = seatbelt_profile(plan)
    lines = profile.splitlines()
    assert lines[:2] == ["(version 1)", "(deny default)"]
    assert "(allow file-read*)" not in lines  # reads are an allowlist
    system = next(i for i, line in enumerate(lines) if line.startswith("(allow file-read* (subpath \"/System\")"))
    hide = next(i for i, line in enumerate(lines)
                if line.startswith("(deny file-read*") and str(layout["home"]) in line)
    show = max(i for i, line in enumerate(lines) if line.startswith("(allow file-read* (subpath")
               and str(layout["home"] / ".nvm") in line)
    mask = next(i for i, line in enumerate(lines) if line.startswith("(deny file-read* file-write*"))
    write = next(i for i, line in enumerate(lines) if line.startswith("(allow file-read* file-write*"))
    assert system < hide < show < mask < write  # last match wins: shown after hidden, masks after, worktree last
    assert "network-outbound" not in profile and "SecurityServer" not in profile
    assert "keyrings" in lines[mask] and str(layout["worktree"]) in lines[write]
    with pytest.raises(ValueError):
        seatbelt_profile(build_plan(cwd=layout["worktree"], temp_dir=Path("/tmp/x\ny"), network=False, env={}))


def test_a_missing_toolchain_or_read_path_is_simply_not_shown(layout: dict[str, Path]) -> None:
    plan = plan_for(layout, read_paths=["~/not-there", "/definitely/not/there"])
    assert not any("not-there" in str(p) or "definitely" in str(p) for p in plan.read_only)
    assert all(os.path.exists(p) for p in plan.read_only)
