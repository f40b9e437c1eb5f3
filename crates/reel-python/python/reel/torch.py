"""``reel.torch.ReelDataset``: Reel's loader as a ``torch.utils.data.IterableDataset``.

Meant for ``DataLoader(dataset, batch_size=None, num_workers=0)``: Reel's own threads
build the batches (``workers=``), so PyTorch needs no worker processes, and exact resume
(:meth:`ReelDataset.state_dict`) holds. With ``num_workers > 0`` each DataLoader worker
reads a disjoint sub-shard of the rank's shard (no sample twice, every sample once per
epoch). Under the ``fork`` start method (Linux's default) each worker opens its own
loader after the fork, so no threads or file handles cross it; ``spawn`` and
``forkserver`` work the same way and start faster with large parent processes.
"""

from __future__ import annotations

import os
from typing import Any, Iterator, Mapping

import numpy as np
import torch
import torch.utils.data

from ._loader import Loader


def _rank_and_world() -> tuple[int, int]:
    """This process's rank and world: torch.distributed when initialised, else the
    ``RANK``/``WORLD_SIZE`` that torchrun sets, else a single process."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def to_tensors(batch: Mapping[str, Any]) -> dict[str, Any]:
    """Each NumPy array as a tensor sharing its memory (``torch.from_numpy``); other
    values (LeRobot's ``task`` strings) as they are."""
    return {
        k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in batch.items()
    }


class ReelDataset(torch.utils.data.IterableDataset):
    """Batches of Reel's loader as dicts of tensors (no copy: they share Reel's buffers).

    Takes :class:`reel.Loader`'s arguments; ``rank`` and ``world`` default to
    torch.distributed's (or ``RANK``/``WORLD_SIZE``). With ``with_meta=True`` each batch
    also carries its epoch, index and skipped samples under ``"_epoch"``, ``"_index"``
    and ``"_skipped"``.

    ``pin_memory=True`` allocates the batch buffers page-locked on the rank's GPU
    (``LOCAL_RANK``) where CUDA is present, so ``tensor.to(device, non_blocking=True)``
    copies asynchronously; without CUDA they stay pageable.
    """

    def __init__(
        self,
        manifest,
        spec,
        store=None,
        cache=None,
        *,
        rank: int | None = None,
        world: int | None = None,
        with_meta: bool = False,
        **options: Any,
    ):
        super().__init__()
        if rank is None or world is None:
            detected = _rank_and_world()
            rank = detected[0] if rank is None else rank
            world = detected[1] if world is None else world
        self._args = (manifest, spec, store, cache)
        self._options = options
        self._rank, self._world = rank, world
        self._with_meta = with_meta
        self._epoch = 0
        self._resume: dict[str, Any] | None = None
        self._loader: Loader | None = None
        self._loader_key: tuple[int, int] | None = None

    def _shard(self) -> tuple[int, int]:
        """(rank, world) of this process, split further among DataLoader workers."""
        info = torch.utils.data.get_worker_info()
        if info is None:
            return self._rank, self._world
        return self._rank * info.num_workers + info.id, self._world * info.num_workers

    def _open(self, shard: tuple[int, int]) -> Loader:
        """The loader of ``shard``, made once (in each DataLoader worker, after a fork)."""
        if self._loader is None or self._loader_key != shard:
            rank, world = shard
            manifest, spec, store, cache = self._args
            self._loader = Loader(manifest, spec, store, cache, rank=rank, world=world, **self._options)
            self._loader_key = shard
        return self._loader

    def __iter__(self) -> Iterator[dict[str, Any]]:
        loader = self._open(self._shard())
        if self._resume is not None:
            loader.load_state_dict(self._resume)
            self._resume = None
        else:
            loader.set_epoch(self._epoch)
        for batch in loader:
            tensors = to_tensors(batch)
            if self._with_meta:
                tensors["_epoch"] = batch.epoch
                tensors["_index"] = batch.index
                tensors["_skipped"] = batch.skipped
            yield tensors
        self._epoch = loader.epoch

    def __len__(self) -> int:
        """Batches of the current epoch on this rank (all DataLoader workers together)."""
        loader = self._open((self._rank, self._world))
        loader.set_epoch(self._epoch)
        return len(loader)

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration epoch ``epoch``."""
        self._epoch = int(epoch)
        self._resume = None

    def state_dict(self) -> dict[str, Any]:
        """Where the run stands (with ``num_workers=0``): save it with the model."""
        if self._loader is None:
            return {"epoch": self._epoch, "batch": 0}
        return self._loader.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """The next iteration resumes at ``state``: exactly the batches an uninterrupted
        run delivers after it (with ``num_workers=0``)."""
        self._resume = dict(state)
        self._epoch = int(state["epoch"])
