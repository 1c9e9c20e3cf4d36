"""The approval socket between a real waiter process and real answerers: what a checked peer
may send, what a forged wait marker gets, and the errors ``tether approvals answer`` gives."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from answer_support import start_waiter
from cli_support import TETHER
from tether.session import SessionMeta, SessionStore
from tether.session._answer_box import AnswerBox, BoxedAnswer
from tether.session._answer_channel import (
    ANSWERS,
    CLI_SURFACE,
    AnswerMessage,
    ApprovalAlreadyAnsweredError,
    ApprovalAnswerRefusedError,
    ApprovalWaiterUntrustedError,
)
from tether.session._answer_wait import SCAN_SECONDS, wait_for_answer
from tether.session.persistence import open_persistence

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def waiting(tmp_path: Path) -> Iterator[tuple[AnswerBox, str, subprocess.Popen[str]]]:
    box = AnswerBox(tmp_path / "s.db.answers")
    approval_id = str(uuid.uuid4())
    waiter = start_waiter(box, approval_id)
    try:
        yield box, approval_id, waiter
    finally:
        waiter.kill()
        waiter.wait()


def speak(box: AnswerBox, approval_id: str, message: bytes) -> list[object]:
    """Connect as a checked peer would, send ``message`` once ready, return both replies."""
    marker = box.marker(approval_id)
    assert marker is not None
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect("\0" + marker.socket)
        stream = sock.makefile("rwb")
        ready = json.loads(stream.readline())
        stream.write(message)
        stream.flush()
        return [ready, json.loads(stream.readline())]


def offer(approval_id: str, **changes: object) -> bytes:
    message = {"approval_id": approval_id, "outcome": "allowed-once", "surface": CLI_SURFACE}
    return json.dumps({**message, **changes}).encode() + b"\n"


def test_messages_that_are_not_an_answer_are_refused_and_the_wait_goes_on(
    waiting: tuple[AnswerBox, str, subprocess.Popen[str]],
) -> None:
    box, approval_id, waiter = waiting
    cases = [
        (offer("another-id"), "the message answers another approval"),
        (
            offer(approval_id, outcome="allow_always"),
            "the outcome is not one of allowed-once, allowed-for-session, allowed-always, rejected",
        ),
        (
            offer(approval_id, surface="sandbox"),
            "the surface is not one of tether approvals answer",
        ),
        (b"[1, 2]\n", "the message is not a JSON object"),
        (b"allow\n", "the message is not one line of JSON"),
    ]
    for message, detail in cases:
        assert speak(box, approval_id, message) == [
            {"status": "ready"},
            {"status": "refused", "detail": detail, "offered": list(ANSWERS)},
        ]
    assert waiter.poll() is None
    by = f"{CLI_SURFACE} ({pwd.getpwuid(os.getuid()).pw_name}, pid {os.getpid()})"
    assert speak(box, approval_id, offer(approval_id)) == [
        {"status": "ready"},
        {"status": "accepted", "answered_by": by},
    ]
    out, _ = waiter.communicate(timeout=30)
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines == [
        *[
            {"refused": {"via": "socket", "reason": "malformed", "detail": d, "pid": os.getpid()}}
            for _, d in cases
        ],
        {"answer": ["allowed-once", by]},
    ]
    assert box.was_answered(approval_id) and not box.is_waited(approval_id)
    with pytest.raises(ApprovalAlreadyAnsweredError) as late:
        box.deliver(approval_id, "rejected", CLI_SURFACE)
    assert str(late.value) == (
        f"approval {approval_id} was already answered (allowed-once, by {by}): this answer "
        "came too late"
    )


def test_an_answer_the_question_does_not_offer_is_no_answer_to_it() -> None:
    plain = ("allowed-once", "rejected")
    assert AnswerMessage.parse(offer("ap-1"), "ap-1", plain) == AnswerMessage(
        "ap-1", "allowed-once", CLI_SURFACE
    )
    assert AnswerMessage.parse(offer("ap-1", outcome="allowed-for-session"), "ap-1", plain) == (
        "this question offers no allowed-for-session (it takes allowed-once, rejected)"
    )
    # by default, every answer is offered
    granted = AnswerMessage.parse(offer("ap-1", outcome="allowed-always"), "ap-1")
    assert granted == AnswerMessage("ap-1", "allowed-always", CLI_SURFACE)


def test_a_marker_that_names_another_process_gets_no_answer(
    waiting: tuple[AnswerBox, str, subprocess.Popen[str]],
) -> None:
    box, approval_id, waiter = waiting
    marker = box.directory / f"{approval_id}.wait"
    real = json.loads(marker.read_text())
    marker.unlink()
    marker.write_text(json.dumps({**real, "pid": 1}))
    with pytest.raises(ApprovalWaiterUntrustedError) as refused:
        box.deliver(approval_id, "allowed-once", CLI_SURFACE)
    assert str(refused.value) == (
        f"approval {approval_id}: the process listening for its answer is not the run that "
        f"waits (pid 1): it is pid {waiter.pid}. Nothing was sent; check `tether approvals list`"
    )
    assert waiter.poll() is None
    # the waiter noticed a marker that is not its own, and keeps waiting
    assert waiter.stdout is not None
    first = json.loads(waiter.stdout.readline())["refused"]
    assert (first["via"], first["reason"], first["file"]) == (
        "answer-box",
        "no-proof",
        f"{approval_id}.wait",
    )
    marker.unlink()
    marker.write_text(json.dumps(real))
    delivered = box.deliver(approval_id, "rejected", CLI_SURFACE)
    assert delivered.answered_by.endswith(f"pid {os.getpid()})")
    assert delivered.asked is None  # this waiter was not told what it waits for
    waiter.communicate(timeout=30)


def test_an_answer_from_a_process_the_waiter_started_is_refused(tmp_path: Path) -> None:
    """The waiter is this test process; the answering process is its child."""
    box = AnswerBox(tmp_path / "s.db.answers")
    approval_id = str(uuid.uuid4())
    refused: list[dict[str, object]] = []
    answer_code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tether.errors import TetherError\n"
        "from tether.session._answer_box import AnswerBox\n"
        "try:\n"
        f"    AnswerBox(Path({str(box.directory)!r})).deliver({approval_id!r}, 'allowed-once', "
        f"{CLI_SURFACE!r})\n"
        "except TetherError as err:\n"
        "    print(err.code, err)\n"
    )

    async def scenario() -> str:
        wait = asyncio.ensure_future(
            wait_for_answer(box, approval_id, on_refused=lambda r: refused.append(r.fields()))
        )
        while not box.is_waited(approval_id):
            await asyncio.sleep(0.01)
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", answer_code, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await child.communicate()
        assert not wait.done()
        wait.cancel()
        return out.decode()

    printed = asyncio.run(scenario())
    detail = "this run started it (every command of the run stays below the run's process)"
    assert printed == (
        f"{ApprovalAnswerRefusedError.code} the run waiting for approval {approval_id} refused "
        f"this answer: {detail}. Answer from a terminal outside every sandbox, as the user who "
        "started the run\n"
    )
    (record,) = refused
    assert record == {
        "via": "socket",
        "reason": "started-by-this-run",
        "detail": detail,
        "pid": record["pid"],
    }
    assert not box.is_waited(approval_id) and not box.was_answered(approval_id)


async def test_an_approval_waited_for_on_another_host_is_answered_there(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = SessionStore(open_persistence(url))
    session = store.create(meta=SessionMeta(cwd=str(tmp_path)))
    session.append("turn/start", {"turn": 1})
    session.append("approval/asked", {"id": "far-1", "tool_name": "write"})
    await store.close()
    box = AnswerBox.for_store(url)
    box.directory.mkdir()
    marker = {"pid": 4242, "host": "elsewhere.example", "socket": "tether-approval-x"}
    (box.directory / "far-1.wait").write_text(json.dumps(marker))
    result = subprocess.run(
        [TETHER, "approvals", "answer", "far-1", "allow", "--store", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr) == (
        1,
        "tether: APPROVAL_ON_OTHER_HOST: approval far-1 waits in process 4242 on host "
        "elsewhere.example: answer it there (`tether approvals answer` reaches only this "
        "machine's runs)\n",
    )


def test_an_answer_wakes_the_waiter_which_never_looks_on_a_timer(tmp_path: Path) -> None:
    """The waiter learns of an answer from its socket and of files planted in the box from the
    kernel (inotify): it looks at the box once when it begins, once more per file planted for
    its approval, and for nothing else, however long it waits."""
    box = AnswerBox(tmp_path / "s.db.answers")
    approval_id = str(uuid.uuid4())
    waiter = start_waiter(box, approval_id)
    try:
        (box.directory / "another-approval.json").write_text('{"outcome": "allowed-once"}')
        time.sleep(4 * SCAN_SECONDS)  # a waiter on a timer would have looked four times
        (box.directory / f"{approval_id}.json").write_text('{"outcome": "allowed-once"}')
        assert waiter.stdout is not None
        reported = json.loads(waiter.stdout.readline())  # as soon as it was planted
        assert reported["refused"]["file"] == f"{approval_id}.json"
        time.sleep(4 * SCAN_SECONDS)
        delivered = box.deliver(approval_id, "rejected", CLI_SURFACE)
        out, err = waiter.communicate(timeout=30)
    finally:
        waiter.kill()
    assert json.loads(out) == {"answer": ["rejected", delivered.answered_by]}
    assert json.loads(err.splitlines()[-1]) == {"scans": 2}


def test_a_linked_answered_directory_is_never_followed(tmp_path: Path) -> None:
    """A link planted as the box's ``answered`` directory: the waiter's record of a taken
    answer is not written where it leads, and a record found there is not read as one."""
    box = AnswerBox(tmp_path / "box")
    box.prepare()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a-1").write_text('{"outcome": "allowed-once", "by": "forged", "at": 1}')
    (box.directory / "answered").symlink_to(elsewhere)
    assert not box.was_answered("a-1")
    assert box.answered("a-1") is None
    assert box.answered_ids() == []
    assert box.too_late("a-1") is None
    box.leave_answered("a-2", BoxedAnswer("rejected", "tether chat (me)", 2))
    assert sorted(p.name for p in elsewhere.iterdir()) == ["a-1"]


def test_the_answered_record_is_written_and_read_in_the_box(tmp_path: Path) -> None:
    box = AnswerBox(tmp_path / "box")
    box.prepare()
    box.leave_answered("a-2", BoxedAnswer("rejected", "tether chat (me)", 2))
    assert box.was_answered("a-2") and box.answered_ids() == ["a-2"]
    assert box.answered("a-2") == BoxedAnswer("rejected", "tether chat (me)", 2)
    assert (box.directory / "answered" / "a-2").stat().st_mode & 0o777 == 0o600
