"""LeRobot's own view of a dataset `reel-export lerobot` wrote: it opens, every frame
iterates, a policy trains on it. With --source (the LeRobot dataset the episodes were
imported from), the two agree: episodes, lengths, tasks, features, state and action
exactly, frames near LeRobot's decode of the source. Prints one JSON line of what it saw;
exits non-zero when a check fails.

    python check_export.py EXPORTED [--source DATASET] [--min-psnr DB] [--train-steps N]
"""

import argparse
import json
import math
import sys

import torch
from lerobot.configs.types import FeatureType
from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.factory import make_pre_post_processors
from lerobot.utils.feature_utils import dataset_to_policy_features

BOOKKEEPING = {"timestamp", "frame_index", "episode_index", "index", "task_index"}


def fail(message):
    print(json.dumps({"failed": message}))
    sys.exit(1)


def psnr(a, b):
    mse = torch.mean((a.double() - b.double()) ** 2).item()
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


def compare_with_source(exported, source, min_psnr):
    a, b = exported.meta, source.meta
    if a.total_episodes != b.total_episodes or a.total_frames != b.total_frames:
        fail(f"{a.total_episodes} episodes / {a.total_frames} frames, source {b.total_episodes} / {b.total_frames}")
    if list(a.episodes["length"]) != list(b.episodes["length"]):
        fail(f"lengths {list(a.episodes['length'])}, source {list(b.episodes['length'])}")
    if list(a.episodes["tasks"]) != list(b.episodes["tasks"]):
        fail(f"tasks {list(a.episodes['tasks'])}, source {list(b.episodes['tasks'])}")
    if a.fps != b.fps:
        fail(f"fps {a.fps}, source {b.fps}")
    for key, feature in b.features.items():
        mine = a.features.get(key)
        if mine is None:
            fail(f"feature {key} missing")
        for field in ("dtype", "shape", "names"):
            if mine[field] != feature[field]:
                fail(f"{key}.{field} is {mine[field]}, source {feature[field]}")
    if set(a.features) != set(b.features):
        fail(f"features {sorted(a.features)}, source {sorted(b.features)}")
    worst = math.inf
    numeric = [k for k, f in b.features.items() if f["dtype"] not in ("video", "image", "string") and k not in BOOKKEEPING]
    videos = [k for k, f in b.features.items() if f["dtype"] == "video"]
    for i in range(len(source)):
        x, y = exported[i], source[i]
        for key in numeric + ["episode_index", "frame_index"]:
            if not torch.equal(x[key], y[key]):
                fail(f"frame {i}: {key} is {x[key].tolist()}, source {y[key].tolist()}")
        if x["task"] != y["task"]:
            fail(f"frame {i}: task {x['task']!r}, source {y['task']!r}")
        for key in videos:
            worst = min(worst, psnr(x[key], y[key]))
    if worst < min_psnr:
        fail(f"frames {worst:.2f} dB from LeRobot's decode of the source, below {min_psnr}")
    return worst


def train(root, steps):
    meta = LeRobotDatasetMetadata("reel/export", root=root)
    features = dataset_to_policy_features(meta.features)
    outputs = {k: f for k, f in features.items() if f.type is FeatureType.ACTION}
    inputs = {k: f for k, f in features.items() if k not in outputs}
    config = ACTConfig(
        input_features=inputs, output_features=outputs, chunk_size=4, n_action_steps=4,
        pretrained_backbone_weights=None, device="cpu", dim_model=64, n_heads=2,
        dim_feedforward=128, n_encoder_layers=1, n_decoder_layers=1, use_vae=False,
    )
    torch.manual_seed(0)
    policy = ACTPolicy(config)
    preprocess, _ = make_pre_post_processors(config, dataset_stats=meta.stats)
    dataset = LeRobotDataset(
        "reel/export", root=root, delta_timestamps={"action": [i / meta.fps for i in range(4)]}
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, shuffle=True)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    losses = []
    while len(losses) < steps:
        for batch in loader:
            loss, _ = policy.forward(preprocess(batch))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == steps:
                break
    if not all(math.isfinite(l) for l in losses):
        fail(f"training losses {losses}")
    return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("exported")
    parser.add_argument("--source")
    parser.add_argument("--min-psnr", type=float, default=30.0)
    parser.add_argument("--train-steps", type=int, default=4)
    args = parser.parse_args()
    exported = LeRobotDataset("reel/export", root=args.exported)
    frames = 0
    for i in range(len(exported)):
        item = exported[i]
        frames += 1
        if item["frame_index"].item() != i - exported.meta.episodes["dataset_from_index"][item["episode_index"].item()]:
            fail(f"frame {i}: frame_index {item['frame_index'].item()}")
    seen = {
        "episodes": exported.meta.total_episodes,
        "frames": frames,
        "fps": exported.meta.fps,
        "lengths": list(exported.meta.episodes["length"]),
        "tasks": [list(t) for t in exported.meta.episodes["tasks"]],
        "features": sorted(exported.meta.features),
        "video_codecs": sorted({f["info"]["video.codec"] for f in exported.meta.features.values() if f["dtype"] == "video"}),
    }
    if args.source:
        source = LeRobotDataset("reel/source", root=args.source)
        seen["min_psnr_db"] = compare_with_source(exported, source, args.min_psnr)
    seen["losses"] = train(args.exported, args.train_steps)
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
