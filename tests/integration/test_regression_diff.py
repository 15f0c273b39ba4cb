"""Differential test: PostgreSQL 15's own regression files, statement by statement, straight to the
server and through a permissive read-only pgwarden group, must get the same answers.

The database is the one the regression schedule builds (test_setup, create_index and the chosen
files, run as the superuser with psql). Then every statement of the chosen files is sent on two
connections in lockstep, both as the same role and both read-only (pgwarden's server connections
are; the direct one gets the same settings in its startup packet), with the client settings
pg_regress gives psql. Each answer is every message up to ReadyForQuery, compared byte for byte.
A statement pgwarden refuses must be refused with a code in ALLOWED_REFUSALS; any other
difference must be listed in KNOWN_DIFFERENCES with the fidelity item that explains it.
The same statements then run through node-postgres (extended protocol, binary results) and pgjdbc
(server-prepared), directly and through pgwarden, and the drivers' answers are compared.

The regression sources are Debian's (scripts/deps keeps src/test/regress in
/var/cache/pgwarden-test/postgresql-15-regress); the test fails when they are missing.
"""

import base64
import collections
import json
import os
import re
import secrets
import subprocess

import pytest

import pgwtest
import regresssupport as rs
from conftest import DaemonSet

DATABASE = "regression"
USER = "regress"
PASSWORD = "regress-" + secrets.token_hex(6)

# The regression files compared, in the schedule's order: the read-mostly ones, about 9,400
# statements, so that the test runs in a few minutes on two cores.
FILES = [
    "boolean", "text", "int4", "int8", "float8", "numeric", "rangetypes",
    "strings", "date", "time", "timestamp", "timestamptz", "interval",
    "horology", "tstypes", "regex", "expressions", "errors", "select",
    "select_distinct", "subselect", "union", "case", "join", "aggregates", "arrays",
    "groupingsets", "tsearch", "window", "limit", "with", "json", "jsonb", "jsonpath",
]
# PGW_REGRESS_FILES=date,horology: only these (to look at one file while fixing what it shows).
if os.environ.get("PGW_REGRESS_FILES"):
    FILES = [f for f in FILES if f in os.environ["PGW_REGRESS_FILES"].split(",")]
# Run before FILES to build the database, as the schedule does.
SETUP_FILES = ["test_setup", "create_index"]

# What pg_regress gives psql (PGDATESTYLE, PGTZ, PGAPPNAME), sent in the startup packet.
CLIENT_SETTINGS = {"DateStyle": "Postgres, MDY", "TimeZone": "PST8PDT",
                   "application_name": "pg_regress"}
# What pgwarden's server connections carry (packaging/pgwarden.yaml's upstream timeouts); the
# direct connections send the same, so that both sessions are read-only alike.
SERVER_SETTINGS = ("-c default_transaction_read_only=on -c statement_timeout=10000 "
                   "-c lock_timeout=3000 -c idle_in_transaction_session_timeout=15000")

# pgwarden's refusals that are its policy, not a difference: a write (which the read-only server
# session refuses too: READ_ONLY where the server's answer is an error as well), a change of a
# protected setting, and the statements the read_only guard refuses by design although the server
# would run them in a read-only transaction (docs/denials.md, READ_ONLY): maintenance (VACUUM,
# ANALYZE) and procedural code (DO), which it cannot look into.
ALLOWED_REFUSALS = {
    "READ_ONLY": "a write, DDL or other statement the read-only session would refuse too",
    "PROTECTED_SETTING": "SET/RESET of a setting the group protects (timeouts, read-only, role)",
}
BY_DESIGN = {("READ_ONLY", "maintenance"), ("READ_ONLY", "do")}

