"""The escape suite: every attempt to get out of a restricted mode fails, and the host shows it.

Each attempt runs under bubblewrap, under Landlock (through the fork server) and under
Landlock's launcher argv, in both restricted modes. After each one the test compares a snapshot of the
host (content, mode, owner, mtime, link count, xattrs of every file outside the workspace, and
of the workspace too under read-only), checks the absolute targets it aimed at are absent, and
checks no secret reached its output. The exit status alone proves nothing.

The host layout lives under /var/tmp, not /tmp: bubblewrap gives commands a private /tmp, and
a target there would merely be invisible.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sandbox_support import (
    PYTHON,
    RESTRICTED,
    SECRET_ENV,
    SSH_KEY,
    VARIANTS,
    Host,
    make_provider,
    run_confined,
)

pytestmark = pytest.mark.timeout(60)

TOKEN = uuid.uuid4().hex[:12]

BLOCK_DEVICES = sorted(
    f"/dev/{name}"
    for name in os.listdir("/dev")
    if stat.S_ISBLK(os.lstat(f"/dev/{name}").st_mode)
    and name.startswith(("loop", "zram", "vd", "sd", "xvd", "nvme"))
)
DISK = next(
    (
        d
        for d in BLOCK_DEVICES
        if not d.startswith(("/dev/loop", "/dev/zram"))
        and not os.path.exists(f"/sys/class/block/{os.path.basename(d)}/partition")
    ),
    "",
)
"""A whole disk (a loop device reads empty when nothing is attached to it)."""
# Loop devices first: the attempt writes nothing even if the open succeeded, but aim low anyway.
BLOCK_DEVICE = next(
    (d for d in BLOCK_DEVICES if "loop" in d), BLOCK_DEVICES[0] if BLOCK_DEVICES else ""
)


@dataclass(frozen=True)
class Attempt:
    name: str
    script: str
    absent: tuple[str, ...] = ()
    """Host paths that must not exist afterwards (placeholders allowed)."""
    leaks: tuple[str, ...] = ()
    """Strings that must not appear in the command's output."""
    must_fail: bool = True
    """The command's last step must fail (exit status non-zero)."""
    modes: tuple[str, ...] = RESTRICTED
    excluded: tuple[tuple[str, str], ...] = ()
    """(backend, mode) pairs the attempt does not apply to (documented limitations)."""


SECRETS = tuple(SECRET_ENV.values())
CONTROLLED = ("ws/.git", "ws/.tether-data")
"""Control paths of the host layout (``.tether-data`` is one through ``protected_paths``)."""
BWRAP = (("bwrap", "read-only"), ("bwrap", "workspace-write"))

_LEASE = (
    f"{PYTHON} -c \"import fcntl, os; fd = os.open('@P@', os.O_RDONLY); "
    'fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.@KIND@)"'
)

