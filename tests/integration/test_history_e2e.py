"""Query history through the real daemon, proved by counting: a scripted mix of statements (allowed,
failed on the server, denied by guards, unparsable, cancelled, multi-statement, extended protocol,
pipelined, budget exhausted, client gone mid-statement) gives exactly one record per statement with
the right fields in each store (sqlite, jsonl, postgres); a PostgreSQL store that goes away
mid-run never holds up clients, gets its records when it is back, and counts what a full queue
drops; one down at start-up does not stop the proxy; a statement pgwarden itself cuts short is
`aborted`, not `client_gone`; `pgwarden report zeros` finds the single-zero answers the daemon
marked."""

import collections
import json
import re
import signal
import socket
import sqlite3
import struct
import subprocess
import time
import urllib.error
import urllib.request

import psycopg2
import psycopg2.extras
import pytest

import pgwtest

MAX_SQL = 128
HISTORY_ROLE = "pgw_history"
HISTORY_PASSWORD = "history-pw-e2e"
STORE_FILES = pgwtest.HISTORY_FILES
FIELDS = ("user_name", "policy_group", "agent_id", "conversation_id", "application_name",
          "protocol", "statement_kind", "sql_text", "sql_truncated", "outcome", "deny_code",
          "sqlstate", "rows_returned", "single_zero")


# --------------------------------------------------------------------------------------------
# daemon and store

@pytest.fixture(scope="module")
def history_db(pg):
    """A second database on the test PostgreSQL, with a role of its own, for the postgres store."""
    pg.execute(f"CREATE ROLE {HISTORY_ROLE} LOGIN PASSWORD '{HISTORY_PASSWORD}'", dbname="postgres")
    return pg


def pg_store_dsn(cluster, dbname):
    return (f"host=127.0.0.1 port={cluster.port} dbname={dbname} user={HISTORY_ROLE} "
            f"password={HISTORY_PASSWORD} connect_timeout=2")


def create_store_db(cluster, dbname):
    cluster.execute(f"CREATE DATABASE {dbname} OWNER {HISTORY_ROLE}", dbname="postgres")


def start_store_cluster(store):
    """Starts a test's own PostgreSQL for the history store, with the history role and its
    `history` database."""
    store.init()
    store.start()
    store.execute(f"CREATE ROLE {HISTORY_ROLE} LOGIN PASSWORD '{HISTORY_PASSWORD}'",
                  dbname="postgres")
    create_store_db(store, "history")


def start_daemon(factory, pg, store, dsn=None, groups=None, limits=None, **history):
    """A pgwarden with users agent (group agents), core (no guards) and budgeted (a budget of 2
    statements per conversation), recording into `store` (sqlite and jsonl: a file in the
    daemon's directory; postgres: `dsn`) with the given extra `history:` keys."""
    users = {"agent": "agents", "core": "passthrough", "budgeted": "counted"}
    passwords = {u: f"{u}-pw-e2e" for u in users}
    cfg_users = [{"name": u, "password": pgwtest.scram_verifier(passwords[u]), "group": g}
                 for u, g in users.items()]
    all_groups = {"passthrough": {"guards": []},
                  "counted": {"guards": [{"kind": "budget", "max_statements": 2},
                                         {"kind": "read_only"}]}}
    all_groups.update(groups or {})
    d = factory.start(pg, overrides={"groups": all_groups}, users=cfg_users, start=False)
    d.passwords.update(passwords)
    d.config["history"] = pgwtest.history_config(d, store, dsn, max_sql_bytes=MAX_SQL,
                                                 flush_interval="50ms", **history)
    d.config["limits"].update(limits or {})
    d.write_config()
    d.start()
    return d


def stop_daemon(d):
    code = d.stop(by_test=True)
    assert code == 0, d.log()[-4000:]
    m = re.findall(r"history: (\d+) records written, (\d+) dropped", d.log())
    assert m, d.log()[-4000:]
    return int(m[-1][0]), int(m[-1][1])


def _bool(v):
    return bool(v) if not isinstance(v, str) else v in ("t", "true", "1")


