"""Reel: robot-learning episodes from the landing bucket to the GPU.

The loader, episodes, curation and cache warming for PyTorch trainers, over the same
Rust crates as Reel's CLIs::

    import reel

    loader = reel.Loader("train.arrow", "spec.toml", store="store/", batch_size=32)
    for batch in loader:              # a dict of NumPy arrays sharing Reel's buffers
        ...
    state = loader.state_dict()       # resume exactly with load_state_dict(state)

``reel.torch.ReelDataset`` wraps the loader as a ``torch.utils.data.IterableDataset``.
"""

from ._reel import (
    BadInputError,
    ChangedError,
    Episode,
    EnvironmentError,
    ReelError,
    TensorBuffer,
    TransientError,
    WorkerLostError,
    __version__,
    latest_checkpoint,
    open_episode,
    save_checkpoint,
    warm,
)
from ._loader import Batch, Loader

try:
    from ._reel import curate
except ImportError:  # built without feature "curate" (no Polars)

    def curate(*args, **kwargs):
        """Unavailable: this build of Reel left curation (Polars) out."""
        raise EnvironmentError('this build of reel has no curation: build it with feature "curate"')

__all__ = [
    "BadInputError",
    "Batch",
    "ChangedError",
    "Episode",
    "EnvironmentError",
    "Loader",
    "ReelError",
    "TensorBuffer",
    "TransientError",
    "WorkerLostError",
    "__version__",
    "curate",
    "latest_checkpoint",
    "open_episode",
    "save_checkpoint",
    "warm",
]
