"""Writes the LeRobot v2.1 dataset Reel's import tests read, with LeRobot 0.3.3 itself, the
last release that writes format v2.1 (one Parquet file and one MP4 per episode,
meta/episodes.jsonl, meta/tasks.jsonl, meta/episodes_stats.jsonl).

LeRobot 0.3.3 runs in LeRobot 0.6.1's venv (benches/peers/README.md) from a folder of its
own, its dependencies being those of 0.6.1:

    ~/.cache/reel/venv-lerobot/bin/pip install --no-deps --target /tmp/lerobot-0.3.3 lerobot==0.3.3
    PYTHONPATH=/tmp/lerobot-0.3.3 ~/.cache/reel/venv-lerobot/bin/python testdata/lerobot/make_fixtures_v21.py

    pusht_v21   the frames, values and tasks of pusht_av1 (make_fixtures.py), written by
                LeRobot 0.3.3 at its defaults (SVT-AV1, GOP 2, CRF 30)

Beside it, `pusht_v21.decoded.rgb` holds LeRobot 0.3.3's own decode of every frame.
"""

import shutil
from pathlib import Path

import numpy as np

from make_fixtures import FPS, LENGTHS, TASKS, frame, fresh, pusht_features

HERE = Path(__file__).resolve().parent


def main() -> None:
    import lerobot
    from lerobot.datasets.lerobot_dataset import CODEBASE_VERSION, LeRobotDataset

    assert CODEBASE_VERSION == "v2.1", f"{lerobot.__file__} writes {CODEBASE_VERSION}"
    name = "pusht_v21"
    root = fresh(name)
    features = pusht_features("video")
    dataset = LeRobotDataset.create(
        repo_id=f"reel/{name}", fps=FPS, features=features, root=root,
        robot_type="pusht-sim", use_videos=True,
    )
    rng = np.random.default_rng(7)  # as make_fixtures.py: the same values as pusht_av1
    for episode, length in enumerate(LENGTHS):
        for i in range(length):
            dataset.add_frame(
                {
                    "observation.images.cam": frame(episode, i),
                    "observation.state": rng.normal(size=3).astype(np.float32) / 3.0,
                    "action": rng.normal(size=2).astype(np.float32) / 7.0,
                },
                task=TASKS[episode],
            )
        dataset.save_episode()
    shutil.rmtree(root / "images", ignore_errors=True)

    # LeRobot's own decode of its videos (datasets 4, which 0.6.1 brings, no longer reads
    # back through 0.3.3's LeRobotDataset; its video decoding is unchanged).
    from lerobot.datasets.video_utils import decode_video_frames

    decoded = HERE / f"{name}.decoded.rgb"
    frames = 0
    with open(decoded, "wb") as out:
        for episode, length in enumerate(LENGTHS):
            video = root / f"videos/chunk-000/observation.images.cam/episode_{episode:06d}.mp4"
            images = decode_video_frames(video, [i / FPS for i in range(length)], 1e-4, "torchcodec")
            for image in images:  # C, H, W float in [0, 1]
                rgb = (image.numpy().transpose(1, 2, 0) * 255).round().astype(np.uint8)
                out.write(np.ascontiguousarray(rgb).tobytes())
                frames += 1
    print(f"{root}: {frames} frames, {decoded.name} {decoded.stat().st_size} bytes")


if __name__ == "__main__":
    main()
