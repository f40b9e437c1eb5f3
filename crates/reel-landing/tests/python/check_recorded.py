"""Reads a canonical episode packed from a rosbag with independent readers: Python `mcap`
(CRCs, every message), `mcap-ros2-support` (the topics kept as recorded still decode as
the ROS 2 messages they were) and `mcap-protobuf-support` (the cameras are
`foxglove.CompressedVideo` by Foxglove's rules: H.264 Annex B, SPS and PPS on every
keyframe, one access unit per message; depth cameras are `foxglove.RawImage` 16UC1 /
mono16 whose pixels equal the landing values).

Usage: check_recorded.py EPISODE.mcap EXPECTED.json; exits non-zero naming what is wrong.
"""

import json
import sys

import numpy as np

from mcap.reader import make_reader
from mcap_protobuf.decoder import DecoderFactory as ProtobufDecoders
from mcap_ros2.decoder import DecoderFactory as Ros2Decoders


def fail(message):
    print(f"check_recorded: {message}", file=sys.stderr)
    sys.exit(1)


def nal_types(access_unit):
    types, i = [], 0
    while True:
        i = access_unit.find(b"\x00\x00\x01", i)
        if i < 0 or i + 3 >= len(access_unit):
            return types
        types.append(access_unit[i + 3] & 0x1F)
        i += 3


def main():
    path, expected_path = sys.argv[1], sys.argv[2]
    expected = json.load(open(expected_path))
    chatter = []
    frames = {}
    depth = {}
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[Ros2Decoders(), ProtobufDecoders()], validate_crcs=True)
        for schema, channel, message, decoded in reader.iter_decoded_messages():
            meta = channel.metadata
            if channel.topic == "/chatter":
                if meta.get("reel.kind") != "recorded" or meta.get("reel.group") != "other":
                    fail(f"/chatter metadata {meta}")
                chatter.append(decoded.data)
            elif meta.get("reel.kind") == "camera":
                if schema.name != "foxglove.CompressedVideo" or decoded.format != "h264":
                    fail(f"{channel.topic}: {schema.name} {decoded.format}")
                types = nal_types(decoded.data)
                if 5 in types and not (7 in types and 8 in types):
                    fail(f"{channel.topic}: keyframe at {message.log_time} without SPS/PPS: {types}")
                if sum(1 for t in types if t in (1, 5)) < 1:
                    fail(f"{channel.topic}: message at {message.log_time} holds no picture")
                frames.setdefault(channel.topic, []).append(5 in types)
            elif meta.get("reel.kind") == "depth":
                if schema.name != "foxglove.RawImage" or decoded.encoding not in ("16UC1", "mono16"):
                    fail(f"{channel.topic}: {schema.name} {decoded.encoding}")
                if decoded.step != 2 * decoded.width or len(decoded.data) != decoded.step * decoded.height:
                    fail(f"{channel.topic}: {decoded.width}x{decoded.height} step {decoded.step}, {len(decoded.data)} bytes")
                depth.setdefault(channel.topic, []).append(list(np.frombuffer(decoded.data, "<u2")))
    if chatter != expected["chatter"]:
        fail(f"/chatter decoded as {chatter}, recorded {expected['chatter']}")
    for topic, keys in frames.items():
        if not keys or not keys[0]:
            fail(f"{topic}: does not start at a keyframe")
    if sorted(frames) != sorted(expected["cameras"]):
        fail(f"cameras {sorted(frames)}, expected {sorted(expected['cameras'])}")
    for topic, want in expected["depth_frame3"].items():
        got = depth.get(topic, [])
        if len(got) < 4 or [int(v) for v in got[3]] != want:
            fail(f"{topic}: frame 3 is {got[3] if len(got) > 3 else None}, recorded {want}")
    print(json.dumps({"chatter": len(chatter), "cameras": len(frames), "depths": len(depth)}))


if __name__ == "__main__":
    main()
