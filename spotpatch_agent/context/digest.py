"""What of one configuration file goes to the model: pure functions from file text to a short, safe digest.

- :func:`jsonc_loads` — JSON with comments and trailing commas (``tsconfig.json``, ``biome.jsonc``).
- :func:`tsconfig_digest` — the compiler options that change how code is written (``jsx``, ``strict``,
  ``paths``…), never ``outDir``/``rootDir``-style build plumbing.
- :func:`package_digest` — framework and styling libraries from ``dependencies``/``devDependencies``/
  ``peerDependencies``: names and major versions only. ``scripts`` (check commands) is never read.
- :func:`redact_config_text` — the redactor (registered secrets, paths) plus key-looking values: a value
  assigned to a name such as ``apiKey``/``token``/``secret`` (the one credential rule's text form,
  ``policy.credentials.CREDENTIAL_NAME_IN_TEXT``), and well-known key shapes (``sk-…``, ``ghp_…``).
- :func:`drop_check_lines` — lines naming a configured check's command line are left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from spotpatch_agent.policy.credentials import CREDENTIAL_NAME_IN_TEXT
from spotpatch_agent.policy.redact import REDACTOR, SECRET_MARK

#: tsconfig compiler options that change how source is written (the rest is build plumbing).
TSCONFIG_OPTIONS = (
    "jsx", "jsxImportSource", "strict", "noImplicitAny", "strictNullChecks", "noUncheckedIndexedAccess",
    "exactOptionalPropertyTypes", "noImplicitReturns", "noUnusedLocals", "noUnusedParameters",
    "target", "lib", "module", "moduleResolution", "baseUrl", "paths", "allowJs", "checkJs",
    "isolatedModules", "verbatimModuleSyntax", "allowImportingTsExtensions", "esModuleInterop",
    "experimentalDecorators", "useDefineForClassFields", "types",
)

#: Libraries that decide how front-end code is written: frameworks, meta-frameworks, styling, UI kits,
#: routing/state, the language and the build tool. Names outside this set (and any ``@types/*``) are left out.
_LIBRARIES = frozenset({
    "react", "react-dom", "preact", "vue", "svelte", "solid-js", "lit", "@angular/core", "qwik",
    "@builder.io/qwik", "next", "nuxt", "astro", "@sveltejs/kit", "@remix-run/react", "@solidjs/start",
    "vite", "typescript", "tailwindcss", "@tailwindcss/vite", "postcss", "sass", "less", "stylus",
    "styled-components", "@emotion/react", "@emotion/styled", "@vanilla-extract/css", "@stitches/react",
    "unocss", "@pandacss/dev", "bootstrap", "bulma", "@mui/material", "@chakra-ui/react", "antd",
    "@mantine/core", "element-plus", "vuetify", "@headlessui/react", "@radix-ui/themes", "daisyui",
    "clsx", "classnames", "class-variance-authority", "tailwind-merge", "react-router", "react-router-dom",
    "@tanstack/react-router", "vue-router", "@tanstack/react-query", "redux", "@reduxjs/toolkit", "zustand",
    "jotai", "mobx", "pinia", "vuex", "prettier", "eslint", "@biomejs/biome", "stylelint",
})
_LIBRARY_PREFIXES = ("@radix-ui/", "@vitejs/plugin-", "@shadcn/")

_KEY_VALUE = re.compile(
    rf"""(?ix)(?P<name>["']?{CREDENTIAL_NAME_IN_TEXT}["']?\s*[:=]\s*)(?P<q>["'`]?)(?P<value>[^"'`\s,;}}]{{6,}})(?P=q)""")
_KEY_SHAPES = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|sk-ant-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|AKIA[0-9A-Z]{16}|xox[baprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,}|glpat-[A-Za-z0-9_-]{20,})\b")


def jsonc_loads(text: str) -> Any:
    """Parse JSON with ``//`` and ``/* */`` comments and trailing commas (strings are respected).
    Raises ``ValueError`` when the rest is not JSON."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(ch)
            i += 1
    body = re.sub(r",(\s*[}\]])", r"\1", "".join(out))
    return json.loads(body.removeprefix("\ufeff"))


def tsconfig_digest(text: str) -> str | None:
    """``{"extends": …, "compilerOptions": {…}}`` reduced to :data:`TSCONFIG_OPTIONS`, as one compact JSON
    line; None when the file is not JSONC or holds none of them."""
    try:
        data = jsonc_loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    options = data.get("compilerOptions")
    picked: dict[str, Any] = {}
    if isinstance(options, dict):
        picked = {k: options[k] for k in TSCONFIG_OPTIONS if k in options}
    if isinstance(data.get("extends"), (str, list)):
        picked = {"extends": data["extends"], **picked}
    if isinstance(data.get("references"), list) and not picked:
        refs = [r.get("path") for r in data["references"] if isinstance(r, dict) and isinstance(r.get("path"), str)]
        picked = {"references": refs} if refs else {}
    return json.dumps(picked, ensure_ascii=False, separators=(", ", ": ")) if picked else None


def _major(spec: Any) -> str | None:
    """``"^18.3.1"`` → ``"18"``; None for tags, URLs, ``workspace:*`` and anything else without a version."""
    if not isinstance(spec, str):
        return None
    m = re.match(r"^\s*(?:npm:[^@]+@)?[\^~>=<v\s]*(\d+)(?:[.x*]|\s|$)", spec)
    return m.group(1) if m else None


def package_digest(text: str) -> str | None:
    """The framework/styling libraries of a ``package.json`` as ``name major`` items (``react 18, vite 6``),
    sorted by name; None when it has none or is not JSON. Only the dependency maps are read."""
    try:
        data = json.loads(text.removeprefix("\ufeff"))
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    found: dict[str, str | None] = {}
    for field in ("dependencies", "devDependencies", "peerDependencies"):
        deps = data.get(field)
        if not isinstance(deps, dict):
            continue
        for name, spec in deps.items():
            if isinstance(name, str) and (name in _LIBRARIES or name.startswith(_LIBRARY_PREFIXES)):
                found.setdefault(name, _major(spec))
    if not found:
        return None
    return ", ".join(f"{name} {major}" if major else name for name, major in sorted(found.items()))


def redact_config_text(text: str) -> str:
    """``text`` through the redactor, then key-looking values replaced by ``[REDACTED]``."""
    text = REDACTOR(text)
    text = _KEY_VALUE.sub(lambda m: m.group("name") + m.group("q") + SECRET_MARK + m.group("q"), text)
    return _KEY_SHAPES.sub(SECRET_MARK, text)


def check_needles(commands: Iterable[tuple[str, list[str]]]) -> tuple[str, ...]:
    """The texts that betray a configured check: its whole command line, and its arguments joined when
    there are two or more (``tsc --noEmit`` of ``npx tsc --noEmit``)."""
    needles: set[str] = set()
    for command, args in commands:
        needles.add(" ".join([command, *args]).strip())
        if len(args) >= 2:
            needles.add(" ".join(args).strip())
    return tuple(sorted((n for n in needles if len(n) >= 3), key=len, reverse=True))


def drop_check_lines(text: str, needles: tuple[str, ...]) -> str:
    """``text`` without the lines that contain one of ``needles`` (compared with whitespace collapsed)."""
    if not needles:
        return text
    kept = [line for line in text.split("\n") if not any(n in " ".join(line.split()) for n in needles)]
    return "\n".join(kept)


def fence(body: str, info: str = "") -> str:
    """``body`` in a Markdown code fence longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{body}\n{ticks}"
