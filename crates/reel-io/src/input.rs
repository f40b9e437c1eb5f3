//! Small inputs (plans, sample specs, configs, SQL) named by a local path or a store URI,
//! so a job's inputs can live next to its data in object storage.

use crate::error::{Error, ErrorKind, Kinded};
use crate::store::{Store, split_object_uri};

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// A local file that could not be read.
    #[error("reading {path}")]
    Local {
        /// The path as given.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An object that could not be fetched (the error names it).
    #[error(transparent)]
    Store(#[from] Error),
    /// An input that should be text and is not.
    #[error("{name}: not UTF-8 text")]
    NotText {
        /// The path or URI.
        name: String,
    },
}

/// The file's or the store's kind, or bad input.
impl Kinded for InputError {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Local { source, .. } => ErrorKind::of_io(source),
            Self::Store(e) => e.kind(),
            Self::NotText { .. } => ErrorKind::BadInput,
        }
    }
}

/// Whether `input` names an object in a store (`s3://…`, `file://…`) rather than a plain
/// local path.
pub fn is_store_uri(input: &str) -> bool {
    input.contains("://")
}

/// The bytes of `input`: a local path, or an object URI (`s3://bucket/key?endpoint=…`,
/// credentials from `AWS_*`) fetched whole with one GET.
pub fn read_input(input: &str) -> Result<Vec<u8>, InputError> {
    if !is_store_uri(input) {
        return std::fs::read(input).map_err(|source| InputError::Local {
            path: input.to_owned(),
            source,
        });
    }
    let (store, key) = split_object_uri(input)?;
    Ok(Store::open(&store)?.read(&key)?.to_vec())
}

/// Like [`read_input`], for text (TOML, JSON, SQL).
pub fn read_text_input(input: &str) -> Result<String, InputError> {
    String::from_utf8(read_input(input)?).map_err(|_| InputError::NotText {
        name: input.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_file_uris_read_the_same_bytes() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("spec.toml");
        std::fs::write(&path, "batch = 8\n")?;
        let path_text = path.to_str().ok_or("non-UTF-8 temporary path")?;
        assert_eq!(read_text_input(path_text)?, "batch = 8\n");
        assert_eq!(
            read_text_input(&format!("file://{path_text}"))?,
            "batch = 8\n"
        );
        Ok(())
    }

    #[test]
    fn missing_and_binary_inputs_name_themselves() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let missing = dir.path().join("plan.json");
        let missing = missing.to_str().ok_or("non-UTF-8 temporary path")?;
        let error = read_text_input(missing).expect_err("missing");
        assert!(error.to_string().contains("plan.json"), "{error}");
        assert_eq!(error.kind(), ErrorKind::Environment);
        let uri_error = read_text_input(&format!("file://{missing}"))
            .expect_err("missing")
            .to_string();
        assert!(uri_error.contains("plan.json"), "{uri_error}");

        let binary = dir.path().join("blob");
        std::fs::write(&binary, [0xff, 0xfe, 0x00])?;
        let binary = binary.to_str().ok_or("non-UTF-8 temporary path")?;
        let not_text = read_text_input(binary).expect_err("not text");
        assert!(matches!(not_text, InputError::NotText { .. }));
        assert_eq!(not_text.kind(), ErrorKind::BadInput);
        Ok(())
    }
}
