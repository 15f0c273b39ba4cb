"""The text pgwarden judges is the text the server runs (docs/reliability.md, "The text pgwarden
judges"): standard_conforming_strings stays on and client_encoding stays UTF8 whatever a client
tries (SET, SET LOCAL, RESET, set_config, startup parameters and options), a server that reports
either changed ends the session, pg_settings cannot be written (the protected timeouts stay), a
text that is not valid UTF-8 gets the server's own answer, and a corpus of quoting forms is split
into the same statements by pgwarden and by the server."""

import re
import secrets

import pytest

import pgwtest
import writesupport
from conftest import module_daemon
from pgwtest import ServerError

WRITER_ROLE = "pgw_lex_writer"
WRITER_PASSWORD = "writer-" + secrets.token_hex(8)

# Under standard_conforming_strings=off the server reads this as a SELECT of "'", a COMMIT, a
# read-write transaction, a DELETE and a COMMIT; with it on, as one SELECT of a string constant.
SCS_ATTACK = "select '\\''; commit; begin read write; delete from scratch; commit; --'"
# Under client_encoding=SJIS, e0 a0 is one character and 81 5c another ending in a backslash,
# which escapes the quote; as UTF-8, e0 a0 81 is one character and the backslash is its own.
SJIS_ATTACK = (b"select E'\xe0\xa0\x81\\'; commit; begin read write; delete from scratch; "
               b"commit; --'")


def _daemon(daemons, pg):
    pw = {u: f"{u}-" + secrets.token_hex(6) for u in ("ro", "core", "writer")}
    users = [
        {"name": "ro", "password": pgwtest.scram_verifier(pw["ro"]), "group": "ro_only"},
        {"name": "core", "password": pgwtest.scram_verifier(pw["core"]), "group": "passthrough"},
        {"name": "writer", "password": pgwtest.scram_verifier(pw["writer"]), "group": "writers"},
    ]
    overrides = {
        "upstream": {"write_user": WRITER_ROLE, "write_password": WRITER_PASSWORD},
        "groups": {
            "ro_only": {"guards": [{"kind": "read_only"}]},
            "passthrough": {"guards": []},
            "writers": {"mode": "guarded_writes", "search_path": ["public"],
                        "guards": [{"kind": "functions"}]},
        },
    }
    d = daemons.start(pg, overrides=overrides, users=users, start=False)
    d.passwords = pw
    d.start()
    return d


@pytest.fixture(scope="module")
def lx(pgwarden_bin, pg):
    writesupport.create_write_role(pg, WRITER_ROLE, WRITER_PASSWORD)
    writesupport.reset_table(pg, WRITER_ROLE)
    yield from module_daemon(pgwarden_bin, lambda daemons: _daemon(daemons, pg))
    pg.execute("DROP TABLE IF EXISTS w_items")


@pytest.fixture
def scratch(pg):
    pg.execute("DELETE FROM scratch; INSERT INTO scratch VALUES (1, 'seed')")
    yield
    pg.execute("DELETE FROM scratch; INSERT INTO scratch VALUES (1, 'seed')")


def _login(d, user, extra=None):
    c = d.raw()
    c.login(user, d.passwords[user], extra=extra)
    return c


def _refused(c, sql, code="PROTECTED_SETTING", sqlstate="42501"):
    with pytest.raises(ServerError) as e:
        c.query(sql)
    assert e.value.sqlstate == sqlstate, e.value.fields
    assert f'"code":"{code}"' in e.value.fields.get("D", ""), e.value.fields
    return e.value


@pytest.mark.parametrize("change", [
    "SET standard_conforming_strings = off",
    "SET standard_conforming_strings TO DEFAULT",
    "RESET standard_conforming_strings",
    "SELECT set_config('standard_conforming_strings', 'off', false)",
    "UPDATE pg_settings SET setting = 'off' WHERE name = 'standard_conforming_strings'",
])
@pytest.mark.parametrize("user", ["ro", "core"])
def test_standard_conforming_strings_stays_on(lx, pg, scratch, user, change):
    """Item 2: the change is refused in a read_only-only group and in a group with no guards, so
    the text after it is read by the server as the one SELECT pgwarden judged."""
    with _login(lx, user) as c:
        _refused(c, change)
        c.query("BEGIN")
        _refused(c, "SET LOCAL standard_conforming_strings = off")
        c.query("ROLLBACK")
        rows, tags, _ = c.query(SCS_ATTACK)
        assert tags == ["SELECT 1"] and rows == [("\\'; commit; begin read write; delete from scratch; commit; --",)]
        assert c.query("SHOW standard_conforming_strings")[0] == [("on",)]
    assert pg.scalar("SELECT count(*) FROM scratch") == 1


