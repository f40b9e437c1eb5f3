#!/usr/bin/env python3
"""LeRobot's dataloader on the same episodes as Reel's loading benchmark.

Converts canonical Reel episodes (MCAP, docs/FORMAT.md) into a LeRobot v3.0
dataset once, then times LeRobot's own loading path (`LeRobotDataset` with
`delta_timestamps` under a torch `DataLoader`) for the sample Reel's benchmark
reads: frames at t - 0.5 s and t from 3 cameras, 1 s of joint positions before
t and the 50-step action chunk from t.

LeRobot keeps one fps for every feature, so the dataset is on the camera grid
(30 fps): each frame of the grid takes, per stream, the latest sample at or
before its time (cameras, joint positions at 200 Hz, actions at 50 Hz). Camera
frames are decoded from Reel's H.264 to RGB and re-encoded by LeRobot.

Outside CI; needs the environment of requirements-lerobot.txt (see README.md).
"""

from __future__ import annotations

import argparse
import bisect
import functools
import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# LeRobot must never reach for the Hugging Face Hub: the dataset is local.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import av  # noqa: E402  (after the environment above)
import numpy as np  # noqa: E402
import psutil  # noqa: E402
import torch  # noqa: E402
from mcap.reader import make_reader  # noqa: E402
from mcap_protobuf.decoder import DecoderFactory  # noqa: E402

import lerobot  # noqa: E402
from lerobot.datasets import lerobot_dataset as lerobot_dataset_module  # noqa: E402
from lerobot.datasets import video_utils  # noqa: E402
from lerobot.datasets.lerobot_dataset import LeRobotDataset  # noqa: E402

FPS = 30
REPO_ID = "reel/peer-bench"
# Reel's canonical encoding (docs/FORMAT.md): libx264, CRF 23, GOP 30, tune=fastdecode.
DEFAULT_GOP = 30
DEFAULT_CRF = 23
# Matching a grid time against a stream's log times: the grids are rounded to
# whole nanoseconds, so "at or before t" allows a microsecond of rounding.
GRID_SLACK_NS = 1_000

# The sample (Reel's loading benchmark): two frames per camera, 1 s of state
# (30 steps before t plus t), a 50-step action chunk from t.
CAMERA_OFFSETS_S = [-0.5, 0.0]
STATE_STEPS_BEFORE = FPS
ACTION_CHUNK = 50


class InputError(Exception):
    """A canonical episode that cannot be converted, with the file and the reason."""


@dataclass
class Stream:
    """One topic of an episode: log times (ns) and payloads in log-time order."""

    topic: str
    times_ns: list[int]
    payloads: list  # bytes (camera access units) or np.ndarray (numeric rows)
    fields: list[str]

    def index_at_or_before(self, t_ns: int) -> int:
        return bisect.bisect_right(self.times_ns, t_ns + GRID_SLACK_NS) - 1


@dataclass
class Episode:
    path: Path
    episode_id: str
    task: str
    cameras: dict[str, Stream]  # LeRobot key -> stream
    state: Stream  # joint positions only
    action: Stream


def camera_key(topic: str) -> str:
    """`/camera/high/image_raw/compressed` -> `observation.images.high`."""
    parts = [p for p in topic.split("/") if p]
    name = parts[1] if len(parts) > 1 and parts[0] == "camera" else "_".join(parts)
    return f"observation.images.{name}"


