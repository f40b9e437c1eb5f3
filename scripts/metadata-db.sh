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
[ "$(id -u)" = 0 ] && as_owner=(runuser -u postgres --)

case "$action" in
  start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      "${as_owner[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync > "$dir/initdb.log"
    fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
      -o "-c wal_level=logical -c listen_addresses=127.0.0.1 -p $port -k $dir" > /dev/null
    url="postgresql://postgres@127.0.0.1:$port/metadata"
    psql -q -X "postgresql://postgres@127.0.0.1:$port/postgres" -c 'CREATE DATABASE metadata' > /dev/null
    psql -q -X -v ON_ERROR_STOP=1 "$url" -f "$here/../crates/reel-cdc/schema.sql" > /dev/null
    echo "$url"
    ;;
  stop)
    "${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast stop > /dev/null
    ;;
  *) echo "metadata-db: unknown action $action" >&2; exit 2 ;;
esac
