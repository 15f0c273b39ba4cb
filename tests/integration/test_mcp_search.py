"""Schema discovery on demand: the `search` tool finds tables, views and columns by name or comment,
ranked and bounded, only those the caller's group may read, at three levels of detail; and the
console's REFRESH CATALOG makes a new table known at once, as SIGHUP does."""

import time

import pytest

import pgwtest
from mcpsupport import McpHttp, start_mcp_daemon


@pytest.fixture(scope="module")
def mcpd(pgwarden_bin, pg):
    from conftest import DaemonSet
    daemons = DaemonSet(pgwarden_bin)

    def configure(cfg):
        cfg["admin_users"] = ["core"]
        cfg["upstream"]["stats_refresh"] = "1h"
        for g in cfg["groups"]["agents"]["guards"]:
            if g["kind"] == "tables":
                g["deny"].append("public.srch_secret")

    pg.execute("DROP TABLE IF EXISTS srch_parcels, srch_depots, srch_secret CASCADE", dbname=pgwtest.DATABASE)
    pg.execute("CREATE TABLE srch_depots (id int PRIMARY KEY, city text);"
               "COMMENT ON TABLE srch_depots IS 'warehouses a parcel leaves from';"
               "CREATE TABLE srch_parcels (id int PRIMARY KEY, depot_id int, weight_kg numeric);"
               "COMMENT ON COLUMN srch_parcels.weight_kg IS 'gross weight of the parcel in kilograms';"
               "CREATE VIEW srch_heavy_parcels AS SELECT * FROM srch_parcels WHERE weight_kg > 30;"
               "CREATE TABLE srch_secret (parcel_code text);"
               f"GRANT SELECT ON srch_depots, srch_parcels, srch_heavy_parcels, srch_secret TO {pgwtest.READER_ROLE}",
               dbname=pgwtest.DATABASE)
    try:
        daemon, tokens = start_mcp_daemon(daemons, pg, configure=configure)
        yield daemon, tokens
    finally:
        daemons.teardown()
        pg.execute("DROP TABLE IF EXISTS srch_parcels, srch_depots, srch_secret, srch_fresh CASCADE",
                   dbname=pgwtest.DATABASE)


def session(mcpd, user="agent"):
    daemon, tokens = mcpd
    c = McpHttp(daemon.mcp_port, tokens[user])
    c.initialize("2025-11-25")
    return c


def test_search_ranks_names_before_comments(mcpd):
    c = session(mcpd)
    r = c.tool("search", {"text": "parcel"})
    assert r["isError"] is False, r
    names = [m["name"] for m in r["structuredContent"]["matches"]]
    # Names starting with or holding the text come before the table found by its comment.
    assert names.index("public.srch_parcels") < names.index("public.srch_depots")
    assert "public.srch_heavy_parcels" in names
    assert all(set(m) == {"kind", "name"} for m in r["structuredContent"]["matches"])
    kinds = {m["name"]: m["kind"] for m in r["structuredContent"]["matches"]}
    assert kinds["public.srch_heavy_parcels"] == "view"
    # A table the group may not read is not found, by its name or its columns'.
    assert not [n for n in names if "srch_secret" in n]
    r = session(mcpd, "core").tool("search", {"text": "parcel"})
    assert "public.srch_secret.parcel_code" in [m["name"] for m in r["structuredContent"]["matches"]]


def test_search_finds_columns_by_comment_with_detail(mcpd):
    c = session(mcpd)
    r = c.tool("search", {"text": "KILOGRAMS", "detail": "summary"})
    matches = r["structuredContent"]["matches"]
    hit = [m for m in matches if m["name"] == "public.srch_parcels.weight_kg"]
    assert hit and hit[0]["kind"] == "column" and hit[0]["type"] == "numeric", matches
    assert "kilograms" in hit[0]["comment"] and hit[0]["score"] > 0
    r = c.tool("search", {"text": "weight_kg", "detail": "names", "limit": 1})
    s = r["structuredContent"]
    assert len(s["matches"]) == 1 and s["truncated"] is True and "next_step" in s
    assert s["matches"][0]["name"].endswith(".weight_kg")


def test_search_is_bounded_and_checked(mcpd):
    c = session(mcpd)
    r = c.tool("search", {"text": "x", "limit": 101})
    assert r["isError"] is True and r["structuredContent"]["code"] == "INVALID_ARGUMENTS"
    r = c.tool("search", {"text": "parcel", "detail": "everything"})
    assert r["isError"] is True and "detail" in r["structuredContent"]["message"]
    r = c.tool("search", {"text": "zz_nothing_named_so"})
    assert r["isError"] is False and r["structuredContent"]["matches"] == []
    r = c.tool("search", {"text": "it's"})  # a quote in the text is a character, not SQL
    assert r["isError"] is False


def test_search_refreshed_catalog_on_console_command(mcpd, pg):
    daemon, _ = mcpd
    c = session(mcpd)

    def listed():
        return {t["table"] for t in c.tool("list_tables", {"name_like": "srch_%"})["structuredContent"]["tables"]}

    deadline = time.monotonic() + 10
    while "srch_parcels" not in listed() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "srch_fresh" not in listed()
    pg.execute(f"CREATE TABLE srch_fresh (id int); GRANT SELECT ON srch_fresh TO {pgwtest.READER_ROLE}",
               dbname=pgwtest.DATABASE)
    res = pgwtest.psql(daemon.dsn(user="core", dbname="pgwarden"), "-c", "REFRESH CATALOG")
    assert res.returncode == 0 and "REFRESH" in res.stdout, res.stderr
    deadline = time.monotonic() + 10
    while "srch_fresh" not in listed() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "srch_fresh" in listed()