def read_episode(path: Path) -> Episode:
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        if summary is None:
            raise InputError(f"{path}: no MCAP summary (not a canonical Reel episode)")
        kinds = {c.topic: c.metadata.get("reel.kind") for c in summary.channels.values()}
        fields = {
            c.topic: [x for x in c.metadata.get("reel.fields", "").split(",") if x]
            for c in summary.channels.values()
        }
        camera_topics = sorted(t for t, k in kinds.items() if k == "camera")
        state_topics = [t for t, k in kinds.items() if k == "state"]
        action_topics = [t for t, k in kinds.items() if k == "action"]
        if len(camera_topics) == 0 or len(state_topics) != 1 or len(action_topics) != 1:
            raise InputError(
                f"{path}: expected cameras, one state and one action stream; found "
                f"cameras={camera_topics}, state={state_topics}, action={action_topics}"
            )
        wanted = set(camera_topics) | {state_topics[0], action_topics[0]}
        streams = {t: Stream(t, [], [], fields[t]) for t in wanted}
        for _schema, channel, message, decoded in reader.iter_decoded_messages(topics=sorted(wanted)):
            stream = streams[channel.topic]
            stream.times_ns.append(message.log_time)
            if kinds[channel.topic] == "camera":
                if decoded.format != "h264":
                    raise InputError(f"{path}: {channel.topic} has format {decoded.format!r}, not h264")
                stream.payloads.append(bytes(decoded.data))
            else:
                stream.payloads.append(np.asarray(decoded.values, dtype=np.float64))
        metadata = {m.name: dict(m.metadata) for m in reader.iter_metadata()}

    for stream in streams.values():
        if not stream.times_ns:
            raise InputError(f"{path}: {stream.topic} has no messages")
        if any(b < a for a, b in zip(stream.times_ns, stream.times_ns[1:])):
            raise InputError(f"{path}: {stream.topic} is not in log-time order")

    state = streams[state_topics[0]]
    positions = [i for i, name in enumerate(state.fields) if name.endswith(".position")]
    if not positions:
        raise InputError(f"{path}: {state.topic} has no `.position` fields in reel.fields")
    state = Stream(
        state.topic,
        state.times_ns,
        [row[positions] for row in state.payloads],
        [state.fields[i] for i in positions],
    )
    episode_meta = metadata.get("episode", {})
    return Episode(
        path=path,
        episode_id=episode_meta.get("episode_id", path.stem),
        task=episode_meta.get("task", "unknown"),
        cameras={camera_key(t): streams[t] for t in camera_topics},
        state=state,
        action=streams[action_topics[0]],
    )


def grid_times(episode: Episode) -> list[int]:
    """The 30 fps grid on which every stream has a sample at or before each time."""
    streams = [*episode.cameras.values(), episode.state, episode.action]
    start = max(s.times_ns[0] for s in streams)
    end = min(s.times_ns[-1] for s in streams)
    if end < start:
        raise InputError(f"{episode.path}: the streams do not overlap in time")
    count = math.floor((end - start) * FPS / 1e9 + 1e-6) + 1
    return [start + round(k * 1e9 / FPS) for k in range(count)]


def decode_h264(path: Path, stream: Stream) -> list[np.ndarray]:
    """Every access unit of a camera as RGB (one frame out per access unit: no B-frames)."""
    codec = av.CodecContext.create("h264", "r")
    frames: list[np.ndarray] = []
    for au in stream.payloads:
        for frame in codec.decode(av.Packet(au)):
            frames.append(frame.to_ndarray(format="rgb24"))
    for frame in codec.decode(None):
        frames.append(frame.to_ndarray(format="rgb24"))
    if len(frames) != len(stream.payloads):
        raise InputError(
            f"{path}: {stream.topic}: {len(stream.payloads)} access units decoded to {len(frames)} frames"
        )
    return frames


def features_for(episode: Episode) -> dict:
    features = {}
    for key, stream in episode.cameras.items():
        # Reel's channel metadata has the size too, but the decoded frame is the truth.
        height, width = decode_h264(episode.path, Stream(stream.topic, [], stream.payloads[:1], []))[0].shape[:2]
        features[key] = {
            "dtype": "video",
            "shape": (height, width, 3),
            "names": ["height", "width", "channels"],
        }
    features["observation.state"] = {
        "dtype": "float32",
        "shape": (len(episode.state.fields),),
        "names": episode.state.fields,
    }
    features["action"] = {
        "dtype": "float32",
        "shape": (len(episode.action.fields),),
        "names": episode.action.fields,
    }
    return features


