"""``reel.Loader``: Reel's time-aligned multi-rate loader for one rank, epoch by epoch."""

from __future__ import annotations

import difflib
import inspect
import json
import os
import warnings
from typing import Any, Iterator, Mapping, Sequence

from . import _reel
from ._layout import LEROBOT, REEL, lerobot_batch


class Batch(dict):
    """One batch: a dict of NumPy arrays by tensor name.

    In the ``"reel"`` layout the keys are the spec's tensor names plus
    ``<name>.mask`` (1 where the element holds data) and ``<name>.time_ns`` (the time of
    the data each element holds), ``anchor_ns``, ``episode_row`` (the row in its source's
    manifest) and ``source`` (which manifest of a mixture, 0 for one). Every array is a
    view of Reel's own buffer (``array.base`` is a :class:`reel.TensorBuffer`): nothing
    was copied, and ``torch.from_numpy`` shares it too.

    Attributes:
        epoch: the epoch the batch belongs to.
        index: the batch's index in its epoch on this rank.
        skipped: the samples left out because their episode is unreadable, each a dict
            with ``episode_id``, ``uri``, ``anchor_ns`` and ``reason``.
    """

    epoch: int
    index: int
    skipped: list[dict[str, Any]]

    def __init__(self, tensors: Mapping[str, Any], epoch: int, index: int, skipped: list):
        super().__init__(tensors)
        self.epoch = epoch
        self.index = index
        self.skipped = skipped

    def __repr__(self) -> str:
        shapes = ", ".join(
            f"{k}: {getattr(v, 'shape', type(v).__name__)}" for k, v in self.items()
        )
        return f"Batch(epoch={self.epoch}, index={self.index}, skipped={len(self.skipped)}, {{{shapes}}})"


