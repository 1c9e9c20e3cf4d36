"""A confined command cannot answer an approval (issue 11, item 2), on every backend variant
and restricted mode, with and without network.

A real waiter (``BoxWait`` in its own process, as ``tether run --approval-from store``
runs it) listens; a confined command reads its wait marker and speaks the answer protocol
directly on the socket, as an attacker would. Without network it cannot even connect
(bubblewrap: another network namespace; Landlock: abstract sockets scoped to the domain).
With network it connects and is refused before the waiter reads a byte, and the waiter
records it. The waiter and the command are siblings, so the refusal is for confinement, not
for having been started by the run. The genuine answer afterwards, from this test process (an
unconfined process of the same user), is taken. The host is compared before and after.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import (
    HOST_BASE,
    PYTHON,
    RESTRICTED,
    VARIANTS,
    Host,
    make_provider,
    run_confined,
)

from answer_support import start_waiter
from tether.session._answer_box import AnswerBox
from tether.session._answer_channel import CLI_SURFACE

pytestmark = pytest.mark.timeout(60)

ATTACK = """
import json, socket, sys
marker = json.load(open(sys.argv[1]))
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\\0" + marker["socket"])
except OSError as err:
    print(json.dumps({"connect": err.errno}))
    raise SystemExit(0)
f = s.makefile("rwb")
first = json.loads(f.readline() or "null")
second = None
if isinstance(first, dict) and first.get("status") == "ready":
    f.write(json.dumps({"approval_id": sys.argv[2], "outcome": "allowed-once",
                        "surface": "tether approvals answer"}).encode() + b"\\n")
    f.flush()
    second = json.loads(f.readline() or "null")
print(json.dumps({"replies": [first, second]}))
"""

BWRAP_DETAIL = "it runs in another user or PID namespace (as a bubblewrap sandbox does)"
LANDLOCK_DETAIL = "it runs with no_new_privs, which every tether sandbox sets"


@pytest.fixture
def box() -> Iterator[AnswerBox]:
    """An answer box outside the host layout, so the host snapshot leaves it out."""
    root = tempfile.mkdtemp(prefix="tether-box-", dir=HOST_BASE)
    try:
        yield AnswerBox(Path(root) / "s.db.answers")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("network", [False, True], ids=["no-network", "network"])
@pytest.mark.parametrize("mode", RESTRICTED)
@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_confined_command_cannot_answer(
    host: Host, box: AnswerBox, variant: str, mode: str, network: bool
) -> None:
    provider = make_provider(variant, host)
    approval_id = str(uuid.uuid4())
    waiter = start_waiter(box, approval_id)
    try:
        before = host.snapshot(include_ws=mode == "read-only")
        marker = box.directory / f"{approval_id}.wait"
        ran = await run_confined(
            provider,
            host.policy(mode),
            f"{PYTHON} -c '{ATTACK}' {marker} {approval_id}",
            network=network,
        )
        assert ran.returncode == 0, ran.stderr
        result = json.loads(ran.stdout)
        backend = "bwrap" if variant.startswith("bwrap") else "landlock"
        if not network:
            # the supervisor refuses every abstract Unix socket (docs/sandbox.md, "Network
            # and sockets")
            assert result == {"connect": errno.EACCES}
        else:
            detail = BWRAP_DETAIL if backend == "bwrap" else LANDLOCK_DETAIL
            assert result == {"replies": [{"status": "refused", "detail": detail}, None]}
        assert host.snapshot(include_ws=mode == "read-only") == before
        assert waiter.poll() is None  # still waiting: nothing was taken
        by = box.deliver(approval_id, "rejected", CLI_SURFACE).answered_by
        out, err = waiter.communicate(timeout=30)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, err
    user = pwd.getpwuid(os.getuid()).pw_name
    assert by == f"{CLI_SURFACE} ({user}, pid {os.getpid()})"
    lines = [json.loads(line) for line in out.splitlines()]
    if network:
        (refused, answer) = lines
        assert refused == {
            "refused": {
                "via": "socket",
                "reason": "confined",
                "detail": BWRAP_DETAIL if variant.startswith("bwrap") else LANDLOCK_DETAIL,
                "pid": refused["refused"]["pid"],
            }
        }
    else:
        (answer,) = lines
    assert answer == {"answer": ["rejected", by]}
    assert os.listdir(box.directory) == ["answered"]
    assert os.listdir(box.directory / "answered") == [approval_id]
