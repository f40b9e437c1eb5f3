"""reel.Loader against the Rust loader (reel-load --dump) and its promises: no copy,
exact resume, disjoint shards, clear errors, corrupt episodes skipped."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import reel
from conftest import SPEC, cli_batches


def arrow_tensors(record) -> dict:
    """A record batch of reel-load --dump as {name: array [n, *shape]}."""
    out = {}
    for field, column in zip(record.schema, record.columns):
        shape = json.loads(field.metadata[b"reel.shape"])
        values = column.flatten().to_numpy(zero_copy_only=False)
        out[field.name] = values.reshape([len(column), *shape])
    return out


@pytest.mark.parametrize("shuffle", ["global", "locality"])
def test_batches_equal_the_rust_loaders(store, shuffle):
    rust = [arrow_tensors(r) for r in cli_batches(store, store["spec"], 6, shuffle=shuffle,
                                                   seed=7, batch_size=4, workers=2)]
    loader = reel.Loader(store["manifest"], store["spec"], store["dir"], batch_size=4,
                         workers=3, shuffle=shuffle, seed=7)
    ours = []
    for batch in loader:
        ours.append(batch)
        if len(ours) == len(rust):
            break
    assert len(ours) == len(rust) == 6
    for index, (mine, theirs) in enumerate(zip(ours, rust)):
        assert mine.index == index and mine.epoch == 0
        assert sorted(mine) == sorted(theirs)
        for name, value in theirs.items():
            assert mine[name].dtype == value.dtype, name
            np.testing.assert_array_equal(mine[name], value, err_msg=f"batch {index} {name}")


def test_depth_arrives_as_stored_in_both_layouts(store):
    depth = {"name": "depth", "topic": "/camera/high/depth/image_raw", "offsets_s": [-0.2, 0.0]}
    spec = {
        "anchor_hz": 10.0,
        "depth": [depth, {**depth, "name": "depth_m", "offsets_s": [0.0], "unit": "m"}],
        "proprio": [{"name": "state", "topic": "/joint_states", "kind": "window", "steps": 1,
                     "hz": 200.0}],
    }
    common = dict(batch_size=4, workers=2, shuffle="global", seed=3)
    batch = next(iter(reel.Loader(store["manifest"], spec, store["dir"], **common)))
    mm, metres = batch["depth"], batch["depth_m"]
    assert mm.dtype == np.uint16 and mm.shape == (4, 2, 48, 64)
    assert metres.dtype == np.float32 and metres.shape == (4, 1, 48, 64)
    # A frame the recorder dropped (reel-synth drops 0.2 %) is masked, never made up.
    assert (batch["depth.mask"] == 1).sum() >= 6, batch["depth.mask"]
    # Holes stay 0 in both units; metres are millimetres / 1000, from the same frame.
    assert (mm == 0).any() and (mm > 300).any()
    np.testing.assert_array_equal(batch["depth.time_ns"][:, 1], batch["depth_m.time_ns"][:, 0])
    np.testing.assert_array_equal(metres[:, 0], mm[:, 1].astype(np.float32) / np.float32(1000))
    lerobot = next(iter(reel.Loader(store["manifest"], spec, store["dir"], layout="lerobot",
                                    **common)))
    frames = lerobot["observation.images.depth"]
    assert frames.shape == (4, 2, 1, 48, 64) and frames.dtype == np.uint16
    np.testing.assert_array_equal(frames[:, :, 0], mm)
    np.testing.assert_array_equal(lerobot["observation.images.depth_is_pad"],
                                  batch["depth.mask"] == 0)


def test_lerobot_layout_maps_the_reel_batch(store):
    spec = {
        "anchor_hz": 10.0,
        "camera": [{"name": "cam_high", "topic": "/camera/high/image_raw/compressed",
                    "offsets_s": [-0.5, 0.0]}],
        "proprio": [
            {"name": "state", "topic": "/joint_states", "kind": "window", "steps": 1, "hz": 200.0},
            {"name": "action", "topic": "/action", "kind": "chunk", "steps": 10, "hz": 50.0},
        ],
    }
    chw = {**spec, "camera": [{**spec["camera"][0], "layout": "chw"}]}
    common = dict(batch_size=4, workers=2, shuffle="global", seed=3)
    reel_layout = next(iter(reel.Loader(store["manifest"], chw, store["dir"], **common)))
    lerobot = next(iter(reel.Loader(store["manifest"], spec, store["dir"], layout="lerobot", **common)))
    floats = next(iter(reel.Loader(store["manifest"], spec, store["dir"], layout="lerobot",
                                   image_dtype="float32", **common)))
    # The Rust loader's own channels-first batch, element for element.
    chw_path = store["root"] / "chw.toml"
    chw_path.write_text(SPEC.replace('offsets_s = [-0.5, 0.0]', 'offsets_s = [-0.5, 0.0]\nlayout = "chw"')
                        .replace("steps = 20", "steps = 1"))
    rust = arrow_tensors(cli_batches(store, chw_path, 1, shuffle="global", seed=3, batch_size=4)[0])
    np.testing.assert_array_equal(reel_layout["cam_high"], rust["cam_high"])

    images = lerobot["observation.images.cam_high"]
    assert images.shape[:3] == (4, 2, 3) and images.dtype == np.uint8  # [B, T, C, H, W]
    np.testing.assert_array_equal(images, rust["cam_high"])
    np.testing.assert_array_equal(lerobot["observation.state"], rust["state"])
    np.testing.assert_array_equal(lerobot["action"], rust["action"])
    np.testing.assert_array_equal(lerobot["action_is_pad"], rust["action.mask"] == 0)
    np.testing.assert_array_equal(lerobot["observation.images.cam_high_is_pad"],
                                  rust["cam_high.mask"] == 0)
    assert lerobot["action_is_pad"].dtype == np.bool_
    np.testing.assert_array_equal(lerobot["episode_index"], rust["episode_row"])
    # Seconds from the episode's start: the spec reaches 0.5 s back, episodes last 4 s.
    stamps = lerobot["timestamp"]
    assert stamps.dtype == np.float32 and (stamps >= 0.5 - 1e-6).all() and (stamps < 4.0).all()
    assert len(lerobot["task"]) == 4 and all(isinstance(t, str) and t for t in lerobot["task"])
    float_images = floats["observation.images.cam_high"]
    assert float_images.dtype == np.float32
    np.testing.assert_allclose(float_images, images / 255.0, rtol=0, atol=1e-6)
    assert 0.0 <= float_images.min() and float_images.max() <= 1.0


def test_arrays_are_reels_buffers_not_copies(store):
    loader = reel.Loader(store["manifest"], store["spec"], store["dir"], batch_size=4)
    batch = next(iter(loader))
    for name, array in batch.items():
        owner = array.base
        assert isinstance(owner, reel.TensorBuffer), name
        assert array.__array_interface__["data"][0] == owner.address, name
        assert array.nbytes == owner.nbytes, name
        assert not owner.pinned
    # The buffer outlives the batch dict: the view keeps its owner alive.
    cam = batch["cam_high"]
    expected = cam.copy()
    del batch
    np.testing.assert_array_equal(cam, expected)


def test_resume_mid_epoch_equals_the_uninterrupted_run(store):
    def open_loader():
        return reel.Loader(store["manifest"], store["spec"], store["dir"], batch_size=3,
                           workers=2, shuffle="locality", run=4, seed=11)

    loader = open_loader()
    loader.set_epoch(1)
    whole = [{k: v.copy() for k, v in b.items()} for b in loader]
    assert loader.epoch == 2
    loader = open_loader()
    loader.set_epoch(1)
    first = []
    for batch in loader:
        first.append(batch)
        if len(first) == 4:
            break
    state = json.loads(json.dumps(loader.state_dict()))
    assert (state["epoch"], state["batch"]) == (1, 4)
    resumed = open_loader()
    resumed.load_state_dict(state)
    rest = list(resumed)
    sized = open_loader()
    sized.set_epoch(1)
    assert len(first) + len(rest) == len(whole) == len(sized)
    for mine, theirs in zip(first + rest, whole):
        for name in theirs:
            np.testing.assert_array_equal(mine[name], theirs[name])
    assert [b.index for b in rest] == list(range(4, len(whole)))


def test_a_state_from_another_run_is_refused_naming_what_changed(store, tmp_path):
    loader = reel.Loader(store["manifest"], store["spec"], store["dir"], batch_size=3, seed=1)
    next(iter(loader))
    state = json.loads(json.dumps(loader.state_dict()))
    assert state["run"]["manifest"].startswith("xxh3_128:") and state["run"]["seed"] == 1
    assert (state["rank"], state["world"], state["epoch"], state["batch"]) == (0, 1, 0, 1)
    other = reel.Loader(store["manifest"], store["spec"], store["dir"], batch_size=3, seed=2)
    with pytest.raises(reel.BadInputError, match="seed is 1, this loader's is 2"):
        other.load_state_dict(state)
    # Deliberately: the saved epoch and batch, in this loader's order.
    other.load_state_dict(state, override=True)
    assert (other.epoch, other.state_dict()["batch"]) == (0, 1)
    # The same manifest under another name is the same run.
    copy = tmp_path / "copy.arrow"
    shutil.copy(store["manifest"], copy)
    moved = reel.Loader(copy, store["spec"], store["dir"], batch_size=3, seed=1)
    moved.load_state_dict(state)
    # Same run and position; only where its manifest was opened from differs.
    assert moved.state_dict() == {**state, "manifests": [str(copy)]}
    with pytest.raises(reel.BadInputError, match="past the"):
        loader.load_state_dict({**state, "batch": 10_000})
    with pytest.raises(reel.BadInputError, match="override=True"):
        loader.load_state_dict({"epoch": 0, "batch": 1})


def test_a_run_resumes_on_fewer_ranks_delivering_the_rest_once(store):
    def open_loader(rank, world):
        return reel.Loader(store["manifest"], store["spec"], store["dir"], batch_size=3,
                           shuffle="locality", run=4, seed=7, rank=rank, world=world)

    def pairs(batches):
        return [(int(r), int(a)) for b in batches for r, a in zip(b["episode_row"], b["anchor_ns"])]

    everything = pairs(open_loader(0, 1))
    seen, states = [], []
    for rank in range(3):
        loader = open_loader(rank, 3)
        batches = iter(loader)
        seen += pairs([next(batches), next(batches)])
        states.append(json.loads(json.dumps(loader.state_dict())))
    # One rank's state mid-epoch cannot say what the others delivered.
    with pytest.raises(reel.BadInputError, match="all 3 ranks"):
        open_loader(0, 2).load_state_dict(states[0])
    for rank in range(2):
        resumed = open_loader(rank, 2)
        resumed.load_state_dict(states)
        assert resumed.epoch == 0 and len(resumed) > 0
        seen += pairs(resumed)
        assert resumed.epoch == 1 and resumed.state_dict()["batch"] == 0
    assert sorted(seen) == sorted(everything)


def test_shards_are_disjoint_and_cover_the_epoch(store):
    def anchors(rank, world):
        loader = reel.Loader(store["manifest"], store["spec"], store["dir"], batch_size=5,
                             shuffle="global", seed=4, rank=rank, world=world)
        return [(int(r), int(a)) for b in loader for r, a in zip(b["episode_row"], b["anchor_ns"])]

    everything = anchors(0, 1)
    ranks = [anchors(r, 2) for r in range(2)]
    assert len(set(everything)) == len(everything)
    assert not set(ranks[0]) & set(ranks[1])
    assert sorted(ranks[0] + ranks[1]) == sorted(everything)


def test_missing_manifest_bad_spec_and_bad_arguments_raise_clearly(store, tmp_path):
    missing = tmp_path / "nowhere.arrow"
    with pytest.raises(reel.ReelError, match="nowhere.arrow"):
        reel.Loader(missing, store["spec"], store["dir"])
    bad = tmp_path / "bad.toml"
    bad.write_text("anchor_hz = -1.0\n")
    with pytest.raises(reel.BadInputError, match="anchor_hz"):
        reel.Loader(store["manifest"], bad, store["dir"])
    with pytest.raises(reel.EnvironmentError, match="missing.toml"):
        reel.Loader(store["manifest"], str(tmp_path / "missing.toml"), store["dir"])
    with pytest.raises(reel.BadInputError, match="no_such_field"):
        reel.Loader(store["manifest"], {"anchor_hz": 10.0, "no_such_field": 1}, store["dir"])
    with pytest.raises(reel.BadInputError, match="shuffle"):
        reel.Loader(store["manifest"], store["spec"], store["dir"], shuffle="random")
    with pytest.raises(reel.BadInputError, match="rank 3"):
        reel.Loader(store["manifest"], store["spec"], store["dir"], rank=3, world=2)
    spec = SPEC.replace("/joint_states", "/no/such/topic")
    with pytest.raises(reel.ReelError, match="/no/such/topic"):
        reel.Loader(store["manifest"], spec, store["dir"])


def test_a_corrupt_episode_is_skipped_and_reported(corrupt_store):
    # A third of the samples lost is past the default share: the run stops, naming it.
    strict = reel.Loader(corrupt_store["manifest"], corrupt_store["spec"], corrupt_store["dir"],
                         batch_size=8, shuffle="global", seed=2)
    with pytest.raises(reel.BadInputError, match=corrupt_store["victim"]):
        for _ in strict:
            pass
    loader = reel.Loader(corrupt_store["manifest"], corrupt_store["spec"], corrupt_store["dir"],
                         batch_size=8, shuffle="global", seed=2, max_skipped=0.5)
    skipped, delivered = [], set()
    for batch in loader:
        skipped += batch.skipped
        delivered.update((int(r), int(a)) for r, a in zip(batch["episode_row"], batch["anchor_ns"]))
    assert skipped, "the corrupt episode's samples are reported"
    assert {s["uri"] for s in skipped} == {corrupt_store["victim"]}
    assert all(s["reason"] for s in skipped)
    # The damaged middle costs the samples that read it; the episode's intact chunks
    # still serve theirs, and every sample is delivered or reported, never both.
    lost = {(1, s["anchor_ns"]) for s in skipped}
    assert not lost & delivered
    assert len(lost) + len(delivered) == loader.total_samples
    assert {0, 2} <= {r for r, _ in delivered}


def test_len_and_epochs(store):
    loader = reel.Loader(store["manifest"], store["spec"], store["dir"], batch_size=7)
    n = len(loader)
    assert n == len(list(loader)) and n > 0
    assert loader.epoch == 1
    loader.set_epoch(0)
    assert loader.state_dict()["batch"] == 0


def test_a_store_folder_gone_still_serves_what_the_cache_holds(store, tmp_path):
    copy = tmp_path / "store"
    shutil.copytree(store["dir"], copy)
    cache = tmp_path / "cache"

    def batches(store_dir):
        loader = reel.Loader(store["manifest"], store["spec"], str(store_dir), cache=str(cache),
                             batch_size=4, shuffle="global", seed=3)
        return [{k: v.copy() for k, v in b.items()} for b in loader]

    warm = batches(copy)
    shutil.rmtree(copy)
    with pytest.warns(UserWarning, match="is missing: serving what the cache holds"):
        cold = batches(copy)
    assert len(cold) == len(warm) > 0
    for a, b in zip(warm, cold):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert not copy.exists(), "reading a store must not create it"
    with pytest.raises(reel.ReelError, match="not found"):
        reel.Loader(store["manifest"], store["spec"], str(copy))
