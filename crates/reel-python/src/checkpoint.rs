//! `reel.save_checkpoint` / `reel.latest_checkpoint`: Reel's atomic, checksummed
//! checkpoint directories ([`reel_resilience::checkpoint`]), the format `reel-supervise`
//! verifies before it restarts a trainer from `REEL_RESUME_STEP`.

use std::borrow::Cow;
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use reel_resilience::checkpoint::CheckpointDir;

use crate::errors::OrRaise;

/// Saves `files` (name → bytes) as checkpoint `step` under `root`: written to a
/// temporary directory, fsynced, marked complete with every file's checksum and renamed
/// into place, so a reader sees all of it or none. Returns the checkpoint's path.
#[pyfunction]
pub fn save_checkpoint(
    py: Python<'_>,
    root: PathBuf,
    step: u64,
    files: &Bound<'_, PyDict>,
) -> PyResult<PathBuf> {
    let mut blobs: Vec<(String, Cow<'_, [u8]>)> = Vec::with_capacity(files.len());
    for (name, data) in files.iter() {
        let name: String = name.extract()?;
        let bytes = data.cast::<PyBytes>().map_err(|_| {
            crate::errors::bad_input(format!("checkpoint file {name}: expected bytes"))
        })?;
        blobs.push((name, Cow::Owned(bytes.as_bytes().to_vec())));
    }
    py.detach(move || {
        let dir = CheckpointDir::open(root).or_raise()?;
        let refs: Vec<(&str, &[u8])> = blobs.iter().map(|(n, d)| (n.as_str(), &**d)).collect();
        Ok(dir.save(step, &refs).or_raise()?.path)
    })
}

/// The newest checkpoint under `root` whose files all verify, as `(step, files)` with
/// files name → bytes, or None when there is none (damaged ones are passed over).
#[pyfunction]
pub fn latest_checkpoint<'py>(
    py: Python<'py>,
    root: PathBuf,
) -> PyResult<Option<(u64, Bound<'py, PyDict>)>> {
    let loaded = py.detach(move || {
        let dir = CheckpointDir::open(root).or_raise()?;
        match dir.latest().or_raise()?.checkpoint {
            None => Ok::<_, PyErr>(None),
            Some(info) => Ok(Some(dir.load(info.step).or_raise()?)),
        }
    })?;
    let Some(checkpoint) = loaded else {
        return Ok(None);
    };
    let files = PyDict::new(py);
    for (name, data) in &checkpoint.files {
        files.set_item(name, PyBytes::new(py, data))?;
    }
    Ok(Some((checkpoint.step, files)))
}