def read_records(d, dsn=None):
    store = d.config["history"]["store"]
    path = d.dir / STORE_FILES.get(store, "-")
    if store == "sqlite":
        conn = sqlite3.connect(str(path))
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute("SELECT * FROM pgwarden_history ORDER BY id")]
        conn.close()
    elif store == "jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    else:
        conn = psycopg2.connect(dsn)
        with conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute("SELECT * FROM pgwarden_history ORDER BY id")
            rows = [dict(r) for r in cur.fetchall()]
        conn.close()
    for r in rows:
        for k in ("sql_truncated", "single_zero", "result_truncated"):
            r[k] = _bool(r[k])
        for k in ("tables", "guard_actions"):
            if isinstance(r[k], str):
                r[k] = json.loads(r[k])
    return rows


def metric(d, name):
    body = urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=5).read()
    total = None
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total = (total or 0) + float(line.rsplit(" ", 1)[1])
    return total


# --------------------------------------------------------------------------------------------
# raw extended protocol (psycopg2 only speaks the simple one)

def parse_msg(name, sql):
    return b"P", name.encode() + b"\0" + sql.encode() + b"\0" + struct.pack("!H", 0)


def bind_msg(stmt, *params):
    body = b"\0" + stmt.encode() + b"\0" + struct.pack("!H", 0) + struct.pack("!H", len(params))
    for p in params:
        v = str(p).encode()
        body += struct.pack("!i", len(v)) + v
    return b"B", body + struct.pack("!H", 0)


def execute_msg(max_rows=0):
    return b"E", b"\0" + struct.pack("!I", max_rows)


def send_batch(raw, msgs):
    """Sends the messages in one write (a pipeline), then reads to ReadyForQuery; returns the
    CommandComplete tags, the data rows and the SQLSTATEs of the errors, in order."""
    data = b"".join(t + struct.pack("!I", len(b) + 4) + b for t, b in msgs)
    raw.send(data + b"S" + struct.pack("!I", 4))
    return read_to_ready(raw, 1)


def read_to_ready(raw, n_ready):
    tags, rows, errors = [], [], []
    while n_ready:
        tag, body = raw.read_msg()
        if tag == b"C":
            tags.append(body.rstrip(b"\0").decode())
        elif tag == b"D":
            rows.append(body)
        elif tag == b"E":
            errors.append(pgwtest.parse_fields(body)["C"])
        elif tag == b"Z":
            n_ready -= 1
    return tags, rows, errors


# --------------------------------------------------------------------------------------------
# the scripted mix

class Script:
    """What the test sent, as the records it must produce."""

    def __init__(self, conv):
        self.conv = conv
        self.expected = []

    def expect(self, session, sql, outcome="ok", rows=0, kind="select", zero=False, deny="",
               sqlstate="", protocol="simple", truncated=None):
        user, group, conv = session
        text = sql.strip()
        cut = len(text.encode()) > MAX_SQL
        self.expected.append({
            "user_name": user, "policy_group": group, "agent_id": "bot-7", "conversation_id": conv,
            "application_name": "history-e2e", "protocol": protocol, "statement_kind": kind,
            "sql_text": text.encode()[:MAX_SQL].decode() if cut else text,
            "sql_truncated": cut if truncated is None else truncated, "outcome": outcome,
            "deny_code": deny, "sqlstate": sqlstate, "rows_returned": rows, "single_zero": zero})


