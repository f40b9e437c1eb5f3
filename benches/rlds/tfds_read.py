"""TFDS's own reader over an RLDS build, for benches/rlds/run.sh: iterates every episode
and every step as a training input pipeline would (`tfds.builder_from_directory(...)
.as_dataset()`, numpy out), pictures decoded (TFDS's default) or left as JPEG bytes
(`--skip-decoding`, what Reel's import reads). Prints one JSON line: episodes, steps.

    tfds_read.py BUILD_DIR [--skip-decoding]
"""

import json
import sys

import tensorflow_datasets as tfds

builder = tfds.builder_from_directory(sys.argv[1])
decoders = None
if "--skip-decoding" in sys.argv:
    steps = builder.info.features["steps"]
    images = [k for k, f in steps["observation"].items() if isinstance(f, tfds.features.Image)]
    decoders = {"steps": {"observation": {k: tfds.decode.SkipDecoding() for k in images}}}
dataset = builder.as_dataset(split="train", shuffle_files=False, decoders=decoders)
episodes = steps_seen = 0
for episode in tfds.as_numpy(dataset):
    for step in episode["steps"]:
        steps_seen += 1
    episodes += 1
print(json.dumps({"episodes": episodes, "steps": steps_seen}))
