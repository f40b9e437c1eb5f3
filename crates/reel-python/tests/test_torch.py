"""reel.torch.ReelDataset under torch's DataLoader, and the example trainer end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import reel
from reel.torch import ReelDataset

REPO = Path(__file__).resolve().parents[3]


def keys_of(batches):
    return [(int(r), int(a)) for b in batches for r, a in zip(b["episode_row"], b["anchor_ns"])]


def test_dataset_batches_are_tensors_sharing_reels_buffers(store):
    ds = ReelDataset(store["manifest"], store["spec"], store["dir"], batch_size=4, rank=0, world=1)
    batch = next(iter(DataLoader(ds, batch_size=None, num_workers=0)))
    assert isinstance(batch["cam_high"], torch.Tensor) and batch["cam_high"].dtype == torch.uint8
    assert batch["cam_high"].shape[:2] == (4, 2)
    assert batch["state"].dtype == torch.float32
    loader = reel.Loader(store["manifest"], store["spec"], store["dir"], batch_size=4)
    raw = next(iter(loader))
    assert torch.from_numpy(raw["cam_high"]).data_ptr() == raw["cam_high"].base.address
    torch.testing.assert_close(batch["state"], torch.from_numpy(raw["state"]))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_workers_read_disjoint_sub_shards_covering_the_epoch(store, num_workers):
    common = dict(batch_size=4, shuffle="global", seed=9)
    everything = keys_of(reel.Loader(store["manifest"], store["spec"], store["dir"], **common))
    ds = ReelDataset(store["manifest"], store["spec"], store["dir"], rank=0, world=1, **common)
    seen = keys_of(DataLoader(ds, batch_size=None, num_workers=num_workers))
    assert len(seen) == len(set(seen)), "no sample twice"
    assert sorted(seen) == sorted(everything), "every sample once"


def test_rank_and_world_come_from_torchrun_variables(store, monkeypatch):
    common = dict(batch_size=4, shuffle="global", seed=9)
    shards = []
    for rank in range(2):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        shards.append(keys_of(ReelDataset(store["manifest"], store["spec"], store["dir"], **common)))
    everything = keys_of(reel.Loader(store["manifest"], store["spec"], store["dir"], **common))
    assert not set(shards[0]) & set(shards[1])
    assert sorted(shards[0] + shards[1]) == sorted(everything)


def test_two_torchrun_style_processes_get_disjoint_shards(store, tmp_path):
    script = tmp_path / "shard.py"
    script.write_text(
        "import json, sys\n"
        "from reel.torch import ReelDataset\n"
        "ds = ReelDataset(sys.argv[1], sys.argv[2], sys.argv[3], batch_size=4, shuffle='global', seed=9)\n"
        "print(json.dumps([[int(r), int(a)] for b in ds for r, a in zip(b['episode_row'], b['anchor_ns'])]))\n"
    )
    outputs = []
    procs = [subprocess.Popen([sys.executable, str(script), str(store["manifest"]), str(store["spec"]),
                               str(store["dir"])], stdout=subprocess.PIPE,
                              env={**os.environ, "RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r)})
             for r in range(2)]
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        outputs.append({tuple(k) for k in json.loads(out)})
    everything = keys_of(reel.Loader(store["manifest"], store["spec"], store["dir"], batch_size=4,
                                     shuffle="global", seed=9))
    assert not outputs[0] & outputs[1]
    assert outputs[0] | outputs[1] == set(everything)


def test_dataset_resumes_from_its_state_dict(store):
    common = dict(batch_size=3, seed=5, rank=0, world=1)
    whole = [{k: v.clone() for k, v in b.items()} for b in ReelDataset(store["manifest"], store["spec"], store["dir"], **common)]
    ds = ReelDataset(store["manifest"], store["spec"], store["dir"], **common)
    taken = []
    for batch in ds:
        taken.append(batch)
        if len(taken) == 2:
            break
    state = ds.state_dict()
    resumed = ReelDataset(store["manifest"], store["spec"], store["dir"], **common)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert len(taken) + len(rest) == len(whole)
    for mine, theirs in zip(taken + rest, whole):
        for name in theirs:
            torch.testing.assert_close(mine[name], theirs[name])


def test_pin_memory_batches_copy_with_non_blocking(store):
    ds = ReelDataset(store["manifest"], store["spec"], store["dir"], batch_size=4, rank=0, world=1,
                     pin_memory=True)
    batch = next(iter(ds))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    moved = batch["state"].to(device, non_blocking=True)
    if device == "cuda":
        torch.cuda.synchronize()
        assert batch["state"].is_pinned()
    torch.testing.assert_close(moved.cpu(), batch["state"])


def test_example_trainer_runs_end_to_end_and_resumes(store, tmp_path):
    example = REPO / "examples" / "train_torch.py"
    ckpt = tmp_path / "ckpt"
    heartbeat = tmp_path / "heartbeat"
    args = [sys.executable, str(example), "--manifest", str(store["manifest"]), "--spec",
            str(store["spec"]), "--store", str(store["dir"]), "--checkpoints", str(ckpt),
            "--heartbeat", str(heartbeat), "--batch-size", "4"]
    first = subprocess.run(args + ["--steps", "6"], check=True, capture_output=True, text=True)
    report = json.loads(first.stdout.strip().splitlines()[-1])
    assert report["steps"] == 6 and report["resumed_from"] is None
    assert np.isfinite(report["loss"]) and heartbeat.exists()
    second = subprocess.run(args + ["--steps", "10"], check=True, capture_output=True, text=True)
    report = json.loads(second.stdout.strip().splitlines()[-1])
    assert report["resumed_from"] == 6 and report["steps"] == 10


def test_dataset_resumes_on_fewer_ranks_from_every_rank_s_state(store):
    def dataset(rank, world):
        return ReelDataset(store["manifest"], store["spec"], store["dir"], batch_size=3,
                           seed=5, shuffle="global", rank=rank, world=world)

    def pairs(batches):
        return [(int(r), int(a)) for b in batches for r, a in zip(b["episode_row"], b["anchor_ns"])]

    everything = pairs(dataset(0, 1))
    seen, states = [], []
    for rank in range(2):
        ds = dataset(rank, 2)
        batches = iter(ds)
        seen += pairs([next(batches)])
        states.append(ds.state_dict())
    alone = dataset(0, 1)
    alone.load_state_dict(states)
    seen += pairs(alone)
    assert sorted(seen) == sorted(everything)
    assert alone.state_dict()["epoch"] == 1 and alone.state_dict()["batch"] == 0
