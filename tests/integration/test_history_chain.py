"""The tamper-evident history chain with the real daemon: statements from several connections on
two worker loops, then `pgwarden history verify` passes on the untouched store and fails, naming
the record, after one record's SQL is edited, one is deleted, one forged row is inserted, or two
rows trade places; on SQLite, PostgreSQL and JSON lines. A daemon killed with SIGKILL mid-load
and started again (its spool handed over again) still verifies."""

import json
import secrets
import shutil
import sqlite3
import subprocess
import threading

import psycopg2

import pgwtest

COLUMNS_BUT_ID = None  # filled from the SQLite table


def start_daemon(factory, pg, store, dsn=None, **history):
    d = factory.start(pg, start=False)
    d.config.setdefault("daemon", {})["workers"] = 2
    d.config["history"] = pgwtest.history_config(d, store, dsn, flush_interval="20ms", **history)
    d.write_config()
    d.start()
    return d


def history(d, *args):
    p = subprocess.run([d.binary, "history", *args, "--config", str(d.config_path)],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def load(d, marker, n, connections=4):
    """n statements spread over `connections` clients at once (so two worker loops hand the writer
    records out of order)."""
    def run(k):
        conn = d.connect(user="core")
        cur = conn.cursor()
        for i in range(k, n, connections):
            cur.execute(f"SELECT '{marker}-{i}'")
            cur.fetchone()
        conn.close()
    threads = [threading.Thread(target=run, args=(k,)) for k in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def sqlite_count(path, marker):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute("SELECT count(*) FROM pgwarden_history WHERE sql_text LIKE ?",
                          (f"%{marker}-%",)).fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def sqlite_exec(path, *statements):
    db = sqlite3.connect(str(path), isolation_level=None, timeout=5)
    try:
        for s in statements:
            db.execute(s)
    finally:
        db.close()


def swap_sql(columns, a, b, table="pgwarden_history", scratch="pgw_swap"):
    """Statements that trade every column but id between rows a and b."""
    sets = ", ".join(f"{c} = (SELECT {c} FROM {scratch} s WHERE s.id = {a + b} - {table}.id)"
                     for c in columns)
    return [f"CREATE TABLE {scratch} AS SELECT * FROM {table} WHERE id IN ({a}, {b})",
            f"UPDATE {table} SET {sets} WHERE id IN ({a}, {b})",
            f"DROP TABLE {scratch}"]


def test_sqlite_tampering_is_named(pgwarden_factory, pg):
    marker = "chain" + secrets.token_hex(4)
    d = start_daemon(pgwarden_factory, pg, "sqlite")
    load(d, marker, 200)
    path = d.dir / "history.db"
    assert pgwtest.wait_for(lambda: sqlite_count(path, marker) == 200)
    assert d.stop(by_test=True) == 0, d.log()[-4000:]
    rc, out = history(d, "verify")
    assert rc == 0, out
    assert "ok: " in out and "chain_seq 1.." in out, out
    pristine = d.dir / "pristine.db"
    shutil.copy(path, pristine)
    db = sqlite3.connect(str(path))
    columns = [r[1] for r in db.execute("PRAGMA table_info(pgwarden_history)") if r[1] != "id"]
    db.close()

    cases = [
        (["UPDATE pgwarden_history SET sql_text = 'SELECT 1' WHERE id = 50"],
         "edited: record id 50 "),
        (["DELETE FROM pgwarden_history WHERE id = 80"], "missing: record id 81 "),
        (["INSERT INTO pgwarden_history (started_at, finished_at, instance_id, sql_text, "
          "chain_seq, chain_key, chain_hash) SELECT started_at, finished_at, instance_id, "
          "'DROP TABLE orders', chain_seq, chain_key, chain_hash FROM pgwarden_history "
          "WHERE id = 120"], "inserted: record id 201 "),
        (swap_sql(columns, 30, 40), "reordered: record id 30 "),
    ]
    for statements, expected in cases:
        shutil.copy(pristine, path)
        sqlite_exec(path, *statements)
        rc, out = history(d, "verify")
        assert rc == 1 and expected in out, (statements[0], out)
    shutil.copy(pristine, path)
    assert history(d, "verify")[0] == 0


def test_sqlite_kill9_mid_load_then_spool_replay_verifies(pgwarden_factory, pg):
    marker = "kill" + secrets.token_hex(4)
    d = start_daemon(pgwarden_factory, pg, "sqlite", batch_size=64)
    load(d, marker, 3000)
    d.kill()
    d.start()
    path = d.dir / "history.db"
    assert pgwtest.wait_for(lambda: sqlite_count(path, marker) == 3000, timeout=60)
    load(d, marker + "b", 100)
    assert d.stop(by_test=True) == 0, d.log()[-4000:]
    assert sqlite_count(path, marker) == 3000
    rc, out = history(d, "verify")
    assert rc == 0, out
    assert "chain_seq 1..3100" in out, out


def test_jsonl_kill9_and_tampering(pgwarden_factory, pg):
    marker = "jsonl" + secrets.token_hex(4)
    d = start_daemon(pgwarden_factory, pg, "jsonl", batch_size=64)
    load(d, marker, 2000)
    d.kill()
    d.start()
    path = d.dir / "history.jsonl"

    def stored():
        return sum(1 for line in path.read_text().split("\n")[:-1] if f"'{marker}-" in line)
    assert pgwtest.wait_for(lambda: stored() == 2000, timeout=60)
    assert d.stop(by_test=True) == 0, d.log()[-4000:]
    rc, out = history(d, "verify")
    assert rc == 0, out
    lines = path.read_text().split("\n")[:-1]
    record = json.loads(lines[99])
    record["sql_text"] = "SELECT 1"
    edited = lines[:99] + [json.dumps(record)] + lines[100:]
    path.write_text("\n".join(edited) + "\n")
    rc, out = history(d, "verify")
    assert rc == 1 and "edited: line 100 " in out, out
    path.write_text("\n".join(lines[:10] + lines[11:]) + "\n")
    rc, out = history(d, "verify")
    assert rc == 1 and "missing: line 11 " in out, out
    path.write_text("\n".join(lines) + "\n")
    assert history(d, "verify")[0] == 0


def test_postgres_store_kill9_and_tampering(pgwarden_factory, pg):
    marker = "pgchain" + secrets.token_hex(4)
    store = pgwtest.PgCluster(prefix="pgw-chain-store-")
    try:
        store.init()
        store.start()
        store.execute("CREATE DATABASE history", dbname="postgres")
        dsn = (f"host=127.0.0.1 port={store.port} dbname=history user=postgres "
               f"password={pgwtest.SUPERUSER_PASSWORD} connect_timeout=2")
        d = start_daemon(pgwarden_factory, pg, "postgres", dsn, batch_size=64)
        load(d, marker, 2000)
        d.kill()
        d.start()

        def count():
            conn = psycopg2.connect(dsn)
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT count(*) FROM pgwarden_history WHERE sql_text LIKE %s",
                                (f"%{marker}-%",))
                    return cur.fetchone()[0]
            finally:
                conn.close()
        assert pgwtest.wait_for(lambda: count() == 2000, timeout=60)
        assert d.stop(by_test=True) == 0, d.log()[-4000:]
        rc, out = history(d, "verify")
        assert rc == 0, out
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT min(id) FROM pgwarden_history")
            first = cur.fetchone()[0]
            cur.execute("UPDATE pgwarden_history SET sql_text = 'SELECT 1' WHERE id = %s",
                        (first + 99,))
            rc, out = history(d, "verify")
            assert rc == 1 and f"edited: record id {first + 99} " in out, out
            cur.execute("DELETE FROM pgwarden_history WHERE id = %s", (first + 99,))
            rc, out = history(d, "verify")
            assert rc == 1 and f"missing: record id {first + 100} " in out, out
        conn.close()
    finally:
        store.destroy()
