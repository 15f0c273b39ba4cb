#!/usr/bin/env bash
# The Debian package, end to end on this machine: build it with CPack from an already built tree
# without rebuilding anything (or take a .deb), check its contents, control fields and Depends, run lintian (no errors, no
# warnings), install it with dpkg -i, check the account, permissions and files and run
# `pgwarden --check-config` on the installed example as the service's user, reinstall it (the
# upgrade path of the maintainer scripts), then remove and purge it and check nothing is left.
#
# Usage: test_deb.sh --source DIR (--build-dir DIR | --deb FILE) [--expect-binary]
#   --expect-binary  the package must contain /usr/bin/pgwarden (set when the build has the
#                    pgwarden target); without it the binary's checks run only if it is there.
# Needs root (dpkg -i). Refuses to run where pgwarden is installed or its directories exist,
# so it never removes anything it did not install. Concurrent runs wait for each other.
set -euo pipefail

src="" build="" deb="" expect_binary=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --source) src="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --deb) deb="$2"; shift 2 ;;
    --expect-binary) expect_binary=1; shift ;;
    *) echo "test_deb.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "$src" && ( -n "$build" || -n "$deb" ) ]] || { sed -n '8,11p' "$0" >&2; exit 2; }
# dpkg -i needs root; without it the test fails (it never skips: a skipped test has not run).
if [[ $(id -u) -ne 0 ]]; then
  echo "test_deb.sh: needs root for dpkg -i" >&2
  exit 1
fi

exec 9>/run/lock/pgwarden-deb-test.lock
flock 9

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
step() { printf '\n== %s (+%ds)\n' "$*" "$SECONDS"; }

installed_status() { dpkg-query -W -f='${db:Status-Status}' pgwarden 2>/dev/null || true; }

if [[ -n "$(installed_status)" && "$(installed_status)" != "not-installed" ]]; then
  echo "test_deb.sh: a pgwarden package is on this machine ($(installed_status)); not touching it" >&2
  exit 1
fi
for d in /etc/pgwarden /var/lib/pgwarden; do
  [[ -e "$d" ]] && { echo "test_deb.sh: $d exists and is not from this test; not touching it" >&2; exit 1; }
done
user_existed=0; getent passwd pgwarden >/dev/null && user_existed=1
group_existed=0; getent group pgwarden >/dev/null && group_existed=1

