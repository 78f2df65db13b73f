"""Build-time only: the setuptools commands that put the built Vite plugin into the wheel and the sdist
(``[tool.setuptools.cmdclass]`` in pyproject.toml; docs/architecture.md, "Packaging").

``build_py`` (what a wheel is made from) and ``sdist`` first write ``spotpatch_agent/init/assets/`` with
``node node-shim/scripts/pack-assets.mjs --out …``: the plugin's tarball, ``vite-plugin-spotpatch-<version>.tgz``,
and ``config-edit.mjs``; package-data then carries both. A tree without ``node-shim/`` (an unpacked sdist) keeps
the assets it carries and needs no Node. An editable install (``pip install -e .``) builds nothing:
``spotpatch-agent init`` builds the assets in a source checkout when it needs them. ``SPOTPATCH_SKIP_PLUGIN=1``
builds the package without the plugin.

setuptools loads this file by its path (it imports neither ``spotpatch_agent`` nor its runtime dependencies);
nothing of the engine imports it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from setuptools.command.build_py import build_py as _build_py
from setuptools.command.sdist import sdist as _sdist
from setuptools.errors import ExecError, SetupError

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "spotpatch_agent" / "init" / "assets"
NODE_SHIM = ROOT / "node-shim"
PACK_ASSETS = NODE_SHIM / "scripts" / "pack-assets.mjs"
EDITOR = "config-edit.mjs"
SKIP = "SPOTPATCH_SKIP_PLUGIN"
#: `npm ci` (first build of a fresh clone) plus the build: minutes on a slow network.
TIMEOUT_SEC = 1200


def _say(message: str) -> None:
    print(f"spotpatch build: {message}", flush=True)  # noqa: T201 - the build's log (pip -v shows it)


def _carried() -> list[Path]:
    """The assets in ``ASSETS``, when both are there (one tarball and the editor); else ``[]``."""
    tarballs = sorted(ASSETS.glob("vite-plugin-spotpatch-*.tgz"))
    editor = ASSETS / EDITOR
    return [*tarballs, editor] if len(tarballs) == 1 and editor.is_file() else []


def ensure_assets() -> None:
    """Write the plugin's assets from ``node-shim/``, or check that a tree without it carries them."""
    if os.environ.get(SKIP) == "1":
        _say(f"{SKIP}=1: building without the Vite plugin (spotpatch-agent init will not work from this build)")
        return
    if not PACK_ASSETS.is_file():
        if _carried():
            _say("no node-shim/ (an sdist): keeping the plugin it carries in spotpatch_agent/init/assets/")
            return
        raise SetupError("this source tree has neither node-shim/ nor the built plugin in spotpatch_agent/init/assets/"
                         f" (build from a clone of the repository, or set {SKIP}=1 to build without the plugin)")
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        missing = "npm" if node else "node"
        raise SetupError(f"building SpotPatch from source builds its Vite plugin and needs Node.js 20 or newer with "
                         f"npm on PATH ({missing} is missing); set {SKIP}=1 to build without the plugin")
    _say("building the Vite plugin (node node-shim/scripts/pack-assets.mjs)…")
    try:
        done = subprocess.run([node, str(PACK_ASSETS), "--out", str(ASSETS)], cwd=NODE_SHIM, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=TIMEOUT_SEC, check=False)
    except subprocess.TimeoutExpired:
        raise ExecError(f"building the Vite plugin took over {TIMEOUT_SEC} s: stopped") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit {done.returncode}"
        raise ExecError(f"building the Vite plugin failed: {reason}")
    _say("wrote " + ", ".join(f"spotpatch_agent/init/assets/{name}" for name in done.stdout.split()))


class build_py(_build_py):  # setuptools' command names
    def run(self) -> None:
        if not self.editable_mode:
            ensure_assets()
        super().run()


class sdist(_sdist):
    def run(self) -> None:
        ensure_assets()
        super().run()