def _integer(name: str, value: Any, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value < 1 << 64:
        raise _reel.BadInputError(f"{name} must be an integer of at least {least}, not {value!r}")


def mixture_sources(manifest: Any) -> list[tuple[str, float, str | None]]:
    """``manifest`` as (path or URI, weight, store or None) triples: one manifest, or a
    list of ``(manifest, weight)`` or ``(manifest, weight, store)`` (a weighted mixture,
    each source's episodes in its own store where one is given), else
    ``reel.BadInputError``."""
    if isinstance(manifest, (str, os.PathLike)):
        return [(os.fspath(manifest), 1.0, None)]
    try:
        pairs = list(manifest)
    except TypeError:
        pairs = None
    sources = []
    for pair in pairs or [None]:
        ok = isinstance(pair, (tuple, list)) and len(pair) in (2, 3)
        path, weight, store = (tuple(pair) + (None,))[:3] if ok else (None, None, None)
        if (
            not isinstance(path, (str, os.PathLike))
            or not (store is None or isinstance(store, (str, os.PathLike)))
            or isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not weight > 0
            or weight == float("inf")
        ):
            raise _reel.BadInputError(
                f"manifest must be a path or URI, or a list of (manifest, weight) pairs with "
                f"positive weights (or (manifest, weight, store)), not {manifest!r}"
            )
        sources.append((os.fspath(path), float(weight), None if store is None else os.fspath(store)))
    return sources


def check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The loader's keyword arguments with their defaults, or ``reel.BadInputError``
    naming the first that is unknown or out of range (``ReelDataset`` checks its own
    with it when it is made)."""
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        hints = [
            f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name)
            for name in unknown
            for close in [difflib.get_close_matches(name, DEFAULTS, n=1)]
        ]
        raise _reel.BadInputError(f"unknown loader argument {', '.join(hints)}")
    o = {**DEFAULTS, **options}
    for name, least in [("batch_size", 1), ("workers", 0), ("run", 1), ("seed", 0), ("rank", 0),
                        ("world", 1), ("prefetch", 0), ("cache_capacity", 0)]:
        _integer(name, o[name], least)
    if not o["rank"] < o["world"]:
        raise _reel.BadInputError(f"rank {o['rank']} is not in a world of {o['world']}")
    if o["shuffle"] not in ("global", "locality"):
        raise _reel.BadInputError(f'shuffle must be "global" or "locality", not {o["shuffle"]!r}')
    if o["layout"] not in (REEL, LEROBOT):
        raise _reel.BadInputError(f'layout must be "reel" or "lerobot", not {o["layout"]!r}')
    if o["image_dtype"] not in ("uint8", "float32"):
        raise _reel.BadInputError(f'image_dtype must be "uint8" or "float32", not {o["image_dtype"]!r}')
    if o["image_dtype"] != "uint8" and o["layout"] != LEROBOT:
        raise _reel.BadInputError(
            f'image_dtype={o["image_dtype"]!r} applies to layout="lerobot" only: the "reel" layout '
            "hands frames over as stored (uint8)"
        )
    skipped = o["max_skipped"]
    if isinstance(skipped, bool) or not isinstance(skipped, (int, float)) or not 0 <= skipped <= 1:
        raise _reel.BadInputError(f"max_skipped must be a share between 0 and 1, not {skipped!r}")
    if not isinstance(o["drop_last"], bool):
        raise _reel.BadInputError(f"drop_last must be True or False, not {o['drop_last']!r}")
    pin = o["pin_memory"]
    if pin is not None and not isinstance(pin, bool):
        _integer("pin_memory", pin, 0)
    return o


class Loader:
    """Reel's loader over a manifest, for one rank.

    Args:
        manifest: the Arrow IPC manifest ``reel-curate`` wrote: a local path or a store
            URI (``s3://bucket/runs/42/train.arrow?endpoint=…``, fetched once per node);
            or a weighted mixture, a list of ``(manifest, weight)`` pairs (or
            ``(manifest, weight, store)``, that source's episodes in its own store). Each source of
            a mixture fills its weight's share of every epoch, which holds as many
            samples as the sources together; a source drawn beyond its size is cycled
            (each pass in a fresh order), one drawn less goes on in the next epoch where
            this one stopped, so each of its samples comes once before any comes again.
            ``batch["source"]`` names each sample's source, ``batch["episode_row"]`` its
            row in that source's manifest.
        spec: the sample spec: a dict, TOML text, or the path or store URI of a TOML
            file (see ``testdata/spec.toml``).
        store: where the manifest's episode paths live (a folder or a store URI); by
            default each manifest's own folder or prefix.
        cache: a node-local block cache folder in front of the store (``reel-warm``
            fills it), or None to read the store directly.
        batch_size: samples per batch.
        workers: Reel's threads building batches (they need no Python process each).
        shuffle: ``"locality"`` (blocks of ``run`` consecutive samples of the manifest,
            shuffled, then the samples inside each: one read and one decode serve a
            block) or ``"global"`` (i.i.d. over the whole manifest).
        run: samples per block under ``"locality"``.
        seed: the order is a function of (seed, epoch, rank, world) alone.
        rank, world: this rank's shard (no overlap, full coverage across ranks).
        prefetch: batches built ahead of the consumer, at most.
        pin_memory: page-locked batch buffers on this CUDA device (True means the
            rank's ``LOCAL_RANK``, else 0), for ``.to(device, non_blocking=True)``; falls
            back to pageable memory without CUDA (``loader.pinned`` says which).
        layout: ``"reel"`` (Reel's tensor names) or ``"lerobot"`` (the keys and shapes
            a LeRobot policy's ``forward`` reads).
        image_dtype: for ``layout="lerobot"``: ``"uint8"`` or ``"float32"`` (in [0, 1]);
            the ``"reel"`` layout takes ``"uint8"`` only.
        drop_last: leave out a last, smaller batch.
        max_skipped: the share of an epoch's samples that may be skipped (their episode
            corrupt, or not what the manifest says) before iterating raises
            ``reel.BadInputError``; skipped samples are reported in ``batch.skipped``.
        cache_capacity: bytes the block cache may hold.

    Every argument is checked at once: an unknown or out-of-range one raises
    ``reel.BadInputError`` (a ``reel.ReelError``). Iterating yields :class:`Batch` es of
    one epoch (the current one, see :meth:`set_epoch`), never an empty one (a batch whose
    samples were all skipped is passed over, its skipped samples reported with the next,
    or, after the epoch's last batch, by :meth:`skipped_after_last_batch`);
    afterwards the loader stands at the next epoch. Ctrl-C while a batch is being built
    raises ``KeyboardInterrupt``. A damaged episode costs the samples it cannot give
    (reported in ``batch.skipped``); an outage (the store unreachable after its retries,
    a permission, a full disk) raises ``reel.TransientError`` or
    ``reel.EnvironmentError`` without skipping anything, and :meth:`state_dict` still
    names the batch it stopped at, so the run resumes there once the store is back.
    """

    def __init__(
        self,
        manifest: str | os.PathLike | Sequence[tuple[str | os.PathLike, float]],
        spec: str | os.PathLike | Mapping[str, Any],
        store: str | os.PathLike | None = None,
        cache: str | os.PathLike | None = None,
        *,
        batch_size: int = 8,
        workers: int = 2,
        shuffle: str = "locality",
        run: int = 10,
        seed: int = 0,
        rank: int = 0,
        world: int = 1,
        prefetch: int = 4,
        pin_memory: bool | int = False,
        layout: str = REEL,
        image_dtype: str = "uint8",
        drop_last: bool = False,
        max_skipped: float = 0.01,
        cache_capacity: int = 64 << 30,
        **unknown: Any,
    ):
        arguments = locals()
        check_options({**{k: v for k, v in arguments.items() if k in DEFAULTS}, **unknown})
        if isinstance(spec, Mapping):
            spec = dict(spec)
        device = None
        if pin_memory is True:
            device = int(os.environ.get("LOCAL_RANK", "0"))
        elif pin_memory is not False and pin_memory is not None:
            device = int(pin_memory)
        self._native = _reel.Loader(
            mixture_sources(manifest),
            spec if isinstance(spec, (dict, str)) else os.fspath(spec),
            None if store is None else os.fspath(store),
            None if cache is None else os.fspath(cache),
            cache_capacity=cache_capacity,
            batch_size=batch_size,
            workers=workers,
            shuffle=shuffle,
            run=run,
            seed=seed,
            rank=rank,
            world=world,
            prefetch=prefetch,
            pin_memory=device,
            drop_last=drop_last,
            channels_first=layout == LEROBOT,
            max_skipped=max_skipped,
        )
        if self._native.store_missing:
            folder = "beside the manifest" if store is None else os.fspath(store)
            warnings.warn(
                f"store folder {folder} is missing: serving what the cache holds",
                stacklevel=2,
            )
        self._layout = layout
        self._image_dtype = image_dtype
        self._epoch = 0
        self._batch = 0
        # The rank's part of the epoch when it resumed on another world size (JSON).
        self._spans: str | None = None
        self._generation = 0
        self._episodes: dict[tuple[int, int], tuple[str, int]] = {}

    # Iteration ------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Batch]:
        # One iteration at a time: a newer one takes over the native loader, and an older
        # generator (abandoned, collected later) must neither read nor stop it.
        self._generation += 1
        mine = self._generation
        self._native.start(self._epoch, self._batch, self._spans)
        try:
            while self._generation == mine:
                item = self._native.next_batch()
                if item is None:
                    break
                tensors, epoch, index, skipped = item
                self._batch = index + 1
                if self._layout == LEROBOT:
                    tensors = lerobot_batch(tensors, self._episode_of, self._image_dtype)
                yield Batch(tensors, epoch, index, skipped)
            else:
                return
            # The whole epoch was delivered: the next iteration is the next epoch.
            self._epoch += 1
            self._batch = 0
            self._spans = None
        finally:
            if self._generation == mine:
                self._native.stop()

    def __len__(self) -> int:
        """Batches in the current epoch on this rank (of the rest of it, after a resume on
        another world size)."""
        return self._native.epoch_size(self._epoch, self._spans)[1]

    def epoch_len(self, epoch: int) -> int:
        """Batches in epoch ``epoch`` on this rank (an iteration in progress goes on)."""
        return self._native.epoch_size(int(epoch))[1]

    def set_epoch(self, epoch: int) -> None:
        """Makes the next iteration epoch ``epoch`` from its start (an iteration in
        progress ends)."""
        self._generation += 1
        self._native.stop()
        self._epoch = int(epoch)
        self._batch = 0
        self._spans = None

    @property
    def epoch(self) -> int:
        """The epoch the next iteration delivers."""
        return self._epoch

    # Checkpoints ----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Where this rank stands, for the checkpoint: the epoch and the batches of it
        delivered, this rank and world, and ``run``: what the position belongs to (the
        manifest's content hash, a hash of the spec, seed, shuffle, batch size,
        drop_last). Plain JSON data."""
        return json.loads(self._native.saved_state(self._epoch, self._batch, self._spans))

    def load_state_dict(
        self, state: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, override: bool = False
    ) -> None:
        """Resumes from ``state``: the next iterations deliver exactly what an
        uninterrupted run delivers after it.

        ``state`` is one rank's :meth:`state_dict` or the list of every rank's. One state
        serves a world of the same size (ranks step together, so any rank's state places
        every rank at an epoch's start or on its own share). Resuming on another number
        of ranks mid-epoch needs the list of all ranks' states: the ranks of the new world
        then together deliver the rest of the epoch, every remaining sample once (each
        rank a contiguous part of it, so its batch count may differ from the old one's),
        then go on with whole epochs.

        A state from another run (another manifest content, spec, seed, shuffle, batch
        size or drop_last) raises ``reel.BadInputError`` naming what changed. With
        ``override=True`` it is applied anyway: the saved epoch and batch number go on in
        this loader's order, so that epoch's rest may repeat or miss samples (later epochs
        are exact)."""
        states = [state] if isinstance(state, Mapping) else list(state)
        if not states or not all(isinstance(s, Mapping) for s in states):
            raise _reel.BadInputError(
                f"loader state {state!r}: needs a state_dict() or a list of them"
            )
        if any("run" not in s for s in states):
            if not override:
                raise _reel.BadInputError(
                    "loader state has no 'run' (saved by an older Reel, or not by state_dict()): "
                    "pass override=True to go on from its epoch and batch in this loader's order"
                )
            try:
                epoch, batch = int(states[0]["epoch"]), int(states[0]["batch"])
            except (KeyError, TypeError, ValueError) as e:
                raise _reel.BadInputError(f"loader state {state!r}: needs integer epoch and batch") from e
            position = {"epoch": epoch, "batch": min(batch, self.epoch_len(epoch))}
        else:
            position = json.loads(self._native.restore(json.dumps(states), override))
        self._generation += 1
        self._native.stop()
        self._epoch, self._batch = int(position["epoch"]), int(position["batch"])
        spans = position.get("spans")
        self._spans = json.dumps(spans) if spans else None

    @property
    def mid_epoch(self) -> bool:
        """Whether the next iteration starts inside an epoch (after a resume)."""
        return self._batch > 0 or self._spans is not None

    # Introspection --------------------------------------------------------------------

    @property
    def total_samples(self) -> int:
        """Samples of each epoch, every rank together (one manifest: all its samples
        under the spec; a mixture: all its sources' together)."""
        return self._native.total_samples

    @property
    def num_sources(self) -> int:
        """Manifests the loader mixes (1 for one manifest)."""
        return self._native.num_sources

    def source_share(self, source: int) -> tuple[int, int]:
        """(samples source ``source`` fills in each epoch, every rank together; samples
        it holds under the spec)."""
        return self._native.source_share(source)

    @property
    def pinned(self) -> bool:
        """Whether batch buffers are page-locked host memory."""
        return self._native.pinned

    def stats(self) -> dict[str, Any]:
        """What the epoch in progress delivered and did (frames decoded, chunks read,
        cache hit rate)."""
        return self._native.stats()

    def skipped_after_last_batch(self) -> list[dict[str, Any]]:
        """The skipped samples of the last iteration that no batch reports: those of its
        last batches, which came out empty (every sample skipped) and so were never
        delivered. Read it once an iteration has ended; with the batches' own
        ``skipped``, every skipped sample of the epoch is reported exactly once."""
        return self._native.skipped_after_last_batch()

    def episode_id(self, row: int, source: int = 0) -> str:
        """The episode id of row ``row`` of source ``source``'s manifest
        (``batch["episode_row"]`` and ``batch["source"]`` name them)."""
        return self._native.episode_id(row, source)

    def episode_metadata(self, row: int, source: int = 0) -> dict[str, dict[str, str]]:
        """The metadata records of the episode of row ``row`` of source ``source``."""
        return self._native.episode_metadata(row, source)

    def _episode_of(self, row: int, source: int) -> tuple[str, int]:
        """(task, start time in ns) of row ``row`` of source ``source``, read once."""
        known = self._episodes.get((source, row))
        if known is None:
            metadata = self._native.episode_metadata(row, source)
            task = metadata.get("episode", {}).get("task", "")
            known = (task, self._native.episode_start_ns(row, source))
            self._episodes[(source, row)] = known
        return known


# Keyword arguments of Loader and their defaults, read off its signature.
DEFAULTS: dict[str, Any] = {
    name: p.default
    for name, p in inspect.signature(Loader.__init__).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
}
