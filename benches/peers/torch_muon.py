#!/usr/bin/env python3
"""Peer benchmark for reel-muon: one torch.optim.Muon step over the hidden matrices of the small
transformer in testdata/shapes-small.toml, on CPU, as shipped (Newton–Schulz in bf16) and with
Newton–Schulz in f32. Prints JSON lines shaped like `cargo bench -p reel-muon --bench muon_step`.

Outside CI. Needs PyTorch >= 2.9 (torch.optim.Muon):
    python3 -m venv ~/.cache/reel/venv-peers && ~/.cache/reel/venv-peers/bin/pip install torch
    ~/.cache/reel/venv-peers/bin/python benches/peers/torch_muon.py --threads 2
"""
import argparse
import json
import pathlib
import statistics
import time
import tomllib

import torch
import torch.optim._muon as muon_impl

ROOT = pathlib.Path(__file__).resolve().parents[2]


def hidden_shapes(path):
    doc = tomllib.loads(path.read_text())
    shapes = []
    for p in doc["param"]:
        if p["kind"] == "muon":
            shapes += [tuple(p["shape"])] * p.get("repeat", 1)
    return doc["name"], shapes


def zeropower_f32(grad, ns_coefficients, ns_steps, eps):
    """torch's _zeropower_via_newtonschulz with the bf16 cast removed."""
    a, b, c = ns_coefficients
    x = grad.float()
    if grad.size(0) > grad.size(1):
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        update = torch.addmm(gram, gram, gram, beta=b, alpha=c)
        x = torch.addmm(x, update, x, beta=a)
    if grad.size(0) > grad.size(1):
        x = x.T
    return x


def ns_flops(m, n):
    m, n = min(m, n), max(m, n)
    return 5 * (4 * m * m * n + 2 * m ** 3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    name, shapes = hidden_shapes(ROOT / "testdata" / "shapes-small.toml")
    flops = sum(ns_flops(*s) for s in shapes)
    shipped = muon_impl._zeropower_via_newtonschulz
    for precision, fn in [("bf16", shipped), ("f32", zeropower_f32)]:
        muon_impl._zeropower_via_newtonschulz = fn
        gen = torch.Generator().manual_seed(0)
        params = [torch.nn.Parameter(torch.randn(*s, generator=gen)) for s in shapes]
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        opt = torch.optim.Muon(params, lr=0.02)
        opt.step()
        times = []
        for _ in range(args.reps):
            start = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        print(json.dumps({"bench": "torch_muon_step", "model": name, "matrices": len(shapes),
                          "newton_schulz": precision, "threads": args.threads, "torch": torch.__version__,
                          "ms": seconds * 1e3, "gflops_dense_count": flops / seconds / 1e9}), flush=True)
    muon_impl._zeropower_via_newtonschulz = shipped


if __name__ == "__main__":
    main()
