#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: installed from Debian's packages when missing,
# initialised under a new temporary folder, started on a free 127.0.0.1 port, stopped by pid.
#
#   eval "$(bash scripts/postgres.sh start)"   # exports FERROQUEUE_TEST_POSTGRES_URL, PG_TEST_DIR
#   bash scripts/postgres.sh stop "$PG_TEST_DIR"
#   bash scripts/postgres.sh crash "$PG_TEST_DIR"     # immediate shutdown (as a crash), then
#                                                     # start again on the same port
#
# `start` prints shell assignments on stdout and everything else on stderr. The server takes
# connections on 127.0.0.1 with a password made for this run (scram), never `trust`, so another
# local user cannot connect as its superuser.
set -euo pipefail
shopt -s inherit_errexit

bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$d" ] || [ ! -x "$d/initdb" ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "postgres.sh: no PostgreSQL server binaries; installing them needs root (apt-get install postgresql)" >&2
      exit 1
    fi
    echo "postgres.sh: installing Debian's postgresql package" >&2
    export DEBIAN_FRONTEND=noninteractive
    # Only the binaries: no cluster of the package's own left running on port 5432.
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/ferroqueue-tests.conf
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
  local bin dir port pw
  bin=$(bindir)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ferroqueue-pg.XXXXXX")
  # Whatever fails from here on, nothing is left behind: no folder, no server.
  trap 'stop "$dir"' ERR
  pw=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  echo "$pw" >"$dir/pw"
  if [ "$(id -u)" = 0 ]; then chown -R postgres "$dir"; fi
  as_owner "$bin/initdb" -D "$dir/data" -U postgres -A scram-sha-256 --pwfile="$dir/pw" -E UTF8 \
    --no-instructions >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; false; }
  rm -f "$dir/pw"
  for attempt in 1 2 3; do
    port=$(free_port)
    if serve "$bin" "$dir" "$port"; then
      echo "export FERROQUEUE_TEST_POSTGRES_URL=postgresql://postgres:$pw@127.0.0.1:$port/postgres"
      echo "export PG_TEST_DIR=$dir"
      return 0
    fi
    echo "postgres.sh: start on port $port failed (attempt $attempt)" >&2
  done
  cat "$dir/server.log" >&2
  false
}

serve() {
  as_owner "$1/pg_ctl" -D "$2/data" -l "$2/server.log" -w -t 30 \
    -o "-p $3 -k $2 -c listen_addresses=127.0.0.1 -c max_connections=200" start >&2
}

# The server stops as after a crash (SIGQUIT: no checkpoint, every connection cut; committed
# transactions are recovered from the WAL) and starts again on its port.
crash() {
  local dir=$1 pid port
  pid=$(head -n 1 "$dir/data/postmaster.pid")
  port=$(sed -n 4p "$dir/data/postmaster.pid")
  kill -QUIT "$pid"
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  serve "$(bindir)" "$dir" "$port"
}

stop() {
  local dir=$1 pid
  [ -n "$dir" ] || return 0
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
  crash) crash "${2:?usage: postgres.sh crash DIR}" ;;
  *) echo "usage: postgres.sh start | stop DIR | crash DIR" >&2; exit 2 ;;
esac
