#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target under tests/fuzz/corpus/<target>/.

Seeds are real inputs in each target's input layout (see the comment at the top of each
fuzz_*.cpp): whole PostgreSQL messages both ways, startup packets, SCRAM exchanges, the statement
texts of the security corpora (tests/security/*.tsv) with EXPLAIN plans, the example config and
variants built from the guard examples in docs/agents.md, and HTTP requests of the metrics
endpoint. File names are the SHA-1 of the content, as libFuzzer names what it finds, so running
this again only adds what changed (delete a corpus folder first to drop old seeds). Run from anywhere: python3 tests/fuzz/make_seeds.py
"""
import base64
import hashlib
import hmac
import re
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"


# ----- PostgreSQL messages -------------------------------------------------------------------

def msg(kind, body=b""):
    return kind + struct.pack("!I", len(body) + 4) + body


def cstr(s):
    return (s.encode() if isinstance(s, str) else s) + b"\0"


def bind(portal, stmt, fmts, params, rfmts):
    body = cstr(portal) + cstr(stmt) + struct.pack("!H", len(fmts))
    body += b"".join(struct.pack("!h", f) for f in fmts)
    body += struct.pack("!H", len(params))
    for p in params:
        body += struct.pack("!i", -1) if p is None else struct.pack("!i", len(p)) + p
    body += struct.pack("!H", len(rfmts)) + b"".join(struct.pack("!h", f) for f in rfmts)
    return msg(b"B", body)


def client_streams():
    q = msg(b"Q", cstr("SELECT id, status FROM fct_shipments WHERE ship_date = '2026-01-01' LIMIT 10"))
    parse = msg(b"P", cstr("s1") + cstr("SELECT $1::int + $2") + struct.pack("!HII", 2, 23, 23))
    ext = (parse + bind("", "s1", [1, 0], [b"\0\0\0\x05", None], [0]) +
           msg(b"D", b"P" + cstr("")) + msg(b"E", cstr("") + struct.pack("!i", 100)) +
           msg(b"C", b"S" + cstr("s1")) + msg(b"S"))
    sasl = msg(b"p", cstr("SCRAM-SHA-256") + struct.pack("!i", 12) + b"n,,n=,r=abcd")
    return [
        q, q + msg(b"X"), ext, msg(b"Q", cstr("")),
        msg(b"p", cstr("md5" + "0" * 32)), sasl, msg(b"p", b"c=biws,r=abcd,p=AAAA"),
        msg(b"F", struct.pack("!I", 1) + b"\0\0\0\0"), msg(b"d", b"1\t2\n") + msg(b"c"),
        msg(b"f", cstr("no")), msg(b"H"),
    ]


def server_streams():
    err = msg(b"E", b"SERROR\0VERROR\0C42501\0Mpermission denied\0\0")
    rd = msg(b"T", struct.pack("!H", 2) +
             cstr("id") + struct.pack("!IhIhih", 16384, 1, 20, 8, -1, 0) +
             cstr("status") + struct.pack("!IhIhih", 16384, 2, 25, -1, -1, 0))
    dr = msg(b"D", struct.pack("!H", 2) + struct.pack("!i", 1) + b"1" + struct.pack("!i", -1))
    return [
        msg(b"R", struct.pack("!i", 0)) + msg(b"S", cstr("server_version") + cstr("15.6")) +
        msg(b"K", struct.pack("!ii", 4242, 99)) + msg(b"Z", b"I"),
        msg(b"R", struct.pack("!i", 10) + cstr("SCRAM-SHA-256") + b"\0"),
        msg(b"R", struct.pack("!i", 5) + b"salt"),
        msg(b"R", struct.pack("!i", 11) + b"r=abc,s=c2FsdA==,i=4096"),
        rd + dr + dr + msg(b"C", cstr("SELECT 2")) + msg(b"Z", b"T"),
        err + msg(b"Z", b"E"), msg(b"N", b"SNOTICE\0C01000\0Mcapped\0\0"),
        msg(b"G", b"\0" + struct.pack("!Hhh", 2, 0, 0)), msg(b"H", b"\1" + struct.pack("!H", 0)),
        msg(b"1") + msg(b"2") + msg(b"n") + msg(b"I"),
    ]


def frames_seeds():
    sizes = [bytes([0] * 8), bytes([200, 3, 250, 1, 15, 192, 7, 0])]
    out = []
    for stream in client_streams():
        for s in sizes:
            out.append(b"\0" + s + stream)
    out.append(b"\2" + sizes[0] + msg(b"Q", cstr("x" * 100)))  # over the small cap
    for stream in server_streams():
        for s in sizes:
            out.append(b"\1" + s + stream)
    out.append(b"\0" + sizes[0] + b"Q\0\0\0\2")  # length below 4
    return out


# ----- startup phase -------------------------------------------------------------------------

def startup(params, version=196608):
    body = struct.pack("!I", version) + b"".join(cstr(k) + cstr(v) for k, v in params) + b"\0"
    return struct.pack("!I", len(body) + 4) + body


def startup_seeds():
    sizes = bytes([0, 200, 3, 15])
    packets = [
        startup([("user", "agent"), ("database", "shop"), ("application_name", "psql")]),
        struct.pack("!II", 8, 80877103) + startup([("user", "agent"), ("client_encoding", "UTF8")]),
        struct.pack("!II", 8, 80877104),
        struct.pack("!IIii", 16, 80877102, 4242, 1234),
        startup([("user", "agent"), ("options", "-c agent_id=planner --conversation-id=c-42")]),
        startup([("user", "agent"), ("options", "-c search_path=public"), ("DateStyle", "ISO")]),
        startup([("user", "a"), ("_pq_.compression", "on"), ("agent_id", "x")], version=196609),
        startup([("user", "a"), ("replication", "database")]),
        startup([("user", "a"), ("options", "-c statement_timeout=0")]),
        startup([("user", "x")], version=131072),
        struct.pack("!I", 10001),
    ]
    options = ["", "-c agent_id=planner", "-cquery_intent=lookup --application-name=a\\ b",
               "-c", "-c =x", "-x", "--search_path=public  -c TimeZone=UTC"]
    out = [sizes + b"\n" + p for p in packets]
    out += [sizes + o.encode() + b"\n" for o in options]
    return out


# ----- SCRAM ---------------------------------------------------------------------------------

SERVER_NONCE = "ZnV6ei1zZXJ2ZXItbm9uY2U="  # fuzz_scram.cpp sets it
SALT = b"fixed-fuzz-salt"


def scram_final(client_nonce, bare, password, channel=b"biws"):
    """A well-formed client-final with the proof of `password` (never the verifier's)."""
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), SALT, 1)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored = hashlib.sha256(client_key).digest()
    nonce = client_nonce + SERVER_NONCE
    server_first = f"r={nonce},s={base64.b64encode(SALT).decode()},i=1"
    without_proof = f"c={channel.decode()},r={nonce}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    sig = hmac.new(stored, auth, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, sig))
    return (without_proof + ",p=" + base64.b64encode(proof).decode()).encode()


def scram(mode, first, final):
    return bytes([mode]) + struct.pack("!H", len(first)) + first + final


def scram_seeds():
    out = []
    for nonce in ["rOprNGfwEbeRWgbNEkqO", "abc"]:
        bare = f"n=,r={nonce}"
        out.append(scram(0, f"n,,{bare}".encode(), scram_final(nonce, bare, "wrong password")))
        out.append(scram(0, f"y,,{bare}".encode(),
                         scram_final(nonce, bare, "guess", base64.b64encode(b"y,,"))))
    out.append(scram(0, b"n,,n=user,r=abc,x=ext", b"c=biws,r=abc,p=AAAA"))
    out.append(scram(0, b"p=tls-server-end-point,,n=,r=abc", b""))
    out.append(scram(0, b"n,a=admin,n=,r=abc", b""))
    out.append(scram(0, b"n,,m=ext,n=,r=abc", b""))
    out.append(scram(1, b"n,,n=,r=abc", b"SCRAM-SHA-256$4096:c2FsdA==$" + base64.b64encode(b"k" * 32) +
                     b":" + base64.b64encode(b"s" * 32)))
    out.append(scram(1, b"", b"aGVsbG8gd29ybGQ="))
    return out


# ----- SQL and agent context -----------------------------------------------------------------

def unescape(s):
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n"}.get(m.group(1), m.group(1)), s)


def corpus_statements():
    out = []
    for name in ["bypass_corpus.tsv", "allowed_reads.tsv"]:
        for line in (ROOT / "tests" / "security" / name).read_text().splitlines():
            if not line or line.startswith("#"):
                continue
            cols = line.split("\t", 2)
            if len(cols) == 3:
                out.append(unescape(cols[2]))
    return out


def plan(node, relation, cost, rows=5000):
    return (f'[{{"Plan": {{"Node Type": "Limit", "Startup Cost": 0.0, "Total Cost": {cost}, '
            f'"Plan Rows": 1001, "Plans": [{{"Node Type": "{node}", "Parent Relationship": "Outer", '
            f'"Relation Name": "{relation}", "Schema": "public", "Alias": "s", "Total Cost": {cost}, '
            f'"Plan Rows": {rows}}}]}}}}]')


PLANS = [plan("Seq Scan", "fct_shipments", 120000.5), plan("Index Scan", "fct_shipments", 900),
         '[{"Plan": {"Node Type": "Nested Loop", "Total Cost": 4e12, "Plan Rows": 40000000000, '
         '"Plans": [' + ", ".join(['{"Node Type": "Seq Scan", "Relation Name": "fct_shipments", '
                                   '"Total Cost": 3000.0, "Plan Rows": 200000}'] * 2) + "]}}]"]

AGENT_TEXTS = [
    "SELECT 1 /* conversation_id='c-42',agent_id='planner' */",
    "  /*agent_id='a1'*/ SELECT * FROM t WHERE x = 1;  ",
    "SELECT 1 /*agent_id='plan%20ner%2Fv2',conversation_id='it\\'s'*/",
    "/* traceparent='00-abc',query_intent='lookup' */ SELECT 1",
    "SELECT 1 /*agent_id='a%0Ab'*/", "SELECT '/* agent_id=''x'' */'",
    "SET pgwarden.agent_id = 'planner'", "set pgwarden.agent_id to 'planner'",
    "  /* c */ SET pgwarden.AGENT_ID = planner ; ", "SET LOCAL pgwarden.conversation_id = 42",
    "RESET pgwarden.query_intent", "SHOW pgwarden.agent_id", "SET pgwarden.agent_id TO DEFAULT",
    "SET pgwarden.nope = 'x'", "SET SESSION pgwarden.agent_id = E'plan\\nner'",
]


