"""The history studio over HTTP after a scripted agent session (literal guesses with
UNKNOWN_VALUE warnings, a denial, the right answer): the pages list and lay out the conversation
with every attacker-written value escaped; the studio is off unless configured, behind the
metrics credentials when they are set, answers GET and HEAD only and serves nothing but its own
pages; it reads a PostgreSQL store as well as SQLite."""

import html
import json

import pytest

import pgwtest
from studiosupport import (GUESSES, SCRIPT, XSS_AGENT, recorded_daemon, request, run_script,
                           seed_table, start_studio, wait_page)

CONV = "conv-studio-http"


@pytest.fixture(scope="module")
def studio(pgwarden_bin, pg):
    yield from recorded_daemon(pgwarden_bin, pg, [(CONV, XSS_AGENT)])


def test_each_guess_was_warned_and_the_answer_not(studio):
    warnings = run_script(studio, CONV + "-check")
    assert all("UNKNOWN_VALUE" in "".join(w) for w in warnings[:len(GUESSES)]), warnings
    assert warnings[-1] == [], warnings


def test_conversations_page_lists_the_conversation_escaped(studio):
    body = wait_page(studio, "/studio/", CONV)
    assert html.escape(XSS_AGENT, quote=True).replace("&#x27;", "&#39;") in body
    assert "<img src=x" not in body and "onerror=alert(1)>" not in body
    assert f'href="/studio/conversation?id={CONV}&amp;since=24h"' in body
    # Filters: by agent (the hostile one, encoded in the query), by code, by user.
    from urllib.parse import quote
    assert CONV in wait_page(studio, "/studio/?agent=" + quote(XSS_AGENT), CONV)
    assert CONV in wait_page(studio, "/studio/?code=UNKNOWN_VALUE", CONV)
    assert CONV in wait_page(studio, "/studio/?code=READ_ONLY", CONV)
    status, _, other = request(studio, "GET", "/studio/?user=nobody")
    assert status == 200 and CONV not in other


def test_timeline_has_the_statements_in_order_with_warnings_and_denial(studio):
    body = wait_page(studio, f"/studio/conversation?id={CONV}", "UNKNOWN_VALUE")
    at = 0
    for sql in SCRIPT:
        shown = html.escape(sql, quote=True).replace("&#x27;", "&#39;")
        found = body.find(shown, at)
        assert found > at, (sql, body[:4000])
        at = found
    assert "<script>alert(2)" not in body
    assert body.count("UNKNOWN_VALUE</b>") >= len(GUESSES)
    assert "READ_ONLY" in body
    # The only script is the studio's own, and its policy forbids any other.
    assert body.count("<script") == 1
    status, headers, _ = request(studio, "GET", f"/studio/conversation?id={CONV}")
    assert "script-src 'self'" in headers["Content-Security-Policy"]


def test_reports_are_pages_with_charts_and_links(studio):
    retries = wait_page(studio, "/studio/retries", CONV)
    assert "<svg" in retries and f"/studio/conversation?id={CONV}" in retries
    for page, text in (("repeats", "<svg"), ("denials", "READ_ONLY"), ("zeros", "studio_shipments")):
        body = wait_page(studio, f"/studio/{page}", text)
        assert "<svg" in body, page


def test_live_figures(studio):
    conn = studio.connect()
    try:
        status, headers, body = request(studio, "GET", "/studio/api/live")
        assert status == 200 and headers["Content-Type"] == "application/json"
        live = json.loads(body)
        assert live["sessions"] >= 1
        assert live["statements"] >= len(SCRIPT)
    finally:
        conn.close()


def test_only_get_and_head_and_only_its_own_pages(studio):
    status, headers, body = request(studio, "HEAD", "/studio/")
    assert status == 200 and body == "" and int(headers["Content-Length"]) > 0
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        status, headers, _ = request(studio, method, "/studio/")
        assert status == 405 and headers["Allow"] == "GET, HEAD", method
    for path in ("/studio/nothing", "/studio/../metrics", "/studio/api", "/studio.css",
                 "/index.html", "/studio/conversation/x", "/"):
        status, _, _ = request(studio, "GET", path)
        assert status == 404, path
    status, headers, _ = request(studio, "GET", "/studio")
    assert status == 301 and headers["Location"] == "/studio/"
    status, headers, css = request(studio, "GET", "/studio/studio.css")
    assert status == 200 and headers["Content-Type"].startswith("text/css") and "@media" in css
    status, _, body = request(studio, "GET", "/studio/?since=forever")
    assert status == 400 and "since" in body


def test_off_unless_configured(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg)
    status, _, _ = request(d, "GET", "/studio/")
    assert status == 404
    assert request(d, "GET", "/metrics")[0] == 200


def test_behind_the_metrics_credentials(pgwarden_factory, pg, tmp_path):
    secret = tmp_path / "basic"
    secret.write_text("ops:s3cret-studio\n")
    secret.chmod(0o600)
    d = start_studio(pgwarden_factory, pg, metrics={"basic_auth_file": str(secret)})
    for path in ("/studio/", "/studio/retries", "/studio/studio.css", "/studio/api/live",
                 "/studio/conversation?id=x"):
        status, headers, _ = request(d, "GET", path)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic"), path
        assert request(d, "GET", path, auth="ops:wrong")[0] == 401, path
        assert request(d, "GET", path, auth="ops:s3cret-studio")[0] == 200, path
    assert request(d, "GET", "/healthz")[0] == 200


def test_reads_a_postgresql_store(pgwarden_factory, pg):
    seed_table(pg)
    pg.execute("DROP DATABASE IF EXISTS studio_history", dbname="postgres")
    pg.execute("CREATE DATABASE studio_history", dbname="postgres")
    dsn = (f"host=127.0.0.1 port={pg.port} dbname=studio_history user=postgres "
           f"password={pgwtest.SUPERUSER_PASSWORD} connect_timeout=5")
    d = pgwarden_factory.start(pg, start=False)
    d.config["metrics"]["studio"] = True
    d.config["history"] = pgwtest.history_config(d, "postgres", dsn, flush_interval="50ms")
    d.write_config()
    d.start()
    run_script(d, "conv-studio-pg")
    body = wait_page(d, "/studio/", "conv-studio-pg")
    assert "<img src=x" not in body
    timeline = wait_page(d, "/studio/conversation?id=conv-studio-pg", "READ_ONLY")
    assert timeline.count("UNKNOWN_VALUE</b>") >= len(GUESSES)
    for page in ("retries", "repeats", "denials", "zeros"):
        status, _, text = request(d, "GET", f"/studio/{page}")
        assert status == 200 and "<svg" in text, (page, text[:2000])