ATTEMPTS = (
    Attempt("write_outside", "echo pwned > @OUT@/new.txt", absent=("@OUT@/new.txt",)),
    # A lease makes every host process opening the file wait (up to 45 s) for the command.
    Attempt(
        "read_lease_outside",
        _LEASE.replace("@P@", "@OUT@/secret.txt").replace("@KIND@", "F_RDLCK"),
    ),
    Attempt(
        "write_lease_outside",
        _LEASE.replace("@P@", "@OUT@/secret.txt").replace("@KIND@", "F_WRLCK"),
    ),
    Attempt("lease_in_ws", _LEASE.replace("@P@", "@WS@/file.txt").replace("@KIND@", "F_RDLCK")),
    Attempt(
        "read_kernel_log",
        f"{PYTHON} -c \"import os; os.open('/proc/kmsg', os.O_RDONLY | os.O_NONBLOCK)\"",
    ),
    Attempt("overwrite_outside", "echo pwned > @OUT@/secret.txt"),
    Attempt("append_outside", "echo pwned >> @OUT@/secret.txt"),
    Attempt("truncate_outside", "truncate -s 0 @OUT@/secret.txt"),
    Attempt("delete_outside", "rm -f @OUT@/secret.txt && test ! -e @OUT@/secret.txt"),
    Attempt("delete_outside_tree", "rm -rf @OUT@/dir && test ! -e @OUT@/dir"),
    Attempt("mkdir_outside", "mkdir @OUT@/newdir", absent=("@OUT@/newdir",)),
    Attempt("symlink_outside", "ln -s /etc/passwd @OUT@/evil", absent=("@OUT@/evil",)),
    Attempt("chmod_outside", "chmod 777 @OUT@/secret.txt"),
    Attempt("chown_outside", "chown 4242:4242 @OUT@/secret.txt"),
    Attempt("touch_mtime_outside", "touch -d 2001-01-01 @OUT@/secret.txt"),
    Attempt(
        "xattr_outside",
        f"{PYTHON} -c \"import os; os.setxattr('@OUT@/secret.txt', 'user.pwn', b'1')\"",
    ),
    Attempt(
        "python_ocreat_outside",
        f"{PYTHON} -c \"import os; os.open('@OUT@/py.txt', os.O_CREAT | os.O_WRONLY)\"",
        absent=("@OUT@/py.txt",),
    ),
    Attempt(
        "relative_write_outside", "cd @OUT@ && echo pwned > rel.txt", absent=("@OUT@/rel.txt",)
    ),
    Attempt("copy_to_outside", "cp @WS@/file.txt @OUT@/copy.txt", absent=("@OUT@/copy.txt",)),
    Attempt("write_through_ws_symlink", "echo pwned > @WS@/link-out"),
    Attempt("new_symlink_then_write", "ln -sf @OUT@/secret.txt @WS@/l2; echo pwned > @WS@/l2"),
    Attempt(
        "hardlink_then_write",
        "ln @OUT@/secret.txt @WS@/hl && echo pwned >> @WS@/hl",
        absent=("@WS@/hl",),
    ),
    Attempt("proc_self_root", "echo pwned > /proc/self/root@OUT@/secret.txt"),
    Attempt(
        "proc_harness_root", "echo pwned > /proc/@PID@/root@OUT@/new.txt", absent=("@OUT@/new.txt",)
    ),
    Attempt(
        "rename_outside_into_ws",
        "mv @OUT@/secret.txt @WS@/stolen.txt && test ! -e @OUT@/secret.txt",
    ),
    Attempt(
        "rename_over_ws_path",
        f"{PYTHON} -c \"import os; os.rename('@OUT@/secret.txt', '@WS@/file.txt')\"",
    ),
    Attempt(
        "rename_ws_to_outside", "mv @WS@/file.txt @OUT@/moved.txt", absent=("@OUT@/moved.txt",)
    ),
    Attempt("rename_workspace_root", "mv @WS@ @OUT@/ws-moved", absent=("@OUT@/ws-moved",)),
    Attempt(
        "remount_root_rw",
        "mount -o remount,rw / ; mount -o remount,bind,rw / ; echo pwned > @OUT@/new.txt",
        absent=("@OUT@/new.txt",),
    ),
    Attempt(
        "unshare_userns_remount",
        "unshare -rm sh -c 'mount -o remount,bind,rw / ; mount -o remount,bind,rw @OUT@ ;"
        " echo pwned > @OUT@/new.txt'",
        absent=("@OUT@/new.txt",),
    ),
    Attempt(
        "mount_tmpfs_then_write",
        "mount -t tmpfs none @OUT@/dir && echo pwned > @OUT@/dir/keep.txt",
    ),
    Attempt(
        "bind_mount_outside_into_ws",
        "mkdir -p @WS@/m; mount --bind @OUT@ @WS@/m && echo pwned > @WS@/m/new.txt",
        absent=("@OUT@/new.txt",),
    ),
    Attempt(
        "chroot_then_write",
        "chroot / sh -c 'echo pwned > @OUT@/new.txt'",
        absent=("@OUT@/new.txt",),
    ),
    Attempt(
        "mknod_block_device",
        "mknod @WS@/blk b 7 0 || mknod @OUT@/blk b 7 0",
        absent=("@WS@/blk", "@OUT@/blk"),
    ),
    Attempt(
        "open_block_device",
        "dd if=/dev/zero of=@BLK@ bs=512 count=0 conv=notrunc,nocreat status=none",
    ),
    # A raw disk holds every file, hidden ones included.
    Attempt("read_raw_disk", "head -c 4096 @DISK@ | wc -c | grep -qx 4096"),
    Attempt("loop_control", "exec 3</dev/loop-control"),
    Attempt(
        "xattr_via_io_uring",
        f"{PYTHON} @PROBES@/uring_setxattr.py @OUT@/secret.txt user.pwned yes",
    ),
    Attempt(
        "write_etc",
        "echo pwned > /etc/tether-escape-@TOKEN@",
        absent=("/etc/tether-escape-@TOKEN@",),
    ),
    Attempt(
        "write_root_home",
        "echo pwned > /root/tether-escape-@TOKEN@",
        absent=("/root/tether-escape-@TOKEN@",),
    ),
    Attempt(
        "write_usr",
        "echo pwned > /usr/tether-escape-@TOKEN@",
        absent=("/usr/tether-escape-@TOKEN@",),
    ),
    Attempt(
        "write_var_tmp",
        "echo pwned > /var/tmp/tether-escape-@TOKEN@",
        absent=("/var/tmp/tether-escape-@TOKEN@",),
    ),
    Attempt(
        "write_tmp_reaches_host",
        "echo pwned > /tmp/tether-escape-@TOKEN@ && cat /tmp/tether-escape-@TOKEN@",
        absent=("/tmp/tether-escape-@TOKEN@",),
        must_fail=False,  # bubblewrap's private /tmp accepts it; the host must not see it
    ),
    Attempt(
        "write_dev_shm_reaches_host",
        "echo pwned > /dev/shm/tether-escape-@TOKEN@",
        absent=("/dev/shm/tether-escape-@TOKEN@",),
        must_fail=False,  # bubblewrap's private /dev accepts it; the host must not see it
    ),
    Attempt(
        "git_hooks",
        "mkdir -p @WS@/.git/hooks && echo 'echo pwned' > @WS@/.git/hooks/pre-commit",
        absent=("@WS@/.git/hooks/pre-commit",),
    ),
    Attempt(
        "git_config_fsmonitor",
        "git config --file @WS@/.git/config core.fsmonitor 'touch @OUT@/pwned'",
        absent=("@WS@/.git/config", "@OUT@/pwned"),
    ),
    Attempt("git_head_rewrite", "echo 'ref: refs/heads/evil' > @WS@/.git/HEAD"),
    # (mv may copy when it cannot rename; a copy is only a read of .git, which is allowed.)
    Attempt("mv_git", "mv @WS@/.git @WS@/src/moved-git && test ! -e @WS@/.git"),
    Attempt("rm_git", "rm -rf @WS@/.git && test ! -e @WS@/.git"),
    Attempt(
        "replace_git_with_a_planted_one",
        "mkdir -p @WS@/src/g/hooks && echo pwned > @WS@/src/g/hooks/pre-commit && "
        "rm -rf @WS@/.git; mv @WS@/src/g @WS@/.git",
    ),
    Attempt(
        "hardlink_git_file_then_write",
        "ln @WS@/.git/HEAD @WS@/src/head && echo pwned >> @WS@/src/head",
        absent=("@WS@/src/head",),
    ),
    Attempt(
        "symlink_into_git_then_write",
        "ln -s ../.git/HEAD @WS@/src/head; echo pwned >> @WS@/src/head",
    ),
    Attempt("tether_data_dir", "echo pwned > @WS@/.tether-data/store.db"),
    Attempt("new_entry_in_ws_root", "echo pwned > @WS@/new.txt", absent=("@WS@/new.txt",)),
    Attempt("remove_ws_root_entry", "rm -f @WS@/file.txt && test ! -e @WS@/file.txt"),
    Attempt("rename_ws_root_entry", "mv @WS@/file.txt @WS@/src/file.txt"),
    Attempt(
        "write_ws_read_only",
        "echo pwned > @WS@/src/new.txt",
        absent=("@WS@/src/new.txt",),
        modes=("read-only",),
    ),
    Attempt("delete_ws_read_only", "rm @WS@/file.txt", modes=("read-only",)),
    Attempt("env_api_keys", "env; echo; set", leaks=SECRETS, must_fail=False),
    Attempt("harness_environ", "cat /proc/@PID@/environ", leaks=SECRETS),
    Attempt("harness_thread_environ", "cat /proc/@PID@/task/@PID@/environ", leaks=SECRETS),
    Attempt("harness_mem", "head -c 64 /proc/@PID@/mem | wc -c | grep -qx 64"),
    Attempt(
        "harness_mem_by_offset",
        f"{PYTHON} -c \"f = open('/proc/@PID@/mem', 'rb'); f.seek(0x400000); f.read(16)\"",
    ),
    Attempt("ssh_key", "cat @HOME@/.ssh/id_rsa", leaks=(SSH_KEY,)),
    Attempt("ssh_key_via_proc_root", "cat /proc/self/root@HOME@/.ssh/id_rsa", leaks=(SSH_KEY,)),
    Attempt(
        "ssh_key_hardlink",
        "ln @HOME@/.ssh/id_rsa @WS@/key && cat @WS@/key",
        leaks=(SSH_KEY,),
        absent=("@WS@/key",),
    ),
    Attempt(
        "ssh_key_copy",
        "cp -r @HOME@/.ssh @WS@/sshcopy && cat @WS@/sshcopy/id_rsa",
        leaks=(SSH_KEY,),
    ),
    Attempt("netrc", "cat @HOME@/.netrc", leaks=("password must-not-leak",)),
    Attempt("signal_harness", "kill -0 @PID@"),
    # Landlock only: under bubblewrap the parent is the PID namespace's init, inside the sandbox.
    # The supervisor, and above it the fork server (or, for the launcher, the harness).
    Attempt("signal_supervisor", "kill -0 $PPID", excluded=BWRAP),
    Attempt("signal_grandparent", "kill -0 $(cut -d' ' -f4 /proc/$PPID/stat)", excluded=BWRAP),
    # (Listing the descriptor numbers is allowed, as for any process of the uid; following
    # them is not.)
    Attempt("supervisor_fds", "ls -l /proc/$PPID/fd", excluded=BWRAP),
    Attempt("supervisor_socket", "exec 9</proc/$PPID/fd/3", excluded=BWRAP),
    Attempt("grandparent_fds", "ls -l /proc/$(cut -d' ' -f4 /proc/$PPID/stat)/fd", excluded=BWRAP),
    Attempt(
        "ptrace_harness",
        f'{PYTHON} -c "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True);'
        " r = libc.ptrace(0x4206, @PID@, None, None); r == 0 and libc.ptrace(17, @PID@, None, None);"
        ' sys.exit(0 if r == 0 else 1)"',
    ),
)


