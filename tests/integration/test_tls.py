"""TLS both ways against a test CA made here with the openssl CLI: psql and JDBC with
sslmode=verify-full through pgwarden, tls.mode require refusing cleartext with a FATAL, client
certificates checked against tls.ca_file, plaintext pipelined behind an SSLRequest refused, and
upstream.sslmode against a PostgreSQL of the test's own running with ssl=on."""

import os
import pwd
import shutil
import socket
import struct
import subprocess

import pytest

import pgwtest
from conftest import DaemonSet

SSL_REQUEST = struct.pack("!II", 8, 80877103)
REQUIRE_MESSAGE = "pgwarden requires TLS: connect with sslmode=require"


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_ca(d, name):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj",
             f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _make_leaf(d, name, ca, cn, san=None):
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
    ext = d / f"{name}.ext"
    ext.write_text("basicConstraints=CA:FALSE\n" + (f"subjectAltName={san}\n" if san else ""))
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", ext.name, cwd=d)
    (d / f"{name}.key").chmod(0o600)


@pytest.fixture(scope="module")
def certs():
    d = pgwtest.make_tempdir("pgw-tls-")
    d.chmod(0o755)
    _make_ca(d, "ca")
    _make_ca(d, "otherca")
    _make_leaf(d, "server", "ca", "localhost", "DNS:localhost,IP:127.0.0.1")
    _make_leaf(d, "client", "ca", "core")
    _make_leaf(d, "stranger", "otherca", "core")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _tls_section(certs, mode="require", ca=True):
    section = {"mode": mode, "cert_file": str(certs / "server.crt"),
               "key_file": str(certs / "server.key")}
    if ca:
        section["ca_file"] = str(certs / "ca.crt")
    return section


@pytest.fixture(scope="module")
def tls_daemon(pgwarden_bin, pg, certs):
    daemons = DaemonSet(pgwarden_bin)
    try:
        yield daemons.start(pg, overrides={"tls": _tls_section(certs)})
    finally:
        daemons.teardown()


def _verify_full(daemon, certs, host="localhost", **extra):
    return daemon.dsn(host=host, sslmode="verify-full", sslrootcert=str(certs / "ca.crt"),
                      **extra)


def test_psql_verify_full_through_pgwarden(tls_daemon, certs):
    for host in ("localhost", "127.0.0.1"):  # the name and the IP address in the SAN
        r = pgwtest.psql(_verify_full(tls_daemon, certs, host=host), "-At", "-c", r"\conninfo",
                         "-c", "SELECT count(*) FROM fct_shipments WHERE 1 = 1")
        assert r.returncode == 0, r.stderr
        assert "SSL connection (protocol: TLSv1.3" in r.stdout, r.stdout
        assert int(r.stdout.strip().splitlines()[-1]) > 0


def test_verify_full_refuses_a_name_the_certificate_does_not_hold(tls_daemon, certs):
    # The certificate holds localhost and 127.0.0.1; the client asks for another name.
    dsn = tls_daemon.dsn(host="127.0.0.1", hostaddr="127.0.0.1", sslmode="verify-full",
                         sslrootcert=str(certs / "otherca.crt"))
    r = pgwtest.psql(dsn, "-c", "SELECT 1")
    assert r.returncode != 0
    assert "certificate verify failed" in r.stderr, r.stderr
    assert tls_daemon.alive()


def test_require_refuses_plaintext_with_a_fatal(tls_daemon, certs):
    r = pgwtest.psql(tls_daemon.dsn(sslmode="disable"), "-c", "SELECT 1")
    assert r.returncode != 0
    assert REQUIRE_MESSAGE in r.stderr, r.stderr
    with tls_daemon.raw() as c:
        c.send_startup({"user": "core", "database": pgwtest.DATABASE})
        tag, body = c.read_msg()
        assert tag == b"E"
        fields = pgwtest.parse_fields(body)
        assert fields.get("C") == "28000" and fields.get("S") == "FATAL", fields
        assert fields.get("M") == REQUIRE_MESSAGE
    # The Unix socket is not subject to tls.mode (libpq never asks for TLS there).
    r = pgwtest.psql(tls_daemon.dsn(user="analyst", host=str(tls_daemon.sockdir)), "-At",
                     "-c", "SELECT 1")
    assert r.returncode == 0, r.stderr


def test_jdbc_verify_full(tls_daemon, certs, java):
    url = (f"jdbc:postgresql://localhost:{tls_daemon.port}/{pgwtest.DATABASE}"
           f"?ssl=true&sslmode=verify-full&sslrootcert={certs / 'ca.crt'}")
    r = java.run("TlsCheck", url, "user=core", f"password={tls_daemon.passwords['core']}")
    assert "ok=true" in r.stdout, r.stdout + r.stderr
    # Same driver without TLS: refused with the FATAL's SQLSTATE.
    url = f"jdbc:postgresql://localhost:{tls_daemon.port}/{pgwtest.DATABASE}?sslmode=disable"
    r = java.run("TlsCheck", url, "user=core", f"password={tls_daemon.passwords['core']}")
    assert "ok=false" in r.stdout and "sqlstate=28000" in r.stdout, r.stdout + r.stderr
    assert REQUIRE_MESSAGE in r.stdout


