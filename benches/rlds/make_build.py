"""A DROID-shaped RLDS build of any size, written by TensorFlow Datasets, for
benches/rlds/run.sh: three 180x320 JPEG cameras (DROID's resolution), DROID's state and
action features, three language instructions, `episode_metadata`.

    make_build.py OUT_DIR EPISODES STEPS SHARDS

Writes OUT_DIR/droid_bench/1.0.0/. Pictures are a moving gradient with noise (JPEG
sizes near a camera's); values seeded random numbers.
"""

import sys

import numpy as np
import tensorflow_datasets as tfds

F = tfds.features
H, W = 180, 320
CAMERAS = ["exterior_image_1_left", "exterior_image_2_left", "wrist_image_left"]
OUT, EPISODES, STEPS, SHARDS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def picture(seed: int, i: int, rng) -> np.ndarray:
    y, x = np.mgrid[0:H, 0:W]
    img = np.stack([(x + i * 3 + seed * 40) % 256, (y * 2 + i) % 256, (x + y + seed * 70) % 256], axis=-1)
    img = img + rng.integers(-8, 9, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


class DroidBench(tfds.core.GeneratorBasedBuilder):
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
                                    **{c: F.Image(shape=(H, W, 3), dtype=np.uint8, encoding_format="jpeg") for c in CAMERAS},
                                    "cartesian_position": vec(6),
                                    "gripper_position": vec(1),
                                    "joint_position": vec(7),
                                }
                            ),
                            "action_dict": F.FeaturesDict(
                                {"cartesian_velocity": vec(6), "gripper_position": vec(1), "joint_velocity": vec(7)}
                            ),
                            "action": vec(7),
                            "is_first": F.Scalar(dtype=np.bool_),
                            "is_last": F.Scalar(dtype=np.bool_),
                            "is_terminal": F.Scalar(dtype=np.bool_),
                            "reward": F.Scalar(dtype=np.float32),
                            "discount": F.Scalar(dtype=np.float32),
                            "language_instruction": F.Text(),
                            "language_instruction_2": F.Text(),
                            "language_instruction_3": F.Text(),
                        }
                    ),
                    "episode_metadata": F.FeaturesDict({"file_path": F.Text(), "recording_folderpath": F.Text()}),
                }
            ),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        for e in range(EPISODES):
            rng = np.random.default_rng(e)
            steps = []
            for i in range(STEPS):
                steps.append(
                    {
                        "observation": {
                            **{c: picture(e * 3 + k, i, rng) for k, c in enumerate(CAMERAS)},
                            "cartesian_position": rng.standard_normal(6),
                            "gripper_position": rng.random(1),
                            "joint_position": rng.standard_normal(7),
                        },
                        "action_dict": {
                            "cartesian_velocity": rng.standard_normal(6),
                            "gripper_position": rng.random(1),
                            "joint_velocity": rng.standard_normal(7),
                        },
                        "action": rng.standard_normal(7),
                        "is_first": i == 0,
                        "is_last": i == STEPS - 1,
                        "is_terminal": i == STEPS - 1,
                        "reward": np.float32(i == STEPS - 1),
                        "discount": np.float32(1),
                        "language_instruction": f"put the marker in the cup {e % 7}",
                        "language_instruction_2": "place the marker in the cup",
                        "language_instruction_3": "",
                    }
                )
            yield f"episode_{e}", {
                "steps": steps,
                "episode_metadata": {"file_path": f"/droid/{e}/trajectory.h5", "recording_folderpath": f"/droid/{e}/MP4"},
            }


builder = DroidBench(data_dir=OUT)
builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=SHARDS))
