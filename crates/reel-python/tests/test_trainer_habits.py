"""A trainer's habits, as a new user has them: DataLoader worker processes under every
start method across epochs, checkpoints at epoch boundaries, Ctrl-C, pathlib paths,
misspelled or out-of-range arguments, tolerated corrupt episodes, and depth read from an
episode."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import reel
from reel.torch import ReelDataset

from conftest import manifest_uris

COMMON = dict(batch_size=4, shuffle="global", seed=9)


def keys_of(batches):
    return [(int(r), int(a)) for b in batches for r, a in zip(b["episode_row"], b["anchor_ns"])]


def epoch_of(store, epoch: int, rank: int = 0, world: int = 1):
    loader = reel.Loader(store["manifest"], store["spec"], store["dir"], rank=rank, world=world, **COMMON)
    loader.set_epoch(epoch)
    return keys_of(loader)


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_dataloader_workers_move_through_epochs_and_the_parent_knows(store, context, persistent):
    ds = ReelDataset(store["manifest"], store["spec"], store["dir"], rank=0, world=1, **COMMON)
    # A loader opened in the parent first (len) must not stop spawn or forkserver workers.
    assert len(ds) > 0
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=context,
                        persistent_workers=persistent)
    seen = []
    for epoch in range(3):
        keys = keys_of(loader)
        # Each epoch is that epoch's order of two sub-shards: every sample once.
        want = epoch_of(store, epoch, 0, 2) + epoch_of(store, epoch, 1, 2)
        assert sorted(keys) == sorted(want) and len(keys) == len(set(keys))
        assert ds.state_dict()["epoch"] == epoch + 1 and ds.state_dict()["batch"] == 0
        seen.append(keys)
    assert seen[0] != seen[1] and seen[1] != seen[2], "an epoch repeated the one before"


def test_a_mid_epoch_checkpoint_under_workers_is_refused_not_wrong(store):
    ds = ReelDataset(store["manifest"], store["spec"], store["dir"], rank=0, world=1, **COMMON)
    for i, _ in enumerate(DataLoader(ds, batch_size=None, num_workers=2)):
        if i == 2:
            with pytest.raises(reel.BadInputError, match="num_workers=0"):
                ds.state_dict()
            break


def test_an_epoch_boundary_state_resumes_the_next_epoch_under_workers(store):
    ds = ReelDataset(store["manifest"], store["spec"], store["dir"], rank=0, world=1, **COMMON)
    list(DataLoader(ds, batch_size=None, num_workers=2))
    state = ds.state_dict()
    resumed = ReelDataset(store["manifest"], store["spec"], store["dir"], rank=0, world=1, **COMMON)
    resumed.load_state_dict(state)
    keys = keys_of(DataLoader(resumed, batch_size=None, num_workers=2))
    assert sorted(keys) == sorted(epoch_of(store, 1, 0, 2) + epoch_of(store, 1, 1, 2))


def test_set_epoch_shows_in_the_state_at_once(store):
    ds = ReelDataset(store["manifest"], store["spec"], store["dir"], rank=0, world=1, **COMMON)
    next(iter(ds))
    ds.set_epoch(3)
    assert ds.state_dict()["epoch"] == 3 and ds.state_dict()["batch"] == 0
    resumed = ReelDataset(store["manifest"], store["spec"], store["dir"], rank=0, world=1, **COMMON)
    resumed.load_state_dict(ds.state_dict())
    assert keys_of(resumed) == epoch_of(store, 3)
    loader = reel.Loader(store["manifest"], store["spec"], store["dir"], **COMMON)
    next(iter(loader))
    loader.set_epoch(3)
    assert loader.state_dict()["epoch"] == 3 and loader.state_dict()["batch"] == 0


def test_a_dataset_pickles_as_its_arguments_and_progress(store):
    import pickle

    ds = ReelDataset(store["manifest"], store["spec"], store["dir"], rank=0, world=1, **COMMON)
    first = next(iter(ds))
    ds.set_epoch(2)
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.state_dict() == ds.state_dict()
    assert keys_of(copy) == epoch_of(store, 2)
    assert first["state"].shape[0] == 4


def test_bad_arguments_raise_reel_errors_at_once(store):
    args = (store["manifest"], store["spec"], store["dir"])
    with pytest.raises(reel.BadInputError, match="batch_size"):
        reel.Loader(*args, batch_size=-1)
    with pytest.raises(reel.BadInputError, match="did you mean 'batch_size'"):
        reel.Loader(*args, batchsize=4)
    with pytest.raises(reel.BadInputError, match='layout="lerobot"'):
        reel.Loader(*args, image_dtype="float32")
    with pytest.raises(reel.BadInputError, match="max_skipped"):
        reel.Loader(*args, max_skipped=2)
    # The dataset checks them when it is made, not at its first iteration.
    with pytest.raises(reel.BadInputError, match="did you mean 'shuffle'"):
        ReelDataset(*args, rank=0, world=1, shufle="global")
    with pytest.raises(reel.BadInputError, match="workers"):
        ReelDataset(*args, rank=0, world=1, workers=-2)
    with pytest.raises(reel.ReelError):
        ReelDataset(*args, rank=2, world=2)


def test_paths_may_be_pathlib_paths(store, tmp_path):
    uri = manifest_uris(store["manifest"])[0]
    episode = reel.open_episode(Path(uri), store=Path(store["dir"]))
    assert episode.topics == reel.open_episode(str(Path(store["dir"]) / uri)).topics
    assert reel.open_episode(Path(store["dir"]) / uri).name.endswith(uri)
    summary = reel.curate(Path(store["dir"]), "SELECT * FROM episodes ORDER BY episode_id",
                          tmp_path / "m.arrow", anchor_hz=10, before=1.0, after=0.98)
    assert summary["rows"] == 3
    report = reel.warm(Path(store["manifest"]), Path(store["dir"]), tmp_path / "cache")
    assert report["report"]["fetched_bytes"] > 0 and report["pin"]


def test_a_tolerated_corrupt_episode_never_gives_an_empty_batch(corrupt_store):
    args = (corrupt_store["manifest"], corrupt_store["spec"], corrupt_store["dir"])
    # One sample a batch: every sample of the corrupt episode would be a batch of none.
    loader = reel.Loader(*args, batch_size=1, shuffle="global", seed=2, max_skipped=0.5)
    batches = list(loader)
    sizes = [len(b["episode_row"]) for b in batches]
    skipped = [s for b in batches for s in b.skipped]
    assert sizes and min(sizes) == 1, "no empty batch"
    assert skipped and {s["uri"] for s in skipped} == {corrupt_store["victim"]}
    assert len(batches) + len(skipped) == loader.total_samples
    assert loader.stats()["samples"] == len(batches), "stats() still reads the epoch once it ended"
    assert loader.stats()["skipped"] == len(skipped)
    # A resumed run passes over empty batches the same way: none empty, none twice.
    again = reel.Loader(*args, batch_size=1, shuffle="global", seed=2, max_skipped=0.5)
    it = iter(again)
    head = [next(it) for _ in range(5)]
    state = again.state_dict()
    resumed = reel.Loader(*args, batch_size=1, shuffle="global", seed=2, max_skipped=0.5)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert rest and min(len(b["episode_row"]) for b in rest) == 1
    keys = keys_of(head) + keys_of(rest)
    assert len(keys) == len(set(keys)), "a sample delivered twice across the resume"


def test_ctrl_c_during_iteration_raises_keyboard_interrupt(store, tmp_path):
    script = tmp_path / "train.py"
    # A trainer started from a terminal gets Python's Ctrl-C handler even where this suite
    # runs with SIGINT ignored (a shell starts background jobs so, and children inherit it).
    script.write_text(
        "import signal, sys, reel\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "loader = reel.Loader(sys.argv[1], sys.argv[2], sys.argv[3], batch_size=64, workers=1)\n"
        "print('ready', flush=True)\n"
        "try:\n"
        "    while True:\n"
        "        for batch in loader:\n"
        "            pass\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    child = subprocess.Popen([sys.executable, str(script), str(store["manifest"]), str(store["spec"]),
                              str(store["dir"])], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert "interrupted" in out, err
    assert child.returncode == 0 and "PanicException" not in err, err


def test_depth_is_read_as_stored_and_a_camera_is_not_a_signal(store):
    uri = manifest_uris(store["manifest"])[0]
    episode = reel.open_episode(uri, store=store["dir"])
    topic = "/camera/high/depth/image_raw"
    times, _, _ = episode.signal("/joint_states")
    at = [int(times[len(times) // 4]), int(times[len(times) // 2]), int(times[0]) - 1]
    depth = episode.depth(topic, at)
    meta = episode.channel_metadata(topic)
    assert depth.dtype == np.uint16
    assert depth.shape == (3, int(meta["reel.height"]), int(meta["reel.width"]))
    assert (depth > 300).any() and not np.array_equal(depth[0], depth[1])
    # Before the first frame: the first frame, as frames() does for pictures.
    first = episode.depth(topic, [int(times[0]) - 1_000_000_000])
    np.testing.assert_array_equal(depth[2], first[0])
    with pytest.raises(reel.BadInputError, match="has no frame"):
        episode.depth(topic, [0])
    # The same values the loader hands over for the same anchor.
    spec = {"anchor_hz": 10.0,
            "depth": [{"name": "depth", "topic": topic, "offsets_s": [0.0]}]}
    batch = next(iter(reel.Loader(store["manifest"], spec, store["dir"], batch_size=4, shuffle="global")))
    row, t = int(batch["episode_row"][0]), int(batch["depth.time_ns"][0, 0])
    ep = reel.open_episode(manifest_uris(store["manifest"])[row], store=store["dir"])
    np.testing.assert_array_equal(ep.depth(topic, [t])[0], batch["depth"][0, 0])
    with pytest.raises(reel.BadInputError, match="depth camera: read it with depth"):
        episode.frames(topic, [int(times[0])])
    with pytest.raises(reel.BadInputError, match="is a camera: read it with frames"):
        episode.signal("/camera/high/image_raw/compressed")
    with pytest.raises(reel.BadInputError, match="depth camera: read it with depth"):
        episode.signal(topic)
