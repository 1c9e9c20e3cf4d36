"""A store another run used stays out of reach of this run's commands and file tools, on both
backends: the sandbox composed over a store puts it on the list of stores every run hides
(``tether.session._known_stores``), so a later run over another store cannot read its
sessions nor write into its log what would widen a scope when one of them is resumed (a
forged ``approval/grant`` or ``sandbox/mode``), nor plant files in its answer box. The host
is compared before and after."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sandbox_support import PYTHON, VARIANTS, Host, changed, make_provider, run_confined
from test_escape_paths import ANSWER_SECRET, LOG_SECRET, Store, tree

from tether.kernel import SESSIONS_SERVICE, Context, Runtime
from tether.sandbox import SandboxError
from tether.sandbox._plugin import SandboxConfig, plugin
from tether.session import SessionStore
from tether.session._known_stores import known_stores_file
from tether.session.persistence._sqlite import SqlitePersistence

pytestmark = pytest.mark.timeout(120)

ATTACKS = (
    "cat @DB@ @DB@-wal; sqlite3 @DB@ 'select * from events'; cat @DB@.answers/*",
    "echo forged >> @DB@; echo forged > @DB@-journal",
    'echo \'{"outcome": "allowed-once"}\' > @DB@.answers/a-2.json',
    f'{PYTHON} -c "import sqlite3; '
    "sqlite3.connect('@DB@').execute('insert into events values (1)').connection.commit()\"",
)


def compose(db: Path) -> Context:
    """A run's context over the store at ``db``, with the sandbox plugin applied."""
    ctx = Context(Runtime())
    ctx.provide(SESSIONS_SERVICE, SessionStore(SqlitePersistence(db)))
    plugin.apply(ctx, SandboxConfig())
    return ctx


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_store_another_run_used_is_out_of_reach(
    host: Host, variant: str, mode: str
) -> None:
    # Run A kept its store in the workspace run B works in, B uses a store of its own.
    other = Store(host.ws / "src" / "state" / "a.db")
    try:
        compose(other.db)
        assert known_stores_file().read_text() == other.url + "\n"
        compose(host.top / "b.db")  # run B
        provider = make_provider(variant, host, store_paths=[str(host.top / "b.db")])
        before = tree(host)
        for attack in ATTACKS:
            script = attack.replace("@DB@", str(other.db))
            ran = await run_confined(provider, host.policy(mode), script)
            assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr
            output = ran.stdout + ran.stderr
            assert LOG_SECRET not in output and ANSWER_SECRET not in output, script
            assert changed(before, tree(host)) == [], script
        assert not os.path.lexists(f"{other.db}-journal")
        assert not os.path.lexists(f"{other.db}.answers/a-2.json")
    finally:
        other.close()


@pytest.mark.bwrap
def test_a_store_another_run_used_in_an_open_workspace_root_is_refused(host: Host) -> None:
    # With the root open under bubblewrap a command could create the missing -journal of a
    # store lying there, which SQLite would replay when that store is next opened.
    other = Store(host.ws / "a.db")
    try:
        compose(other.db)
        own = [str(host.top / "b.db")]
        make_provider("bwrap", host, store_paths=own).check_workspace(str(host.ws))
        opened = make_provider("bwrap", host, store_paths=own, open_workspace_root=True)
        with pytest.raises(SandboxError) as err:
            opened.check_workspace(str(host.ws))
    finally:
        other.close()
    assert err.value.code == "STORE_UNPROTECTED"
    assert str(err.value).startswith(
        f"session store files lie directly in the workspace root {host.ws} and "
        "open_workspace_root is on, so a confined command could create the missing ones (a.db, "
    )
