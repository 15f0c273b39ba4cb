# Shell helpers shared by scripts/demo and scripts/test: free ports, a throwaway PostgreSQL 15
# cluster (initdb refuses to run as root, so as root the cluster belongs to the `postgres` OS user),
# and starting/stopping it. Source this file; it defines functions and a few PGW_* variables only.

PGW_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PGW_PGBIN="${PGW_PGBIN:-/usr/lib/postgresql/15/bin}"
PGW_PYTHON="${PGW_PYTHON:-/usr/bin/python3}"

# Prints a TCP port on 127.0.0.1 that nothing listens on right now (the kernel picks it).
pgw_free_port() {
  "$PGW_PYTHON" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

pgw_is_root() { [[ $(id -u) -eq 0 ]]; }

# Runs a command as the OS user that owns throwaway clusters: `postgres` when we are root,
# ourselves otherwise.
pgw_as_pg_user() {
  if pgw_is_root; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# Makes a directory that the cluster owner can use (created by root, handed over to postgres).
pgw_make_owned_dir() {
  mkdir -p "$1"
  if pgw_is_root; then chown postgres:postgres "$1"; fi
}

# pgw_pg_init DIR PORT SUPERUSER_PASSWORD
# initdb into DIR/data with scram-sha-256 for every connection, listening on 127.0.0.1:PORT and on
# a socket in DIR/sock. The cluster is disposable, so durability is traded for load speed.
pgw_pg_init() {
  local dir="$1" port="$2" password="$3"
  pgw_make_owned_dir "$dir"
  pgw_make_owned_dir "$dir/sock"
  local pwfile="$dir/superuser.pw"
  printf '%s\n' "$password" >"$pwfile"
  if pgw_is_root; then chown postgres:postgres "$pwfile"; fi
  chmod 600 "$pwfile"
  pgw_as_pg_user "$PGW_PGBIN/initdb" -D "$dir/data" -U postgres --pwfile="$pwfile" \
    --auth=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; return 1; }
  rm -f "$pwfile"
  cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir/sock'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
shared_buffers = 128MB
maintenance_work_mem = 256MB
EOF
}

pgw_pg_start() {
  local dir="$1"
  pgw_as_pg_user "$PGW_PGBIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start >/dev/null \
    || { cat "$dir/postgres.log" >&2; return 1; }
}

pgw_pg_stop() {
  local dir="$1"
  if [[ -f "$dir/data/postmaster.pid" ]]; then
    pgw_as_pg_user "$PGW_PGBIN/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
  fi
}

# pgw_load_sample PORT SUPERUSER_PASSWORD DATABASE ROWS READER_ROLE READER_PASSWORD
# Creates DATABASE with fct_shipments (ROWS rows) and a read-only login role for pgwarden.
pgw_load_sample() {
  local port="$1" password="$2" db="$3" rows="$4" reader="$5" reader_pw="$6"
  PGPASSWORD="$password" psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
    -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" >/dev/null
  PGPASSWORD="$password" psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d "$db" \
    -v ON_ERROR_STOP=1 -v rows="$rows" -v reader="$reader" -v reader_password="$reader_pw" \
    -f "$PGW_ROOT/scripts/fct_shipments.sql" >/dev/null
}

# Waits until something accepts TCP connections on 127.0.0.1:PORT, or PID exits, or SECONDS pass.
pgw_wait_port() {
  local port="$1" pid="$2" seconds="${3:-20}"
  "$PGW_PYTHON" - "$port" "$pid" "$seconds" <<'EOF'
import os, socket, sys, time
port, pid, limit = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + limit
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(2)
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
EOF
}
