#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: installed from Debian's packages when missing,
# initialised under a new temporary folder, started on a free 127.0.0.1 port, stopped by pid.
#
#   eval "$(bash scripts/postgres.sh start)"   # exports FERROQUEUE_TEST_POSTGRES_URL, PG_TEST_DIR
#   bash scripts/postgres.sh stop "$PG_TEST_DIR"
#
# `start` prints shell assignments on stdout and everything else on stderr.
set -euo pipefail

bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$d" ] || [ ! -x "$d/initdb" ]; then
    echo "postgres.sh: installing Debian's postgresql package" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends postgresql >&2
    d=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  echo "$d"
}

# Runs a server binary as the `postgres` user when we are root (initdb refuses root).
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  local bin dir port
  bin=$(bindir)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ferroqueue-pg.XXXXXX")
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
  as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-instructions >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  for attempt in 1 2 3; do
    port=$(free_port)
    if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >&2; then
      echo "export FERROQUEUE_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:$port/postgres"
      echo "export PG_TEST_DIR=$dir"
      return 0
    fi
    echo "postgres.sh: start on port $port failed (attempt $attempt)" >&2
  done
  cat "$dir/server.log" >&2
  exit 1
}

stop() {
  local dir=$1 pid
  [ -f "$dir/data/postmaster.pid" ] || { rm -rf "$dir"; return 0; }
  pid=$(head -n 1 "$dir/data/postmaster.pid")
  kill -INT "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:?usage: postgres.sh stop DIR}" ;;
  *) echo "usage: postgres.sh start | stop DIR" >&2; exit 2 ;;
esac
