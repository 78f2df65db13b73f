"""The plugin tarball and the ``vite.config`` editor that ``init`` uses (docs/adopt.md).

An installed package carries both in ``spotpatch_agent/init/assets/`` (built from ``node-shim/`` when the wheel
or sdist is built). A source checkout (an editable install) builds them there on first use with
``node-shim/scripts/pack-assets.mjs``, and again when ``node-shim/`` changed since, saying so."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from spotpatch_agent.init.app import InitError
from spotpatch_agent.init.repo import tell

ASSETS = Path(__file__).resolve().parent / "assets"
EDITOR_NAME = "config-edit.mjs"
#: The checkout's node-shim/, when this package runs from a source checkout (else it does not exist).
NODE_SHIM = Path(__file__).resolve().parents[2] / "node-shim"
#: Longest the one-time build of the assets in a source checkout may take.
BUILD_TIMEOUT_SEC = 900


@dataclass(frozen=True)
class Assets:
    tarball: Path
    editor: Path
    name: str  # the plugin's npm name
    version: str
    peer_vite: str  # the plugin's peerDependencies.vite


def _tarballs(folder: Path) -> list[Path]:
    return sorted(folder.glob("vite-plugin-spotpatch-*.tgz")) if folder.is_dir() else []


def _stale(tarball: Path) -> bool:
    """A source checkout whose node-shim/ sources or manifest changed after ``tarball`` was packed."""
    built = tarball.stat().st_mtime
    sources = [NODE_SHIM / "package.json", NODE_SHIM / "package-lock.json", *(NODE_SHIM / "src").rglob("*"),
               *(NODE_SHIM / "scripts").glob("*.mjs")]
    return any(p.is_file() and p.stat().st_mtime > built for p in sources)


def _build_from_checkout() -> None:
    node = shutil.which("node")
    if node is None:
        raise InitError("This is a source checkout of SpotPatch without a built plugin, and Node.js is not on PATH to "
                        "build it: install Node.js 20 or newer.")
    tell("Building the Vite plugin from node-shim/ (a source checkout; once, and again after node-shim/ changes)…")
    try:
        done = subprocess.run([node, str(NODE_SHIM / "scripts" / "pack-assets.mjs"), "--out", str(ASSETS)],
                              cwd=NODE_SHIM, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, timeout=BUILD_TIMEOUT_SEC, check=False)
    except subprocess.TimeoutExpired:
        raise InitError(f"Building the plugin in node-shim/ took over {BUILD_TIMEOUT_SEC} s: stopped.") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InitError(f"Building the plugin in node-shim/ failed: {last}")


def plugin_assets() -> Assets:
    """The tarball and editor to use; builds them first in a source checkout when missing or stale."""
    tarballs = _tarballs(ASSETS)
    checkout = (NODE_SHIM / "package.json").is_file()
    if checkout and (len(tarballs) != 1 or not (ASSETS / EDITOR_NAME).is_file() or _stale(tarballs[0])):
        _build_from_checkout()
        tarballs = _tarballs(ASSETS)
    if len(tarballs) != 1 or not (ASSETS / EDITOR_NAME).is_file():
        raise InitError("This installation of spotpatch-agent carries no Vite plugin (its package was built without "
                        "node-shim/): reinstall it from a wheel or from a source checkout with Node.js on PATH.")
    tarball = tarballs[0]
    try:
        with tarfile.open(tarball, "r:gz") as archive:
            member = archive.extractfile("package/package.json")
            manifest = json.loads(member.read().decode("utf-8")) if member else None
    except (OSError, tarfile.TarError, KeyError, ValueError) as exc:
        raise InitError(f"The plugin tarball {tarball.name} cannot be read ({type(exc).__name__}): reinstall "
                        "spotpatch-agent.") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("version"), str):
        raise InitError(f"The plugin tarball {tarball.name} has no package.json version: reinstall spotpatch-agent.")
    peer = manifest.get("peerDependencies", {}).get("vite", "")
    return Assets(tarball, ASSETS / EDITOR_NAME, str(manifest.get("name", "vite-plugin-spotpatch")),
                  manifest["version"], peer if isinstance(peer, str) else "")
