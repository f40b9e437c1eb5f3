"""Writes landing recordings with `rosbags` (an independent rosbag2 writer): one
recording as rosbag2 sqlite3 split in two files, the same as an MCAP bag, and a
big-endian MCAP, with every image encoding (depth included: 16UC1, 32FC1, mono16 and
compressedDepth PNG and RVL) and numeric message type Reel reads, plus
topics it must keep as recorded and messages it must count as bad.

Usage: write_rosbags.py OUT_DIR. Writes OUT_DIR/expected.json with what each topic holds.
"""

import io
import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
from PIL import Image as PilImage
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

TS = get_typestore(Stores.ROS2_JAZZY)
T = TS.types
W, H = 8, 6
FRAMES = 10
PERIOD = 100_000_000  # 10 Hz
START = 1_700_000_000_000_000_000


def stamp(t):
    return T["builtin_interfaces/msg/Time"](sec=t // 1_000_000_000, nanosec=t % 1_000_000_000)


def header(t, frame="base"):
    return T["std_msgs/msg/Header"](stamp=stamp(t), frame_id=frame)


def rgb_frame(i):
    y, x = np.mgrid[0:H, 0:W]
    return np.stack([(x * 30 + i) % 256, (y * 40) % 256, np.full_like(x, 200 - i)], axis=-1).astype(np.uint8)


def raw_image(t, encoding, data, step, big_endian=0):
    return T["sensor_msgs/msg/Image"](
        header=header(t, "cam"), height=H, width=W, encoding=encoding, is_bigendian=big_endian,
        step=step, data=np.frombuffer(data, dtype=np.uint8))


def padded(rows, pad):
    return b"".join(bytes(r) + b"\xee" * pad for r in rows)


# Depth: millimetres with holes (0), a run of zeros and a far wall, so RVL's runs and
# deltas are all exercised.
def depth_mm(i):
    d = (np.arange(W * H, dtype=np.uint16) * 37 + 400 + i).reshape(H, W)
    d[0, :3] = 0
    d[2, 5] = 0
    d[H - 1, W - 1] = 65000
    return d


def depth_metres(i):
    mm = depth_mm(i)
    m = np.where(mm == 0, np.float32(0.0), mm.astype(np.float32) / 1000.0 + np.float32(0.0004))
    m[1, 1] = np.nan
    m[1, 2] = np.inf
    m[1, 3] = -1.0
    m[1, 4] = 70.0  # past u16 millimetres: no reading
    return m


def metres_to_mm(m):
    """The documented rule: round to the nearest millimetre; NaN, inf, <= 0 and > 65.535 m are 0."""
    mm = np.round(m.astype(np.float64) * 1000.0)
    ok = np.isfinite(mm) & (mm >= 1) & (mm <= 65535)
    return np.where(ok, mm, 0).astype(np.uint16)


# RVL as compressed_depth_image_transport writes it (RvlCodec::CompressRVL, ported).
def rvl_encode(values):
    words, state = [], {"word": 0, "n": 0}

    def vle(value):
        while True:
            nibble = value & 0x7
            value >>= 3
            if value:
                nibble |= 0x8
            state["word"] = ((state["word"] << 4) | nibble) & 0xFFFFFFFF
            state["n"] += 1
            if state["n"] == 8:
                words.append(state["word"])
                state["word"], state["n"] = 0, 0
            if not value:
                return

    values = [int(v) for v in values]
    i, previous = 0, 0
    while i < len(values):
        zeros = 0
        while i + zeros < len(values) and values[i + zeros] == 0:
            zeros += 1
        vle(zeros)
        i += zeros
        nonzeros = 0
        while i + nonzeros < len(values) and values[i + nonzeros] != 0:
            nonzeros += 1
        vle(nonzeros)
        for v in values[i:i + nonzeros]:
            delta = v - previous
            vle(((delta << 1) ^ (delta >> 31)) & 0xFFFFFFFF)
            previous = v
        i += nonzeros
    if state["n"]:
        words.append((state["word"] << (4 * (8 - state["n"]))) & 0xFFFFFFFF)
    return struct.pack(f"<{len(words)}I", *words)


# compressedDepth's 12-byte ConfigHeader: format, then the inverse-depth parameters.
def depth_header(a=0.0, b=0.0):
    return struct.pack("<iff", 0, a, b)


def png16(values):
    buf = io.BytesIO()
    PilImage.fromarray(values.astype(np.uint16)).save(buf, format="PNG")
    return buf.getvalue()


# 32FC1 compressedDepth: inverse depth quantised as the transport does (depth_quantization
# 100, depth_max 10 m).
QUANT_A = 100.0 * (100.0 + 1.0)
QUANT_B = 1.0 - QUANT_A / 10.0


def inverse_depth(m):
    q = np.zeros(m.shape, np.uint16)
    ok = np.isfinite(m) & (m > 0) & (m < 10.0)
    q[ok] = (np.float32(QUANT_A) / m[ok] + np.float32(QUANT_B)).astype(np.uint16)
    return q


def inverse_to_mm(q):
    m = np.where(q == 0, np.nan, np.float32(QUANT_A) / (q.astype(np.float32) - np.float32(QUANT_B)))
    return metres_to_mm(m.astype(np.float32))


def depth_images(i, t):
    mm, metres = depth_mm(i), depth_metres(i)
    mono_be = padded(mm.astype(">u2").view(np.uint8).reshape(H, -1), 4)
    compressed = lambda fmt, data: T["sensor_msgs/msg/CompressedImage"](
        header=header(t, "depth"), format=fmt, data=np.frombuffer(data, np.uint8))
    return {
        "/camera/depth": raw_image(t, "16UC1", mm.astype("<u2").tobytes(), W * 2),
        "/depth/metres": raw_image(t, "32FC1", metres.astype("<f4").tobytes(), W * 4),
        "/depth/mono16": raw_image(t, "mono16", mono_be, W * 2 + 4, big_endian=1),
        "/depth/png": compressed("16UC1; compressedDepth png", depth_header() + png16(mm)),
        "/depth/rvl": compressed("16UC1; compressedDepth rvl",
                                 depth_header() + struct.pack("<II", W, H) + rvl_encode(mm.reshape(-1))),
        "/depth/inverse": compressed("32FC1; compressedDepth png",
                                     depth_header(QUANT_A, QUANT_B) + png16(inverse_depth(metres))),
    }


def expected_depth(i):
    mm, metres = depth_mm(i), depth_metres(i)
    return {
        "/camera/depth": mm.reshape(-1).tolist(),
        "/depth/metres": metres_to_mm(metres).reshape(-1).tolist(),
        "/depth/mono16": mm.reshape(-1).tolist(),
        "/depth/png": mm.reshape(-1).tolist(),
        "/depth/rvl": mm.reshape(-1).tolist(),
        "/depth/inverse": inverse_to_mm(inverse_depth(metres)).reshape(-1).tolist(),
    }


BAYER_COLOUR = (200, 90, 30)
RGGB = [[0, 1], [1, 2]]


def images(i, t):
    rgb = rgb_frame(i)
    bgra = np.concatenate([rgb[..., ::-1], np.full((H, W, 1), 255, np.uint8)], axis=-1)
    mono = rgb[..., 0]
    yuyv = bytes([126, 128, 126, 128] * (W // 2 * H))
    bayer = np.array([[BAYER_COLOUR[RGGB[y % 2][x % 2]] for x in range(W)] for y in range(H)], np.uint8)
    out = {
        "/camera/rgb": raw_image(t, "rgb8", padded(rgb.reshape(H, -1), 4), W * 3 + 4),
        "/camera/bgra": raw_image(t, "bgra8", bgra.tobytes(), W * 4),
        "/camera/mono": raw_image(t, "mono8", padded(mono, 2), W + 2),
        "/camera/yuyv": raw_image(t, "yuv422_yuy2", yuyv, W * 2),
        "/camera/bayer": raw_image(t, "bayer_rggb8", bayer.tobytes(), W),
        **depth_images(i, t),
    }
    for name, fmt in (("jpeg", "JPEG"), ("png", "PNG")):
        buf = io.BytesIO()
        PilImage.fromarray(rgb).save(buf, format=fmt, quality=95, subsampling=0) if fmt == "JPEG" else PilImage.fromarray(rgb).save(buf, format=fmt)
        out[f"/camera/{name}"] = T["sensor_msgs/msg/CompressedImage"](
            header=header(t, "cam"), format=name, data=np.frombuffer(buf.getvalue(), np.uint8))
    return out


def vec(x, y, z):
    return T["geometry_msgs/msg/Vector3"](x=x, y=y, z=z)


def quat(w=1.0):
    return T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=w)


def transform(t, child, x):
    return T["geometry_msgs/msg/TransformStamped"](
        header=header(t, "world"), child_frame_id=child,
        transform=T["geometry_msgs/msg/Transform"](translation=vec(x, 0.0, 0.0), rotation=quat()))


def layout():
    return T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)


def numeric(i, t):
    f = float(i)
    return {
        "/joint_states": T["sensor_msgs/msg/JointState"](
            header=header(t), name=["shoulder", "elbow"], position=np.array([f, -f]),
            velocity=np.array([0.5, 0.25]), effort=np.array([], dtype=np.float64)),
        "/tf": T["tf2_msgs/msg/TFMessage"](transforms=[transform(t, "base_link", f), transform(t, "/gripper", 2 * f)]),
        "/imu": T["sensor_msgs/msg/Imu"](
            header=header(t), orientation=quat(), orientation_covariance=np.zeros(9),
            angular_velocity=vec(0.1, 0.2, f), angular_velocity_covariance=np.zeros(9),
            linear_acceleration=vec(0.0, 0.0, 9.8), linear_acceleration_covariance=np.zeros(9)),
        "/wrench": T["geometry_msgs/msg/WrenchStamped"](
            header=header(t), wrench=T["geometry_msgs/msg/Wrench"](force=vec(f, 2.0, 3.0), torque=vec(4.0, 5.0, 6.0))),
        "/cmd_vel": T["geometry_msgs/msg/Twist"](linear=vec(f, 0.0, 0.0), angular=vec(0.0, 0.0, 0.5)),
        "/twist": T["geometry_msgs/msg/TwistStamped"](
            header=header(t), twist=T["geometry_msgs/msg/Twist"](linear=vec(1.0, 2.0, 3.0), angular=vec(f, 0.0, 0.0))),
        "/array64": T["std_msgs/msg/Float64MultiArray"](layout=layout(), data=np.array([f, 1.5, -2.0])),
        "/array32": T["std_msgs/msg/Float32MultiArray"](layout=layout(), data=np.array([f, 0.5], dtype=np.float32)),
        "/pose": T["geometry_msgs/msg/PoseStamped"](
            header=header(t, "map"),
            pose=T["geometry_msgs/msg/Pose"](position=T["geometry_msgs/msg/Point"](x=f, y=1.0, z=2.0), orientation=quat())),
        "/battery": T["sensor_msgs/msg/BatteryState"](
            header=header(t), voltage=12.0 - f / 10, temperature=30.0, current=-1.0, charge=1.0, capacity=2.0,
            design_capacity=2.0, percentage=0.5, power_supply_status=2, power_supply_health=1,
            power_supply_technology=3, present=True, cell_voltage=np.array([4.0, 4.1], dtype=np.float32),
            cell_temperature=np.array([25.0, 26.0], dtype=np.float32), location="slot0", serial_number="sn1"),
        "/chatter": T["std_msgs/msg/String"](data=f"hello {i}"),
    }


def write_bag(path, storage, frames, little_endian=True):
    """Writes frames `frames` of the recording; returns the topics' message counts."""
    counts = {}
    with Writer(path, version=9, storage_plugin=storage) as writer:
        connections = {}

        def put(topic, msg, t):
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=TS)
            writer.write(connections[topic], t, TS.serialize_cdr(msg, msg.__msgtype__, little_endian=little_endian))
            counts[topic] = counts.get(topic, 0) + 1

        for i in frames:
            t = START + i * PERIOD
            if i == 0:
                put("/tf_static", T["tf2_msgs/msg/TFMessage"](transforms=[transform(t, "camera_link", 0.25)]), t)
            for topic, msg in {**images(i, t), **numeric(i, t)}.items():
                put(topic, msg, t + 1000)
            if i == 5:
                # A truncated joint state and an image whose step does not fit its bytes:
                # each costs itself, not the topic.
                writer.write(connections["/joint_states"], t + 2000, b"\x00\x01\x00\x00\x05\x00")
                counts["/joint_states"] += 1
                bad = raw_image(t, "rgb8", bytes(W * 3 * H), W * 3 + 9)
                writer.write(connections["/camera/rgb"], t + 2000, TS.serialize_cdr(bad, bad.__msgtype__))
                counts["/camera/rgb"] += 1
    return counts


