"""Every file path the documentation names exists (issue 30): a moved or deleted module cannot leave a doc
pointing at nothing.

What counts as a path: a backticked token in the docs (``docs/*.md``, the READMEs) that starts at a folder of the
repository — ``spotpatch_agent/``, ``node-shim/``, ``tests/``, ``docs/``, ``protocol/`` — or that names a
module the way the docs' tables do: relative to the package (``engine/service.py``), to ``node-shim/``
(``src/server/plugin.ts``, ``test/support/support.mjs``), to its ``src/`` or ``src/overlay/`` (``panel/Dock.tsx``),
or to its ``test/`` (the Tests table of docs/node-shim.md: ``protocol/protocol.test.mjs``). A relative path whose
folder exists nowhere here is an example from a user's app (``src/components/Card.tsx``). A ``:line`` suffix is
dropped; a token with a glob or a placeholder (``*``, ``<…>``, ``{…}``, ``$``, ``~``) is a pattern, not a path, and
is skipped."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md", REPO / "node-shim" / "README.md",
        REPO / "tests" / "bench" / "README.md", REPO / "protocol" / "README.md"]
ROOTED = re.compile(r"^(spotpatch_agent|node-shim|tests|docs|protocol)/[\w./-]+$")
RELATIVE = re.compile(r"^(?:[a-z_]+/)+[\w-]+\.(?:py|ts|tsx|mjs|json)$")
#: Where a relative path may live, in order.
BASES = (REPO, REPO / "spotpatch_agent", REPO / "node-shim", REPO / "node-shim" / "src",
         REPO / "node-shim" / "src" / "overlay", REPO / "node-shim" / "test")
#: Build output the docs name, absent from a fresh clone until built (gitignored): tests/run.sh builds it first.
BUILT = ("spotpatch_agent/init/assets", "node-shim/dist")
#: Paths the docs give as examples of a user's project, not of this repository.
EXAMPLES = {"docs/guide.md", "src/App.tsx", "src/Card.tsx", "src/service-worker.ts"}


def named_paths(text: str) -> list[str]:
    found = []
    for match in re.finditer(r"`([^`\s]+)`", text):
        token = re.sub(r":\d+(?::\d+)?$", "", match.group(1).rstrip(".,:;)"))
        if any(c in token for c in "*<>{}$~") or token.startswith("."):
            continue
        if ROOTED.match(token) or RELATIVE.match(token):
            found.append(token)
    return found


def test_every_path_the_docs_name_exists() -> None:
    missing = []
    count = 0
    for doc in DOCS:
        for token in named_paths(doc.read_text(encoding="utf-8")):
            # A relative path whose folder exists nowhere here is an example from a user's app (`src/components/…`).
            if token in EXAMPLES or token.startswith(BUILT) or (RELATIVE.match(token) and not ROOTED.match(token)
                                     and not any((base / token).parent.is_dir() for base in BASES)):
                continue
            count += 1
            if not any((base / token).exists() for base in BASES):
                missing.append(f"{doc.relative_to(REPO)}: `{token}`")
    assert count >= 200, f"only {count} paths found: the scan stopped seeing them"
    assert not missing, "paths named in the docs that do not exist:\n" + "\n".join(missing)


def test_the_scan_sees_a_missing_path(tmp_path: Path) -> None:
    text = "see `engine/service.py`, `spotpatch_agent/nope/gone.py` and `src/*.ts`, `docs/a.md:12`"
    assert named_paths(text) == ["engine/service.py", "spotpatch_agent/nope/gone.py", "docs/a.md"]
    assert not any((base / "spotpatch_agent/nope/gone.py").exists() for base in BASES)


def test_the_architecture_picture_names_modules_that_exist() -> None:
    """docs/architecture.md opens with the rooms and one job's path through them, naming a module at each step
    (issue 30, acceptance 3): every module it names exists (inside its fenced block, not backticked)."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    picture = text.split("```", 2)[1]
    names = re.findall(r"[\w./-]+\.(?:py|tsx?)\b", picture)
    assert len(names) >= 25, names
    bases = (REPO / "spotpatch_agent", REPO / "node-shim", REPO / "node-shim" / "src")
    missing = [n for n in names if not any((base / n).is_file() for base in bases)
               or ("/" not in n and n != "cli.py")]  # each names its folder: `pool.py` alone is ambiguous
    assert not missing, f"the picture names modules that do not exist: {missing}"
    for step in range(1, 14):
        assert f" {step} " in picture, f"step {step} is in the picture"
