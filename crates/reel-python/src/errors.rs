//! Reel's errors as Python exceptions: one class per [`ErrorKind`], all under
//! `reel.ReelError`, each message naming the file and what is wrong (the whole chain of
//! causes, as the CLIs print it).

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::{PyErr, create_exception};
use reel_io::ErrorKind;

create_exception!(
    reel,
    ReelError,
    PyException,
    "Every error Reel raises. Its message names the file or object and what is wrong."
);
create_exception!(
    reel,
    BadInputError,
    ReelError,
    "The input itself is wrong (corrupt, truncated, inconsistent, an invalid spec or \
     argument): the same input fails the same way everywhere."
);
create_exception!(
    reel,
    EnvironmentError,
    ReelError,
    "The machine, its configuration or the store is not as needed (a file or object \
     missing, a permission refused, an invalid URI): the input may be fine."
);
create_exception!(
    reel,
    ChangedError,
    ReelError,
    "An object was replaced by another writer while it was read: open it again."
);
create_exception!(
    reel,
    TransientError,
    ReelError,
    "A failure that may pass by itself (timeout, throttling, a connection reset): retry."
);
create_exception!(
    reel,
    WorkerLostError,
    ReelError,
    "A loader worker thread failed (a bug, never bad data): the epoch ends; resume from \
     the loader's state_dict()."
);

/// Adds the exception classes to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add("ReelError", py.get_type::<ReelError>())?;
    module.add("BadInputError", py.get_type::<BadInputError>())?;
    module.add("EnvironmentError", py.get_type::<EnvironmentError>())?;
    module.add("ChangedError", py.get_type::<ChangedError>())?;
    module.add("TransientError", py.get_type::<TransientError>())?;
    module.add("WorkerLostError", py.get_type::<WorkerLostError>())?;
    Ok(())
}

/// The exception of `kind` with `message`.
pub fn exception(kind: ErrorKind, message: String) -> PyErr {
    match kind {
        ErrorKind::BadInput => BadInputError::new_err(message),
        ErrorKind::Changed => ChangedError::new_err(message),
        ErrorKind::Transient => TransientError::new_err(message),
        _ => EnvironmentError::new_err(message),
    }
}

/// A bad argument or input found by the package itself.
pub fn bad_input(message: impl Into<String>) -> PyErr {
    BadInputError::new_err(message.into())
}

/// An error and its causes on one line, `error: cause: cause`, without repeating a cause
/// that the error's own text already includes.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

/// Reel's errors that know their kind, turned into exceptions.
pub trait IntoPyErr {
    fn into_py_err(self) -> PyErr;
}

macro_rules! kinded {
    ($($t:ty),*) => {$(
        impl IntoPyErr for $t {
            fn into_py_err(self) -> PyErr {
                exception(self.kind(), chain(&self))
            }
        }
    )*};
}
kinded!(
    reel_io::Error,
    reel_mcap::Error,
    reel_manifest::ManifestError,
    reel_cache::Error
);

impl IntoPyErr for reel_loader::LoaderError {
    fn into_py_err(self) -> PyErr {
        match self {
            lost @ reel_loader::LoaderError::WorkerLost { .. } => {
                WorkerLostError::new_err(chain(&lost))
            }
            other => exception(other.kind(), chain(&other)),
        }
    }
}

#[cfg(feature = "curate")]
impl IntoPyErr for reel_curate::CurateError {
    fn into_py_err(self) -> PyErr {
        use reel_curate::CurateError as E;
        let kind = match &self {
            E::Store { source, .. } => source.kind(),
            E::Manifest(e) => e.kind(),
            E::EmptyWarehouse { .. } => ErrorKind::Environment,
            // The query or the data it read.
            _ => ErrorKind::BadInput,
        };
        exception(kind, chain(&self))
    }
}

impl IntoPyErr for reel_io::InputError {
    fn into_py_err(self) -> PyErr {
        exception(self.kind(), chain(&self))
    }
}

/// `result.map_err(IntoPyErr::into_py_err)`, shorter.
pub trait OrRaise<T> {
    fn or_raise(self) -> PyResult<T>;
}

impl<T, E: IntoPyErr> OrRaise<T> for Result<T, E> {
    fn or_raise(self) -> PyResult<T> {
        self.map_err(IntoPyErr::into_py_err)
    }
}
