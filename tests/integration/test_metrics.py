"""The daemon's metrics endpoint against real traffic: the exposition passes promtool, counters move
with the statements clients send (a denial moves exactly the right series), /healthz and /readyz
answer, a real Prometheus scrapes it and answers a rate() query, and every metric the Grafana
dashboard charts is in the live output."""

import json
import pathlib
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import psycopg2
import pytest

import pgwtest

DASHBOARD = pgwtest.REPO_ROOT / "packaging" / "grafana" / "pgwarden-dashboard.json"
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def http_get(port, path, timeout=5):
    """(status, body) of GET http://127.0.0.1:port/path, errors included."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(daemon):
    status, body = http_get(daemon.metrics_port, "/metrics")
    assert status == 200, body
    return body


def samples(text):
    """{(name, frozenset(labels)): value} for every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"unparsable sample line: {line!r}"
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def diff(before, after, name):
    """The series of `name` whose value changed, with the change."""
    changed = {}
    for key, v in after.items():
        if key[0] != name:
            continue
        d = v - before.get(key, 0.0)
        if d:
            changed[key[1]] = d
    return changed


def total(s, name, **labels):
    want = set(labels.items())
    return sum(v for (n, ls), v in s.items() if n == name and want <= set(ls))


@pytest.fixture(scope="module")
def daemon(pgwarden):
    return pgwarden


def run(daemon, user, sql):
    conn = daemon.connect(user=user)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall() if cur.description else None
    finally:
        conn.close()


def test_promtool_accepts_live_output_after_traffic(daemon):
    run(daemon, "core", "SELECT 1")
    with pytest.raises(psycopg2.Error):
        run(daemon, "agent", "DELETE FROM fct_shipments")
    text = scrape(daemon)
    res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                         text=True, timeout=30)
    # promtool exits 0 on success; its lint warnings (none expected) go to stdout/stderr.
    assert res.returncode == 0, res.stdout + res.stderr
    assert "pgwarden_statements_total{" in text
    assert "pgwarden_build_info{" in text


def test_denied_statement_moves_exactly_its_series(daemon):
    before = samples(scrape(daemon))
    with pytest.raises(psycopg2.Error) as err:
        run(daemon, "agent", "DELETE FROM fct_shipments WHERE id = 1")
    assert err.value.pgcode == "42501", err.value
    after = samples(scrape(daemon))

    stmts = diff(before, after, "pgwarden_statements_total")
    # Denied: it reached no server.
    assert stmts == {frozenset({("group", "agents"), ("outcome", "denied"),
                                ("intent", "write"), ("host", "none")}): 1.0}, stmts
    decisions = diff(before, after, "pgwarden_guard_decisions_total")
    assert decisions == {frozenset({("group", "agents"), ("guard", "read_only"),
                                    ("action", "deny"), ("code", "READ_ONLY")}): 1.0}, decisions
    # A denial never reaches the server: no rows, no upstream error.
    assert diff(before, after, "pgwarden_rows_returned_total") == {}
    assert diff(before, after, "pgwarden_upstream_server_errors_total") == {}
    durations = diff(before, after, "pgwarden_statement_duration_seconds_count")
    assert durations == {frozenset({("group", "agents"), ("outcome", "denied")}): 1.0}


def test_guard_evaluation_is_timed_by_guard_kind(daemon):
    before = samples(scrape(daemon))
    with pytest.raises(psycopg2.Error):
        run(daemon, "agent", "DELETE FROM fct_shipments WHERE id = 2")  # read_only stops the chain
    after = samples(scrape(daemon))
    counts = diff(before, after, "pgwarden_guard_duration_seconds_count")
    # The chain stopped at its first guard, so exactly that guard kind was timed, once.
    assert counts == {frozenset({("guard", "read_only")}): 1.0}, counts
    # Both external guard kinds are exported (at zero: the example's groups have none).
    for kind in ("lua", "webhook"):
        assert (("pgwarden_external_guard_calls_total", frozenset({("kind", kind)}))) in after
    # A statement the whole chain allows times every guard kind of the group once.
    before = after
    run(daemon, "agent", "SELECT id FROM fct_shipments WHERE id = 3")
    counts = diff(before, samples(scrape(daemon)), "pgwarden_guard_duration_seconds_count")
    assert counts and set(counts.values()) == {1.0}, counts
    assert frozenset({("guard", "require_predicate")}) in counts, counts


