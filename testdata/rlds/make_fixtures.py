"""Writes the RLDS datasets Reel's import tests read, with TensorFlow Datasets itself (an
independent writer), and what TFDS reads back from them. The suite does not need
TensorFlow: run this once, commit what it writes.

    python3 -m venv ~/.cache/reel/venv-tfds
    ~/.cache/reel/venv-tfds/bin/pip install tensorflow-cpu==2.21.0 tensorflow-datasets==4.9.10
    ~/.cache/reel/venv-tfds/bin/python testdata/rlds/make_fixtures.py

Three builds, each a `GeneratorBasedBuilder` prepared into `<name>/1.0.0/` as TFDS lays
a build out (`dataset_info.json`, `features.json`, `<name>-train.tfrecord-NNNNN-of-NNNNN`):

- droid_mini: DROID's RLDS features (three cameras as JPEG, joint, cartesian and gripper
  state, `action_dict`, the 7-value `action`, three language instructions, `reward`,
  `discount`, `is_first`/`is_last`/`is_terminal`, `episode_metadata` with `file_path`
  and `recording_folderpath`), float64 as DROID declares them; two shards.
- bridge_mini: BridgeData V2's (`image_0`..`image_3` as JPEG, `image_1`..`image_3`
  black where the episode has no such camera, as Bridge's converter writes them,
  float32 `state` and `action`, `language_instruction`, `episode_metadata` with
  `has_image_N`, `has_language`, `episode_id`).
- generic_mini: odd dtypes and encodings in nested features (int8 matrices, bool
  vectors, uint16, float16, uint64, a PNG camera, a `ClassLabel`, a float32 tensor
  with `encoding='zlib'` and a float64 one with `encoding='bytes'`, a `Text` per step,
  episode metadata of several dtypes).

Beside each build, what TFDS's own reader (`builder.as_dataset(shuffle_files=False)`)
returns: `<name>.expected.json` (per episode: every numeric feature of every step,
flattened by feature path, texts, metadata) and `<name>.<episode>.<camera>.rgb` (each
camera's pictures as TFDS decodes them, packed RGB). Values are seeded random numbers
with many significant digits; pictures smooth colour waves with a moving blob and noise.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import tensorflow_datasets as tfds

HERE = Path(__file__).resolve().parent
H, W = 32, 48
F = tfds.features


def picture(seed: int, i: int) -> np.ndarray:
    """Smooth colour waves, a soft bright blob moving over them and seeded noise in
    brightness: a camera's content at a small size (hard colour edges are what 4:2:0
    video loses by design, and cameras rarely have them)."""
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    rng = np.random.default_rng(seed * 1000 + i)
    img = np.stack(
        [
            128 + 70 * np.sin((x + i * 2 + seed * 7) / 9.0),
            128 + 70 * np.sin((y + i) / 7.0 + seed),
            128 + 60 * np.cos((x + y) / 11.0 + seed * 0.5),
        ],
        axis=-1,
    )
    cx, cy = 8 + (i * 3) % 32, 8 + (i * 2) % 16
    blob = np.exp(-(((x - cx) ** 2 + (y - cy) ** 2) / 12.0))[..., None]
    img = img * (1 - blob) + np.array([230, 200, 40]) * blob
    img += rng.integers(-6, 7, size=(H, W, 1))
    return np.clip(img, 0, 255).astype(np.uint8)


def rlds_flags(steps: int, i: int) -> dict:
    return {
        "is_first": i == 0,
        "is_last": i == steps - 1,
        "is_terminal": i == steps - 1,
        "reward": np.float32(1.0 if i == steps - 1 else 0.0),
        "discount": np.float32(1.0),
    }


def rlds_flag_features() -> dict:
    return {
        "is_first": F.Scalar(dtype=np.bool_),
        "is_last": F.Scalar(dtype=np.bool_),
        "is_terminal": F.Scalar(dtype=np.bool_),
        "reward": F.Scalar(dtype=np.float32),
        "discount": F.Scalar(dtype=np.float32),
    }


DROID_CAMERAS = ["exterior_image_1_left", "exterior_image_2_left", "wrist_image_left"]
DROID_STEPS = [10, 7, 8]


class DroidMini(tfds.core.GeneratorBasedBuilder):
    """DROID's RLDS layout (droid_100 / droid 1.0.0), at a small size."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        vec = lambda n: F.Tensor(shape=(n,), dtype=np.float64)  # noqa: E731
        return tfds.core.DatasetInfo(
            builder=self,
            features=F.FeaturesDict(
                {
                    "steps": F.Dataset(
                        {
                            "observation": F.FeaturesDict(
                                {
                                    **{
                                        c: F.Image(shape=(H, W, 3), dtype=np.uint8, encoding_format="jpeg")
                                        for c in DROID_CAMERAS
                                    },
                                    "cartesian_position": vec(6),
                                    "gripper_position": vec(1),
                                    "joint_position": vec(7),
                                }
                            ),
                            "action_dict": F.FeaturesDict(
                                {
                                    "cartesian_position": vec(6),
                                    "cartesian_velocity": vec(6),
                                    "gripper_position": vec(1),
                                    "gripper_velocity": vec(1),
                                    "joint_position": vec(7),
                                    "joint_velocity": vec(7),
                                }
                            ),
                            "action": vec(7),
                            **rlds_flag_features(),
                            "language_instruction": F.Text(),
                            "language_instruction_2": F.Text(),
                            "language_instruction_3": F.Text(),
                        }
                    ),
                    "episode_metadata": F.FeaturesDict(
                        {"file_path": F.Text(), "recording_folderpath": F.Text()}
                    ),
                }
            ),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        for e, steps in enumerate(DROID_STEPS):
            rng = np.random.default_rng(10 + e)
            out = []
            for i in range(steps):
                out.append(
                    {
                        "observation": {
                            **{c: picture(e * 3 + k, i) for k, c in enumerate(DROID_CAMERAS)},
                            "cartesian_position": rng.standard_normal(6),
                            "gripper_position": rng.random(1),
                            "joint_position": rng.standard_normal(7),
                        },
                        "action_dict": {
                            "cartesian_position": rng.standard_normal(6),
                            "cartesian_velocity": rng.standard_normal(6),
                            "gripper_position": rng.random(1),
                            "gripper_velocity": rng.standard_normal(1),
                            "joint_position": rng.standard_normal(7),
                            "joint_velocity": rng.standard_normal(7),
                        },
                        "action": rng.standard_normal(7),
                        **rlds_flags(steps, i),
                        "language_instruction": f"put the marker in the cup {e}",
                        "language_instruction_2": f"place the marker inside cup {e}",
                        "language_instruction_3": "" if e == 1 else f"marker into cup {e}",
                    }
                )
            yield f"episode_{e}", {
                "steps": out,
                "episode_metadata": {
                    "file_path": f"/data/droid/success/2023-07-0{e + 1}/trajectory.h5",
                    "recording_folderpath": f"/data/droid/success/2023-07-0{e + 1}/recordings/MP4",
                },
            }


BRIDGE_STEPS = [6, 9, 5]
BRIDGE_HAS = [4, 2, 1]  # cameras each episode has


class BridgeMini(tfds.core.GeneratorBasedBuilder):
    """BridgeData V2's RLDS layout (bridge_dataset 1.0.0), at a small size."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        image = F.Image(shape=(H, W, 3), dtype=np.uint8, encoding_format="jpeg")
        return tfds.core.DatasetInfo(
            builder=self,
            features=F.FeaturesDict(
                {
                    "steps": F.Dataset(
                        {
                            "observation": F.FeaturesDict(
                                {
                                    **{f"image_{k}": image for k in range(4)},
                                    "state": F.Tensor(shape=(7,), dtype=np.float32),
                                }
                            ),
                            "action": F.Tensor(shape=(7,), dtype=np.float32),
                            **rlds_flag_features(),
                            "language_instruction": F.Text(),
                        }
                    ),
                    "episode_metadata": F.FeaturesDict(
                        {
                            "file_path": F.Text(),
                            "episode_id": F.Scalar(dtype=np.int32),
                            "has_language": F.Scalar(dtype=np.bool_),
                            **{f"has_image_{k}": F.Scalar(dtype=np.bool_) for k in range(4)},
                        }
                    ),
                }
            ),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        black = np.zeros((H, W, 3), np.uint8)
        for e, (steps, has) in enumerate(zip(BRIDGE_STEPS, BRIDGE_HAS)):
            rng = np.random.default_rng(20 + e)
            out = []
            for i in range(steps):
                out.append(
                    {
                        "observation": {
                            **{
                                f"image_{k}": picture(40 + e * 4 + k, i) if k < has else black
                                for k in range(4)
                            },
                            "state": rng.standard_normal(7).astype(np.float32),
                        },
                        "action": rng.standard_normal(7).astype(np.float32),
                        **rlds_flags(steps, i),
                        "language_instruction": "" if e == 2 else f"put the spoon in pot {e}",
                    }
                )
            yield f"ep{e}", {
                "steps": out,
                "episode_metadata": {
                    "file_path": f"/bridge/raw/toykitchen{e}/traj{e}",
                    "episode_id": 100 + e,
                    "has_language": e != 2,
                    **{f"has_image_{k}": k < has for k in range(4)},
                },
            }


GENERIC_STEPS = [5, 7]


class GenericMini(tfds.core.GeneratorBasedBuilder):
    """Nested features, odd dtypes and encodings, a PNG camera."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=F.FeaturesDict(
                {
                    "steps": F.Dataset(
                        {
                            "observation": F.FeaturesDict(
                                {
                                    "arm": F.FeaturesDict(
                                        {
                                            "torques": F.Tensor(shape=(2, 3), dtype=np.int8),
                                            "contacts": F.Tensor(shape=(3,), dtype=np.bool_),
                                        }
                                    ),
                                    "ticks": F.Tensor(shape=(2,), dtype=np.uint16),
                                    "half": F.Tensor(shape=(2,), dtype=np.float16),
                                    "counter": F.Scalar(dtype=np.uint64),
                                    "camera": F.Image(shape=(H, W, 3), dtype=np.uint8, encoding_format="png"),
                                }
                            ),
                            "action": F.Tensor(shape=(3,), dtype=np.float32),
                            "packed": F.Tensor(shape=(4,), dtype=np.float32, encoding="zlib"),
                            "exact": F.Tensor(shape=(2,), dtype=np.float64, encoding="bytes"),
                            "phase": F.ClassLabel(names=["reach", "grasp", "lift"]),
                            **rlds_flag_features(),
                            "note": F.Text(),
                        }
                    ),
                    "episode_metadata": F.FeaturesDict(
                        {
                            "operator": F.Text(),
                            "success": F.Scalar(dtype=np.bool_),
                            "seed": F.Scalar(dtype=np.int64),
                            "temperature": F.Scalar(dtype=np.float32),
                        }
                    ),
                }
            ),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        for e, steps in enumerate(GENERIC_STEPS):
            rng = np.random.default_rng(30 + e)
            out = []
            for i in range(steps):
                out.append(
                    {
                        "observation": {
                            "arm": {
                                "torques": rng.integers(-128, 128, (2, 3)).astype(np.int8),
                                "contacts": rng.random(3) < 0.5,
                            },
                            "ticks": rng.integers(0, 65536, 2).astype(np.uint16),
                            "half": rng.standard_normal(2).astype(np.float16),
                            "counter": np.uint64(2**40 + 1000 * e + i),
                            "camera": picture(60 + e, i),
                        },
                        "action": rng.standard_normal(3).astype(np.float32),
                        "packed": rng.standard_normal(4).astype(np.float32),
                        "exact": rng.standard_normal(2),
                        "phase": i % 3,
                        **rlds_flags(steps, i),
                        "note": f"step {i} of episode {e}",
                    }
                )
            yield f"g{e}", {
                "steps": out,
                "episode_metadata": {
                    "operator": "ada" if e == 0 else "grace",
                    "success": e == 0,
                    "seed": 1234567890123 + e,
                    "temperature": np.float32(21.5 + e),
                },
            }


def flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        path = f"{prefix}/{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flat(v, path))
        else:
            out[path] = v
    return out


def jsonable(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    value = np.asarray(value)
    if value.dtype == np.bool_:
        return [bool(v) for v in value.reshape(-1)]
    if value.dtype.kind in "iu":
        return [int(v) for v in value.reshape(-1)]
    return [float(v) for v in value.reshape(-1)]


def record(builder, name: str, cameras: list[str]):
    """What TFDS's reader returns for every episode, beside the build."""
    for old in HERE.glob(f"{name}.*.rgb"):
        old.unlink()
    episodes = []
    dataset = builder.as_dataset(split="train", shuffle_files=False)
    for e, episode in enumerate(tfds.as_numpy(dataset)):
        steps = list(episode["steps"])
        values: dict[str, list] = {}
        metadata = flat(episode["episode_metadata"])
        for step in steps:
            for path, value in flat(step).items():
                if path.split("/")[-1] in cameras:
                    # Bridge's absent cameras (black) are not imported: no reference.
                    if not metadata.get(f"has_{path.split('/')[-1]}", True):
                        continue
                    with open(HERE / f"{name}.{e}.{path.split('/')[-1]}.rgb", "ab") as f:
                        f.write(np.ascontiguousarray(value).tobytes())
                    continue
                values.setdefault(path, []).append(jsonable(value))
        episodes.append(
            {
                "steps": len(steps),
                "values": values,
                "metadata": {k: jsonable(v) for k, v in metadata.items()},
            }
        )
    (HERE / f"{name}.expected.json").write_text(json.dumps({"episodes": episodes}, indent=1) + "\n")


def main():
    builds = [
        (DroidMini, "droid_mini", DROID_CAMERAS, 2),
        (BridgeMini, "bridge_mini", [f"image_{k}" for k in range(4)], 1),
        (GenericMini, "generic_mini", ["camera"], 1),
    ]
    for cls, name, cameras, shards in builds:
        shutil.rmtree(HERE / name, ignore_errors=True)
        builder = cls(data_dir=str(HERE))
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(num_shards=shards)
        )
        record(builder, name, cameras)
        # Only the build as TFDS lays it out; the dataset's own cache files are not.
        for extra in (HERE / name).rglob("*.lock"):
            extra.unlink()
        shutil.rmtree(HERE / "downloads", ignore_errors=True)
        print(name, sorted(p.name for p in (HERE / name / "1.0.0").iterdir()))


if __name__ == "__main__":
    main()