def sql_seeds():
    texts = corpus_statements()
    out = [t.encode() for t in texts]
    # The cost-gated group asks for a plan of these; the rest of the input is that plan.
    for t in texts[:40]:
        for p in PLANS:
            out.append(t.encode() + b"\0" + p.encode())
    out += [t.encode() for t in AGENT_TEXTS]
    out.append(b"SELECT count(*) FROM analytics.fct_shipments a, analytics.fct_shipments b\0" + PLANS[2].encode())
    return out


def agent_context_seeds():
    return [t.encode() for t in AGENT_TEXTS + corpus_statements()]


# ----- config --------------------------------------------------------------------------------

def doc_guard_examples():
    """The `- kind: ...` YAML examples of docs/agents.md, each a guard list item."""
    text = (ROOT / "docs" / "agents.md").read_text()
    return [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if b.startswith("- kind:")]


def config_seeds():
    example = (ROOT / "packaging" / "pgwarden.yaml").read_text()
    out = [example]
    for guard in doc_guard_examples():
        item = "\n".join("      " + line for line in guard.splitlines())
        out.append(example + "  extra:\n    guards:\n" + item + "\n")
    out.append("upstream: {host: 127.0.0.1, port: 5432}\ngroups:\n  g:\n    guards: []\n")
    out.append(example.replace("store: sqlite", "store: postgres\n  dsn: host=/nonexistent"))
    out.append(example + "listen:\n  address: 127.0.0.1:6432\n")  # a duplicate key
    # Files that never end: each must be refused at once, not read (regressions: a secret file,
    # a Lua script and a TLS key read to the end of /dev/zero).
    out.append(example.replace("/etc/pgwarden/upstream.password", "/dev/zero"))
    out.append(example.replace("groups:\n", "groups:\n  zero:\n    guards:\n      - kind: lua\n"
                                            "        file: /dev/zero\n", 1))
    out.append(example + "tls:\n  cert_file: /dev/zero\n  key_file: /dev/zero\n")
    return [c.encode() for c in out]


