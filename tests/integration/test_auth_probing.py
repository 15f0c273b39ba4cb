"""What an attacker learns before authenticating, against the real daemon: nothing a client sends
writes a line of its own into the log; a user who does not exist gets the challenge of
auth.unknown_user_method and the same error as a wrong password; the made-up SCRAM salt of a
user who does not exist stays the same across a restart, as real users' salts do."""

import base64
import os
import stat
import struct
import subprocess

import pgwtest

FORGED = "2026-12-01 06:00:00.000 [error] FORGED LINE"


def challenge(d, user):
    """Sends a StartupMessage for `user`; returns (auth request code, raw client)."""
    c = d.raw()
    c.send_startup({"user": user, "database": pgwtest.DATABASE})
    tag, body = c.read_msg()
    assert tag == b"R", (tag, body)
    (code,) = struct.unpack("!I", body[:4])
    return code, c


def server_first(d, user):
    """The server-first-message an unknown or real `user` gets: {'r': ..., 's': ..., 'i': ...}."""
    code, c = challenge(d, user)
    with c:
        assert code == 10, f"expected AuthenticationSASL, got {code}"
        first = b"n,,n=,r=" + base64.b64encode(os.urandom(18))
        c.send_msg(b"p", b"SCRAM-SHA-256\0" + struct.pack("!I", len(first)) + first)
        tag, body = c.read_msg()
        assert tag == b"R" and struct.unpack("!I", body[:4])[0] == 11, (tag, body)
        return dict(kv.split("=", 1) for kv in body[4:].decode().split(","))


def login_error(d, user, password):
    """The ErrorResponse fields of a failed login."""
    with d.raw() as c:
        try:
            c.login(user, password)
        except pgwtest.ServerError as e:
            assert c.closed_by_peer()
            return e.fields
    raise AssertionError(f"login as {user!r} succeeded")


def same_failure(a, b, user_a, user_b):
    """Two failed logins that differ only in the user name they quote."""
    assert a["C"] == b["C"] == "28P01", (a, b)
    assert a["M"] == f'password authentication failed for user "{user_a}"'
    assert b["M"] == f'password authentication failed for user "{user_b}"'
    assert set(a) == set(b), (a, b)  # same fields: no detail or hint for one of them
    assert a["S"] == b["S"] == "FATAL"


def test_client_values_cannot_forge_log_lines(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg)
    # A user name with a newline, then a message type byte 0 where a password was expected.
    code, c = challenge(d, "nobody\n" + FORGED)
    with c:
        assert code == 10
        c.send_msg(b"\x00", b"")
        err = c.read_until_closed_or_error()
        assert err is not None and err["C"] == "08P01", err
        assert "message type 0" in err["M"]
        assert c.closed_by_peer()
    # A logged-in client whose application_name and agent_id carry newlines and a NUL-free
    # escape sequence.
    with d.raw() as c:
        c.login("core", d.passwords["core"],
                extra={"application_name": "app\n" + FORGED, "agent_id": "a\r\n" + FORGED})
        c.query("SELECT 1")
    d.stop(by_test=True)
    raw = d.logfile.read_bytes()
    assert b"\0" not in raw, "a NUL byte reached the log"
    lines = raw.decode("utf-8").splitlines()
    assert not [l for l in lines if l.startswith(FORGED)], "\n".join(lines[-20:])
    text = "\n".join(lines)
    assert "user=nobody\\n" + FORGED in text, text[-3000:]
    assert "got message type 0" in text
    assert "application_name=app\\n" + FORGED in text
    assert "agent_id=a\\r\\n" + FORGED in text


def test_unknown_user_gets_the_configured_challenge(pgwarden_factory, pg):
    scram = pgwarden_factory.start(pg)
    assert challenge(scram, "nobody")[0] == 10      # AuthenticationSASL, the default
    assert challenge(scram, "agent")[0] == 10
    assert challenge(scram, "md5user")[0] == 5      # md5 users give themselves away...
    # ...which the daemon says at start-up, naming them.
    assert 'md5 reveals which users exist: "md5user" uses md5' in scram.log()
    md5 = pgwarden_factory.start(pg, overrides={"auth": {"unknown_user_method": "md5"}})
    assert challenge(md5, "nobody")[0] == 5         # AuthenticationMD5Password
    assert challenge(md5, "md5user")[0] == 5
    # A trust user over TCP is answered like a name that does not exist, under either method.
    assert challenge(scram, "analyst")[0] == 10
    assert challenge(md5, "analyst")[0] == 5


