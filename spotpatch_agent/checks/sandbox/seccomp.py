"""Linux: the seccomp filter every bubblewrap-confined check runs under (docs/security.md §4, *Check sandbox*).

A read-only bind mount does not stop ``connect()`` on a Unix socket file: the kernel checks the socket
inode's write permission, never the mount's read-only flag. So any socket in a path the sandbox shows (a
database's, LXD's ``/var/snap/lxd/common/lxd/unix.socket``, a socket below the project's ``node_modules``)
would be reachable, and with ``network: true`` every abstract socket of the host too. The filter closes
that door for every check, with or without ``network``:

- ``socket(AF_UNIX, …)`` fails with ``EPERM``: no Unix socket can be created, so none can be connected to.
  ``socketpair()`` (a different system call: how Node/libuv and Python wire a child's stdio) still works;
- ``io_uring_setup`` fails with ``EPERM`` (io_uring can create and connect sockets without the
  ``socket``/``connect`` system calls, out of this filter's sight);
- ``keyctl``, ``add_key`` and ``request_key`` fail with ``EPERM``: the kernel keyring is not namespaced, and
  the check would otherwise inherit the engine's session keyring (pam_keyinit's login session: Kerberos
  tickets, ecryptfs and other keys stored there) and read every key in it;
- a system call of another ABI than the engine's (i386 or x32 on x86-64) fails with ``EPERM``: there the
  socket call has other numbers (``socketcall``) this filter does not read.

:func:`filter_bytes` is the classic BPF program (x86-64 and aarch64); ``None`` on another architecture (the
check then runs without it: docs/security.md says so). :func:`open_filter` puts it in a memory file for
``bwrap --seccomp FD``.
"""

from __future__ import annotations

import os
import platform
import struct

__all__ = ["filter_bytes", "open_filter"]

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_AF_UNIX = 1
_X32_BIT = 0x40000000
_IO_URING_SETUP = 425  # the same number on every architecture (new system calls share one table)

#: machine → (AUDIT_ARCH_*, __NR_socket, whether x32 numbers exist, refused system calls:
#: add_key, request_key, keyctl, io_uring_setup)
_X86_64 = (0xC000003E, 41, True, (248, 249, 250, _IO_URING_SETUP))
_AARCH64 = (0xC00000B7, 198, False, (217, 218, 219, _IO_URING_SETUP))
_ARCHES = {"x86_64": _X86_64, "amd64": _X86_64, "aarch64": _AARCH64, "arm64": _AARCH64}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_bytes(machine: str | None = None) -> bytes | None:
    """The BPF program for ``machine`` (default: this one), or ``None`` when it is not supported."""
    found = _ARCHES.get((machine or platform.machine()).lower())
    if found is None:
        return None
    arch, nr_socket, x32, refused = found
    # Offsets in struct seccomp_data: nr 0, arch 4, args[0] (low 32 bits, little-endian) 16.
    prog = [
        _insn(_LD_W_ABS, 0, 0, 4),
        _insn(_JEQ_K, 1, 0, arch),            # other ABI → deny
        _insn(_RET_K, 0, 0, _RET_EPERM),
        _insn(_LD_W_ABS, 0, 0, 0),
    ]
    if x32:
        prog += [_insn(_JSET_K, 0, 1, _X32_BIT), _insn(_RET_K, 0, 0, _RET_EPERM)]
    # A = nr. Each refused call jumps to the EPERM return; socket() goes on to look at its family.
    # Layout from the first test (index 0): n tests, ALLOW (n), load family (n+1), AF_UNIX test (n+2),
    # EPERM (n+3), ALLOW (n+4). A jump's target is its index + 1 + offset.
    checks = [nr_socket, *refused]
    n = len(checks)
    for i, nr in enumerate(checks):
        target = n + 1 if i == 0 else n + 3
        prog.append(_insn(_JEQ_K, target - i - 1, 0, nr))
    prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))                # none of them
    prog += [
        _insn(_LD_W_ABS, 0, 0, 16),                            # socket(family, …)
        _insn(_JEQ_K, 0, 1, _AF_UNIX),                          # AF_UNIX → deny, any other family → allow
        _insn(_RET_K, 0, 0, _RET_EPERM),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
    ]
    return b"".join(prog)


def open_filter() -> int | None:
    """A readable file descriptor holding :func:`filter_bytes` at offset 0 (the caller passes it to bwrap
    and closes it after the start), or ``None`` on an unsupported architecture."""
    program = filter_bytes()
    if program is None:
        return None
    try:
        fd = os.memfd_create("spotpatch-check-seccomp", os.MFD_CLOEXEC)
    except (OSError, AttributeError):  # no memfd (an old kernel): an unlinked temp file does the same
        import tempfile

        with tempfile.TemporaryFile() as f:
            fd = os.dup(f.fileno())
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
