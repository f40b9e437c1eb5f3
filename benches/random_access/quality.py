#!/usr/bin/env python3
"""Storage and picture quality of every encoding in the random-access benchmark.

For each dataset: video bytes per camera-second, and PSNR (of the mean squared error over
every third frame) against the source frames, the landing recording's JPEG pictures the
episodes were ingested from.

  quality.py --landing DIR [--reel NAME=STORE ...] [--lerobot DIR ...]
             [--imported NAME=STORE=DATASET ...] [--exported NAME=DIR=EPISODES ...]
             [--canonical DIR]

--reel: a store ingested from the landing folder (its canonical/*.mcap). --lerobot: a
dataset lerobot_load.py built (its reel_peer_build.json names the canonical episodes,
found in --canonical, whose grid it follows). --imported: a store `reel-import lerobot`
made from such a dataset (each canonical episode's `source.episode_index` is its episode
in the dataset, its frame k the dataset's frame k). --exported: a dataset `reel-export
lerobot` wrote from canonical episodes (EPISODES: a JSON list of their file names in
the dataset's order; cameras named by their topics). One JSON line per dataset on stdout.
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from pathlib import Path

import av
import numpy as np
from mcap.reader import make_reader
from mcap_protobuf.decoder import DecoderFactory as ProtobufDecoders
from mcap_ros2.decoder import DecoderFactory as Ros2Decoders

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "peers"))
from lerobot_load import camera_key, decode_h264, grid_times, read_episode  # noqa: E402

STEP = 3  # every third frame


class Landing:
    """Source pictures by episode file name and topic, at the latest landing frame at or
    before a time (ingest resamples cameras onto a grid, so canonical log times are grid
    times), decoded on demand."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.units: dict[str, dict[str, tuple[list[int], list[bytes]]]] = {}
        self.jpeg = av.CodecContext.create("mjpeg", "r")

    def picture(self, episode: str, topic: str, log_time: int) -> np.ndarray | None:
        if episode not in self.units:
            units: dict[str, tuple[list[int], list[bytes]]] = {}
            with open(self.folder / episode, "rb") as f:
                reader = make_reader(f, decoder_factories=[Ros2Decoders()])
                for _s, channel, message, decoded in reader.iter_decoded_messages():
                    if channel.topic.startswith("/camera/"):
                        times, datas = units.setdefault(channel.topic, ([], []))
                        times.append(message.log_time)
                        datas.append(bytes(decoded.data))
            self.units[episode] = units
        times, datas = self.units[episode][topic]
        # Resampling shows the latest landing frame at or before each grid time.
        i = bisect.bisect_right(times, log_time) - 1
        if i < 0 or log_time - times[i] > 100_000_000:
            return None  # no landing frame in the 100 ms before
        data = datas[i]
        try:
            frames = self.jpeg.decode(av.Packet(data))
        except av.error.FFmpegError:
            return None  # a damaged landing frame: nothing to compare with
        return frames[0].to_ndarray(format="rgb24") if frames else None


def mse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))


def psnr(errors: list[float]) -> float:
    return 10 * np.log10(255.0**2 / np.mean(errors))


def reel_store(name: str, store: Path, landing: Landing) -> dict:
    errors, video_bytes, camera_seconds = [], 0, 0.0
    for path in sorted((store / "canonical").glob("*.mcap")):
        with open(path, "rb") as f:
            reader = make_reader(f, decoder_factories=[ProtobufDecoders()])
            summary = reader.get_summary()
            cameras = sorted(c.topic for c in summary.channels.values() if c.metadata.get("reel.kind") == "camera")
            units: dict[str, list[tuple[int, bytes]]] = {c: [] for c in cameras}
            for _s, channel, message, decoded in reader.iter_decoded_messages(topics=cameras):
                units[channel.topic].append((message.log_time, bytes(decoded.data)))
        for topic, stream in units.items():
            times = [t for t, _ in stream]
            video_bytes += sum(len(d) for _, d in stream)
            camera_seconds += len(stream) / 30.0
            codec = av.CodecContext.create("h264", "r")
            frames = [f.to_ndarray(format="rgb24") for _, d in stream for f in codec.decode(av.Packet(d))]
            frames += [f.to_ndarray(format="rgb24") for f in codec.decode(None)]
            for t, frame in list(zip(times, frames))[::STEP]:
                source = landing.picture(path.name, topic, t)
                if source is not None:
                    errors.append(mse(source, frame))
    return {
        "dataset": name,
        "bytes_per_camera_second": video_bytes / camera_seconds,
        "psnr_db": psnr(errors),
        "frames_compared": len(errors),
    }


def exported_key(topic: str) -> str:
    """reel-export's feature key of a camera topic."""
    return "observation.images." + topic.strip("/").replace("/", ".")


def exported_grids(root: Path, episodes: list) -> list[list[int]]:
    """reel-export's frame times: its fps grid from the latest first camera frame, as many
    frames as the dataset's episode table says."""
    import pyarrow.parquet as pq

    fps = json.loads((root / "meta/info.json").read_text())["fps"]
    table = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet", columns=["episode_index", "length"])
    lengths = dict(zip(table.column("episode_index").to_pylist(), table.column("length").to_pylist()))
    grids = []
    for index, episode in enumerate(episodes):
        start = max(s.times_ns[0] for s in episode.cameras.values())
        grids.append([start + round(k * 1e9 / fps) for k in range(lengths[index])])
    return grids


