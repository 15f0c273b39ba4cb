"""JDBC (Debian's pgjdbc with the installed JDK) through pgwarden. Where the answer is data, the same
program also runs straight against the server and both outputs must match."""

import uuid

import pytest

import pgwtest


def parse(output):
    facts = {}
    for line in output.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            facts[k] = v
    return facts


def run(java, scenario, url, *props, ok=True):
    r = java.run("JdbcCheck", scenario, url, *props)
    if ok:
        assert r.returncode == 0, r.stdout + r.stderr
    return parse(r.stdout)


def via_pgwarden(java, pgwarden, scenario, *props):
    url = f"jdbc:postgresql://127.0.0.1:{pgwarden.port}/{pgwtest.DATABASE}"
    return run(java, scenario, url, "user=core", f"password={pgwarden.passwords['core']}",
               *props)


def direct(java, pg, scenario):
    url = f"jdbc:postgresql://127.0.0.1:{pg.port}/{pgwtest.DATABASE}"
    return run(java, scenario, url, f"user={pgwtest.READER_ROLE}",
               f"password={pgwtest.READER_PASSWORD}")


def test_prepared_statement_parameter_types(java, pgwarden, pg):
    got = via_pgwarden(java, pgwarden, "types")
    assert got["row0"] == "42|it's \"quoted\" ünïcode|2024-02-29|12345.678901234567890|t|NULL|9000000000"
    assert got["row6"].startswith("48|")
    assert len({got[f"agg{i}"] for i in range(6)}) == 1
    assert got == direct(java, pg, "types")


def test_fetch_size_portal_suspension(java, pgwarden, pg):
    offset = pg.log_offset()
    got = via_pgwarden(java, pgwarden, "fetch")
    assert got == {"count": "10000", "sum": str(10000 * 10001 // 2), "ordered": "true"}
    # The server ran the portal in slices: it logs a re-execution of a suspended portal as
    # "execute fetch from".
    assert "execute fetch from" in pg.log_since(offset)


def test_database_metadata(java, pgwarden, pg):
    got = via_pgwarden(java, pgwarden, "metadata")
    tables = got["tables"].split(",")
    assert "fct_shipments" in tables and "pgbench_accounts" in tables
    assert got["columns"].startswith("id:int8,carrier:text,status:text,ship_date:date")
    assert got == direct(java, pg, "metadata")


def test_statement_cancel(java, pgwarden):
    got = via_pgwarden(java, pgwarden, "cancel")
    assert got["outcome"] == "error", got
    assert got["sqlstate"] == "57014"
    assert "user request" in got["message"]
    assert int(got["elapsed_ms"]) < 8000
    assert got["after"] == "after cancel"
    assert "cancel_thread_error" not in got


def test_batch_of_selects(java, pgwarden, pg):
    got = via_pgwarden(java, pgwarden, "batch")
    assert got["result0"] == "1;"
    assert got["result1"] == "two,2;"
    assert got["result2"] == "500;"
    assert got["result3"] == "1;2;3;"
    assert got["results"] == "4"
    assert got["after"] == "ok"
    assert got == direct(java, pg, "batch")


def test_errors_warnings_and_read_only(java, pgwarden, pg):
    before = pg.execute("select * from scratch order by id")
    got = via_pgwarden(java, pgwarden, "errors")
    assert got["div_sqlstate"] == "22012"
    assert got["insert_sqlstate"] == "25006"
    assert got["warning"] == "jdbc notice"
    assert got["after"] == "ok"
    assert pg.execute("select * from scratch order by id") == before


def test_identity_via_options_property(java, pgwarden, pg):
    tag = uuid.uuid4().hex[:10]
    offset = pg.log_offset()
    got = via_pgwarden(java, pgwarden, "identity",
                       f"options=-c agent_id=jdbc-{tag} -c conversation_id=conv-{tag}",
                       "ApplicationName=jdbc-app")
    assert got == {"application_name": "jdbc-app", "one": "1"}
    assert tag not in pg.log_since(offset)
    assert pgwtest.wait_for(lambda: f"jdbc-{tag}" in pgwarden.log(), 5)


def test_wrong_password(java, pgwarden):
    url = f"jdbc:postgresql://127.0.0.1:{pgwarden.port}/{pgwtest.DATABASE}"
    r = java.run("JdbcCheck", "identity", url, "user=agent", "password=wrong")
    assert r.returncode != 0
    assert 'password authentication failed for user "agent"' in r.stderr
