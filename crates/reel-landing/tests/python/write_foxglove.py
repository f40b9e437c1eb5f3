"""Writes a Foxglove SDK recording (protobuf with the Foxglove schemas, as `foxglove-sdk`
logs them, plus a JSON channel and a protobuf channel whose schema does not parse).

Usage: write_foxglove.py OUT.mcap EXPECTED.json
"""

import io
import json
import sys

import foxglove
import numpy as np
from foxglove.channels import (
    CompressedImageChannel,
    FrameTransformsChannel,
    JointStatesChannel,
    PoseInFrameChannel,
    RawImageChannel,
)
from foxglove.messages import (
    CompressedImage,
    FrameTransform,
    FrameTransforms,
    JointState,
    JointStates,
    Pose,
    PoseInFrame,
    Quaternion,
    RawImage,
    Timestamp,
    Vector3,
)
from PIL import Image as PilImage

W, H, FRAMES = 6, 4, 8
PERIOD = 50_000_000
START = 1_700_000_000_000_000_000


def rgb_frame(i):
    y, x = np.mgrid[0:H, 0:W]
    return np.stack([(x * 40 + i) % 256, (y * 60) % 256, np.full_like(x, 100 + i)], axis=-1).astype(np.uint8)


ODD_W, ODD_H = 33, 25


def odd_frame(i):
    """A picture of odd width and height: H.264 4:2:0 codes only even sizes."""
    y, x = np.mgrid[0:ODD_H, 0:ODD_W]
    return np.stack([(x * 7 + i) % 256, (y * 9) % 256, np.full_like(x, 90)], axis=-1).astype(np.uint8)


def main():
    out, expected_path = sys.argv[1], sys.argv[2]
    with foxglove.open_mcap(out, allow_overwrite=True):
        raw = RawImageChannel("/fox/raw")
        uyvy = RawImageChannel("/fox/uyvy")
        odd = RawImageChannel("/fox/odd")
        jpeg = CompressedImageChannel("/fox/jpeg")
        tf = FrameTransformsChannel("/fox/tf")
        pose = PoseInFrameChannel("/fox/pose")
        joints = JointStatesChannel("/fox/joints")
        as_json = foxglove.Channel("/fox/json_joints")
        broken = foxglove.Channel(
            "/fox/broken",
            schema=foxglove.Schema(name="acme.Thing", encoding="protobuf", data=b"\xff\xfe not a descriptor"),
            message_encoding="protobuf",
        )
        for i in range(FRAMES):
            t = START + i * PERIOD
            ts = Timestamp(sec=t // 1_000_000_000, nsec=t % 1_000_000_000)
            rgb = rgb_frame(i)
            step = W * 3 + 2
            data = b"".join(bytes(row) + b"\x00\x00" for row in rgb.reshape(H, -1))
            raw.log(RawImage(timestamp=ts, frame_id="cam", width=W, height=H, encoding="rgb8", step=step, data=data), log_time=t)
            uyvy.log(RawImage(timestamp=ts, frame_id="cam", width=W, height=H, encoding="uyvy", step=W * 2,
                              data=bytes([128, 126] * (W * H))), log_time=t)
            odd.log(RawImage(timestamp=ts, frame_id="cam", width=ODD_W, height=ODD_H, encoding="rgb8",
                             step=ODD_W * 3, data=odd_frame(i).tobytes()), log_time=t)
            buf = io.BytesIO()
            PilImage.fromarray(rgb).save(buf, format="JPEG", quality=95, subsampling=0)
            jpeg.log(CompressedImage(timestamp=ts, frame_id="cam", data=buf.getvalue(), format="jpeg"), log_time=t)
            tf.log(FrameTransforms(transforms=[
                FrameTransform(timestamp=ts, parent_frame_id="world", child_frame_id=child,
                               translation=Vector3(x=float(i) * k, y=0.0, z=0.0),
                               rotation=Quaternion(x=0.0, y=0.0, z=0.0, w=1.0))
                for child, k in (("base", 1.0), ("tool", 2.0))
            ]), log_time=t)
            pose.log(PoseInFrame(timestamp=ts, frame_id="map", pose=Pose(
                position=Vector3(x=float(i), y=1.0, z=2.0), orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=1.0))), log_time=t)
            joints.log(JointStates(timestamp=ts, joints=[
                JointState(name="wrist", position=float(i), velocity=0.5, effort=1.5),
                JointState(name="finger", position=-float(i), velocity=0.25, effort=2.5),
            ]), log_time=t)
            as_json.log({"timestamp": {"sec": ts.sec, "nsec": ts.nsec}, "name": ["a", "b"],
                         "position": [float(i), 2.0 * i], "velocity": [0.0, 1.0]}, log_time=t)
            broken.log(b"\x08\x01", log_time=t)
    with open(expected_path, "w") as f:
        json.dump({"frames": FRAMES, "start_ns": START, "period_ns": PERIOD,
                   "rgb_frame3": rgb_frame(3).reshape(-1).tolist(),
                   "odd_size": [ODD_W, ODD_H], "odd_frame3": odd_frame(3).reshape(-1).tolist()}, f)


if __name__ == "__main__":
    main()