def test_a_text_sent_again_reuses_its_plan_and_is_still_counted_each_time(daemon):
    """The `agents` group is all built-in guards, so its plan of a text seen before is kept: from
    the third time on the chain does not run, yet each statement is counted, capped and denied
    alike. One connection: a session stays on its loop, and each loop keeps plans of its own."""
    sql = "SELECT id, carrier FROM fct_shipments WHERE id BETWEEN 10 AND 1500"
    conn = daemon.connect(user="agent")
    conn.autocommit = True

    def query(text):
        with conn.cursor() as cur:
            cur.execute(text)
            return cur.fetchall()

    before = samples(scrape(daemon))
    try:
        rows = [query(sql) for _ in range(4)]
        with pytest.raises(psycopg2.Error) as err:
            query("SELECT * FROM fct_shipments")
        query("SELECT id FROM fct_shipments WHERE id = 7")
        with pytest.raises(psycopg2.Error):
            query("SELECT * FROM fct_shipments")
        with pytest.raises(psycopg2.Error) as again:
            query("SELECT * FROM fct_shipments")
    finally:
        conn.close()
    after = samples(scrape(daemon))
    # The same answer each time, cut at the group's max_rows like the first.
    assert [len(r) for r in rows] == [1000] * 4
    assert rows[0] == rows[1] == rows[2] == rows[3]
    # require_predicate's denial, word for word the second time.
    assert err.value.pgcode == again.value.pgcode == "54000", err.value.pgerror
    assert err.value.pgerror == again.value.pgerror
    # Misses: each text's first two sightings (the second keeps the plan), the one-off once.
    # Hits: the 3rd and 4th capped read and the 3rd denial.
    assert diff(before, after, "pgwarden_plan_cache_lookups_total") == {
        frozenset({("result", "hit")}): 3.0, frozenset({("result", "miss")}): 5.0}
    # The chain ran only for the misses.
    counts = diff(before, after, "pgwarden_guard_duration_seconds_count")
    assert counts[frozenset({("guard", "read_only")})] == 5.0, counts
    stmts = diff(before, after, "pgwarden_statements_total")
    assert sum(v for k, v in stmts.items() if ("outcome", "ok") in k) == 5.0, stmts
    assert sum(v for k, v in stmts.items() if ("outcome", "denied") in k) == 3.0, stmts
    assert sum(diff(before, after, "pgwarden_statements_truncated_total").values()) == 4.0


def test_texts_of_one_shape_run_only_the_guards_that_read_literals(daemon):
    """pgbench's simple mode sends one statement with a new literal each time. From the shape's
    third text on, the analysis comes from the shape's template; once the guards that never read a
    literal (read_only, tables, require_predicate, ...) have had nothing to say about one such
    text, the next texts run only the guards that do (row_limit, functions), and get the very
    answer the whole chain gives. One connection: each loop remembers its own shapes."""
    conn = daemon.connect(user="agent")
    conn.autocommit = True
    texts = [f"SELECT carrier, id FROM fct_shipments WHERE id >= {n}"
             for n in range(101, 107)]
    before = samples(scrape(daemon))
    try:
        with conn.cursor() as cur:
            rows = []
            for t in texts:
                cur.execute(t)
                rows.append(cur.fetchall())
            # The same shape with a LIMIT over the group's max_limit: row_limit still runs.
            with pytest.raises(psycopg2.Error) as err:
                cur.execute("SELECT carrier, id FROM fct_shipments WHERE id >= 101 LIMIT 50000")
    finally:
        conn.close()
    after = samples(scrape(daemon))
    # Capped at max_rows by the row cap in the SQL, every time.
    assert [len(r) for r in rows] == [1000] * 6
    assert err.value.pgcode == "54000", err.value.pgerror
    assert "LIMIT 50000" in err.value.pgerror
    # Three whole chains (the shape seen, its template made, its blind guards found quiet), then
    # three texts judged by shape; the LIMIT text is another shape.
    lookups = diff(before, after, "pgwarden_plan_cache_lookups_total")
    assert lookups == {frozenset({("result", "miss")}): 4.0,
                       frozenset({("result", "shape")}): 3.0}, lookups
    counts = diff(before, after, "pgwarden_guard_duration_seconds_count")
    assert counts[frozenset({("guard", "read_only")})] == 4.0, counts
    assert counts[frozenset({("guard", "row_limit")})] == 7.0, counts
    stmts = diff(before, after, "pgwarden_statements_total")
    assert sum(v for k, v in stmts.items() if ("outcome", "ok") in k) == 6.0, stmts


