"""``reel.torch.ReelDataset``: Reel's loader as a ``torch.utils.data.IterableDataset``.

Meant for ``DataLoader(dataset, batch_size=None, num_workers=0)``: Reel's own threads
build the batches (``workers=``), so PyTorch needs no worker processes, and exact
mid-epoch resume (:meth:`ReelDataset.state_dict`) holds. ``batch_size=None`` matters:
with DataLoader's default ``batch_size=1`` every tensor gains a leading dimension of 1.

With ``num_workers > 0`` each DataLoader worker reads a disjoint sub-shard of the rank's
shard (no sample twice, every sample once per epoch), under any start method (``fork``,
``spawn``, ``forkserver``; a dataset pickles as its arguments and progress, never as an
open loader). The dataset in the training process owns the epoch: the workers read it
from memory they share with it, and the last worker to finish an epoch moves it on, with
or without ``persistent_workers``. Its ``state_dict()`` is then exact at epoch
boundaries; mid-epoch, the batches the trainer consumed are known only to the
DataLoader, so ``state_dict()`` raises rather than name a position it cannot know.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch
import torch.utils.data

from ._loader import Loader, check_options, mixture_sources
from ._reel import BadInputError


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


# Loaders a forked process inherited: kept, never dropped, in that process.
_FORKED_AWAY: list[Loader] = []


def _shared(values: list[int]):
    """Shared int64s with a lock made by the spawn context: a lock of the fork context
    cannot pass to spawn or forkserver workers, one of the spawn context passes to all."""
    return multiprocessing.get_context("spawn").Array("q", values)


class _Progress:
    """The epoch the dataset's copies iterate, in memory shared with DataLoader worker
    processes: [epoch, workers done with it, batches the workers delivered in it, whether
    a loaded mid-epoch state still waits for the iteration that resumes it]."""

    def __init__(self, epoch: int = 0):
        self.shared = _shared([epoch, 0, 0, 0])

    def __getstate__(self):
        # Shared memory passes to a worker process as it starts (fork, spawn and
        # forkserver alike); any other pickle keeps the values only.
        if multiprocessing.context.get_spawning_popen() is not None:
            return {"shared": self.shared}
        return {"values": list(self.shared[:])}

    def __setstate__(self, state):
        if "shared" in state:
            self.shared = state["shared"]
        else:
            self.shared = _shared(state["values"])

    @property
    def epoch(self) -> int:
        return int(self.shared[0])

    def set(self, epoch: int, resume_pending: bool = False) -> None:
        with self.shared.get_lock():
            self.shared[:] = [epoch, 0, 0, int(resume_pending)]

    def take_resume(self) -> bool:
        """Whether a loaded state waits to be resumed; the first copy to ask takes it
        (the training process or a worker), so no later iteration resumes it again."""
        with self.shared.get_lock():
            pending = self.shared[3] != 0
            self.shared[3] = 0
            return pending

    def resume_pending(self) -> bool:
        return self.shared[3] != 0

    def delivered(self) -> None:
        with self.shared.get_lock():
            self.shared[2] += 1

    def mid_epoch(self) -> bool:
        return self.shared[2] > 0

    def worker_done(self, epoch: int, workers: int) -> None:
        """One worker finished ``epoch``: the last of ``workers`` moves it on."""
        with self.shared.get_lock():
            if self.shared[0] != epoch:
                return
            self.shared[1] += 1
            if self.shared[1] >= workers:
                self.shared[:] = [epoch + 1, 0, 0, 0]


def _last_reports_unreported(batches: Iterator[dict[str, Any]], loader: Loader):
    """``batches`` held back by one, so that the skipped samples of the epoch's last
    batches, which came out empty, go in the last batch's ``"_skipped"``: a training
    process cannot read a worker's loader. (Mid-epoch state is refused under workers, so
    holding one back changes no position.)"""
    held = None
    for tensors in batches:
        if held is not None:
            yield held
        held = tensors
    if held is not None:
        held["_skipped"] = list(held["_skipped"]) + loader.skipped_after_last_batch()
        yield held


class ReelDataset(torch.utils.data.IterableDataset):
    """Batches of Reel's loader as dicts of tensors (no copy: they share Reel's buffers).

    Takes :class:`reel.Loader`'s arguments, checked here (a bad one raises
    ``reel.BadInputError`` at once, not at the first iteration); ``rank`` and ``world``
    default to torch.distributed's (or ``RANK``/``WORLD_SIZE``). With ``with_meta=True``
    each batch also carries its epoch, index and skipped samples under ``"_epoch"``,
    ``"_index"`` and ``"_skipped"``.

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
        check_options(dict(options, rank=rank, world=world))
        # One manifest or a weighted mixture, checked now (plain pairs pickle to workers).
        manifest = mixture_sources(manifest)
        self._args = (manifest, spec, store, cache)
        self._options = options
        self._rank, self._world = rank, world
        self._with_meta = with_meta
        self._progress = _Progress()
        self._resume: dict[str, Any] | None = None
        self._loader: Loader | None = None
        self._loader_key: tuple[int, int] | None = None
        self._loader_pid = os.getpid()

    def __getstate__(self) -> dict[str, Any]:
        # An open loader (threads, mapped files) stays in its process: a copy opens its own.
        state = dict(self.__dict__)
        state["_loader"] = None
        state["_loader_key"] = None
        return state

    def _shard(self) -> tuple[tuple[int, int], int]:
        """(rank, world) of this process, split further among DataLoader workers, and how
        many workers share the rank's shard."""
        info = torch.utils.data.get_worker_info()
        if info is None:
            return (self._rank, self._world), 1
        shard = (self._rank * info.num_workers + info.id, self._world * info.num_workers)
        return shard, info.num_workers

    def _open(self, shard: tuple[int, int]) -> Loader:
        """The loader of ``shard``, made once (in each DataLoader worker, after a fork)."""
        if self._loader is not None and self._loader_pid != os.getpid():
            # Opened before a fork: its threads stayed in the parent, so it is neither
            # used nor dropped here (dropping it would wait for those threads).
            _FORKED_AWAY.append(self._loader)
            self._loader = None
        if self._loader is None or self._loader_key != shard:
            rank, world = shard
            manifest, spec, store, cache = self._args
            self._loader = Loader(manifest, spec, store, cache, rank=rank, world=world, **self._options)
            self._loader_key = shard
            self._loader_pid = os.getpid()
        return self._loader

    def __iter__(self) -> Iterator[dict[str, Any]]:
        shard, workers = self._shard()
        # In a DataLoader worker process (any num_workers > 0), only the DataLoader knows
        # which batches the trainer consumed: the shared progress counts what was delivered.
        in_worker = torch.utils.data.get_worker_info() is not None
        loader = self._open(shard)
        epoch = self._progress.epoch
        # A loaded state is resumed once, by whichever copy iterates first: this copy's
        # own `_resume` may be a pickled leftover of one a worker already resumed.
        resume = self._resume if self._progress.take_resume() else None
        self._resume = None
        if resume is not None and workers > 1:
            raise BadInputError(
                "a mid-epoch state resumes with num_workers=0 or 1: more DataLoader workers "
                "split the rank's shard their own way"
            )
        if resume is not None:
            state, override = resume
            loader.load_state_dict(state, override=override)
        elif loader.epoch != epoch or in_worker:
            loader.set_epoch(epoch)
        batches = (self._tensors(batch) for batch in loader)
        if in_worker and self._with_meta:
            batches = _last_reports_unreported(batches, loader)
        for tensors in batches:
            if in_worker:
                self._progress.delivered()
            yield tensors
        if in_worker:
            self._progress.worker_done(epoch, workers)
        else:
            self._progress.set(loader.epoch)

    def _tensors(self, batch) -> dict[str, Any]:
        tensors = to_tensors(batch)
        if self._with_meta:
            tensors["_epoch"] = batch.epoch
            tensors["_index"] = batch.index
            tensors["_skipped"] = batch.skipped
        return tensors

    def skipped_after_last_batch(self) -> list[dict[str, Any]]:
        """The skipped samples of the last epoch that no batch reports (its last batches
        came out empty): :meth:`reel.Loader.skipped_after_last_batch`, with
        ``num_workers=0``. Under DataLoader workers with ``with_meta=True`` each worker
        reports them in its last batch's ``"_skipped"`` instead."""
        return [] if self._loader is None else self._loader.skipped_after_last_batch()

    def __len__(self) -> int:
        """Batches of the current epoch on this rank (all DataLoader workers together)."""
        loader = self._open((self._rank, self._world))
        return loader.epoch_len(self._progress.epoch)

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration epoch ``epoch`` from its start (DataLoader workers
        read it too), and ``state_dict()`` say so at once."""
        self._progress.set(int(epoch))  # also drops a loaded state not yet resumed
        self._resume = None
        if self._loader is not None:
            self._loader.set_epoch(int(epoch))

    def state_dict(self) -> dict[str, Any]:
        """Where the run stands (:meth:`reel.Loader.state_dict`): save it with the model.
        Exact mid-epoch with ``num_workers=0``; with DataLoader workers, at epoch
        boundaries only (mid-epoch it raises ``reel.BadInputError``)."""
        if self._resume is not None and not self._progress.resume_pending():
            # Resumed by a DataLoader worker meanwhile: the shared progress says where.
            self._resume = None
        if self._resume is not None:
            # A state loaded and not iterated yet: the position it resumes at (applied
            # again: a pickled copy opens a loader of its own).
            loader = self._open((self._rank, self._world))
            state, override = self._resume
            loader.load_state_dict(state, override=override)
            return loader.state_dict()
        if self._progress.mid_epoch():
            raise BadInputError(
                "ReelDataset.state_dict() mid-epoch under DataLoader worker processes: only "
                "the DataLoader knows which of their batches the trainer consumed. Use "
                "num_workers=0 (Reel's own threads build the batches: workers=N) for exact "
                "mid-epoch resume, or save at epoch boundaries"
            )
        loader = self._loader
        if loader is None or loader.epoch != self._progress.epoch:
            loader = self._open((self._rank, self._world))
            if loader.epoch != self._progress.epoch:
                loader.set_epoch(self._progress.epoch)
        return loader.state_dict()

    def load_state_dict(
        self, state: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, override: bool = False
    ) -> None:
        """The next iteration resumes at ``state`` (:meth:`reel.Loader.load_state_dict`:
        one rank's state, or every rank's to resume on another number of ranks): exactly
        the batches an uninterrupted run delivers after it (with ``num_workers`` 0 or 1;
        more DataLoader workers resume a state saved at an epoch boundary). It is resumed
        once: the next epochs start at their beginning."""
        # Checked now (the run it came from, its position), not at the first batch.
        loader = self._open((self._rank, self._world))
        loader.load_state_dict(state, override=override)
        self._resume = (state, override) if loader.mid_epoch else None
        self._progress.set(loader.epoch, resume_pending=self._resume is not None)

    @property
    def epoch(self) -> int:
        """The epoch the next iteration delivers."""
        return self._progress.epoch
