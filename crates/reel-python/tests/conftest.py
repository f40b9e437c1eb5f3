"""A small real store for the package's tests, made by Reel's own CLIs: synthetic
landing episodes → ingest (H.264 canonical MCAP, warehouse rows) → compact → curate."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SPEC = """
anchor_hz = 10.0
[[camera]]
name = "cam_high"
topic = "/camera/high/image_raw/compressed"
offsets_s = [-0.5, 0.0]
[[proprio]]
name = "state"
topic = "/joint_states"
kind = "window"
steps = 20
hz = 200.0
[[proprio]]
name = "action"
topic = "/action"
kind = "chunk"
steps = 10
hz = 50.0
"""

EPISODES = 3


def reel_bin(name: str) -> str:
    """A Reel CLI from the build the suite runs against (REEL_BIN_DIR), never skipped."""
    directory = os.environ.get("REEL_BIN_DIR")
    if not directory:
        target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/reel/target"))
        directory = os.path.join(target, "debug")
    path = os.path.join(directory, name)
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} is missing: build Reel's CLIs first (scripts/test.sh does)")
    return path


def run(*args: str) -> str:
    done = subprocess.run(args, check=True, capture_output=True, text=True)
    return done.stdout


@pytest.fixture(scope="session")
def store(tmp_path_factory) -> dict:
    """``{"dir", "manifest", "spec", "warehouse"}`` of a store with three episodes."""
    root = tmp_path_factory.mktemp("reel-store")
    store_dir = root / "store"
    store_dir.mkdir()
    run(reel_bin("reel-synth"), "-o", str(store_dir / "landing"), "--episodes", str(EPISODES),
        "--seconds", "4", "--cameras", "1", "--depth-cameras", "1", "--width", "64", "--height",
        "48", "--seed", "5", "-q")
    run(reel_bin("reel-plan"), str(store_dir / "landing"), "-o", str(root / "plan.json"),
        "--batches", "1")
    run(reel_bin("reel-ingest"), "--plan", str(root / "plan.json"), "--batch", "0",
        "--store", str(store_dir))
    run(reel_bin("reel-compact"), "--warehouse", str(store_dir))
    manifest = root / "manifest.arrow"
    run(reel_bin("reel-curate"), "--warehouse", str(store_dir), "--sql",
        "SELECT * FROM episodes ORDER BY episode_id", "-o", str(manifest),
        "--anchor-hz", "10", "--before", "1.0", "--after", "0.98")
    spec = root / "spec.toml"
    spec.write_text(SPEC)
    return {"dir": store_dir, "manifest": manifest, "spec": spec, "root": root}


@pytest.fixture(scope="session")
def corrupt_store(store, tmp_path_factory) -> dict:
    """A copy of the store whose second episode (manifest order) has its middle
    overwritten: same size, unreadable chunks."""
    root = tmp_path_factory.mktemp("reel-corrupt")
    copy = root / "store"
    shutil.copytree(store["dir"], copy)
    uri = manifest_uris(store["manifest"])[1]
    victim = copy / uri
    data = bytearray(victim.read_bytes())
    third = len(data) // 3
    data[third: 2 * third] = b"\xff" * third
    victim.write_bytes(bytes(data))
    return {**store, "dir": copy, "victim": uri}


def manifest_uris(path) -> list[str]:
    """Each row's canonical object path, read with pyarrow as docs/FORMAT.md describes
    it: the `uri` column, or the `reel.manifest.uri_template` filled with the id."""
    import pyarrow.ipc

    table = pyarrow.ipc.open_file(str(path)).read_all()
    if "uri" in table.column_names:
        return table.column("uri").to_pylist()
    template = table.schema.metadata[b"reel.manifest.uri_template"].decode()
    return [template.replace("{episode_id}", i) for i in table.column("episode_id").to_pylist()]


def cli_batches(store: dict, spec: Path, batches: int, **options) -> list:
    """The Rust loader's batches (reel-load --dump, an Arrow IPC stream), as lists of
    per-sample rows keyed by tensor name."""
    import pyarrow.ipc

    args = [reel_bin("reel-load"), "--manifest", str(store["manifest"]), "--spec", str(spec),
            "--store", str(store["dir"]), "--batches", str(batches), "--dump", "-q"]
    for key, value in options.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    out = subprocess.run(args, check=True, capture_output=True).stdout
    reader = pyarrow.ipc.open_stream(out)
    return [b for b in reader]


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value))
