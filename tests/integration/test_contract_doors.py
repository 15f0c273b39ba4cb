"""The cross-door contract: a statement sent through the wire protocol and the same statement sent
through the MCP endpoint get the same judgement and the same execution after it. For each case of
a table (allowed, rewritten by the row cap, denied, warned, screened to deny, truncated, a server
error, a syntax error, a text whose later statements never ran, a guarded write, a write past its
cap, a read inside the open write transaction; and one silent failure of each class of
docs/answers.md's corpus, from the statement alone or the catalog) both doors must leave history records that agree
field for field (all but those that name the door: protocol, application_name, tool, the
session and the timing) and outcomes that agree (rows, or the SQLSTATE; the warnings' codes;
whether the result was cut; each warning's code, detail and hint). A door's own row cap reaches the SQL the server runs."""

import hashlib
import json
import re
import secrets

import pytest

import answerscorpus
import pgwtest
from conftest import module_daemon
import writesupport
from mcpsupport import McpHttp, history, start_mcp_daemon

WRITER_ROLE = "pgw_contract_writer"  # not another module's: each drops and makes its own
WRITER_PASSWORD = "writer-" + secrets.token_hex(8)
ITEMS = 20

# Fields that say which door a statement came through, or when: everything else must agree.
DOOR_FIELDS = {"id", "started_at", "finished_at", "duration_us", "session_id", "protocol",
               "application_name", "tool_name", "tool_args", "client_addr", "agent_id",
               "conversation_id", "bytes_sent", "instance_id", "record_uid", "chain_seq",
               "chain_key", "chain_hash",
               # the request that carried the statement: a JSON-RPC id and trace context exist
               # only on the MCP door
               "request_id", "traceparent"}

# (name, sql) of the read group's cases; the outcome of each must agree between the doors.
READ_CASES = [
    ("allowed", "SELECT id, status FROM c_items WHERE id = 1 LIMIT 1"),
    ("rewritten", "SELECT id FROM c_items WHERE id <= 3 ORDER BY id"),
    ("truncated", "SELECT id FROM c_items ORDER BY id"),
    ("denied", "DELETE FROM c_items WHERE id = 1"),
    ("warned", "SELECT count(*) FROM c_watch"),
    ("screened_to_deny", "SELECT count(*) FROM c_items WHERE status = 'late'"),
    ("server_error", "SELECT id / (id - id) FROM c_items WHERE id = 1"),
    ("syntax_error", "SELEC id FROM c_items"),
    ("not_executed", "SELECT 1 AS a; SELECT id / (id - id) FROM c_items WHERE id = 2; SELECT 3 AS c"),
    # The screens' indexed probe (UNKNOWN_VALUE, denied by the group): its answer comes before
    # the statement's end on either door.
    ("probed_unknown", "SELECT count(*) FROM sq_users WHERE email = 'nobody@example.com'"),
]

# The answers corpus's classes whose screens speak from the statement or the catalog: the first
# silent failure of each, by its class, with the code it must get (on the corpus's shop schema).
ANSWER_CLASSES = ("null_comparison", "not_in_null", "not_in_subquery", "outer_join_count",
                  "left_join_filtered", "integer_division", "distinct_measure", "fanout",
                  "foreign_key_mismatch", "timestamp_date_bound", "relative_range", "soft_delete",
                  "unknown_pattern", "conditions_exclude", "assertion", "declared_soft_delete")
ANSWER_CASES = [next((c.cls, c.sql, c.code) for c in answerscorpus.SILENT if c.cls == cls and c.flagged)
                for cls in ANSWER_CLASSES]
READ_CASES += [(cls, sql) for cls, sql, _ in ANSWER_CASES]


def _start(factory, pg):
    passwords = {"contractor": "c-" + secrets.token_hex(6), "cwriter": "w-" + secrets.token_hex(6)}
    mcp_tokens = {u: "pgw_" + secrets.token_urlsafe(32) for u in passwords}

    def configure(cfg):
        cfg["upstream"].update(write_user=WRITER_ROLE, write_password=WRITER_PASSWORD)
        cfg["groups"]["contract"] = {
            "search_path": ["public"],
            "result_screens": {"UNKNOWN_VALUE": "deny"},
            "guards": [{"kind": "read_only"},
                       {"kind": "tables", "deny": ["public.c_watch"], "action": "warn"},
                       {"kind": "row_limit", "max_rows": 5}],
            **answerscorpus.DECLARATIONS}
        cfg["groups"]["cwriters"] = {
            "mode": "guarded_writes", "search_path": ["public"],
            "max_rows_affected": {"statement": 100, "transaction": 150},
            "transaction_idle_timeout": "1m", "transaction_max_age": "5m",
            "guards": [{"kind": "functions"}]}
        for user, group in (("contractor", "contract"), ("cwriter", "cwriters")):
            cfg["users"].append({"name": user, "password": pgwtest.scram_verifier(passwords[user]),
                                 "group": group})
            cfg["mcp"]["tokens"].append({"user": user,
                                         "sha256": hashlib.sha256(mcp_tokens[user].encode()).hexdigest()})

    daemon, tokens = start_mcp_daemon(factory, pg, configure=configure)
    tokens.update(mcp_tokens)
    daemon.passwords.update(passwords)
    return daemon, tokens


