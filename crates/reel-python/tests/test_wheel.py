"""The package as users install it: scripts/wheel.sh builds one abi3 wheel, plain pip puts
it into a fresh venv, and it loads batches there with no Rust toolchain on the PATH and no
source tree to import from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

LOAD = """
import sys
import reel
loader = reel.Loader(sys.argv[1], sys.argv[2], sys.argv[3], batch_size=2, workers=1,
                     shuffle="global", seed=1)
batch = next(iter(loader))
assert batch["cam_high"].shape[:2] == (2, 2), batch["cam_high"].shape
assert batch["action"].shape[:2] == (2, 10), batch["action"].shape
print(reel.__file__)
"""


def test_the_wheel_installs_with_pip_into_a_fresh_venv_and_loads_a_batch(store, tmp_path):
    # The test suite's own (unoptimised) build, packed the way a release wheel is.
    built = subprocess.run(
        [str(REPO / "scripts" / "wheel.sh"), str(tmp_path / "dist")],
        env={**os.environ, "REEL_WHEEL_PROFILE": "dev"},
        check=True, capture_output=True, text=True,
    )
    wheel = Path(built.stdout.strip().splitlines()[-1])
    assert wheel.name.startswith("reel-") and "abi3" in wheel.name, wheel

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet",
                    "--disable-pip-version-check", str(wheel)], check=True)
    # No cargo or rustc on the PATH, and run from elsewhere than the source tree.
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": os.environ["HOME"]}
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", LOAD, str(store["manifest"]), str(store["spec"]),
         str(store["dir"])],
        env=env, cwd=tmp_path, check=True, capture_output=True, text=True,
    )
    assert done.stdout.strip().startswith(str(venv)), done.stdout
