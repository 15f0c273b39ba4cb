"""psql through pgwarden: one-off commands, scripts, meta-commands, COPY TO STDOUT, authentication
failures, cancellation, and the read-only server session."""

import signal
import subprocess
import time
import uuid

import pgwtest
from pgwtest import psql


def direct_rows(pg, sql):
    return pg.execute(sql)


def test_dash_c_returns_the_same_answer_as_the_server(pgwarden, pg):
    sql = "select status, count(*) from fct_shipments group by status order by status"
    r = psql(pgwarden.dsn(), "-At", "-F", "|", "-c", sql)
    assert r.returncode == 0, r.stderr
    expected = "\n".join(f"{s}|{n}" for s, n in direct_rows(pg, sql))
    assert r.stdout.strip() == expected
    # The sample data promise: DELAYED exists, but not among the first thousand rows.
    assert "DELAYED|" in r.stdout
    r = psql(pgwarden.dsn(), "-At", "-c",
             "select count(*) from fct_shipments where id <= 1000 and status = 'DELAYED'")
    assert r.stdout.strip() == "0"


def test_multi_line_script(pgwarden, pg, tmp_path):
    script = tmp_path / "report.sql"
    script.write_text("""\\echo start
select carrier,
       count(*) as shipments
  from fct_shipments
 where ship_date >= date '2024-01-01'
   and ship_date <  date '2024-02-01'
 group by carrier
 order by carrier;

with delayed as (
  select region, count(*) as n
    from fct_shipments
   where status = 'DELAYED' and ship_date between '2023-03-01' and '2023-03-31'
   group by region
)
select region, n from delayed order by region;
\\echo end
""")
    r = psql(pgwarden.dsn(), "-At", "-F", "|", "-f", str(script))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "start" and lines[-1] == "end"
    carriers = direct_rows(pg, "select carrier, count(*) from fct_shipments where ship_date >= "
                               "'2024-01-01' and ship_date < '2024-02-01' group by 1 order by 1")
    regions = direct_rows(pg, "select region, count(*) from fct_shipments where status = "
                              "'DELAYED' and ship_date between '2023-03-01' and '2023-03-31' "
                              "group by 1 order by 1")
    expected = [f"{a}|{b}" for a, b in carriers + regions]
    assert lines[1:-1] == expected


def test_describe_meta_commands(pgwarden):
    r = psql(pgwarden.dsn(), "-c", r"\d fct_shipments")
    assert r.returncode == 0, r.stderr
    for column in ("id", "carrier", "status", "ship_date", "region", "weight"):
        assert f" {column} " in r.stdout
    assert "fct_shipments_ship_date_idx" in r.stdout
    assert "numeric" in r.stdout and "bigint" in r.stdout
    r = psql(pgwarden.dsn(), "-c", r"\d")
    assert r.returncode == 0, r.stderr
    assert "fct_shipments" in r.stdout and "pgbench_accounts" in r.stdout
    r = psql(pgwarden.dsn(), "-c", r"\dt+ pgbench_*")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("pgbench_") == 4


def test_copy_to_stdout(pgwarden, pg):
    r = psql(pgwarden.dsn(), "-c",
             r"\copy (select id, carrier, ship_date from fct_shipments where id <= 2500 "
             r"order by id) to stdout with (format csv)")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    expected = [f"{i},{c},{d.isoformat()}" for i, c, d in direct_rows(
        pg, "select id, carrier, ship_date from fct_shipments where id <= 2500 order by id")]
    assert len(lines) == 2500
    assert lines == expected


def test_wrong_password_gets_the_postgres_message(pgwarden):
    r = psql(pgwarden.dsn(user="agent", password="not-the-password"), "-c", "select 1")
    assert r.returncode == 2
    assert 'FATAL:  password authentication failed for user "agent"' in r.stderr
    # An unknown user gets the very same words: nothing tells which part was wrong.
    r2 = psql(pgwarden.dsn(user="nobody", password="whatever"), "-c", "select 1")
    assert r2.returncode == 2
    assert 'FATAL:  password authentication failed for user "nobody"' in r2.stderr


def test_wrong_password_sqlstate_is_28P01(pgwarden):
    with pgwarden.raw() as c:
        try:
            c.login("agent", "not-the-password")
        except pgwtest.ServerError as e:
            assert e.fields["S"] == "FATAL"
            assert e.sqlstate == "28P01"
            assert e.message == 'password authentication failed for user "agent"'
            assert "D" not in e.fields and "H" not in e.fields  # no detail, no hint
        else:
            raise AssertionError("login with a wrong password succeeded")
        assert c.closed_by_peer()


