"""A real approval waiter in its own process, for the answer-socket tests (no tests here).

The waiter runs a :class:`~tether.session._answer_wait.BoxWait` as ``tether run
--approval-from store`` does and prints one JSON line per refused answer, then the answer it
took; on stderr, last, how many times it looked at the box. Its parent (the test) is not below
it, so an answer from the test is an answer from another process of the same user.
"""

from __future__ import annotations

import subprocess
import sys
import time

from tether.session._answer_box import AnswerBox

WAITER = """
import asyncio, json, sys
from pathlib import Path
from tether.session._answer_box import AnswerBox
from tether.session._answer_wait import BoxWait

def refused(r):
    print(json.dumps({"refused": r.fields()}), flush=True)

async def main():
    box = AnswerBox(Path(sys.argv[1]))
    async with BoxWait(box, sys.argv[2], on_refused=refused) as waiting:
        answer = await waiting.answer()
    print(json.dumps({"answer": [answer.outcome, answer.answered_by]}), flush=True)
    print(json.dumps({"scans": waiting.scans}), file=sys.stderr, flush=True)

asyncio.run(main())
"""


def start_waiter(box: AnswerBox, approval_id: str) -> subprocess.Popen[str]:
    """A waiting process, returned once its wait marker is up."""
    waiter = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(box.directory), approval_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    for _ in range(600):
        if box.is_waited(approval_id):
            return waiter
        assert waiter.poll() is None, waiter.communicate()
        time.sleep(0.05)
    waiter.kill()
    raise AssertionError("the waiter never announced its socket")
