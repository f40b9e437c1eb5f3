"""Writes the LeRobot datasets Reel's import tests read, with LeRobot itself.

    ~/.cache/reel/venv-lerobot/bin/python testdata/lerobot/make_fixtures.py

(LeRobot 0.6.1 from PyPI, Python >= 3.12: benches/peers/README.md makes that venv.)
Each dataset is written by `LeRobotDataset.create` / `add_frame` / `save_episode` /
`finalize`: 3 episodes of different lengths and tasks at 10 fps, one 64x48 camera with a
moving pattern, a 3-value state and a 2-value action of float32 values with many
significant digits. Beside each dataset, `<name>.decoded.rgb` holds LeRobot's own decode of every
frame (`LeRobotDataset[i]`, uint8 HWC, frames of all episodes in order, raw bytes), the
reference the import tests compare Reel's frames against.

    pusht_h264   H.264, GOP 2 (RGBEncoderConfig(vcodec="h264"))
    pusht_av1    LeRobot's defaults: SVT-AV1, GOP 2, CRF 30
    pusht_depth  2 episodes of 6 frames: the camera in H.264 and a depth camera at LeRobot's
                 depth defaults (HEVC Main 12, gray12le, lossless, log-quantised 0.01-10 m);
                 `pusht_depth.decoded.depth` holds LeRobot's decode of every depth frame in
                 millimetres (uint16 little-endian, H x W per frame)
    pusht_images 2 episodes of 5 frames, the camera as an image feature (PNG in the frame
                 rows, `use_videos=False`); `pusht_images.decoded.rgb` holds LeRobot's decode

    python make_fixtures.py [NAME ...]   (all by default)
"""

import shutil
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FPS = 10
LENGTHS = [12, 7, 15]
TASKS = ["push the T", "push the T", "reach the block"]
WIDTH, HEIGHT = 64, 48


def frame(episode: int, i: int) -> np.ndarray:
    """A camera-like picture: a lit table (luma texture, gently varying colour) and a soft
    coloured block moving across it. Colour varies smoothly, as in camera footage; the
    detail is in brightness."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    texture = 40 * np.sin((x + 2 * y + 3 * i + 7 * episode) * 0.35)
    base = np.stack([110 + 0.6 * x, 100 + 0.8 * y, 120 - 0.3 * x], axis=-1) + texture[..., None]
    cx, cy = 8 + 3 * i + 5 * episode, 10 + 2 * i
    blob = np.exp(-(((x - cx) ** 2 + (y - cy) ** 2) / (2 * 5.0**2)))[..., None]
    img = base * (1 - blob) + np.array([200, 150, 70]) * blob
    return np.clip(img, 0, 255).astype(np.uint8)


def fresh(name: str) -> Path:
    """The dataset's folder, emptied."""
    root = HERE / name
    if root.exists():
        shutil.rmtree(root)
    return root


def pusht_features(camera_dtype: str) -> dict:
    """One 64x48 camera (`video` or `image`), a 3-value state and a 2-value action."""
    return {
        "observation.images.cam": {
            "dtype": camera_dtype,
            "shape": (HEIGHT, WIDTH, 3),
            "names": ["height", "width", "channels"],
        },
        "observation.state": {"dtype": "float32", "shape": (3,), "names": ["x", "y", "theta"]},
        "action": {"dtype": "float32", "shape": (2,), "names": ["vx", "vy"]},
    }


