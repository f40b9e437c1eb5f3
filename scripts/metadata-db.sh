#!/usr/bin/env bash
# A throwaway metadata database (PostgreSQL, wal_level = logical) on loopback, with Reel's
# schema (crates/reel-cdc/schema.sql, docs/METADATA.md):
#
#   scripts/metadata-db.sh start DIR   # initdb into DIR, start, load the schema; prints the URL
#   scripts/metadata-db.sh stop DIR
#
# PostgreSQL refuses to run as root: as root the server runs as the `postgres` user.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
action=${1:?start or stop}
dir=${2:?a folder for the database}
bin=${REEL_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
[ -x "$bin/initdb" ] || { echo "metadata-db: PostgreSQL is not installed; run scripts/setup.sh" >&2; exit 1; }
as_owner=()
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
server=$dir
if [ "$(id -u)" = 0 ]; then
  as_owner=(runuser -u postgres --)
  # The postgres user may not reach DIR (a home folder is often private): the server's
  # files go to a folder of its own, named in DIR.
  if [ ! -f "$dir/server-dir" ]; then
    mktemp -d /tmp/reel-metadata-db.XXXXXX > "$dir/server-dir"
  fi
  server=$(cat "$dir/server-dir")
  mkdir -p "$server"
  chown postgres "$server"
fi

case "$action" in
  start)
    if [ ! -f "$server/data/PG_VERSION" ]; then
      "${as_owner[@]}" "$bin/initdb" -D "$server/data" -U postgres --auth=trust --no-sync > "$dir/initdb.log"
    fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "${as_owner[@]}" "$bin/pg_ctl" -D "$server/data" -l "$server/server.log" -w -t 60 start \
      -o "-c wal_level=logical -c listen_addresses=127.0.0.1 -p $port -k $server" > /dev/null
    url="postgresql://postgres@127.0.0.1:$port/metadata"
    psql -q -X "postgresql://postgres@127.0.0.1:$port/postgres" -c 'CREATE DATABASE metadata' > /dev/null
    psql -q -X -v ON_ERROR_STOP=1 "$url" -f "$here/../crates/reel-cdc/schema.sql" > /dev/null
    echo "$url"
    ;;
  stop)
    "${as_owner[@]}" "$bin/pg_ctl" -D "$server/data" -m fast stop > /dev/null
    if [ "$server" != "$dir" ]; then rm -rf "$server" "$dir/server-dir"; fi
    ;;
  *) echo "metadata-db: unknown action $action" >&2; exit 2 ;;
esac
