"""Denials, warnings and truncation notices as an agent's client shows them, through the real daemon
with psql (stderr: ERROR, DETAIL, HINT, WARNING), JDBC (SQLException.getSQLState/getMessage,
ServerErrorMessage, getWarnings; Statement and PreparedStatement) and psycopg2 (e.pgcode, e.diag,
conn.notices): a require_predicate denial names the column to filter on, a row_limit denial names
the limit, the guard code is visible, a guard with `action: warn` arrives as a notice before the
rows, a capped result arrives with a notice naming the row count, and no answer carries the
upstream's address, a password or a policy service's URL."""

import json
import re
import secrets
import struct

import psycopg2
import pytest

import pgwtest

CAP = 5  # the dryrun group's row_limit max_rows

# (name, user, sql, expected): expected is either ("deny", sqlstate, code, [texts the message must
# hold], [texts the hint must hold]) or ("notice", rows, code, [texts the notice must hold]).
CASES = [
    ("predicate", "agent", "SELECT * FROM fct_shipments",
     ("deny", "54000", "MISSING_PREDICATE", ["public.fct_shipments", "ship_date"], ["WHERE ship_date"])),
    ("trivial", "agent", "SELECT id, status FROM fct_shipments WHERE 1=1",
     ("deny", "54000", "MISSING_PREDICATE", ["ship_date", "1=1"], ["WHERE ship_date"])),
    ("limit", "agent", "SELECT id FROM fct_shipments WHERE ship_date >= '2024-01-01' LIMIT 50000",
     ("deny", "54000", "LIMIT_TOO_LARGE", ["LIMIT 50000", "10000"], ["LIMIT 10000"])),
    ("read_only", "agent", "DELETE FROM scratch WHERE id = 1",
     ("deny", "42501", "READ_ONLY", ["DELETE", "SELECT"], [])),
    ("function", "agent", "SELECT pg_read_file('/etc/passwd')",
     ("deny", "42501", "FUNCTION_DENIED", ["pg_read_file"], [])),
    ("setting", "agent", "SET statement_timeout = 0",
     ("deny", "42501", "PROTECTED_SETTING", ["statement_timeout"], ["SHOW statement_timeout"])),
    ("secret", "agent", "SELECT rolname, rolpassword FROM pg_authid WHERE rolname = 'postgres'",
     ("deny", "42501", "TABLE_DENIED", ["pg_authid", "pg_roles"], ["pg_roles"])),
    ("webhook", "hooked", "SELECT id FROM fct_shipments WHERE id = 1",
     ("deny", "58000", "POLICY_UNAVAILABLE", ["policy check is unavailable"], [])),
    ("warn", "watcher", "SELECT id FROM fct_shipments LIMIT 3",
     ("notice", 3, "MISSING_PREDICATE", ["ship_date"])),
    ("truncated", "watcher", "SELECT id FROM fct_shipments WHERE ship_date >= '2000-01-01'",
     ("notice", CAP, "ROWS_TRUNCATED", [f"truncated at {CAP} rows"])),
]


@pytest.fixture(scope="module")
def daemon(pgwarden_bin, pg):
    from conftest import DaemonSet
    # A policy service that is not there; the secret is in its URL and in a header.
    token = "tok-" + secrets.token_hex(6)
    url = f"http://127.0.0.1:{pgwtest.free_port()}/policy/check?token={token}"
    groups = {
        "dryrun": {"search_path": ["public"], "guards": [
            {"kind": "read_only"},
            {"kind": "require_predicate", "min_rows": 100000, "action": "warn"},
            {"kind": "row_limit", "max_rows": CAP}]},
        "hooked": {"guards": [
            {"kind": "read_only"},
            {"kind": "http_webhook", "url": url, "timeout_ms": 500, "retries": 0,
             "headers": {"Authorization": f"Bearer {token}"}}]},
    }
    passwords = {u: f"{u}-" + secrets.token_hex(6) for u in ("agent", "watcher", "hooked")}
    users = [{"name": u, "password": pgwtest.scram_verifier(p),
              "group": {"agent": "agents", "watcher": "dryrun", "hooked": "hooked"}[u]}
             for u, p in passwords.items()]
    daemons = DaemonSet(pgwarden_bin)
    try:
        d = daemons.start(pg, overrides={"groups": groups}, users=users, start=False)
        d.passwords.update(passwords)
        d.secrets = [url, token, "/policy/check", pgwtest.READER_PASSWORD,
                     pgwtest.SUPERUSER_PASSWORD, pgwtest.READER_ROLE, *passwords.values()]
        d.start()
        yield d
    finally:
        daemons.teardown()


