#!/usr/bin/env python3
"""A small PyTorch policy trained on Reel's batches, resumable under reel-supervise.

The policy maps the latest joint state and each camera's latest frame (pooled to 8×6)
to the action chunk; it trains with AdamW on ``reel.torch.ReelDataset`` batches. Every
``--checkpoint-every`` steps it saves the model, the optimizer and the loader's state as
one Reel checkpoint (atomic, checksummed: what reel-supervise verifies), and it writes
the heartbeat file reel-supervise watches after every step. Restarted, it resumes from
``REEL_RESUME_STEP`` (set by reel-supervise) or the newest checkpoint: the same batches
an uninterrupted run would have seen next. The checkpoint keeps every rank's loader
state, so a run restarted on fewer (or more) nodes goes on with the rest of its epoch.

    python examples/train_torch.py --manifest train.arrow --spec testdata/spec.toml \\
        --store store/ --checkpoints ckpt/ --steps 200
    torchrun --nproc-per-node 8 examples/train_torch.py ...   # one shard per rank (DDP)

The last line on stdout is a JSON summary: steps, final loss, the step it resumed from,
samples per second.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader

import reel
from reel.torch import ReelDataset


class Policy(nn.Module):
    def __init__(self, state_dim: int, cameras: int, action_steps: int, action_dim: int):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((6, 8))
        inputs = state_dim + cameras * 3 * 6 * 8
        self.net = nn.Sequential(nn.Linear(inputs, 256), nn.GELU(), nn.Linear(256, action_steps * action_dim))
        self.action_shape = (action_steps, action_dim)

    def forward(self, state: torch.Tensor, frames: list[torch.Tensor]) -> torch.Tensor:
        pooled = [self.pool(f.float() / 255.0).flatten(1) for f in frames]  # [B, 3*6*8] each
        x = torch.cat([state, *pooled], dim=1)
        return self.net(x).view(-1, *self.action_shape)


def latest_frames(batch: dict, cameras: list[str]) -> list[torch.Tensor]:
    # Reel's default layout is [B, T, H, W, 3]; the policy takes the newest frame, CHW.
    return [batch[c][:, -1].permute(0, 3, 1, 2) for c in cameras]


def loader_states(dataset) -> list[dict]:
    """Every rank's loader state, in rank order: what a restart on any number of ranks
    resumes from (each state alone only serves a world of the same size)."""
    mine = dataset.state_dict()
    if not dist.is_initialized():
        return [mine]
    states: list = [None] * dist.get_world_size()
    dist.all_gather_object(states, mine)
    return states


def save(root: pathlib.Path, step: int, model, optimizer, states: list[dict]) -> None:
    weights = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, weights)
    reel.save_checkpoint(root, step, {
        "model.pt": weights.getvalue(),
        "loader.json": json.dumps(states).encode(),
        "step.json": json.dumps({"step": step}).encode(),
    })


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--cache")
    parser.add_argument("--checkpoints", required=True, type=pathlib.Path)
    parser.add_argument("--heartbeat", type=pathlib.Path, default=os.environ.get("REEL_HEARTBEAT_FILE"))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--checkpoint-every", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(args.seed)

    dataset = ReelDataset(args.manifest, args.spec, args.store, args.cache, batch_size=args.batch_size,
                          workers=args.workers, seed=args.seed, pin_memory=device.type == "cuda")
    # The first batch tells the shapes.
    probe = next(iter(dataset))
    cameras = [k for k, v in probe.items() if v.dtype == torch.uint8 and v.dim() == 5]
    state_dim = probe["state"].shape[-1]
    action_steps, action_dim = probe["action"].shape[1:]
    model = Policy(state_dim, len(cameras), action_steps, action_dim).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    # Ranks step in lockstep (DDP): rank 0 saves every rank's loader state, and every
    # rank resumes from the list, on this world whatever its size was (a restart on
    # fewer nodes delivers the rest of the epoch, each sample once).
    ckpt_root = args.checkpoints
    step, resumed_from = 0, None
    latest = reel.latest_checkpoint(ckpt_root)
    wanted = os.environ.get("REEL_RESUME_STEP")
    if latest is not None and (wanted is None or int(wanted) <= latest[0]):
        step, files = latest
        saved = torch.load(io.BytesIO(files["model.pt"]), map_location=device)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        dataset.load_state_dict(json.loads(files["loader.json"]))
        resumed_from = step
    else:
        dataset.set_epoch(0)
    trained = model if world == 1 else nn.parallel.DistributedDataParallel(model)

    started, samples, loss_value = time.perf_counter(), 0, float("nan")
    while step < args.steps:
        for batch in DataLoader(dataset, batch_size=None, num_workers=0):
            state = batch["state"][:, -1].to(device, non_blocking=True)
            frames = [f.to(device, non_blocking=True) for f in latest_frames(batch, cameras)]
            target = batch["action"].to(device, non_blocking=True)
            mask = batch["action.mask"].to(device, non_blocking=True).unsqueeze(-1).float()
            loss = (((trained(state, frames) - target) ** 2) * mask).sum() / mask.sum().clamp(min=1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            samples += target.shape[0]
            loss_value = float(loss.detach())
            if args.heartbeat:
                args.heartbeat.write_text(f"{step}\n")
            if step % args.checkpoint_every == 0 or step == args.steps:
                states = loader_states(dataset)  # every rank takes part
                if rank == 0:
                    save(ckpt_root, step, model, optimizer, states)
            if step >= args.steps:
                break
    seconds = time.perf_counter() - started
    print(json.dumps({"steps": step, "loss": loss_value, "resumed_from": resumed_from,
                      "samples_per_s": samples / max(seconds, 1e-9), "rank": rank, "world": world}))
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
