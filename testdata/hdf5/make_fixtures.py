"""Writes the HDF5 episodes Reel's import tests read, with h5py (an independent writer).

    ~/.cache/reel/venv-lerobot/bin/python testdata/hdf5/make_fixtures.py   # needs h5py, Pillow

- aloha_raw.hdf5: the ALOHA layout as its simulation recorder writes it (`act`'s
  record_sim_episodes.py): root attr `sim`, `/observations/images/<cam>` (T, H, W, 3)
  uint8, `/observations/qpos`, `qvel` (T, 14) float64, `/action` (T, 14).
- aloha_jpeg.hdf5: the real-robot recorder's compressed form (record_episodes.py with
  compression): root attr `compress`, each camera (T, padded) uint8 of JPEG bytes padded
  with zeros, `/compress_len` (cameras, T), plus `/observations/effort`.
- robomimic.hdf5: two demos, `data/demo_N/obs/{agentview_image, robot0_joint_pos,
  robot0_eef_pos}`, `actions`, `rewards`, `dones`, `states`; `data` attr `env_args`
  (JSON, control_freq 20) and `total`.
- aloha_no_action.hdf5: the raw ALOHA file without `/action`: an import must refuse it
  by name.
- custom.hdf5: a layout of neither, for the TOML mapping in custom.toml: episodes
  `episodes/ep_N`, each with `joints` (T, 3) float32, `gripper_command` (T,) float64 and
  `wrist_rgb` (T, H, W, 3) uint8.

Values are seeded random numbers with many significant digits; pictures a moving pattern.
Beside each file, what an import must reproduce, written by numpy and Pillow:
`<stem>.expected.json` (its numeric datasets, by path, as lists) and
`<stem>.<camera>.rgb` (each camera's pictures, packed RGB: as stored, or as Pillow decodes
the stored JPEG).
"""

import io
import json
from pathlib import Path

import h5py
import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
T, H, W = 20, 24, 32
CAMERAS = ["top", "angle"]


def picture(camera: int, i: int) -> np.ndarray:
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    base = np.stack([90 + 3 * x, 80 + 4 * y, 140 - 2 * x], axis=-1)
    base += 30 * np.sin((x + 2 * y + 2 * i + 5 * camera) * 0.4)[..., None]
    cx, cy = 4 + i, 6 + (i % 7)
    blob = np.exp(-(((x - cx) ** 2 + (y - cy) ** 2) / 8.0))[..., None]
    return np.clip(base * (1 - blob) + np.array([220, 160, 60]) * blob, 0, 255).astype(np.uint8)


def expect(path: Path, values: dict, pictures: dict) -> None:
    (path.parent / f"{path.stem}.expected.json").write_text(
        json.dumps({k: v.tolist() for k, v in values.items()})
    )
    for camera, frames in pictures.items():
        (path.parent / f"{path.stem}.{camera}.rgb").write_bytes(np.ascontiguousarray(frames).tobytes())


def aloha(path: Path, compress: bool, with_action: bool = True) -> None:
    rng = np.random.default_rng(11)
    values, shown = {}, {}
    with h5py.File(path, "w") as root:
        root.attrs["sim"] = not compress
        if compress:
            root.attrs["compress"] = True
        obs = root.create_group("observations")
        images = obs.create_group("images")
        if compress:
            encoded = []
            for c, _ in enumerate(CAMERAS):
                row = []
                for i in range(T):
                    out = io.BytesIO()
                    Image.fromarray(picture(c, i)).save(out, format="JPEG", quality=90)
                    row.append(np.frombuffer(out.getvalue(), dtype=np.uint8))
                encoded.append(row)
            for c, name in enumerate(CAMERAS):
                shown[name] = np.stack(
                    [np.asarray(Image.open(io.BytesIO(b.tobytes())).convert("RGB")) for b in encoded[c]]
                )
            padded = max(len(b) for row in encoded for b in row)
            for c, name in enumerate(CAMERAS):
                data = np.zeros((T, padded), dtype=np.uint8)
                for i, b in enumerate(encoded[c]):
                    data[i, : len(b)] = b
                images.create_dataset(name, data=data)
            root.create_dataset("compress_len", data=np.array([[len(b) for b in row] for row in encoded]))
        else:
            for c, name in enumerate(CAMERAS):
                shown[name] = np.stack([picture(c, i) for i in range(T)])
                images.create_dataset(name, data=shown[name], chunks=(1, H, W, 3))
        values["/observations/qpos"] = rng.normal(size=(T, 14))
        values["/observations/qvel"] = rng.normal(size=(T, 14))
        if compress:
            values["/observations/effort"] = rng.normal(size=(T, 14))
        if with_action:
            values["/action"] = rng.normal(size=(T, 14))
        for key, v in values.items():
            root.create_dataset(key.lstrip("/"), data=v)
    if with_action:
        expect(path, values, shown)


def robomimic(path: Path) -> None:
    rng = np.random.default_rng(5)
    values, shown = {}, {}
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        total = 0
        for d, length in enumerate([15, 9]):
            demo = data.create_group(f"demo_{d}")
            demo.attrs["num_samples"] = length
            obs = demo.create_group("obs")
            shown[f"demo_{d}"] = np.stack([picture(d, i) for i in range(length)])
            obs.create_dataset("agentview_image", data=shown[f"demo_{d}"])
            obs.create_dataset("robot0_joint_pos", data=rng.normal(size=(length, 7)))
            obs.create_dataset("robot0_eef_pos", data=rng.normal(size=(length, 3)))
            values[f"/data/demo_{d}/actions"] = rng.uniform(-1, 1, size=(length, 7))
            demo.create_dataset("actions", data=values[f"/data/demo_{d}/actions"])
            demo.create_dataset("rewards", data=(np.arange(length) == length - 1).astype(np.float64))
            demo.create_dataset("dones", data=(np.arange(length) == length - 1).astype(np.int64))
            demo.create_dataset("states", data=rng.normal(size=(length, 10)))
            total += length
        data.attrs["total"] = total
        data.attrs["env_args"] = json.dumps(
            {"env_name": "Lift", "type": 1, "env_kwargs": {"control_freq": 20, "robots": ["Panda"]}}
        )
    expect(path, values, shown)


def custom(path: Path) -> None:
    rng = np.random.default_rng(3)
    values, shown = {}, {}
    with h5py.File(path, "w") as f:
        for e, length in enumerate([8, 11]):
            group = f.create_group(f"episodes/ep_{e}")
            values[f"/episodes/ep_{e}/joints"] = rng.normal(size=(length, 3)).astype(np.float32)
            values[f"/episodes/ep_{e}/gripper_command"] = rng.uniform(0, 1, size=length)
            group.create_dataset("joints", data=values[f"/episodes/ep_{e}/joints"])
            group.create_dataset("gripper_command", data=values[f"/episodes/ep_{e}/gripper_command"])
            shown[f"ep_{e}"] = np.stack([picture(e, i) for i in range(length)])
            group.create_dataset("wrist_rgb", data=shown[f"ep_{e}"])
    expect(path, values, shown)


def main() -> None:
    aloha(HERE / "aloha_raw.hdf5", compress=False)
    aloha(HERE / "aloha_jpeg.hdf5", compress=True)
    aloha(HERE / "aloha_no_action.hdf5", compress=False, with_action=False)
    robomimic(HERE / "robomimic.hdf5")
    custom(HERE / "custom.hdf5")
    for p in sorted(HERE.glob("*.hdf5")) + sorted(HERE.glob("*.rgb")):
        print(p.name, p.stat().st_size)


if __name__ == "__main__":
    main()
