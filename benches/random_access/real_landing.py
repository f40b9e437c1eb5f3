#!/usr/bin/env python3
"""Landing episodes with real camera footage: the main job's landing recordings with every
camera picture replaced by a frame of a real video clip, JPEG-encoded as a camera driver
would (320×240, quality 90). Everything else (joint states, actions, poses, times,
metadata, the pictures that do not decode on purpose) is kept byte for byte, so the
episodes ingest and load exactly like the synthetic ones.

  real_landing.py --template DIR --clips DIR -o DIR

Each camera of each episode shows its own stretch of one clip, consecutive clip frames at
the landing frame rate, played back and forth where a clip is shorter than the episode
(no cut: every picture is a real one, and its neighbours are its real neighbours). The
clips (fetched by real_footage.sh) are real recordings: a handheld camera around a box
and a cup on a table, a fixed camera over a walkway, cyclists filmed from the roadside.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import av
import numpy as np
from mcap.reader import make_reader
from mcap.writer import CompressionType, Writer
from PIL import Image
from rosbags.typesys import Stores, get_typestore

WIDTH, HEIGHT, QUALITY = 320, 240, 90
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"
TYPES = get_typestore(Stores.ROS2_JAZZY)


def clip_frames(path: Path) -> list[np.ndarray]:
    """Every frame of a clip, centre-cropped to 4:3 and scaled to WIDTH×HEIGHT."""
    frames = []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            image = frame.to_image()
            w, h = image.size
            crop_w = min(w, h * 4 // 3)
            crop_h = crop_w * 3 // 4
            left, top = (w - crop_w) // 2, (h - crop_h) // 2
            image = image.crop((left, top, left + crop_w, top + crop_h)).resize((WIDTH, HEIGHT), Image.LANCZOS)
            frames.append(np.asarray(image.convert("RGB")))
    if len(frames) < 2:
        raise SystemExit(f"{path}: {len(frames)} frames, too few to use")
    return frames


def back_and_forth(frames: list, start: int, k: int):
    """Frame k of a playback that starts at `start` and reverses at either end."""
    period = 2 * (len(frames) - 1)
    i = (start + k) % period
    return frames[i if i < len(frames) else period - i]


def decodes(jpeg: bytes) -> bool:
    try:
        Image.open(io.BytesIO(jpeg)).load()
        return True
    except Exception:
        return False


def jpeg_of(frame: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(frame).save(out, format="JPEG", quality=QUALITY)
    return out.getvalue()


def rewrite(template: Path, output: Path, clips: list[list[np.ndarray]], episode: int) -> int:
    with open(template, "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        if summary is None:
            raise SystemExit(f"{template}: no MCAP summary")
        cameras = sorted(
            c.topic
            for c in summary.channels.values()
            if summary.schemas[c.schema_id].name == COMPRESSED_IMAGE
        )
        # Camera c of episode e plays clip (3e + c) mod clips, from its own start.
        plays = {
            topic: (clips[(3 * episode + c) % len(clips)], 97 * episode + 31 * c)
            for c, topic in enumerate(cameras)
        }
        counts = {topic: 0 for topic in cameras}
        partial = output.with_name(f".{output.name}.partial")
        replaced = 0
        with open(partial, "wb") as out:
            writer = Writer(out, compression=CompressionType.ZSTD)
            writer.start(profile=reader.get_header().profile, library="reel real_landing.py")
            schema_ids = {}
            for schema in summary.schemas.values():
                schema_ids[schema.id] = writer.register_schema(schema.name, schema.encoding, schema.data)
            channel_ids = {}
            for channel in summary.channels.values():
                channel_ids[channel.id] = writer.register_channel(
                    channel.topic, channel.message_encoding, schema_ids[channel.schema_id], channel.metadata
                )
            for _schema, channel, message in reader.iter_messages(log_time_order=False):
                data = message.data
                play = plays.get(channel.topic)
                if play is not None:
                    picture = TYPES.deserialize_cdr(data, COMPRESSED_IMAGE)
                    k = counts[channel.topic]
                    counts[channel.topic] += 1
                    # A picture damaged on purpose stays damaged: ingest must still count it.
                    if decodes(bytes(picture.data)):
                        frame = back_and_forth(play[0], play[1], k)
                        picture.data = np.frombuffer(jpeg_of(frame), dtype=np.uint8)
                        data = TYPES.serialize_cdr(picture, COMPRESSED_IMAGE)
                        replaced += 1
                writer.add_message(
                    channel_ids[channel.id],
                    log_time=message.log_time,
                    data=bytes(data),
                    publish_time=message.publish_time,
                    sequence=message.sequence,
                )
            for metadata in reader.iter_metadata():
                writer.add_metadata(metadata.name, dict(metadata.metadata))
            writer.finish()
    partial.rename(output)
    return replaced


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--template", type=Path, required=True, help="landing episodes (*.mcap) to copy")
    parser.add_argument("--clips", type=Path, required=True, help="folder of real video clips")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    paths = sorted(p for p in args.clips.iterdir() if p.suffix in {".mp4", ".avi"})
    if not paths:
        raise SystemExit(f"{args.clips}: no clips")
    clips = [clip_frames(p) for p in paths]
    for path, frames in zip(paths, clips):
        print(f"real_landing: {path.name}: {len(frames)} frames", file=sys.stderr)
    args.output.mkdir(parents=True, exist_ok=True)
    for episode, template in enumerate(sorted(args.template.glob("*.mcap"))):
        replaced = rewrite(template, args.output / template.name, clips, episode)
        print(f"real_landing: {template.name}: {replaced} pictures from real footage", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
