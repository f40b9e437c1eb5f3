"""Type stubs of Reel's native module (``reel._reel``); the public API is ``reel``."""

from os import PathLike
from typing import Any, Mapping

import numpy as np

__version__: str

class ReelError(Exception):
    """Every error Reel raises; the message names the file and what is wrong."""

class BadInputError(ReelError):
    """The input itself is wrong (corrupt, truncated, inconsistent, invalid)."""

class EnvironmentError(ReelError):
    """The machine, configuration or store is not as needed (missing file, permission)."""

class ChangedError(ReelError):
    """An object was replaced while it was read: open it again."""

class TransientError(ReelError):
    """A failure that may pass by itself: retry."""

class WorkerLostError(ReelError):
    """A loader worker failed; the epoch ends (resume from the state dict)."""

class TensorBuffer:
    """The memory of one batch tensor; the base of the NumPy arrays viewing it."""
    @property
    def address(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def pinned(self) -> bool: ...

class Loader:
    """The native loader behind ``reel.Loader``."""
    def __init__(
        self,
        sources: list[tuple[str, float, str | None]],
        spec: str | Mapping[str, Any],
        store: str | None = None,
        cache: str | None = None,
        *,
        cache_capacity: int = ...,
        batch_size: int = 8,
        workers: int = 2,
        shuffle: str = "locality",
        run: int = 10,
        seed: int = 0,
        rank: int = 0,
        world: int = 1,
        prefetch: int = 4,
        pin_memory: int | None = None,
        drop_last: bool = False,
        channels_first: bool = False,
        max_skipped: float = 0.01,
    ) -> None: ...
    def start(self, epoch: int, batch: int, spans: str | None = None) -> None: ...
    def saved_state(self, epoch: int, batch: int, spans: str | None = None) -> str: ...
    def restore(self, states: str, keep_position: bool) -> str: ...
    def stop(self) -> None: ...
    def next_batch(
        self,
    ) -> tuple[dict[str, np.ndarray], int, int, list[dict[str, Any]]] | None: ...
    def epoch_size(self, epoch: int, spans: str | None = None) -> tuple[int, int]: ...
    @property
    def total_samples(self) -> int: ...
    @property
    def pinned(self) -> bool: ...
    @property
    def store_missing(self) -> bool: ...
    @property
    def num_sources(self) -> int: ...
    def source_share(self, source: int) -> tuple[int, int]: ...
    def episode_id(self, row: int, source: int = 0) -> str: ...
    def episode_start_ns(self, row: int, source: int = 0) -> int: ...
    def episode_metadata(self, row: int, source: int = 0) -> dict[str, dict[str, str]]: ...
    def stats(self) -> dict[str, Any]: ...
    def skipped_after_last_batch(self) -> list[dict[str, Any]]: ...

class Episode:
    """An open canonical episode."""
    @property
    def name(self) -> str: ...
    @property
    def topics(self) -> list[str]: ...
    @property
    def groups(self) -> dict[str, list[str]]: ...
    @property
    def metadata(self) -> dict[str, dict[str, str]]: ...
    @property
    def warnings(self) -> list[str]: ...
    def channel_metadata(self, topic: str) -> dict[str, str]: ...
    def frames(
        self, topic: str, times_ns: list[int], size: tuple[int, int] | None = None
    ) -> np.ndarray:
        """uint8 RGB frames [len(times_ns), height, width, 3] shown at each time."""
    def depth(self, topic: str, times_ns: list[int]) -> np.ndarray:
        """uint16 depth frames [len(times_ns), height, width] as stored, shown at each time
        (the first frame for times up to 2 s before it)."""
    def signal(self, topic: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(time_ns int64 [n], values float64 [n, fields], field names); a camera raises."""

def open_episode(uri: str | PathLike, store: str | PathLike | None = None) -> Episode: ...
def curate(
    warehouse: str | PathLike,
    sql: str,
    output: str | PathLike,
    *,
    anchor_hz: float = 10.0,
    before: float = 1.0,
    after: float = 1.0,
    allow_empty: bool = False,
    by_position: bool = False,
    as_of: str | PathLike | None = None,
) -> dict[str, Any]: ...
def warm(
    manifest: str | PathLike,
    store: str | PathLike,
    cache: str | PathLike,
    *,
    spec: str | Mapping[str, Any] | None = None,
    capacity: int | None = None,
    concurrency: int = 32,
    verify: bool = False,
    pin: str | bool | None = None,
) -> dict[str, Any]: ...
def save_checkpoint(root: str | PathLike, step: int, files: dict[str, bytes]) -> str: ...
def latest_checkpoint(root: str | PathLike) -> tuple[int, dict[str, bytes]] | None: ...
