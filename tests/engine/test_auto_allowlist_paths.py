"""Break attempt on issue 25's ``auto`` allowlist (engine/auto_allow.py): paths that were still auto-written.

- A package that is not UI before the source directory: ``backend/src/index.ts`` (an Express server beside a
  Vite front end), ``apps/api/src/main.ts`` (a NestJS app in the same workspace), ``packages/cli/src/index.ts``
  — any ``src/`` anywhere counted as page code, so ``auto`` wrote a server the user runs with ``npm run dev``.
- Database tooling Node runs: ``prisma/seed.ts`` (``prisma db seed``), ``src/db/migrations/001_init.ts``.
- Instructions coding agents read, under names the rule missed: ``AGENT.md`` (Amp), ``CLAUDE.local.md``,
  ``AGENTS.override.md`` (Codex), ``CONVENTIONS.md`` (aider).
"""

from __future__ import annotations

import pytest

from spotpatch_agent.engine.auto_allow import is_auto_writable, review_kind

WAS_AUTO_WRITTEN = [
    ("backend/src/index.ts", "server-side"),
    ("apps/api/src/main.ts", "server-side"),
    ("api/src/handler.ts", "server-side"),
    ("packages/cli/src/index.ts", "server-side"),
    ("services/bot/src/index.ts", "server-side"),
    ("src/prisma/seed.ts", "database"),
    ("src/db/migrations/001_init.ts", "database"),
    ("src/AGENT.md", "coding agents"),
    ("src/CLAUDE.local.md", "coding agents"),
    ("src/components/AGENTS.override.md", "coding agents"),
    ("src/CONVENTIONS.md", "coding agents"),
]


@pytest.mark.parametrize(("path", "kind"), WAS_AUTO_WRITTEN)
def test_a_non_ui_package_database_tooling_and_agent_notes_go_to_review(path: str, kind: str) -> None:
    found = review_kind(path)
    assert found is not None and kind in found, found


@pytest.mark.parametrize("path", ["packages/web/src/App.jsx", "packages/ui/src/Button.tsx", "src/api/client.ts",
                                  "apps/web/src/pages/Cli.tsx", "src/components/ApiStatus.tsx",
                                  "src/content/agent-guide.md", "src/features/jobs/JobList.tsx"])
def test_ui_packages_and_page_code_named_like_them_stay_auto_writable(path: str) -> None:
    assert is_auto_writable(path), review_kind(path)
