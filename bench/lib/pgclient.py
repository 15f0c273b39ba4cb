"""A minimal PostgreSQL v3 client for what pgbench cannot do: thousands of idle connections that
each did a real startup and SCRAM-SHA-256 login (asyncio), and one client that reads a huge
result slowly through a small socket buffer (blocking socket).
https://www.postgresql.org/docs/15/protocol-flow.html"""

import asyncio
import base64
import hashlib
import hmac
import secrets
import socket
import struct
import time


class LoginError(Exception):
    pass


def _hmac(key, msg):
    return hmac.new(key, msg, hashlib.sha256).digest()


def _fields(body):
    return {chr(p[0]): p[1:].decode("utf-8", "replace") for p in body.split(b"\0") if p}


def startup_packet(user, database):
    body = struct.pack("!I", 196608)
    for k, v in (("user", user), ("database", database), ("application_name", "pgwarden-bench")):
        body += k.encode() + b"\0" + v.encode() + b"\0"
    body += b"\0"
    return struct.pack("!I", len(body) + 4) + body


def msg(tag, body=b""):
    return tag + struct.pack("!I", len(body) + 4) + body


class ScramClient:
    """Client side of SCRAM-SHA-256, one per login. The PBKDF2 result depends only on the
    password and the verifier's salt, so logins may share `salted_cache` (thousands of logins
    then cost one PBKDF2)."""

    def __init__(self, password, salted_cache=None):
        self.password = password
        self._salted = salted_cache if salted_cache is not None else {}

    def first(self):
        self.nonce = base64.b64encode(secrets.token_bytes(18)).decode()
        self.first_bare = f"n=,r={self.nonce}"
        data = ("n,," + self.first_bare).encode()
        return msg(b"p", b"SCRAM-SHA-256\0" + struct.pack("!I", len(data)) + data)

    def final(self, server_first):
        attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
        if not attrs["r"].startswith(self.nonce):
            raise LoginError("server nonce does not extend ours")
        key = (attrs["s"], int(attrs["i"]))
        if key not in self._salted:
            self._salted[key] = hashlib.pbkdf2_hmac(
                "sha256", self.password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
        salted = self._salted[key]
        client_key = _hmac(salted, b"Client Key")
        stored_key = hashlib.sha256(client_key).digest()
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{self.first_bare},{server_first},{without_proof}".encode()
        proof = bytes(a ^ b for a, b in zip(client_key, _hmac(stored_key, auth_message)))
        return msg(b"p", f"{without_proof},p={base64.b64encode(proof).decode()}".encode())


def _md5_response(password, user, salt):
    inner = hashlib.md5((password + user).encode()).hexdigest()
    return msg(b"p", b"md5" + hashlib.md5(inner.encode() + salt).hexdigest().encode() + b"\0")


# -- asyncio: many idle connections -------------------------------------------------------------

async def _read_msg(reader):
    head = await reader.readexactly(5)
    (length,) = struct.unpack("!I", head[1:5])
    return head[:1], await reader.readexactly(length - 4)


async def login_async(host, port, user, password, database, salted_cache, timeout=60):
    """Opens a connection and logs in up to ReadyForQuery; returns (reader, writer)."""
    scram = ScramClient(password, salted_cache)
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        writer.write(startup_packet(user, database))
        deadline = time.monotonic() + timeout
        while True:
            tag, body = await asyncio.wait_for(_read_msg(reader), deadline - time.monotonic())
            if tag == b"R":
                (code,) = struct.unpack("!I", body[:4])
                if code == 10:
                    writer.write(scram.first())
                elif code == 11:
                    writer.write(scram.final(body[4:].decode()))
                elif code == 5:
                    writer.write(_md5_response(password, user, body[4:8]))
                elif code == 3:
                    writer.write(msg(b"p", password.encode() + b"\0"))
                elif code not in (0, 12):
                    raise LoginError(f"unsupported authentication request {code}")
            elif tag == b"E":
                raise LoginError(_fields(body).get("M", "login refused"))
            elif tag == b"Z":
                return reader, writer
    except BaseException:
        writer.close()
        raise


async def open_idle(host, port, user, password, database, count, concurrency=32, conns=None):
    """Opens `count` logged-in connections (at most `concurrency` logins at a time) and appends
    them to `conns`. Returns (opened, first_error)."""
    conns = conns if conns is not None else []
    salted_cache = {}
    sem = asyncio.Semaphore(concurrency)
    errors = []

    async def one():
        async with sem:
            if errors:
                return
            try:
                conns.append(await login_async(host, port, user, password, database,
                                                salted_cache))
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, LoginError) as e:
                errors.append(f"{type(e).__name__}: {e}")

    await asyncio.gather(*(one() for _ in range(count)))
    return len(conns), (errors[0] if errors else None)