def build_dataset(
    episode_paths: list[Path], root: Path, vcodec: str, gop: int, crf: int, fast_decode: int
) -> dict:
    """Writes the LeRobot dataset under a temporary name, then renames it to `root`."""
    # LeRobot 0.4.4 lets a recording choose the codec (`vcodec`) but encodes every episode with
    # `encode_video_frames(..., g=2, crf=30, fast_decode=0)` fixed. That function takes the GOP,
    # CRF and `fast_decode` (tune=fastdecode for libx264) as arguments, so the recording path is
    # pointed at it with the chosen settings (by default Reel's).
    original_encode = lerobot_dataset_module.encode_video_frames
    lerobot_dataset_module.encode_video_frames = functools.partial(
        original_encode, g=gop, crf=crf, fast_decode=fast_decode
    )
    staging = root.with_name(f".{root.name}.partial")
    if staging.exists():
        shutil.rmtree(staging)
    try:
        first = read_episode(episode_paths[0])
        features = features_for(first)
        dataset = LeRobotDataset.create(
            repo_id=REPO_ID,
            fps=FPS,
            features=features,
            root=staging,
            robot_type="reel",
            use_videos=True,
            vcodec=vcodec,
        )
        frames_total = 0
        for n, path in enumerate(episode_paths):
            episode = first if n == 0 else read_episode(path)
            if (
                episode.cameras.keys() != first.cameras.keys()
                or episode.state.fields != first.state.fields
                or episode.action.fields != first.action.fields
            ):
                raise InputError(f"{path}: cameras or fields differ from {episode_paths[0]}")
            grid = grid_times(episode)
            decoded = {key: decode_h264(path, s) for key, s in episode.cameras.items()}
            for t in grid:
                frame = {
                    key: decoded[key][episode.cameras[key].index_at_or_before(t)] for key in episode.cameras
                }
                frame["observation.state"] = episode.state.payloads[
                    episode.state.index_at_or_before(t)
                ].astype(np.float32)
                frame["action"] = episode.action.payloads[episode.action.index_at_or_before(t)].astype(
                    np.float32
                )
                frame["task"] = episode.task
                dataset.add_frame(frame)
            dataset.save_episode(parallel_encoding=False)
            frames_total += len(grid)
            log(f"converted {path.name}: {len(grid)} frames at {FPS} fps")
        dataset.finalize()
    finally:
        lerobot_dataset_module.encode_video_frames = original_encode
    info = {
        "episodes": [p.name for p in episode_paths],
        "frames": frames_total,
        "vcodec": vcodec,
        "gop": gop,
        "crf": crf,
        "fast_decode": fast_decode,
        "lerobot_version": lerobot.__version__,
    }
    (staging / "reel_peer_build.json").write_text(json.dumps(info, indent=1))
    if root.exists():
        shutil.rmtree(root)
    staging.rename(root)
    return info


def video_codec_of(root: Path) -> str:
    info = json.loads((root / "meta" / "info.json").read_text())
    codecs = sorted(
        {f.get("info", {}).get("video.codec", "?") for f in info["features"].values() if f["dtype"] == "video"}
    )
    return ",".join(codecs)


def delta_timestamps_for(camera_keys: list[str]) -> dict[str, list[float]]:
    deltas = {key: list(CAMERA_OFFSETS_S) for key in camera_keys}
    deltas["observation.state"] = [k / FPS for k in range(-STATE_STEPS_BEFORE, 1)]
    deltas["action"] = [k / FPS for k in range(ACTION_CHUNK)]
    return deltas


