"""Reads every episode of a replay buffer with Python `zarr` as a training input pipeline
does (Diffusion Policy's `ReplayBuffer`: each `data/` array sliced by `meta/episode_ends`,
decoded into NumPy), for benches/zarr/run.sh. Prints {"episodes": N, "steps": S}."""

import json
import sys

import imagecodecs.numcodecs
import numpy as np
import zarr

imagecodecs.numcodecs.register_codecs()
root = zarr.open_group(sys.argv[1], mode="r")
ends = root["meta/episode_ends"][:]
arrays = [root["data"][k] for k in sorted(root["data"].array_keys())]
start, steps, values = 0, 0, 0
for end in ends:
    for array in arrays:
        rows: np.ndarray = array[start:end]
        values += rows.size
    steps += int(end - start)
    start = end
print(json.dumps({"episodes": len(ends), "steps": steps, "values": values}))
