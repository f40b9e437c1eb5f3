"""LeRobot's own conversion of Reel's canonical episodes into a LeRobot v3.0 dataset, the
way a LeRobot user writes one (`LeRobotDataset.create`, `add_frame`, `save_episode`,
`finalize`; benches/peers/lerobot_load.py's `build_dataset`), at LeRobot's default
encoding. Prints the CPU seconds of the conversion (this process and its children).

    lerobot_convert.py --canonical DIR --episodes NAMES.json -o DATASET
"""

import argparse
import json
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "peers"))
from lerobot_load import build_dataset  # noqa: E402


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--canonical", type=Path, required=True)
    parser.add_argument("--episodes", type=Path, required=True)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    from lerobot.configs import RGBEncoderConfig

    paths = [args.canonical / name for name in json.loads(args.episodes.read_text())]
    before = cpu_seconds()
    info = build_dataset(paths, args.output, RGBEncoderConfig())
    print(json.dumps({"cpu_s": cpu_seconds() - before, "frames": info["frames"]}))


if __name__ == "__main__":
    main()
