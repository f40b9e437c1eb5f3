"""Independent check of reel-synth landing episodes with the Python `mcap` reader.

Usage: check_landing.py REPORTS.jsonl
Each line is one `reel-synth` JSON line (path, faults_path, counts, meta).
Checks, per episode: exact message counts per topic, time order, the summary
statistics, the `episode` metadata record, that every JPEG decodes (and that
the frames the fault sidecar calls corrupt do not), and that NaN hand poses
appear exactly inside the sidecar's NaN dropouts.
"""

import io
import json
import math
import sys

from mcap.reader import make_reader
from mcap_protobuf.decoder import DecoderFactory as ProtobufDecoderFactory
from mcap_ros2.decoder import DecoderFactory as Ros2DecoderFactory
from PIL import Image


FACTORIES = [Ros2DecoderFactory(), ProtobufDecoderFactory()]


def fail(path, message):
    raise SystemExit(f"{path}: {message}")


def check(report):
    path = report["path"]
    faults = json.load(open(report["faults_path"]))["faults"]

    def inside(kind, topic, t):
        return any(
            f["kind"] == kind and f["topic"] in (topic, "*") and f["start_ns"] <= t <= f["end_ns"]
            for f in faults
        )

    with open(path, "rb") as stream:
        reader = make_reader(stream)
        decoders = {}
        summary = reader.get_summary()
        if summary is None:
            fail(path, "no summary section")
        counts = {}
        last = -1
        decoded_frames = 0
        for schema, channel, message in reader.iter_messages(log_time_order=False):
            topic = channel.topic
            counts[topic] = counts.get(topic, 0) + 1
            if message.log_time < last:
                fail(path, f"{topic}: log time goes backwards at {message.log_time}")
            last = message.log_time
            if channel.message_encoding == "json":
                value = json.loads(message.data)
                if len(value["position"]) != 14:
                    fail(path, f"{topic}: expected 14 joint positions")
                continue
            if channel.id not in decoders:
                candidates = (f.decoder_for(channel.message_encoding, schema) for f in FACTORIES)
                decoders[channel.id] = next((d for d in candidates if d is not None), None)
                if decoders[channel.id] is None:
                    fail(path, f"{topic}: no decoder for {channel.message_encoding}/{schema.encoding}")
            msg = decoders[channel.id](message.data)
            if topic.startswith("/camera/"):
                corrupt = inside("corrupt_frame", topic, message.log_time)
                try:
                    Image.open(io.BytesIO(bytes(msg.data))).convert("RGB").load()
                    ok = True
                except Exception:
                    ok = False
                if ok == corrupt:
                    fail(path, f"{topic}@{message.log_time}: decodes={ok} but sidecar corrupt={corrupt}")
                decoded_frames += ok
            elif topic.startswith("/hand/"):
                x = msg.pose.position.x
                nan_span = any(
                    f["kind"] == "hand_pose_dropout" and f.get("mode") == "nan" and f["topic"] == topic
                    and f["start_ns"] <= message.log_time <= f["end_ns"]
                    for f in faults
                )
                if math.isnan(x) != nan_span:
                    fail(path, f"{topic}@{message.log_time}: NaN={math.isnan(x)} but sidecar says {nan_span}")
            elif topic == "/joint_states" and channel.message_encoding == "cdr":
                if len(msg.name) != 14 or len(msg.position) != 14:
                    fail(path, "joint state without 14 joints")
        if counts != report["counts"]:
            fail(path, f"counts {counts} != reported {report['counts']}")
        stats = summary.statistics
        by_topic = {summary.channels[c].topic: n for c, n in stats.channel_message_counts.items()}
        if by_topic != counts:
            fail(path, f"statistics {by_topic} != messages read {counts}")
        metadata = list(reader.iter_metadata())
        if [m.name for m in metadata] != ["episode"]:
            fail(path, f"metadata records {[m.name for m in metadata]}")
        meta = metadata[0].metadata
        expected = {k: v for k, v in report["meta"].items() if k != "start_ns"}
        expected["success"] = "true" if expected["success"] else "false"
        if meta != expected:
            fail(path, f"metadata {meta} != {expected}")
        return sum(counts.values()), decoded_frames


def main():
    total = frames = episodes = 0
    for line in open(sys.argv[1]):
        if line.strip():
            n, f = check(json.loads(line))
            total, frames, episodes = total + n, frames + f, episodes + 1
    if episodes == 0:
        raise SystemExit("no episodes to check")
    print(f"checked {episodes} episodes, {total} messages, {frames} JPEG frames decoded")


if __name__ == "__main__":
    main()
