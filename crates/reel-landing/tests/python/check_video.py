"""Checks the cameras of a canonical episode with independent readers: Python `mcap`
with `mcap-protobuf-support` reads every message (CRCs checked), each camera follows
Foxglove's CompressedVideo rules (H.264 Annex B, one picture per message, SPS and PPS on
every keyframe, no B slices, a keyframe first), and PyAV (FFmpeg) decodes each camera
front to back. A camera kept as recorded must hold exactly the recorded access units.

Usage: check_video.py EPISODE.mcap EXPECTED.json; exits non-zero naming what is wrong,
prints the per-camera PSNR of frame 20 against the source as JSON.
"""

import json
import sys

import av
import numpy as np
from mcap.reader import make_reader
from mcap_protobuf.decoder import DecoderFactory


def fail(message):
    print(f"check_video: {message}", file=sys.stderr)
    sys.exit(1)


def nal_units(au):
    starts, i = [], 0
    while True:
        i = au.find(b"\x00\x00\x01", i)
        if i < 0:
            break
        starts.append(i + 3)
        i += 3
    return [au[s:(starts[k + 1] - 3 if k + 1 < len(starts) else len(au))] for k, s in enumerate(starts)]


def ue(bits, at):
    zeros = 0
    while bits[at] == "0":
        zeros += 1
        at += 1
    value = int(bits[at + 1:at + 1 + zeros] or "0", 2)
    return (1 << zeros) - 1 + value, at + 1 + zeros


def slice_type(unit):
    bits = "".join(f"{b:08b}" for b in unit[1:8])
    _, at = ue(bits, 0)
    return ue(bits, at)[0]


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255 * 255 / mse)


def main():
    path, expected_path = sys.argv[1], sys.argv[2]
    expected = json.load(open(expected_path))
    w, h = expected["width"], expected["height"]
    cameras = {}
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()], validate_crcs=True)
        for schema, channel, message, decoded in reader.iter_decoded_messages():
            if channel.metadata.get("reel.kind") != "camera":
                continue
            if schema.name != "foxglove.CompressedVideo" or decoded.format != "h264":
                fail(f"{channel.topic}: {schema.name} {decoded.format}")
            au = bytes(decoded.data)
            if not (au.startswith(b"\x00\x00\x01") or au.startswith(b"\x00\x00\x00\x01")):
                fail(f"{channel.topic}: message at {message.log_time} is not Annex B")
            types = [u[0] & 0x1F for u in nal_units(au) if u]
            slices = [u for u in nal_units(au) if u and u[0] & 0x1F in (1, 5)]
            if not slices:
                fail(f"{channel.topic}: message at {message.log_time} holds no picture")
            if 5 in types and not (7 in types and 8 in types):
                fail(f"{channel.topic}: keyframe at {message.log_time} without SPS/PPS")
            if any(slice_type(u) % 5 == 1 for u in slices):
                fail(f"{channel.topic}: B slice at {message.log_time}")
            cameras.setdefault(channel.topic, (dict(channel.metadata), []))[1].append((message.log_time, au, 5 in types))
    out = {}
    for topic, (meta, units) in cameras.items():
        if not units[0][2]:
            fail(f"{topic}: does not start at a keyframe")
        decoder = av.CodecContext.create("h264", "r")
        pictures = []
        for _, au, _ in units:
            for frame in decoder.decode(av.Packet(au)):
                pictures.append(frame.to_ndarray(format="rgb24"))
        pictures += [f.to_ndarray(format="rgb24") for f in decoder.decode(None)]
        if len(pictures) != len(units):
            fail(f"{topic}: PyAV decoded {len(pictures)} pictures from {len(units)} messages")
        if meta.get("reel.video") == "kept":
            recorded = [bytes.fromhex(u) for u in expected["kept_units"]]
            if [au for _, au, _ in units] != recorded:
                fail(f"{topic}: kept as recorded, but its access units differ from the recording")
        # Frame 20's picture against its source (cropped to the stream's own size).
        index = [t for t, _, _ in units].index(expected["start_ns"] + 20 * expected["period_ns"])
        source = np.array(expected["rgb"]["20"], np.uint8).reshape(h, w, 3)
        out[topic] = {"psnr": round(float(psnr(pictures[index][:h, :w], source)), 2),
                      "video": meta.get("reel.video"), "messages": len(units)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
