"""Linux: the seccomp filter every bubblewrap-confined check runs under (docs/security.md §4, *Check sandbox*).

A read-only bind mount does not stop ``connect()`` on a Unix socket file: the kernel checks the socket
inode's write permission, never the mount's read-only flag. So any socket in a path the sandbox shows (a
database's, a socket below the project's ``node_modules``) would be reachable, and with ``network: true``
every abstract socket of the host too. The filter closes that door for every check, with or without
``network``:

- ``socket()`` works for IPv4, IPv6 and netlink only (:data:`SOCKET_FAMILIES`; netlink is how glibc's
  ``getaddrinfo`` and ``getifaddrs`` — Node's ``os.networkInterfaces`` — learn the addresses, and it is
  namespaced); every other family fails with ``EPERM``: Unix sockets (so none can be connected to),
  ``AF_VSOCK`` (the host of a VM, a WSL2 or Firecracker guest's services), ``AF_ALG``, ``AF_PACKET``,
  Bluetooth and the rest;
- ``socketpair()`` (a different system call: how Node/libuv and Python wire a child's stdio, Chromium its
  processes) works for ``SOCK_STREAM`` and ``SOCK_SEQPACKET`` (with or without ``SOCK_CLOEXEC`` and
  ``SOCK_NONBLOCK``) and fails with ``EPERM`` for ``SOCK_DGRAM``: an unconnected datagram socket could
  ``sendto``/``connect`` a named or abstract datagram socket (a connected stream or seqpacket socket
  cannot: the kernel refuses or ignores the address);
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

__all__ = ["SOCKET_FAMILIES", "filter_bytes", "open_filter"]

_LD_W_ABS = 0x20
_ALU_AND_K = 0x54
_JEQ_K = 0x15
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_X32_BIT = 0x40000000
_IO_URING_SETUP = 425  # the same number on every architecture (new system calls share one table)
#: ``socket()`` families a check may create: AF_INET, AF_INET6, AF_NETLINK.
SOCKET_FAMILIES = (2, 10, 16)
#: ``socketpair()`` types a check may create (after masking the flags): SOCK_STREAM, SOCK_SEQPACKET.
_PAIR_TYPES = (1, 5)
_TYPE_FLAGS = 0o2000000 | 0o4000  # SOCK_CLOEXEC | SOCK_NONBLOCK

#: machine → (AUDIT_ARCH_*, __NR_socket, __NR_socketpair, whether x32 numbers exist, refused system
#: calls: add_key, request_key, keyctl, io_uring_setup)
_X86_64 = (0xC000003E, 41, 53, True, (248, 249, 250, _IO_URING_SETUP))
_AARCH64 = (0xC00000B7, 198, 199, False, (217, 218, 219, _IO_URING_SETUP))
_ARCHES = {"x86_64": _X86_64, "amd64": _X86_64, "aarch64": _AARCH64, "arm64": _AARCH64}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _assemble(prog: list[tuple[int, str | int, str | int, int] | str]) -> bytes:
    """Classic BPF from a list of ``(code, jt, jf, k)`` and ``"label"`` entries; a jump target is a label
    name (or 0: the next instruction). Classic BPF jumps forward only: a label must follow its jumps."""
    labels: dict[str, int] = {}
    insns: list[tuple[int, str | int, str | int, int]] = []
    for item in prog:
        if isinstance(item, str):
            labels[item] = len(insns)
        else:
            insns.append(item)

    def offset(target: str | int, at: int) -> int:
        return target if isinstance(target, int) else labels[target] - at - 1

    return b"".join(_insn(code, offset(jt, i), offset(jf, i), k) for i, (code, jt, jf, k) in enumerate(insns))


def filter_bytes(machine: str | None = None) -> bytes | None:
    """The BPF program for ``machine`` (default: this one), or ``None`` when it is not supported."""
    found = _ARCHES.get((machine or platform.machine()).lower())
    if found is None:
        return None
    arch, nr_socket, nr_socketpair, x32, refused = found
    # Offsets in struct seccomp_data: nr 0, arch 4, args[0] 16, args[1] 24 (low 32 bits, little-endian).
    prog: list[tuple[int, str | int, str | int, int] | str] = [
        (_LD_W_ABS, 0, 0, 4),
        (_JEQ_K, 0, "deny", arch),                # other ABI → deny
        (_LD_W_ABS, 0, 0, 0),
    ]
    if x32:
        prog.append((_JSET_K, "deny", 0, _X32_BIT))
    prog += [(_JEQ_K, "socket", 0, nr_socket), (_JEQ_K, "socketpair", 0, nr_socketpair)]
    prog += [(_JEQ_K, "deny", 0, nr) for nr in refused]
    prog += [(_RET_K, 0, 0, _RET_ALLOW)]          # none of them
    prog += ["socket", (_LD_W_ABS, 0, 0, 16)]      # socket(family, …)
    prog += [(_JEQ_K, "allow", 0, family) for family in SOCKET_FAMILIES]
    prog += [(_RET_K, 0, 0, _RET_EPERM)]
    prog += ["socketpair", (_LD_W_ABS, 0, 0, 24), (_ALU_AND_K, 0, 0, ~_TYPE_FLAGS & 0xFFFFFFFF)]
    prog += [(_JEQ_K, "allow", 0, kind) for kind in _PAIR_TYPES]
    prog += ["deny", (_RET_K, 0, 0, _RET_EPERM), "allow", (_RET_K, 0, 0, _RET_ALLOW)]
    return _assemble(prog)


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
