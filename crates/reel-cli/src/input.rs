//! Small inputs (plans, sample specs, configs, SQL, manifests) named by a local path or a
//! store URI, so a job's inputs can live next to its data in object storage.

use std::path::PathBuf;

pub use reel_io::{InputError, read_input, read_text_input};

/// Why a manifest named on the command line could not be had.
#[derive(Debug, thiserror::Error)]
#[error("manifest {uri}")]
pub struct ManifestInputError {
    /// The path or URI.
    pub uri: String,
    /// The underlying error.
    #[source]
    pub source: Box<reel_manifest::ManifestError>,
}

/// A local path to the manifest `input`: a local path is returned as given (whoever opens
/// it reports what is wrong with it); an object URI is fetched once per node into
/// `reel_manifest::node_manifest_dir()`, shared by every process that asks for it.
pub fn local_manifest(input: &str) -> Result<PathBuf, ManifestInputError> {
    if !reel_io::is_store_uri(input) {
        return Ok(PathBuf::from(input));
    }
    reel_manifest::open_uri(input, &reel_manifest::node_manifest_dir())
        .map(|manifest| manifest.path().to_owned())
        .map_err(|source| ManifestInputError {
            uri: input.to_owned(),
            source: Box::new(source),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_manifest_is_its_own_path() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("train.arrow");
        let path_text = path.to_str().ok_or("non-UTF-8 temporary path")?;
        assert_eq!(local_manifest(path_text)?, path);
        Ok(())
    }
}