@pytest.fixture(scope="module")
def doors(pgwarden_bin, pg):
    writesupport.create_write_role(pg, WRITER_ROLE, WRITER_PASSWORD)
    writesupport.reset_table(pg, WRITER_ROLE)
    pg.execute("DROP TABLE IF EXISTS c_items, c_watch")
    # status's values come from its CHECK list: UNKNOWN_VALUE knows 'late' is none of them.
    pg.execute("CREATE TABLE c_items (id int PRIMARY KEY, status text NOT NULL "
               "CHECK (status IN ('DELIVERED', 'DELAYED', 'RETURNED')))")
    pg.execute(f"INSERT INTO c_items SELECT g, (ARRAY['DELIVERED','DELAYED','RETURNED'])[g % 3 + 1] "
               f"FROM generate_series(1, {ITEMS}) g")
    pg.execute("CREATE TABLE c_watch (id int)")
    pg.execute(f"GRANT SELECT ON c_items, c_watch TO {pgwtest.READER_ROLE}")
    pg.execute("ANALYZE c_items")
    pg.execute(answerscorpus.SCHEMA)
    yield from module_daemon(pgwarden_bin, lambda daemons: _start(daemons, pg))
    pg.execute(f"DROP TABLE IF EXISTS c_items, c_watch, w_items, {answerscorpus.TABLES}")


def _warnings(notices):
    """(code, detail, hint) of WARNING notices, the code their DETAIL's "code"."""
    out = []
    for n in notices:
        if n.get("S") != "WARNING":
            continue
        try:
            code = json.loads(n.get("D", "{}")).get("code")
        except ValueError:
            code = n.get("C")
        out.append((code, n.get("D", ""), n.get("H", "")))
    return out


def wire_outcome(raw, sql):
    try:
        rows, _, notices = raw.query(sql)
    except pgwtest.ServerError as e:
        return {"sqlstate": e.sqlstate}
    return _outcome(rows, _warnings(notices))


def _outcome(rows, warnings):
    return {"rows": [[None if v is None else str(v) for v in r] for r in rows],
            "warnings": sorted(w for w in warnings if w[0] != "ROWS_TRUNCATED"),
            "truncated": any(w[0] == "ROWS_TRUNCATED" for w in warnings)}


def mcp_outcome(result):
    s = result["structuredContent"]
    if result["isError"]:
        return {"sqlstate": s.get("sqlstate")}
    out = _outcome(s["rows"], [(w["code"], w.get("detail", ""), w.get("hint", ""))
                               for w in s.get("warnings", [])])
    out["truncated"] = s["truncated"]
    return out


def wire_session(daemon, user):
    raw = daemon.raw()
    raw.login(user, daemon.passwords[user])
    return raw


def records(daemon, user, protocol_sql, count):
    return history(daemon, f"user_name = '{user}' AND {protocol_sql}", count)


def assert_records_agree(wire, mcp):
    assert len(wire) == len(mcp), ([r["sql_text"] for r in wire], [r["sql_text"] for r in mcp])
    for w, m in zip(wire, mcp):
        differ = {k: (w[k], m.get(k)) for k in w if k not in DOOR_FIELDS and w[k] != m.get(k)}
        assert not differ, (w["sql_text"], differ)


def test_reads_agree_across_doors(doors):
    daemon, tokens = doors
    raw = wire_session(daemon, "contractor")
    c = McpHttp(daemon.mcp_port, tokens["contractor"])
    c.initialize(client="contract")
    mismatched = {}
    for name, sql in READ_CASES:
        wire = wire_outcome(raw, sql)
        mcp = mcp_outcome(c.tool("query", {"sql": sql}))
        if wire != mcp:
            mismatched[name] = {"wire": wire, "mcp": mcp}
    raw.close()
    assert not mismatched, mismatched
    statements = sum(sql.count(";") + 1 for _, sql in READ_CASES)
    wire = records(daemon, "contractor", "protocol <> 'mcp'", statements)
    mcp = records(daemon, "contractor", "protocol = 'mcp'", statements)
    assert_records_agree(wire, mcp)


