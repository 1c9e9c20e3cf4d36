"""``tether sessions`` against real SQLite and JSONL stores, through typer's CliRunner."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_stores import (
    CRASHED,
    DONE,
    StoreRef,
    add_crashed,
    add_done,
    add_standard,
    populate,
)
from typer.testing import CliRunner, Result

from tether.session import Event, SessionHeader, SessionStore
from tether.session._lease import Leases
from tether.session.persistence import JsonlPersistence, StoredSession
from tether.session.persistence._repair import TOOL_OUTCOME_UNKNOWN
from tether.surfaces.cli._approvals import app as approvals_app
from tether.surfaces.cli._sessions import app

runner = CliRunner()

CLOSERS = ["approval/decided", "tool/result", "step/end", "turn/end"]
"""What repair adds to the crashed session, in order."""


def invoke(ref: StoreRef, *args: str, input: bytes | None = None) -> Result:
    return runner.invoke(app, [*args, "--store", ref.url], input=input)


def test_commands_that_only_read_never_create_a_store(store: StoreRef) -> None:
    # A mistyped --store path must not leave an empty store behind. Listing and checking
    # everything see nothing stored; naming a session says there is no store.
    assert not store.path.exists()
    assert (invoke(store, "list").exit_code, invoke(store, "list").stdout) == (0, "no sessions\n")
    assert invoke(store, "list", "--json").stdout == "[]\n"
    assert invoke(store, "fsck").stdout == "checked 0 sessions: nothing to check\n"
    missing = (
        f"tether: STORE_NOT_FOUND: no session store at {store.path} (nothing was stored there)\n"
    )
    for args in (
        ("show", "s-x"),
        ("export", "s-x"),
        ("tree", "s-x"),
        ("fsck", "s-x"),
        ("fsck", "--repair", "s-x"),
        ("narrow", "s-x", "read-only"),
    ):
        result = invoke(store, *args)
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", missing), args
    approvals = CliRunner().invoke(approvals_app, ["list", "--store", store.url])
    assert (approvals.exit_code, approvals.stdout) == (0, "no pending approvals\n")
    answered = CliRunner().invoke(approvals_app, ["answer", "ap-1", "allow", "--store", store.url])
    assert (answered.exit_code, answered.stderr) == (1, missing)
    assert not store.path.exists()


def as_dicts(stored: StoredSession) -> tuple[dict[str, object], list[dict[str, object]]]:
    return stored.header.to_dict(), [event.to_dict() for event in stored.events]


# -- list ---------------------------------------------------------------------------------------
def test_list_prints_one_row_per_session_newest_first(store: StoreRef) -> None:
    populate(store, add_standard)
    result = invoke(store, "list")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "ID         CREATED                   DEPTH  PARENT  STATUS     CHILDREN  WORKSPACE"
        "      FIRST PROMPT\n"
        "s-crashed  2023-11-14T22:13:27.000Z  1      s-done  running    0         /work/project"
        "  -\n"
        "s-done     2023-11-14T22:13:20.000Z  0      -       completed  1         /work/project"
        "  héllo\n"
    )
    assert result.stderr == ""


def test_list_filters_by_workspace(store: StoreRef, tmp_path: Path) -> None:
    populate(store, add_standard)
    elsewhere = invoke(store, "list", "--workspace", str(tmp_path))
    assert (elsewhere.exit_code, elsewhere.stdout) == (0, "no sessions\n")
    here = invoke(store, "list", "--workspace", "/work/project/", "--json")
    assert [row["id"] for row in json.loads(here.stdout)] == [CRASHED, DONE]


def test_list_json_is_the_stored_headers_with_prompt_status_and_children(
    store: StoreRef,
) -> None:
    populate(store, add_standard)
    result = invoke(store, "list", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {
            "type": "session",
            "version": 0,
            "id": CRASHED,
            "created_at": 1_700_000_007_000,
            "cwd": "/work/project",
            "parent_session": DONE,
            "origin": "subagent",
            "delegation_depth": 1,
            "first_prompt": None,
            "status": "running",
            "children": 0,
        },
        {
            "type": "session",
            "version": 0,
            "id": DONE,
            "created_at": 1_700_000_000_000,
            "cwd": "/work/project",
            "delegation_depth": 0,
            "first_prompt": "héllo",
            "status": "completed",
            "children": 1,
        },
    ]


def test_list_names_an_unreadable_session_and_lists_the_others(store: StoreRef) -> None:
    populate(store, add_standard)
    store.set_format_version(DONE, 9)
    result = invoke(store, "list")
    assert result.exit_code == 1
    assert result.stdout == (
        "ID         CREATED                   DEPTH  PARENT  STATUS   CHILDREN  WORKSPACE"
        "      FIRST PROMPT\n"
        "s-crashed  2023-11-14T22:13:27.000Z  1      s-done  running  0         /work/project"
        "  -\n"
    )
    assert result.stderr == (
        "tether: session 's-done' is unreadable: UNSUPPORTED_FORMAT_VERSION: session 's-done' "
        "has format version 9; this tether reads only version 0 (no migration exists) "
        "(see tether sessions fsck)\n"
    )
    as_json = invoke(store, "list", "--json")
    assert as_json.exit_code == 1
    assert [header["id"] for header in json.loads(as_json.stdout)] == [CRASHED]


def test_list_of_an_empty_store(store: StoreRef) -> None:
    assert invoke(store, "list").stdout == "no sessions\n"
    result = invoke(store, "list", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == []


def test_store_defaults_to_tether_store_env(store: StoreRef) -> None:
    populate(store, add_done)
    result = runner.invoke(app, ["list", "--json"], env={"TETHER_STORE": store.url})
    assert result.exit_code == 0, result.output
    assert [header["id"] for header in json.loads(result.stdout)] == [DONE]


def test_invalid_store_url_is_a_one_line_error() -> None:
    result = runner.invoke(app, ["list", "--store", "nowhere"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        "tether: INVALID_STORE_URL: invalid store URL 'nowhere': not a URL; expected one of "
        "sqlite:////ABS/PATH.db, sqlite:///REL/PATH.db, jsonl:///ABS/DIR, memory://\n"
    )


# -- show ---------------------------------------------------------------------------------------
def test_show_prints_header_and_events(store: StoreRef) -> None:
    populate(store, add_done)
    result = invoke(store, "show", DONE)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "session  s-done\n"
        "created  2023-11-14T22:13:20.000Z\n"
        "cwd      /work/project\n"
        "parent   -\n"
        "origin   -\n"
        "depth    0\n"
        "seed     -\n"
        "preset   -\n"
        "events   6\n"
        "\n"
        "SEQ  TIME                      TYPE               DATA\n"
        '0    2023-11-14T22:13:21.000Z  turn/start         {"turn":0}\n'
        '1    2023-11-14T22:13:22.000Z  user/message       {"content":"héllo","source":"user"}\n'
        '2    2023-11-14T22:13:23.000Z  step/start         {"step":0}\n'
        '3    2023-11-14T22:13:24.000Z  assistant/message  {"content":"Hi."}\n'
        '4    2023-11-14T22:13:25.000Z  step/end           {"step":0}\n'
        '5    2023-11-14T22:13:26.000Z  turn/end           {"turn":0,"reason":"completed"}\n'
    )


def test_show_json_is_header_events_and_repair(store: StoreRef) -> None:
    populate(store, add_done)
    result = invoke(store, "show", DONE, "--json")
    assert result.exit_code == 0, result.output
    header, events = as_dicts(store.inspect(DONE))
    assert json.loads(result.stdout) == {
        "header": header,
        "events": events,
        "repair": {"dropped_tail": 0, "synthesized": [], "unmatched_approvals": []},
    }


def test_show_of_a_crashed_session_shows_the_repair_without_writing_it(store: StoreRef) -> None:
    populate(store, add_crashed)
    result = invoke(store, "show", CRASHED)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[8] == "events   8"
    assert lines[9] == (
        "note: the stored log is damaged; shown as loading would repair it (closers added: "
        "approval/decided, tool/result, step/end, turn/end). Run `tether sessions fsck --repair` "
        "to store the repair."
    )
    assert [line.split()[2] for line in lines[12:]] == [
        "turn/start",
        "step/start",
        "tool/call",
        "approval/asked",
        *CLOSERS,
    ]
    data = json.loads(invoke(store, "show", CRASHED, "--json").stdout)
    assert data["repair"] == {
        "dropped_tail": 0,
        "synthesized": CLOSERS,
        "unmatched_approvals": ["ap-1"],
    }
    # Nothing was written: the stored log still needs the same repair.
    assert store.inspect(CRASHED).repair.synthesized == tuple(CLOSERS)


@pytest.mark.parametrize("command", ["show", "export", "fsck"])
def test_unknown_session_is_a_one_line_error(store: StoreRef, command: str) -> None:
    populate(store, add_done)
    result = invoke(store, command, "nope")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == "tether: SESSION_NOT_FOUND: session 'nope' not found\n"


def test_unreadable_session_is_a_one_line_error(store: StoreRef) -> None:
    populate(store, add_done)
    store.set_event_type(DONE, 2, "future/thing")
    result = invoke(store, "show", DONE)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        "tether: UNKNOWN_EVENT_TYPE: unknown required event type 'future/thing'"
    )
    assert result.stderr.count("\n") == 1


# -- export -------------------------------------------------------------------------------------
def test_export_writes_the_header_line_then_one_event_per_line(store: StoreRef) -> None:
    populate(store, add_done)
    result = invoke(store, "export", DONE)
    assert result.exit_code == 0, result.output
    stored = store.inspect(DONE)
    lines = result.stdout.split("\n")
    assert lines.pop() == ""  # the export ends with a newline
    assert json.loads(lines[0]) == stored.header.to_dict()
    assert lines[1:] == [event.to_json() for event in stored.events]
    assert lines[2] == (
        '{"type":"user/message","seq":1,"time":1700000002000,'
        '"data":{"content":"héllo","source":"user"},"surface_op":"append"}'
    )


def test_export_to_a_file(store: StoreRef, tmp_path: Path) -> None:
    populate(store, add_done)
    out = tmp_path / "out"
    out.mkdir()
    target = out / "done.jsonl"
    result = invoke(store, "export", DONE, "-o", str(target))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert target.read_text(encoding="utf-8") == invoke(store, "export", DONE).stdout
    assert [p.name for p in out.iterdir()] == ["done.jsonl"]  # no temporary left behind


def test_export_of_a_crashed_session_is_the_repaired_view_and_writes_nothing(
    store: StoreRef,
) -> None:
    populate(store, add_crashed)
    lines = invoke(store, "export", CRASHED).stdout.splitlines()
    assert [json.loads(line)["type"] for line in lines[5:]] == CLOSERS
    assert json.loads(lines[-1])["data"] == {"turn": 0, "reason": "interrupted"}
    assert store.inspect(CRASHED).repair.changed


# -- import -------------------------------------------------------------------------------------
def test_export_import_round_trip(store: StoreRef, other_store: StoreRef, tmp_path: Path) -> None:
    populate(store, add_standard)
    path = tmp_path / "tree.jsonl"
    assert invoke(store, "export", DONE, "-o", str(path)).exit_code == 0
    # The root's part, then its subagent's: each starting at its header line.
    lines = path.read_text(encoding="utf-8").splitlines()
    headers = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "session"]
    assert [json.loads(lines[i])["id"] for i in headers] == [DONE, CRASHED]
    assert headers == [0, 7]
    result = invoke(other_store, "import", str(path))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{DONE}\n"
    assert other_store.session_ids() == [DONE, CRASHED]
    for session_id in (DONE, CRASHED):
        original, copy = store.inspect(session_id), other_store.inspect(session_id)
        assert as_dicts(copy) == as_dicts(original)
    # The crashed session arrives closed (its export is the repaired view).
    assert not other_store.inspect(CRASHED).repair.changed
    assert other_store.inspect(CRASHED).events[5].data["content"] == TOOL_OUTCOME_UNKNOWN
    # A leaf exports alone, and a tree whose ids are already stored imports nothing.
    leaf = invoke(store, "export", CRASHED).stdout.splitlines()
    assert [json.loads(line)["type"] for line in leaf].count("session") == 1
    again = invoke(other_store, "import", str(path))
    assert (again.exit_code, again.stderr) == (
        1,
        "tether: SESSION_ALREADY_EXISTS: session 's-done' already exists\n",
    )


def test_import_refuses_a_child_without_its_parent(store: StoreRef, tmp_path: Path) -> None:
    populate(store, add_standard)
    lines = invoke(store, "export", DONE).stdout.splitlines()
    # The subagent first, then its parent: the parent's part follows no session it belongs to.
    child_first = tmp_path / "reordered.jsonl"
    child_first.write_text("\n".join(lines[7:] + lines[:7]) + "\n", encoding="utf-8")
    before = store.session_ids()
    result = invoke(store, "import", str(child_first))
    assert result.exit_code == 1
    assert result.stderr == (
        f"tether: INVALID_IMPORT: {child_first}: line {len(lines) - 7 + 1}: session s-done is "
        "not a subagent of a session earlier in the file (an export holds one session and its "
        "descendants)\n"
    )
    assert store.session_ids() == before


def test_import_from_stdin(store: StoreRef, other_store: StoreRef) -> None:
    populate(store, add_done)
    exported = invoke(store, "export", DONE).stdout.encode("utf-8")
    result = invoke(other_store, "import", "-", input=exported)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{DONE}\n"
    assert as_dicts(other_store.inspect(DONE)) == as_dicts(store.inspect(DONE))


def test_import_keeps_ignorable_events_of_unknown_types(store: StoreRef, tmp_path: Path) -> None:
    lines = valid_lines()
    lines.append(
        Event.make("future/annotation", 5, T_EVENTS + 5, {"note": "x"}, ignorable=True).to_json()
    )
    path = write_lines(tmp_path, lines)
    result = invoke(store, "import", str(path))
    assert result.exit_code == 0, result.output
    stored = store.inspect("s-imported")
    assert stored.events[-1].to_dict() == {
        "type": "future/annotation",
        "seq": 5,
        "time": T_EVENTS + 5,
        "data": {"note": "x"},
        "ignorable": True,
    }


def test_import_refuses_an_existing_id_and_changes_nothing(store: StoreRef, tmp_path: Path) -> None:
    populate(store, add_done)
    before = as_dicts(store.inspect(DONE))
    path = tmp_path / "done.jsonl"
    invoke(store, "export", DONE, "-o", str(path))
    # Same id, different content: the stored session must stay as it was.
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    result = invoke(store, "import", str(path))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == "tether: SESSION_ALREADY_EXISTS: session 's-done' already exists\n"
    assert as_dicts(store.inspect(DONE)) == before


def test_import_of_a_missing_file(store: StoreRef, tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    result = invoke(store, "import", str(missing))
    assert result.exit_code == 1
    assert (
        result.stderr == f"tether: FILE_ERROR: cannot read {missing}: No such file or directory\n"
    )


T_HEADER = 1_700_000_000_000
T_EVENTS = 1_700_000_001_000


def valid_lines() -> list[str]:
    """A valid export of session ``s-imported``: header plus five events (seq 0..4)."""
    header = SessionHeader(id="s-imported", created_at=T_HEADER, cwd="/work/project")
    events = [
        Event.make("turn/start", 0, T_EVENTS, {"turn": 0}),
        Event.make(
            "user/message",
            1,
            T_EVENTS + 1,
            {"content": "hi", "source": "user"},
            surface_op="append",
        ),
        Event.make("step/start", 2, T_EVENTS + 2, {"step": 0}),
        Event.make("step/end", 3, T_EVENTS + 3, {"step": 0}),
        Event.make("turn/end", 4, T_EVENTS + 4, {"turn": 0, "reason": "completed"}),
    ]
    return [json.dumps(header.to_dict()), *(event.to_json() for event in events)]


def write_lines(tmp_path: Path, lines: list[str], name: str = "import.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def replace_line(number: int, text: str) -> list[str]:
    lines = valid_lines()
    lines[number - 1] = text
    return lines


BAD_FILES: dict[str, tuple[bytes, str]] = {
    # case: (file content, expected message after "<path>: ")
    "empty file": (b"", "line 1: empty file, expected a session header"),
    "header not JSON": (
        "\n".join(replace_line(1, "{session")).encode(),
        "line 1: header is not valid JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)",
    ),
    "header without delegation_depth": (
        "\n".join(
            replace_line(1, '{"type":"session","version":0,"id":"s-imported","created_at":1}')
        ).encode(),
        "line 1: INVALID_HEADER: session header has no delegation_depth (required on disk)",
    ),
    "header of another format version": (
        "\n".join(
            replace_line(
                1,
                '{"type":"session","version":9,"id":"s-imported","created_at":1,'
                '"delegation_depth":0}',
            )
        ).encode(),
        "line 1: UNSUPPORTED_FORMAT_VERSION: session 's-imported' has format version 9; this "
        "tether reads only version 0 (no migration exists)",
    ),
    "event not JSON": (
        "\n".join(replace_line(4, '{"type":"step/start","seq":2,')).encode(),
        "line 4: INVALID_EVENT: event is not valid JSON: Expecting property name enclosed in "
        "double quotes: line 1 column 30 (char 29)",
    ),
    "NaN in a payload": (
        "\n".join(
            replace_line(4, '{"type":"step/start","seq":2,"time":1,"data":{"step":NaN}}')
        ).encode(),
        "line 4: INVALID_EVENT: event is not valid JSON: NaN is not JSON",
    ),
    "seq gap": (
        "\n".join(valid_lines()[:3] + valid_lines()[4:]).encode(),
        "line 4: seq 3 expected 2 (events must be contiguous from 0)",
    ),
    "seq not from 0": (
        "\n".join(valid_lines()[:1] + valid_lines()[2:]).encode(),
        "line 2: seq 1 expected 0 (events must be contiguous from 0)",
    ),
    "unknown event type": (
        "\n".join(replace_line(5, '{"type":"future/thing","seq":3,"time":1,"data":{}}')).encode(),
        "line 5: UNKNOWN_EVENT_TYPE: unknown required event type 'future/thing': refusing to "
        "reconstruct the session (a newer tether or a missing plugin wrote it)",
    ),
    "surface event without surface_op": (
        "\n".join(
            replace_line(
                3,
                '{"type":"user/message","seq":1,"time":1,"data":{"content":"hi","source":"user"}}',
            )
        ).encode(),
        "line 3: INVALID_EVENT: user/message is a surface event: surface_op must be 'append' or "
        "{op: 'replace', start, end}, got None",
    ),
    "blank line": (
        "\n".join([*valid_lines()[:2], "", *valid_lines()[2:]]).encode(),
        "line 3: empty line",
    ),
    "not UTF-8": (
        "\n".join(valid_lines()[:1]).encode() + b"\n\xff\xfe\n",
        "line 2: not UTF-8 text (byte 1)",
    ),
    "torn last line": (
        "\n".join(valid_lines()).encode() + b'\n{"type":"turn/st',
        "line 7: INVALID_EVENT: event is not valid JSON: Unterminated string starting at: line "
        "1 column 9 (char 8)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_import_of_an_invalid_file_stores_nothing_and_names_the_line(
    store: StoreRef, tmp_path: Path, case: str
) -> None:
    content, message = BAD_FILES[case]
    path = tmp_path / "import.jsonl"
    path.write_bytes(content)
    result = invoke(store, "import", str(path))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"tether: INVALID_IMPORT: {path}: {message}\n"
    assert store.session_ids() == []


def test_the_valid_file_of_the_import_cases_imports(store: StoreRef, tmp_path: Path) -> None:
    path = write_lines(tmp_path, valid_lines())
    result = invoke(store, "import", str(path))
    assert result.exit_code == 0, result.output
    assert result.stdout == "s-imported\n"
    assert [e.type for e in store.inspect("s-imported").events] == [
        "turn/start",
        "user/message",
        "step/start",
        "step/end",
        "turn/end",
    ]


# -- fsck ---------------------------------------------------------------------------------------
def test_fsck_of_a_healthy_store(store: StoreRef) -> None:
    populate(store, add_done)
    result = invoke(store, "fsck")
    assert result.exit_code == 0, result.output
    assert result.stdout == "s-done: ok\nchecked 1 session: 1 ok\n"


def test_fsck_of_an_empty_store(store: StoreRef) -> None:
    result = invoke(store, "fsck")
    assert result.exit_code == 0, result.output
    assert result.stdout == "checked 0 sessions: nothing to check\n"


def test_tree_tells_a_running_child_from_one_that_stopped_mid_turn(store: StoreRef) -> None:
    populate(store, add_standard)  # s-crashed ends inside a turn

    def child_status() -> object:
        result = invoke(store, "tree", DONE, "--json")
        assert result.exit_code == 0, result.output
        (child,) = json.loads(result.stdout)["children"]
        return child["status"]

    # A store nothing ever ran with leases cannot tell: an open turn is shown as running.
    assert child_status() == "running"
    lease = Leases.for_store(store.url).take(CRASHED)
    try:
        assert child_status() == "running"
    finally:
        lease.release()
    assert child_status() == "stopped mid-turn"
    assert "stopped mid-turn" in invoke(store, "tree", DONE).stdout.splitlines()[1]


def test_a_session_live_in_another_process_is_neither_repaired_nor_narrowed(
    store: StoreRef,
) -> None:
    # s-crashed's open turn is work in progress while a process holds its lease.
    populate(store, add_standard)
    lease = Leases.for_store(store.url).take(CRASHED)
    try:
        result = invoke(store, "fsck", "--repair")
        assert result.exit_code == 0, result.output
        assert result.stdout == (
            "s-done: ok\n"
            f"s-crashed: live in process {os.getpid()} (not checked)\n"
            "checked 2 sessions: 1 ok, 1 live\n"
        )
        assert store.inspect(CRASHED).repair.changed  # nothing was appended to it
        narrowed = invoke(store, "narrow", CRASHED, "read-only")
        assert narrowed.exit_code == 1
        assert narrowed.stderr == (
            f"tether: SESSION_LIVE: session 's-crashed' is live in process {os.getpid()}; "
            "narrow it there (through the harness) or once it is no longer running\n"
        )
        as_json = json.loads(invoke(store, "fsck", CRASHED, "--json").stdout)
        assert as_json["sessions"] == [
            {"id": CRASHED, "status": "live", "problems": [], "live_in": f"process {os.getpid()}"}
        ]
    finally:
        lease.release()
    # Once nothing holds it, the crash is the crash it is, and repair closes it.
    assert "s-crashed: repaired: " in invoke(store, "fsck", "--repair").stdout


def test_fsck_reports_an_unclosed_turn_and_an_unmatched_approval(store: StoreRef) -> None:
    populate(store, add_standard)
    result = invoke(store, "fsck")
    assert result.exit_code == 1
    assert result.stdout == (
        "s-done: ok\n"
        "s-crashed: damaged: unclosed turn (closers: approval/decided, tool/result, step/end, "
        "turn/end); unmatched approval (ap-1)\n"
        "checked 2 sessions: 1 ok, 1 damaged\n"
    )
    assert store.inspect(CRASHED).repair.changed  # checking wrote nothing


def test_fsck_json_report(store: StoreRef) -> None:
    populate(store, add_standard)
    result = invoke(store, "fsck", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "ok": False,
        "repair": False,
        "counts": {"ok": 1, "damaged": 1, "repaired": 0, "unreadable": 0, "live": 0},
        "sessions": [
            {"id": DONE, "status": "ok", "problems": []},
            {
                "id": CRASHED,
                "status": "damaged",
                "problems": [
                    {"kind": "unclosed-turn", "closers": CLOSERS},
                    {"kind": "unmatched-approval", "ids": ["ap-1"]},
                ],
            },
        ],
    }


def test_fsck_repair_closes_the_interrupted_turn(store: StoreRef) -> None:
    populate(store, add_standard)
    before = store.inspect(CRASHED)
    result = invoke(store, "fsck", "--repair")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "s-done: ok\n"
        "s-crashed: repaired: added approval/decided, tool/result, step/end, turn/end\n"
        "checked 2 sessions: 1 ok, 1 repaired\n"
    )
    again = invoke(store, "fsck")
    assert again.exit_code == 0, again.output
    assert again.stdout == "s-done: ok\ns-crashed: ok\nchecked 2 sessions: 2 ok\n"
    after = store.inspect(CRASHED)
    assert not after.repair.changed
    assert after.repair.unmatched_approvals == ()
    # The stored log is now exactly the view inspect promised before the repair.
    assert as_dicts(after) == as_dicts(before)
    assert after.events[-1].to_dict()["data"] == {"turn": 0, "reason": "interrupted"}
    assert after.events[4].to_dict()["data"] == {
        "id": "ap-1",
        "outcome": "unavailable",
        "repaired": True,
    }


def test_fsck_repair_json_report(store: StoreRef) -> None:
    populate(store, add_crashed)
    result = invoke(store, "fsck", "--repair", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "ok": True,
        "repair": True,
        "counts": {"ok": 0, "damaged": 0, "repaired": 1, "unreadable": 0, "live": 0},
        "sessions": [
            {
                "id": CRASHED,
                "status": "repaired",
                "problems": [
                    {"kind": "unclosed-turn", "closers": CLOSERS},
                    {"kind": "unmatched-approval", "ids": ["ap-1"]},
                ],
                "repaired": {"dropped_tail": 0, "synthesized": CLOSERS},
                "remaining": [],
            }
        ],
    }


def test_fsck_checks_one_session(store: StoreRef) -> None:
    populate(store, add_standard)
    result = invoke(store, "fsck", DONE)
    assert result.exit_code == 0, result.output
    assert result.stdout == "s-done: ok\nchecked 1 session: 1 ok\n"
    result = invoke(store, "fsck", CRASHED, "--repair")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith("s-crashed: repaired: ")


def test_fsck_reports_unreadable_sessions_and_checks_the_others(store: StoreRef) -> None:
    def build(s: SessionStore) -> None:
        add_standard(s)
        add_done(s, "s-corrupt")
        add_done(s, "s-future")

    populate(store, build)
    store.corrupt_event("s-corrupt", 2)
    store.set_event_type("s-future", 3, "future/thing")
    for args in (("fsck",), ("fsck", "--repair")):
        result = invoke(store, *args)
        assert result.exit_code == 1, result.output
        lines = result.stdout.splitlines()
        assert [line.split(":")[0] for line in lines[:4]] == [
            DONE,
            CRASHED,
            "s-corrupt",
            "s-future",
        ]
        assert lines[2].startswith("s-corrupt: unreadable: CORRUPT_LOG: session ")
        assert lines[3] == (
            "s-future: unreadable: UNKNOWN_EVENT_TYPE: unknown required event type "
            "'future/thing': refusing to reconstruct the session (a newer tether or a missing "
            "plugin wrote it)"
        )
    # The repair pass still repaired the damaged session beside the unreadable ones.
    assert lines[1].startswith("s-crashed: repaired: ")
    assert lines[4] == "checked 4 sessions: 1 ok, 1 repaired, 2 unreadable"
    report = json.loads(invoke(store, "fsck", "--json").stdout)
    assert report["sessions"][3] == {
        "id": "s-future",
        "status": "unreadable",
        "problems": [
            {
                "kind": "unreadable",
                "code": "UNKNOWN_EVENT_TYPE",
                "message": "unknown required event type 'future/thing': refusing to reconstruct "
                "the session (a newer tether or a missing plugin wrote it)",
            }
        ],
    }


def test_fsck_of_a_session_of_another_format_version(store: StoreRef) -> None:
    populate(store, add_standard)
    store.set_format_version(DONE, 9)
    message = (
        "session 's-done' has format version 9; this tether reads only version 0 "
        "(no migration exists)"
    )
    result = invoke(store, "fsck", DONE)
    assert result.exit_code == 1
    assert result.stdout == (
        f"s-done: unreadable: UNSUPPORTED_FORMAT_VERSION: {message}\n"
        "checked 1 session: 1 unreadable\n"
    )
    # Checking everything reports it per session and still checks the others: fsck lists ids
    # without parsing headers, so one unreadable header does not stop the survey.
    result = invoke(store, "fsck")
    assert result.exit_code == 1
    assert f"s-done: unreadable: UNSUPPORTED_FORMAT_VERSION: {message}\n" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("checked ")
    assert "1 unreadable" in result.stdout.splitlines()[-1]
    assert result.stderr == ""


def test_fsck_repair_cannot_invent_a_decision_outside_an_open_turn(store: StoreRef) -> None:
    # An approval/asked whose turn was closed without a decision is not crash damage that load
    # repairs; fsck keeps reporting it, and --repair says so.
    def build(s: SessionStore) -> None:
        session = s.create("s-odd")
        session.append("turn/start", {"turn": 0})
        session.append("approval/asked", {"id": "ap-9", "tool_name": "bash"})
        session.append("turn/end", {"turn": 0, "reason": "aborted", "cause": "test"})

    populate(store, build)
    result = invoke(store, "fsck", "--repair")
    assert result.exit_code == 1
    assert result.stdout == (
        "s-odd: damaged: unmatched approval (ap-9); repair (nothing changed) left: "
        "unmatched approval (ap-9)\n"
        "checked 1 session: 1 damaged\n"
    )


# -- JSONL torn tails (only a JSONL write can be torn) ------------------------------------------
def test_fsck_reports_a_torn_tail(jsonl_store: StoreRef) -> None:
    populate(jsonl_store, add_done)
    jsonl_store.tear_tail(DONE)
    result = invoke(jsonl_store, "fsck")
    assert result.exit_code == 1
    assert result.stdout == "s-done: damaged: torn tail (1 record)\nchecked 1 session: 1 damaged\n"
    result = invoke(jsonl_store, "fsck", "--repair")
    assert result.exit_code == 0, result.output
    assert (
        result.stdout == "s-done: repaired: dropped 1 torn record\nchecked 1 session: 1 repaired\n"
    )
    assert invoke(jsonl_store, "fsck").exit_code == 0


def test_fsck_repair_of_a_torn_crashed_jsonl_log(jsonl_store: StoreRef) -> None:
    populate(jsonl_store, add_standard)
    jsonl_store.tear_tail(CRASHED)
    result = invoke(jsonl_store, "fsck", CRASHED)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == (
        "s-crashed: damaged: torn tail (1 record); unclosed turn (closers: approval/decided, "
        "tool/result, step/end, turn/end); unmatched approval (ap-1)"
    )
    result = invoke(jsonl_store, "fsck", "--repair")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1] == (
        "s-crashed: repaired: dropped 1 torn record; added approval/decided, tool/result, "
        "step/end, turn/end"
    )
    # The file itself now ends with the synthetic turn/end line: no fragment is left.
    text = JsonlPersistence(jsonl_store.path).log_path(CRASHED).read_text(encoding="utf-8")
    assert text.endswith("\n")
    last = json.loads(text.splitlines()[-1])
    assert (last["type"], last["seq"], last["data"]) == (
        "turn/end",
        7,
        {"turn": 0, "reason": "interrupted"},
    )
    assert invoke(jsonl_store, "fsck").exit_code == 0
