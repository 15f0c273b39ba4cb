"""The result screens' indexed probe (docs/answers.md, screen_probe_timeout): an empty read of a
value the statistics cannot decide (an e-mail column with 2,000 values) is checked by one indexed
count on pgwarden's own connection, and its answer reaches the client before the statement's
CommandComplete, over the simple and the extended protocol. A probe that cannot answer in its
time (a table lock queued ahead of it) gives up: the reply goes on, and nothing is said."""

import re
import threading
import time
import urllib.request

import pytest

import answerscorpus as corpus

shop = pytest.fixture(scope="module", name="shop")(corpus.shop)

UNKNOWN = "SELECT count(*) FROM sq_users WHERE email = 'nobody@example.com' AND deleted_at IS NULL"
KNOWN = "SELECT count(*) FROM sq_users WHERE email = 'u8@example.com' AND deleted_at IS NULL"


def probes(daemon):
    """pgwarden_screen_probes_total by answer."""
    with urllib.request.urlopen(f"http://127.0.0.1:{daemon.metrics_port}/metrics", timeout=5) as r:
        body = r.read().decode()
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r'pgwarden_screen_probes_total\{answer="(\w+)"\} (\S+)', body)}


@pytest.mark.parametrize("extended", [False, True], ids=["simple", "extended"])
def test_probe_answer_comes_in_line(shop, extended):
    before = probes(shop)
    with shop.raw() as c:
        c.login("core", shop.passwords["core"])
        codes, hints, notices = corpus.ask(c, UNKNOWN, extended=extended)
        assert codes == ["UNKNOWN_VALUE"], notices
        detail = next(n["D"] for n in notices if "UNKNOWN_VALUE" in n.get("D", ""))
        assert '"source":"index_probe"' in detail, detail
        assert hints["UNKNOWN_VALUE"] == ("SELECT email FROM public.sq_users WHERE lower(email) = "
                                          "lower('nobody@example.com') LIMIT 5")
        # The address exists (a deleted user's): the probe says so, and nothing is flagged.
        codes, _, notices = corpus.ask(c, KNOWN, extended=extended)
        assert codes == [], notices
        # The same statement again is probed again: one probe per statement, not per text.
        codes, _, _ = corpus.ask(c, UNKNOWN, extended=extended)
        assert codes == ["UNKNOWN_VALUE"]
    after = probes(shop)
    assert after["absent"] - before.get("absent", 0) == 2, (before, after)
    assert after["present"] - before.get("present", 0) == 1, (before, after)


@pytest.mark.parametrize("extended", [False, True], ids=["simple", "extended"])
def test_a_rows_own_zero_or_null_asks_nothing(shop, extended):
    """A row whose one column holds 0 or NULL matched: no probe runs, nothing is said (a probe
    per lookup would cost every such statement a second query)."""
    before = probes(shop)
    with shop.raw() as c:
        c.login("core", shop.passwords["core"])
        for sql in ("SELECT id - 9 FROM sq_users WHERE email = 'u9@example.com' "
                    "AND deleted_at IS NULL",
                    "SELECT deleted_at FROM sq_users WHERE email = 'u9@example.com'"):
            codes, _, notices = corpus.ask(c, sql, extended=extended)
            assert codes == [], notices
    assert probes(shop) == before


def test_probe_that_cannot_answer_says_nothing(shop, pg):
    """The client's transaction holds sq_users; a LOCK ... ACCESS EXCLUSIVE waits behind it, and so
    does every other reader queued after it, the probe among them. The probe gives up at its
    budget (500ms): the statement's reply comes, with no warning."""
    before = probes(shop)
    locker = pg.connect()
    locker.autocommit = False
    waiter = threading.Thread(target=lambda: _lock(locker))
    with shop.raw() as c:
        c.login("core", shop.passwords["core"])
        c.query("BEGIN")
        c.query("SELECT count(*) FROM sq_users WHERE id = 1")  # the transaction holds the table
        waiter.start()
        watch = pg.connect()
        watch.autocommit = True
        with watch.cursor() as cur:
            for _ in range(500):
                cur.execute("SELECT count(*) FROM pg_locks WHERE relation = 'sq_users'::regclass "
                            "AND mode = 'AccessExclusiveLock' AND NOT granted")
                if cur.fetchone()[0] == 1:
                    break
                time.sleep(0.01)
            else:
                pytest.fail("the LOCK never queued")
        watch.close()
        started = time.monotonic()
        codes, _, notices = corpus.ask(c, UNKNOWN)
        waited = time.monotonic() - started
        c.query("ROLLBACK")
    waiter.join(timeout=30)
    locker.close()
    assert codes == [], notices
    after = probes(shop)
    assert after["unanswered"] - before.get("unanswered", 0) == 1, (before, after)
    # Without the budget the reply would wait on a lock its own transaction holds, forever.
    assert waited < 10, waited


def _lock(conn):
    with conn.cursor() as cur:
        cur.execute("SET lock_timeout = '60s'")
        cur.execute("LOCK TABLE sq_users IN ACCESS EXCLUSIVE MODE")
    conn.rollback()
