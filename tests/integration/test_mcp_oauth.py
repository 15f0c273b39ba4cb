"""The MCP endpoint as an OAuth 2.1 resource server: a local issuer (keys the test makes, its JWKS
written to a file) signs access tokens; the right one runs tools as its subject in the group its
scope maps to, and every wrong one (audience, expiry, scope, signature, kid, alg none, an HMAC)
is refused with the challenge RFC 6750 and RFC 9728 define, without naming the JWKS file. The
static tokens keep working next to it. With jwks_url, the keys come from the issuer's HTTP
endpoint, and a rotated key is fetched once a token names it."""

import base64
import contextlib
import hashlib
import hmac
import http.server
import json
import threading
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from mcpsupport import McpHttp, history, start_mcp_daemon

ISSUER = "https://issuer.pgwarden.test"
RESOURCE = "https://pgwarden.test/mcp"
METADATA_URL = "https://pgwarden.test/.well-known/oauth-protected-resource/mcp"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def public_jwk(key, kid):
    """The JWK of a cryptography public key (RSA or P-256)."""
    nums = key.public_numbers()
    if isinstance(key, rsa.RSAPublicKey):
        n = nums.n.to_bytes((nums.n.bit_length() + 7) // 8, "big")
        return {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64url(n),
                "e": b64url(nums.e.to_bytes(3, "big"))}
    return {"kty": "EC", "kid": kid, "crv": "P-256", "x": b64url(nums.x.to_bytes(32, "big")),
            "y": b64url(nums.y.to_bytes(32, "big"))}


class Issuer:
    """A local authorization server's signing side: an RSA and an EC key, published in a JWKS
    file, and tokens for any claims."""

    def __init__(self, directory):
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.jwks_path = directory / "issuer-keys" / "jwks.json"
        self.jwks_path.parent.mkdir()
        self.jwks_path.write_text(json.dumps({"keys": [public_jwk(self.rsa.public_key(), "rsa-1"),
                                                       public_jwk(self.ec.public_key(), "ec-1")]}))

    @staticmethod
    def claims(**changes):
        now = int(time.time())
        c = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice@example.com", "iat": now,
             "exp": now + 300, "scope": "openid db.read", "client_id": "test-client"}
        c.update(changes)
        return {k: v for k, v in c.items() if v is not None}

    def token(self, key=None, alg="RS256", kid="rsa-1", **changes):
        return jwt.encode(self.claims(**changes), key or self.rsa, algorithm=alg, headers={"kid": kid})


@contextlib.contextmanager
def oauth_daemon(pgwarden_bin, pg, oauth):
    """(daemon, static tokens) with `oauth` as mcp.oauth, torn down after."""
    from conftest import DaemonSet
    daemons = DaemonSet(pgwarden_bin)
    try:
        yield start_mcp_daemon(daemons, pg, extra={"oauth": oauth})
    finally:
        daemons.teardown()


@pytest.fixture(scope="module")
def oauthd(pgwarden_bin, pg, tmp_path_factory):
    issuer = Issuer(tmp_path_factory.mktemp("oauth"))
    oauth = {"issuer": ISSUER, "audience": RESOURCE, "jwks_file": str(issuer.jwks_path),
             "algorithms": ["RS256", "ES256"], "clock_skew": "5s",
             "scopes": [{"scope": "db.admin", "group": "passthrough"},
                        {"scope": "db.read", "group": "agents"}]}
    with oauth_daemon(pgwarden_bin, pg, oauth) as (daemon, tokens):
        yield daemon, tokens, issuer


PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "oauth-test", "version": "1"}}}


def ask(daemon, token, secret, message=None):
    """(status, WWW-Authenticate, body text) of one request with `token`; checks that nothing in
    the answer names `secret` (where the keys are) or a JWKS."""
    c = McpHttp(daemon.mcp_port, token)
    try:
        status, hdrs, body = c.raw(body=json.dumps(message or PING).encode())
    finally:
        c.close()
    answer = json.dumps(hdrs) + body.decode(errors="replace")
    assert secret not in answer and "jwks" not in answer.lower(), answer
    return status, hdrs.get("www-authenticate", ""), body.decode(errors="replace")