def expected():
    rgb = [rgb_frame(i).reshape(-1).tolist() for i in (0, 7)]
    return {
        "frames": FRAMES,
        "width": W,
        "height": H,
        "start_ns": START,
        "period_ns": PERIOD,
        "rgb_frame0": rgb[0],
        "rgb_frame7": rgb[1],
        "bayer_colour": list(BAYER_COLOUR),
        "depth_frame3": expected_depth(3),
    }


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    # One recording split in two .db3 files, as rosbag2 does with --max-bag-duration.
    halves = [range(0, FRAMES // 2), range(FRAMES // 2, FRAMES)]
    split = out / "split"
    split.mkdir()
    files = []
    counts = {}
    for n, frames in enumerate(halves):
        part = out / f"part{n}"
        for topic, c in write_bag(part, StoragePlugin.SQLITE3, frames).items():
            counts[topic] = counts.get(topic, 0) + c
        name = f"split_{n}.db3"
        shutil.move(part / f"part{n}.db3", split / name)
        files.append(name)
        meta = (part / "metadata.yaml").read_text()
        shutil.rmtree(part)
    # rosbags' own metadata.yaml, re-pointed at both files.
    lines = []
    skip = False
    for line in meta.splitlines():
        if line.strip().startswith("relative_file_paths:"):
            lines.append(line)
            lines.extend(f"  - {f}" for f in files)
            skip = True
            continue
        if skip and line.strip().startswith("- "):
            continue
        skip = False
        lines.append(line)
    (split / "metadata.yaml").write_text("\n".join(lines) + "\n")
    write_bag(out / "mcap", StoragePlugin.MCAP, range(FRAMES))
    write_bag(out / "mcap_be", StoragePlugin.MCAP, range(FRAMES), little_endian=False)
    exp = expected()
    exp["counts"] = counts
    (out / "expected.json").write_text(json.dumps(exp))


if __name__ == "__main__":
    main()