async def close_all(conns):
    for _, writer in conns:
        try:
            writer.write(msg(b"X"))
            writer.close()
        except (OSError, RuntimeError):
            pass
    for _, writer in conns:
        try:
            await asyncio.wait_for(writer.wait_closed(), 5)
        except (OSError, asyncio.TimeoutError, RuntimeError):
            pass
    conns.clear()


# -- blocking: one slow reader ------------------------------------------------------------------

def login_blocking(host, port, user, password, database, rcvbuf=None, timeout=30):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        # Set before connect so the window is small from the start: the kernel then holds
        # little, and pgwarden has to hold back the server instead.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(timeout)
    sock.connect((host, port))
    scram = ScramClient(password)
    sock.sendall(startup_packet(user, database))
    buf = b""

    def read_msg():
        nonlocal buf
        while len(buf) < 5 or len(buf) < 1 + struct.unpack("!I", buf[1:5])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise LoginError("connection closed during login")
            buf += chunk
        (length,) = struct.unpack("!I", buf[1:5])
        tag, body, buf = buf[:1], buf[5:1 + length], buf[1 + length:]
        return tag, body

    while True:
        tag, body = read_msg()
        if tag == b"R":
            (code,) = struct.unpack("!I", body[:4])
            if code == 10:
                sock.sendall(scram.first())
            elif code == 11:
                sock.sendall(scram.final(body[4:].decode()))
            elif code == 5:
                sock.sendall(_md5_response(password, user, body[4:8]))
            elif code not in (0, 12):
                raise LoginError(f"unsupported authentication request {code}")
        elif tag == b"E":
            raise LoginError(_fields(body).get("M", "login refused"))
        elif tag == b"Z":
            return sock


def slow_read(sock, sql, rate_bytes_per_s, on_progress=None, chunk=65536, timeout=900):
    """Sends `sql` as a simple Query and reads the whole answer at about `rate_bytes_per_s`,
    walking message boundaries without copying bodies. Returns a dict: bytes, rows, seconds,
    command tag or error."""
    sock.sendall(msg(b"Q", sql.encode() + b"\0"))
    sock.settimeout(60)
    started = time.monotonic()
    deadline = started + timeout
    total = rows = 0
    pending = bytearray()
    tag = error = None
    done = False
    while not done:
        if time.monotonic() > deadline:
            error = "slow reader timed out"
            break
        data = sock.recv(chunk)
        if not data:
            error = "connection closed mid-result"
            break
        total += len(data)
        pending += data
        pos = 0
        n = len(pending)
        while n - pos >= 5:
            (length,) = struct.unpack_from("!I", pending, pos + 1)
            if n - pos < 1 + length:
                break
            t = pending[pos]
            if t == 0x44:      # 'D' DataRow
                rows += 1
            elif t == 0x43:    # 'C' CommandComplete
                tag = bytes(pending[pos + 5:pos + length]).rstrip(b"\0").decode()
            elif t == 0x45:    # 'E' ErrorResponse
                error = _fields(bytes(pending[pos + 5:pos + 1 + length])).get("M")
            elif t == 0x5A:    # 'Z' ReadyForQuery
                done = True
            pos += 1 + length
        del pending[:pos]
        if on_progress:
            on_progress(total)
        # Pace to the target rate: sleep until the bytes read so far are "due".
        ahead = total / rate_bytes_per_s - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
    return {"bytes": total, "rows": rows, "seconds": round(time.monotonic() - started, 2),
            "command_tag": tag, "error": error}
