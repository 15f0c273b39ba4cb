"""Crash-safe history (history.durability: process, the default): the daemon is killed with
SIGKILL right after a burst of 5,000 statements, started again, and every statement of the burst
is in history exactly once, counted by a marker in its text. Once with a store that could take
nothing during the burst (SQLite held locked by another writer, PostgreSQL stopped), so every
record has to come from the spool; once with the writer running (SQLite, JSON lines), so the kill
finds records stored, stored but not yet marked consumed, and not stored. With durability: off
the same crash loses the records, which shows the test can tell."""

import collections
import json
import os
import pathlib
import resource
import secrets
import sqlite3
import urllib.request

import psycopg2
import pytest

import pgwtest

BURST = 5000
STORE_FILES = pgwtest.HISTORY_FILES


def start_daemon(factory, pg, store, dsn=None, **history):
    d = factory.start(pg, start=False)
    d.config["history"] = pgwtest.history_config(d, store, dsn, flush_interval="50ms", **history)
    d.write_config()
    d.start()
    return d


def burst_then_kill(d, marker):
    """Runs the burst on one connection and kills the daemon the moment the last answer is in,
    with the connection still open."""
    conn = d.connect(user="core")
    cur = conn.cursor()
    for i in range(BURST):
        cur.execute(f"SELECT '{marker}-{i}'")
        assert cur.fetchone() == (f"{marker}-{i}",)
    d.kill()
    conn.close()


def texts(d, dsn=None):
    store = d.config["history"]["store"]
    if store == "sqlite":
        db = sqlite3.connect(f"file:{d.dir / STORE_FILES[store]}?mode=ro", uri=True, timeout=5)
        try:
            return [r[0] for r in db.execute("SELECT sql_text FROM pgwarden_history")]
        except sqlite3.OperationalError:
            return []
        finally:
            db.close()
    if store == "jsonl":
        path = d.dir / STORE_FILES[store]
        if not path.exists():
            return []
        # A line still being written when we look is not a record yet.
        return [json.loads(line)["sql_text"] for line in path.read_text().split("\n")[:-1]]
    conn = psycopg2.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT sql_text FROM pgwarden_history")
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


def marked(d, marker, dsn=None):
    return collections.Counter(t for t in texts(d, dsn) if f"'{marker}-" in t)


def metric(d, name):
    body = urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=5).read()
    for line in body.decode().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def restart_and_check_exactly_once(d, marker, dsn=None):
    d.start()
    pgwtest.wait_for(lambda: sum(marked(d, marker, dsn).values()) >= BURST, timeout=60)
    recovered = metric(d, "pgwarden_history_records_recovered_total")
    assert d.stop(by_test=True) == 0, d.log()[-4000:]
    counts = marked(d, marker, dsn)
    assert len(counts) == BURST, f"{BURST - len(counts)} statements missing from history"
    duplicated = {t: n for t, n in counts.items() if n != 1}
    assert not duplicated, f"{len(duplicated)} statements stored more than once"
    return recovered


def test_sqlite_store_locked_during_the_burst(pgwarden_factory, pg):
    marker = "crash" + secrets.token_hex(4)
    d = start_daemon(pgwarden_factory, pg, "sqlite")
    lock = sqlite3.connect(str(d.dir / "history.db"), isolation_level=None, timeout=5)
    lock.execute("BEGIN EXCLUSIVE")  # another writer: the daemon's writer stores nothing
    try:
        burst_then_kill(d, marker)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert sum(marked(d, marker).values()) == 0
    recovered = restart_and_check_exactly_once(d, marker)
    assert recovered == BURST
    assert f"{BURST} records from before the last stop found in the spool" in d.log()


def test_with_durability_off_the_same_crash_loses_the_records(pgwarden_factory, pg):
    marker = "lost" + secrets.token_hex(4)
    d = start_daemon(pgwarden_factory, pg, "sqlite", durability="off")
    lock = sqlite3.connect(str(d.dir / "history.db"), isolation_level=None, timeout=5)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        burst_then_kill(d, marker)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    d.start()
    assert metric(d, "pgwarden_history_spool_size_bytes") == 0
    assert d.stop(by_test=True) == 0, d.log()[-4000:]
    assert sum(marked(d, marker).values()) == 0
    assert not (d.dir / "history.db.spool").exists()