def run_mix(d, conv):
    s = Script(conv)
    ctx = lambda c: f"-c agent_id=bot-7 -c conversation_id={c}"  # noqa: E731
    agent = ("agent", "agents", conv)
    core = ("core", "passthrough", conv + "-core")
    budget = ("budgeted", "counted", conv + "-budget")
    kw = {"application_name": "history-e2e"}

    def denied(cur, sql):
        with pytest.raises(psycopg2.Error) as e:
            cur.execute(sql)
        return e.value.pgcode

    # -- the guarded group, simple protocol
    conn = d.connect(user="agent", options=ctx(agent[2]), **kw)
    cur = conn.cursor()
    for sql in ("SELECT count(*) FROM scratch WHERE id = 42",
                "select  COUNT(*)\n  from scratch where id=43 -- the same shape",
                "SELECT count(*) FROM scratch WHERE note = 'late'",
                "select count(*) from scratch where note='DELAYED'"):
        cur.execute(sql)
        assert cur.fetchall() == [(0,)]
        s.expect(agent, sql, rows=1, zero=True)
    cur.execute("SELECT id, note FROM scratch WHERE id = 1")
    assert cur.fetchall() == [(1, "seed")]
    s.expect(agent, "SELECT id, note FROM scratch WHERE id = 1", rows=1)
    cur.execute("SELECT count(*) FROM scratch")
    s.expect(agent, "SELECT count(*) FROM scratch", rows=1)  # 1: not a zero
    cur.execute("SELECT id FROM scratch WHERE id = 999")
    s.expect(agent, "SELECT id FROM scratch WHERE id = 999")  # an empty answer
    sql = "SELECT 1 / (id - 1) FROM scratch WHERE id = 1"
    assert denied(cur, sql) == "22012"
    s.expect(agent, sql, outcome="error", sqlstate="22012")
    sql = "DELETE FROM scratch WHERE id = 1"
    s.expect(agent, sql, outcome="denied", kind="delete", deny="READ_ONLY", sqlstate=denied(cur, sql))
    sql = "SELECT rolpassword FROM pg_catalog.pg_authid"
    s.expect(agent, sql, outcome="denied", deny="TABLE_DENIED", sqlstate=denied(cur, sql))
    code = denied(cur, "SELECT 1 AS a; SELECT 2 AS b")
    for part in ("SELECT 1 AS a", "SELECT 2 AS b"):  # a denied text counts as its statements
        s.expect(agent, part, outcome="denied", deny="MULTI_STATEMENT", sqlstate=code)
    sql = "SELEC id FROM scratch"
    assert denied(cur, sql) == "42601"
    # The server's parser refused it (pgwarden asked it): an error, in the server's words.
    s.expect(agent, sql, outcome="error", kind="", sqlstate="42601")
    sql = "SELECT id FROM scratch WHERE note <> '" + "x" * 300 + "' AND id = 1"
    cur.execute(sql)
    assert cur.fetchall() == [(1,)]
    s.expect(agent, sql, rows=1)
    conn.close()

    # -- no guards: multi-statement texts, a cancel, the budget
    conn = d.connect(user="core", options=ctx(core[2]), **kw)
    cur = conn.cursor()
    cur.execute("SELECT 5 AS a")
    s.expect(core, "SELECT 5 AS a", rows=1)
    cur.execute("SELECT 1 AS a; SELECT id, note FROM scratch WHERE id = 1; SELECT 0 AS z")
    s.expect(core, "SELECT 1 AS a", rows=1)
    s.expect(core, "SELECT id, note FROM scratch WHERE id = 1", rows=1)
    # A row's own 0 is not an aggregate's zero answer.
    s.expect(core, "SELECT 0 AS z", rows=1, zero=False)
    assert denied(cur, "SELECT 1 AS a; SELECT 1 / 0 AS b; SELECT 2 AS c") == "22012"
    s.expect(core, "SELECT 1 AS a", rows=1)
    s.expect(core, "SELECT 1 / 0 AS b", outcome="error", sqlstate="22012")
    s.expect(core, "SELECT 2 AS c", outcome="error", sqlstate="22012")  # never ran
    sleeper = pgwtest.Background(cur.execute, "SELECT pg_sleep(10) AS cancelled")
    time.sleep(0.5)
    conn.cancel()
    sleeper.join(10)
    assert isinstance(sleeper.error, psycopg2.errors.QueryCanceled), sleeper.error
    s.expect(core, "SELECT pg_sleep(10) AS cancelled", outcome="cancelled", sqlstate="57014")
    conn.close()

    conn = d.connect(user="budgeted", options=ctx(budget[2]), **kw)
    cur = conn.cursor()
    for n in (21, 22):
        cur.execute(f"SELECT {n} AS n")
        s.expect(budget, f"SELECT {n} AS n", rows=1)
    for n in (23, 24):
        assert denied(cur, f"SELECT {n} AS n") == "54000"
        s.expect(budget, f"SELECT {n} AS n", outcome="budget", deny="BUDGET_EXHAUSTED",
                 sqlstate="54000")
    conn.close()

    # -- raw protocol: extended, pipelined, and a client that goes away mid-statement
    startup = {"agent_id": "bot-7", "conversation_id": core[2], "application_name": "history-e2e"}
    with d.raw() as raw:
        raw.login("core", d.passwords["core"], extra=startup)
        sql = "SELECT id, note FROM scratch WHERE id = $1"
        tags, rows, errors = send_batch(raw, [parse_msg("s1", sql), bind_msg("s1", 1),
                                              execute_msg()])
        assert (tags, errors) == (["SELECT 1"], [])
        s.expect(core, sql, rows=1, protocol="extended")
        # One pipeline: Parse once, three Bind/Execute pairs, one Sync.
        sql = "SELECT sum($1::int) AS v"
        tags, rows, errors = send_batch(raw, [parse_msg("s2", sql),
                                              bind_msg("s2", 4), execute_msg(),
                                              bind_msg("s2", 0), execute_msg(),
                                              bind_msg("s2", 6), execute_msg()])
        assert (tags, errors) == (["SELECT 1"] * 3, [])
        for zero in (False, True, False):
            s.expect(core, sql, rows=1, zero=zero, protocol="extended")
        # A failing Execute in a pipeline: the Executes after it up to Sync never run.
        sql = "SELECT 10 / $1::int AS q"
        tags, rows, errors = send_batch(raw, [parse_msg("s3", sql),
                                              bind_msg("s3", 5), execute_msg(),
                                              bind_msg("s3", 0), execute_msg(),
                                              bind_msg("s3", 2), execute_msg()])
        assert (tags, errors) == (["SELECT 1"], ["22012"])
        s.expect(core, sql, rows=1, protocol="extended")
        s.expect(core, sql, outcome="error", sqlstate="22012", protocol="extended")
        s.expect(core, sql, outcome="error", sqlstate="22012", protocol="extended")
        # A portal suspended after one row, replaced by the next Bind before its answer came.
        sql = "SELECT generate_series(1, 3) AS g"
        tags, rows, errors = send_batch(raw, [parse_msg("s4", sql),
                                              bind_msg("s4"), execute_msg(max_rows=1),
                                              bind_msg("s4"), execute_msg()])
        assert (tags, len(rows), errors) == (["SELECT 3"], 4, [])
        s.expect(core, sql, rows=1, protocol="extended")
        s.expect(core, sql, rows=3, protocol="extended")
        # Three simple Queries written back to back before reading any answer.
        queries = [f"SELECT {n} AS p" for n in (11, 12, 13)]
        raw.send(b"".join(b"Q" + struct.pack("!I", len(q) + 5) + q.encode() + b"\0"
                          for q in queries))
        tags, rows, errors = read_to_ready(raw, 3)
        assert (tags, errors) == (["SELECT 1"] * 3, [])
        for q in queries:
            s.expect(core, q, rows=1)
        # A Parse the server refuses, answered before the client goes on (Flush): the Bind,
        # Execute and Query the client sends next, up to Sync, are skipped by the server, and
        # each statement they name is recorded as not executed.
        bad = "SELECT * FROM no_such_table"
        raw.send(b"".join(t + struct.pack("!I", len(b) + 4) + b
                          for t, b in [parse_msg("s5", bad), (b"H", b"")]))
        tag, body = raw.read_msg()
        assert tag == b"E" and pgtest_code(body) == "42P01"
        s.expect(core, bad, outcome="error", sqlstate="42P01", protocol="extended")
        later = "SELECT 14 AS p"
        tags, rows, errors = send_batch(raw, [bind_msg("s5"), execute_msg(),
                                              bind_msg("s1", 2), execute_msg(),
                                              (b"Q", later.encode() + b"\0")])
        assert (tags, errors) == ([], []), (tags, errors)
        s.expect(core, "SELECT id, note FROM scratch WHERE id = $1", outcome="error",
                 sqlstate="42P01", protocol="extended")
        s.expect(core, later, outcome="error", sqlstate="42P01")

    with d.raw() as raw:  # the guarded group refuses a Parse: one record, extended
        raw.login("agent", d.passwords["agent"], extra=dict(startup, conversation_id=agent[2]))
        sql = "DELETE FROM scratch WHERE id = $1"
        tags, rows, errors = send_batch(raw, [parse_msg("", sql), bind_msg("", 1), execute_msg()])
        assert tags == [] and len(errors) == 1, (tags, errors)
        s.expect(agent, sql, outcome="denied", kind="delete", deny="READ_ONLY", sqlstate=errors[0],
                 protocol="extended")
        # A pipeline with a denied statement in the middle (as psycopg 3's pipeline mode sends
        # it): the statements after the denial up to Sync never run, and each has its record.
        texts = ["SELECT 1 AS one", "SELECT $1::int AS two", "DELETE FROM scratch WHERE id = $1",
                 "SELECT 4 AS four", "SELECT 5 AS five"]
        msgs = []
        for t in texts:
            msgs += [parse_msg("", t), bind_msg("", 2) if "$1" in t else bind_msg(""),
                     execute_msg()]
        tags, rows, errors = send_batch(raw, msgs)
        assert tags == ["SELECT 1", "SELECT 1"] and len(errors) == 1, (tags, errors)
        s.expect(agent, texts[0], rows=1, protocol="extended")
        s.expect(agent, texts[1], rows=1, protocol="extended")
        s.expect(agent, texts[2], outcome="denied", kind="delete", deny="READ_ONLY",
                 sqlstate=errors[0], protocol="extended")
        for t in texts[3:]:
            s.expect(agent, t, outcome="error", sqlstate=errors[0], protocol="extended")

    raw = d.raw()
    raw.login("core", d.passwords["core"], extra=startup)
    sql = "SELECT pg_sleep(10) AS gone"
    raw.send(b"Q" + struct.pack("!I", len(sql) + 5) + sql.encode() + b"\0")
    time.sleep(0.5)
    raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raw.close()  # RST: the client is gone while the server sleeps
    s.expect(core, sql, outcome="client_gone")
    return s


