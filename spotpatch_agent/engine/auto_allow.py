"""What ``auto`` may write without review: an allowlist, not a denylist (issue 25; docs/configuration.md
*Modes*, docs/security.md *Auto gates*).

``auto`` writes a change the user has not seen, so it may only write files whose purpose is to be shown
in the page: UI source, styles, markup and content under the project's source directories. Anything an
editor, shell, CI, bundler, dev server, test runner, package manager or the browser (as a worker) runs or
loads as code or configuration goes to review, named with its kind. A path is auto-writable only when
all of these hold (checked in this order; the first one that fails names the kind):

1. no segment starts with ``.`` (no dot-directory, no dotfile);
2. the file name matches no build-file, agent-instruction, type-declaration, worker, server-side, test,
   configuration, rc-file, manifest or HTML-entry pattern (:data:`_NAME_KINDS`);
3. no directory segment is a script, tool, configuration, server, test, worker, database-tooling or static
   directory (:data:`_DIR_KINDS`; ``api`` only under ``pages/``, ``app/`` or ``routes/``), and no directory
   before the first source directory names a package that is not UI (:data:`_PACKAGE_KINDS`:
   ``backend/src/``, ``apps/api/src/``, ``packages/cli/src/`` are a server or a command, not page code);
4. its extension is in :data:`AUTO_EXTENSIONS`;
5. some directory segment is a source directory (:data:`SOURCE_DIRS`): a file at the project root or
   outside the source directories (``README.md``, ``docs/…``, ``index.js``, ``server.js``) goes to review.

Pure and case-insensitive (a case-insensitive file system writes ``SRC/X.TSX`` where ``src/x.tsx`` is).

A path is not the whole story: a stylesheet on the allowlist can make Node load a module (Tailwind's and
Less's ``@plugin``), and a tracked file with the executable bit is a command whatever its name.
:func:`added_loader_rules` and :func:`executable_files` find them in the change's diff, so that ``auto``
leaves them to review too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["AUTO_EXTENSIONS", "SOURCE_DIRS", "added_loader_rules", "executable_files", "is_auto_writable",
           "review_kind"]

#: The extensions ``auto`` may write (casefolded): UI source, styles, markup, and content the app shows.
#: ``.mjs``/``.cjs``/``.mts``/``.cts`` (mostly Node-side modules), ``.astro`` (its frontmatter runs in Node),
#: YAML/TOML/INI and every script language are not on it.
AUTO_EXTENSIONS = frozenset({
    ".ts", ".tsx", ".js", ".jsx", ".vue", ".svelte",
    ".css", ".scss", ".sass", ".less",
    ".html", ".htm", ".svg", ".md", ".txt", ".json",
})

#: Directory names (casefolded) that hold a project's UI source: one must be an ancestor of the file.
SOURCE_DIRS = frozenset({
    "src", "app", "pages", "components", "layouts", "styles", "assets", "locales", "i18n",
})

_SCRIPT_DIR = "in a script or tool directory ({seg}/: run as commands)"
_SERVER = "server-side or desktop code (Node runs it outside the browser)"
_TEST = "test code (your test runner runs it in Node)"
_WORKER = "a worker or extension script (the browser runs it outside the page; a service worker outlives it)"

#: Directory names (casefolded, any depth) whose files tools run; ``{seg}`` is the directory as written.
_DIR_KINDS: dict[str, str] = {
    **dict.fromkeys(("scripts", "script", "bin", "tools", "tooling", "ci"), _SCRIPT_DIR),
    **dict.fromkeys(("config", "configs"), "in a configuration directory ({seg}/)"),
    **dict.fromkeys(("server", "servers", "functions", "netlify", "supabase", "middleware", "electron", "main",
                     "preload", "src-tauri"), _SERVER),
    **dict.fromkeys(("test", "tests", "__tests__", "__mocks__", "mocks", "spec", "specs", "e2e", "cypress",
                     "playwright", "fixtures"), _TEST),
    **dict.fromkeys(("sw", "worker", "workers", "service-worker", "service-workers", "background",
                     "content-scripts", "content_scripts"), _WORKER),
    **dict.fromkeys(("public", "static"), "a static file ({seg}/ is served as-is, outside the bundler)"),
    **dict.fromkeys(("migrations", "seeds", "seeders", "prisma"),
                     "database tooling ({seg}/: the migration or seed tool runs it in Node)"),
    "vendor": "vendored code ({seg}/)",
}
#: Package names (casefolded) that, before the first source directory, name a server, a command or
#: infrastructure rather than the page (``apps/api/src/main.ts``); after it they are page code
#: (``src/api/client.ts``, ``src/features/jobs/``).
_PACKAGE_KINDS = frozenset({
    "api", "apis", "backend", "back-end", "cli", "lambda", "lambdas", "daemon", "bot", "bots", "cron", "jobs",
    "db", "database", "infra", "infrastructure", "cdk", "deploy", "node", "edge", "backend-api",
})
#: ``api/`` is server code (a route handler) under these parents only; ``src/api/client.ts`` is page code.
_API_PARENTS = frozenset({"pages", "app", "routes"})

_BUILD_FILE = (r"(?:gnu)?makefile(?:\..*)?|.*\.mk|(?:docker|container|jenkins|vagrant|proc|rake|gem|pod|brew|just"
               r"|task|tilt|earth|gulp|grunt|jake|danger|snake|caddy|fast|guard|cake|build)file(?:\..*)?")
_AGENT_NOTES = (r"(?:agents?|claude|gemini|conventions)(?:\.[^.]+)?\.md"
                r"|(?:copilot-instructions|.*\.instructions|.*\.prompt)\.md")
_WORKER_NAME = (r"(?:.*[.+_-])?(?:sw|(?:service-?)?worker)(?:[.+_-].*)?|.*serviceworker.*"
                r"|content[-_]?scripts?\.[cm]?[jt]sx?")
_SERVER_NAME = (r"(?:.*[.+_-])?server(?:[.+_-].*)?|_?middleware\..*|proxy\..*|instrumentation(?:[.+_-].*)?"
                r"|setupproxy\..*|routes?\..*|(?:electron|preload)(?:[.+_-].*)?")
_TEST_NAME = (r".*\.(?:test|spec|e2e|bench|cy|stories|story)\..*|(?:.*[.+_-])?(?:setup|teardown)(?:[.+_-]?tests?)?\..*"
              r"|(?:global|test)[-_]?(?:setup|teardown)\..*|test[-_]?utils\..*")
_MANIFEST = (r"manifest\.json|.*\.webmanifest|project\.json|package\.json|[jt]sconfig.*\.json"
             r"|(?:biome|deno|dprint)\.jsonc?")
_HTML_ENTRY = "an HTML entry page (it loads the app's scripts; HTML plugins render it as a template in Node)"

#: File-name patterns in the order they are tried: (fullmatch over the casefolded name, the kind it names,
#: whether it applies only when the name's stem is written in lower case: ``background.ts`` is an extension's
#: background script and ``eslintrc.json`` an rc file, ``Background.tsx`` and ``Src.tsx`` are components).
_NAME_KINDS: tuple[tuple[re.Pattern[str], str, bool], ...] = tuple((re.compile(p), k, lower) for p, k, lower in (
    (_BUILD_FILE, "a build or task file (tools run it)", False),
    (_AGENT_NOTES, "instructions your coding agents read and follow", False),
    (r".*\.d(?:\.[^.]+)?\.[cm]?ts", "a type declaration (it changes what the type-check accepts)", False),
    (_WORKER_NAME, _WORKER, False),
    (r"background\.[cm]?[jt]sx?", _WORKER, True),
    (_SERVER_NAME, _SERVER, False),
    (_TEST_NAME, "test, test setup or story code (your test runner or Storybook runs it)", False),
    (r".*[._-]config\..*|config\.[cm][jt]s|.*\.conf(?:\..*)?", "a configuration file (*.config.*: tools load it)",
     False),
    (r"[a-z0-9_-]*rc(?:\..*)?", "an rc file (a tool's configuration)", True),
    (_MANIFEST, "a manifest or tool configuration (tools read it)", False),
    (r"index\.html?", _HTML_ENTRY, False),
))


def review_kind(path: str) -> str | None:
    """Why ``auto`` may not write the relative POSIX ``path`` without review — a noun phrase for the
    status message ``"<path> is <kind>"`` — or ``None`` when it is auto-writable (the module's rule)."""
    segments = path.split("/")
    folded = [s.casefold() for s in segments]
    name = folded[-1]
    for seg in segments[:-1]:
        if seg.startswith("."):
            return f"under a dot-directory ({seg}/: editor, tool or CI configuration)"
    if name.startswith("."):
        return "a dotfile (tool configuration)"
    for pattern, kind, lower in _NAME_KINDS:
        if pattern.fullmatch(name) and (not lower or _lowercase_stem(segments[-1])):
            return kind
    first_source = next((i for i, seg in enumerate(folded[:-1]) if seg in SOURCE_DIRS), len(folded))
    for index, seg in enumerate(folded[:-1]):
        if seg == "api" and index and folded[index - 1] in _API_PARENTS:
            return _SERVER
        if index < first_source and seg in _PACKAGE_KINDS:
            return _SERVER
        dir_kind = _DIR_KINDS.get(seg)
        if dir_kind is not None:
            return dir_kind.format(seg=segments[index])
    dot = name.rfind(".")
    extension = name[dot:] if dot > 0 else ""
    if extension not in AUTO_EXTENSIONS:
        shown = f"a {extension} file" if extension else "a file without an extension"
        return f"{shown} (not UI source, a style, markup or content)"
    if len(segments) == 1:
        return "a file at the project root (where tools look for their configuration and entry points)"
    if not SOURCE_DIRS.intersection(folded[:-1]):
        return "outside the source directories (src/, app/, pages/, components/ …)"
    return None


def is_auto_writable(path: str) -> bool:
    """Whether ``auto`` may write ``path`` without review (:func:`review_kind` is ``None``)."""
    return review_kind(path) is None


def _lowercase_stem(name: str) -> bool:
    """Whether ``name`` up to its first dot is written in lower case (``eslintrc.json``, not ``Src.tsx``)."""
    stem = name.split(".", 1)[0]
    return stem == stem.lower()


#: Stylesheet at-rules that load a JavaScript module into Node when the stylesheet is compiled (in the dev
#: server, unconfined): Tailwind CSS v4's ``@plugin`` and ``@config``, Less's ``@plugin``. At-rules are
#: case-insensitive; ``\b`` keeps ``@plugins-x`` out and a TypeScript decorator ``@config(…)`` in (review). An
#: at-keyword with a CSS escape (``@pl\75gin``) counts as well, whatever a parser would make of it.
_LOADER_RULE = re.compile(r"@(?:plugin|config)\b|@[\w-]*\\", re.IGNORECASE)
#: Allowlisted files that can hold a stylesheet (a ``<style>`` block of a component or a page).
_STYLE_HOSTS = frozenset({".css", ".scss", ".sass", ".less", ".vue", ".svelte", ".html", ".htm"})


def added_loader_rules(diff: str) -> list[str]:
    """Paths in the unified ``diff`` (``git diff`` with ``a/``/``b/`` prefixes, no renames) whose *added*
    lines hold a stylesheet at-rule that loads a JavaScript module into Node (``@plugin "./x.js"``,
    ``@config``): a change that adds one makes an allowlisted stylesheet run a file as code, so ``auto``
    leaves it to review. Only files that can hold a stylesheet are scanned, and any file whose name the
    header does not give plainly (a quoted name: ``"a file"`` is reported)."""
    found: list[str] = []
    for section in _sections(diff):
        if section.path is not None and not _holds_style(section.path):
            continue
        if any(_LOADER_RULE.search(line) for line in section.added):
            shown = section.path or "a file"
            if shown not in found:
                found.append(shown)
    return found


def executable_files(diff: str) -> list[str]:
    """Paths in ``diff`` that are executable files (mode ``100755``, kept by an edit: changeset validation
    refuses any mode change): a command someone runs by name, whatever its extension."""
    return [section.path or "a file" for section in _sections(diff) if section.executable]


@dataclass
class _Section:
    """One file of a unified diff: its path (``None`` when the header quotes it), whether its ``index``
    line gives mode ``100755``, and its added lines (without the ``+``)."""

    path: str | None
    executable: bool = False
    added: list[str] = field(default_factory=list)


def _sections(diff: str) -> list[_Section]:
    sections: list[_Section] = []
    in_header = False
    for line in diff.split("\n"):
        if line.startswith("diff --git "):
            sections.append(_Section(_header_path(line[len("diff --git "):])))
            in_header = True
        elif not sections:
            continue
        elif in_header:
            if line.startswith("index ") and line.endswith(" 100755"):
                sections[-1].executable = True
            elif line.startswith("@@"):
                in_header = False
        elif line.startswith("+"):
            sections[-1].added.append(line[1:])
    return sections


def _header_path(rest: str) -> str | None:
    """``a/X b/X`` → ``X`` (no renames: both sides name one path, so spaces in it are no ambiguity);
    ``None`` for anything else (git quotes a name with special characters)."""
    size, odd = divmod(len(rest) - 5, 2)
    path = rest[2:2 + size]
    return path if not odd and size > 0 and rest == f"a/{path} b/{path}" else None


def _holds_style(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].casefold()
    dot = name.rfind(".")
    return dot < 0 or name[dot:] in _STYLE_HOSTS or name[dot:] not in AUTO_EXTENSIONS
