//! Reel's errors as Python exceptions: one class per [`ErrorKind`], all under
//! `reel.ReelError`, each message naming the file and what is wrong (the whole chain of
//! causes, as the CLIs print it). Any error that implements [`Kinded`] converts the same
//! way, so the class is decided by the crate that knows the error, never here.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::{PyErr, create_exception};
use reel_io::{ErrorKind, Kinded};

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

/// The exception for a Reel error: the class of its kind, the message its whole chain of
/// causes. A lost loader worker has a class of its own, since a trainer handles it apart
/// from any other environment failure (the epoch ends; resume from `state_dict()`).
pub fn exception_of<E: Kinded + 'static>(error: E) -> PyErr {
    let message = chain(&error);
    let as_error: &(dyn std::error::Error + 'static) = &error;
    if let Some(reel_loader::LoaderError::WorkerLost { .. }) = as_error.downcast_ref() {
        return WorkerLostError::new_err(message);
    }
    exception(error.kind(), message)
}

/// `result.map_err(exception_of)`, shorter.
pub trait OrRaise<T> {
    fn or_raise(self) -> PyResult<T>;
}

impl<T, E: Kinded + 'static> OrRaise<T> for Result<T, E> {
    fn or_raise(self) -> PyResult<T> {
        self.map_err(exception_of)
    }
}
