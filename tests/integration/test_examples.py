"""The example configs of packaging/examples/: each one passes --check-config and starts against a
real PostgreSQL, and an agent gets an answer through it. Only what belongs to this machine is
changed (addresses, ports, paths, certificates, the server's name and TLS); secrets reach the
daemon through the environment, as the examples write them (${NAME}), and an unset one is an
error naming the variable."""

import os
import re
import shutil
import subprocess

import psycopg2
import pytest
import yaml

import pgwtest
import writesupport
from agentsupport import PolicyService
from test_tls import _make_ca, _make_leaf

EXAMPLES = sorted((pgwtest.REPO_ROOT / "packaging" / "examples").glob("*.yaml"))
WRITER_ROLE = "pgwarden_example_writer"
WRITER_PASSWORD = "writer-example-pw"


def test_there_are_examples():
    names = {p.name for p in EXAMPLES}
    assert {"mcp-only.yaml", "tls.yaml", "history-postgres.yaml", "budgets.yaml",
            "guarded-writes.yaml", "many-agents.yaml"} <= names, names


@pytest.fixture(scope="module")
def certs():
    d = pgwtest.make_tempdir("pgw-ex-tls-")
    d.chmod(0o755)
    _make_ca(d, "ca")
    _make_leaf(d, "server", "ca", "localhost", "DNS:localhost,IP:127.0.0.1")
    _make_leaf(d, "client", "ca", "agent")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def policy():
    service = PolicyService()
    yield service
    service.close()


def _localise(cfg, daemon, pg, certs, policy):
    """The example with this machine's addresses, ports, paths and files."""
    listen = {"addresses": [f"127.0.0.1:{daemon.port}"]}
    if "unix_socket_dir" in cfg.get("listen", {}):
        listen["unix_socket_dir"] = str(daemon.sockdir)
    cfg["listen"] = listen
    cfg["daemon"]["state_dir"] = str(daemon.dir)
    up = cfg["upstream"]
    up.update(host="127.0.0.1", port=pg.port, user=pgwtest.READER_ROLE)
    if "password_file" in up:
        pwfile = daemon.dir / "upstream.password"
        pwfile.write_text(pgwtest.READER_PASSWORD + "\n")
        pwfile.chmod(0o600)
        up["password_file"] = str(pwfile)
    # The test cluster speaks no TLS; the client side of tls.yaml is tested below.
    up.pop("sslmode", None)
    up.pop("sslrootcert", None)
    if "tls" in cfg:
        cfg["tls"].update(cert_file=str(certs / "server.crt"), key_file=str(certs / "server.key"),
                          ca_file=str(certs / "ca.crt"))
    if "metrics" in cfg:
        cfg["metrics"]["listen"] = f"127.0.0.1:{daemon.metrics_port}"
    else:
        cfg["metrics"] = {"listen": f"127.0.0.1:{daemon.metrics_port}"}
    if "mcp" in cfg:
        cfg["mcp"]["listen"] = f"127.0.0.1:{pgwtest.free_port()}"
        cfg["mcp"]["database"] = pgwtest.DATABASE
    history = cfg.get("history", {})
    if history.get("store") == "sqlite":
        history["path"] = str(daemon.dir / "history.db")
    elif history.get("store") == "postgres":
        # The password stays a ${NAME} reference, as in the example.
        history["dsn"] = re.sub(r"host=\S+ dbname=\S+ user=\S+",
                                f"host=127.0.0.1 port={pg.port} dbname=postgres user=postgres",
                                history["dsn"])
    for group in cfg["groups"].values():
        for guard in group.get("guards", []):
            if guard.get("kind") == "http_webhook":
                guard["url"] = policy.url("/allow")
    # A password this test knows for the first user.
    password = "example-" + os.urandom(4).hex()
    cfg["users"][0]["password"] = pgwtest.scram_verifier(password)
    return cfg["users"][0]["name"], password


def _environment():
    """The secrets the examples read from the environment."""
    env = dict(os.environ)
    env.update({"PGWARDEN_UPSTREAM_PASSWORD": pgwtest.READER_PASSWORD,
                "PGWARDEN_HISTORY_PASSWORD": pgwtest.SUPERUSER_PASSWORD,
                "PGWARDEN_WRITER_PASSWORD": WRITER_PASSWORD,
                "PGWARDEN_WEBHOOK_AUTHORIZATION": "Bearer example"})
    return env


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_checks_and_serves(example, pgwarden_bin, pg, pgwarden_factory, certs, policy,
                                   monkeypatch):
    text = example.read_text()
    # As shipped: the keys are all known (an unknown key fails before any file is looked at).
    shipped = subprocess.run([str(pgwarden_bin), "--check-config", str(example)],
                             capture_output=True, text=True, timeout=30, env=_environment())
    assert "unknown key" not in shipped.stderr, shipped.stderr

    if "write_user" in text:
        writesupport.create_write_role(pg, WRITER_ROLE, WRITER_PASSWORD)
    daemon = pgwarden_factory.start(pg, start=False)
    cfg = yaml.safe_load(text)
    if "write_user" in cfg["upstream"]:
        cfg["upstream"]["write_user"] = WRITER_ROLE
    user, password = _localise(cfg, daemon, pg, certs, policy)
    daemon.config = cfg
    daemon.write_config()  # ${NAME} references are written as they are
    env = _environment()

    # A secret the example reads from the environment, unset: refused, naming it.
    if "${PGWARDEN_UPSTREAM_PASSWORD}" in text:
        unset = {k: v for k, v in env.items() if k != "PGWARDEN_UPSTREAM_PASSWORD"}
        r = subprocess.run([str(pgwarden_bin), "--check-config", str(daemon.config_path)],
                           capture_output=True, text=True, timeout=30, env=unset)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "upstream.password: environment variable PGWARDEN_UPSTREAM_PASSWORD is not set" \
            in r.stderr, r.stderr

    r = subprocess.run([str(pgwarden_bin), "--check-config", str(daemon.config_path)],
                       capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 0, r.stdout + r.stderr

    for k, v in env.items():
        if k.startswith("PGWARDEN_") and k not in os.environ:
            monkeypatch.setenv(k, v)
    daemon.start()
    extra = {}
    if "tls" in cfg:
        extra = {"sslmode": "verify-full", "sslrootcert": str(certs / "ca.crt"),
                 "sslcert": str(certs / "client.crt"), "sslkey": str(certs / "client.key")}
    conn = psycopg2.connect(daemon.dsn(user=user, password=password,
                                       host="localhost" if extra else "127.0.0.1", **extra))
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
    conn.close()
    assert daemon.stop(by_test=True) == 0, daemon.log()
