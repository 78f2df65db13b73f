"""Each rule that once lived in several copies exists once (issue 30, "one place for each rule").

Every module of ``spotpatch_agent`` is parsed with :mod:`ast` (nothing is imported or run):

- **Names that look like a credential.** Only ``protocol/credentials.py`` (re-exported by
  ``policy/credentials.py``) may spell the words: no other string (a regex, a docstring) holds an alternation
  of two or more of them (``KEY|TOKEN|SECRET``), no other tuple, list or set lists two or more, and no other
  ``*CREDENTIAL*`` name is bound to a pattern. Four copies used to disagree: redaction lacked ``AUTH``, so a
  ``*_AUTH`` variable kept out of a check's environment was still shown in logs and events.
- **Check timeouts.** Only ``checks/timeouts.py`` reads the ``checkTimeoutSec`` limit or falls back from a
  check's ``timeout_sec`` to it, and only it defines a check grace constant (three formulas and two graces,
  10 s and 20 s, used to).
- **The docs.** Every list of the credential words in ``docs/`` and the READMEs is the code's list.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from spotpatch_agent.policy import credentials as policy_credentials
from spotpatch_agent.protocol import credentials
from spotpatch_agent.protocol.credentials import CREDENTIAL_WORDS

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "spotpatch_agent"
CREDENTIAL_RULE = "spotpatch_agent/protocol/credentials.py"
TIMEOUT_RULE = "spotpatch_agent/checks/timeouts.py"
#: The words and the other spellings of them a copy of the rule would use.
_WORDS = {w.lower() for w in CREDENTIAL_WORDS} | {"passwd", "passw", "credentials"}
_ALTERNATION = re.compile(r"[A-Za-z_]+(?:\|[A-Za-z_]+)+")


def _credential_words_in_alternations(text: str) -> list[str]:
    """Each alternation run of ``text`` (``a|b|c``) holding two or more of the credential words."""
    return [run for run in _ALTERNATION.findall(text)
            if sum(part.lower().strip("_") in _WORDS for part in run.split("|")) >= 2]


def credential_copies(tree: ast.AST) -> list[str]:
    """What in ``tree`` spells the credential words a second time (line: what)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [f"{node.lineno}: {run!r}" for run in _credential_words_in_alternations(node.value)]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                     and e.value.lower().strip("_") in _WORDS]
            if len(words) >= 2:
                found.append(f"{node.lineno}: a list of {words}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name) and "CREDENTIAL" in t.id.upper()]
            value = node.value
            is_pattern = (isinstance(value, ast.Constant) and isinstance(value.value, str)) or (
                isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "compile")
            if names and is_pattern:
                found.append(f"{node.lineno}: {names[0]} = a pattern")
    return found


def timeout_copies(tree: ast.AST) -> list[str]:
    """What in ``tree`` computes a check timeout or defines a check grace a second time (line: what)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and re.search(r"CHECK\w*GRACE", node.id, re.IGNORECASE):
            found.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "checkTimeoutSec":
            found.append(f"{node.lineno}: the checkTimeoutSec limit read")
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and node.slice.value == "checkTimeoutSec":
            found.append(f"{node.lineno}: the checkTimeoutSec cap read")
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) \
                and isinstance(node.values[0], ast.Attribute) and node.values[0].attr == "timeout_sec":
            found.append(f"{node.lineno}: a check's timeout_sec or a fallback")
    return found


def _modules() -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_the_credential_words_are_spelled_in_one_module() -> None:
    copies = {rel: found for rel, tree in _modules() if rel != CREDENTIAL_RULE and (found := credential_copies(tree))}
    assert copies == {}, (
        "a second copy of the credential rule; ask spotpatch_agent.policy.credentials.looks_like_credential "
        f"(or use CREDENTIAL_NAME_IN_TEXT) instead: {copies}")
    rule = ast.parse((REPO / CREDENTIAL_RULE).read_text(encoding="utf-8"))
    assert credential_copies(rule), "the scan no longer sees the rule's own list: fix the scan"
    assert policy_credentials.looks_like_credential is credentials.looks_like_credential


def test_the_check_timeout_is_computed_in_one_module() -> None:
    copies = {rel: found for rel, tree in _modules() if rel != TIMEOUT_RULE and (found := timeout_copies(tree))}
    assert copies == {}, f"use checks.timeouts.check_timeout / check_deadline / CHECK_GRACE_SEC instead: {copies}"
    assert len(timeout_copies(ast.parse((REPO / TIMEOUT_RULE).read_text(encoding="utf-8")))) >= 3


def test_the_scans_find_the_copies_there_were() -> None:
    # The four credential copies and the three timeout formulas issue 30 removed, as they were written.
    old_credentials = '''
_CREDENTIAL_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.I)
def f(name):
    return re.search(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", name, re.I)
_KEY_NAME = r"[\\w.-]*(?:api[_-]?key|secret|token|passw(?:or)?d|credential|private[_-]?key|auth)[\\w.-]*"
_WORDS = ("KEY", "TOKEN")
'''
    assert {int(f.split(':')[0]) for f in credential_copies(ast.parse(old_credentials))} == {2, 4, 5, 6}
    old_timeouts = '''
_CHECK_GRACE_SEC = 10
deadline = max((c.timeout_sec or limits.get("checkTimeoutSec") for c in checks),
               default=limits.get("checkTimeoutSec")) + _CHECK_GRACE_SEC
cap = min(check.timeout_sec or 300, LIMITS["checkTimeoutSec"][1])
'''
    assert {int(f.split(':')[0]) for f in timeout_copies(ast.parse(old_timeouts))} == {2, 3, 4, 5}
    harmless = '''
_AUTH_SCHEME = re.compile(r"^(?:Bearer|Basic|Token|Bot|ApiKey)\\s+", re.IGNORECASE)
_CREDENTIAL_FILES = frozenset({".npmrc", ".netrc", ".pypirc"})
with anyio.move_on_after(settings.timeout_sec):
    pass
'''
    assert credential_copies(ast.parse(harmless)) == timeout_copies(ast.parse(harmless)) == []


def test_the_docs_list_the_words_the_code_has() -> None:
    words = set(CREDENTIAL_WORDS)
    problems = []
    for doc in sorted([*(REPO / "docs").rglob("*.md"), REPO / "README.md", REPO / "node-shim" / "README.md"]):
        if not doc.exists():
            continue
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for run in _credential_words_in_alternations(line):
                if {part.upper() for part in run.split("|")} != words:
                    problems.append(f"{doc.relative_to(REPO)}:{number}: {run}")
            listed = re.findall(r"`([A-Z]+)`", line)
            if sum(word in words for word in listed) >= 3:
                problems.append(f"{doc.relative_to(REPO)}:{number}: a list of {listed}: write "
                                f"`{'|'.join(CREDENTIAL_WORDS)}` or name the rule (docs/security.md §1)")
    assert problems == [], (f"the credential words are {'|'.join(CREDENTIAL_WORDS)} (protocol/credentials.py): "
                            f"{problems}")