def window_anchors(dataset: LeRobotDataset) -> list[int]:
    """Frames whose whole sample window lies inside their episode (Reel's sampling rule).

    LeRobot also serves frames near the edges, padding the window by repeating the edge
    frame and flagging it in `<key>_is_pad`; Reel's manifest leaves those anchors out.
    """
    before = max(STATE_STEPS_BEFORE, round(-min(CAMERA_OFFSETS_S) * FPS))
    after = ACTION_CHUNK - 1
    anchors = []
    for ep in range(dataset.meta.total_episodes):
        meta = dataset.meta.episodes[ep]
        start, end = meta["dataset_from_index"], meta["dataset_to_index"]
        anchors.extend(range(start + before, end - after))
    return anchors


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and its live children (DataLoader workers)."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def check_first_batch(batch: dict, camera_keys: list[str], batch_size: int, shapes: dict) -> None:
    expected = {key: (batch_size, len(CAMERA_OFFSETS_S), 3, *shapes[key][:2]) for key in camera_keys}
    expected["observation.state"] = (batch_size, STATE_STEPS_BEFORE + 1, shapes["observation.state"][0])
    expected["action"] = (batch_size, ACTION_CHUNK, shapes["action"][0])
    for key, shape in expected.items():
        if tuple(batch[key].shape) != shape:
            raise RuntimeError(f"batch[{key!r}] has shape {tuple(batch[key].shape)}, expected {shape}")


