"""Fixtures of the integration suite: one PostgreSQL 15 per test session (per ctest entry), one
pgwarden per test module, factories for tests that need their own daemon or their own server, and
the JDBC program runner. The daemon binary comes from $PGWARDEN_BIN (ctest passes the built one)."""

import os
import pathlib

import pytest

import pgwtest


def _binary():
    env = os.environ.get("PGWARDEN_BIN")
    if env:
        return pathlib.Path(env)
    return pgwtest.REPO_ROOT / "build" / "daemon" / "pgwarden"


@pytest.fixture(scope="session")
def pgwarden_bin():
    path = _binary()
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"pgwarden binary not found at {path} (set PGWARDEN_BIN)", pytrace=False)
    return path


@pytest.fixture(scope="session")
def pg():
    """The shared PostgreSQL: fct_shipments (200k rows), pgbench scale 1, the reader role."""
    cluster = pgwtest.PgCluster()
    try:
        cluster.init()
        cluster.start()
        cluster.load_fixture_data(rows=int(os.environ.get("PGW_TEST_ROWS", "200000")))
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def pg_factory():
    """Private PostgreSQL clusters for tests that stop or restart the server."""
    made = []

    def make(rows=10_000):
        cluster = pgwtest.PgCluster(prefix="pgw-pgown-")
        made.append(cluster)
        cluster.init()
        cluster.start()
        cluster.load_fixture_data(rows=rows)
        return cluster

    yield make
    for cluster in made:
        cluster.destroy()


def module_daemon(binary, start):
    """For a module-scoped fixture: yields `start(daemons)`, the module's own daemon started
    through a DaemonSet, and tears it down (exit status and sanitizer report checked) after."""
    daemons = DaemonSet(binary)
    try:
        yield start(daemons)
    finally:
        daemons.teardown()


class DaemonSet:
    """Daemons started by one test or module; each must exit 0 on SIGTERM at teardown."""

    def __init__(self, binary):
        self.binary = binary
        self.daemons = []

    def start(self, pg, overrides=None, users=None, start=True):
        daemon = pgwtest.Pgwarden(self.binary, pg, overrides=overrides, users=users)
        self.daemons.append(daemon)
        if start:
            daemon.start()
        return daemon

    def teardown(self):
        problems = []
        for d in self.daemons:
            try:
                if d.proc is None:
                    continue  # never started
                if d.stopped_by_test:
                    pass  # the test stopped it and judged the exit itself
                elif d.proc.poll() is not None:
                    problems.append(f"pgwarden exited on its own with status {d.proc.returncode}"
                                    f"; log tail:\n{d.log()[-4000:]}")
                else:
                    code = d.stop()
                    if code != 0:
                        problems.append(f"pgwarden exited with status {code} on SIGTERM; log "
                                        "tail:\n" + d.log()[-4000:])
                # A sanitizer build reports to the log; a report fails the test even when the
                # exit status (judged by the test, or UBSan without halt_on_error) did not.
                report = pgwtest.sanitizer_report(d.log())
                if report:
                    problems.append("sanitizer report in the daemon's log:\n" + report)
            finally:
                d.destroy()
        if problems:
            pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture(scope="module")
def pgwarden(pgwarden_bin, pg):
    """One daemon per test module, with the example config's groups plus `passthrough` (no
    guards), and four users: agent (SCRAM, group agents), core (SCRAM, group passthrough),
    analyst (trust, Unix socket only, group analysts), md5user (md5, group analysts)."""
    daemons = DaemonSet(pgwarden_bin)
    try:
        yield daemons.start(pg)
    finally:
        daemons.teardown()


@pytest.fixture
def pgwarden_factory(pgwarden_bin):
    daemons = DaemonSet(pgwarden_bin)
    yield daemons
    daemons.teardown()


@pytest.fixture(autouse=True)
def _shared_daemon_survives(request):
    """A test may do anything to its connection; the module's daemon must still be running."""
    yield
    if "pgwarden" in request.fixturenames:
        daemon = request.getfixturevalue("pgwarden")
        assert daemon.alive(), ("pgwarden died during this test; log tail:\n"
                                + daemon.log()[-4000:])


@pytest.fixture(scope="session")
def java():
    runner = pgwtest.JavaRunner()
    yield runner
    runner.destroy()
