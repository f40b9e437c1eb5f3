//! A local folder as the Delta engine's object store: object_store's `LocalFileSystem`,
//! except for a listing from an offset, which is how the kernel finds a table's log
//! after its last checkpoint. `LocalFileSystem` looks up every entry of the folder for
//! that (a `stat` and a path conversion each), so opening a table cost in proportion to
//! every log entry kept (thousands within the retention), not to the few commits since
//! the last checkpoint. Here the folder's names are read, and only those past the offset
//! looked up. And a write: `LocalFileSystem` stages it as `name#n`, which a process
//! killed mid-write leaves behind under a name no sweep knows; here it is staged under
//! Reel's temporary name (`.name.<pid>.<n>.tmp`, hidden), then linked (a commit: only
//! where no entry of that name exists) or renamed into place.

use std::fmt;
use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use delta_kernel::object_store::local::LocalFileSystem;
use delta_kernel::object_store::path::Path;
use delta_kernel::object_store::{
    CopyOptions, Error, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    Result,
};
use futures_util::StreamExt;
use futures_util::stream::BoxStream;

#[derive(Debug, Default)]
pub(crate) struct LocalFolder {
    inner: LocalFileSystem,
}

impl fmt::Display for LocalFolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LocalFolder({})", self.inner)
    }
}

impl LocalFolder {
    /// The objects directly in `prefix`'s folder whose paths sort after `offset`, in
    /// order; `None` where the offset is not an entry of that folder, the folder holds a
    /// folder past the offset (the general listing, which descends into it, answers
    /// then), or its names cannot be read.
    fn files_after(&self, prefix: &Path, offset: &Path) -> Option<Vec<ObjectMeta>> {
        let folder = self.inner.path_to_filesystem(prefix).ok()?;
        // The offset names an entry of this folder (as the kernel's do): names compare
        // as the paths do.
        let offset = offset
            .as_ref()
            .strip_prefix(prefix.as_ref())?
            .strip_prefix('/')
            .filter(|name| !name.contains('/'))?;
        let mut found = Vec::new();
        for entry in std::fs::read_dir(folder).ok()? {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            if name.as_str() <= offset {
                continue;
            }
            let location = prefix.clone().join(name.as_str());
            if entry.file_type().ok()?.is_dir() {
                return None;
            }
            // A write in flight (`LocalFileSystem` writes `name#n`, then renames it).
            if name.contains('#') {
                continue;
            }
            // `stat` follows a link, as `LocalFileSystem` does.
            let metadata = std::fs::metadata(entry.path()).ok()?;
            found.push(ObjectMeta {
                location,
                last_modified: metadata.modified().ok()?.into(),
                size: metadata.len(),
                e_tag: None,
                version: None,
            });
        }
        found.sort_by(|a, b| a.location.cmp(&b.location));
        Some(found)
    }
}

/// Writes `payload` at `path` through a hidden temporary beside it: linked into place
/// where `create` (failing with `AlreadyExists` where `path` exists), renamed otherwise.
fn write_staged(path: &std::path::Path, payload: &PutPayload, create: bool) -> std::io::Result<()> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static STAGED: AtomicU64 = AtomicU64::new(0);
    let folder = path
        .parent()
        .ok_or_else(|| std::io::Error::other("a path without a folder"))?;
    std::fs::create_dir_all(folder)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = folder.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        STAGED.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = std::fs::File::create_new(&temporary)?;
        for chunk in payload.iter() {
            file.write_all(chunk)?;
        }
        file.sync_all()
    })();
    let placed = written.and_then(|()| match create {
        true => std::fs::hard_link(&temporary, path),
        false => std::fs::rename(&temporary, path),
    });
    if create || placed.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    placed
}

#[async_trait]
impl ObjectStore for LocalFolder {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let create = match opts.mode {
            PutMode::Create => true,
            PutMode::Overwrite => false,
            PutMode::Update(_) => return self.inner.put_opts(location, payload, opts).await,
        };
        let path = self.inner.path_to_filesystem(location)?;
        match write_staged(&path, &payload, create) {
            Ok(()) => Ok(PutResult {
                e_tag: None,
                version: None,
                extensions: Default::default(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Error::AlreadyExists {
                path: location.to_string(),
                source: Box::new(e),
            }),
            Err(e) => Err(Error::Generic {
                store: "LocalFolder",
                source: Box::new(e),
            }),
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        match prefix.and_then(|prefix| self.files_after(prefix, offset)) {
            Some(found) => futures_util::stream::iter(found.into_iter().map(Ok)).boxed(),
            None => self.inner.list_with_offset(prefix, offset),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::TryStreamExt;

    /// The listing from an offset finds what `LocalFileSystem`'s does, in order.
    #[test]
    fn lists_after_an_offset_as_the_local_file_system_does() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("_delta_log");
        std::fs::create_dir_all(&log).expect("mkdir");
        for v in [3u64, 0, 12, 10, 11, 7] {
            std::fs::write(log.join(format!("{v:020}.json")), b"{}").expect("write");
        }
        std::fs::write(log.join("00000000000000000010.checkpoint.parquet"), b"x").expect("write");
        std::fs::write(log.join("_last_checkpoint"), b"{}").expect("write");
        std::fs::write(log.join("00000000000000000013.json#1"), b"").expect("write");
        let prefix = Path::from_filesystem_path(&log).expect("path");
        let offset = prefix.clone().join("00000000000000000010");
        let folder = LocalFolder::default();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let names = |store: &dyn ObjectStore| -> Vec<String> {
            let listed: Vec<ObjectMeta> = runtime
                .block_on(store.list_with_offset(Some(&prefix), &offset).try_collect())
                .expect("lists");
            let mut names: Vec<String> = listed
                .iter()
                .map(|m| m.location.filename().unwrap_or_default().to_owned())
                .collect();
            names.sort();
            names
        };
        let ours = names(&folder);
        assert_eq!(
            ours,
            [
                "00000000000000000010.checkpoint.parquet",
                "00000000000000000010.json",
                "00000000000000000011.json",
                "00000000000000000012.json",
                "_last_checkpoint",
            ]
        );
        assert_eq!(ours, names(&LocalFileSystem::new()));
        // A folder past the offset: the general listing, which descends into it.
        std::fs::create_dir_all(log.join("_commits")).expect("mkdir");
        std::fs::write(log.join("_commits/00000000000000000013.uuid.json"), b"{}").expect("write");
        assert_eq!(names(&folder), names(&LocalFileSystem::new()));
        assert!(names(&folder).contains(&"00000000000000000013.uuid.json".to_owned()));
        // A commit is made once: the second of two writers is told it exists, and no
        // temporary stays.
        let commit = prefix.clone().join("00000000000000000014.json");
        let put = |mode: PutMode| {
            let opts = PutOptions {
                mode,
                ..PutOptions::default()
            };
            runtime.block_on(folder.put_opts(&commit, PutPayload::from_static(b"{}"), opts))
        };
        assert!(put(PutMode::Create).is_ok());
        assert!(matches!(
            put(PutMode::Create),
            Err(Error::AlreadyExists { .. })
        ));
        assert!(put(PutMode::Overwrite).is_ok());
        let hidden: Vec<_> = std::fs::read_dir(&log)
            .expect("read")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(hidden.is_empty(), "temporaries left: {hidden:?}");
    }
}
