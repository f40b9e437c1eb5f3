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
frames are decoded from Reel's H.264 to RGB and re-encoded by LeRobot, with
LeRobot's own encoder settings unless told otherwise.

With --reel it times Reel's PyTorch dataset (`reel.torch.ReelDataset` under
`DataLoader(batch_size=None, num_workers=0)`) on a manifest of the same
episodes instead, measured the same way. LeRobot is imported only without
--reel and Reel only with it, so each path runs in its own environment.

Outside CI; the LeRobot path needs the environment of requirements-lerobot.txt
(see README.md), the Reel path torch and Reel's Python package.
"""

from __future__ import annotations

import argparse
import bisect
import concurrent.futures
import json
import math
import multiprocessing
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# LeRobot must never reach for the Hugging Face Hub: the dataset is local.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import torch  # noqa: E402  (after the environment above)

try:  # In the LeRobot environment; the Reel path falls back to /proc without it.
    import psutil  # noqa: E402
except ImportError:
    psutil = None

FPS = 30
REPO_ID = "reel/peer-bench"
# Matching a grid time against a stream's log times: the grids are rounded to
# whole nanoseconds, so "at or before t" allows a microsecond of rounding.
GRID_SLACK_NS = 1_000

# The sample (Reel's loading benchmark): two frames per camera, 1 s of state
# (30 steps before t plus t), a 50-step action chunk from t.
CAMERA_OFFSETS_S = [-0.5, 0.0]
STATE_STEPS_BEFORE = FPS
ACTION_CHUNK = 50

# Resident memory is sampled this often while a configuration runs.
RSS_SAMPLE_S = 0.05
# The process tree (DataLoader workers come and go with iterators) is re-read this often.
CHILDREN_REFRESH_S = 0.5


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
    import numpy as np
    from mcap.reader import make_reader
    from mcap_protobuf.decoder import DecoderFactory

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


def decode_h264(path: Path, stream: Stream) -> list:
    """Every access unit of a camera as RGB (one frame out per access unit: no B-frames)."""
    import av

    codec = av.CodecContext.create("h264", "r")
    frames = []
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


def encoder_config(args: argparse.Namespace):
    """LeRobot's `RGBEncoderConfig`: its own defaults (libsvtav1, GOP 2, CRF 30, preset 12,
    no fast-decode tuning in 0.6.1) except for the settings given on the command line."""
    from lerobot.configs import RGBEncoderConfig

    given = {
        "vcodec": args.vcodec,
        "g": args.gop,
        "crf": args.crf,
        "preset": args.preset,
        "fast_decode": args.fast_decode,
    }
    return RGBEncoderConfig(**{k: v for k, v in given.items() if v is not None})


def dataset_dir_name(encoder) -> str:
    name = f"lerobot-{encoder.vcodec}-g{encoder.g}-crf{encoder.crf}-fd{encoder.fast_decode}"
    return name if encoder.preset is None else f"{name}-p{encoder.preset}"


def build_dataset(episode_paths: list[Path], root: Path, encoder) -> dict:
    """Writes the LeRobot dataset under a temporary name, then renames it to `root`."""
    import lerobot
    import numpy as np
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    staging = root.with_name(f".{root.name}.partial")
    if staging.exists():
        shutil.rmtree(staging)
    first = read_episode(episode_paths[0])
    features = features_for(first)
    dataset = LeRobotDataset.create(
        repo_id=REPO_ID,
        fps=FPS,
        features=features,
        root=staging,
        robot_type="reel",
        use_videos=True,
        rgb_encoder=encoder,
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
            frame = {key: decoded[key][episode.cameras[key].index_at_or_before(t)] for key in episode.cameras}
            frame["observation.state"] = episode.state.payloads[episode.state.index_at_or_before(t)].astype(
                np.float32
            )
            frame["action"] = episode.action.payloads[episode.action.index_at_or_before(t)].astype(np.float32)
            frame["task"] = episode.task
            dataset.add_frame(frame)
        # One camera at a time: the conversion stays on one core.
        dataset.save_episode(parallel_encoding=False)
        frames_total += len(grid)
        del decoded
        log(f"converted {path.name}: {len(grid)} frames at {FPS} fps")
    dataset.finalize()
    info = {
        "episodes": [p.name for p in episode_paths],
        "frames": frames_total,
        "vcodec": encoder.vcodec,
        "gop": encoder.g,
        "crf": encoder.crf,
        "preset": encoder.preset,
        "fast_decode": encoder.fast_decode,
        "lerobot_version": lerobot.__version__,
    }
    (staging / "reel_peer_build.json").write_text(json.dumps(info, indent=1))
    if root.exists():
        shutil.rmtree(root)
    staging.rename(root)
    return info


def build_in_child(episode_paths: list[Path], root: Path, encoder) -> dict:
    """`build_dataset` in a forked process, so the decoded frames of the conversion never
    count in this process's resident memory (peak_rss_mib of the runs that follow)."""
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(build_dataset, episode_paths, root, encoder).result()


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