work=$(mktemp -d /tmp/pgw-deb-XXXXXX)
cleanup() {
  local st
  st=$(installed_status)
  if [[ -n "$st" && "$st" != "not-installed" ]]; then
    dpkg -P pgwarden >/dev/null 2>&1 || true
  fi
  # The package keeps its system account after a purge (Debian practice); the test removes the
  # one it caused, so the machine ends as it started.
  if [[ $user_existed -eq 0 ]] && getent passwd pgwarden >/dev/null; then
    deluser --system --quiet pgwarden >/dev/null 2>&1 || userdel pgwarden || true
  fi
  if [[ $group_existed -eq 0 ]] && getent group pgwarden >/dev/null; then
    delgroup --system --quiet pgwarden >/dev/null 2>&1 || groupdel pgwarden || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# ---------------------------------------------------------------------------------------------
step "build"
if [[ -z "$deb" ]]; then
  [[ -f "$build/CPackConfig.cmake" ]] || { echo "no CPackConfig.cmake in $build" >&2; exit 1; }
  # The tree's own install rules into a staging directory, then CPack around that directory.
  # Plain `cpack` would first rebuild every target of the tree (its "preinstall" step); this
  # packages what the build already made, and fails if something is missing.
  DESTDIR="$work/stage" cmake --install "$build" --prefix /usr --strip > "$work/install.log" 2>&1 \
    || { cat "$work/install.log" >&2; echo "cmake --install failed" >&2; exit 1; }
  (cd "$build" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/out" \
     -D CPACK_INSTALL_CMAKE_PROJECTS= -D "CPACK_INSTALLED_DIRECTORIES=$work/stage;.") \
    > "$work/cpack.log" 2>&1 || { cat "$work/cpack.log" >&2; exit 1; }
  deb=$(find "$work/out" -maxdepth 1 -name 'pgwarden_*.deb' -print -quit)
  [[ -n "$deb" ]] || { cat "$work/cpack.log" >&2; echo "cpack made no .deb" >&2; exit 1; }
fi
echo "package: $deb"

# ---------------------------------------------------------------------------------------------
step "contents"
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | sed 's#^\./#/#' | sort > "$work/files"
has_binary=0; grep -qx /usr/bin/pgwarden "$work/files" && has_binary=1
if [[ $expect_binary -eq 1 && $has_binary -eq 0 ]]; then
  fail "the package has no /usr/bin/pgwarden although the build has the pgwarden target"
fi
{
  if [[ $has_binary -eq 1 ]]; then
    echo /usr/bin/pgwarden
    echo /usr/share/bash-completion/completions/pgwarden
    echo /usr/share/zsh/vendor-completions/_pgwarden
  fi
  echo /etc/pgwarden/pgwarden.yaml
  echo /lib/systemd/system/pgwarden.service
  echo /lib/systemd/system/pgwarden.socket
  echo /lib/systemd/system/pgwarden@.service
  echo /usr/share/man/man8/pgwarden.8.gz
  echo /usr/share/man/man5/pgwarden.yaml.5.gz
  echo /usr/share/doc/pgwarden/copyright
  echo /usr/share/doc/pgwarden/changelog.Debian.gz
  [[ -f "$src/README.md" ]] && echo /usr/share/doc/pgwarden/README.md.gz
  for d in "$src"/docs/*.md; do
    [[ -f "$d" && "$(basename "$d")" != ARCHITECTURE.md ]] && echo "/usr/share/doc/pgwarden/$(basename "$d").gz"
  done
  for e in "$src"/packaging/examples/*; do
    [[ -f "$e" ]] && echo "/usr/share/doc/pgwarden/examples/$(basename "$e")"
  done
  for j in "$src"/packaging/grafana/*.json; do
    [[ -f "$j" ]] && echo "/usr/share/doc/pgwarden/grafana/$(basename "$j")"
  done
  for r in "$src"/packaging/prometheus/*.yaml; do
    [[ -f "$r" ]] && echo "/usr/share/doc/pgwarden/prometheus/$(basename "$r")"
  done
  [[ -f "$src/packaging/debian/lintian-overrides" ]] && echo /usr/share/lintian/overrides/pgwarden
  true
} | sort > "$work/expected"
if ! diff -u "$work/expected" "$work/files"; then
  fail "package file list differs from the expected layout (- expected, + in package)"
fi

field() { dpkg-deb -f "$deb" "$1"; }
[[ "$(field Package)" == pgwarden ]] || fail "Package is '$(field Package)'"
[[ "$(field Section)" == net ]] || fail "Section is '$(field Section)', not net"
[[ "$(field Priority)" == optional ]] || fail "Priority is '$(field Priority)', not optional"
[[ "$(field Maintainer)" =~ ^[^\<]+\ \<[^@\>]+@[^\>]+\>$ ]] || fail "Maintainer '$(field Maintainer)' is not 'Name <address>'"
# One project address and one set of terms: the Maintainer is the copyright file's
# Upstream-Contact, and the top-level LICENSE states the copyright file's terms.
copyright="$src/packaging/debian/copyright"
grep -qxF "Upstream-Contact: $(field Maintainer)" "$copyright" \
  || fail "Maintainer '$(field Maintainer)' is not the copyright file's Upstream-Contact"
[[ -f "$src/LICENSE" ]] || fail "no LICENSE at the top of the source tree"
# The first line of the stand-alone License paragraph (the terms' text) is in LICENSE as it is.
terms=$(awk '/^License: / {n++; next} n == 2 && /^ [^.]/ {sub(/^ /, ""); print; exit}' "$copyright")
[[ -n "$terms" ]] && grep -qxF "$terms" "$src/LICENSE" \
  || fail "LICENSE does not state the copyright file's terms ('$terms')"
grep -Eiq 'placeholder|example\.(com|org)|changeme|TODO' "$copyright" "$src/LICENSE" \
  && fail "placeholder text in the copyright file or LICENSE"
depends=$(field Depends)
echo "Depends: $depends"
[[ ",$depends," =~ ,\ ?adduser[\ ,] ]] || fail "Depends lacks adduser (the postinst uses it)"
dpkg-deb --ctrl-tarfile "$deb" | tar -x -O ./conffiles > "$work/conffiles"
grep -qx /etc/pgwarden/pgwarden.yaml "$work/conffiles" || fail "pgwarden.yaml is not a conffile"

mkdir -p "$work/root"
dpkg-deb -x "$deb" "$work/root"
if [[ $has_binary -eq 1 ]]; then
  # Every shared library the binary needs must come from a package in Depends, by its own name
  # or by one it Provides (libspdlog1.10 provides the libspdlog1.10-fmt9 its shlibs names).
  depnames=" $(echo "$depends" | tr ',|' '\n' | awk '{print $1}' | tr '\n' ' ') "
  # One dpkg -S for all libraries: each call reads the whole package database.
  declare -A lib_path=()
  for soname in $(objdump -p "$work/root/usr/bin/pgwarden" | awk '/NEEDED/ {print $2}'); do
    # awk reads to the end: an early exit would kill ldconfig with SIGPIPE, failing the pipe.
    path=$(ldconfig -p | awk -v s="$soname" '$1 == s && !found {print $NF; found = 1}')
    [[ -n "$path" ]] || { fail "no $soname on this machine"; continue; }
    # The real file behind the soname link; dpkg knows it under the directory its package
    # installed it to, /lib or /usr/lib (merged here), so ask for both spellings.
    target=$(readlink "$path" || true)
    [[ -z "$target" ]] && target="$path"
    [[ "$target" == /* ]] || target="$(dirname "$path")/$target"
    target="${target#/usr}"
    lib_path[$soname]="$target"
  done
  owners=$(for t in "${lib_path[@]}"; do echo "$t"; echo "/usr$t"; done | xargs dpkg -S 2>/dev/null || true)
  for soname in "${!lib_path[@]}"; do
    owner=$(echo "$owners" | awk -v p="${lib_path[$soname]}" \
      '($2 == p || $2 == "/usr" p) && !found {sub(/:.*/, "", $1); print $1; found = 1}')
    [[ -n "$owner" ]] || { fail "no package owns ${lib_path[$soname]} ($soname)"; continue; }
    found=0
    for name in "$owner" $(dpkg-query -W -f='${Provides}' "$owner" | tr ',' '\n' | awk '{print $1}'); do
      [[ "$depnames" == *" $name "* ]] && found=1
    done
    (( found )) || fail "$soname comes from $owner, which is not in Depends"
  done
fi
for page in usr/share/man/man8/pgwarden.8.gz usr/share/man/man5/pgwarden.yaml.5.gz; do
  warnings=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 \
    man --warnings -E UTF-8 -l -Tutf8 -Z "$work/root/$page" 2>&1 >/dev/null) || true
  [[ -z "$warnings" ]] || { echo "$warnings" >&2; fail "$page has roff warnings"; }
  [[ "$(gzip -l "$work/root/$page" | wc -l)" -eq 2 ]] || fail "$page is not one gzip stream"