def placeholders(host: Host) -> dict[str, str]:
    return {
        "@WS@": str(host.ws),
        "@OUT@": str(host.outside),
        "@PROBES@": str(host.top / "probes"),
        "@HOME@": str(host.home),
        "@TOKEN@": TOKEN,
        "@PID@": str(os.getpid()),
        "@BLK@": BLOCK_DEVICE,
        "@DISK@": DISK,
    }


def fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def _cases() -> Iterator[object]:
    for variant in VARIANTS:
        for mode in RESTRICTED:
            for attempt in ATTEMPTS:
                if mode not in attempt.modes:
                    continue
                backend = "landlock" if variant.values[0].startswith("landlock") else "bwrap"
                marks = list(variant.marks)
                if (backend, mode) in attempt.excluded:
                    continue
                yield pytest.param(
                    variant.values[0],
                    mode,
                    attempt,
                    marks=marks,
                    id=f"{variant.id}-{mode}-{attempt.name}",
                )


def _changed(
    before: dict[str, tuple[object, ...]], after: dict[str, tuple[object, ...]], mode: str
) -> list[str]:
    """Keys that differ where nothing may change: everything outside the workspace; under
    read-only the workspace too; under workspace-write its control paths, and which entries
    its root holds (none created, removed or renamed)."""

    def guarded(key: str) -> bool:
        if not key.startswith("ws/") and key != "ws":
            return True
        return mode == "read-only" or key.startswith(CONTROLLED)

    def top(shot: dict[str, tuple[object, ...]]) -> set[str]:
        return {k for k in shot if k.startswith("ws/") and k.count("/") == 1}

    keys = {k for k in before.keys() | after.keys() if guarded(k)}
    keys |= top(before) ^ top(after)
    return sorted(k for k in keys if before.get(k) != after.get(k))