def pgtest_code(body):
    return pgwtest.parse_fields(body)["C"]


def project(rec):
    return {k: rec[k] for k in FIELDS}


def assert_exactly(records, expected):
    got = collections.Counter(json.dumps(project(r), sort_keys=True) for r in records)
    want = collections.Counter(json.dumps(e, sort_keys=True) for e in expected)
    missing, extra = want - got, got - want
    assert not missing and not extra, (
        "records differ from the statements sent\nmissing:\n  " + "\n  ".join(missing.elements())
        + "\nunexpected:\n  " + "\n  ".join(extra.elements()))


def by_text(records, text, **where):
    out = [r for r in records if r["sql_text"] == text
           and all(r[k] == v for k, v in where.items())]
    assert out, text
    return out


# --------------------------------------------------------------------------------------------
# tests

@pytest.mark.parametrize("store", ["sqlite", "jsonl", "postgres"])
def test_every_statement_recorded_exactly_once(pgwarden_factory, pg, history_db, pgwarden_bin,
                                               store):
    dsn = None
    if store == "postgres":
        create_store_db(pg, "pgw_history_e2e")
        dsn = pg_store_dsn(pg, "pgw_history_e2e")
    d = start_daemon(pgwarden_factory, pg, store, dsn)

    script = run_mix(d, f"conv-{store}")
    expected = script.expected
    # The client that went away is recorded when the daemon notices; wait for that before SIGTERM.
    pgwtest.wait_for(lambda: metric(d, "pgwarden_statements_total") == len(expected), timeout=10)
    written, dropped = stop_daemon(d)  # SIGTERM flushes the queue
    records = read_records(d, dsn)
    assert (written, dropped) == (len(expected), 0)
    assert len(records) == len(expected)
    assert_exactly(records, expected)

    # Fields that are not a plain comparison.
    for r in records:
        assert r["finished_at"] >= r["started_at"] and r["duration_us"] >= 0
        assert r["instance_id"] and r["session_id"] > 0
    fp = lambda text, **w: {r["fingerprint"] for r in by_text(records, text, **w)}  # noqa: E731
    same = fp("SELECT count(*) FROM scratch WHERE id = 42")
    assert len(same) == 1 and "" not in same
    assert fp("select  COUNT(*)\n  from scratch where id=43 -- the same shape") == same
    late = fp("SELECT count(*) FROM scratch WHERE note = 'late'")
    assert fp("select count(*) from scratch where note='DELAYED'") == late != same
    assert fp("SELECT count(*) FROM scratch") not in (same, late)
    # A statement of a multi-statement text has the fingerprint of its own shape.
    assert fp("SELECT 1 AS a", user_name="core") == fp("SELECT 5 AS a")
    pair = fp("SELECT id, note FROM scratch WHERE id = 1")  # one alone, one in a longer text
    assert len(pair) == 1 and pair != fp("SELECT 5 AS a")
    assert fp("SELEC id FROM scratch") == {""}
    assert len(fp("SELECT sum($1::int) AS v")) == 1
    assert by_text(records, "SELECT count(*) FROM scratch WHERE id = 42")[0]["tables"] == ["scratch"]
    cancelled = by_text(records, "SELECT pg_sleep(10) AS cancelled")[0]
    assert cancelled["duration_us"] >= 300_000
    denial = by_text(records, "DELETE FROM scratch WHERE id = 1")[0]
    assert [a["code"] for a in denial["guard_actions"] if a["action"] == "deny"] == ["READ_ONLY"]
    assert denial["error_message"]
    sessions = {r["session_id"] for r in records}
    assert len(sessions) == 6


    # `pgwarden report zeros` on the same store: one row per (conversation, shape) of the
    # statements that succeeded with no rows or a single 0, as the script expects them.
    if store == "jsonl":
        return
    where = f"sqlite:{d.dir / STORE_FILES['sqlite']}" if store == "sqlite" else f"postgres:{dsn}"
    out = subprocess.run([str(pgwarden_bin), "report", "zeros", "--store", where, "--json"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["report"] == "zeros"
    want = collections.defaultdict(lambda: [0, 0, set()])
    for r in records:
        e = next(e for e in expected if project(r) == e)
        if e["outcome"] == "ok" and (e["single_zero"] or (e["rows_returned"] == 0
                                                          and e["statement_kind"] == "select")):
            w = want[(e["conversation_id"], r["fingerprint"])]
            w[0 if e["single_zero"] else 1] += 1
            w[2].add(e["sql_text"])
    got = {(row["conversation"], row["fingerprint"]):
           [row["zero_counts"], row["empty_results"], row["texts"]] for row in report["rows"]}
    assert got == {k: [z, e, len(t)] for k, (z, e, t) in want.items()}
    assert len(got) >= 3 and sum(z for z, _, _ in got.values()) >= 5


def test_redact_literals_stores_normalized_text(pgwarden_factory, pg):
    d = start_daemon(pgwarden_factory, pg, "sqlite", redact_literals=True)
    conn = d.connect(user="core")
    cur = conn.cursor()
    long_sql = "SELECT id FROM scratch WHERE note <> '" + "topsecret-4 " * 20 + "' AND id = 1"
    for sql in ("SELECT count(*) FROM scratch WHERE note = 'topsecret-1'",
                "SELECT 'topsecret-2' AS a; SELECT id FROM scratch WHERE id = 7", long_sql):
        cur.execute(sql)
    conn.close()
    conn = d.connect(user="agent")
    with pytest.raises(psycopg2.Error):
        conn.cursor().execute("SELEC 'topsecret-3'")
    conn.close()
    stop_daemon(d)
    records = read_records(d)
    texts = sorted((r["sql_text"], r["sql_truncated"]) for r in records)
    assert texts == sorted([("SELECT count(*) FROM scratch WHERE note = $1", False),
                            ("SELECT $1 AS a", False), ("SELECT id FROM scratch WHERE id = $1", False),
                            ("SELECT id FROM scratch WHERE note <> $1 AND id = $2", False),
                            ("/* redacted: statement did not parse */", False)])
    for r in records:
        assert "topsecret" not in r["sql_text"] + json.dumps(r["guard_actions"])
    # The fingerprint is the statement's, not the normalized text's or the whole text's.
    fps = {r["sql_text"]: r["fingerprint"] for r in records}
    assert fps["SELECT $1 AS a"] != fps["SELECT id FROM scratch WHERE id = $1"] != ""
    assert fps["SELECT count(*) FROM scratch WHERE note = $1"]


def test_postgres_store_down_mid_run(pgwarden_factory, pg):
    """The store goes away: clients are answered as before, records wait and arrive when it is
    back; with it away long enough for the queue to fill, drops are counted and logged."""
    store = pgwtest.PgCluster(prefix="pgw-hist-store-")
    try:
        start_store_cluster(store)
        dsn = pg_store_dsn(store, "history")
        queue = 20
        d = start_daemon(pgwarden_factory, pg, "postgres", dsn, queue_size=queue, batch_size=1)
        conn = d.connect(user="core")
        cur = conn.cursor()

        def run(n, tag):
            took = []
            for i in range(n):
                t0 = time.monotonic()
                cur.execute(f"SELECT {i} AS {tag}")
                assert cur.fetchall() == [(i,)]
                took.append(time.monotonic() - t0)
            return sorted(took)[len(took) // 2] * 1e3

        def stored():
            return store.scalar("SELECT count(*) FROM pgwarden_history", dbname="history")

        up_ms = run(5, "up")
        assert pgwtest.wait_for(lambda: stored() == 5)

        # Down for fewer statements than the queue holds: nothing is lost.
        store.stop()
        down_ms = run(queue - 5, "down")
        print(f"median statement latency: store up {up_ms:.2f} ms, store down {down_ms:.2f} ms")
        assert metric(d, "pgwarden_history_queue_depth") >= queue - 5
        assert metric(d, "pgwarden_history_records_dropped_total") == 0
        store.start()
        assert pgwtest.wait_for(lambda: stored() == queue, timeout=15), stored()
        assert metric(d, "pgwarden_history_records_dropped_total") == 0
        assert "the postgres store is writable again" in d.log()

        # Down for more than the queue holds: the overflow is dropped, counted and logged.
        store.stop()
        extra = 3 * queue
        run(extra, "over")
        dropped = metric(d, "pgwarden_history_records_dropped_total")
        # The queue holds `queue` records, the batch the writer retries included.
        assert dropped == extra - queue
        store.start()
        assert pgwtest.wait_for(lambda: metric(d, "pgwarden_history_queue_depth") == 0, timeout=15)
        conn.close()
        written, total_dropped = stop_daemon(d)
        assert total_dropped == dropped
        assert written == queue + extra - dropped == stored()
        logged = re.findall(r"history: (\d+) records dropped because the queue was full", d.log())
        assert sum(map(int, logged)) == dropped, d.log()[-3000:]
        texts = [r[0] for r in store.execute("SELECT sql_text FROM pgwarden_history ORDER BY id",
                                             dbname="history")]
        assert len(texts) == len(set(texts))  # each once
    finally:
        store.destroy()


def readyz(d):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/readyz", timeout=5).status
    except urllib.error.HTTPError as e:
        return e.code


def test_postgres_store_unreachable_at_start_does_not_stop_the_proxy(pgwarden_factory, pg):
    """A history database that is down at start-up is an outage to ride out, not a reason to keep
    the proxy down: pgwarden starts, says which store is down (without its password), answers
    statements, stays ready, and writes the queued records (creating the table) once the store
    comes up."""
    store = pgwtest.PgCluster(prefix="pgw-hist-late-")
    try:
        start_store_cluster(store)
        store.stop()
        d = start_daemon(pgwarden_factory, pg, "postgres", pg_store_dsn(store, "history"),
                         queue_size=100, batch_size=8)
        log = d.log()
        assert "the postgres store is unavailable at start-up" in log, log[-3000:]
        assert HISTORY_PASSWORD not in log
        assert metric(d, "pgwarden_history_store_up") == 0
        assert readyz(d) == 200  # the proxy serves; history alone does not make it unready

        conn = d.connect(user="core", options="-c conversation_id=c-late-store")
        cur = conn.cursor()
        n = 12
        for i in range(n):
            cur.execute(f"SELECT {i} AS while_store_down")
            assert cur.fetchall() == [(i,)]
        assert metric(d, "pgwarden_history_queue_depth") == n
        assert metric(d, "pgwarden_history_records_written_total") == 0

        store.start()
        assert pgwtest.wait_for(lambda: metric(d, "pgwarden_history_records_written_total") == n,
                                timeout=20), d.log()[-3000:]
        assert metric(d, "pgwarden_history_store_up") == 1
        assert metric(d, "pgwarden_history_records_dropped_total") == 0
        conn.close()
        written, dropped = stop_daemon(d)
        assert (written, dropped) == (n, 0)
        assert "the postgres store is writable again" in d.log()
        assert HISTORY_PASSWORD not in d.log()
        texts = [r[0] for r in store.execute(
            "SELECT sql_text FROM pgwarden_history WHERE conversation_id = 'c-late-store' "
            "ORDER BY id", dbname="history")]
        assert texts == [f"SELECT {i} AS while_store_down" for i in range(n)]
    finally:
        store.destroy()


@pytest.mark.parametrize("store,setting", [
    ("postgres", {"dsn": f"host=127.0.0.1 password={HISTORY_PASSWORD} port"}),
    ("sqlite", {"path": "/nonexistent-pgwarden-dir/history.db"}),
])
def test_history_store_that_can_never_work_stops_start_up(pgwarden_factory, pg, store, setting):
    """What no retry can fix (a connection string that does not parse, a sqlite file in a
    directory that does not exist) still stops start-up: the config check, the same as
    --check-config's, names the key and the reason before pgwarden listens."""
    with pytest.raises(RuntimeError) as e:
        start_daemon(pgwarden_factory, pg, store, **setting)
    if store == "postgres":
        assert "history.dsn: not a valid connection string" in str(e.value)
    else:
        assert ("history.path: cannot create /nonexistent-pgwarden-dir/history.db: the directory "
                "/nonexistent-pgwarden-dir does not exist") in str(e.value)
    assert HISTORY_PASSWORD not in str(e.value)


def test_statement_aborted_by_shutdown_timeout_is_recorded_as_aborted(pgwarden_factory, pg):
    """A statement still running when limits.shutdown_timeout expires is ended by pgwarden, not
    by its client: its record says `aborted` and why, never `client_gone`."""
    d = start_daemon(pgwarden_factory, pg, "sqlite", limits={"shutdown_timeout": "500ms"})
    with pgwtest.RawClient.tcp("127.0.0.1", d.port) as c:
        c.login("core", d.passwords["core"], extra={"options": "-c conversation_id=c-abort"})
        c.send_msg(b"Q", b"SELECT pg_sleep(30) AS cut_short\0")
        assert pgwtest.wait_for(lambda: pg.scalar(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE query = 'SELECT pg_sleep(30) AS cut_short'"))
        d.send_signal(signal.SIGTERM)
        tag, body = c.read_msg()  # the client is told why, before the connection closes
        fields = dict((f[:1], f[1:]) for f in body.split(b"\0") if f)
        assert (tag, fields[b"S"], fields[b"C"]) == (b"E", b"FATAL", b"57P01"), body
        assert b"shutdown_timeout" in fields[b"M"]
        with pytest.raises(EOFError):
            c.read_msg()
    assert d.wait_exit(15) == 0, d.log()[-3000:]
    written, dropped = stop_daemon(d)
    records = read_records(d)
    assert (written, dropped) == (len(records), 0) == (1, 0)
    r = records[0]
    assert (r["outcome"], r["sqlstate"], r["conversation_id"]) == ("aborted", "57P01", "c-abort")
    assert r["error_message"] == ("terminating connection: pgwarden is shutting down and the "
                                  "statement did not finish within limits.shutdown_timeout")
    assert pgwtest.wait_for(lambda: pg.scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30) AS cut_short' "
        "AND state = 'active'") == 0)


def test_backend_terminated_mid_statement_is_not_client_gone(pgwarden_factory, pg):
    """The server's backend terminated under a running statement (pg_terminate_backend): the
    record carries the server's SQLSTATE and words; the client, still connected, is told; the
    metrics count it under the same outcome."""
    d = start_daemon(pgwarden_factory, pg, "sqlite")
    conn = d.connect(user="core", options="-c conversation_id=c-terminated")
    cur = conn.cursor()
    job = pgwtest.Background(lambda: cur.execute("SELECT pg_sleep(30) AS terminated"))
    q = "SELECT pg_sleep(30) AS terminated"
    assert pgwtest.wait_for(lambda: pg.scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE query = %s AND state = 'active'", (q,)))
    assert pg.scalar("SELECT bool_and(pg_terminate_backend(pid)) FROM pg_stat_activity "
                     "WHERE query = %s", (q,), dbname="postgres")
    job.join(15)
    assert isinstance(job.error, psycopg2.Error), job.error
    conn.close()
    stop_daemon(d)
    records = read_records(d)
    assert len(records) == 1
    r = records[0]
    assert r["outcome"] != "client_gone"
    assert (r["outcome"], r["sqlstate"], r["conversation_id"]) == ("error", "57P01",
                                                                   "c-terminated")
    assert "administrator command" in r["error_message"]


def test_statement_running_at_sigterm_is_recorded_when_it_finishes(pgwarden_factory, pg):
    """SIGTERM lets running statements finish (within limits.shutdown_timeout) and writes their
    records before the process exits."""
    d = start_daemon(pgwarden_factory, pg, "sqlite")
    conn = d.connect(user="core", options="-c conversation_id=c-drain")
    cur = conn.cursor()
    cur.execute("SELECT 1 AS before")
    job = pgwtest.Background(lambda: (cur.execute("SELECT pg_sleep(1) AS draining"),
                                      cur.fetchall()))
    time.sleep(0.3)
    d.send_signal(signal.SIGTERM)
    job.join(15)
    assert job.error is None, job.error
    assert d.wait_exit(15) == 0, d.log()[-3000:]
    conn.close()
    written, dropped = stop_daemon(d)
    records = read_records(d)
    assert (written, dropped) == (len(records), 0) == (2, 0)
    last = by_text(records, "SELECT pg_sleep(1) AS draining")[0]
    assert (last["outcome"], last["rows_returned"], last["conversation_id"]) == ("ok", 1, "c-drain")
    assert last["duration_us"] >= 500_000
