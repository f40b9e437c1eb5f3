"""Writes a Foxglove SDK recording whose cameras are recorded video
(`foxglove.CompressedVideo`, one access unit per message), encoded by PyAV (FFmpeg's
libx264 and libx265) the way robots that record H.264 do:

- /video/kept     H.264, a keyframe every second, no B-frames, SPS/PPS on keyframes;
- /video/bframes  H.264 with B-frames (decode order != presentation order);
- /video/hevc     H.265;
- /video/offset   H.264 whose keyframes (every 2/3 s) do not start the 1 s windows;
- /video/raw      rgb8 pictures, which Reel encodes itself;
- /joints         joint states.

Usage: write_video.py OUT.mcap EXPECTED.json
"""

import json
from fractions import Fraction
import sys

import av
import foxglove
import numpy as np
from foxglove.channels import CompressedVideoChannel, JointStatesChannel, RawImageChannel
from foxglove.messages import CompressedVideo, JointState, JointStates, RawImage, Timestamp

W, H, FPS, FRAMES = 128, 96, 15, 45
PERIOD = 1_000_000_000 // FPS
START = 1_700_000_000_000_000_000


def rgb_frame(i):
    y, x = np.mgrid[0:H, 0:W]
    cx = 16 + (i * 2) % (W - 32)
    disc = (x - cx) ** 2 + (y - H // 2) ** 2 < 144
    r = np.where(disc, 230, (x * 255) // W)
    g = np.where(disc, 60, (y * 255) // H)
    b = np.where(disc, 40, 120 + 60 * np.sin((x + 2 * y + 3 * i) * 0.05))
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


def encode(codec, gop, bframes, params=""):
    """Access units in decode order, as a recorder writes them."""
    ctx = av.CodecContext.create(codec, "w")
    ctx.width, ctx.height, ctx.pix_fmt = W, H, "yuv420p"
    ctx.time_base = Fraction(1, FPS)
    ctx.framerate = Fraction(FPS, 1)
    ctx.gop_size = gop
    ctx.max_b_frames = bframes
    if codec == "libx264":
        ctx.options = {"crf": "16", "x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}:repeat-headers=1{params}"}
    else:
        ctx.options = {"crf": "16", "x265-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}:repeat-headers=1:log-level=error"}
    units = []
    for i in range(FRAMES):
        frame = av.VideoFrame.from_ndarray(rgb_frame(i), format="rgb24").reformat(format="yuv420p")
        frame.pts = i
        units += [bytes(p) for p in ctx.encode(frame)]
    units += [bytes(p) for p in ctx.encode(None)]
    assert len(units) == FRAMES, (codec, len(units))
    return units


def main():
    out, expected_path = sys.argv[1], sys.argv[2]
    streams = {
        "/video/kept": ("h264", encode("libx264", FPS, 0)),
        "/video/bframes": ("h264", encode("libx264", FPS, 2)),
        "/video/hevc": ("h265", encode("libx265", FPS, 0)),
        "/video/offset": ("h264", encode("libx264", 10, 0)),
    }
    with foxglove.open_mcap(out, allow_overwrite=True):
        channels = {topic: CompressedVideoChannel(topic) for topic in streams}
        raw = RawImageChannel("/video/raw")
        joints = JointStatesChannel("/joints")
        for i in range(FRAMES):
            t = START + i * PERIOD
            ts = Timestamp(sec=t // 1_000_000_000, nsec=t % 1_000_000_000)
            for topic, (fmt, units) in streams.items():
                channels[topic].log(CompressedVideo(timestamp=ts, frame_id="cam", data=units[i], format=fmt), log_time=t)
            raw.log(RawImage(timestamp=ts, frame_id="cam", width=W, height=H, encoding="rgb8", step=W * 3,
                             data=rgb_frame(i).tobytes()), log_time=t)
            joints.log(JointStates(timestamp=ts, joints=[JointState(name="wrist", position=float(i))]), log_time=t)
    with open(expected_path, "w") as f:
        json.dump({
            "frames": FRAMES, "width": W, "height": H, "start_ns": START, "period_ns": PERIOD,
            "rgb": {str(i): rgb_frame(i).reshape(-1).tolist() for i in (0, 7, 20, 44)},
            "kept_units": [u.hex() for u in streams["/video/kept"][1]],
        }, f)


if __name__ == "__main__":
    main()