done

# ---------------------------------------------------------------------------------------------
step "lintian"
if ! lintian --allow-root --fail-on error,warning -I "$deb"; then
  fail "lintian reports errors or warnings"
fi

# ---------------------------------------------------------------------------------------------
step "dpkg -i"
dpkg -i "$deb" || fail "dpkg -i failed"
[[ "$(installed_status)" == installed ]] || fail "status after dpkg -i is '$(installed_status)'"

IFS=: read -r _ _ uid gid _ home shell < <(getent passwd pgwarden) || true
if [[ -z "${uid:-}" ]]; then
  fail "no pgwarden user after install"
else
  (( uid < 1000 )) || fail "pgwarden uid $uid is not a system uid"
  [[ "$(getent group pgwarden | cut -d: -f3)" == "$gid" ]] || fail "pgwarden's primary group is not pgwarden"
  [[ "$home" == /var/lib/pgwarden ]] || fail "pgwarden's home is $home"
  [[ "$shell" == /usr/sbin/nologin ]] || fail "pgwarden's shell is $shell"
fi
[[ "$(stat -c '%U:%G %a' /var/lib/pgwarden 2>/dev/null)" == "pgwarden:pgwarden 750" ]] \
  || fail "/var/lib/pgwarden is '$(stat -c '%U:%G %a' /var/lib/pgwarden 2>&1)'"
[[ "$(stat -c '%U:%G %a' /etc/pgwarden/pgwarden.yaml 2>/dev/null)" == "root:pgwarden 640" ]] \
  || fail "pgwarden.yaml is '$(stat -c '%U:%G %a' /etc/pgwarden/pgwarden.yaml 2>&1)', not root:pgwarden 640"