@pytest.mark.parametrize("store", ["sqlite", "jsonl"])
def test_killed_while_the_writer_runs(pgwarden_factory, pg, store):
    marker = "run" + secrets.token_hex(4)
    d = start_daemon(pgwarden_factory, pg, store, batch_size=64)
    burst_then_kill(d, marker)
    before = sum(marked(d, marker).values())
    print(f"{store}: {before} of {BURST} stored before the kill")
    restart_and_check_exactly_once(d, marker)


def test_postgres_store_down_during_the_burst(pgwarden_factory, pg):
    marker = "pgdown" + secrets.token_hex(4)
    store = pgwtest.PgCluster(prefix="pgw-crash-store-")
    try:
        store.init()
        store.start()
        store.execute("CREATE DATABASE history", dbname="postgres")
        dsn = (f"host=127.0.0.1 port={store.port} dbname=history user=postgres "
               f"password={pgwtest.SUPERUSER_PASSWORD} connect_timeout=2")
        d = start_daemon(pgwarden_factory, pg, "postgres", dsn)
        assert pgwtest.wait_for(lambda: metric(d, "pgwarden_history_store_up") == 1)
        store.stop()
        burst_then_kill(d, marker)
        store.start()
        assert sum(marked(d, marker, dsn).values()) == 0
        assert restart_and_check_exactly_once(d, marker, dsn) == BURST
    finally:
        store.destroy()


def idle_threads(d):
    """Threads of the daemon in the background: SCHED_BATCH (3, the 41st field of a thread's
    stat) at nice 19 (the 19th)."""
    n = 0
    for stat in pathlib.Path(f"/proc/{d.proc.pid}/task").glob("*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a thread that just ended
        n += fields[41 - 3] == "3" and fields[19 - 3] == "19"
    return n


def threads_may_come_back_from_nice_19():
    """What the kernel lets the daemon's threads do after nice 19, worked out apart from it:
    CAP_SYS_NICE (CapEff bit 23) or an RLIMIT_NICE of at least 20 - nice."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:") and (int(line.split()[1], 16) >> 23) & 1:
            return True
    return resource.getrlimit(resource.RLIMIT_NICE)[0] >= 20 - os.getpriority(os.PRIO_PROCESS, 0)


def test_the_writer_waits_in_the_background_until_a_backlog_promotes_it(pgwarden_factory, pg):
    """history.writer_priority: background (the default). The writer thread is in SCHED_BATCH at nice
    19; with
    the store locked, a burst piles records up past an eighth of queue_size (50 of 400) and the
    loop puts it back under the normal policy; once the lock goes it drains everything and goes
    back. writer_priority: normal keeps it there throughout."""
    d = start_daemon(pgwarden_factory, pg, "sqlite", queue_size=400, batch_size=16)
    if not threads_may_come_back_from_nice_19():
        # The writer stays under the normal policy, and the log says why.
        pgwtest.wait_for(lambda: "the writer stays under the normal CPU policy" in d.log())
        assert metric(d, "pgwarden_history_writer_background") == 0
        assert idle_threads(d) == 0
        return
    pgwtest.wait_for(lambda: metric(d, "pgwarden_history_writer_background") == 1)
    assert idle_threads(d) == 1
    conn = d.connect(user="core")
    cur = conn.cursor()
    lock = sqlite3.connect(str(d.dir / STORE_FILES["sqlite"]), isolation_level=None, timeout=5)
    lock.execute("BEGIN EXCLUSIVE")
    for i in range(300):
        cur.execute(f"SELECT 'prio-{i}'")
    assert metric(d, "pgwarden_history_writer_promotions_total") == 1
    assert metric(d, "pgwarden_history_writer_background") == 0
    assert idle_threads(d) == 0
    lock.execute("ROLLBACK")
    lock.close()
    pgwtest.wait_for(lambda: sum(marked(d, "prio").values()) == 300, timeout=30)
    pgwtest.wait_for(lambda: metric(d, "pgwarden_history_writer_background") == 1)
    assert idle_threads(d) == 1
    assert set(marked(d, "prio").values()) == {1}
    assert metric(d, "pgwarden_history_records_dropped_total") == 0
    conn.close()
    assert d.stop(by_test=True) == 0, d.log()[-4000:]

    d.config["history"]["writer_priority"] = "normal"
    d.write_config()
    d.start()
    conn = d.connect(user="core")
    conn.cursor().execute("SELECT 1")
    conn.close()
    pgwtest.wait_for(lambda: metric(d, "pgwarden_history_records_written_total") == 1)
    assert metric(d, "pgwarden_history_writer_background") == 0
    assert idle_threads(d) == 0