@pytest.mark.parametrize(("variant", "mode", "attempt"), list(_cases()))
async def test_escape_attempt_fails(host: Host, variant: str, mode: str, attempt: Attempt) -> None:
    if "@BLK@" in attempt.script and not BLOCK_DEVICE:
        pytest.skip("no block device on this machine")
    if "@DISK@" in attempt.script and not DISK:
        pytest.skip("no disk device on this machine")
    values = placeholders(host)
    absent = [fill(p, values) for p in attempt.absent]
    before = host.snapshot(include_ws=True)
    provider = make_provider(variant, host)
    try:
        ran = await run_confined(provider, host.policy(mode), fill(attempt.script, values))
    finally:
        leftovers = [p for p in absent if os.path.lexists(p)]
        for path in leftovers:
            if not path.startswith(str(host.top)):
                os.unlink(path)  # never leave a file in /etc even when the test fails
    assert leftovers == [], f"{attempt.name}: created {leftovers}"
    assert _changed(before, host.snapshot(include_ws=True), mode) == []
    output = ran.stdout + ran.stderr
    for secret in attempt.leaks:
        assert secret not in output, f"{attempt.name}: leaked {secret!r}"
    if attempt.must_fail:
        assert ran.returncode != 0, f"{attempt.name} succeeded: {output!r}"
    # The runner itself worked: a failure here must be the sandbox refusing, not a broken setup.
    assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr


def test_suite_has_at_least_25_attempts_per_mode() -> None:
    for mode in RESTRICTED:
        for backend in ("bwrap", "landlock"):
            applicable = [
                a for a in ATTEMPTS if mode in a.modes and (backend, mode) not in a.excluded
            ]
            assert len(applicable) >= 25, (backend, mode, len(applicable))
