"""docs/CLUSTER.md §4 on a real scheduler: docs/train/slurm-train.sh submitted to the
one-node Slurm cluster of scripts/slurm.sh (started here when it is not running; without
Slurm this test fails, it does not skip), so `srun reel-warm` fills the node's cache and
`srun reel-supervise -- torchrun examples/train_torch.py` trains two ranks from it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import reel_bin

REPO = Path(__file__).resolve().parents[3]


def slurm_conf() -> str:
    script = REPO / "scripts" / "slurm.sh"
    started = subprocess.run([str(script), "start"], capture_output=True, text=True)
    assert started.returncode == 0, f"scripts/slurm.sh start failed: {started.stderr}"
    env = subprocess.run([str(script), "env"], check=True, capture_output=True, text=True)
    return env.stdout.strip().removeprefix("export SLURM_CONF=")


def json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def test_the_per_node_chain_warms_then_trains_under_supervision(store, tmp_path):
    conf = slurm_conf()
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(store["spec"], run / "spec.toml")
    cache = tmp_path / "cache"
    # The CLIs of the build under test, and the venv's python and torchrun.
    path = os.pathsep.join([str(Path(reel_bin("reel-warm")).parent),
                            str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {
        **os.environ,
        "SLURM_CONF": conf,
        "PATH": path,
        "STORE": str(store["dir"]),
        "MANIFEST": str(store["manifest"]),
        "RUN": str(run),
        "CACHE": str(cache),
        "GPUS_PER_NODE": "2",
        "TRAINER": str(REPO / "examples" / "train_torch.py"),
        "TRAINER_ARGS": "--steps 6 --batch-size 4 --workers 1",
        "HANG_AFTER": "120",
        "WARM_CONCURRENCY": "4",
        # One node: rendezvous on loopback (the node's Slurm name is not a host name).
        "MASTER_ADDR": "127.0.0.1",
    }
    reel_bin("reel-supervise")
    job = subprocess.run(
        ["sbatch", "--wait", "--nodes=1", "--time=15", f"--chdir={run}",
         f"--output={run}/job.log", str(REPO / "docs" / "train" / "slurm-train.sh")],
        env=env, capture_output=True, text=True)
    log = (run / "job.log").read_text() if (run / "job.log").exists() else ""
    supervise_logs = [p.read_text()[-3000:] for p in run.glob("supervise-*.log")]
    assert job.returncode == 0, (job.stderr, log, supervise_logs)
    # srun names the per-node files after the node's host name.
    (warm_file,) = run.glob("warm-*.jsonl")
    (events_file,) = run.glob("events-*.jsonl")

    # reel-warm: the spec's working set fetched into the node's cache.
    warmed = json_lines(warm_file)
    assert [w["event"] for w in warmed] == ["warm"], warmed
    assert warmed[0]["report"]["total_bytes"] > 0, warmed[0]
    assert any(p.is_file() for p in cache.rglob("*")), "the cache holds the working set"

    # reel-supervise: node checks passed, the trainer ran to completion once.
    events = json_lines(events_file)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "preflight" and events[0]["passed"], events[0]
    assert kinds[-1] == "done" and events[-1]["restarts"] == 0, events
    # Two ranks trained six steps; rank 0 saved checkpoints where supervise looks.
    assert any((run / "checkpoints").iterdir()), "no checkpoint"