def depth_frame(episode: int, i: int) -> np.ndarray:
    """A depth picture in millimetres: a slanted plane 0.4-2 m away that moves with time."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    return (400 + 20 * x + 7 * y + 30 * i + 50 * episode).astype(np.uint16)[..., None]


def write_depth(name: str) -> None:
    from lerobot.configs import RGBEncoderConfig
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    root = fresh(name)
    features = pusht_features("video")
    features["observation.images.depth"] = {
        "dtype": "video",
        "shape": (HEIGHT, WIDTH, 1),
        "names": ["height", "width", "channels"],
        "info": {"is_depth_map": True},
    }
    dataset = LeRobotDataset.create(
        repo_id=f"reel/{name}", fps=FPS, features=features, root=root, robot_type="pusht-sim",
        use_videos=True, rgb_encoder=RGBEncoderConfig(vcodec="h264"),
    )
    rng = np.random.default_rng(11)
    for episode in range(2):
        for i in range(6):
            dataset.add_frame(
                {
                    "observation.images.cam": frame(episode, i),
                    "observation.images.depth": depth_frame(episode, i),
                    "observation.state": rng.normal(size=3).astype(np.float32),
                    "action": rng.normal(size=2).astype(np.float32),
                    "task": "stack",
                }
            )
        dataset.save_episode(parallel_encoding=False)
    dataset.finalize()
    reread = LeRobotDataset(f"reel/{name}", root=root)
    decoded = root.parent / f"{name}.decoded.depth"
    with open(decoded, "wb") as out:
        for i in range(len(reread)):
            depth = reread[i]["observation.images.depth"]  # 1, H, W float32 mm
            out.write(depth.numpy().astype("<u2").tobytes())
    print(f"{root}: {len(reread)} frames, {decoded.name} {decoded.stat().st_size} bytes")


def write_images(name: str) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    root = fresh(name)
    features = pusht_features("image")
    dataset = LeRobotDataset.create(
        repo_id=f"reel/{name}", fps=FPS, features=features, root=root, robot_type="pusht-sim",
        use_videos=False,
    )
    rng = np.random.default_rng(13)
    for episode in range(2):
        for i in range(5):
            dataset.add_frame(
                {
                    "observation.images.cam": frame(episode, i),
                    "observation.state": rng.normal(size=3).astype(np.float32),
                    "action": rng.normal(size=2).astype(np.float32),
                    "task": "push the T",
                }
            )
        dataset.save_episode()
    dataset.finalize()
    shutil.rmtree(root / "images", ignore_errors=True)
    reread = LeRobotDataset(f"reel/{name}", root=root, return_uint8=True)
    decoded = root.parent / f"{name}.decoded.rgb"
    with open(decoded, "wb") as out:
        for i in range(len(reread)):
            image = reread[i]["observation.images.cam"]  # C, H, W
            if image.dtype.is_floating_point:
                image = (image * 255).round().to(dtype=__import__("torch").uint8)
            out.write(np.ascontiguousarray(image.numpy().transpose(1, 2, 0)).tobytes())
    print(f"{root}: {len(reread)} frames, {decoded.name} {decoded.stat().st_size} bytes")


def write(name: str, encoder) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    root = fresh(name)
    features = pusht_features("video")
    dataset = LeRobotDataset.create(
        repo_id=f"reel/{name}",
        fps=FPS,
        features=features,
        root=root,
        robot_type="pusht-sim",
        use_videos=True,
        rgb_encoder=encoder,
    )
    rng = np.random.default_rng(7)
    for episode, length in enumerate(LENGTHS):
        for i in range(length):
            dataset.add_frame(
                {
                    "observation.images.cam": frame(episode, i),
                    "observation.state": rng.normal(size=3).astype(np.float32) / 3.0,
                    "action": rng.normal(size=2).astype(np.float32) / 7.0,
                    "task": TASKS[episode],
                }
            )
        dataset.save_episode(parallel_encoding=False)
    dataset.finalize()
    shutil.rmtree(root / "images", ignore_errors=True)

    # LeRobot's own decode of its video: the frames its users train on.
    reread = LeRobotDataset(f"reel/{name}", root=root, return_uint8=True)
    decoded = root.parent / f"{name}.decoded.rgb"
    with open(decoded, "wb") as out:
        for i in range(len(reread)):
            image = reread[i]["observation.images.cam"]  # C, H, W uint8
            out.write(np.ascontiguousarray(image.numpy().transpose(1, 2, 0)).tobytes())
    print(f"{root}: {len(reread)} frames, {decoded.name} {decoded.stat().st_size} bytes")


def main() -> None:
    from lerobot.configs import RGBEncoderConfig

    names = sys.argv[1:] or ["pusht_h264", "pusht_av1", "pusht_depth", "pusht_images"]
    if "pusht_h264" in names:
        write("pusht_h264", RGBEncoderConfig(vcodec="h264"))
    if "pusht_av1" in names:
        write("pusht_av1", RGBEncoderConfig())
    if "pusht_depth" in names:
        write_depth("pusht_depth")
    if "pusht_images" in names:
        write_images("pusht_images")


if __name__ == "__main__":
    main()
