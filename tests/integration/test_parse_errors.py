"""Parse errors answered by the server: a text pgwarden's parser (libpg_query) refuses is put to
PostgreSQL's own parser (a Parse of pgwarden's statement, never executed), and the client gets the
server's ErrorResponse field for field (SQLSTATE, message, position, HINT: 42P20, 22025, 54001
where they apply), over the simple and the extended protocol, inside a transaction block (which
the error aborts, as the server's would) and through MCP. Each answer is compared with the same
statement sent straight to PostgreSQL. A text the server parses while pgwarden cannot analyse it
is still refused by pgwarden and never runs. History records each statement once."""

import hashlib
import secrets
import struct

import pytest

import pgwtest
from conftest import module_daemon
from mcpsupport import McpHttp, history, wait_mcp_listener

GUARDS = [{"kind": "read_only"}, {"kind": "functions"}]


def _nested(n):
    return "SELECT " + "(SELECT " * n + "1" + ")" * n


# Texts libpg_query refuses, each with what the server answers.
CASES = {
    # libpg_query: 'trailing junk after numeric literal at or near "123a"'
    "junk": "SELECT 123abc",
    # the server's HINT "Use separate LIMIT and OFFSET clauses."
    "limit_comma": "SELECT 1 LIMIT 1, 2",
    "limit_twice": "SELECT 1 LIMIT ALL OFFSET 1 LIMIT 2",
    # 22025 invalid_escape_sequence, with the server's HINT
    "escape": "SELECT E'\\u00zz'",
    "uescape": "SELECT U&'wrong: \\061'",
    # 42P20 windowing_error
    "window": "SELECT rank() OVER (ORDER BY 1 ROWS BETWEEN UNBOUNDED FOLLOWING AND CURRENT ROW)",
    # 54001 from the server's own stack check, with its HINT (max_stack_depth)
    "deep": "SELECT 1" + "+1" * 9999,
    "typo": "SELEC id FROM fct_shipments",
}
IDS = list(CASES)


def _start(daemons, pg):
    pw = {u: f"{u}-" + secrets.token_hex(6) for u in ("ro", "rotx")}
    users = [
        {"name": "ro", "password": pgwtest.scram_verifier(pw["ro"]), "group": "readers"},
        {"name": "rotx", "password": pgwtest.scram_verifier(pw["rotx"]), "group": "readers_tx"},
    ]
    token = "pgw_" + secrets.token_urlsafe(32)
    mcp = {"listen": f"127.0.0.1:{pgwtest.free_port()}", "database": pgwtest.DATABASE,
           "tokens": [{"user": "ro", "sha256": hashlib.sha256(token.encode()).hexdigest()}]}
    overrides = {
        "groups": {
            "readers": {"search_path": ["public"], "guards": GUARDS, "pool_mode": "session"},
            "readers_tx": {"search_path": ["public"], "guards": GUARDS, "pool_mode": "transaction"},
        },
        "mcp": mcp,
    }
    d = daemons.start(pg, overrides=overrides, users=users, start=False)
    d.passwords = pw
    d.start()
    d.mcp_port = wait_mcp_listener(mcp)
    d.mcp_token = token
    return d


@pytest.fixture(scope="module")
def daemon(pg, pgwarden_bin):
    yield from module_daemon(pgwarden_bin, lambda daemons: _start(daemons, pg))


def _direct(pg):
    c = pgwtest.RawClient.tcp("127.0.0.1", pg.port)
    c.login(pgwtest.READER_ROLE, pgwtest.READER_PASSWORD)
    return c


def _through(daemon, user):
    c = pgwtest.RawClient.tcp("127.0.0.1", daemon.port)
    c.login(user, daemon.passwords[user])
    return c


def _answer(c):
    """Every message up to ReadyForQuery: (type, fields) for an error or notice, (type, body)
    for the rest."""
    out = []
    while True:
        tag, body = c.read_msg()
        if tag == b"S":
            continue  # ParameterStatus: pgwarden's and the server's sessions differ by design
        out.append((tag, pgwtest.parse_fields(body) if tag in (b"E", b"N") else body))
        if tag == b"Z":
            return out