def window_anchors(dataset) -> list[int]:
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


# Process figures ------------------------------------------------------------------------


def _proc_rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu_seconds() -> float:
    """CPU time (user + system, all threads) of this process and its live children
    (DataLoader workers). Without psutil: this process alone."""
    if psutil is None:
        t = os.times()
        return t.user + t.system
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


class PeakRss:
    """Samples the resident memory of this process plus its children (DataLoader workers)
    every RSS_SAMPLE_S in a thread, keeping the largest sum. Pages shared between a
    forked worker and its parent count in both, as in any sum of RSS. Without psutil it
    samples this process alone."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-rss", daemon=True)

    def _rss(self, processes: list) -> int:
        if psutil is None:
            return _proc_rss_bytes()
        total = 0
        for p in processes:
            try:
                total += p.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        return total

    def _run(self) -> None:
        me = psutil.Process() if psutil is not None else None
        processes: list = [me]
        refreshed = 0.0
        while True:
            now = time.monotonic()
            if me is not None and now - refreshed >= CHILDREN_REFRESH_S:
                processes = [me, *me.children(recursive=True)]
                refreshed = now
            self.peak = max(self.peak, self._rss(processes))
            if self._stop.wait(RSS_SAMPLE_S):
                break

    def __enter__(self) -> "PeakRss":
        self._thread.start()
        return self

    def sample_now(self) -> None:
        """One more sample, with the process tree re-read (call at the points that matter)."""
        if psutil is None:
            self.peak = max(self.peak, _proc_rss_bytes())
            return
        me = psutil.Process()
        self.peak = max(self.peak, self._rss([me, *me.children(recursive=True)]))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mib(self) -> float:
        return round(self.peak / (1 << 20), 1)


def batch_len(batch: dict) -> int:
    return next(len(v) for v in batch.values() if isinstance(v, torch.Tensor) and v.ndim > 0)


def timed_run(batches_iter, batches: int, check_first, rss: PeakRss) -> dict:
    """The common timing of both paths. `batches_iter()` creates the iterator (workers
    start here, so the first batch's time includes them); the batches after the first are
    the rate. CPU time covers the first batch and the timed ones and is read right after
    the last, before the iterator shuts down."""
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    iterator = batches_iter()
    first = next(iterator)
    first_batch_s = time.perf_counter() - started
    check_first(first)
    first_samples = batch_len(first)
    del first

    samples = 0
    timed_from = time.perf_counter()
    for _ in range(batches):
        samples += batch_len(next(iterator))
    wall = time.perf_counter() - timed_from
    rss.sample_now()
    cpu = cpu_seconds() - cpu_before
    del iterator

    samples_in_cpu = first_samples + samples
    return {
        "batch_size": first_samples,
        "batches": batches,
        "samples_per_s": round(samples / wall, 2),
        "cpu_s_per_sample": round(cpu / samples_in_cpu, 5),
        "samples_per_s_per_core": round(samples_in_cpu / cpu, 2),
        "time_to_first_batch_s": round(first_batch_s, 3),
        "wall_s": round(wall, 3),
    }


# LeRobot --------------------------------------------------------------------------------


def lerobot_check(camera_keys: list[str], batch_size: int, shapes: dict, uint8: bool):
    expected = {key: (batch_size, len(CAMERA_OFFSETS_S), 3, *shapes[key][:2]) for key in camera_keys}
    expected["observation.state"] = (batch_size, STATE_STEPS_BEFORE + 1, shapes["observation.state"][0])
    expected["action"] = (batch_size, ACTION_CHUNK, shapes["action"][0])
    image_dtype = torch.uint8 if uint8 else torch.float32

    def check(batch: dict) -> None:
        for key, shape in expected.items():
            if tuple(batch[key].shape) != shape:
                raise RuntimeError(f"batch[{key!r}] has shape {tuple(batch[key].shape)}, expected {shape}")
        for key in camera_keys:
            if batch[key].dtype != image_dtype:
                raise RuntimeError(f"batch[{key!r}] has dtype {batch[key].dtype}, expected {image_dtype}")

    return check


def bench_lerobot(root: Path, num_workers: int, args: argparse.Namespace) -> dict:
    import lerobot
    from lerobot.datasets import video_utils
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from lerobot.utils.import_utils import get_safe_default_video_backend

    batch_size, batches = args.batch_size, args.batches
    # LeRobot caches one torchcodec decoder (and its open file) per video in a module-level
    # cache. A forked DataLoader worker inherits the parent's, sharing the file offset with
    # it, and reads garbage ("Invalid data found when processing input"): start every
    # configuration without decoders.
    video_utils._default_decoder_cache.clear()
    with PeakRss() as rss:
        opened = time.perf_counter()
        probe = LeRobotDataset(REPO_ID, root=root, video_backend=args.video_backend)
        camera_keys = list(probe.meta.video_keys)
        shapes = {k: tuple(v["shape"]) for k, v in probe.meta.features.items()}
        del probe
        dataset = LeRobotDataset(
            REPO_ID,
            root=root,
            delta_timestamps=delta_timestamps_for(camera_keys),
            video_backend=args.video_backend,
            return_uint8=args.uint8,
        )
        anchors = window_anchors(dataset)
        build = json.loads((root / "reel_peer_build.json").read_text())
        subset = torch.utils.data.Subset(dataset, anchors)
        # `shuffle=True` draws one permutation per epoch; the episodes are short, so the run
        # spans several epochs within one iterator (RandomSampler is what `shuffle=True`
        # builds, here told how many samples to draw), keeping worker start-up out of the
        # timed batches. It holds exactly batches + 1 batches, so when the CPU time is read
        # after the last one no work is left in flight.
        sampler = torch.utils.data.RandomSampler(subset, num_samples=(batches + 1) * batch_size)
        loader = torch.utils.data.DataLoader(
            subset, batch_size=batch_size, sampler=sampler, num_workers=num_workers, drop_last=True
        )
        open_s = time.perf_counter() - opened
        figures = timed_run(
            lambda: iter(loader), batches, lerobot_check(camera_keys, batch_size, shapes, args.uint8), rss
        )
    return {
        "peer": "lerobot",
        "lerobot_version": lerobot.__version__,
        "num_workers": num_workers,
        **figures,
        "peak_rss_mib": rss.mib,
        "video_codec": video_codec_of(root),
        "gop": build["gop"],
        "crf": build["crf"],
        "preset": build["preset"],
        "fast_decode": build["fast_decode"],
        "uint8": args.uint8,
        "episodes": dataset.meta.total_episodes,
        "frames": dataset.meta.total_frames,
        # Beyond the common keys: what else shapes the figures.
        "video_backend": args.video_backend or get_safe_default_video_backend(),
        "anchors": len(anchors),
        "open_s": round(open_s, 3),
        "main_torch_threads": torch.get_num_threads(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def run_lerobot(args: argparse.Namespace, workers: list[int]) -> list[dict] | None:
    if args.episodes is None or args.work is None:
        log("error: --episodes and --work are needed (or --reel with --manifest, --spec and --store)")
        return None
    if psutil is None and any(w > 0 for w in workers):
        log("error: psutil is needed to count DataLoader workers (pip install -r requirements-lerobot.txt)")
        return None
    import lerobot

    episode_paths = sorted(args.episodes.glob("*.mcap"))
    if not episode_paths:
        log(f"error: no *.mcap in {args.episodes}")
        return None
    encoder = encoder_config(args)
    root = args.work / dataset_dir_name(encoder)
    marker = root / "reel_peer_build.json"
    built = json.loads(marker.read_text()) if marker.exists() else None
    if (
        built is not None
        and built["episodes"] == [p.name for p in episode_paths]
        and built.get("lerobot_version") == lerobot.__version__
    ):
        log(f"reusing {root}")
    else:
        log(f"building {root} from {len(episode_paths)} episodes with {encoder} (not timed)")
        try:
            build_in_child(episode_paths, root, encoder)
        except InputError as error:
            log(f"error: {error}")
            return None

    rows = []
    for num_workers in workers * args.rounds:
        log(f"loading: num_workers={num_workers}, batch_size={args.batch_size}, {args.batches} timed batches")
        result = bench_lerobot(root, num_workers, args)
        print(json.dumps(result), flush=True)
        rows.append(result)
    return rows


# Reel -----------------------------------------------------------------------------------


def reel_check(batch_size: int):
    def check(batch: dict) -> None:
        for key, value in batch.items():
            if isinstance(value, torch.Tensor) and value.ndim > 0 and value.shape[0] != batch_size:
                raise RuntimeError(f"batch[{key!r}] has shape {tuple(value.shape)}, expected {batch_size} first")

    return check


def endless(loader):
    """The batches of one epoch after another (ReelDataset iterates one epoch at a time)."""
    while True:
        delivered = 0
        for batch in loader:
            delivered += 1
            yield batch
        if delivered == 0:
            raise RuntimeError("an epoch with no batches (is the manifest empty under this spec?)")


def bench_reel(reel_workers: int, args: argparse.Namespace) -> dict:
    try:
        import reel
        from reel.torch import ReelDataset
    except ImportError as error:
        raise SystemExit(f"error: {error} under {sys.executable} (the Reel path needs Reel's Python package)")

    batch_size, batches = args.batch_size, args.batches
    options = dict(
        batch_size=batch_size,
        workers=reel_workers,
        shuffle=args.shuffle,
        seed=args.seed,
        drop_last=True,
        layout=args.layout,
    )
    if args.layout == "lerobot":
        options["image_dtype"] = "uint8" if args.uint8 else "float32"
    with PeakRss() as rss:
        opened = time.perf_counter()
        dataset = ReelDataset(args.manifest, args.spec, args.store, **options)
        # Opens the loader (the manifest and the store) and tells the epoch's batches; the
        # iterator below reuses it, as LeRobot's path opens its dataset before iterating.
        epoch_batches = len(dataset)
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=0)
        open_s = time.perf_counter() - opened
        # Reel's threads build up to `prefetch` batches ahead; those in flight when the CPU
        # time is read count in it, against Reel.
        figures = timed_run(lambda: endless(loader), batches, reel_check(batch_size), rss)
    return {
        "peer": "reel",
        "reel_version": reel.__version__,
        "num_workers": 0,
        "reel_workers": reel_workers,
        "shuffle": args.shuffle,
        **figures,
        "peak_rss_mib": rss.mib,
        "layout": args.layout,
        "uint8": args.uint8 or args.layout == "reel",
        "epoch_batches": epoch_batches,
        "manifest": str(args.manifest),
        "encoding": args.encoding_label,
        "open_s": round(open_s, 3),
        "main_torch_threads": torch.get_num_threads(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def run_reel(args: argparse.Namespace) -> list[dict] | None:
    if args.manifest is None or args.spec is None:
        log("error: --reel needs --manifest and --spec (and --store unless the manifest's folder is the store)")
        return None
    workers = [int(w) for w in args.reel_workers.split(",") if w.strip()]
    rows = []
    for reel_workers in workers * args.rounds:
        log(
            f"loading with Reel: {reel_workers} workers, {args.shuffle} shuffle, batch_size={args.batch_size}, "
            f"{args.batches} timed batches"
        )
        result = bench_reel(reel_workers, args)
        print(json.dumps(result), flush=True)
        rows.append(result)
    return rows


# Command line ---------------------------------------------------------------------------


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=Path, help="folder of canonical Reel episodes (*.mcap)")
    parser.add_argument("--work", type=Path, help="folder for the LeRobot datasets (each built once)")
    parser.add_argument("--batches", type=int, default=100, help="timed batches after the first (default 100)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--workers", default="0,2", help="comma-separated DataLoader num_workers (default 0,2)")
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=0,
        help="torch threads of the loading process (DataLoader workers always use 1); "
        "0 (default) keeps torch's default, as LeRobot's users run it",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeat the worker list, interleaved (noisy machines)"
    )
    parser.add_argument(
        "--uint8",
        action="store_true",
        help="frames as uint8 (LeRobot's return_uint8; Reel's image_dtype under --layout lerobot) "
        "instead of float32 in [0, 1]",
    )
    encoding = parser.add_argument_group("LeRobot's encoder (RGBEncoderConfig; unset: LeRobot's defaults)")
    encoding.add_argument("--vcodec", help="h264, hevc, libsvtav1 (LeRobot's default), libaom-av1, ...")
    encoding.add_argument("--gop", type=int, help="keyframe interval, RGBEncoderConfig.g (LeRobot's: 2)")
    encoding.add_argument("--crf", type=int, help="encoder CRF (LeRobot's: 30)")
    encoding.add_argument("--preset", help="encoder preset (LeRobot's: 12 for libsvtav1, the codec's own otherwise)")
    encoding.add_argument(
        "--fast-decode",
        type=int,
        help="RGBEncoderConfig.fast_decode: for h264/hevc nonzero = tune=fastdecode, for libsvtav1 "
        "fast-decode=0..2 (LeRobot's: 0)",
    )
    parser.add_argument(
        "--video-backend", default=None, help="LeRobot's decoder: torchcodec or pyav (default: LeRobot's choice)"
    )
    reel_group = parser.add_argument_group("Reel's PyTorch dataset instead (--reel)")
    reel_group.add_argument("--reel", action="store_true", help="time reel.torch.ReelDataset instead of LeRobot")
    reel_group.add_argument("--manifest", help="manifest from reel-curate (path or store URI)")
    reel_group.add_argument("--spec", help="sample spec TOML (e.g. testdata/spec.toml)")
    reel_group.add_argument("--store", help="the store the manifest's episodes live in (folder or URI)")
    reel_group.add_argument(
        "--encoding-label", default="canonical", help="the store's encoding, for the table (default canonical)"
    )
    reel_group.add_argument("--reel-workers", default="2", help="comma-separated Reel loader threads (default 2)")
    reel_group.add_argument("--shuffle", choices=["global", "locality"], default="locality")
    reel_group.add_argument("--seed", type=int, default=0)
    reel_group.add_argument(
        "--layout", choices=["reel", "lerobot"], default="reel", help="Reel's batch layout (default reel)"
    )
    args = parser.parse_args()
    if args.preset is not None and args.preset.lstrip("-").isdigit():
        args.preset = int(args.preset)
    return args


def print_table(rows: list[dict]) -> None:
    print()
    print(
        "| peer | workers | batch | batches | samples/s | CPU s/sample | samples/s per core | first batch s "
        "| peak RSS MiB | data | decoder |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["peer"] == "reel":
            peer = f"Reel {r['reel_version']}"
            workers = f"{r['reel_workers']} thread{'' if r['reel_workers'] == 1 else 's'}"
            data = f"Reel {r['encoding']} h264"
            decoder = f"reel, {r['shuffle']} shuffle, {r['layout']} layout"
        else:
            peer = f"LeRobot {r['lerobot_version']}"
            workers = f"num_workers {r['num_workers']}"
            fd = f" fd{r['fast_decode']}" if r["fast_decode"] else ""
            data = f"{r['video_codec']} g{r['gop']} crf{r['crf']}{fd}"
            decoder = r["video_backend"]
        dtype = "uint8" if r["uint8"] else "float32"
        print(
            f"| {peer} | {workers} | {r['batch_size']} | {r['batches']} | {r['samples_per_s']:.1f} | "
            f"{r['cpu_s_per_sample']:.4f} | {r['samples_per_s_per_core']:.1f} | {r['time_to_first_batch_s']:.2f} | "
            f"{r['peak_rss_mib']:.0f} | {data} | {decoder}, {dtype} |"
        )


def main() -> int:
    args = parse_args()
    # LeRobot's users keep torch's default threads, and so does this script unless told.
    # With num_workers=0 the loading then runs on one thread per core, and LeRobot's small
    # tensor ops per sample (stack, cdist, min) become OpenMP fork-joins: about 4x the CPU
    # of one thread on a busy 2-core machine (--torch-threads 1 shows it).
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    if args.reel:
        rows = run_reel(args)
    else:
        rows = run_lerobot(args, [int(w) for w in args.workers.split(",") if w.strip()])
    if rows is None:
        return 2
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
