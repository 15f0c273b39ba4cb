"""What an operator's tools read of a running daemon: logging.format json gives one JSON object
per line, the process figures are under the standard process_* names, and
pgwarden_config_last_reload_successful follows SIGHUP reloads (0 after a rejected file, 1 and a
newer timestamp after a good one)."""

import json
import re
import signal
import urllib.request

import pgwtest


def metric(d, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=5).read()
    m = re.search(rb"^" + name.encode() + rb" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def test_json_log_lines_parse_and_carry_time_level_message(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg, overrides={"logging": {"level": "info", "format": "json"}})
    conn = d.connect(user="core", application_name="json-\"quoted\"\napp")
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
    conn.close()
    assert d.stop(by_test=True) == 0
    lines = [l for l in d.log().splitlines() if l.strip()]
    assert len(lines) > 3, d.log()
    for line in lines:
        record = json.loads(line)  # every line is one JSON object
        assert set(record) == {"time", "level", "message"}, record
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["time"])
        assert record["level"] in ("trace", "debug", "info", "warning", "error", "critical")
    messages = [json.loads(l)["message"] for l in lines]
    assert any("shutting down" in m for m in messages), messages


def test_standard_process_metrics_and_the_reload_gauge(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg)
    for name in ("process_resident_memory_bytes", "process_open_fds", "process_max_fds",
                 "process_cpu_seconds_total", "process_start_time_seconds"):
        assert metric(d, name) is not None and metric(d, name) >= 0, name
    assert metric(d, "pgwarden_config_last_reload_successful") == 1
    first = metric(d, "pgwarden_config_last_reload_success_timestamp_seconds")
    assert first > 0

    good = d.config_path.read_text()
    d.config_path.write_text(good + "\nnot_a_key: 1\n")
    d.send_signal(signal.SIGHUP)
    assert pgwtest.wait_for(lambda: metric(d, "pgwarden_config_last_reload_successful") == 0)
    assert metric(d, "pgwarden_config_last_reload_success_timestamp_seconds") == first

    d.write_config(good)
    d.send_signal(signal.SIGHUP)
    assert pgwtest.wait_for(lambda: metric(d, "pgwarden_config_last_reload_successful") == 1)
    assert metric(d, "pgwarden_config_last_reload_success_timestamp_seconds") >= first