def _simple(c, sql):
    c.send_msg(b"Q", sql.encode() + b"\0")
    return _answer(c)


def _batch(c, sql, name="", sync=True):
    """The text as a client's Parse in a batch (Bind, Describe, Execute, Sync)."""
    c.send_msg(b"P", name.encode() + b"\0" + sql.encode() + b"\0" + struct.pack("!H", 0))
    c.send_msg(b"B", b"\0" + name.encode() + b"\0" + struct.pack("!HHH", 0, 0, 0))
    c.send_msg(b"D", b"P\0")
    c.send_msg(b"E", b"\0" + struct.pack("!i", 0))
    if not sync:
        return None
    c.send_msg(b"S")
    return _answer(c)


def _error(answer):
    errors = [f for t, f in answer if t == b"E"]
    assert len(errors) == 1, answer
    return errors[0]


def _same_error(got, expected):
    """The server's ErrorResponse, field for field; named first for a readable failure."""
    g, e = _error(got), _error(expected)
    for code in "CMPH":
        assert g.get(code) == e.get(code), (code, g, e)
    assert "D" not in g, g  # no detail of pgwarden's
    assert got == expected


@pytest.fixture(params=["ro", "rotx"])
def pair(request, daemon, pg):
    direct, through = _direct(pg), _through(daemon, request.param)
    yield direct, through
    direct.close()
    through.close()


@pytest.mark.parametrize("case", IDS)
def test_simple_protocol(pair, case):
    direct, through = pair
    sql = CASES[case]
    expected = _simple(direct, sql)
    assert expected[-1] == (b"Z", b"I"), expected
    _same_error(_simple(through, sql), expected)
    assert _simple(through, "SELECT 1") == _simple(direct, "SELECT 1")


@pytest.mark.parametrize("case", IDS)
def test_extended_protocol(pair, case):
    direct, through = pair
    sql = CASES[case]
    expected = _batch(direct, sql)
    _same_error(_batch(through, sql), expected)
    # Named: the statement is not left behind on either side.
    _same_error(_batch(through, sql, "s1"), _batch(direct, sql, "s1"))
    again = b"\0s1\0" + struct.pack("!HHH", 0, 0, 0)
    for c in (direct, through):
        c.send_msg(b"B", again)
        c.send_msg(b"S")
    _same_error(_answer(through), _answer(direct))
    assert _batch(through, "SELECT 1") == _batch(direct, "SELECT 1")


@pytest.mark.parametrize("run,case", [(_simple, "junk"), (_simple, "limit_comma"), (_simple, "escape"),
                                      (_simple, "window"), (_batch, "junk"), (_batch, "limit_twice"),
                                      (_batch, "uescape")],
                         ids=["simple-junk", "simple-limit_comma", "simple-escape", "simple-window",
                              "extended-junk", "extended-limit_twice", "extended-uescape"])
def test_in_a_transaction_block(pair, run, case):
    """The error aborts the block, as the server's own does: 'E', then 25P02, and COMMIT answers
    ROLLBACK."""
    direct, through = pair
    answers = []
    for c in (direct, through):
        steps = [_simple(c, "BEGIN"), run(c, "SELECT 1"), run(c, CASES[case])]
        steps += [run(c, "SELECT 1"), run(c, "COMMIT"), run(c, "SELECT 1")]
        answers.append(steps)
    expected, got = answers
    assert expected[2][-1] == (b"Z", b"E")
    assert _error(expected[3])["C"] == "25P02"
    assert (b"C", b"ROLLBACK\0") in expected[4]
    _same_error(got[2], expected[2])
    assert got == expected


