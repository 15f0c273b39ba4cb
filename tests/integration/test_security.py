"""The security corpus through the real daemon. Every line of tests/security/bypass_corpus.tsv, sent
by a user of the example's `agents` group, is denied by pgwarden with its code and SQLSTATE, over
the simple protocol and over the extended protocol (Parse/Bind/Describe/Execute, with a read
queued behind it in the same batch that must be skipped up to Sync), and never reaches the server:
each statement carries a unique marker comment and the test server logs every statement
(log_statement=all), so a marker in the server log is a statement that got through. The only
exception is the cost gate's own EXPLAIN (FORMAT JSON) of a runaway join, which plans the statement
without running it. Every line of tests/security/allowed_reads.tsv passes both ways, and its marker
does appear in the server log, which shows the marker check can see what reaches the server."""

import json
import pathlib
import re
import secrets
import struct

import pytest

import pgwtest

SECURITY_DIR = pathlib.Path(__file__).resolve().parents[1] / "security"

# docs/denials.md: the SQLSTATE of each class of denial.
SQLSTATE = {
    "READ_ONLY": "42501", "PROTECTED_SETTING": "42501", "MULTI_STATEMENT": "42501",
    "FUNCTION_DENIED": "42501", "TABLE_DENIED": "42501",
    "MISSING_PREDICATE": "54000", "LIMIT_TOO_LARGE": "54000", "LIMIT_REQUIRED": "54000",
    "FUNCTION_LIMIT": "54000", "RECURSION_UNBOUNDED": "54000", "SEQ_SCAN": "54000",
    "COST_TOO_HIGH": "54000", "JOIN_EXPLOSION": "54000", "SYNTAX_ERROR": "42601",
    "PLAN_UNAVAILABLE": "58000",
}
# Codes the cost gate gives from a plan: the server saw the statement's EXPLAIN, never the statement.
PLAN_CODES = {"JOIN_EXPLOSION", "COST_TOO_HIGH", "SEQ_SCAN"}
# How pgwarden's EXPLAIN of a marked statement starts, in the server log.
EXPLAINED = "EXPLAIN (FORMAT JSON) /* "
MAX_ROWS = 1000  # packaging/pgwarden.yaml, agents: row_limit max_rows


def _unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            i += 1
            out.append({"t": "\t", "n": "\n"}.get(s[i], s[i]))
        else:
            out.append(s[i])
        i += 1
    return "".join(out)


def load(name):
    lines = []
    for number, text in enumerate((SECURITY_DIR / name).read_text().splitlines(), 1):
        if not text or text.startswith("#"):
            continue
        category, expect, sql = text.split("\t", 2)
        lines.append((f"{name}:{number}", category, expect, _unescape(sql)))
    return lines


CORPUS = load("bypass_corpus.tsv")
ALLOWED = load("allowed_reads.tsv")
RUN = secrets.token_hex(4)


def marker(kind, where):
    """A comment no other statement holds: pgwsec-<run>-<protocol>-<line>."""
    return f"pgwsec-{RUN}-{kind}-{where.split(':')[1]}"


def marked(kind, where, sql):
    return f"/* {marker(kind, where)} */ {sql}"


def denial_problem(fields, expect):
    """None when the ErrorResponse is pgwarden's denial with code `expect`, else what differs."""
    if fields is None:
        return "allowed"
    try:
        detail = json.loads(fields.get("D", ""))
    except ValueError:
        return f"not a pgwarden denial: {fields.get('C')} {fields.get('M')}"
    got = (fields.get("C"), detail.get("code"))
    if got != (SQLSTATE[expect], expect):
        return f"denied as {got}, expected {(SQLSTATE[expect], expect)}: {fields.get('M')}"
    if not fields.get("M") or "next_step" not in detail:
        return f"denial without a reason or next_step: {fields}"
    return None


