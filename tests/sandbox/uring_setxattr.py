"""Run inside a sandbox by the escape suite: set an extended attribute through io_uring.

``IORING_OP_SETXATTR`` changes an xattr without any ``setxattr`` syscall being made, so a
seccomp filter that refuses only those calls misses it. Exit status 0 means the attribute was
set (an escape); 1 means io_uring was refused or the operation failed.

Usage: python uring_setxattr.py PATH NAME VALUE
"""

from __future__ import annotations

import ctypes
import mmap
import struct
import sys

IO_URING_SETUP, IO_URING_ENTER = 425, 426
IORING_OP_SETXATTR = 42
IORING_ENTER_GETEVENTS = 1
IORING_OFF_SQES = 0x10000000


def main(path: bytes, name: bytes, value: bytes) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    params = ctypes.create_string_buffer(120)
    ring_fd = libc.syscall(IO_URING_SETUP, 4, params)
    if ring_fd < 0:
        print("io_uring_setup refused:", ctypes.get_errno())
        return 1
    sq_entries, cq_entries = struct.unpack_from("<2I", params.raw, 0)
    sq_off = struct.unpack_from("<8IQ", params.raw, 40)  # head tail mask entries flags ... array
    cq_off = struct.unpack_from("<8IQ", params.raw, 80)  # head tail mask entries overflow cqes
    size = max(sq_off[6] + sq_entries * 4, cq_off[5] + cq_entries * 16)
    rw = mmap.PROT_READ | mmap.PROT_WRITE
    ring = mmap.mmap(ring_fd, size, mmap.MAP_SHARED, rw, offset=0)
    sqes = mmap.mmap(ring_fd, sq_entries * 64, mmap.MAP_SHARED, rw, offset=IORING_OFF_SQES)
    c_name = ctypes.create_string_buffer(name)
    c_value = ctypes.create_string_buffer(value, len(value))
    c_path = ctypes.create_string_buffer(path)
    sqes[0:64] = struct.pack(
        "<BBHiQQIIQHHiQQ",
        IORING_OP_SETXATTR, 0, 0, 0,
        ctypes.addressof(c_value), ctypes.addressof(c_name), len(value), 0, 1,
        0, 0, 0, ctypes.addressof(c_path), 0,
    )  # fmt: skip
    tail = struct.unpack_from("<I", ring, sq_off[1])[0]
    mask = struct.unpack_from("<I", ring, sq_off[2])[0]
    struct.pack_into("<I", ring, sq_off[6] + 4 * (tail & mask), 0)
    struct.pack_into("<I", ring, sq_off[1], tail + 1)
    if libc.syscall(IO_URING_ENTER, ring_fd, 1, 1, IORING_ENTER_GETEVENTS, None, 0) < 0:
        print("io_uring_enter refused:", ctypes.get_errno())
        return 1
    head = struct.unpack_from("<I", ring, cq_off[0])[0]
    cq_mask = struct.unpack_from("<I", ring, cq_off[2])[0]
    result = struct.unpack_from("<Qi", ring, cq_off[5] + 16 * (head & cq_mask))[1]
    print("IORING_OP_SETXATTR:", result)
    return 0 if result == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3].encode()))
