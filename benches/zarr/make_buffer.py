"""Writes a replay buffer for benches/zarr/run.sh with Python `zarr`, laid out as UMI or
Diffusion Policy write theirs (see testdata/zarr/make_fixtures.py for the layouts):

    make_buffer.py OUT.zarr umi|pusht EPISODES STEPS

- umi: `camera0_rgb` 96x96 uint8 pictures, one a chunk, lossless JPEG XL through
  imagecodecs (UMI's codec and level); eef position, rotation, gripper width (float32)
  and demo start/end poses (float64), Blosc Zstd with bit shuffle.
- pusht: `img` 96x96 float32 pictures (whole numbers 0-255), `state`, `action`,
  `keypoint`, `n_contacts`, Blosc LZ4, chunks of 161 steps as Diffusion Policy's PushT
  buffer has them.
Pictures: smooth colour waves with a moving blob and noise.
"""

import shutil
import sys
from pathlib import Path

import imagecodecs.numcodecs
import numcodecs
import numpy as np
import zarr

imagecodecs.numcodecs.register_codecs()
H = W = 96


def picture(seed: int, i: int) -> np.ndarray:
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
    cx, cy = 8 + (i * 3) % 80, 8 + (i * 2) % 80
    blob = np.exp(-(((x - cx) ** 2 + (y - cy) ** 2) / 40.0))[..., None]
    img = img * (1 - blob) + np.array([230, 200, 40]) * blob
    img += rng.integers(-6, 7, size=(H, W, 1))
    return np.clip(img, 0, 255).astype(np.uint8)


def main():
    out, layout, episodes, steps = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    shutil.rmtree(out, ignore_errors=True)
    root = zarr.open_group(str(out), mode="w", zarr_format=2)
    data, meta = root.create_group("data"), root.create_group("meta")
    n = episodes * steps
    rng = np.random.default_rng(7)
    if layout == "umi":
        camera = data.create_array(
            "camera0_rgb", shape=(n, H, W, 3), chunks=(1, H, W, 3), dtype=np.uint8,
            compressors=imagecodecs.numcodecs.Jpegxl(level=99, numthreads=1),
        )
        lowdim = {
            "robot0_eef_pos": (np.float32, 3),
            "robot0_eef_rot_axis_angle": (np.float32, 3),
            "robot0_gripper_width": (np.float32, 1),
            "robot0_demo_start_pose": (np.float64, 6),
            "robot0_demo_end_pose": (np.float64, 6),
        }
        compressor = numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE)
        chunk = n
    else:
        camera = data.create_array(
            "img", shape=(n, H, W, 3), chunks=(161, H, W, 3), dtype=np.float32,
            compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.NOSHUFFLE),
        )
        lowdim = {
            "state": (np.float32, 5),
            "action": (np.float32, 2),
            "keypoint": (np.float32, 18),
            "n_contacts": (np.float32, 1),
        }
        compressor = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.NOSHUFFLE)
        chunk = 161
    for e in range(episodes):
        pics = np.stack([picture(e, i) for i in range(steps)])
        camera[e * steps:(e + 1) * steps] = pics.astype(camera.dtype)
    for key, (dtype, width) in lowdim.items():
        array = data.create_array(
            key, shape=(n, width), chunks=(chunk, width), dtype=dtype, compressors=compressor
        )
        array[:] = rng.normal(size=(n, width)).astype(dtype)
    ends = meta.create_array("episode_ends", shape=(episodes,), chunks=(episodes,), dtype=np.int64)
    ends[:] = np.arange(1, episodes + 1) * steps


if __name__ == "__main__":
    main()