def refused(oauthd, token):
    daemon, _, issuer = oauthd
    return ask(daemon, token, str(issuer.jwks_path.parent))


def test_metadata_names_the_resource_its_issuer_and_scopes(oauthd):
    daemon, _, issuer = oauthd
    c = McpHttp(daemon.mcp_port)
    try:
        for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
            status, hdrs, body = c.raw("GET", path=path)
            assert status == 200, (path, body)
            doc = json.loads(body)
            assert doc["resource"] == RESOURCE
            assert doc["authorization_servers"] == [ISSUER]
            assert doc["scopes_supported"] == ["db.admin", "db.read"]
            assert doc["bearer_methods_supported"] == ["header"]
            assert str(issuer.jwks_path) not in body.decode()
        assert c.raw("GET", path="/.well-known/oauth-protected-resource/elsewhere")[0] == 404
        assert c.raw("POST", path="/.well-known/oauth-protected-resource")[0] == 405
    finally:
        c.close()


def test_no_token_is_401_pointing_to_the_metadata(oauthd):
    status, challenge, _ = refused(oauthd, None)
    assert status == 401
    assert challenge == f'Bearer resource_metadata="{METADATA_URL}", scope="db.admin db.read"'


def test_the_right_token_runs_tools_as_its_subject_in_its_scopes_group(oauthd):
    daemon, _, issuer = oauthd
    c = McpHttp(daemon.mcp_port, issuer.token())
    try:
        c.initialize("2025-11-25", client="oauth-agent")
        r = c.tool("query", {"sql": "SELECT 6 * 7 AS oauth_answer"})
        assert r["isError"] is False, r
        assert "42" in json.dumps(r["structuredContent"]), r
        # db.read maps to `agents`, whose read_only guard refuses a write.
        denied = c.tool("query", {"sql": "DELETE FROM fct_shipments"})
        assert denied["isError"] is True and denied["structuredContent"]["code"] == "READ_ONLY"
    finally:
        c.close()
    rows = history(daemon, "sql_text = 'SELECT 6 * 7 AS oauth_answer'")
    assert len(rows) == 1
    assert rows[0]["user_name"] == "alice@example.com"
    assert rows[0]["policy_group"] == "agents"
    assert rows[0]["protocol"] == "mcp" and rows[0]["outcome"] == "ok"


def test_an_es256_token_with_the_admin_scope_runs_in_the_mapped_group(oauthd):
    daemon, _, issuer = oauthd
    token = issuer.token(issuer.ec, alg="ES256", kid="ec-1", sub="ops-bot", scope="db.read db.admin")
    c = McpHttp(daemon.mcp_port, token)
    try:
        c.initialize("2025-11-25")
        assert c.tool("query", {"sql": "SELECT 'es256' AS admin_scope"})["isError"] is False
    finally:
        c.close()
    rows = history(daemon, "sql_text = 'SELECT ''es256'' AS admin_scope'")
    assert rows[0]["user_name"] == "ops-bot" and rows[0]["policy_group"] == "passthrough"


def test_a_token_for_another_audience_is_invalid(oauthd):
    _, _, issuer = oauthd
    status, challenge, body = refused(oauthd, issuer.token(aud="https://other.test/mcp"))
    assert status == 401
    assert f'resource_metadata="{METADATA_URL}"' in challenge
    assert 'error="invalid_token"' in challenge and "audience" in challenge
    assert "audience is not this server" in body


def test_an_expired_token_is_invalid(oauthd):
    _, _, issuer = oauthd
    now = int(time.time())
    status, challenge, _ = refused(oauthd, issuer.token(iat=now - 600, exp=now - 60))
    assert status == 401
    assert 'error="invalid_token"' in challenge and "expired" in challenge


def test_a_token_without_a_mapped_scope_is_403_naming_the_scopes_for_step_up(oauthd):
    _, _, issuer = oauthd
    status, challenge, _ = refused(oauthd, issuer.token(scope="openid profile"))
    assert status == 403
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="db.admin db.read"' in challenge
    assert f'resource_metadata="{METADATA_URL}"' in challenge


def test_a_signature_by_another_key_is_invalid(oauthd):
    _, _, issuer = oauthd
    status, challenge, _ = refused(oauthd, issuer.token(issuer.stranger))
    assert status == 401 and "signature" in challenge


