"""Writes the Zarr replay buffers Reel's import tests read, with Python `zarr` (an
independent writer) and, for UMI's pictures, `imagecodecs`' JPEG XL codec; and what
`zarr` reads back from them. The suite does not need Python `zarr`: run this once,
commit what it writes.

    python3 -m venv ~/.cache/reel/venv-zarr
    ~/.cache/reel/venv-zarr/bin/pip install zarr==3.1.6 numcodecs==0.16.6 imagecodecs==2026.3.6
    ~/.cache/reel/venv-zarr/bin/python testdata/zarr/make_fixtures.py

Three replay buffers, each a group with `data/<key>` arrays (one row a step) and
`meta/episode_ends` (the step after each episode's last), as Diffusion Policy's and UMI's
`ReplayBuffer` lay them out:

- pusht_v2.zarr: Diffusion Policy's PushT buffer, Zarr v2. `img` float32 pictures (whole
  numbers 0-255, as Diffusion Policy stores them), `state`, `action`, `keypoint` (9x2),
  `n_contacts`; Blosc LZ4 without shuffle (Diffusion Policy's default compressor); chunks
  of 8 steps, so chunks straddle episodes.
- umi_v2.zarr: UMI's buffer, Zarr v2. `camera0_rgb` uint8 pictures, one picture a chunk,
  compressed by imagecodecs' JPEG XL at level 99 (`imagecodecs_jpegxl`, as UMI writes
  them: lossless, modular), `camera1_rgb` the same in lossy JPEG XL (VarDCT, distance 1); `robot0_eef_pos`, `robot0_eef_rot_axis_angle`, `robot0_gripper_width` float32
  and `robot0_demo_start_pose`/`robot0_demo_end_pose` float64, Blosc Zstd with bit
  shuffle (UMI's `disk` compressor). Also zipped, as UMI publishes its datasets
  (umi_v2.zarr.zip, a zarr ZipStore: stored, not deflated).
- generic_v3.zarr: Zarr v3 with odd dtypes and codecs: a uint8 camera (Blosc Zstd), a
  float64 vector (Zstd), a float32 action in shards of 2 chunks, bool, int8 matrices,
  uint16, float16 and int64 values; `meta/episode_ends` Zstd.

Beside each buffer, `<name>.expected.json` (per episode: its steps and every non-picture
array's values, flattened, as `zarr` returns them) and `<name>.<episode>.<camera>.rgb`
(each camera's pictures as `zarr` decodes them, packed 8-bit RGB). Values are seeded
random numbers with many significant digits; pictures smooth colour waves with a moving
blob and noise (the RLDS fixtures' pictures).
"""

import json
import shutil
import zipfile
from pathlib import Path

import imagecodecs.numcodecs
import numcodecs
import numpy as np
import zarr
from zarr.codecs import BloscCodec, BloscShuffle, ZstdCodec

HERE = Path(__file__).resolve().parent
H, W = 32, 48
imagecodecs.numcodecs.register_codecs()


def picture(seed: int, i: int) -> np.ndarray:
    """Smooth colour waves, a soft bright blob moving over them and seeded noise in
    brightness (testdata/rlds/make_fixtures.py's pictures)."""
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
    cx, cy = 8 + (i * 3) % 32, 8 + (i * 2) % 16
    blob = np.exp(-(((x - cx) ** 2 + (y - cy) ** 2) / 12.0))[..., None]
    img = img * (1 - blob) + np.array([230, 200, 40]) * blob
    img += rng.integers(-6, 7, size=(H, W, 1))
    return np.clip(img, 0, 255).astype(np.uint8)


def pictures(seed: int, lengths: list[int]) -> np.ndarray:
    return np.stack(
        [picture(seed + e, i) for e, n in enumerate(lengths) for i in range(n)]
    )


def replay_buffer(path: Path, zarr_format: int):
    shutil.rmtree(path, ignore_errors=True)
    root = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    return root, root.create_group("data"), root.create_group("meta")


def pusht(rng: np.random.Generator):
    lengths = [9, 11, 7]
    n = sum(lengths)
    root, data, meta = replay_buffer(HERE / "pusht_v2.zarr", 2)
    blosc = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.NOSHUFFLE)
    arrays = {
        "img": pictures(1, lengths).astype(np.float32),
        "state": rng.uniform(0, 512, size=(n, 5)).astype(np.float32),
        "action": rng.uniform(0, 512, size=(n, 2)).astype(np.float32),
        "keypoint": rng.uniform(0, 512, size=(n, 9, 2)).astype(np.float32),
        "n_contacts": rng.integers(0, 4, size=(n, 1)).astype(np.float32),
    }
    for key, value in arrays.items():
        array = data.create_array(
            key,
            shape=value.shape,
            chunks=(8,) + value.shape[1:],
            dtype=value.dtype,
            compressors=blosc,
        )
        array[:] = value
    ends = meta.create_array(
        "episode_ends", shape=(3,), chunks=(3,), dtype=np.int64, compressors=blosc
    )
    ends[:] = np.cumsum(lengths)
    return "pusht_v2.zarr", ["img"]


