"""A read-only group without the multi_statement guard: a function the DBA granted turns
default_transaction_read_only off, and the statements after a COMMIT in the same text (or the same
unsynced extended batch) would run in a new, writable transaction before the server reports the
change. pgwarden refuses the text (and the Execute) instead (docs/reliability.md)."""

import secrets

import pytest

import pgwtest
from conftest import module_daemon


@pytest.fixture(scope="module")
def ro(pgwarden_bin, pg):
    pg.execute("DROP TABLE IF EXISTS esc_t")
    pg.execute("CREATE TABLE esc_t (v int)")
    pg.execute(f"GRANT SELECT, INSERT ON esc_t TO {pgwtest.READER_ROLE}")
    pg.execute("CREATE OR REPLACE FUNCTION public.go_rw() RETURNS text SECURITY DEFINER "
               "LANGUAGE sql AS $$ SELECT set_config('default_transaction_read_only', 'off', false) $$")
    pg.execute("CREATE OR REPLACE FUNCTION public.write_it() RETURNS int LANGUAGE sql "
               "AS $$ INSERT INTO esc_t VALUES (1) RETURNING 1 $$")
    pg.execute(f"GRANT EXECUTE ON FUNCTION public.go_rw(), public.write_it() TO {pgwtest.READER_ROLE}")
    password = "ro-" + secrets.token_hex(6)
    users = [{"name": "ro", "password": pgwtest.scram_verifier(password), "group": "ro_only"}]
    overrides = {"groups": {"ro_only": {"search_path": ["public"], "guards": [{"kind": "read_only"}]}}}

    def start(daemons):
        d = daemons.start(pg, overrides=overrides, users=users, start=False)
        d.password = password
        d.start()
        return d

    yield from module_daemon(pgwarden_bin, start)
    pg.execute("DROP TABLE IF EXISTS esc_t")


def _login(d):
    c = d.raw()
    c.login("ro", d.password)
    return c


def test_statement_after_commit_in_one_text_is_refused(ro, pg):
    with _login(ro) as c:
        with pytest.raises(pgwtest.ServerError) as e:
            c.query("SELECT go_rw(); COMMIT; SELECT write_it()")
        assert '"code":"READ_ONLY"' in e.value.fields.get("D", ""), e.value.fields
        assert "COMMIT" in e.value.message
        assert e.value.fields.get("H") == "SELECT write_it()"
        # The session goes on, and reads as before.
        rows, _, _ = c.query("SELECT count(*) FROM esc_t")
        assert rows == [("0",)]
        # A COMMIT at the end of a text is fine.
        _, tags, _ = c.query("BEGIN; SELECT 1; COMMIT")
        assert tags == ["BEGIN", "SELECT 1", "COMMIT"]
    assert pg.scalar("SELECT count(*) FROM esc_t") == 0


def test_execute_after_commit_in_one_batch_is_refused(ro, pg):
    with _login(ro) as c:
        c.send_extended("SELECT go_rw()")
        c.send_extended("COMMIT")
        c.send_extended("SELECT write_it()")
        try:
            _, tags, _, errors, _ = c.sync()
        except (pgwtest.ProtocolError, OSError, EOFError):
            errors, tags = [None], []  # the session may end at the Sync: read-only was turned off
        assert errors, tags
        if errors[0] is not None:
            assert '"code":"READ_ONLY"' in errors[0].get("D", ""), errors
    assert pg.scalar("SELECT count(*) FROM esc_t") == 0