def database_state(pg):
    """What a bypass could change: relations, functions, large objects, the scratch table and
    the sample table, and the settings a session could move."""
    return pg.execute("""
        SELECT (SELECT count(*) FROM pg_class WHERE relnamespace NOT IN
                    (SELECT oid FROM pg_namespace WHERE nspname IN ('pg_catalog', 'information_schema', 'pg_toast'))),
               (SELECT count(*) FROM pg_proc), (SELECT count(*) FROM pg_largeobject_metadata),
               (SELECT string_agg(id || ':' || note, ',' ORDER BY id) FROM scratch),
               (SELECT count(*) FROM fct_shipments),
               (SELECT count(*) FROM fct_shipments WHERE status = 'RETURNED'),
               (SELECT count(*) FROM pg_db_role_setting),
               (SELECT count(*) FROM pg_prepared_xacts)""")


@pytest.fixture(scope="module")
def agent(pgwarden):
    """A raw protocol session of the `agents` group, reused for a whole protocol pass."""
    def connect():
        c = pgwarden.raw()
        c.login("agent", pgwarden.passwords["agent"])
        return c
    return connect


def test_bypass_corpus_is_denied_by_pgwarden_over_both_protocols(agent, pg):
    assert len(CORPUS) >= 150
    before = database_state(pg)
    offset = pg.log_offset()
    problems = []

    with agent() as c:
        for where, category, expect, sql in CORPUS:
            try:
                c.query(marked("q", where, sql))
                fields = None
            except pgwtest.ServerError as e:
                fields = e.fields
            problem = denial_problem(fields, expect)
            if problem:
                problems.append(f"simple   {where} [{category}] {sql!r}: {problem}")
        # The session took every denial and still runs reads.
        assert c.query("SELECT 1")[0] == [("1",)]

    with agent() as c:
        for where, category, expect, sql in CORPUS:
            # The denied statement, then a read in the same batch: PostgreSQL's rule is that
            # after an error everything up to Sync is skipped, and pgwarden must keep it.
            c.send_extended(marked("x", where, sql))
            c.send_extended(f"SELECT 1 AS {marker('after', where).replace('-', '_')}")
            rows, tags, _, errors, _ = c.sync()
            problem = denial_problem(errors[0] if errors else None, expect)
            if problem is None and (len(errors) != 1 or rows or tags):
                problem = f"batch not skipped to Sync: errors={errors} rows={len(rows)} tags={tags}"
            if problem:
                problems.append(f"extended {where} [{category}] {sql!r}: {problem}")
        assert c.extended("SELECT 1")[0] == 1

    log = pg.log_since(offset)
    marks = rf"pgwsec[-_]{RUN}[-_](?:q|x|after)[-_]\d+"
    reached = sorted({m for m in re.findall(rf"(?<!{re.escape(EXPLAINED)}){marks}", log)})
    explained = {m for m in re.findall(rf"{re.escape(EXPLAINED)}({marks})", log)}
    planned = {marker(kind, where) for where, _, expect, _ in CORPUS if expect in PLAN_CODES
               for kind in ("q", "x")}
    assert not problems, f"{len(problems)} of {2 * len(CORPUS)} attempts:\n" + "\n".join(problems)
    assert not reached, f"statements that reached the server: {reached}"
    # The runaway joins were denied from their plans: EXPLAINed, and nothing else was.
    assert explained == planned, (sorted(planned - explained), sorted(explained - planned))
    assert database_state(pg) == before
    print(f"\n[security] {len(CORPUS)} bypass attempts denied over the simple and the extended "
          "protocol; none reached the server")


def test_allowed_reads_pass_over_both_protocols(agent, pg):
    assert len(ALLOWED) >= 40
    offset = pg.log_offset()
    problems = []
    with agent() as c:
        for where, category, expect, sql in ALLOWED:
            for kind in ("q", "x"):
                text = marked(kind, where, sql)
                try:
                    if kind == "q":
                        rows, tags, notices = c.query(text)
                        count = len(rows)
                    else:
                        count, tags, notices = c.extended(text)
                except pgwtest.ServerError as e:
                    problems.append(f"{kind} {where} [{category}] {sql!r}: denied "
                                    f"{e.sqlstate} {e.message} {e.fields.get('D')}")
                    continue
                truncated = [n for n in notices if '"ROWS_TRUNCATED"' in n.get("D", "")]
                if count > MAX_ROWS or (truncated and count != MAX_ROWS):
                    problems.append(f"{kind} {where}: {count} rows, truncation notices {truncated}")
                if tags and tags[-1].startswith("SELECT ") and tags[-1] != f"SELECT {count}":
                    problems.append(f"{kind} {where}: {count} rows but CommandComplete {tags[-1]}")
    assert not problems, "\n".join(problems)

    log = pg.log_since(offset)
    for where, _, expect, sql in ALLOWED:
        for kind in ("q", "x"):
            assert marker(kind, where) in log, f"{kind} {where} never reached the server"
        if expect == "ALLOW":
            # Forwarded unchanged: the server logged the exact text.
            assert f"statement: {marked('q', where, sql)}" in log, f"{where} was rewritten"
    print(f"\n[security] {len(ALLOWED)} ordinary reads allowed over both protocols")