def lerobot_dataset(root: Path, canonical: Path, landing: Landing, exported: tuple[str, list[str]] | None = None) -> dict:
    if exported is None:
        build = json.loads((root / "reel_peer_build.json").read_text())
        names, label = build["episodes"], f"LeRobot {build['vcodec']} g{build['gop']} crf{build['crf']}"
    else:
        label, names = exported
    errors, video_bytes, frames_total = [], 0, 0
    episodes = [read_episode(canonical / name) for name in names]
    grids = [grid_times(e) for e in episodes] if exported is None else exported_grids(root, episodes)
    for key in episodes[0].cameras:
        folder = key if exported is None else exported_key(episodes[0].cameras[key].topic)
        files = sorted((root / "videos" / folder).glob("*/*.mp4"))
        video_bytes += sum(f.stat().st_size for f in files)
        decoded = []
        for file in files:
            with av.open(str(file)) as container:
                decoded += [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
        at = 0
        for episode, grid in zip(episodes, grids):
            stream = episode.cameras[key]
            for k, t in enumerate(grid):
                if k % STEP == 0:
                    log_time = stream.times_ns[stream.index_at_or_before(t)]
                    source = landing.picture(episode.path.name, stream.topic, log_time)
                    if source is not None:
                        errors.append(mse(source, decoded[at + k]))
            at += len(grid)
        if at != len(decoded):
            raise SystemExit(f"{root}: {key} has {len(decoded)} frames, the episodes' grids {at}")
        frames_total += at
    return {
        "dataset": label,
        "bytes_per_camera_second": video_bytes / (frames_total / 30.0),
        "psnr_db": psnr(errors),
        "frames_compared": len(errors),
    }


def imported_store(name: str, store: Path, dataset: Path, canonical: Path, landing: Landing) -> dict:
    build = json.loads((dataset / "reel_peer_build.json").read_text())
    episodes = [read_episode(canonical / n) for n in build["episodes"]]
    errors, video_bytes, frames_total = [], 0, 0
    for path in sorted((store / "canonical").glob("*.mcap")):
        with open(path, "rb") as f:
            reader = make_reader(f, decoder_factories=[ProtobufDecoders()])
            record = next(m.metadata for m in reader.iter_metadata() if m.name == "episode")
            fps = float(record["source.fps"])
            episode = episodes[int(record["source.episode_index"])]
            summary = reader.get_summary()
            cameras = sorted(c.topic for c in summary.channels.values() if c.metadata.get("reel.kind") == "camera")
            units: dict[str, list[tuple[int, bytes]]] = {c: [] for c in cameras}
            for _s, channel, message, decoded in reader.iter_decoded_messages(topics=cameras):
                units[channel.topic].append((message.log_time, bytes(decoded.data)))
        grid = grid_times(episode)
        for topic, stream in units.items():
            key = topic.lstrip("/")
            source_stream = next(s for k, s in episode.cameras.items() if k == key)
            video_bytes += sum(len(d) for _, d in stream)
            frames_total += len(stream)
            codec = av.CodecContext.create("h264", "r")
            frames = [f.to_ndarray(format="rgb24") for _, d in stream for f in codec.decode(av.Packet(d))]
            frames += [f.to_ndarray(format="rgb24") for f in codec.decode(None)]
            for (t, _), frame in list(zip(stream, frames))[::STEP]:
                k = round(t * fps / 1e9)
                log_time = source_stream.times_ns[source_stream.index_at_or_before(grid[k])]
                source = landing.picture(episode.path.name, source_stream.topic, log_time)
                if source is not None:
                    errors.append(mse(source, frame))
    return {
        "dataset": name,
        "bytes_per_camera_second": video_bytes / (frames_total / 30.0),
        "psnr_db": psnr(errors),
        "frames_compared": len(errors),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--landing", type=Path, required=True)
    parser.add_argument("--reel", action="append", default=[], help="NAME=STORE")
    parser.add_argument("--lerobot", action="append", default=[], type=Path)
    parser.add_argument("--imported", action="append", default=[], help="NAME=STORE=DATASET")
    parser.add_argument("--exported", action="append", default=[], help="NAME=DIR=EPISODES")
    parser.add_argument("--canonical", type=Path, help="the canonical episodes the LeRobot datasets came from")
    args = parser.parse_args()
    landing = Landing(args.landing)
    for item in args.reel:
        name, store = item.split("=", 1)
        print(json.dumps(reel_store(name, Path(store), landing)), flush=True)
    for root in args.lerobot:
        print(json.dumps(lerobot_dataset(root, args.canonical, landing)), flush=True)
    for item in args.exported:
        name, root, names = item.split("=", 2)
        exported = (name, json.loads(Path(names).read_text()))
        print(json.dumps(lerobot_dataset(Path(root), args.canonical, landing, exported)), flush=True)
    for item in args.imported:
        name, store, dataset = item.split("=", 2)
        print(json.dumps(imported_store(name, Path(store), Path(dataset), args.canonical, landing)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