def test_md5_user(pgwarden):
    r = psql(pgwarden.dsn(user="md5user"), "-At", "-c", "select 40 + 2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "42"
    r = psql(pgwarden.dsn(user="md5user", password="wrong"), "-c", "select 1")
    assert r.returncode == 2
    assert 'password authentication failed for user "md5user"' in r.stderr


def test_trust_user_over_unix_socket_only(pgwarden):
    r = psql(f"host={pgwarden.sockdir} port={pgwarden.port} dbname=analytics user=analyst",
             "-At", "-c", "select current_database()")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "analytics"
    # The same user over TCP is not let in without a password.
    r = psql(pgwarden.dsn(user="analyst", password="anything"), "-c", "select 1")
    assert r.returncode == 2
    assert "FATAL" in r.stderr


def test_cancel_long_query_with_sigint(pgwarden, pg):
    marker = f"cancel_me_{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        ["psql", "-X", "-d", pgwarden.dsn(), "-c", f"select pg_sleep(30) /* {marker} */"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=pgwtest.pg_env())
    try:
        running = pgwtest.wait_for(lambda: pg.scalar(
            "select count(*) from pg_stat_activity where state = 'active' and query like %s "
            "and pid <> pg_backend_pid()",
            (f"%{marker}%",)) == 1, timeout=10)
        assert running, "the query never started on the server"
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)  # psql sends a CancelRequest to pgwarden
        out, err = proc.communicate(timeout=15)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "canceling statement due to user request" in err
    assert elapsed < 8, f"cancel took {elapsed:.1f}s"
    assert pg.scalar("select count(*) from pg_stat_activity where state = 'active' "
                     "and query like %s and pid <> pg_backend_pid()", (f"%{marker}%",)) == 0


def test_client_gone_mid_query_cancels_the_server_query(pgwarden, pg):
    marker = f"orphan_{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        ["psql", "-X", "-d", pgwarden.dsn(), "-c", f"select pg_sleep(30) /* {marker} */"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=pgwtest.pg_env())
    active = ("select count(*) from pg_stat_activity where state = 'active' and query like %s "
              "and pid <> pg_backend_pid()")
    try:
        assert pgwtest.wait_for(lambda: pg.scalar(active, (f"%{marker}%",)) == 1, timeout=10)
    finally:
        proc.kill()
        proc.wait()
    assert pgwtest.wait_for(lambda: pg.scalar(active, (f"%{marker}%",)) == 0, timeout=8), \
        "the server kept running the query of a client that left"
    r = psql(pgwarden.dsn(), "-At", "-c", "select 'still serving'")
    assert r.stdout.strip() == "still serving"


def test_write_fails_in_the_read_only_server_session(pgwarden, pg):
    """Without any guard (user core), the server session itself refuses writes: 25006."""
    before = pg.execute("select id, note from scratch order by id")
    r = psql(pgwarden.dsn(), "-v", "VERBOSITY=verbose", "-c",
             "insert into scratch values (100, 'through pgwarden')")
    assert r.returncode != 0
    assert "ERROR:  25006: cannot execute INSERT in a read-only transaction" in r.stderr
    r = psql(pgwarden.dsn(), "-v", "VERBOSITY=verbose", "-c",
             "update scratch set note = 'changed'")
    assert "ERROR:  25006: cannot execute UPDATE in a read-only transaction" in r.stderr
    assert pg.execute("select id, note from scratch order by id") == before


def test_write_denied_by_the_read_only_guard_before_the_server(pgwarden, pg):
    """With the agents group's guards, the write is refused by pgwarden (42501, READ_ONLY) and
    never reaches the server."""
    before = pg.execute("select id, note from scratch order by id")
    offset = pg.log_offset()
    r = psql(pgwarden.dsn(user="agent"), "-v", "VERBOSITY=verbose", "-c",
             "insert into scratch values (101, 'never sent')")
    assert r.returncode != 0
    assert "ERROR:  42501: " in r.stderr
    assert '"code":"READ_ONLY"' in r.stderr
    assert "HINT:" in r.stderr
    assert "never sent" not in pg.log_since(offset)
    assert pg.execute("select id, note from scratch order by id") == before


def test_server_session_settings(pgwarden):
    """Every server connection runs read-only with the configured timeouts."""
    r = psql(pgwarden.dsn(), "-At", "-F", "|", "-c",
             "select current_setting('default_transaction_read_only'), "
             "current_setting('transaction_read_only'), current_setting('statement_timeout'), "
             "current_setting('lock_timeout'), "
             "current_setting('idle_in_transaction_session_timeout'), current_user")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "on|on|10s|3s|15s|pgwarden_reader"


def test_notice_passes_through(pgwarden):
    r = psql(pgwarden.dsn(), "-At", "-c", "select pgw_notice('hello from the server')")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"
    assert "NOTICE:  hello from the server" in r.stderr


def test_server_error_passes_through_and_session_continues(pgwarden):
    script = "select 1/0;\nselect 'after';\n"
    r = psql(pgwarden.dsn(), "-At", "-v", "ON_ERROR_STOP=0", "-v", "VERBOSITY=verbose",
             input=script)
    assert "ERROR:  22012: division by zero" in r.stderr
    assert r.stdout.strip() == "after"