def check_leaks(daemon, pg, text):
    for secret in daemon.secrets:
        assert secret not in text
    for port in (pg.port, daemon.port):
        assert not re.search(rf"\b{port}\b", text), f"port {port} in {text!r}"
    assert "127.0.0.1" not in text and str(pg.sockdir) not in text


def check_denial(daemon, pg, expected, sqlstate, message, detail, hint, full_text):
    _, want_state, code, in_message, in_hint = expected
    assert sqlstate == want_state, full_text
    if code:
        assert json.loads(detail)["code"] == code, full_text
        assert code in full_text  # the code is visible where the client prints the error
    for t in in_message:
        assert t in message, full_text
    for t in in_hint:
        assert t in (hint or ""), full_text
    check_leaks(daemon, pg, full_text)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_psql(daemon, pg, case):
    _, user, sql, expected = case
    # psql's default verbosity, as an agent runs it; the SQLSTATE from LAST_ERROR_SQLSTATE.
    r = pgwtest.psql(daemon.dsn(user=user), "-v", "ON_ERROR_STOP=0",
                     input=sql + ";\n\\echo sqlstate=:LAST_ERROR_SQLSTATE\n")
    err = r.stderr
    state = re.search(r"^sqlstate=(\w+)$", r.stdout, re.M).group(1)
    if expected[0] == "deny":
        m = re.search(r"^ERROR:  (.*)$", err, re.M)
        d = re.search(r"^DETAIL:  (.*)$", err, re.M)
        h = re.search(r"^HINT:  (.*)$", err, re.M)
        assert m and (d or not expected[2]), err
        check_denial(daemon, pg, expected, state, m.group(1), d.group(1) if d else None,
                     h.group(1) if h else None, err)
    else:
        _, rows, code, texts = expected
        assert state == "00000" and "ERROR" not in err, err
        assert f"({rows} row" in r.stdout, r.stdout
        warning = re.search(r"^WARNING:  (.*)$", err, re.M)
        assert warning and f'"code":"{code}"' in err, err
        for t in texts:
            assert t in warning.group(1), err
        check_leaks(daemon, pg, err)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_psycopg2(daemon, pg, case):
    _, user, sql, expected = case
    conn = daemon.connect(user=user)
    try:
        cur = conn.cursor()
        if expected[0] == "deny":
            with pytest.raises(psycopg2.Error) as e:
                cur.execute(sql)
            diag = e.value.diag
            check_denial(daemon, pg, expected, e.value.pgcode, diag.message_primary,
                         diag.message_detail, diag.message_hint, e.value.pgerror)
            assert diag.severity == "ERROR"
        else:
            _, rows, code, texts = expected
            cur.execute(sql)
            assert len(cur.fetchall()) == rows
            assert cur.rowcount == rows  # CommandComplete matches the rows sent
            notices = [n for n in conn.notices if f'"code":"{code}"' in n]
            assert len(notices) == 1, conn.notices
            assert notices[0].startswith("WARNING:  ")
            for t in texts:
                assert t in notices[0]
            check_leaks(daemon, pg, "".join(conn.notices))
        # The session goes on after a denial (the policy service is down for every statement).
        if user != "hooked":
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
    finally:
        conn.close()


def test_psycopg2_transaction_with_the_policy_service_down(daemon, pg):
    """psycopg2's own BEGIN (autocommit off), SHOW, SET and ROLLBACK are session housekeeping: a
    fail-closed webhook guard whose service is down lets them through, and refuses the query."""
    conn = daemon.connect(user="hooked", autocommit=False)
    try:
        cur = conn.cursor()
        with pytest.raises(psycopg2.Error) as e:
            cur.execute("SELECT id FROM fct_shipments WHERE id = 1")
        assert e.value.pgcode == "58000"
        assert json.loads(e.value.diag.message_detail)["code"] == "POLICY_UNAVAILABLE"
        check_leaks(daemon, pg, e.value.pgerror)
        # BEGIN went through before the query was refused: the session is in a transaction.
        status = conn.info.transaction_status
        assert status in (psycopg2.extensions.TRANSACTION_STATUS_INTRANS,
                          psycopg2.extensions.TRANSACTION_STATUS_INERROR), status
        conn.rollback()
        assert conn.info.transaction_status == psycopg2.extensions.TRANSACTION_STATUS_IDLE
        cur.execute("SET application_name = 'nightly-report'")
        cur.execute("SHOW application_name")
        assert cur.fetchone() == ("nightly-report",)
        cur.execute("SHOW transaction_read_only")
        assert cur.fetchone() == ("on",)
        conn.commit()
        # Protected settings stay refused by the built-in guard, not by the unreachable service.
        with pytest.raises(psycopg2.Error) as e:
            cur.execute("SET default_transaction_read_only = off")
        assert e.value.pgcode == "42501"
        assert json.loads(e.value.diag.message_detail)["code"] == "PROTECTED_SETTING"
        conn.rollback()
    finally:
        conn.close()


