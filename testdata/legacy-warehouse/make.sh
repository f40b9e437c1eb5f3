#!/usr/bin/env bash
# Writes the warehouse in this folder as Reel wrote warehouses before its tables (the
# earlier layout: Parquet parts under episodes/, a compaction under compacted/, captured
# database tables under db/), for the test of `reel-compact --migrate`. It was run once
# with the CLIs of Reel at commit 1c4c032 (the last of that layout) and its output kept:
#
#   REEL_BIN=<that build's target/debug> testdata/legacy-warehouse/make.sh
#
# Three landing episodes in two ingest batches, a compaction, one batch ingested again by
# a newer pipeline (its episodes' rows newer than the compaction's), reviews captured
# from PostgreSQL then updated and deleted there and captured again,
# and what a reader of that layout saw: expected.json (each episode's latest ingestion
# and digest) and annotations.csv (PostgreSQL's own rows).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${REEL_BIN:?the CLIs of a build of the earlier layout}
work=$(mktemp -d)
trap 'scripts/metadata-db.sh stop "$work/db" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$here/../.."
store=$work/store
"$bin/reel-synth" -o "$store/landing" --episodes 3 --seconds 3 --cameras 1 --width 64 --height 48 --seed 3 -q
"$bin/reel-plan" "$store/landing" -o "$work/plan.json" --batches 2 > /dev/null
for batch in 0 1; do
  "$bin/reel-ingest" --plan "$work/plan.json" --batch "$batch" --store "$store" > /dev/null
done
"$bin/reel-compact" --warehouse "$store" > /dev/null
"$bin/reel-ingest" --plan "$work/plan.json" --batch 1 --store "$store" --replay --pipeline-version 0.2.0 > /dev/null
postgres=$(scripts/metadata-db.sh start "$work/db")
ids=$(cd "$store/canonical" && ls | sed 's/\.mcap$//')
for id in $ids; do
  echo "INSERT INTO episodes (episode_id, status, robot, operator) VALUES ('$id', 'ingested', 'sim-arm', 'op-a');"
  echo "INSERT INTO annotations (episode_id, key, value, author) VALUES ('$id', 'review', 'keep', 'op-a');"
done | psql -q -X -v ON_ERROR_STOP=1 "$postgres" > /dev/null
"$bin/reel-cdc" --postgres "$postgres" --warehouse "$store" --once --quiet > /dev/null
first=$(echo "$ids" | head -1)
last=$(echo "$ids" | tail -1)
psql -q -X -v ON_ERROR_STOP=1 "$postgres" -c "UPDATE annotations SET value = 'drop' WHERE episode_id = '$first'; DELETE FROM annotations WHERE episode_id = '$last'" > /dev/null
"$bin/reel-cdc" --postgres "$postgres" --warehouse "$store" --once --quiet > /dev/null
psql -q -X -v ON_ERROR_STOP=1 "$postgres" \
  -c "\\copy (SELECT episode_id, key, value, author FROM annotations ORDER BY episode_id, key) TO '$work/annotations.csv' CSV HEADER"
"$bin/reel-cdc" --postgres "$postgres" --drop --quiet > /dev/null
rm -rf "$here/episodes" "$here/compacted" "$here/db"
cp -r "$store/episodes" "$store/compacted" "$store/db" "$here/"
cp "$work/annotations.csv" "$here/annotations.csv"
# Each episode's latest ingestion, as that layout's readers picked it, read by pyarrow.
"${REEL_PYTHON:-python3}" - "$here" <<'PY'
import json, pathlib, sys
import pyarrow.parquet as pq
here = pathlib.Path(sys.argv[1])
latest = {}
rows = 0
for part in sorted((here / "episodes").rglob("*.parquet")):
    for r in pq.read_table(part).to_pylist():
        rows += 1
        seen = latest.get(r["episode_id"])
        if seen is None or r["ingested_at_ns"] > seen["ingested_at_ns"]:
            latest[r["episode_id"]] = {"ingested_at_ns": r["ingested_at_ns"],
                                       "canonical_digest": r["canonical_digest"], "uri": r["uri"]}
json.dump({"ingestions": rows, "episodes": latest}, open(here / "expected.json", "w"),
          indent=1, sort_keys=True)
PY
