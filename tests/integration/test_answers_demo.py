"""The examples docs/answers.md shows on the demo's data (fct_shipments, scripts/fct_shipments.sql)
for the screens that read values: a LIKE pattern no value matches (UNKNOWN_VALUE), an empty result
whose conditions exclude each other (CONDITIONS_EXCLUDE), and a result that breaks the group's
result_assertions (ASSERTION_FAILED); each hint runs and shows what the warning says. Prints each
warning as psql would, for the docs."""

import json

import pytest

from conftest import DaemonSet

ASSERTIONS = {"result_assertions": [{"columns": "*_pct", "min": 0, "max": 100}]}


@pytest.fixture(scope="module")
def demo(pgwarden_bin, pg):
    daemons = DaemonSet(pgwarden_bin)
    try:
        # analysts: a masking group (region masked), declaring the same assertions.
        masked = dict(ASSERTIONS, masked_columns=["public.fct_shipments.region"])
        yield daemons.start(pg, overrides={"groups": {"passthrough": ASSERTIONS, "analysts": masked}})
    finally:
        daemons.teardown()


def _ask(demo, sql, user="core"):
    with demo.raw() as c:
        c.login(user, demo.passwords.get(user))
        rows, _, notices = c.query(sql)
    warnings = [n for n in notices if n.get("S") == "WARNING"]
    print(f"\n=> {sql};")
    for n in warnings:
        print(f"WARNING:  {n.get('M')}\nDETAIL:  {n.get('D')}\nHINT:  {n.get('H')}")
    print(rows)
    return rows, [(json.loads(n["D"])["code"], n) for n in warnings]


def test_a_pattern_no_value_matches(demo):
    rows, found = _ask(demo, "SELECT count(*) FROM fct_shipments WHERE carrier LIKE 'fed%'")
    assert rows[0][0] == "0"
    assert [code for code, _ in found] == ["UNKNOWN_VALUE"]
    n = found[0][1]
    assert "(ILIKE would match 'FedEx')" in n["M"], n["M"]
    assert n["H"] == "carrier ILIKE 'fed%'"
    rows, found = _ask(demo, f"SELECT count(*) FROM fct_shipments WHERE {n['H']}")
    assert int(rows[0][0]) > 0 and not found


def test_conditions_that_exclude_each_other(demo):
    rows, found = _ask(demo, "SELECT count(*) FROM fct_shipments WHERE status = 'DELAYED' AND carrier = 'UPS'")
    assert rows[0][0] == "0"
    assert [code for code, _ in found] == ["CONDITIONS_EXCLUDE"]
    n = found[0][1]
    detail = json.loads(n["D"])
    assert detail["conditions"] == ["status = 'DELAYED'", "carrier = 'UPS'"]
    assert all(int(r) > 1000 for r in detail["rows_alone"]), detail
    # The hint counts each condition alone: both match rows.
    rows, found = _ask(demo, n["H"])
    assert all(int(v) > 1000 for v in rows[0]) and not found
    # Conditions that do meet: silent.
    rows, found = _ask(demo, "SELECT count(*) FROM fct_shipments WHERE status = 'DELAYED' AND carrier = 'DHL'")
    assert int(rows[0][0]) > 0 and not found


RETURNED_PCT = ("SELECT carrier, count(*) FILTER (WHERE status = 'RETURNED') * 100.0 / count(*) * 100 AS "
                "returned_pct FROM fct_shipments GROUP BY carrier ORDER BY carrier")


def test_a_result_that_breaks_an_assertion(demo):
    sql = RETURNED_PCT
    rows, found = _ask(demo, sql)
    assert [code for code, _ in found] == ["ASSERTION_FAILED"]
    n = found[0][1]
    assert "row 5: returned_pct = 5000" in n["M"], n["M"]
    # The hint lists every offending row: USPS's.
    rows, again = _ask(demo, n["H"])
    assert [r[0] for r in rows] == ["USPS"]
    rows, found = _ask(demo, sql.replace(" * 100 AS", " AS"))
    assert not found


def test_a_masking_group_checks_no_assertions(demo):
    """A breach names the value, and the rows are checked before masking replaces masked values:
    a group with masked_columns does not check its result_assertions."""
    rows, found = _ask(demo, RETURNED_PCT, user="md5user")
    assert len(rows) == 5 and not [code for code, _ in found if code == "ASSERTION_FAILED"], found
