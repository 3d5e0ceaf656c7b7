#!/usr/bin/env bash
# What `npm test` needs beside node_modules, checked before it starts:
#   Chromium at /usr/bin/chromium, for the browser tests (test/helpers/browser.ts);
#   initdb and pg_ctl, for the PostgreSQL server the tests start when DATABASE_URL is unset (test/helpers/pg-global.ts,
#   which looks in each folder of PATH, then in /usr/lib/postgresql/<version>/bin);
#   Python 3 with psycopg, for the Python worker and producer on PostgreSQL (test/interop/python-pg.test.ts).
# As root with apt-get, what is missing is installed from Debian's packages. Otherwise, or if it is still missing then,
# one line names what is missing and how to install it, and the script exits 1: no test is skipped for want of it.
# TEST_NEEDS_PG_LIB stands for /usr/lib/postgresql, so that a check can point it (and PATH) where PostgreSQL is not.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
PG_LIB=${TEST_NEEDS_PG_LIB:-/usr/lib/postgresql}

has_chromium() {
  [ -x "$CHROMIUM" ]
}

has_postgresql() {
  [ -n "${DATABASE_URL:-}" ] && return 0
  local dirs dir
  IFS=: read -ra dirs <<<"$PATH"
  for dir in "${dirs[@]}" "$PG_LIB"/*/bin; do
    [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && return 0
  done
  return 1
}

has_psycopg() {
  local python
  for python in python3 /usr/bin/python3; do
    "$python" -c 'import psycopg' 2>/dev/null && return 0
  done
  return 1
}

# Each need: its check, what it is, and the Debian package that brings it.
NEEDS=(chromium postgresql psycopg)
declare -A WHAT=(
  [chromium]="Chromium at $CHROMIUM"
  [postgresql]="PostgreSQL's initdb and pg_ctl (or DATABASE_URL set to a server)"
  [psycopg]="Python 3's psycopg"
)
declare -A PACKAGE=([chromium]=chromium [postgresql]=postgresql [psycopg]=python3-psycopg)

missing() {
  local need
  for need in "${NEEDS[@]}"; do
    "has_$need" || echo "$need"
  done
}

# The Debian packages of the needs named.
packages() {
  local need
  for need in "$@"; do echo "${PACKAGE[$need]}"; done
}

mapfile -t absent < <(missing)
[ ${#absent[@]} -eq 0 ] && exit 0
tried=''
if [ "$EUID" -eq 0 ] && command -v apt-get >/dev/null; then
  mapfile -t install < <(packages "${absent[@]}")
  echo "npm test: installing ${install[*]} with apt-get" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${install[@]}"
  mapfile -t absent < <(missing)
  [ ${#absent[@]} -eq 0 ] && exit 0
  tried="\`apt-get install ${install[*]}\`"
fi
list=''
for need in "${absent[@]}"; do list+="${list:+, }${WHAT[$need]}"; done
mapfile -t install < <(packages "${absent[@]}")
if [ -n "$tried" ]; then
  echo "npm test needs ${list}, which ${tried} did not bring where the tests look for it" >&2
else
  echo "npm test needs ${list}: install with \`apt-get install ${install[*]}\` as root (Debian), or your system's equivalent" >&2
fi
exit 1