# ----- HTTP ----------------------------------------------------------------------------------

def http_seeds():
    reqs = [
        b"GET /metrics HTTP/1.1\r\nHost: localhost:9930\r\nAccept: text/plain\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer fuzz-token\r\n\r\n",
        b"GET /metrics?x=1 HTTP/1.1\r\nAuthorization: Basic " + base64.b64encode(b"scraper:fuzz-password") +
        b"\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
        b"GET /healthz HTTP/1.0\r\n\r\n", b"HEAD /readyz HTTP/1.1\r\nConnection: close\r\n\r\n",
        b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        b"GET /readyz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET / HTTP/1.1\r\n folded: header\r\n\r\n", b"\x16\x03\x01\x02\x00\x01",
        b"GET /metrics HTTP/1.1\nHost: a\n\n",
    ]
    return [bytes([1]) + r for r in reqs] + [bytes([0]) + reqs[0]]


def jsonrpc_seeds():
    bodies = [
        b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        b'"capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}',
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        b'{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"query",'
        b'"arguments":{"sql":"SELECT 1","max_rows":5,"conversation_id":"c"}}}',
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"describe_table",'
        b'"arguments":{"table":"public.t","sample_rows":21}}}',
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled",'
        b'"params":{"requestId":1}},5]',
        b'{"jsonrpc":"2.0","id":1,"result":{}}', b'[]', b'{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}',
        b'[[[[[[[[[[', b'"\ud800"', b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}',
    ]
    return [bytes([f]) + b for b in bodies for f in (0, 1)]


# ----- writing -------------------------------------------------------------------------------

def write(target, seeds):
    # Entries already there (merged from fuzzing runs by scripts/fuzz --merge) are kept.
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    for s in seeds:
        (d / hashlib.sha1(s).hexdigest()).write_bytes(s)
    return len(set(seeds))


def main():
    for target, seeds in [
        ("fuzz_frames", frames_seeds()), ("fuzz_startup", startup_seeds()),
        ("fuzz_scram", scram_seeds()), ("fuzz_sql", sql_seeds()),
        ("fuzz_agent_context", agent_context_seeds()), ("fuzz_config", config_seeds()),
        ("fuzz_http", http_seeds()), ("fuzz_jsonrpc", jsonrpc_seeds()),
    ]:
        print(f"{target}: {write(target, seeds)} seeds")


if __name__ == "__main__":
    main()
