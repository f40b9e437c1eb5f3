//! Paths and store URIs from Python: a `str` or any `os.PathLike` (`pathlib.Path`), as
//! pyo3 extracts a `PathBuf`, turned into the text Reel's stores take.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::errors::bad_input;

/// `path` as text; `what` names the argument in the error of a path that is not UTF-8.
pub fn text(what: &str, path: PathBuf) -> PyResult<String> {
    path.into_os_string()
        .into_string()
        .map_err(|p| bad_input(format!("{what} {p:?} is not UTF-8")))
}
