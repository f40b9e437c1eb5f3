//! Reel's Python package, `reel`: the loader, episodes, curation and cache warming for
//! PyTorch trainers, over the same Rust crates as the CLIs (nothing re-implemented).
//!
//! This crate is the native half, `reel._reel`, built by maturin (`pyproject.toml`); the
//! Python half (`python/reel/`) adds `reel.Loader`'s epochs, state dicts and the LeRobot
//! layout, and `reel.torch.ReelDataset`.
//!
//! ```text
//! import reel, torch
//!
//! loader = reel.Loader("train.arrow", "spec.toml", store="store/", batch_size=32)
//! for batch in loader:                        # a dict of NumPy arrays, no copy
//!     images = torch.from_numpy(batch["cam_high"])
//!     ...
//! checkpoint = {"loader": loader.state_dict(), ...}
//! ```
//!
//! - [`loader`] — `reel._reel.Loader`, batches built by Reel's threads with the GIL released.
//! - [`batch`] — batch tensors as NumPy views of Reel's buffers ([`batch::TensorBuffer`]).
//! - [`episode`] — `reel.open_episode`.
//! - `curate` — `reel.curate` (feature `curate`, default: the one part that links Polars,
//!   so a loading-only build leaves it out).
//! - [`warm`] — `reel.warm`.
//! - [`checkpoint`] — `reel.save_checkpoint` and `reel.latest_checkpoint`, the format
//!   `reel-supervise` resumes from.
//! - [`spec`] — sample specs from a dict, TOML text, a path or a store URI.
//! - [`errors`] — `reel.ReelError` and a subclass per kind of failure.
//! - [`paths`] — paths and URIs given as `str` or `pathlib.Path`.

pub mod batch;
pub mod checkpoint;
#[cfg(feature = "curate")]
pub mod curate;
pub mod episode;
pub mod errors;
pub mod loader;
pub mod paths;
pub mod spec;
pub mod warm;

use pyo3::prelude::*;

#[pymodule]
fn _reel(module: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(module)?;
    module.add_class::<loader::NativeLoader>()?;
    module.add_class::<batch::TensorBuffer>()?;
    module.add_class::<episode::Episode>()?;
    module.add_function(wrap_pyfunction!(episode::open_episode, module)?)?;
    #[cfg(feature = "curate")]
    module.add_function(wrap_pyfunction!(curate::curate, module)?)?;
    module.add_function(wrap_pyfunction!(warm::warm, module)?)?;
    module.add_function(wrap_pyfunction!(checkpoint::save_checkpoint, module)?)?;
    module.add_function(wrap_pyfunction!(checkpoint::latest_checkpoint, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
