//! Filesystem steps that survive a crash: files written and fsynced, directories fsynced
//! after their entries change, and removals that accept what is already gone.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::error::CheckpointError;

pub(super) fn write_synced(path: &Path, data: &[u8]) -> Result<(), CheckpointError> {
    let mut file = File::create(path).map_err(|e| CheckpointError::io(path, e))?;
    file.write_all(data)
        .and_then(|()| file.sync_all())
        .map_err(|e| CheckpointError::io(path, e))
}

/// Makes a directory's entries (new files, renames) durable.
pub(super) fn sync_dir(path: &Path) -> Result<(), CheckpointError> {
    File::open(path)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| CheckpointError::io(path, e))
}

pub(super) fn remove_dir(path: &Path) -> Result<(), CheckpointError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CheckpointError::io(path, e)),
    }
}