def umi(rng: np.random.Generator):
    lengths = [6, 8, 5]
    n = sum(lengths)
    root, data, meta = replay_buffer(HERE / "umi_v2.zarr", 2)
    disk = numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE)
    rgb = data.create_array(
        "camera0_rgb",
        shape=(n, H, W, 3),
        chunks=(1, H, W, 3),
        dtype=np.uint8,
        compressors=imagecodecs.numcodecs.Jpegxl(level=99, numthreads=1),
    )
    rgb[:] = pictures(11, lengths)
    # A second camera in lossy JPEG XL (VarDCT), the mode UMI's level alone does not pick.
    lossy = data.create_array(
        "camera1_rgb",
        shape=(n, H, W, 3),
        chunks=(1, H, W, 3),
        dtype=np.uint8,
        compressors=imagecodecs.numcodecs.Jpegxl(lossless=False, distance=1.0, numthreads=1),
    )
    lossy[:] = pictures(31, lengths)
    lowdim = {
        "robot0_eef_pos": rng.normal(size=(n, 3)).astype(np.float32),
        "robot0_eef_rot_axis_angle": rng.normal(size=(n, 3)).astype(np.float32),
        "robot0_gripper_width": rng.uniform(0, 0.08, size=(n, 1)).astype(np.float32),
        "robot0_demo_start_pose": np.repeat(rng.normal(size=(3, 6)), lengths, axis=0),
        "robot0_demo_end_pose": np.repeat(rng.normal(size=(3, 6)), lengths, axis=0),
    }
    for key, value in lowdim.items():
        array = data.create_array(
            key, shape=value.shape, chunks=value.shape, dtype=value.dtype, compressors=disk
        )
        array[:] = value
    ends = meta.create_array("episode_ends", shape=(3,), chunks=(3,), dtype=np.int64)
    ends[:] = np.cumsum(lengths)
    # A zarr ZipStore, as UMI ships `<dataset>.zarr.zip`: every key a stored member.
    zipped = HERE / "umi_v2.zarr.zip"
    zipped.unlink(missing_ok=True)
    with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_STORED) as z:
        for file in sorted((HERE / "umi_v2.zarr").rglob("*")):
            if file.is_file():
                z.write(file, file.relative_to(HERE / "umi_v2.zarr").as_posix())
    return "umi_v2.zarr", ["camera0_rgb", "camera1_rgb"]


def generic(rng: np.random.Generator):
    lengths = [5, 4]
    n = sum(lengths)
    root, data, meta = replay_buffer(HERE / "generic_v3.zarr", 3)
    zstd = ZstdCodec(level=3)
    arrays = [
        ("camera", pictures(21, lengths), (3, H, W, 3), None,
         BloscCodec(cname="zstd", clevel=5, shuffle=BloscShuffle.bitshuffle)),
        ("joint", rng.normal(size=(n, 7)), (4, 7), None, zstd),
        ("action", rng.normal(size=(n, 4)).astype(np.float32), (2, 4), (4, 4), zstd),
        ("flags", rng.integers(0, 2, size=(n, 2)).astype(bool), (n, 2), None, zstd),
        ("grid", rng.integers(-128, 128, size=(n, 3, 2)).astype(np.int8), (4, 3, 2), None, zstd),
        ("ticks", rng.integers(0, 65536, size=(n, 4)).astype(np.uint16), (4, 4), None, zstd),
        ("half", rng.normal(size=(n, 2)).astype(np.float16), (4, 2), None, zstd),
        # Whole numbers f64 holds exactly (below 2^53) but far above 2^32.
        ("stamp", rng.integers(2**40, 2**52, size=(n,)).astype(np.int64), (4,), None, zstd),
    ]
    for key, value, chunks, shards, codec in arrays:
        array = data.create_array(
            key,
            shape=value.shape,
            chunks=chunks,
            shards=shards,
            dtype=value.dtype,
            compressors=codec,
        )
        array[:] = value
    ends = meta.create_array(
        "episode_ends", shape=(2,), chunks=(2,), dtype=np.int64, compressors=zstd
    )
    ends[:] = np.cumsum(lengths)
    return "generic_v3.zarr", ["camera"]


def values(value: np.ndarray) -> list:
    if value.dtype == np.bool_:
        return [bool(v) for v in value.reshape(-1)]
    if value.dtype.kind in "iu":
        return [int(v) for v in value.reshape(-1)]
    return [float(v) for v in value.reshape(-1)]


def record(name: str, cameras: list[str]):
    """What `zarr` reads from the buffer, episode by episode."""
    stem = name.removesuffix(".zarr")
    for old in HERE.glob(f"{stem}.*.rgb"):
        old.unlink()
    root = zarr.open_group(str(HERE / name), mode="r")
    ends = root["meta/episode_ends"][:]
    starts = np.concatenate([[0], ends[:-1]])
    episodes = []
    for e, (start, end) in enumerate(zip(starts, ends)):
        steps = {}
        for key in sorted(root["data"].array_keys()):
            rows = root["data"][key][start:end]
            if key in cameras:
                with open(HERE / f"{stem}.{e}.{key}.rgb", "wb") as f:
                    f.write(np.ascontiguousarray(rows.astype(np.uint8)).tobytes())
                continue
            steps[key] = values(rows)
        episodes.append({"steps": int(end - start), "values": steps})
    (HERE / f"{stem}.expected.json").write_text(
        json.dumps({"episodes": episodes}, indent=1) + "\n"
    )


def main():
    rng = np.random.default_rng(20261207)
    for write in (pusht, umi, generic):
        name, cameras = write(rng)
        record(name, cameras)
        print(name, sorted(p.name for p in (HERE / name).rglob("*") if p.is_file())[:6], "...")


if __name__ == "__main__":
    main()
