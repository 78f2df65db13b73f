"""The project's docs stand on their own (issue 20 acceptance 3): no citation of the design brief the
repository does not have, every relative Markdown link and anchor resolves inside the repository, and
every ``design.md §N`` citation names a section of docs/design.md.

Each check runs on this repository, and once more on a small temporary repository holding exactly the
broken cases, so that a check that stopped finding anything would fail too."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.docs import mdcheck

ROOT = Path(__file__).resolve().parents[2]

#: The brief's file name, built so that this file does not name it itself.
BRIEF = "DESIGN" + ".md"
#: Where the acceptance's ``grep -rn`` looks, plus the other hand-written docs and the protocol folder.
BRIEF_SCOPES = ("spotpatch_agent/", "node-shim/src/", "docs/", "README.md", "node-shim/README.md",
                "protocol/", "tests/bench/README.md")
#: Where ``design.md §N`` citations live: code, tests, docs, the schema and the Node sources.
CITATION_SCOPES = ("spotpatch_agent/", "node-shim/src/", "node-shim/test/", "node-shim/scripts/", "docs/",
                   "tests/", "protocol/", "README.md", "node-shim/README.md")
#: Docs the link check must cover, whatever else exists.
REQUIRED_DOCS = {"README.md", "docs/design.md", "docs/architecture.md", "docs/protocol.md",
                 "docs/configuration.md", "docs/security.md", "docs/node-shim.md", "node-shim/README.md",
                 "tests/bench/README.md", "protocol/README.md"}


@pytest.fixture(scope="module")
def files() -> set[str]:
    return mdcheck.repo_files(ROOT)


def _in_scope(name: str, scopes: tuple[str, ...]) -> bool:
    return any(name.startswith(s) if s.endswith("/") else name == s for s in scopes)


def _report(problems: list[mdcheck.Problem]) -> str:
    return "\n".join(str(p) for p in problems)


# -- this repository ----------------------------------------------------------------------------------

def test_nothing_cites_the_design_brief(files: set[str]) -> None:
    assert "spotpatch_agent/cli.py" in files and "docs/architecture.md" in files  # the scopes are not empty
    problems = mdcheck.files_naming(ROOT, files, BRIEF, BRIEF_SCOPES)
    assert not problems, _report(problems)


def test_every_relative_link_and_anchor_resolves(files: set[str]) -> None:
    sources = mdcheck.markdown_files(files)
    assert REQUIRED_DOCS <= set(sources), REQUIRED_DOCS - set(sources)
    assert not any("node_modules/" in s or s.startswith(".venv/") for s in sources)
    checked = sum(len(mdcheck.links((ROOT / s).read_text(encoding="utf-8"))) for s in sources)
    assert checked >= 40, f"only {checked} links found: the link parser stopped seeing links"
    problems = mdcheck.check_links(ROOT, files, sources)
    assert not problems, _report(problems)


def test_every_design_citation_names_a_section(files: set[str]) -> None:
    sources = sorted(name for name in files if _in_scope(name, CITATION_SCOPES))
    cited = [c for s in sources
             for c in mdcheck.citations((ROOT / s).read_text(encoding="utf-8", errors="replace"))]
    assert len(cited) >= 200, f"only {len(cited)} citations found: the citation parser stopped seeing them"
    assert {n for _, sections, _ in cited for n in sections} >= {3, 6, 8, 10, 11, 13, 16, 17}
    problems = mdcheck.check_citations(ROOT, sources)
    assert not problems, _report(problems)


def test_design_md_has_sections_1_to_17_and_the_invariants() -> None:
    text = (ROOT / "docs/design.md").read_text(encoding="utf-8")
    assert mdcheck.design_sections(text) == list(range(1, 18))
    assert mdcheck.design_invariants(text) == set(range(1, 7))


def test_the_docs_lists_link_design_md() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/design.md" in {target for _, target in mdcheck.links(readme)}


# -- the same checks catch what they should (a small repository of broken cases) ----------------------

def _repo(tmp_path: Path, tree: dict[str, str]) -> tuple[Path, set[str]]:
    for name, text in tree.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    return tmp_path, mdcheck.repo_files(tmp_path)


DESIGN = "# D\n\n## 1. One\n\n## 2. Two\n\n## 16. Invariants\n\n1. a\n2. b\n\n## 17. Last\n"


def test_broken_links_are_found(tmp_path: Path) -> None:
    root, files = _repo(tmp_path, {
        ".gitignore": "dist/\n",
        "dist/index.js": "built\n",
        "README.md": "\n".join([
            "# Top",
            "[ok](docs/a.md) [ok anchor](docs/a.md#the-a-section) [ok dir](docs) [ok self](#top)",
            "![ok image](docs/pic.png) [ok second](docs/a.md#the-a-section-1) [web](https://example.com/x.md)",
            "[missing](docs/nope.md)",
            "![missing image](docs/nope.png)",
            "[bad anchor](docs/a.md#no-such-heading)",
            "[bad self anchor](#nowhere)",
            "[ignored build output](dist/index.js)",
            "[outside](../elsewhere.md)",
            "`[in a code span](docs/nope2.md)`",
            "```",
            "[in a fence](docs/nope3.md)",
            "```",
            "[ref]: docs/nope4.md",
            '<img src="docs/pic.png" alt="ok"> <a href="docs/a.md#the-a-section">ok</a> <img src="docs/nope5.svg">',
        ]),
        "docs/a.md": "# A\n\n## The `a` section\n\n## The a section\n\n[up](../README.md#top)\n",
        "docs/pic.png": "png\n",
    })
    problems = mdcheck.check_links(root, files, mdcheck.markdown_files(files))
    found = sorted(p.where + " " + p.what.split(":")[0] for p in problems)
    assert found == sorted([
        "README.md:4 link 'docs/nope.md'",
        "README.md:5 link 'docs/nope.png'",
        "README.md:6 link 'docs/a.md#no-such-heading'",
        "README.md:7 link '#nowhere'",
        "README.md:8 link 'dist/index.js'",
        "README.md:9 link '../elsewhere.md' leaves the repository",
        "README.md:14 link 'docs/nope4.md'",
        "README.md:15 link 'docs/nope5.svg'",
    ]), _report(problems)


def test_bad_citations_are_found(tmp_path: Path) -> None:
    cite = "design.md "  # split so this file holds no citation of a missing section itself
    root, files = _repo(tmp_path, {
        "docs/design.md": DESIGN,
        "src/a.py": "\n".join([
            f'"""ok ({cite}§1, §2; {cite}§16 invariant 2; docs/{cite}§1-§2)."""',
            f"# missing: docs/{cite}§3",
            f"# range with a gap: {cite}§1–§3",
            f"# list: {cite}§2, §9",
            f"# invariant: {cite}§1, invariant 5",
        ]),
    })
    problems = mdcheck.check_citations(root, sorted(files))
    assert [str(p) for p in problems] == [
        "src/a.py:2: cites design.md §3, which has no such section",
        "src/a.py:3: cites design.md §3, which has no such section",
        "src/a.py:4: cites design.md §9, which has no such section",
        "src/a.py:5: cites invariant 5, not in design.md §16",
    ]


def test_the_brief_is_found_wherever_it_is_named(tmp_path: Path) -> None:
    root, files = _repo(tmp_path, {
        "README.md": f"see {BRIEF}\n",
        "docs/x.md": f"ok\nalso {BRIEF} §3\n",
        "spotpatch_agent/m.py": f"# {BRIEF.lower()} is another name\n",
        "tests/t.py": f"assert '{BRIEF}' not in out\n",
    })
    problems = mdcheck.files_naming(root, files, BRIEF, BRIEF_SCOPES)
    assert [p.where for p in problems] == ["README.md:1", "docs/x.md:2"]


@pytest.mark.parametrize(("heading", "slug"), [
    ("Two commands", "two-commands"),
    ("5. Tool results: retry versus terminal (`tools/`)", "5-tool-results-retry-versus-terminal-tools"),
    ("`job/event` notifications", "jobevent-notifications"),
    ("Storage (all keys start with `spotpatch:<projectKey>:`; `projectKey` is a short hash, never a path)",
     "storage-all-keys-start-with-spotpatchprojectkey-projectkey-is-a-short-hash-never-a-path"),
    ("Vue (`locate-vue.ts`, `overlay/picker/chain-vue.ts`)", "vue-locate-vuets-overlaypickerchain-vuets"),
    ("A *real* [link](x.md) and snake_case", "a-real-link-and-snake_case"),
    ("Café — déjà vu", "café--déjà-vu"),
])
def test_github_slugs(heading: str, slug: str) -> None:
    assert mdcheck.github_slug(heading) == slug


def test_repeated_headings_are_numbered() -> None:
    assert mdcheck.anchors("# A\n## Notes\n```\n## Notes\n```\n## Notes\n") == {"a", "notes", "notes-1"}