def test_an_unknown_kid_is_invalid(oauthd):
    _, _, issuer = oauthd
    status, challenge, _ = refused(oauthd, issuer.token(kid="rsa-9"))
    assert status == 401 and 'error="invalid_token"' in challenge and "kid" in challenge


def test_alg_none_and_an_hmac_keyed_by_the_public_key_are_invalid(oauthd):
    _, _, issuer = oauthd
    claims = json.dumps(issuer.claims()).encode()
    none = b64url(b'{"alg":"none","kid":"rsa-1"}') + "." + b64url(claims) + "."
    status, challenge, _ = refused(oauthd, none)
    assert status == 401 and "algorithm is not accepted" in challenge
    pem = issuer.rsa.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    header = b64url(b'{"alg":"HS256","kid":"rsa-1"}') + "." + b64url(claims)
    hs = header + "." + b64url(hmac.new(pem, header.encode(), hashlib.sha256).digest())
    status, challenge, _ = refused(oauthd, hs)
    assert status == 401 and "algorithm is not accepted" in challenge


def test_static_tokens_work_unchanged_next_to_oauth(oauthd):
    daemon, tokens, _ = oauthd
    c = McpHttp(daemon.mcp_port, tokens["agent"])
    try:
        c.initialize("2025-11-25")
        assert c.tool("query", {"sql": "SELECT 'static' AS static_token"})["isError"] is False
    finally:
        c.close()
    rows = history(daemon, "sql_text = 'SELECT ''static'' AS static_token'")
    assert rows[0]["user_name"] == "agent"
    status, challenge, _ = refused(oauthd, "pgw_" + "z" * 43)
    assert status == 401 and 'error="invalid_token"' in challenge


class JwksServer:
    """The issuer's jwks_uri: a local HTTP server answering GET /jwks.json with `keys`, counting
    the fetches."""

    def __init__(self, keys):
        self.keys = keys
        self.fetches = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the library's name)
                owner.fetches += 1
                body = json.dumps({"keys": owner.keys}).encode()
                self.send_response(200 if self.path == "/jwks.json" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks.json"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def fetchd(pgwarden_bin, pg, tmp_path_factory):
    issuer = Issuer(tmp_path_factory.mktemp("oauth-url"))
    server = JwksServer([public_jwk(issuer.rsa.public_key(), "rsa-1")])
    oauth = {"issuer": ISSUER, "audience": RESOURCE, "jwks_url": server.url, "jwks_refresh": "1h",
             "scopes": [{"scope": "db.read", "group": "agents"}]}
    try:
        with oauth_daemon(pgwarden_bin, pg, oauth) as (daemon, _):
            yield daemon, server, issuer
    finally:
        server.close()


def status_with(daemon, token, server):
    """The status of an initialize with `token`."""
    return ask(daemon, token, server.url, INITIALIZE)[0]


def eventually(fn, want, seconds=30):
    deadline = time.monotonic() + seconds
    got = fn()
    while got != want and time.monotonic() < deadline:
        time.sleep(0.2)
        got = fn()
    return got


def test_keys_fetched_from_the_jwks_url_verify_tokens(fetchd):
    daemon, server, issuer = fetchd
    assert eventually(lambda: status_with(daemon, issuer.token(), server), 200) == 200
    assert server.fetches >= 1
    assert status_with(daemon, issuer.token(issuer.stranger), server) == 401


def test_a_rotated_key_is_fetched_after_a_token_names_it_and_a_flood_fetches_little(fetchd):
    daemon, server, issuer = fetchd
    assert eventually(lambda: status_with(daemon, issuer.token(), server), 200) == 200
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    server.keys = server.keys + [public_jwk(rotated.public_key(), "rsa-2")]
    before = server.fetches
    # Twenty requests naming keys the set does not hold: at most a fetch per 10 s, not one each.
    for i in range(20):
        assert status_with(daemon, issuer.token(kid=f"rsa-unknown-{i}"), server) == 401
    token = issuer.token(rotated, kid="rsa-2")
    assert eventually(lambda: status_with(daemon, token, server), 200) == 200
    assert server.fetches - before < 10
    # The key fetched before still verifies.
    assert status_with(daemon, issuer.token(), server) == 200