def test_cases_cover_what_they_name(doors):
    """Each case really is what its name says (on the wire): the table tests what it claims."""
    daemon, _ = doors
    raw = wire_session(daemon, "contractor")
    out = {name: wire_outcome(raw, sql) for name, sql in READ_CASES}
    raw.close()
    assert out["rewritten"]["rows"] == [["1"], ["2"], ["3"]] and not out["rewritten"]["truncated"]
    assert len(out["truncated"]["rows"]) == 5 and out["truncated"]["truncated"]
    assert out["denied"]["sqlstate"] == "42501"
    assert out["warned"]["warnings"], out["warned"]
    for cls, _, code in ANSWER_CASES:
        if code == "UNKNOWN_VALUE":  # the group sets it to deny
            assert out[cls].get("sqlstate") == "42501", (cls, out[cls])
            continue
        assert code in [w[0] for w in out[cls].get("warnings", [])], (cls, out[cls])
    assert "sqlstate" in out["screened_to_deny"], out["screened_to_deny"]
    assert out["probed_unknown"].get("sqlstate") == "42501", out["probed_unknown"]
    assert out["server_error"]["sqlstate"] == "22012"
    assert out["syntax_error"]["sqlstate"] == "42601"
    assert out["not_executed"]["sqlstate"] == "22012"
    last = history(daemon, "user_name = 'contractor' AND sql_text = 'SELECT 3 AS c'", 1)[-1]
    assert last["error_message"].startswith("not executed:"), last


def test_mcp_row_cap_reaches_the_sql(doors, pg):
    """max_rows of a query call in a group with no row_limit guard: the server stops at n + 1."""
    daemon, tokens = doors
    c = McpHttp(daemon.mcp_port, tokens["core"])
    c.initialize(client="capper")
    marker = "cap_" + secrets.token_hex(4)
    offset = pg.log_offset()
    r = c.tool("query", {"sql": f"SELECT id AS {marker} FROM c_items ORDER BY id", "max_rows": 5})
    s = r["structuredContent"]
    assert r["isError"] is False and s["row_count"] == 5 and s["truncated"] is True, s
    log = pg.log_since(offset)
    at = log.find(marker)
    assert at >= 0, log
    # The statement as the server logged it (the LIMIT is on a line of its own).
    assert re.search(r"\n\s*LIMIT 6\n", log[at:at + 200]), log[at:at + 200]


def _write_steps(run):
    """The guarded-write script through one door: `run(kind, sql)` with kind begin, sql, commit
    or rollback. Returns each step's outcome."""
    return [
        run("begin", "BEGIN"),
        run("sql", "SELECT id, qty FROM w_items WHERE grp = 7 ORDER BY id"),
        run("sql", "UPDATE w_items SET qty = 5 WHERE grp = 7"),
        run("sql", "UPDATE w_items SET qty = 6 WHERE id > 0"),
        run("read", "SELECT id, qty FROM w_items WHERE grp = 7 ORDER BY id"),
        run("rollback", "ROLLBACK"),
    ]


def test_writes_agree_across_doors(doors, pg):
    daemon, tokens = doors
    writesupport.reset_table(pg, WRITER_ROLE)
    raw = wire_session(daemon, "cwriter")
    wire = _write_steps(lambda kind, sql: wire_outcome(raw, sql))
    raw.close()
    writesupport.reset_table(pg, WRITER_ROLE)
    c = McpHttp(daemon.mcp_port, tokens["cwriter"])
    c.initialize(client="contract-writer")

    def mcp_run(kind, sql):
        if kind in ("begin", "rollback"):
            r = c.tool(kind)
            return {"sqlstate": r["structuredContent"].get("sqlstate")} if r["isError"] else {"ok": True}
        tool, args = ("query", {"sql": sql}) if kind == "read" else ("execute", {"sql": sql})
        return mcp_outcome(c.tool(tool, args))

    mcp = _write_steps(mcp_run)
    # The write's own change is what the read inside the transaction sees, on either door.
    assert wire[4]["rows"] == [[str(i), "5"] for i in (7, 107, 207, 307)], wire[4]
    assert wire[3]["sqlstate"] == mcp[3]["sqlstate"], (wire[3], mcp[3])
    for i in (1, 2, 4):
        assert wire[i] == mcp[i], (i, wire[i], mcp[i])
    where = "sql_text LIKE '%w_items%'"
    wire_rec = records(daemon, "cwriter", f"protocol <> 'mcp' AND {where}", 4)
    mcp_rec = records(daemon, "cwriter", f"protocol = 'mcp' AND {where}", 4)
    assert_records_agree(wire_rec, mcp_rec)