def test_wrong_user_and_wrong_password_look_the_same_under_scram(pgwarden):
    same_failure(login_error(pgwarden, "agent", "wrong"), login_error(pgwarden, "nobody", "wrong"),
                 "agent", "nobody")
    same_failure(login_error(pgwarden, "agent", "wrong"), login_error(pgwarden, "analyst", "x"),
                 "agent", "analyst")


def test_wrong_user_and_wrong_password_look_the_same_under_md5(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg, overrides={"auth": {"unknown_user_method": "md5"}})
    same_failure(login_error(d, "md5user", "wrong"), login_error(d, "nobody", "wrong"),
                 "md5user", "nobody")
    # The real password still works.
    with d.raw() as c:
        c.login("md5user", d.passwords["md5user"])
        assert c.query("SELECT 42")[0] == [("42",)]
    log = d.log()
    assert "wrong password (md5)" in log and "no such user" in log


def test_unknown_users_salt_survives_a_restart(pgwarden_factory, pg):
    passwords = {"agent": "agent-pw", "core": "core-pw"}
    users = [
        {"name": "agent", "password": pgwtest.scram_verifier(passwords["agent"], iterations=8192),
         "group": "agents"},
        {"name": "core", "password": pgwtest.scram_verifier(passwords["core"], iterations=8192),
         "group": "agents"},
    ]
    d = pgwarden_factory.start(pg, users=users)
    ghost = server_first(d, "ghost")
    other = server_first(d, "ghost2")
    real = server_first(d, "agent")
    assert ghost["s"] != other["s"], "two unknown users got the same salt"
    assert server_first(d, "ghost")["s"] == ghost["s"], "the salt changed between attempts"
    # The made-up challenge has the real users' shape: iteration count and salt length.
    assert ghost["i"] == real["i"] == "8192"
    assert len(base64.b64decode(ghost["s"])) == len(base64.b64decode(real["s"]))
    key_file = d.dir / "salt.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text()

    assert d.stop(by_test=True) == 0
    d.start()
    assert server_first(d, "ghost")["s"] == ghost["s"], "the salt changed across a restart"
    assert server_first(d, "ghost2")["s"] == other["s"]
    assert server_first(d, "agent")["s"] == real["s"]
    assert key_file.read_text() == key


def test_check_config_names_revealed_users_and_an_unusable_salt_key(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg, start=False)
    d.config["daemon"]["state_dir"] = "/nonexistent/pgwarden-state"
    d.config["history"]["path"] = str(d.dir / "history.db")
    # The history chain's key has no fallback (a history that cannot be chained does not start):
    # it lives elsewhere here, so that only the salt key is unusable.
    d.config["history"]["chain_key_file"] = str(d.dir / "history_chain.key")
    d.write_config()
    r = subprocess.run([d.binary, "--check-config", str(d.config_path)], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert 'md5 reveals which users exist: "md5user" uses md5' in r.stderr
    assert "/nonexistent/pgwarden-state/salt.key does not exist and cannot be created" in r.stderr
    # Started anyway, it says the same and serves clients with a key of its own.
    d.start()
    with d.raw() as c:
        c.login("core", d.passwords["core"])
    assert "cannot create /nonexistent/pgwarden-state/salt.key" in d.log()


def test_check_config_fails_where_the_history_chain_key_cannot_be_made(pgwarden_factory, pg):
    d = pgwarden_factory.start(pg, start=False)
    d.config["history"]["path"] = str(d.dir / "history.db")
    d.config["history"]["chain_key_file"] = "/nonexistent/pgwarden-state/history_chain.key"
    d.write_config()
    r = subprocess.run([d.binary, "--check-config", str(d.config_path)], capture_output=True,
                       text=True, timeout=30)
    # The daemon would not start without the chain's key: the check says so instead of "ok".
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("history.chain_key_file: /nonexistent/pgwarden-state/history_chain.key does not "
            "exist and cannot be created") in r.stderr
    assert ": ok" not in r.stdout
    r = subprocess.run([d.binary, "--config", str(d.config_path)], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode != 0
    assert "history_chain.key" in r.stderr + r.stdout