def test_a_text_the_server_parses_is_still_refused_and_never_runs(daemon, pg):
    """Deeper than pgwarden analyses, yet within what the server parses: pgwarden's own refusal
    stands, alone or after another statement (the server's parser took the text, so a Query of
    it would have run both); a client's Parse of the two gets the server's own refusal of
    several commands. Nothing of either reaches the server's executor."""
    deep = _nested(2600)
    several = "SELECT 'parse-check-marker'; " + deep
    c = _through(daemon, "ro")
    direct = _direct(pg)
    try:
        offset = pg.log_offset()
        for answer in (_simple(c, deep), _simple(c, several), _batch(c, deep)):
            err = _error(answer)
            assert err["C"] == "54001" and "nested deeper than pgwarden analyses" in err["M"], err
        _same_error(_batch(c, several), _batch(direct, several))
        assert _simple(c, "SELECT 1")[-1] == (b"Z", b"I")
        # log_statement = 'all' logs each Query ("statement: ") and Execute ("execute <name>: ")
        # the server runs; a Parse's error is logged with the text too, as "STATEMENT:".
        ran = [line for line in pg.log_since(offset).splitlines()
               if ("LOG:  statement: " in line or "LOG:  execute " in line) and "(SELECT (SELECT" in line]
        assert ran == []
    finally:
        c.close()
        direct.close()


def test_history_records_each_once_as_the_servers_error(daemon, pg):
    marker = "hist_" + secrets.token_hex(4)
    simple_sql = f"SELECT 1 AS {marker} LIMIT 1, 2"
    batch_sql = f"SELECT 123abc AS {marker}"
    direct = _direct(pg)
    expected = _error(_simple(direct, simple_sql))
    direct.close()
    c = _through(daemon, "ro")
    try:
        assert _error(_simple(c, simple_sql))["C"] == "42601"
        assert _error(_batch(c, batch_sql))["C"] == "42601"
        _simple(c, "SELECT 1")
    finally:
        c.close()
    rows = history(daemon, f"sql_text LIKE '%{marker}%'", count=2)
    assert len(rows) == 2, rows
    by_text = {r["sql_text"]: r for r in rows}
    r = by_text[simple_sql]
    assert (r["outcome"], r["sqlstate"], r["error_message"]) == ("error", "42601", expected["M"])
    assert r["deny_code"] in ("", None)
    r = by_text[batch_sql]
    assert (r["outcome"], r["sqlstate"]) == ("error", "42601")
    assert "trailing junk" in r["error_message"]


def test_after_an_earlier_failure_in_the_batch(daemon, pg):
    """An earlier message of the batch fails on the server while the parse check waits: the
    server skips the check with the rest of the batch, as it skips the client's Parse. The client
    sees the server's one error; history records the failed statement and the skipped one once
    each."""
    marker = "skip_" + secrets.token_hex(4)
    first = f"SELECT 1/0 AS {marker}_a"
    second = f"SELEC 1 AS {marker}_b"
    answers = []
    for c in (_direct(pg), _through(daemon, "ro")):
        _batch(c, first, sync=False)
        answers.append(_batch(c, second))
        answers.append(_simple(c, "SELECT 1"))
        c.close()
    assert _error(answers[0])["C"] == "22012"
    assert answers[2:] == answers[:2]
    rows = history(daemon, f"sql_text LIKE '%{marker}%'", count=2)
    got = sorted((r["sql_text"], r["outcome"], r["sqlstate"]) for r in rows)
    assert got == sorted([(first, "error", "22012"), (second, "error", "22012")]), rows


def test_through_mcp(daemon, pg):
    direct = _direct(pg)
    try:
        client = McpHttp(daemon.mcp_port, daemon.mcp_token)
        client.initialize(client="parse-errors-agent")
        for case in ("limit_comma", "escape", "deep"):
            expected = _error(_simple(direct, CASES[case]))
            r = client.tool("query", {"sql": CASES[case]})
            assert r["isError"] is True, r
            s = r["structuredContent"]
            assert s["sqlstate"] == expected["C"], s
            assert s["message"] == expected["M"], s
            assert s.get("hint") == expected.get("H"), s
        client.close()
    finally:
        direct.close()
    rows = history(daemon, "agent_id = 'parse-errors-agent'", count=3)
    assert [(r["outcome"], r["sqlstate"], r["protocol"]) for r in rows] == [
        ("error", "42601", "mcp"), ("error", "22025", "mcp"), ("error", "54001", "mcp")]
