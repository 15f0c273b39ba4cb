"""Helpers of the history studio's tests: a daemon with the studio on, the scripted agent session
(the literal guesses that get UNKNOWN_VALUE warnings, a denial, the right answer) whose
conversation the pages must show, and plain HTTP requests to the metrics listener."""

import base64
import http.client
import time

import psycopg2

import pgwtest
from conftest import DaemonSet

TABLE = "studio_shipments"
# Attacker-influenced text: an agent id and a guessed literal that are markup.
XSS_AGENT = 'agent-"><img src=x onerror=alert(1)>'
XSS_LITERAL = "<script>alert(2)</script>"
GUESSES = ["late", "Late", "LATE", "overdue", XSS_LITERAL]
COUNT = "SELECT count(*) FROM studio_shipments WHERE status = '{}'"
DENIED = "DELETE FROM studio_shipments WHERE id = 1"
RIGHT = COUNT.format("DELAYED")
# The statements of the conversation, in order, as history records them.
SCRIPT = [COUNT.format(g) for g in GUESSES] + [DENIED, RIGHT]


def seed_table(pg):
    pg.execute(f"""
        DROP TABLE IF EXISTS {TABLE};
        CREATE TABLE {TABLE} (id bigint PRIMARY KEY, status text NOT NULL);
        INSERT INTO {TABLE}
          SELECT i, (ARRAY['DELIVERED', 'DELIVERED', 'DELAYED', 'RETURNED'])[1 + i % 4]
          FROM generate_series(1, 4000) AS i;
        GRANT SELECT ON {TABLE} TO {pgwtest.READER_ROLE};
        ANALYZE {TABLE};
    """)


def start_studio(daemons, pg, metrics=None, history=None, studio=True):
    """A daemon with the studio on (and `metrics` keys), its history flushed every 50ms."""
    overrides = {"metrics": dict({"studio": True}, **(metrics or {}))} if studio else None
    d = daemons.start(pg, overrides=overrides, start=False)
    d.config["history"] = dict({"flush_interval": "50ms"},
                               **(history or pgwtest.history_config(d, "sqlite")))
    d.write_config()
    d.start()
    return d


def run_script(d, conversation, agent=XSS_AGENT):
    """The agent's conversation over psycopg2, as user agent; the warnings each statement got."""
    conn = d.connect(user="agent")
    warnings = []
    try:
        cur = conn.cursor()
        cur.execute("SET pgwarden.agent_id = %s", (agent,))
        cur.execute("SET pgwarden.conversation_id = %s", (conversation,))
        for sql in SCRIPT:
            del conn.notices[:]
            try:
                cur.execute(sql)
                cur.fetchall()
            except psycopg2.Error as e:
                assert sql == DENIED, (sql, e)
                assert e.pgcode == "42501", e
            warnings.append([n for n in conn.notices if n.startswith("WARNING:")])
    finally:
        conn.close()
    return warnings


def wait_recorded(d, conversation, n=len(SCRIPT), timeout=20):
    """Waits until the SQLite history holds `n` statements of `conversation`."""
    rows = pgwtest.history_rows(d, "conversation_id = ? AND sql_text <> '' AND sql_text NOT LIKE 'SET %'",
                                (conversation,), want=n, timeout=timeout)
    assert len(rows) >= n, rows
    return rows


def request(d, method, path, auth=None, headers=None):
    """(status, headers, body text) of one request to the metrics listener."""
    conn = http.client.HTTPConnection("127.0.0.1", d.metrics_port, timeout=20)
    h = dict(headers or {})
    if auth:
        h["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    try:
        conn.request(method, path, headers=h)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def wait_page(d, path, text, auth=None, timeout=20):
    """The body of `path` once it holds `text` (history reaches the store in batches)."""
    deadline = time.monotonic() + timeout
    while True:
        status, _, body = request(d, "GET", path, auth=auth)
        if status == 200 and text in body:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"{path}: {status} without {text!r}:\n{body[:3000]}")
        time.sleep(0.2)


def recorded_daemon(pgwarden_bin, pg, conversations, studio=True):
    """For a module fixture: yields a daemon (the studio on or off) whose SQLite history holds the
    scripted session once per (conversation, agent) of `conversations`; tears it down after."""
    seed_table(pg)
    daemons = DaemonSet(pgwarden_bin)
    try:
        d = start_studio(daemons, pg, studio=studio)
        for conversation, agent in conversations:
            run_script(d, conversation, agent)
        for conversation, _ in conversations:
            wait_recorded(d, conversation)
        yield d
    finally:
        daemons.teardown()
