"""pgbench -S through pgwarden in each query mode: it must run to completion with no failed
transaction. Throughput is reported (pytest -s shows it), never asserted."""

import re

import pytest

import pgwtest


@pytest.mark.parametrize("user", ["core", "agent"])
@pytest.mark.parametrize("mode", ["simple", "extended", "prepared"])
def test_pgbench_select_only(pgwarden, mode, user):
    """`core` has no guards; `agent` runs the example's agents group (every statement analysed)."""
    args = ["-h", "127.0.0.1", "-p", str(pgwarden.port), "-U", user, pgwtest.DATABASE]
    r = pgwtest.run_pgbench(args, mode, clients=4, seconds=3,
                            password=pgwarden.passwords[user])
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert f"query mode: {mode}" in out
    processed = re.search(r"number of transactions actually processed: (\d+)", out)
    failed = re.search(r"number of failed transactions: (\d+)", out)
    tps = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out)
    assert processed and failed and tps, out
    assert int(processed.group(1)) > 0
    assert int(failed.group(1)) == 0
    assert float(tps.group(1)) > 0
    assert "error" not in r.stderr.lower(), r.stderr
    print(f"pgbench -S -M {mode} -c 4 -T 3 through pgwarden as {user}: tps={tps.group(1)}")
