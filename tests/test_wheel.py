"""The engine installs with one ``pip install <path or git URL>`` (README "Use it in your app"): a wheel built
from a fresh checkout holds the package, every file of the demo app (``spotpatch-agent demo`` copies it), the
``spotpatch-agent`` console script and the built Vite plugin ``init`` installs (issue 29: the plugin's tarball and
the config editor, written by node-shim/scripts/pack-assets.mjs at build time; docs/architecture.md "Packaging").
The sdist carries the same two files, so a wheel built from it needs no Node.

Everything is built without build isolation (``setuptools>=77`` comes with the ``test`` extra) and the copy's
node-shim/node_modules is a link to this checkout's, so the tests need no network."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PLUGIN_VERSION = json.loads((REPO / "node-shim" / "package.json").read_text(encoding="utf-8"))["version"]
TARBALL = f"spotpatch_agent/init/assets/vite-plugin-spotpatch-{PLUGIN_VERSION}.tgz"
EDITOR = "spotpatch_agent/init/assets/config-edit.mjs"
#: npm runs these when it installs a package; the tarball has none (npm 11 warns about each).
INSTALL_SCRIPTS = {"preinstall", "install", "postinstall", "prepare"}

# Outside CI a bare `pytest` without node-shim's dependencies skips these; in CI (tests/run.sh installs them)
# they always run: a missing node there fails them instead of hiding them.
pytestmark = pytest.mark.skipif(
    os.environ.get("CI") != "true"
    and (shutil.which("node") is None or not (REPO / "node-shim" / "node_modules").is_dir()),
    reason="needs node, npm and node-shim's installed dependencies (tests/run.sh)")


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


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh-clone copy whose node-shim/node_modules links to this checkout's (what `npm ci` would install)."""
    source = _checkout(tmp_path_factory.mktemp("wheel") / "checkout")
    assert not (source / "node-shim" / "dist").exists() and not (source / "spotpatch_agent/init/assets").exists()
    (source / "node-shim" / "node_modules").symlink_to(REPO / "node-shim" / "node_modules", target_is_directory=True)
    return source


def _wheel(source: Path, out: Path, env: dict[str, str] | None = None) -> tuple[Path, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
         "--wheel-dir", str(out), str(source)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [wheel] = out.glob("spotpatch_agent-*.whl")
    return wheel, time.monotonic() - started


def _assert_plugin(tarball: bytes) -> None:
    """The plugin's tarball holds the built plugin, and its package.json no script npm runs on install."""
    with tarfile.open(fileobj=io.BytesIO(tarball)) as packed:
        names = set(packed.getnames())
        manifest = packed.extractfile("package/package.json")
        assert manifest is not None
        package = json.loads(manifest.read())
    assert {"package/dist/index.js", "package/dist/overlay.js", "package/package.json"} <= names
    assert package["name"] == "vite-plugin-spotpatch" and package["version"] == PLUGIN_VERSION
    assert INSTALL_SCRIPTS.isdisjoint(package.get("scripts", {})), package.get("scripts")
    assert "prepack" in package["scripts"], "npm pack builds the plugin (node-shim/package.json)"


def test_wheel_holds_the_package_the_demo_app_the_console_script_and_the_plugin(
        checkout: Path, tmp_path: Path) -> None:
    wheel, took = _wheel(checkout, tmp_path / "wheels")
    print(f"wheel from the checkout (the plugin built): {took:.1f} s")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
        tarball = archive.read(TARBALL)
        assert archive.read(EDITOR).strip(), "the config editor is in the wheel"

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
    assert not any(n.startswith(("tests/", "node-shim/")) for n in names), "neither the tests nor node-shim's sources"
    assert sorted(n for n in names if "/init/assets/" in n) == sorted([EDITOR, TARBALL]), "the two, no older tarball"
    _assert_plugin(tarball)


def test_the_sdist_carries_the_plugin_and_a_wheel_built_from_it_needs_no_node(checkout: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    build_sdist = "import sys, setuptools.build_meta as b; print(b.build_sdist(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", build_sdist, str(tmp_path / "sdist")], cwd=checkout,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"sdist from the checkout (the plugin built): {time.monotonic() - started:.1f} s")
    sdist = tmp_path / "sdist" / done.stdout.split()[-1]
    with tarfile.open(sdist) as packed:
        top = sdist.name.removesuffix(".tar.gz")
        names = {n.removeprefix(f"{top}/") for n in packed.getnames()}
        packed.extractall(tmp_path / "unpacked", filter="data")
    assert {TARBALL, EDITOR} <= names
    assert sorted(n for n in names if "/init/assets/" in n) == sorted([EDITOR, TARBALL])
    assert not any("node_modules" in n or n.startswith("node-shim/") for n in names), "no node-shim/ in the sdist"

    # No node on PATH: the build keeps the assets the sdist carries.
    no_node = tmp_path / "bin"
    no_node.mkdir()
    env = {**os.environ, "PATH": str(no_node)}
    assert shutil.which("node", path=env["PATH"]) is None and shutil.which("npm", path=env["PATH"]) is None
    wheel, took = _wheel(tmp_path / "unpacked" / top, tmp_path / "wheels", env=env)
    print(f"wheel from the sdist (no node): {took:.1f} s")
    with zipfile.ZipFile(wheel) as archive:
        assert sorted(n for n in archive.namelist() if "/init/assets/" in n) == sorted([EDITOR, TARBALL])
        assert archive.read(EDITOR) == (tmp_path / "unpacked" / top / EDITOR).read_bytes()
        _assert_plugin(archive.read(TARBALL))