while read -r f; do
  [[ -e "$f" ]] || fail "$f is not installed"
done < "$work/expected"
cmp -s "$src/packaging/pgwarden.yaml" /etc/pgwarden/pgwarden.yaml \
  || fail "installed config differs from packaging/pgwarden.yaml"
[[ "$(man -w pgwarden 2>/dev/null)" == /usr/share/man/man8/pgwarden.8.gz ]] || fail "man -w pgwarden"
[[ "$(man -w 5 pgwarden.yaml 2>/dev/null)" == /usr/share/man/man5/pgwarden.yaml.5.gz ]] \
  || fail "man -w 5 pgwarden.yaml"

if [[ $has_binary -eq 1 ]]; then
  /usr/bin/pgwarden --version || fail "pgwarden --version failed"
  # As the service runs it: the pgwarden user reading the installed, group-readable file.
  if ! runuser -u pgwarden -- /usr/bin/pgwarden --check-config /etc/pgwarden/pgwarden.yaml; then
    fail "pgwarden --check-config /etc/pgwarden/pgwarden.yaml failed on the shipped example"
  fi
  # The installed unit, with the real binary and man pages in place.
  out=$(systemd-analyze verify /lib/systemd/system/pgwarden.service /lib/systemd/system/pgwarden.socket 2>&1) \
    || fail "systemd-analyze verify of the installed units failed"
  [[ -z "$out" ]] || { echo "$out" >&2; fail "systemd-analyze verify reported problems"; }
else
  echo "(no binary in this package: --check-config and the installed-unit verify are skipped)"
fi

# ---------------------------------------------------------------------------------------------
step "dpkg -i again (upgrade path)"
echo "# local edit" >> /etc/pgwarden/pgwarden.yaml
dpkg -i --force-confold "$deb" || fail "reinstall failed"
tail -1 /etc/pgwarden/pgwarden.yaml | grep -qx "# local edit" || fail "reinstall lost a local config edit"
[[ "$(stat -c '%U:%G %a' /etc/pgwarden/pgwarden.yaml)" == "root:pgwarden 640" ]] \
  || fail "reinstall changed pgwarden.yaml's owner or mode"
[[ "$(getent passwd pgwarden | cut -d: -f3)" == "${uid:-}" ]] || fail "reinstall changed pgwarden's uid"

# ---------------------------------------------------------------------------------------------
step "dpkg -r"
touch /var/lib/pgwarden/history.db
dpkg -r pgwarden || fail "dpkg -r failed"
[[ "$(installed_status)" == config-files ]] || fail "status after dpkg -r is '$(installed_status)'"
while read -r f; do
  [[ "$f" == /etc/pgwarden/pgwarden.yaml ]] && continue
  [[ -e "$f" ]] && fail "$f is still there after dpkg -r"
done < "$work/expected"
[[ -f /etc/pgwarden/pgwarden.yaml ]] || fail "dpkg -r removed the config (only purge may)"
[[ -f /var/lib/pgwarden/history.db ]] || fail "dpkg -r removed the state directory (only purge may)"

# ---------------------------------------------------------------------------------------------
step "dpkg -P"
dpkg -P pgwarden || fail "dpkg -P failed"
st=$(installed_status)
[[ -z "$st" || "$st" == not-installed ]] || fail "status after dpkg -P is '$st'"
for p in /etc/pgwarden /var/lib/pgwarden /run/pgwarden; do
  [[ -e "$p" ]] && fail "$p is still there after purge"
done
dpkg-statoverride --list /etc/pgwarden/pgwarden.yaml >/dev/null 2>&1 \
  && fail "the statoverride on pgwarden.yaml is still there after purge"
leftover=$(find /etc/systemd /var/lib/systemd -name 'pgwarden*' 2>/dev/null || true)
[[ -z "$leftover" ]] || fail "systemd leftovers after purge: $leftover"
owned=$(find /etc /var/lib /run -xdev \( -user pgwarden -o -group pgwarden \) -print 2>/dev/null \
  | sed -n '1,5p')
[[ -z "$owned" ]] || fail "files still owned by pgwarden after purge: $owned"

if (( failures > 0 )); then
  echo
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo
echo "Debian package: all checks passed"
