"""A trainer's habits, as a new user has them: DataLoader worker processes under every
start method across epochs, checkpoints at epoch boundaries, Ctrl-C, pathlib paths,
misspelled or out-of-range arguments, tolerated corrupt episodes, and depth read from an
episode."""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
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


@pytest.mark.parametrize("num_workers", [1, 2])
def test_a_mid_epoch_checkpoint_under_workers_is_refused_not_wrong(store, num_workers):
    ds = ReelDataset(store["manifest"], store["spec"], store["dir"], rank=0, world=1, **COMMON)
    for i, _ in enumerate(DataLoader(ds, batch_size=None, num_workers=num_workers)):
        if i == 2:
            with pytest.raises(reel.BadInputError, match="num_workers=0"):
                ds.state_dict()
            break


def test_a_loaded_mid_epoch_state_is_resumed_once_under_a_worker(store):
    ds = ReelDataset(store["manifest"], store["spec"], store["dir"], rank=0, world=1, **COMMON)
    it = iter(ds)
    head = [next(it) for _ in range(3)]
    state = ds.state_dict()
    assert state["batch"] == 3
    resumed = ReelDataset(store["manifest"], store["spec"], store["dir"], rank=0, world=1, **COMMON)
    resumed.load_state_dict(state)
    loader = DataLoader(resumed, batch_size=None, num_workers=1)
    rest = keys_of(loader)
    assert keys_of(head) + rest == epoch_of(store, 0), "the rest of the epoch, once"
    # The epoch ended: the state names the next one, not the position loaded before it.
    assert resumed.state_dict()["epoch"] == 1 and resumed.state_dict()["batch"] == 0
    assert keys_of(loader) == epoch_of(store, 1), "the next epoch from its start"


def test_every_skipped_sample_is_reported_once_whatever_the_seed(corrupt_store):
    args = (corrupt_store["manifest"], corrupt_store["spec"], corrupt_store["dir"])
    ended_on_empty_batches = 0
    for seed in range(8):
        loader = reel.Loader(*args, batch_size=1, shuffle="global", seed=seed, max_skipped=0.5)
        batches = list(loader)
        trailing = loader.skipped_after_last_batch()
        ended_on_empty_batches += bool(trailing)
        reports = [(s["uri"], s["anchor_ns"]) for b in batches for s in b.skipped] + [
            (s["uri"], s["anchor_ns"]) for s in trailing]
        assert len(reports) == loader.stats()["skipped"] > 0, f"seed {seed}"
        assert len(set(reports)) == len(reports), f"seed {seed}: a sample reported twice"
        # Under a DataLoader worker, the last batch carries them.
        ds = ReelDataset(*args, rank=0, world=1, batch_size=1, shuffle="global", seed=seed,
                         max_skipped=0.5, with_meta=True)
        meta = [(s["uri"], s["anchor_ns"]) for b in DataLoader(ds, batch_size=None, num_workers=1)
                for s in b["_skipped"]]
        assert sorted(meta) == sorted(reports), f"seed {seed}"
    assert ended_on_empty_batches, "no seed ended an epoch on empty batches: the case went untested"


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


def test_ctrl_c_while_next_waits_on_a_slow_store_raises_keyboard_interrupt(store, tmp_path):
    """Ctrl-C reaches a trainer whose ``next(loader)`` is blocked inside Reel, waiting on a
    store that stopped answering: Python gets no control back between batches there, so
    only the loader's own look at the signals raises ``KeyboardInterrupt``."""
    with S3Store(tmp_path / "s3", store["dir"]) as s3, StallingProxy(s3.port) as proxy:
        script = tmp_path / "train.py"
        # A trainer started from a terminal gets Python's Ctrl-C handler even where this
        # suite runs with SIGINT ignored (a shell starts background jobs so, and children
        # inherit it).
        script.write_text(
            "import signal, sys, reel\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "loader = reel.Loader(sys.argv[1], sys.argv[2], sys.argv[3], batch_size=4, workers=1)\n"
            "print('ready', flush=True)\n"
            "sys.stdin.readline()\n"
            "try:\n"
            "    next(iter(loader))\n"
            "    print('a batch came from a store that does not answer', flush=True)\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted', flush=True)\n"
        )
        child = subprocess.Popen(
            [sys.executable, str(script), str(store["manifest"]), str(store["spec"]),
             f"s3://reel/?endpoint=http://127.0.0.1:{proxy.port}&region=us-east-1"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "AWS_ACCESS_KEY_ID": S3Store.KEY, "AWS_SECRET_ACCESS_KEY": S3Store.SECRET},
        )
        try:
            assert read_line(child, 60) == "ready", child.stderr.read()
            proxy.stall()
            child.stdin.write("go\n")
            child.stdin.flush()
            # Every request now waits for ever: next() is inside Reel, waiting for a batch.
            time.sleep(1.5)
            assert proxy.stalled_requests() > 0, "the loader asked the store"
            child.send_signal(signal.SIGINT)
            line = read_line(child, 10)
        finally:
            # Reel's threads still wait on the store: let it answer so the child can exit.
            proxy.resume()
            out, err = child.communicate(timeout=60)
        assert line == "interrupted", f"{line!r}: {err}"
        assert child.returncode == 0 and "PanicException" not in err, err


def read_line(child: subprocess.Popen, timeout: float) -> str:
    """The child's next line of output, or '' when none comes within ``timeout``."""
    ready, _, _ = select.select([child.stdout], [], [], timeout)
    return child.stdout.readline().strip() if ready else ""


class S3Store:
    """s3s-fs (scripts/setup.sh installs it; missing, the test fails) serving a copy of a
    store folder as bucket ``reel`` on a free loopback port."""

    KEY, SECRET = "reel-test", "reel-test-secret"

    def __init__(self, root: Path, folder: Path):
        binary = os.environ.get("REEL_S3S_FS") or os.path.expanduser("~/.cache/reel/tools/bin/s3s-fs")
        if not os.access(binary, os.X_OK):
            raise RuntimeError(f"{binary} is missing: run scripts/setup.sh")
        shutil.copytree(folder, root / "reel")
        self.port = free_port()
        self.process = subprocess.Popen(
            [binary, "--host", "127.0.0.1", "--port", str(self.port), "--access-key", self.KEY,
             "--secret-key", self.SECRET, str(root)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.process.kill()
                    raise RuntimeError("s3s-fs did not start listening within 10 s")
                time.sleep(0.02)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.process.kill()
        self.process.wait()


class StallingProxy:
    """A loopback TCP proxy in front of a server that, once stalled, holds every request
    it receives (on new connections and on open ones) until resumed: a store that stops
    answering without closing anything."""

    def __init__(self, upstream: int):
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.go = threading.Event()
        self.go.set()
        self.held = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self):
        self.go.clear()

    def resume(self):
        self.go.set()

    def stalled_requests(self) -> int:
        with self.lock:
            return self.held

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source, sink, requests: bool):
        try:
            while data := source.recv(65536):
                if requests and not self.go.is_set():
                    with self.lock:
                        self.held += 1
                    self.go.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.go.set()
        self.listener.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