# ---------------------------------------------------------------------------------------------
# KNOWN DIFFERENCES: "file:index" (index of the statement in the file, from 0) -> the item of the
# fidelity issue that explains the difference. The test fails on a difference not listed here,
# and on an entry whose statement now matches: remove entries as the fixes land.
#   1: RESET / SET ... TO DEFAULT of a client's startup setting returns to pgwarden's value
#   2: a refusal inside a transaction block leaves the transaction usable
#   3: parse errors pgwarden answers itself differ from the server's
#   4: deep statements refused
#   5: harmless reads refused in a permissive read-only group
#   6: not a fidelity defect: standard_conforming_strings is held on (the hardening round refuses
#      SET standard_conforming_strings = off), so the statements after the file's SET differ
# Items 1 to 5 are fixed for the simple protocol; what remains of 1 shows under pgjdbc's own
# startup parameters (KNOWN_DRIVER_DIFFERENCES). Since item 3's fix the server's parser answers
# the texts pgwarden's parser refuses, so what differed there under
# standard_conforming_strings = off is item 6 now.
KNOWN_DIFFERENCES = {
    # 6: standard_conforming_strings is held on (hardening): the file's SET ... = off is refused, so what follows it runs with standard strings
    "strings:29": 6, "strings:30": 6, "strings:31": 6, "strings:409": 6, "strings:411": 6, "strings:418": 6,
    # 6: the server answers under on what it answers 0A000 under off (U&'' strings), or runs with 22P06 warnings ('\\' strings)
    "strings:33": 6, "strings:34": 6, "strings:35": 6, "strings:416": 6, "strings:421": 6,
}
# The drivers' answers to a statement listed above may differ for the same reason; differences
# of their own are listed here as "node:file:index" and "jdbc:file:index".
KNOWN_DRIVER_DIFFERENCES = {}

ITEMS = {1: "RESET of a startup setting", 2: "refusal inside a transaction",
         3: "parse error answered by pgwarden", 4: "deep statement refused",
         5: "harmless read refused", 6: "standard_conforming_strings held on"}


@pytest.fixture(scope="module")
def regress_db():
    """A PostgreSQL 15 with the regression database built by the schedule's setup and the chosen
    files, readable by the role pgwarden logs in as."""
    if not (rs.REGRESS_DIR / "parallel_schedule").is_file():
        pytest.fail(f"PostgreSQL 15's regression sources are missing from {rs.REGRESS_DIR} "
                    "(scripts/deps fetches them)", pytrace=False)
    cluster = pgwtest.PgCluster(prefix="pgw-regress-")
    try:
        cluster.init()
        # The plans EXPLAIN shows must not change between a statement's two runs.
        with open(cluster.data / "postgresql.conf", "a") as f:
            f.write("autovacuum = off\n")
        cluster.start()
        # pg_regress's database: template0, and the settings it gives every test database.
        cluster.execute(f"CREATE DATABASE {DATABASE} TEMPLATE template0", dbname="postgres")
        cluster.execute(f"""
            ALTER DATABASE {DATABASE} SET lc_messages TO 'C';
            ALTER DATABASE {DATABASE} SET lc_monetary TO 'C';
            ALTER DATABASE {DATABASE} SET lc_numeric TO 'C';
            ALTER DATABASE {DATABASE} SET lc_time TO 'C';
            ALTER DATABASE {DATABASE} SET bytea_output TO 'hex';
            ALTER DATABASE {DATABASE} SET timezone_abbreviations TO 'Default';
            CREATE ROLE {pgwtest.READER_ROLE} LOGIN PASSWORD '{pgwtest.READER_PASSWORD}';
        """, dbname="postgres")
        env = pgwtest.pg_env(pgwtest.SUPERUSER_PASSWORD)
        env.update(rs.psql_env(), PGDATESTYLE=CLIENT_SETTINGS["DateStyle"],
                   PGTZ=CLIENT_SETTINGS["TimeZone"])
        for name in SETUP_FILES + FILES:
            subprocess.run(["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(cluster.port),
                            "-U", "postgres", "-d", DATABASE,
                            "-f", str(rs.REGRESS_DIR / "sql" / f"{name}.sql")],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=300, check=True)
        cluster.execute(f"""
            GRANT SELECT ON ALL TABLES IN SCHEMA public TO {pgwtest.READER_ROLE};
            GRANT SELECT ON ALL SEQUENCES IN SCHEMA public TO {pgwtest.READER_ROLE};
            ANALYZE;
        """, dbname=DATABASE)
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(scope="module")
def daemon(pgwarden_bin, regress_db):
    """pgwarden with one permissive group: the read_only guard alone, the result screens off."""
    screens = ["UNKNOWN_VALUE", "OUT_OF_RANGE", "UNFILTERED", "ARBITRARY_ROWS", "PARTIAL_RESULT",
               "FANOUT_JOIN", "NULL_COMPARISON", "NOT_IN_NULL", "INTEGER_DIVISION",
               "DISTINCT_MEASURE", "OUTER_JOIN_COUNT", "TIMESTAMP_DATE_BOUND",
               "LEFT_JOIN_FILTERED", "FOREIGN_KEY_MISMATCH", "SOFT_DELETED_ROWS"]
    overrides = {"groups": {"permissive": {"guards": [{"kind": "read_only"}],
                                           "result_screens": {c: "off" for c in screens}}}}
    users = [{"name": USER, "password": pgwtest.scram_verifier(PASSWORD), "group": "permissive"}]
    daemons = DaemonSet(pgwarden_bin)
    try:
        yield daemons.start(regress_db, overrides=overrides, users=users)
    finally:
        daemons.teardown()


