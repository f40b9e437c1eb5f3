"""reel.open_episode, reel.curate and reel.warm beside the CLIs and independent readers."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pyarrow.ipc
import pytest
from mcap.reader import make_reader

import reel
from conftest import manifest_uris, reel_bin


def first_uri(store) -> str:
    return manifest_uris(store["manifest"])[0]


def test_open_episode_reads_topics_metadata_frames_and_signals(store):
    uri = first_uri(store)
    episode = reel.open_episode(uri, store=str(store["dir"]))
    assert episode.metadata["episode"]["episode_id"]
    assert "/joint_states" in episode.topics and "/camera/high/image_raw/compressed" in episode.topics
    # The same topics and message counts as Python's mcap reader sees.
    with open(store["dir"] / uri, "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        topics = {c.topic for c in summary.channels.values()}
        counts = {summary.channels[i].topic: n for i, n in summary.statistics.channel_message_counts.items()}
    assert set(episode.topics) == topics
    times, values, fields = episode.signal("/joint_states")
    assert times.dtype == np.int64 and values.dtype == np.float64
    assert values.shape == (counts["/joint_states"], len(fields)) and len(fields) > 0
    assert (np.diff(times) > 0).all()
    camera = "/camera/high/image_raw/compressed"
    meta = episode.channel_metadata(camera)
    frames = episode.frames(camera, [int(times[0]), int(times[len(times) // 2])])
    assert frames.shape == (2, int(meta["reel.height"]), int(meta["reel.width"]), 3)
    assert frames.dtype == np.uint8 and frames.std() > 0
    whole_uri = str(store["dir"] / uri)
    assert reel.open_episode(whole_uri).topics == episode.topics


def test_open_episode_errors_name_the_file(store, tmp_path):
    with pytest.raises(reel.EnvironmentError, match="nope.mcap"):
        reel.open_episode(str(tmp_path / "nope.mcap"))
    junk = tmp_path / "junk.mcap"
    junk.write_bytes(b"not an mcap file at all" * 10)
    with pytest.raises(reel.BadInputError, match="junk.mcap"):
        reel.open_episode(str(junk))
    episode = reel.open_episode(first_uri(store), store=str(store["dir"]))
    with pytest.raises(reel.ReelError, match="/no/such"):
        episode.signal("/no/such")


def test_curate_writes_the_manifest_the_cli_writes(store, tmp_path):
    sql = "SELECT * FROM episodes WHERE episode_id <> '' ORDER BY episode_id"
    ours = tmp_path / "ours.arrow"
    summary = reel.curate(str(store["dir"]), sql, ours, anchor_hz=10, before=1.0, after=0.98)
    theirs = tmp_path / "theirs.arrow"
    subprocess.run([reel_bin("reel-curate"), "--warehouse", str(store["dir"]), "--sql", sql,
                    "-o", str(theirs), "--anchor-hz", "10", "--before", "1.0", "--after", "0.98"],
                   check=True, capture_output=True)
    a = pyarrow.ipc.open_file(str(ours)).read_all()
    b = pyarrow.ipc.open_file(str(theirs)).read_all()
    assert a.num_rows == b.num_rows == summary["rows"] == 3
    assert a.equals(b)
    assert summary["samples"] > 0 and summary["snapshot"]
    with pytest.raises(reel.BadInputError, match="no_such_column"):
        reel.curate(str(store["dir"]), "SELECT no_such_column FROM episodes", tmp_path / "x.arrow")
    assert not (tmp_path / "x.arrow").exists()


def test_curate_by_position_writes_a_selection_the_loader_reads_alike(store, tmp_path):
    sql = "SELECT * FROM episodes WHERE episode_id <> '' ORDER BY episode_id"
    plain, selected = tmp_path / "plain.arrow", tmp_path / "selected.arrow"
    a = reel.curate(store["dir"], sql, plain)
    b = reel.curate(store["dir"], sql, selected, by_position=True)
    assert (a["selection"], b["selection"]) == (False, True)
    assert (a["rows"], a["samples"]) == (b["rows"], b["samples"])
    # pyarrow reads the selection as format 3: positions and sample offsets only.
    table = pyarrow.ipc.open_file(str(selected)).read_all()
    assert table.column_names == ["row", "sample_offset"]
    assert table.schema.metadata[b"reel.manifest.version"] == b"3"
    bases = table.schema.metadata[b"reel.manifest.bases"].decode().splitlines()
    assert len(bases) >= 1 and all(line.split(" ")[2].endswith(".parquet.base.arrow") for line in bases)
    offsets = pyarrow.ipc.open_file(str(plain)).read_all().column("sample_offset")
    assert table.column("sample_offset").equals(offsets)
    ours = list(reel.Loader(selected, store["spec"], store["dir"], batch_size=4))
    theirs = list(reel.Loader(plain, store["spec"], store["dir"], batch_size=4))
    assert len(ours) == len(theirs) > 0
    for x, y in zip(ours, theirs):
        assert x.keys() == y.keys()
        for name in y:
            np.testing.assert_array_equal(x[name], y[name])


def test_curate_reads_only_the_warehouse_and_refuses_odd_results(store, tmp_path):
    out = tmp_path / "x.arrow"
    outside = f"SELECT * FROM read_parquet('{store['dir']}/episodes/**/*.parquet')"
    with pytest.raises(reel.BadInputError, match="table function read_parquet"):
        reel.curate(str(store["dir"]), outside, out)
    none = "SELECT * FROM episodes WHERE episode_id = 'no such episode'"
    with pytest.raises(reel.BadInputError, match="selected no episodes"):
        reel.curate(str(store["dir"]), none, out)
    twice = "SELECT * FROM episodes UNION ALL SELECT * FROM episodes"
    with pytest.raises(reel.BadInputError, match="twice"):
        reel.curate(str(store["dir"]), twice, out)
    assert not out.exists()
    summary = reel.curate(str(store["dir"]), none, out, allow_empty=True)
    assert summary["rows"] == 0
    assert pyarrow.ipc.open_file(str(out)).read_all().num_rows == 0


def test_warm_fills_the_cache_and_the_loader_reads_through_it(store, tmp_path):
    cache = tmp_path / "cache"
    first = reel.warm(str(store["manifest"]), str(store["dir"]), cache, spec=str(store["spec"]),
                      capacity=1 << 30)
    assert first["report"]["fetched_bytes"] > 0 and first["pin"]
    again = reel.warm(str(store["manifest"]), str(store["dir"]), cache, spec=str(store["spec"]),
                      capacity=1 << 30)
    assert again["report"]["fetched_bytes"] == 0
    assert again["report"]["cached_bytes"] == first["report"]["total_bytes"]
    loader = reel.Loader(store["manifest"], store["spec"], store["dir"], cache=cache,
                         cache_capacity=1 << 30, batch_size=4)
    batches = list(loader)
    assert batches
    direct = list(reel.Loader(store["manifest"], store["spec"], store["dir"], batch_size=4))
    for a, b in zip(batches, direct):
        for name in b:
            np.testing.assert_array_equal(a[name], b[name])


def test_curate_as_of_a_manifest_runs_at_its_table_versions(store, tmp_path):
    sql = "SELECT * FROM episodes WHERE episode_id <> '' ORDER BY episode_id"
    first = tmp_path / "first.arrow"
    summary = reel.curate(store["dir"], sql, first)
    assert summary["snapshot"].startswith("episodes@")
    again = tmp_path / "again.arrow"
    repeated = reel.curate(store["dir"], sql, again, as_of=first)
    assert repeated["snapshot"] == summary["snapshot"]
    a = pyarrow.ipc.open_file(str(first)).read_all()
    b = pyarrow.ipc.open_file(str(again)).read_all()
    assert a.equals(b)
    with pytest.raises(reel.ReelError, match="version 999"):
        reel.curate(store["dir"], sql, tmp_path / "gone.arrow", as_of="episodes@999 ingestions@999")
    assert not (tmp_path / "gone.arrow").exists()