def test_runaway_join_is_denied_from_its_plan_and_never_runs(agent, pg):
    """fct_shipments joined with itself (200,000 rows each, 40 billion pairs) under count(*), which
    needs no predicate, would hold a backend until statement_timeout. The example's cost gate plans
    it and denies it, naming the join and its estimated rows: the server saw its EXPLAIN and never
    ran it. One-table aggregates of the same table still pass."""
    tag = f"pgwsec-{RUN}-runaway"
    offset = pg.log_offset()
    with agent() as c:
        with pytest.raises(pgwtest.ServerError) as denied:
            c.query(f"/* {tag} */ SELECT count(*) FROM fct_shipments a, fct_shipments b")
        # Asked before the session sends anything else: what every server backend runs or ran last.
        # (The tag is passed in two pieces, so this query's own text in the log does not hold it.)
        activity = pg.execute("SELECT state, query FROM pg_stat_activity WHERE "
                              "strpos(query, %s || %s) > 0 AND pid <> pg_backend_pid()",
                              (tag[:6], tag[6:]))
        assert sorted(r[0] for r in c.query("SELECT DISTINCT status FROM fct_shipments")[0]) == [
            "DELAYED", "DELIVERED", "RETURNED"]
        assert c.query("SELECT count(*) FROM fct_shipments")[0] == [("200000",)]

    fields = denied.value.fields
    detail = json.loads(fields["D"])
    assert (fields["C"], detail["code"]) == ("54000", "JOIN_EXPLOSION"), fields
    assert detail["tables"] == ["public.fct_shipments a", "public.fct_shipments b"], detail
    assert detail["estimated_rows"] >= 10 ** 10 and detail["input_rows"] == 200000, detail
    message = fields["M"]
    assert "public.fct_shipments a and public.fct_shipments b" in message, message
    assert "join on a key" in message and "a LIMIT does not make the join smaller" in message

    lines = [line for line in pg.log_since(offset).splitlines() if tag in line]
    assert lines, "the cost gate never asked the server for the plan"
    assert all(EXPLAINED + tag in line for line in lines), lines
    assert activity and all(state != "active" and query.startswith("EXPLAIN (FORMAT JSON)")
                            for state, query in activity), activity


def test_denial_after_accepted_messages_arrives_on_flush(agent):
    """A client that pipelines an accepted Parse and a denied one and then sends Flush (as
    pipelining drivers do) gets the ParseComplete and the denial at once, as from PostgreSQL,
    which flushes after every error; only then does it send Sync."""
    with agent() as c:
        c.send_msg(b"P", b"ok\0SELECT 1\0\0\0")
        c.send_msg(b"P", b"bad\0DELETE FROM scratch\0\0\0")
        c.send_msg(b"H")
        c.sock.settimeout(5)
        got = [c.read_msg() for _ in range(2)]
        assert [t for t, _ in got] == [b"1", b"E"]
        assert '"code":"READ_ONLY"' in pgwtest.parse_fields(got[1][1])["D"]
        assert c.sync()[4] == [b"Z"]
        c.send_msg(b"B", b"\0ok\0" + struct.pack("!HHH", 0, 0, 0))
        c.send_msg(b"E", b"\0" + struct.pack("!i", 0))
        rows, tags, _, errors, _ = c.sync()
        assert (len(rows), tags, errors) == (1, ["SELECT 1"], [])
