"""Weighted mixtures of manifests: reel.Loader and ReelDataset given (manifest, weight)
pairs deliver each source's share of every epoch, name each sample's source, and keep
checked, resumable state."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.ipc
import pytest

import reel
from conftest import reel_bin, run


@pytest.fixture(scope="module")
def one_episode(store) -> Path:
    """A second manifest over the same store: its first episode alone."""
    path = store["root"] / "first-episode.arrow"
    if not path.exists():
        run(reel_bin("reel-curate"), "--warehouse", str(store["dir"]), "--sql",
            "SELECT * FROM episodes ORDER BY episode_id LIMIT 1", "-o", str(path),
            "--anchor-hz", "10", "--before", "1.0", "--after", "0.98")
    return path


def sourced(batches) -> list[tuple[int, int, int]]:
    return [(int(k), int(r), int(a)) for b in batches
            for k, r, a in zip(b["source"], b["episode_row"], b["anchor_ns"])]


def test_each_source_fills_its_weight_s_share(store, one_episode):
    mix = [(store["manifest"], 1), (Path(one_episode), 3.0)]
    loader = reel.Loader(mix, store["spec"], store["dir"], batch_size=5, shuffle="global", seed=3)
    assert loader.num_sources == 2
    shares = [loader.source_share(k) for k in range(2)]
    assert sum(s for s, _ in shares) == loader.total_samples == sum(n for _, n in shares)
    assert abs(shares[1][0] - 0.75 * loader.total_samples) <= 1
    ids = [pyarrow.ipc.open_file(str(p)).read_all().column("episode_id").to_pylist()
           for p in (store["manifest"], one_episode)]
    for epoch in range(2):
        samples = sourced(loader)
        counts = Counter(k for k, _, _ in samples)
        assert [counts[0], counts[1]] == [s for s, _ in shares], f"epoch {epoch}"
        # The small source is cycled: its one episode gives each sample three times over.
        assert all(loader.episode_id(r, k) == ids[k][r] for k, r, _ in samples)
        assert len(set(a for k, _, a in samples if k == 1)) < counts[1]
    assert loader.epoch == 2
    state = json.loads(json.dumps(loader.state_dict()))
    assert state["run"]["manifest"].startswith("mixture(xxh3_128:")
    other = reel.Loader([(store["manifest"], 1), (one_episode, 1)], store["spec"], store["dir"],
                        batch_size=5, shuffle="global", seed=3)
    with pytest.raises(reel.BadInputError, match="manifest is"):
        other.load_state_dict(state)


def test_the_lerobot_layout_names_each_sample_s_source_and_task(store, one_episode):
    mix = [(store["manifest"], 0.5), (one_episode, 0.5)]
    batch = next(iter(reel.Loader(mix, store["spec"], store["dir"], batch_size=8,
                                  shuffle="global", seed=1, layout="lerobot")))
    assert set(batch["source"].tolist()) <= {0, 1}
    assert len(batch["task"]) == 8 and all(batch["task"])
    assert (batch["timestamp"] >= 0).all()


@pytest.mark.parametrize("bad", [[("m.arrow", 0)], [("m.arrow", -1.0)], [("m.arrow",)], [],
                                 [("m.arrow", True)], 7])
def test_a_mixture_that_is_not_one_is_refused(store, bad):
    with pytest.raises(reel.BadInputError, match="positive weights"):
        reel.Loader(bad, store["spec"], store["dir"])


def test_reel_dataset_takes_a_mixture(store, one_episode):
    import torch.utils.data

    from reel.torch import ReelDataset

    mix = [(store["manifest"], 0.25), (one_episode, 0.75)]
    dataset = ReelDataset(mix, store["spec"], store["dir"], rank=0, world=1, batch_size=4,
                          shuffle="global", seed=2)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=1,
                                         multiprocessing_context="spawn")
    counts = Counter(int(k) for b in loader for k in b["source"])
    direct = reel.Loader(mix, store["spec"], store["dir"], batch_size=4, shuffle="global", seed=2)
    assert [counts[0], counts[1]] == [direct.source_share(k)[0] for k in range(2)]


def test_each_source_may_name_its_own_store(store, one_episode, tmp_path):
    elsewhere = tmp_path / "elsewhere.arrow"
    elsewhere.write_bytes(Path(one_episode).read_bytes())
    mix = [(store["manifest"], 1.0, store["dir"]), (elsewhere, 1.0, Path(store["dir"]))]
    loader = reel.Loader(mix, store["spec"], batch_size=4, shuffle="global", seed=5)
    assert Counter(k for k, _, _ in sourced(loader)) == {
        k: loader.source_share(k)[0] for k in range(2)
    }
    # Without its store, the copy's episodes are looked for beside it, and are not there.
    with pytest.raises(reel.ReelError):
        reel.Loader([(store["manifest"], 1.0, store["dir"]), (elsewhere, 1.0)], store["spec"])
    with pytest.raises(reel.BadInputError, match="positive weights"):
        reel.Loader([(elsewhere, 1.0, 7)], store["spec"])