@pytest.mark.parametrize("extra", [
    {"options": "-c standard_conforming_strings=off"},
    {"standard_conforming_strings": "off"},
    {"client_encoding": "SJIS"},
    {"options": "-c client_encoding=LATIN1"},
])
def test_startup_cannot_change_how_texts_are_read(lx, extra):
    c = lx.raw()
    with c, pytest.raises(ServerError) as e:
        c.login("ro", lx.passwords["ro"], extra=extra)
    assert e.value.sqlstate == "42501", e.value.fields
    value = next(iter(extra.values()))
    named = value.split("=")[-1] if "client_encoding" in str(extra) else "standard_conforming_strings"
    assert named in e.value.message, e.value.message


def test_utf8_spellings_are_accepted_at_startup(lx):
    for spelling in ("UTF8", "utf-8", "unicode"):
        with _login(lx, "ro", {"client_encoding": spelling}) as c:
            assert c.query("SHOW client_encoding")[0] == [("UTF8",)]


@pytest.mark.parametrize("change", [
    "SET client_encoding = 'SJIS'",
    "SET NAMES 'SJIS'",
    "SELECT set_config('client_encoding', 'SJIS', false)",
    "SET client_encoding = 'LATIN1'",
])
def test_client_encoding_stays_utf8(lx, pg, scratch, change):
    """Item 3: an encoding whose characters may end in a quote or backslash byte is refused, so
    the bytes below stay one SELECT of a string for the server too."""
    with _login(lx, "ro") as c:
        err = _refused(c, change)
        assert "UTF8" in err.message
        c.send_msg(b"Q", SJIS_ATTACK + b"\0")
        rows, tags, _ = c.read_query_result()
        assert tags == ["SELECT 1"]
        assert c.query("SHOW client_encoding")[0] == [("UTF8",)]
    assert pg.scalar("SELECT count(*) FROM scratch") == 1


def test_set_to_the_accepted_values_passes(lx):
    with _login(lx, "ro") as c:
        for sql in ("SET client_encoding = 'UTF8'", "SET NAMES 'utf8'", "SET standard_conforming_strings = on"):
            c.query(sql)
        assert c.query("SELECT 'a\\b'")[0] == [("a\\b",)]


@pytest.mark.parametrize("change, reported", [
    ("DO $$BEGIN PERFORM set_config('standard_conforming_strings', 'off', false); END$$",
     "standard_conforming_strings=off"),
    ("DO $$BEGIN PERFORM set_config('client_encoding', 'SJIS', false); END$$", "client_encoding=SJIS"),
])
def test_a_change_the_guards_did_not_see_ends_the_session(lx, change, reported):
    """A change hidden in procedural code reaches the server; its ParameterStatus ends the session
    with a FATAL naming the setting, before any later text is read under it."""
    with _login(lx, "core") as c:
        c.send_msg(b"Q", change.encode() + b"\0")
        fatal = None
        for _ in range(20):
            tag, body = c.read_msg()
            if tag == b"E":
                fatal = pgwtest.parse_fields(body)
                break
        assert fatal is not None
        assert fatal["S"] == "FATAL" and fatal["C"] == "0A000", fatal
        assert reported in fatal["M"], fatal
        assert c.closed_by_peer()
    with _login(lx, "core") as c:  # a fresh connection reads texts as before
        assert c.query("SHOW standard_conforming_strings")[0] == [("on",)]


def test_invalid_utf8_gets_the_servers_answer(lx, pg):
    """Item 3: the server's SQLSTATE and message, not a parser failure of pgwarden's own."""
    texts = [b"select 'caf\xe9'", b"select 1 -- \xc3", b"select '\xed\xa0\x80' as x"]
    direct = pgwtest.RawClient.tcp("127.0.0.1", pg.port)
    direct.login("postgres", pgwtest.SUPERUSER_PASSWORD)
    with direct, _login(lx, "ro") as c:
        for text in texts:
            answers = []
            for client in (direct, c):
                client.send_msg(b"Q", text + b"\0")
                with pytest.raises(ServerError) as e:
                    client.read_query_result()
                answers.append((e.value.sqlstate, e.value.message))
            assert answers[0][0] == "22021"
            assert answers[1] == answers[0], text


def test_pg_settings_cannot_switch_the_timeouts_off(lx, pg):
    """Item 4: in a guarded-writes transaction, UPDATE pg_settings is refused like SET."""
    with _login(lx, "writer") as c:
        c.query("BEGIN")
        c.query("SELECT name, setting FROM pg_settings WHERE name IN ('statement_timeout', 'lock_timeout')")
        before = c.query("SHOW statement_timeout")[0]
        _refused(c, "UPDATE pg_settings SET setting = '0' WHERE name IN ('statement_timeout', 'lock_timeout')")
        c.query("ROLLBACK")
        c.query("BEGIN")
        c.query("SELECT * FROM pg_settings WHERE name = 'lock_timeout'")
        for sql in ("UPDATE pg_catalog.pg_settings SET setting = '0' WHERE name = 'statement_timeout'",
                    "SET statement_timeout = 0", "SET LOCAL lock_timeout = 0", "RESET statement_timeout",
                    "SET statement_timeout TO DEFAULT",
                    "SELECT set_config('idle_in_transaction_session_timeout', '0', false)",
                    "SELECT set_config(name, '0', false) FROM pg_settings WHERE name = 'lock_timeout'"):
            _refused(c, sql)
            c.query("ROLLBACK")
            c.query("BEGIN")
        c.query("COMMIT")
        assert c.query("SHOW statement_timeout")[0] == before
        assert c.query("SHOW statement_timeout")[0] != [("0",)]
        assert c.query("SHOW lock_timeout")[0] != [("0",)]


