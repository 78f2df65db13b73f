"""Generated repositories for the scale benchmark: ``make_repo(dest, files)`` builds a committed git repository of
``files`` small source files shaped like a front-end monorepo (``packages/pkg-NNNN/src/...``), plus the parts a real
one has around them: a ``.gitignore`` with ignored build output present on disk, a few symlinks, a binary file and
a protected ``.env``. The same ``(files, seed)`` gives the same tree, so runs compare like with like.

The one file the benchmark edits is ``src/App.tsx`` (``EDIT_PATH``); its text holds ``EDIT_NEEDLE`` once.
"""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

EDIT_PATH = "src/App.tsx"
EDIT_NEEDLE = "Welcome to the scale benchmark"
SEARCH_NEEDLE = "scaleBenchNeedle"  # present in about 1 file in 500

_APP = f"""import {{ Card }} from "./Card";

export function App() {{
  return (
    <main>
      <h1>{EDIT_NEEDLE}</h1>
      <Card title="first" />
    </main>
  );
}}
"""

_CARD = """export function Card(props: { title: string }) {
  return <section className="card">{props.title}</section>;
}
"""

_FILES_PER_DIR = 40
_DIRS_PER_PACKAGE = 25


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, input=stdin, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _source(rng: random.Random, index: int) -> str:
    name = f"Thing{index}"
    extra = f"  // {SEARCH_NEEDLE}\n" if index % 500 == 7 else ""
    return (f"export function {name}(props: {{ n: number }}) {{\n{extra}"
            f"  const total = props.n * {rng.randint(1, 999)};\n"
            f"  return <span data-i=\"{index}\">{{total}}</span>;\n}}\n")


def make_repo(dest: Path, files: int, *, seed: int = 0) -> Path:
    """Create ``dest`` (must not exist or be empty) holding a one-commit repository of about ``files`` tracked files."""
    dest.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    (dest / "src").mkdir()
    (dest / EDIT_PATH).write_text(_APP)
    (dest / "src" / "Card.tsx").write_text(_CARD)
    (dest / "package.json").write_text('{"name": "scale-bench", "private": true, "type": "module"}\n')
    (dest / ".gitignore").write_text("node_modules/\ndist/\n*.log\n")
    (dest / ".env").write_text("SECRET=not-for-the-model\n")
    (dest / "src" / "logo.png").write_bytes(bytes(range(256)) * 4)
    made = 6
    index = 0
    package = 0
    while made < files:
        pkg = dest / "packages" / f"pkg-{package:04d}"
        (pkg / "package.json").parent.mkdir(parents=True, exist_ok=True)
        (pkg / "package.json").write_text(f'{{"name": "pkg-{package}"}}\n')
        made += 1
        for d in range(_DIRS_PER_PACKAGE):
            if made >= files:
                break
            folder = pkg / "src" / f"part{d:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            for _ in range(min(_FILES_PER_DIR, files - made)):
                (folder / f"Thing{index}.tsx").write_text(_source(rng, index))
                index += 1
                made += 1
        if package % 50 == 3:
            os.symlink("src", pkg / "lib")  # a tracked symlink to a folder
        package += 1
    # Ignored output that exists on disk, as in a real checkout after a build.
    for folder in ("dist", "node_modules/dep"):
        (dest / folder).mkdir(parents=True, exist_ok=True)
        for i in range(50):
            (dest / folder / f"out{i}.js").write_text("module.exports = 1;\n")
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "scale bench baseline")
    return dest


if __name__ == "__main__":  # pragma: no cover - manual use: python -m tests.bench.scale_repo DEST FILES
    import sys

    print(make_repo(Path(sys.argv[1]), int(sys.argv[2])))