def test_counters_move_as_traffic_flows(daemon):
    before = samples(scrape(daemon))
    rows = run(daemon, "core", "SELECT g FROM generate_series(1, 7) g")
    assert len(rows) == 7
    with pytest.raises(psycopg2.Error):
        run(daemon, "core", "SELECT 1/0")
    with pytest.raises(psycopg2.OperationalError):
        daemon.connect(user="core", password="wrong-password")
    after = samples(scrape(daemon))

    ok = diff(before, after, "pgwarden_statements_total")
    assert sum(v for k, v in ok.items() if ("outcome", "ok") in k) == 1.0, ok
    assert all(("group", "passthrough") in k for k in ok), ok
    assert all(("host", "primary") in k for k in ok), ok  # both ran on the server
    assert sum(v for k, v in ok.items() if ("outcome", "error") in k) == 1.0, ok
    assert total(after, "pgwarden_rows_returned_total", group="passthrough") - \
        total(before, "pgwarden_rows_returned_total", group="passthrough") == 7
    # Division by zero is SQLSTATE 22012: class 22.
    assert diff(before, after, "pgwarden_upstream_server_errors_total") == {
        frozenset({("sqlstate_class", "22")}): 1.0}
    assert total(after, "pgwarden_client_connections_accepted_total") - \
        total(before, "pgwarden_client_connections_accepted_total") == 3
    assert diff(before, after, "pgwarden_client_connections_rejected_total") == {
        frozenset({("reason", "auth_failure")}): 1.0}
    # The history writer is counted from the recorder (records are written asynchronously).
    assert total(after, "pgwarden_history_records_written_total", store="sqlite") + \
        total(after, "pgwarden_history_queue_depth", store="sqlite") >= 2


def test_connection_gauges_follow_sessions(daemon):
    conn = daemon.connect(user="core")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
        s = samples(scrape(daemon))
        assert total(s, "pgwarden_client_connections", state="idle") >= 1
        pools = {dict(k[1])["pool"] for k in s if k[0] == "pgwarden_server_connections"}
        assert any(p.endswith("/analytics") for p in pools), pools
        assert total(s, "pgwarden_server_connections") >= 1
    finally:
        conn.close()


def test_health_and_readiness(daemon):
    status, body = http_get(daemon.metrics_port, "/healthz")
    assert status == 200 and body.strip() == "ok", (status, body)
    run(daemon, "core", "SELECT 1")  # the upstream has answered a login
    status, body = http_get(daemon.metrics_port, "/readyz")
    assert status == 200, body
    assert http_get(daemon.metrics_port, "/nope")[0] == 404


def test_readiness_fails_when_upstream_is_down(pgwarden_factory, pg_factory):
    own = pg_factory(rows=100)
    d = pgwarden_factory.start(own)
    d.connect(user="core").close()
    assert http_get(d.metrics_port, "/readyz")[0] == 200
    own.stop()
    # Pooled connections die with the server; the next login fails.
    with pytest.raises(psycopg2.OperationalError):
        d.connect(user="core")
    assert pgwtest.wait_for(lambda: http_get(d.metrics_port, "/readyz")[0] == 503, timeout=10)
    status, body = http_get(d.metrics_port, "/readyz")
    assert "upstream" in body
    own.start()


def test_dashboard_metrics_exist_in_live_output(daemon):
    run(daemon, "core", "SELECT 1")
    text = scrape(daemon)
    present = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name = line.split()[2]
            present.add(name)
            if line.split()[3] == "histogram":
                present.update({name + "_bucket", name + "_sum", name + "_count"})
        elif line and not line.startswith("#"):
            present.add(SAMPLE.match(line).group(1))
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("expr", "query", "definition") and isinstance(v, str):
                    exprs.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(dashboard)
    names = set()
    for e in exprs:
        names.update(re.findall(r"\bpgwarden_[a-zA-Z0-9_]+", e))
    assert len(names) >= 10, names
    missing = sorted(n for n in names if n not in present)
    assert not missing, f"the dashboard queries metrics the daemon does not export: {missing}"


def test_real_prometheus_scrapes_and_answers_rate_query(daemon):
    prom = shutil.which("prometheus") or "/usr/bin/prometheus"
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="pgw-prom-"))
    port = pgwtest.free_port()
    (workdir / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: pgwarden\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{daemon.metrics_port}']\n")
    log = open(workdir / "prometheus.log", "wb")
    proc = subprocess.Popen([prom, f"--config.file={workdir / 'prometheus.yml'}",
                             f"--storage.tsdb.path={workdir / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        query = urllib.parse.quote("sum(rate(pgwarden_statements_total[1m]))")
        result = None
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline:
            run(daemon, "core", "SELECT 1")
            try:
                status, body = http_get(port, f"/api/v1/query?query={query}", timeout=2)
            except OSError:
                time.sleep(0.5)
                continue
            if status == 200:
                doc = json.loads(body)
                if doc["status"] == "success" and doc["data"]["result"]:
                    result = doc["data"]["result"]
                    break
            time.sleep(0.5)
        assert result, "Prometheus returned no data; its log:\n" + \
            (workdir / "prometheus.log").read_text(errors="replace")[-3000:]
        assert float(result[0]["value"][1]) > 0
        status, body = http_get(port, "/api/v1/targets")
        targets = json.loads(body)["data"]["activeTargets"]
        assert targets and targets[0]["health"] == "up", targets
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)