def bench(root: Path, num_workers: int, batch_size: int, batches: int, video_backend: str | None) -> dict:
    # LeRobot caches one torchcodec decoder (and its open file) per video in a module-level
    # cache. A forked DataLoader worker inherits the parent's, sharing the file offset with
    # it, and reads garbage ("Invalid data found when processing input"): start every
    # configuration without decoders.
    video_utils._default_decoder_cache.clear()
    opened = time.perf_counter()
    probe = LeRobotDataset(REPO_ID, root=root, video_backend=video_backend)
    camera_keys = list(probe.meta.video_keys)
    shapes = {k: tuple(v["shape"]) for k, v in probe.meta.features.items()}
    del probe
    dataset = LeRobotDataset(
        REPO_ID, root=root, delta_timestamps=delta_timestamps_for(camera_keys), video_backend=video_backend
    )
    anchors = window_anchors(dataset)
    build = json.loads((root / "reel_peer_build.json").read_text())
    subset = torch.utils.data.Subset(dataset, anchors)
    # `shuffle=True` draws one permutation per epoch; the episodes are short, so the run spans
    # several epochs within one iterator (RandomSampler is what `shuffle=True` builds, here told
    # how many samples to draw), keeping worker start-up out of the timed batches.
    sampler = torch.utils.data.RandomSampler(subset, num_samples=(batches + 1) * batch_size)
    loader = torch.utils.data.DataLoader(
        subset, batch_size=batch_size, sampler=sampler, num_workers=num_workers, drop_last=True
    )
    open_s = time.perf_counter() - opened

    # CPU time covers the whole run (workers are forked by `iter`, so all of theirs counts) and
    # is read after the last batch, before the iterator shuts its workers down: the sampler
    # holds exactly batches + 1 batches, so no work is left in flight. Workers prefetch, so the
    # wall time of the batches after the first is the rate, and CPU over all of them the cost.
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    iterator = iter(loader)
    first = next(iterator)
    first_batch_s = time.perf_counter() - started
    check_first_batch(first, camera_keys, batch_size, shapes)

    timed_from = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    wall = time.perf_counter() - timed_from
    cpu = cpu_seconds() - cpu_before
    del iterator

    samples = batches * batch_size
    samples_in_cpu = (batches + 1) * batch_size
    return {
        "peer": "lerobot",
        "lerobot_version": lerobot.__version__,
        "num_workers": num_workers,
        "batch_size": batch_size,
        "batches": batches,
        "samples_per_s": round(samples / wall, 2),
        "cpu_s_per_sample": round(cpu / samples_in_cpu, 5),
        "samples_per_s_per_core": round(samples_in_cpu / cpu, 2),
        "time_to_first_batch_s": round(first_batch_s, 3),
        "video_codec": video_codec_of(root),
        "gop": build["gop"],
        "crf": build["crf"],
        "episodes": dataset.meta.total_episodes,
        "frames": dataset.meta.total_frames,
        # Beyond the common keys: what else shapes the figures.
        "video_backend": dataset.video_backend,
        "anchors": len(anchors),
        "open_s": round(open_s, 3),
        "wall_s": round(wall, 3),
        "main_torch_threads": torch.get_num_threads(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=Path, required=True, help="folder of canonical Reel episodes (*.mcap)")
    parser.add_argument("--work", type=Path, required=True, help="folder for the LeRobot dataset (built once)")
    parser.add_argument("--batches", type=int, default=100, help="timed batches after the first (default 100)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--workers", default="0,2", help="comma-separated DataLoader num_workers (default 0,2)")
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch threads of the loading process for num_workers=0 (workers always use 1, "
        "as DataLoader sets); 0 keeps torch's default",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeat the worker list, interleaved (noisy machines)"
    )
    parser.add_argument("--vcodec", default="h264", help="LeRobot's vcodec (h264, hevc, libsvtav1)")
    parser.add_argument("--gop", type=int, default=DEFAULT_GOP, help="keyframe interval (LeRobot's own: 2)")
    parser.add_argument("--crf", type=int, default=DEFAULT_CRF, help="encoder CRF (LeRobot's own: 30)")
    parser.add_argument(
        "--fast-decode",
        type=int,
        default=1,
        help="LeRobot's fast_decode: 1 = tune=fastdecode for libx264 (Reel's), 0 = LeRobot's own",
    )
    parser.add_argument(
        "--video-backend", default=None, help="LeRobot's decoder: torchcodec or pyav (default: LeRobot's choice)"
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    workers = [int(w) for w in args.workers.split(",") if w.strip()]
    episode_paths = sorted(args.episodes.glob("*.mcap"))
    if not episode_paths:
        log(f"error: no *.mcap in {args.episodes}")
        return 2
    root = args.work / f"lerobot-{args.vcodec}-g{args.gop}-crf{args.crf}-fd{args.fast_decode}"
    marker = root / "reel_peer_build.json"
    if marker.exists() and json.loads(marker.read_text())["episodes"] == [p.name for p in episode_paths]:
        log(f"reusing {root}")
    else:
        log(f"building {root} from {len(episode_paths)} episodes (not timed)")
        try:
            build_dataset(episode_paths, root, args.vcodec, args.gop, args.crf, args.fast_decode)
        except InputError as error:
            log(f"error: {error}")
            return 1

    # DataLoader workers run torch on one thread; with num_workers=0 the loading runs in this
    # process, whose default (one thread per core) turns LeRobot's small tensor ops (stack,
    # cdist, min) into OpenMP fork-joins that cost about 4x the CPU on a busy 2-core machine.
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    rows = []
    for num_workers in workers * args.rounds:
        log(f"loading: num_workers={num_workers}, batch_size={args.batch_size}, {args.batches} timed batches")
        result = bench(root, num_workers, args.batch_size, args.batches, args.video_backend)
        print(json.dumps(result), flush=True)
        rows.append(result)

    print()
    print("| peer | num_workers | batch | batches | samples/s | CPU s/sample | samples/s per core | first batch s | codec | backend |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| LeRobot {r['lerobot_version']} | {r['num_workers']} | {r['batch_size']} | {r['batches']} | "
            f"{r['samples_per_s']:.1f} | {r['cpu_s_per_sample']:.4f} | {r['samples_per_s_per_core']:.1f} | "
            f"{r['time_to_first_batch_s']:.2f} | {r['video_codec']} g{args.gop} crf{args.crf} | "
            f"{r['video_backend']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
