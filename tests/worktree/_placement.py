"""A repository with a submodule for the placement tests."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import git

FILES = {
    ".gitignore": "node_modules/\n",
    "package.json": '{"name": "app", "private": true}\n',
    "src/app.js": "export const n = 1;\n",
}


def repo_with_submodule(repo_factory) -> tuple[Path, Path]:
    origin = repo_factory({"lib.txt": "library\n"}, name="lib-origin")
    root = repo_factory(FILES)
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(origin), "vendor/lib")
    git(root, "commit", "-qm", "add submodule")
    return root, origin
