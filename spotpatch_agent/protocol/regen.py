"""Every generated artifact of the wire contract, from one command (issue 30):

    .venv/bin/python -m spotpatch_agent.protocol.regen [--check]

writes ``protocol/spotpatch.schema.json`` (``spotpatch-agent schema``), ``protocol/spotpatch.config.schema.json``
(``schema --config``), the method reference between the markers of ``docs/protocol.md`` (``docgen``), then
runs ``node node-shim/scripts/gen-protocol.mjs --sync``: node-shim's copies of both schemas and its
``protocol.generated.ts``. ``--check`` writes nothing and exits 1 naming each Python-generated file that
differs from what the code would generate (node-shim's copies are checked by its own protocol test).
Run from a source checkout (the files live beside the package)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from spotpatch_agent.protocol.config_schema import render_config_schema
from spotpatch_agent.protocol.docgen import splice
from spotpatch_agent.protocol.schema import render_schema

REPO = Path(__file__).resolve().parents[2]


def generated() -> dict[Path, str]:
    """Each Python-generated file and the text it should hold."""
    doc = REPO / "docs" / "protocol.md"
    return {
        REPO / "protocol" / "spotpatch.schema.json": render_schema(),
        REPO / "protocol" / "spotpatch.config.schema.json": render_config_schema(),
        doc: splice(doc.read_text("utf-8")),
    }


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        sys.stderr.write("usage: python -m spotpatch_agent.protocol.regen [--check]\n")
        return 2
    if not (REPO / "protocol").is_dir() or not (REPO / "node-shim").is_dir():
        sys.stderr.write("regen: run it from a source checkout (protocol/ and node-shim/ beside the package)\n")
        return 2
    stale = [path for path, text in generated().items() if path.read_text("utf-8") != text]
    if check:
        for path in stale:
            sys.stderr.write(f"regen --check: {path.relative_to(REPO)} is stale\n")
        return 1 if stale else 0
    for path, text in generated().items():
        path.write_text(text, "utf-8")
    node = shutil.which("node")
    if node is None:
        sys.stderr.write("regen: node is not on PATH: node-shim's copies were not regenerated\n")
        return 1
    return subprocess.run([node, str(REPO / "node-shim" / "scripts" / "gen-protocol.mjs"), "--sync"],
                          cwd=REPO / "node-shim", check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
