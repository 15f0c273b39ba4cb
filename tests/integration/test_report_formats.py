"""`pgwarden report conversation ID` and `--format table|csv|json|html` on every report, read
from the store a real daemon wrote during a scripted agent session (literal guesses with
UNKNOWN_VALUE warnings, a denial, the right answer, markup in a literal and in the agent id)."""

import csv
import html
import io
import json
import subprocess

import pytest

from studiosupport import DENIED, GUESSES, RIGHT, SCRIPT, XSS_AGENT, XSS_LITERAL, recorded_daemon

CONV = "conv-report-formats"


@pytest.fixture(scope="module")
def recorded(pgwarden_bin, pg):
    yield from recorded_daemon(pgwarden_bin, pg, [(CONV, XSS_AGENT)], studio=False)


def test_report_conversation_in_every_format(recorded, pgwarden_bin):
    store = f"sqlite:{recorded.dir / 'history.db'}"

    def report(*args):
        r = subprocess.run([str(pgwarden_bin), "report", "conversation", CONV, "--store", store,
                            *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    rows = json.loads(report("--format", "json"))["rows"]
    texts = [r["sql_text"] for r in rows if r["sql_text"] in SCRIPT]
    assert texts == SCRIPT
    by_text = {r["sql_text"]: r for r in rows}
    for g in GUESSES[:4]:
        assert by_text[f"SELECT count(*) FROM studio_shipments WHERE status = '{g}'"][
            "warning_codes"] == "UNKNOWN_VALUE"
    assert by_text[DENIED]["outcome"] == "denied" and by_text[DENIED]["deny_code"] == "READ_ONLY"
    assert by_text[RIGHT]["warning_codes"] == "" and by_text[RIGHT]["outcome"] == "ok"
    # Where each ran: the server statements on the primary, the denial nowhere.
    assert by_text[RIGHT]["host"] == "primary" and by_text[DENIED]["host"] == ""
    assert [r["n"] for r in rows] == list(range(1, len(rows) + 1))
    table = report()
    assert "READ_ONLY" in table and table.rstrip().endswith("rows)")
    parsed = list(csv.DictReader(io.StringIO(report("--format", "csv"))))
    assert [r["sql_text"] for r in parsed if r["sql_text"] in SCRIPT] == SCRIPT
    page = report("--format", "html")
    assert page.startswith("<!DOCTYPE html>") and XSS_LITERAL not in page
    assert html.escape(XSS_LITERAL, quote=False) in page
    # Every report takes --format.
    for kind in ("retries", "repeats", "denials", "zeros"):
        r = subprocess.run([str(pgwarden_bin), "report", kind, "--store", store, "--format", "csv"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.splitlines()[0].count(",") >= 3, (kind, r.stderr)


def test_conversation_needs_its_id(pgwarden_bin, tmp_path):
    r = subprocess.run([str(pgwarden_bin), "report", "conversation", "--store",
                        f"sqlite:{tmp_path / 'h.db'}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "needs the conversation's ID" in r.stderr, r.stderr
