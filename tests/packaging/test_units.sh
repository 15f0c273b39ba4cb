#!/usr/bin/env bash
# The systemd units as systemd itself reads them: `systemd-analyze verify` must report nothing,
# the service must keep what operation depends on (Type=notify, reload by SIGHUP, the pgwarden
# user, the state/config/runtime directories, the watchdog), and `systemd-analyze security`
# must not rate its sandbox worse than PGWARDEN_MAX_EXPOSURE (tenths; 12 = 1.2, the level the
# shipped unit reaches: 1.1 before the history writer's one call from @resources,
# sched_setattr, which the units allow with LimitNICE=+0 and RestrictRealtime=yes so that a
# thread can go no higher than nice 0). PID 1 need not be systemd: both analyses work offline.
# Usage: test_units.sh SOURCE_DIR
set -euo pipefail

src="${1:?usage: test_units.sh SOURCE_DIR}"
max_exposure="${PGWARDEN_MAX_EXPOSURE:-12}"
command -v systemd-analyze >/dev/null || { echo "systemd-analyze is missing" >&2; exit 1; }

work=$(mktemp -d /tmp/pgw-units-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# verify resolves ExecStart: point it at a real executable with the same arguments. Man pages
# are checked after installation (test_deb.sh), where they exist.
cp /bin/true "$work/pgwarden"
sed "s#^ExecStart=/usr/bin/pgwarden #ExecStart=$work/pgwarden #" \
  "$src/systemd/pgwarden.service" > "$work/pgwarden.service"
cp "$src/systemd/pgwarden.socket" "$work/pgwarden.socket"
grep -q "^ExecStart=$work/pgwarden --config /etc/pgwarden/pgwarden.yaml$" "$work/pgwarden.service" \
  || fail "ExecStart is not '/usr/bin/pgwarden --config /etc/pgwarden/pgwarden.yaml'"

# The template, as instance "a": its ExecStartPre checks the instance's config.
sed -e "s#^ExecStart=/usr/bin/pgwarden #ExecStart=$work/pgwarden #" \
    -e "s#^ExecStartPre=/usr/bin/pgwarden #ExecStartPre=$work/pgwarden #" \
  "$src/systemd/pgwarden@.service" > "$work/pgwarden@.service"
grep -qxF "ExecStartPre=$work/pgwarden --check-config /etc/pgwarden/%i.yaml" "$work/pgwarden@.service" \
  || fail "pgwarden@.service does not check /etc/pgwarden/%i.yaml before it starts"
grep -qxF "ExecStart=$work/pgwarden --config /etc/pgwarden/%i.yaml" "$work/pgwarden@.service" \
  || fail "pgwarden@.service does not run /etc/pgwarden/%i.yaml"
for want in "StateDirectory=pgwarden/%i" "RuntimeDirectory=pgwarden/%i" "Type=notify" \
            "KillSignal=SIGTERM" "TimeoutStopSec=45"; do
  grep -qxF -- "$want" "$src/systemd/pgwarden@.service" || fail "pgwarden@.service lacks '$want'"
done
ln -s "pgwarden@.service" "$work/pgwarden@a.service"

# Of @resources, only sched_setattr, and only with the nice ceiling at 0 and no real-time
# policy (history/writer_priority.h).
for unit in pgwarden.service pgwarden@.service; do
  allowed=$(grep -E '^SystemCallFilter=[^~]' "$src/systemd/$unit" || true)
  [[ "$allowed" == $'SystemCallFilter=@system-service\nSystemCallFilter=sched_setattr' ]] \
    || fail "$unit allows more than @system-service and sched_setattr: $allowed"
  for want in "LimitNICE=+0" "RestrictRealtime=yes" "SystemCallFilter=~@privileged @resources"; do
    grep -qxF -- "$want" "$src/systemd/$unit" || fail "$unit lacks '$want'"
  done
done

out=$(cd "$work" && systemd-analyze verify --man=no ./pgwarden.service ./pgwarden.socket \
        ./pgwarden@a.service 2>&1) \
  || fail "systemd-analyze verify exited non-zero"
if [[ -n "$out" ]]; then
  echo "$out" >&2
  fail "systemd-analyze verify reported problems"
fi

# pgwarden.socket passes exactly what the packaged config listens on (the daemon adopts a passed
# socket in place of the configured address it matches, and binds the others itself).
want_sockets=$(/usr/bin/python3 - "$src/packaging/pgwarden.yaml" <<'PY'
import sys, yaml
listen = yaml.safe_load(open(sys.argv[1]))["listen"]
addrs = list(listen.get("addresses", []))
port = listen.get("unix_socket_port") or (int(addrs[0].rsplit(":", 1)[1]) if addrs else 6432)
if listen.get("unix_socket_dir"):
    addrs.append(f"{listen['unix_socket_dir'].rstrip('/')}/.s.PGSQL.{port}")
print("\n".join(sorted(addrs)))
PY
)
got_sockets=$(sed -n 's/^ListenStream=//p' "$src/systemd/pgwarden.socket" | sort)
[[ "$want_sockets" == "$got_sockets" ]] \
  || fail "pgwarden.socket listens on '${got_sockets//$'\n'/ }', the packaged config on '${want_sockets//$'\n'/ }'"

# What operation relies on, on the unit file's own lines (systemd-analyze has no offline dump of
# a unit's parsed settings in this version).
service="$src/systemd/pgwarden.service"
for want in "Type=notify" "NotifyAccess=main" "ExecReload=/bin/kill -HUP \$MAINPID" \
            "User=pgwarden" "Group=pgwarden" "StateDirectory=pgwarden" \
            "ConfigurationDirectory=pgwarden" "RuntimeDirectory=pgwarden" "LimitNOFILE=65536" \
            "WatchdogSec=30s" "Restart=on-failure" "KillSignal=SIGTERM" "TimeoutStopSec=45" \
            "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" "CapabilityBoundingSet=" \
            "SystemCallFilter=@system-service" "MemoryDenyWriteExecute=yes" "UMask=0077"; do
  grep -qxF -- "$want" "$service" || fail "pgwarden.service lacks '$want'"
done
grep -q "^IPAddressDeny=" "$service" && fail "IPAddressDeny= set: pgwarden must reach its upstream"

# The shutdown grace period must fit inside systemd's stop timeout, or SIGKILL cuts the history
# flush short.
shutdown=$(sed -n 's/^ *shutdown_timeout: *\([0-9]\+\)s.*/\1/p' "$src/packaging/pgwarden.yaml")
stop=$(sed -n 's/^TimeoutStopSec=\([0-9]\+\)$/\1/p' "$service")
if [[ -n "$shutdown" && -n "$stop" ]] && (( shutdown >= stop )); then
  fail "limits.shutdown_timeout (${shutdown}s) is not below TimeoutStopSec (${stop}s)"
fi

report=$(systemd-analyze security --offline=true "$work/pgwarden.service" 2>&1) || true
echo "$report" | grep -E '✗|Overall' || true
level=$(echo "$report" | sed -n 's/.*Overall exposure level for pgwarden.service: \([0-9.]*\).*/\1/p')
[[ -n "$level" ]] || fail "systemd-analyze security gave no overall exposure level"
echo "exposure level: ${level:-?} (allowed: $(awk "BEGIN{print $max_exposure/10}"))"
systemd-analyze security --offline=true --threshold="$max_exposure" "$work/pgwarden.service" \
  >/dev/null 2>&1 || fail "exposure level ${level:-?} is above $(awk "BEGIN{print $max_exposure/10}")"

if (( failures > 0 )); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "systemd units: all checks passed"