def test_client_certificate_verified_against_ca_file(tls_daemon, certs):
    good = _verify_full(tls_daemon, certs, sslcert=str(certs / "client.crt"),
                        sslkey=str(certs / "client.key"))
    r = pgwtest.psql(good, "-At", "-c", "SELECT 1")
    assert r.returncode == 0, r.stderr
    bad = _verify_full(tls_daemon, certs, sslcert=str(certs / "stranger.crt"),
                       sslkey=str(certs / "stranger.key"))
    r = pgwtest.psql(bad, "-At", "-c", "SELECT 1")
    assert r.returncode != 0
    assert "certificate" in r.stderr.lower() or "alert" in r.stderr.lower(), r.stderr
    assert "TLS: TLS handshake failed" in tls_daemon.log()


def test_plaintext_pipelined_after_sslrequest_is_refused(tls_daemon):
    # A StartupMessage sent in the same packet as the SSLRequest, before any 'S' came back: a
    # man in the middle's injected cleartext must not be read as if it came through TLS.
    body = struct.pack("!I", 196608) + b"user\0core\0database\0" + pgwtest.DATABASE.encode() + b"\0\0"
    startup = struct.pack("!I", len(body) + 4) + body
    with tls_daemon.raw() as c:
        c.send(SSL_REQUEST + startup)
        first = c.read_byte()
        assert first == b"E", f"expected a refusal, got {first!r}"
        c.buf = first + c.buf
        tag, msg = c.read_msg()
        fields = pgwtest.parse_fields(msg)
        assert fields.get("C") == "08P01", fields
        assert "unencrypted data after SSL request" in fields.get("M", "")
    assert "unencrypted data after SSL request" in tls_daemon.log()
    assert tls_daemon.alive()


def test_garbage_where_the_handshake_belongs(tls_daemon):
    with tls_daemon.raw() as c:
        c.send(SSL_REQUEST)
        assert c.read_byte() == b"S"
        c.send_tolerant(b"\0\0\0\x08\x04\xd2\x16\x2f" * 4)  # not a TLS record
        try:
            data = c.sock.recv(4096)
        except (ConnectionResetError, socket.timeout):
            data = b""
        assert not data.startswith(b"R")  # no authentication request in clear
    assert tls_daemon.alive()


def test_allow_mode_takes_both(pgwarden_factory, pg, certs):
    d = pgwarden_factory.start(pg, overrides={"tls": _tls_section(certs, mode="allow", ca=False)})
    r = pgwtest.psql(d.dsn(sslmode="disable"), "-At", "-c", "SELECT 1")
    assert r.returncode == 0, r.stderr
    r = pgwtest.psql(_verify_full(d, certs), "-At", "-c", r"\conninfo")
    assert r.returncode == 0 and "SSL connection" in r.stdout, r.stdout + r.stderr


def test_bad_certificate_config_is_refused(pgwarden_bin, pg, certs):
    d = pgwtest.Pgwarden(pgwarden_bin, pg, overrides={"tls": {
        "mode": "require", "cert_file": str(certs / "server.crt"),
        "key_file": str(certs / "client.key")}})
    try:
        r = subprocess.run([str(pgwarden_bin), "--check-config", str(d.config_path)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0
        assert "tls" in (r.stdout + r.stderr) and "mismatch" in (r.stdout + r.stderr), r
    finally:
        d.destroy()


# --- upstream -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ssl_pg(certs):
    """A PostgreSQL of this module's own with ssl=on and the test CA's server certificate."""
    cluster = pgwtest.PgCluster(prefix="pgw-pgssl-")
    try:
        cluster.init()
        for name in ("server.crt", "server.key"):
            shutil.copy(certs / name, cluster.data / name)
            if pgwtest.is_root():
                pw = pwd.getpwnam("postgres")
                os.chown(cluster.data / name, pw.pw_uid, pw.pw_gid)
        (cluster.data / "server.key").chmod(0o600)
        with open(cluster.data / "postgresql.conf", "a") as f:
            f.write("ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n")
        cluster.start()
        cluster.load_fixture_data(rows=1000)
        yield cluster
    finally:
        cluster.destroy()


def _server_ssl(daemon):
    r = pgwtest.psql(daemon.dsn(), "-At", "-c",
                     "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
    assert r.returncode == 0, r.stderr + daemon.log()[-3000:]
    return r.stdout.strip()


def test_upstream_verify_full(pgwarden_factory, ssl_pg, certs):
    d = pgwarden_factory.start(ssl_pg, overrides={"upstream": {
        "sslmode": "verify-full", "sslrootcert": str(certs / "ca.crt")}})
    assert _server_ssl(d).startswith("t|TLSv1.3")


def test_upstream_verify_full_refuses_an_unknown_ca(pgwarden_factory, ssl_pg, certs):
    d = pgwarden_factory.start(ssl_pg, overrides={"upstream": {
        "sslmode": "verify-full", "sslrootcert": str(certs / "otherca.crt")}})
    r = pgwtest.psql(d.dsn(), "-At", "-c", "SELECT 1")
    assert r.returncode != 0
    assert "certificate verify failed" in d.log(), d.log()[-3000:]


def test_upstream_prefer_and_require_against_a_server_without_tls(pgwarden_factory, pg, ssl_pg):
    d = pgwarden_factory.start(ssl_pg, overrides={"upstream": {"sslmode": "prefer"}})
    assert _server_ssl(d).startswith("t|")  # prefer: TLS when offered
    d = pgwarden_factory.start(pg, overrides={"upstream": {"sslmode": "prefer"}})
    assert _server_ssl(d).startswith("f|")  # ... and cleartext when not
    d = pgwarden_factory.start(pg, overrides={"upstream": {"sslmode": "require"}})
    r = pgwtest.psql(d.dsn(), "-At", "-c", "SELECT 1")
    assert r.returncode != 0
    assert "does not accept TLS" in d.log(), d.log()[-3000:]