@pytest.fixture(scope="module")
def statements():
    return {name: rs.file_statements(name) for name in FILES}


def connect_direct(pg):
    c = rs.Recorder.tcp("127.0.0.1", pg.port, timeout=60)
    c.login(pgwtest.READER_ROLE, pgwtest.READER_PASSWORD, database=DATABASE,
            extra={**CLIENT_SETTINGS, "options": SERVER_SETTINGS})
    return c


def connect_pgwarden(d):
    c = rs.Recorder.tcp("127.0.0.1", d.port, timeout=60)
    c.login(USER, PASSWORD, database=DATABASE, extra=CLIENT_SETTINGS)
    return c


def judge(same, refusal, direct_failed):
    """'identical', 'refused:<CODE>' (an allowed refusal), or 'different'; `refusal` is the detail
    JSON of pgwarden's answer when that is one of its denials."""
    if same:
        return "identical"
    code = refusal.get("code")
    if code in ALLOWED_REFUSALS and (code != "READ_ONLY" or direct_failed):
        return f"refused:{code}"
    if (code, refusal.get("kind")) in BY_DESIGN:
        return f"refused:{code}:{refusal['kind']}"
    return "different"


def classify(direct, through):
    return judge(direct == through, rs.refusal(through), rs.error_fields(direct) is not None)


def run_file(pg, d, name, texts):
    """Each statement of one file on a fresh pair of sessions, in lockstep: [(index, text,
    class, direct answer, answer through pgwarden)]."""
    out = []
    direct, through = connect_direct(pg), connect_pgwarden(d)
    try:
        for i, text in enumerate(texts):
            if text is None:
                continue
            answers = []
            for side, conn in (("direct", direct), ("pgwarden", through)):
                try:
                    answers.append(conn.run(text))
                except (EOFError, ConnectionResetError) as e:
                    answers.append([(b"!", f"connection closed: {e}".encode())])
            out.append((i, text, classify(*answers), *answers))
            # A session the answer ended (FATAL) is opened again, on both sides alike.
            if any(a and a[-1][0] == b"!" for a in answers):
                direct.close()
                through.close()
                direct, through = connect_direct(pg), connect_pgwarden(d)
    finally:
        direct.close()
        through.close()
    return out


def unexplained(results, known, own=None):
    """(differences not in `known`, entries of `own` (default: all of `known`) whose statement
    now matches)."""
    differing = {}
    for name, rows in results.items():
        for i, text, cls, *answers in rows:
            if cls == "different":
                differing[f"{name}:{i}"] = (text, *answers)
    new = {k: v for k, v in differing.items() if k not in known}
    stale = sorted(k for k in (known if own is None else own)
                   if k not in differing and k.split(":")[0] in results)
    return new, stale


def summary(results, known):
    counts = collections.Counter()
    by_item = collections.Counter()
    for name, rows in results.items():
        for i, text, cls, *answers in rows:
            counts["statements"] += 1
            counts[cls] += 1
            if cls == "different" and f"{name}:{i}" in known:
                by_item[known[f"{name}:{i}"]] += 1
    return counts, by_item


def report(title, results, counts, by_item, new, stale, describe):
    lines = [f"{title}: {len(results)} files, " + ", ".join(f"{k} {v}" for k, v in
                                                               sorted(counts.items()))]
    lines += [f"  known, item {item} ({ITEMS[item]}): {n}" for item, n in sorted(by_item.items())]
    for key, (text, *answers) in list(new.items())[:40]:
        lines.append(f"\n{key} not in KNOWN_DIFFERENCES: {text[:300]!r}")
        lines.append(f"  direct:   {describe(answers[0])}")
        lines.append(f"  pgwarden: {describe(answers[1])}")
    if len(new) > 40:
        lines.append(f"... and {len(new) - 40} more")
    if stale:
        lines.append(f"\nentries that now match (remove them): {stale}")
    return "\n".join(lines)


