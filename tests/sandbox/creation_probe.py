"""Calls that make a name, made raw inside the sandbox (the escape tests of control names).

Each call is the system call itself (``syscall(2)`` through ctypes), so the legacy forms
(``mkdir``, ``creat``, ``rename``) and the ``*at`` forms are each tried as they are, not as the
C library happens to make them. Standard library only: it runs under the sandbox's own
interpreter.

Usage: ``python creation_probe.py CALL ARG...``; prints one line per attempt: ``ok`` or the
errno's name (``EROFS``), and exits 0. ``race CALL GOOD BAD N``: makes ``CALL`` (``mkdir``,
``open``, ``rename`` or ``bind``, with the path argument swapped by a second thread between ``GOOD``
and ``BAD``, of the same length, all along) ``N`` times, and prints ``ok=A refused=B``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import socket
import sys
import threading
from collections.abc import Callable

NUMBERS = {
    "x86_64": {
        "open": 2, "creat": 85, "openat": 257, "mkdir": 83, "mkdirat": 258, "mknod": 133,
        "mknodat": 259, "symlink": 88, "symlinkat": 266, "link": 86, "linkat": 265,
        "rename": 82, "renameat": 264, "renameat2": 316, "openat2": 437,
    },
    "aarch64": {
        "openat": 56, "mkdirat": 34, "mknodat": 33, "symlinkat": 36, "linkat": 37,
        "renameat": 38, "renameat2": 276, "openat2": 437,
    },
}  # fmt: skip
AT_FDCWD = -100
RENAME_EXCHANGE = 2
AT_SYMLINK_FOLLOW = 0x400
CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
numbers = NUMBERS[platform.machine()]


def call(name: str, *args: object) -> int:
    converted = [
        ctypes.c_char_p(a.encode()) if isinstance(a, str) else a
        for a in args  # str: a path; ctypes objects as they are; int: a long
    ]
    result = libc.syscall(ctypes.c_long(numbers[name]), *converted)
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return int(result)


def fd_of(path: str) -> ctypes.c_long:
    return ctypes.c_long(os.open(path, os.O_PATH | os.O_DIRECTORY))


def written(fd: int) -> None:
    os.write(fd, b"pwned\n")
    os.close(fd)


def attempt(name: str, args: list[str]) -> None:
    long = ctypes.c_long
    if name == "open":
        written(call("open", args[0], long(CREATE), long(0o644)))
    elif name == "creat":
        written(call("creat", args[0], long(0o644)))
    elif name == "openat":
        written(call("openat", fd_of(args[0]), args[1], long(CREATE), long(0o644)))
    elif name == "write":  # an existing file, opened for writing without O_CREAT
        written(call("openat", long(AT_FDCWD), args[0], long(os.O_WRONLY | os.O_TRUNC), long(0)))
    elif name == "openat2":
        how = (ctypes.c_uint64 * 3)(CREATE, 0o644, 0)
        written(call("openat2", long(AT_FDCWD), args[0], ctypes.byref(how), long(24)))
    elif name == "mkdir":
        call("mkdir", args[0], long(0o755))
    elif name == "mkdirat":
        call("mkdirat", fd_of(args[0]), args[1], long(0o755))
    elif name in ("mknod", "fifo"):
        kind = 0o010000 if name == "fifo" else 0o100000
        if "mknod" in numbers:
            call("mknod", args[0], long(kind | 0o644), long(0))
        else:
            call("mknodat", long(AT_FDCWD), args[0], long(kind | 0o644), long(0))
    elif name == "mknodat":
        call("mknodat", fd_of(args[0]), args[1], long(0o100644), long(0))
    elif name == "symlink":
        call("symlink", args[0], args[1])
    elif name == "symlinkat":
        call("symlinkat", args[0], fd_of(args[1]), args[2])
    elif name == "link":
        call("link", args[0], args[1])
    elif name == "linkat":
        call("linkat", fd_of(args[0]), args[1], fd_of(args[2]), args[3], long(0))
    elif name == "rename":
        call("rename", args[0], args[1])
    elif name == "renameat":
        call("renameat", fd_of(args[0]), args[1], fd_of(args[2]), args[3])
    elif name == "renameat2":
        call("renameat2", long(AT_FDCWD), args[0], long(AT_FDCWD), args[1], long(0))
    elif name == "exchange":
        call("renameat2", long(AT_FDCWD), args[0], long(AT_FDCWD), args[1], long(RENAME_EXCHANGE))
    elif name == "tmpfile":  # an unnamed file in DIR, then given NAME through /proc/self/fd
        fd = os.open(args[0], os.O_TMPFILE | os.O_WRONLY, 0o644)
        os.write(fd, b"pwned\n")
        call(
            "linkat", long(AT_FDCWD), f"/proc/self/fd/{fd}", long(AT_FDCWD), args[1],
            long(AT_SYMLINK_FOLLOW),
        )  # fmt: skip
    elif name == "bind":  # a Unix socket made by its name (no call above makes it)
        socket.socket(socket.AF_UNIX).bind(args[0])
    else:
        raise SystemExit(f"unknown call {name}")


def bind_raw(address: ctypes.Array[ctypes.c_char]) -> None:
    """``bind`` of a new Unix socket to the ``struct sockaddr_un`` in ``address``, read by
    the kernel (or the supervisor) from this memory, which another thread may be changing."""
    with socket.socket(socket.AF_UNIX) as sock:
        if libc.bind(sock.fileno(), address, ctypes.sizeof(address)) < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))


def race(name: str, good: str, bad: str, times: int) -> None:
    """``name`` made ``times`` times on a path another thread keeps swapping."""
    if len(good) != len(bad):
        raise SystemExit("the two paths must be as long")
    buffer = ctypes.create_string_buffer(good.encode(), len(good) + 1)
    address = ctypes.create_string_buffer(b"\x01\x00" + good.encode(), len(good) + 3)
    stop = threading.Event()

    def swap() -> None:
        forms = (good.encode(), bad.encode())
        i = 0
        while not stop.is_set():
            ctypes.memmove(buffer, forms[i % 2], len(good))
            ctypes.memmove(ctypes.addressof(address) + 2, forms[i % 2], len(good))
            i += 1

    makes: dict[str, Callable[[], object]] = {
        "mkdir": lambda: call("mkdirat", ctypes.c_long(AT_FDCWD), buffer, ctypes.c_long(0o755)),
        "open": lambda: os.close(
            call("openat", ctypes.c_long(AT_FDCWD), buffer, ctypes.c_long(CREATE), ctypes.c_long(0o644))
        ),
        "bind": lambda: bind_raw(address),
        "rename": lambda: call(
            "renameat2", ctypes.c_long(AT_FDCWD), "src-dir", ctypes.c_long(AT_FDCWD), buffer,
            ctypes.c_long(0),
        ),
    }  # fmt: skip
    flipper = threading.Thread(target=swap, daemon=True)
    flipper.start()
    done = refused = 0
    try:
        for _ in range(times):
            if name == "rename" and not os.path.isdir("src-dir"):
                os.mkdir("src-dir")
            try:
                makes[name]()
                done += 1
            except OSError:
                refused += 1
            # What a success made goes again, so that the next attempt makes it anew.
            for made in (good,):
                if os.path.isdir(made):
                    os.rmdir(made)
                elif os.path.lexists(made):
                    os.unlink(made)
    finally:
        stop.set()
        flipper.join()
    print(f"ok={done} refused={refused}")


def main(argv: list[str]) -> None:
    if argv[0] == "race":
        race(argv[1], argv[2], argv[3], int(argv[4]))
        return
    try:
        attempt(argv[0], argv[1:])
    except OSError as err:
        print(errno.errorcode.get(err.errno or 0, str(err.errno)))
        return
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1:])