# ---- the lexing differential: pgwarden's split against the server's -------------------------

# Each text holds statements with distinct aliases (s1, s2, ...), so each server entry names its
# statement. {} is replaced by a different string each round, so the third round of a shape goes
# through the shape cache's template rather than a parse.
CORPUS = [
    "select 'a;b' as s1; select 'it''s;' as s2",
    "select 'a\\' as s1; select 2 as s2",
    "select E'a\\'; still' as s1; select E'\\\\' as s2; select 3 as s3",
    "select E'\\x41\\101\\u00e9' as s1",
    "select $$a;'b$$ as s1; select $tag$ $$ ; ' $tag$ as s2",
    "select $a$x$a$ as s1; select $_b$;$_b$ as s2",
    "select U&'d\\0061t\\+000061;' as s1; select U&'!0061' UESCAPE '!' as s2",
    "select 1 as U&\"\\0073;\"; select 2 as s2",
    "select /* a /* nested ; */ still ' */ 1 as s1; select 2 as s2",
    "select 1 as s1 -- ; ' \n; select 2 as s2",
    "select '日本;語' as s1; select 'é' as \"s;2\"; select 3 as ñ3",
    "select '€\\' as s1; select '𝄞' as s2",
    "select b'101' as s1; select x'1f' as s2; select n'nat' as s3",
    "select 'x'\n';' as s1; select 'y'\n'z' as s2",
    "select e'\\\\' as s1; select E'\\';' as s2",
    "select '{}' as s1; select E'{}\\'' as s2; select $q${}$q$ as s3",
    "select 'a' as s1;;; select 'b' as s2",
    "select \"s;1\" from (select 1 as \"s;1\") t; select 2 as \"a\"\"b\"",
]
ROUNDS = ["one", "tw;o", "th'ree"]


def _server_entries(pg):
    return pg.execute("SELECT query, calls FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' "
                      "AND query NOT LIKE '%sentinel%' AND query NOT LIKE '%pg_class%' "
                      "AND query NOT LIKE '%pg_stats%' AND query NOT LIKE '%rolsuper%'")


def _until(d, marker):
    """core's history records up to the one of `marker`'s SELECT, or None before it is written."""
    rows = pgwtest.history_rows(d, "user_name = 'core'", timeout=0)
    return rows if rows and marker in rows[-1]["sql_text"] else None


def _pattern(query):
    parts = re.split(r"\$\d+", query.strip().rstrip(";").strip())
    return re.compile("(?s)" + "(.+?)".join(re.escape(p) for p in parts))


def test_pgwarden_splits_texts_as_the_server_does(pgwarden_factory, pg_factory, pgwarden_bin):
    cluster = pg_factory(rows=1000)
    with open(cluster.data / "postgresql.conf", "a") as f:
        f.write("shared_preload_libraries = 'pg_stat_statements'\n"
                "pg_stat_statements.track_utility = off\n")
    cluster.restart()
    cluster.execute("CREATE EXTENSION pg_stat_statements")
    d = pgwarden_factory.start(cluster)
    conn = d.raw()
    conn.login("core", d.passwords["core"])
    compared = 0
    with conn:
        for n, template in enumerate(CORPUS):
            for r, word in enumerate(ROUNDS):
                text = template.replace("{}", word.replace("'", "''"))
                cluster.execute("SELECT pg_stat_statements_reset()")
                rows, tags, _ = conn.query(text)
                marker = f"sentinel-{n}-{r}"
                # Eight columns: a parse tree of its own, so pg_stat_statements keeps it apart.
                conn.query(f"select '{marker}' as sentinel, 1, 2, 3, 4, 5, 6, 7")
                recs = pgwtest.wait_for(lambda: _until(d, marker), timeout=10)
                assert recs, text
                ours = []
                for rec in reversed(recs[:-1]):
                    if rec["sql_text"].startswith("select 'sentinel-"):
                        break
                    ours.append(rec["sql_text"].strip().rstrip(";").strip())
                ours.reverse()
                theirs = _server_entries(cluster)
                # pg_stat_statements keeps one entry per parse tree (aliases do not count), with
                # the text of the first statement that had it: the number of statements must
                # agree, and each entry's text must be one of pgwarden's statements.
                assert sum(calls for _, calls in theirs) == len(ours) == len(tags), (text, ours, theirs, tags)
                for query, _ in theirs:
                    pat = _pattern(query)
                    assert any(pat.fullmatch(s) for s in ours), (text, query, ours)
                compared += len(ours)
    assert compared >= 3 * 2 * len(CORPUS)