# Statements after which a file's answers depend on where RESET returns a startup setting to.
RESETS = re.compile(r"(?is)^\s*(reset\s+(datestyle|timezone|time\s+zone|intervalstyle|"
                    r"application_name)|set\s+(datestyle|timezone|time\s+zone|intervalstyle|"
                    r"application_name)\s*(to|=)?\s*default)\b")


def dump_differences(results, path):
    """PGW_REGRESS_DUMP=FILE: every difference with the item that probably explains it, as JSON
    (to write KNOWN_DIFFERENCES entries from, after reading them)."""
    out = []
    for name, rows in results.items():
        after_reset = False
        for i, text, cls, direct, through in rows:
            after_reset |= bool(RESETS.match(text))
            if cls == "different":
                out.append({"key": f"{name}:{i}", "text": text[:200],
                            "item": rs.suggest_item(direct, through, after_reset),
                            "direct": rs.describe(direct), "pgwarden": rs.describe(through)})
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


def test_simple_protocol_matches_server(regress_db, daemon, statements):
    results = {name: run_file(regress_db, daemon, name, statements[name]) for name in FILES}
    if os.environ.get("PGW_REGRESS_DUMP"):
        dump_differences(results, os.environ["PGW_REGRESS_DUMP"])
    counts, by_item = summary(results, KNOWN_DIFFERENCES)
    new, stale = unexplained(results, KNOWN_DIFFERENCES)
    text = report("simple protocol", results, counts, by_item, new, stale, rs.describe)
    print(text)
    assert not new and not stale, text
    # The comparison means something: most statements ran, on both sides alike.
    assert counts["identical"] > 0.6 * counts["statements"], text


# ---------------------------------------------------------------------------------------------
# Drivers

NODE_DIR = pgwtest.REPO_ROOT / "tests" / "drivers"


