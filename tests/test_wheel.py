"""The engine installs with one ``pip install <path or git URL>`` (README "Use it in your app"): a wheel built
from a fresh checkout holds the package, every file of the demo app (``spotpatch-agent demo`` copies it) and
the ``spotpatch-agent`` console script.

The wheel is built without build isolation (``setuptools>=77`` comes with the ``test`` extra), so the test
needs no network."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _checkout(dest: Path) -> Path:
    """The repository's files as a fresh clone has them (tracked and new unignored files), copied to ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, check=True, capture_output=True,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def test_wheel_holds_the_package_the_demo_app_and_the_console_script(tmp_path: Path) -> None:
    source = _checkout(tmp_path / "checkout")
    out = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
         "--wheel-dir", str(out), str(source)],
        check=True, capture_output=True, timeout=300,
    )
    [wheel] = out.glob("spotpatch_agent-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()

    package = {str(p.relative_to(REPO)) for p in (REPO / "spotpatch_agent").rglob("*.py")
               if "__pycache__" not in p.parts}
    assert package - names == set(), "every module of spotpatch_agent is in the wheel"
    demo = subprocess.run(["git", "ls-files", "spotpatch_agent/demo/app"], cwd=REPO, check=True, capture_output=True,
                          text=True).stdout.split()
    assert "spotpatch_agent/demo/app/.gitignore" in demo and "spotpatch_agent/demo/app/package.json" in demo
    assert set(demo) - names == set(), "every file of the demo app (dotfiles included) is in the wheel"
    apps = subprocess.run(["git", "ls-files", "spotpatch_agent/eval/apps"], cwd=REPO, check=True, capture_output=True,
                          text=True).stdout.split()
    wanted = {f"spotpatch_agent/eval/apps/{a}/{f}" for a in ("vue", "svelte") for f in (".gitignore", "package.json")}
    assert wanted <= set(apps)
    assert set(apps) - names == set(), "every file of the eval's Vue and Svelte apps (`eval`) is in the wheel"
    assert "[console_scripts]\nspotpatch-agent = spotpatch_agent.cli:main" in scripts
    assert not any(n.startswith(("tests/", "node-shim/")) for n in names), "neither tests nor the plugin"
