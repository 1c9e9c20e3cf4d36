"""One resolver for ids typed on the command line (``surfaces/cli/_id_prefix.py``): a full id,
a unique prefix, an ambiguous prefix (the candidates named) and no match, through ``sessions``
and ``approvals answer`` against real SQLite and JSONL stores."""

from __future__ import annotations

import json

import pytest
from cli_stores import CRASHED, DONE, StoreRef, add_standard, populate
from typer.testing import CliRunner

from tether.surfaces.cli._approvals import app as approvals_app
from tether.surfaces.cli._sessions import app as sessions_app

runner = CliRunner()

AMBIGUOUS = (
    "tether: AMBIGUOUS_ID: session id prefix 's-' matches 2 sessions: s-crashed, s-done; "
    "give more of the id\n"
)


@pytest.mark.parametrize("command", ["show", "export", "tree", "fsck"])
def test_a_unique_prefix_names_the_session(store: StoreRef, command: str) -> None:
    populate(store, add_standard)
    by_prefix = runner.invoke(sessions_app, [command, "s-d", "--store", store.url])
    by_id = runner.invoke(sessions_app, [command, DONE, "--store", store.url])
    assert by_prefix.exit_code == by_id.exit_code
    assert by_prefix.stdout == by_id.stdout and DONE in by_id.stdout


@pytest.mark.parametrize("command", ["show", "export", "tree", "fsck"])
def test_an_ambiguous_prefix_lists_the_candidates(store: StoreRef, command: str) -> None:
    populate(store, add_standard)
    result = runner.invoke(sessions_app, [command, "s-", "--store", store.url])
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", AMBIGUOUS)


def test_a_prefix_that_matches_nothing_is_session_not_found(store: StoreRef) -> None:
    populate(store, add_standard)
    result = runner.invoke(sessions_app, ["show", "x-", "--store", store.url])
    assert (result.exit_code, result.stderr) == (
        1,
        "tether: SESSION_NOT_FOUND: session 'x-' not found\n",
    )


def test_narrow_by_prefix_says_which_session_it_narrowed(store: StoreRef) -> None:
    populate(store, add_standard)
    repaired = runner.invoke(sessions_app, ["fsck", "--repair", "s-c", "--store", store.url])
    assert repaired.exit_code == 0, repaired.output
    result = runner.invoke(sessions_app, ["narrow", "s-c", "read-only", "--store", store.url])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{CRASHED}: narrowed to read-only\n"
    shown = runner.invoke(sessions_app, ["show", CRASHED, "--json", "--store", store.url])
    last = json.loads(shown.stdout)["events"][-1]
    assert (last["type"], last["data"]) == (
        "sandbox/mode",
        {"mode": "read-only", "source": "parent"},
    )


def test_approvals_answer_resolves_a_prefix_of_a_pending_id(store: StoreRef) -> None:
    # ap-1 is pending in the crashed session's log, with no process waiting on the store: the
    # prefix reaches that approval (its own stale error), not "not pending".
    populate(store, add_standard)
    result = runner.invoke(approvals_app, ["answer", "ap", "allow", "--store", store.url])
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "tether: APPROVAL_STALE: approval ap-1 is pending in the log, but no running process"
    )
    unknown = runner.invoke(approvals_app, ["answer", "zz", "allow", "--store", store.url])
    assert unknown.stderr == (
        "tether: APPROVAL_NOT_PENDING: approval zz is not pending (already decided, or no such "
        "approval)\n"
    )