def node_run(tmp_path, statements, connection, tag):
    if not (NODE_DIR / "node_modules" / "pg").is_dir():
        pgwtest.require_tool(f"node-postgres is not installed in {NODE_DIR}")
    path = tmp_path / f"statements-{tag}.json"
    path.write_text(json.dumps([{"file": n, "statements": [[i, t] for i, t in
                                                          enumerate(statements[n]) if t]}
                                for n in FILES]))
    output = tmp_path / f"answers-{tag}.jsonl"
    r = subprocess.run(["node", str(NODE_DIR / "regress_client.mjs"), json.dumps(connection),
                        str(path), str(output)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    out = {}
    for line in output.read_text().split("\n"):  # not splitlines(): values may hold U+2028
        if not line:
            continue
        rec = json.loads(line)
        out[(rec["file"], rec["i"])] = json.dumps({"out": rec["out"], "notices": rec["notices"]})
    return out


def jdbc_run(java, tmp_path, statements, url, props, tag):
    path = tmp_path / f"statements-{tag}.txt"
    with open(path, "w") as f:
        for n in FILES:
            f.write(f"F {n}\n")
            for i, t in enumerate(statements[n]):
                if t:
                    f.write(f"S {i} " + base64.b64encode(t.encode()).decode() + "\n")
    r = java.run("RegressCheck", url, path, *props, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("R "):
            _, name, i, data = line.split(" ", 3)
            out[(name, int(i))] = base64.b64decode(data).decode()
    return out


def node_facts(answer):
    """(pgwarden's denial detail or {}, whether it is an error) of node-postgres's answer."""
    out = json.loads(answer)["out"] if answer else {}
    if not isinstance(out, dict):
        return {}, False
    detail = out.get("detail") or ""
    return (json.loads(detail) if detail.startswith('{"code":') else {}), True


def jdbc_facts(answer):
    """The same for pgjdbc's printed answer."""
    m = re.search(r'^detail (\{"code":.*\})$', answer or "", re.M)
    failed = (answer or "").startswith("error ") or "\nerror " in (answer or "")
    return (json.loads(m.group(1)) if m else {}), failed


def compare_driver(facts, statements, direct, through):
    """Per file, [(index, text, class, direct, through)] as for the simple protocol, from the
    drivers' printed answers."""
    results = {}
    for n in FILES:
        rows = []
        for i, text in enumerate(statements[n]):
            if text is None:
                continue
            a, b = direct.get((n, i), ""), through.get((n, i), "")
            cls = judge(a == b, facts(b)[0], facts(a)[1])
            rows.append((i, text, cls, a, b))
        results[n] = rows
    return results


def check_driver(driver, statements, direct, through):
    results = compare_driver(node_facts if driver == "node" else jdbc_facts, statements, direct,
                             through)
    # A statement whose answer differs in the simple protocol may differ through the driver for
    # the same reason; the driver's own entries must still differ.
    own = {k[len(driver) + 1:]: v for k, v in KNOWN_DRIVER_DIFFERENCES.items()
           if k.startswith(driver + ":")}
    known = {**KNOWN_DIFFERENCES, **own}
    if os.environ.get("PGW_REGRESS_DUMP"):
        with open(os.environ["PGW_REGRESS_DUMP"] + "." + driver, "w") as f:
            json.dump([{"key": f"{driver}:{n}:{i}", "text": t[:200], "direct": a[:1500],
                        "pgwarden": b[:1500], "item": KNOWN_DIFFERENCES.get(f"{n}:{i}", 0)}
                       for n, rows in results.items() for i, t, cls, a, b in rows
                       if cls == "different"], f, indent=1)
    counts, by_item = summary(results, known)
    new, stale = unexplained(results, known, own)
    text = report(driver, results, counts, by_item, new, stale, lambda s: s[:600])
    print(text)
    assert not new and not stale, text
    assert counts["identical"] > 0.6 * counts["statements"], text


def test_node_postgres_extended_binary_matches_server(regress_db, daemon, statements, tmp_path):
    base = {"host": "127.0.0.1", "database": DATABASE,
            "application_name": CLIENT_SETTINGS["application_name"]}
    direct = node_run(tmp_path, statements, {**base, "port": regress_db.port,
                                             "user": pgwtest.READER_ROLE,
                                             "password": pgwtest.READER_PASSWORD,
                                             "options": SERVER_SETTINGS}, "direct")
    through = node_run(tmp_path, statements, {**base, "port": daemon.port, "user": USER,
                                              "password": PASSWORD}, "pgwarden")
    check_driver("node", statements, direct, through)


def test_pgjdbc_server_prepared_matches_server(regress_db, daemon, statements, java, tmp_path):
    props = ["ApplicationName=" + CLIENT_SETTINGS["application_name"]]
    direct = jdbc_run(java, tmp_path, statements,
                      f"jdbc:postgresql://127.0.0.1:{regress_db.port}/{DATABASE}",
                      props + [f"user={pgwtest.READER_ROLE}",
                               f"password={pgwtest.READER_PASSWORD}",
                               f"options={SERVER_SETTINGS}"], "direct")
    through = jdbc_run(java, tmp_path, statements,
                       f"jdbc:postgresql://127.0.0.1:{daemon.port}/{DATABASE}",
                       props + [f"user={USER}", f"password={PASSWORD}"], "pgwarden")
    check_driver("jdbc", statements, direct, through)


# ---------------------------------------------------------------------------------------------
# The splitting itself, on what the regression files hold.

def test_split_as_psql_does():
    text = r"""-- a comment psql drops
SELECT 'a;b', E'c\';d', "e;f", $x$ g; $x$ AS h;
\pset null '(null)'
SELECT (1;
2);
set standard_conforming_strings = off;
select 'i\';j' as k, U&'l\' as m;
reset standard_conforming_strings;
COPY t FROM STDIN;
1	data; not SQL
\.
CREATE FUNCTION f() RETURNS int LANGUAGE SQL
BEGIN ATOMIC
  SELECT CASE WHEN true THEN 1 END;
END;
\set v 'x y'
SELECT :'v', :"v", a[1:2], 1::int;
SELECT 3 \gset p_
\copy t from stdin
data; not SQL either
\.
SELECT 4"""
    items = rs.split(text)
    texts = [i.text({"v": "x y"}) for i in items if isinstance(i, rs.Statement)]
    assert texts == [
        "SELECT 'a;b', E'c\\';d', \"e;f\", $x$ g; $x$ AS h;",
        "SELECT (1;\n2);",
        "set standard_conforming_strings = off;",
        "select 'i\\';j' as k, U&'l\\' as m;",
        "reset standard_conforming_strings;",
        "COPY t FROM STDIN;",
        "CREATE FUNCTION f() RETURNS int LANGUAGE SQL\nBEGIN ATOMIC\n  SELECT CASE WHEN true "
        "THEN 1 END;\nEND;",
        "SELECT 'x y', \"x y\", a[1:2], 1::int;",
        "SELECT 3 ",
        "SELECT 4",
    ]
    assert [i.name for i in items if isinstance(i, rs.Meta)] == ["pset", "set", "copy"]
    assert [i.sender for i in items if isinstance(i, rs.Statement)][-2:] == ["gset", "eof"]