def test_jdbc(daemon, pg, java):
    runs = {}
    for name, user, sql, expected in CASES:
        runs.setdefault((user,), []).append((name, sql, expected))
        if user == "watcher":
            # Again with results read two rows at a time (Execute with a row count).
            runs.setdefault((user, "autocommit=false", "defaultRowFetchSize=2"), []).append(
                (name, sql, expected))
        if user == "hooked":
            # Again inside a transaction: pgjdbc's own BEGIN is housekeeping too.
            runs.setdefault((user, "autocommit=false"), []).append((name, sql, expected))
    url = f"jdbc:postgresql://127.0.0.1:{daemon.port}/{pgwtest.DATABASE}"
    for (user, *props), cases in runs.items():
        r = java.run("DenialCheck", url, f"user={user}", f"password={daemon.passwords[user]}",
                     *props, "--", *[sql for _, sql, _ in cases])
        # With its policy service down, the hooked group still lets pgjdbc connect (its set-up
        # SETs and BEGIN are session housekeeping, which no policy service judges) and refuses
        # every query with the clean POLICY_UNAVAILABLE reason.
        assert r.returncode == 0, r.stdout + r.stderr
        facts = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
        if user == "hooked":
            assert facts["after"] == "error 58000", facts
            if "autocommit=false" in props:
                # Inside pgjdbc's transaction the refusals aborted it, as the server's own would:
                # the next statement gets 25P02 until the driver rolls back.
                assert facts["show"] == "error 25P02", facts
            else:
                assert facts["show"] == "on", facts  # the session is usable; housekeeping passes
            check_leaks(daemon, pg, r.stdout + r.stderr)
        else:
            assert facts["after"] == "1"
        for n, (name, sql, expected) in enumerate(cases):
            for mode in ("stmt", "prep"):
                got = {k.split(".", 2)[2]: v.replace("\\n", "\n") for k, v in facts.items()
                       if k.startswith(f"{n}.{mode}.")}
                where = f"{name} ({mode}): {got}"
                if expected[0] == "deny":
                    assert got["outcome"] == "error", where
                    # getMessage() is what an application logs: reason, detail (code) and hint.
                    check_denial(daemon, pg, expected, got["sqlstate"], got["primary"],
                                 got.get("detail") if expected[2] else None, got["hint"],
                                 got["message"])
                    assert got["primary"] in got["message"], where
                else:
                    _, rows, code, texts = expected
                    assert got["outcome"] == "ok" and got["rows"] == str(rows), where
                    assert f'"code":"{code}"' in got["warnings"], where
                    for t in texts:
                        assert t in got["warnings"], where
                    check_leaks(daemon, pg, got["warnings"])


def test_truncation_in_the_extended_protocol(daemon):
    """The cap holds where the rewrite cannot see the limit (LIMIT $2), when the client reads the
    portal in slices, and for a cursor (ROWS_CAPPED when it is declared)."""
    def truncations(notices):
        return [n for n in notices if '"code":"ROWS_TRUNCATED"' in n.get("D", "")
                and f"truncated at {CAP} rows" in n["M"]]

    with daemon.raw() as c:
        c.login("watcher", daemon.passwords["watcher"])
        count, tags, notices = c.extended(
            "SELECT id FROM fct_shipments WHERE ship_date >= $1 LIMIT $2", ("2000-01-01", 50000))
        assert (count, tags, len(truncations(notices))) == (CAP, [f"SELECT {CAP}"], 1), notices

        c.send_msg(b"P", b"\0SELECT id FROM fct_shipments WHERE ship_date >= '2000-01-01'\0\0\0")
        c.send_msg(b"B", b"\0\0" + struct.pack("!HHH", 0, 0, 0))
        for _ in range(4):
            c.send_msg(b"E", b"\0" + struct.pack("!i", 2))
        rows, tags, notices, errors, seen = c.sync()
        assert not errors and len(rows) == CAP and len(truncations(notices)) == 1, seen
        assert seen.count(b"s") == 2  # two full slices of 2, then the last row and the end
        # As in PostgreSQL, each CommandComplete counts the rows of its own Execute: the one
        # that ended the portal sent the last row.
        assert tags[0] == f"SELECT {CAP - 4}", tags

        c.query("BEGIN")
        _, tags, notices = c.query(
            "DECLARE cur CURSOR FOR SELECT id FROM fct_shipments WHERE ship_date >= '2000-01-01'")
        assert any('"code":"ROWS_CAPPED"' in n.get("D", "") for n in notices), notices
        rows, tags, _ = c.query("FETCH 100 FROM cur")
        assert (len(rows), tags) == (CAP, [f"FETCH {CAP}"])
        c.query("COMMIT")
