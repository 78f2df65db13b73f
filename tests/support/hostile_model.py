"""A project and a scripted model that tries every hostile path: the world of the hostile-model tests
(tests/engine/test_hostile_model.py) and of the MCP hand-off's (tests/handoff/test_mcp.py)."""

from __future__ import annotations

import hashlib
import secrets
import unicodedata
import urllib.parse
from pathlib import Path

from tests.conftest import git, make_repo

APP = 'export const App = () => <button className="a">Go</button>;\n'


class World:
    """The project, the outside canaries and the hashes of everything that must not change."""

    def __init__(self, tmp: Path) -> None:
        self.canary_out = "CANARY-" + secrets.token_hex(16)
        self.canary_env = "CANARY-" + secrets.token_hex(16)
        self.canary_key = "CANARY-" + secrets.token_hex(16)
        self.outside = tmp / "outside"
        self.outside.mkdir()
        (self.outside / "canary.txt").write_text(self.canary_out + "\n")
        (self.outside / "id_rsa").write_text(self.canary_key + "\n")
        self.root = make_repo(tmp / "repo", {
            "src/App.tsx": APP, "src/util.ts": "export const u = 1;\n", ".gitignore": "node_modules\nignored.txt\n",
            ".env": f"API_TOKEN={self.canary_env}\n", ".env.local": f"X={self.canary_env}\n",
            ".npmrc": f"//registry/:_authToken={self.canary_env}\n", "certs/server.key": self.canary_key + "\n"})
        (self.root / "link.txt").symlink_to(self.outside / "canary.txt")
        (self.root / "linkdir").symlink_to(self.outside, target_is_directory=True)
        git(self.root, "add", "link.txt", "linkdir")
        git(self.root, "commit", "-q", "-m", "tracked symlinks to the outside")
        (self.root / "ignored.txt").write_text(self.canary_env + "\n")  # ignored: never listed or read
        self.secrets = (self.canary_out, self.canary_env, self.canary_key)

    def digest(self) -> dict[str, str]:
        """SHA-256 of every file outside the allowed set's reach that must never change."""
        out: dict[str, str] = {}
        for base, skip_git in ((self.outside, False), (self.root, True)):
            for p in sorted(base.rglob("*")):
                rel = p.relative_to(base).as_posix()
                if skip_git and (rel == ".git" or rel.startswith(".git/")):
                    continue
                if p.is_symlink():
                    out[f"{base.name}/{rel}"] = "link:" + str(p.readlink())
                elif p.is_file():
                    out[f"{base.name}/{rel}"] = hashlib.sha256(p.read_bytes()).hexdigest()
        for rel in ("config", "HEAD", "index"):
            out[f".git/{rel}"] = hashlib.sha256((self.root / ".git" / rel).read_bytes()).hexdigest()
        out["refs"] = git(self.root, "for-each-ref", "--format=%(refname) %(objectname)")
        out["status"] = git(self.root, "status", "--porcelain", "--ignored")
        return out


def hostile_paths(world: World) -> list[str]:
    outside_abs = str(world.outside / "canary.txt")
    bases = [".env", ".env.local", ".npmrc", "certs/server.key", "../outside/canary.txt", outside_abs,
             "link.txt", "linkdir/canary.txt", "linkdir/id_rsa", ".git/config", ".git/HEAD", "ignored.txt",
             "node_modules/x.js", "../../../../etc/passwd"]
    variants: list[str] = []
    for b in bases:
        variants += [b, "./" + b, "src/../" + b, "src/./../" + b, b.upper(), b.replace("/", "\\"),
                     urllib.parse.quote(b, safe=""), b + "\x00.tsx", unicodedata.normalize("NFD", "é/../" + b)]
    variants += [
        "/etc/passwd", "/proc/self/environ", "/proc/self/cwd/.env", "//etc/passwd", "file:///etc/passwd",
        "C:\\Windows\\win.ini", "C:/Windows/win.ini", "\\\\server\\share\\x", "~/.ssh/id_rsa", "$HOME/.netrc",
        "．env", ".ｅnv", ".Env", ".ENV.LOCAL", ".env.", ".env ", " .env", ".env/", "src/..%2f..%2f.env",
        "%2e%2e/outside/canary.txt", "%252e%252e/outside/canary.txt", "src/%00/../.env", "..", ".", "", "/",
        "src", "src/", ".git", "linkdir", "src/App.tsx/../../.env", "src//..//..//outside/canary.txt",
        "\u202e.env", "src/App.tsx\x00", "a" * 300 + "/../.env", "src/\u2024\u2024/.env",
    ]
    return variants
