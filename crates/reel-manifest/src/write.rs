use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use arrow_array::builder::{Int64Builder, StringBuilder, UInt32Builder, UInt64Builder};
use arrow_array::{
    Array, ArrayRef, Int64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow_ipc::writer::FileWriter;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::hash::{Hashing, content_hash_text};
use crate::{FORMAT_VERSION, ManifestError, ManifestMeta, columns as col, keys};

/// Rows per record batch. Batches keep every i32 string offset in range at
/// any manifest size, and `open` only decodes one header per batch.
pub(crate) const BATCH_ROWS: usize = 1 << 20;

/// One episode of a manifest, as given to the writer. The writer computes
/// `num_samples` (from the sampling rule) and `sample_offset` itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManifestRow<'a> {
    pub episode_id: &'a str,
    /// Object path of the canonical episode, relative to the store root.
    pub uri: &'a str,
    pub start_ns: i64,
    pub end_ns: i64,
    pub bytes: u64,
    pub camera_frames: u32,
    pub state_steps: u32,
    pub action_steps: u32,
    /// The canonical object's [`object_digest`](crate::object_digest); 0 when unknown.
    pub digest: u64,
}

/// Many episodes, column by column: every slice holds one value per episode,
/// in the order of the episode ids given beside them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManifestNumbers<'a> {
    pub start_ns: &'a [i64],
    pub end_ns: &'a [i64],
    pub bytes: &'a [u64],
    pub camera_frames: &'a [u32],
    pub state_steps: &'a [u32],
    pub action_steps: &'a [u32],
    /// Canonical object digests (0 where unknown); empty when none is known.
    pub digest: &'a [u64],
}

impl ManifestNumbers<'_> {
    /// The common length, if every column has it (the digests may be absent).
    fn len(&self) -> Option<usize> {
        let n = self.start_ns.len();
        let lens = [
            self.end_ns.len(),
            self.bytes.len(),
            self.camera_frames.len(),
            self.state_steps.len(),
            self.action_steps.len(),
        ];
        let digests = self.digest.is_empty() || self.digest.len() == n;
        (digests && lens.iter().all(|&l| l == n)).then_some(n)
    }
}

/// A string column of `rows` values (fewer if `values` runs short), sized up
/// front: growing the buffers by doubling costs more than filling them.
fn string_array<'s>(values: impl Iterator<Item = &'s str>, rows: usize) -> StringArray {
    let mut builder = StringBuilder::with_capacity(rows, rows * 24);
    for value in values {
        builder.append_value(value);
    }
    builder.finish()
}

/// The manifest's Arrow schema, with `meta` as schema metadata.
pub(crate) fn schema(meta: &ManifestMeta) -> Schema {
    let mut fields = vec![
        Field::new(col::EPISODE_ID, DataType::Utf8, false),
        Field::new(col::URI, DataType::Utf8, false),
        Field::new(col::START_NS, DataType::Int64, false),
        Field::new(col::END_NS, DataType::Int64, false),
        Field::new(col::BYTES, DataType::UInt64, false),
        Field::new(col::CAMERA_FRAMES, DataType::UInt32, false),
        Field::new(col::STATE_STEPS, DataType::UInt32, false),
        Field::new(col::ACTION_STEPS, DataType::UInt32, false),
        Field::new(col::NUM_SAMPLES, DataType::UInt64, false),
        Field::new(col::SAMPLE_OFFSET, DataType::UInt64, false),
        Field::new(col::DIGEST, DataType::UInt64, false),
    ];
    let mut metadata = meta_entries(meta, FORMAT_VERSION);
    // With a template, every row's path is known from its id: no `uri` column.
    if let Some(template) = &meta.uri_template {
        fields.retain(|f| f.name() != col::URI);
        metadata.insert(keys::URI_TEMPLATE.to_string(), template.to_string());
    }
    Schema::new_with_metadata(fields, metadata)
}

/// The schema metadata every manifest carries: its format version, query, snapshot,
/// creation time and sampling rule.
pub(crate) fn meta_entries(meta: &ManifestMeta, version: &str) -> HashMap<String, String> {
    HashMap::from([
        (keys::VERSION.to_string(), version.to_string()),
        (keys::QUERY.to_string(), meta.query.clone()),
        (keys::SNAPSHOT.to_string(), meta.warehouse_snapshot.clone()),
        (keys::CREATED_AT.to_string(), meta.created_at.clone()),
        (
            keys::PERIOD_NS.to_string(),
            meta.sampling.period_ns.to_string(),
        ),
        (
            keys::BEFORE_NS.to_string(),
            meta.sampling.before_ns.to_string(),
        ),
        (
            keys::AFTER_NS.to_string(),
            meta.sampling.after_ns.to_string(),
        ),
    ])
}

struct Columns {
    episode_id: StringBuilder,
    uri: StringBuilder,
    start_ns: Int64Builder,
    end_ns: Int64Builder,
    bytes: UInt64Builder,
    camera_frames: UInt32Builder,
    state_steps: UInt32Builder,
    action_steps: UInt32Builder,
    num_samples: UInt64Builder,
    sample_offset: UInt64Builder,
    digest: UInt64Builder,
}

impl Columns {
    fn with_capacity(n: usize) -> Self {
        Self {
            episode_id: StringBuilder::with_capacity(n, n * 20),
            uri: StringBuilder::with_capacity(n, n * 40),
            start_ns: Int64Builder::with_capacity(n),
            end_ns: Int64Builder::with_capacity(n),
            bytes: UInt64Builder::with_capacity(n),
            camera_frames: UInt32Builder::with_capacity(n),
            state_steps: UInt32Builder::with_capacity(n),
            action_steps: UInt32Builder::with_capacity(n),
            num_samples: UInt64Builder::with_capacity(n),
            sample_offset: UInt64Builder::with_capacity(n),
            digest: UInt64Builder::with_capacity(n),
        }
    }

    fn len(&self) -> usize {
        arrow_array::builder::ArrayBuilder::len(&self.start_ns)
    }

    /// The buffered rows as a batch; the builders start over with `n` rows of room.
    fn finish(
        &mut self,
        schema: &SchemaRef,
        n: usize,
    ) -> Result<RecordBatch, arrow_schema::ArrowError> {
        let mut full = std::mem::replace(self, Self::with_capacity(n));
        let this = &mut full;
        let uris: Option<ArrayRef> = schema
            .column_with_name(col::URI)
            .map(|_| Arc::new(this.uri.finish()) as ArrayRef);
        let arrays: Vec<ArrayRef> = [Arc::new(this.episode_id.finish()) as ArrayRef]
            .into_iter()
            .chain(uris)
            .chain([
                Arc::new(this.start_ns.finish()) as ArrayRef,
                Arc::new(this.end_ns.finish()),
                Arc::new(this.bytes.finish()),
                Arc::new(this.camera_frames.finish()),
                Arc::new(this.state_steps.finish()),
                Arc::new(this.action_steps.finish()),
                Arc::new(this.num_samples.finish()),
                Arc::new(this.sample_offset.finish()),
                Arc::new(this.digest.finish()),
            ])
            .collect();
        RecordBatch::try_new(schema.clone(), arrays)
    }
}

type IpcFile = FileWriter<BufWriter<Hashing<File>>>;

/// The thread that writes finished batches to the file while the caller
/// builds the next one.
struct BatchSink {
    batches: SyncSender<RecordBatch>,
    worker: JoinHandle<Result<IpcFile, ManifestError>>,
    tmp: PathBuf,
}

impl BatchSink {
    fn start(writer: IpcFile, file: File, tmp: PathBuf) -> Self {
        // One batch in flight: building and writing overlap, memory stays bounded.
        let (batches, incoming) = sync_channel::<RecordBatch>(1);
        let path = tmp.clone();
        let worker = std::thread::spawn(move || write_batches(writer, file, &path, incoming));
        Self {
            batches,
            worker,
            tmp,
        }
    }

    /// Waits for every batch to be written and returns the file.
    fn close(self) -> Result<IpcFile, ManifestError> {
        drop(self.batches);
        self.worker.join().unwrap_or_else(|_| {
            Err(ManifestError::io(&self.tmp)(std::io::Error::other(
                "writer thread panicked",
            )))
        })
    }
}

/// Writes each batch, and syncs the batches written so far in the background
/// while the next one is written: the final sync then waits for the last
/// batch only.
fn write_batches(
    mut writer: IpcFile,
    file: File,
    tmp: &Path,
    batches: Receiver<RecordBatch>,
) -> Result<IpcFile, ManifestError> {
    let arrow = |source| ManifestError::Arrow {
        path: tmp.to_path_buf(),
        source,
    };
    let wait =
        |syncing: Option<JoinHandle<std::io::Result<()>>>| match syncing.map(JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(ManifestError::io(tmp)(e)),
            Some(Err(_)) => Err(ManifestError::io(tmp)(std::io::Error::other(
                "sync thread panicked",
            ))),
        };
    let mut syncing = None;
    for batch in batches {
        writer.write(&batch).map_err(arrow)?;
        wait(syncing.take())?;
        let handle = file.try_clone().map_err(ManifestError::io(tmp))?;
        syncing = Some(std::thread::spawn(move || handle.sync_data()));
    }
    wait(syncing)?;
    Ok(writer)
}

/// An Arrow IPC file written under a temporary name, batch by batch on a thread of
/// its own, then named by its content hash in the footer, synced and renamed into
/// place: readers never see a half-written file. Dropped unfinished, it removes
/// the temporary.
pub(crate) struct IpcOut {
    path: PathBuf,
    tmp: PathBuf,
    schema: SchemaRef,
    /// The writer thread; `None` once finished or failed.
    sink: Option<BatchSink>,
    finished: bool,
}

impl IpcOut {
    pub(crate) fn create(path: &Path, schema: Schema) -> Result<Self, ManifestError> {
        let path = path.to_path_buf();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(ManifestError::io(parent))?;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A writer of this file killed mid-write left its temporary; the next one
        // removes it (a failure to is no reason not to write).
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
        let _ = reel_io::remove_stale_temporaries(dir.unwrap_or(Path::new(".")), Some(&name));
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let file = File::create(&tmp).map_err(ManifestError::io(&tmp))?;
        let sync_handle = file.try_clone().map_err(ManifestError::io(&tmp))?;
        let schema: SchemaRef = Arc::new(schema);
        let writer =
            FileWriter::try_new_buffered(Hashing::new(file), &schema).map_err(|source| {
                ManifestError::Arrow {
                    path: tmp.clone(),
                    source,
                }
            })?;
        let sink = BatchSink::start(writer, sync_handle, tmp.clone());
        Ok(Self {
            path,
            tmp,
            schema,
            sink: Some(sink),
            finished: false,
        })
    }

    pub(crate) fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    pub(crate) fn arrow_error(&self, source: arrow_schema::ArrowError) -> ManifestError {
        ManifestError::Arrow {
            path: self.tmp.clone(),
            source,
        }
    }

    /// Hands a finished batch to the writer thread.
    pub(crate) fn send(&mut self, batch: RecordBatch) -> Result<(), ManifestError> {
        let Some(sink) = self.sink.as_ref() else {
            return Err(self.failed_earlier());
        };
        if sink.batches.send(batch).is_err() {
            // The writer thread stopped: its error says why.
            if let Some(sink) = self.sink.take() {
                sink.close()?;
            }
            return Err(self.failed_earlier());
        }
        Ok(())
    }

    fn failed_earlier(&self) -> ManifestError {
        ManifestError::io(&self.tmp)(std::io::Error::other(
            "an earlier write of this file failed",
        ))
    }

    /// Finishes the file, syncs it and renames it into place.
    pub(crate) fn finish(&mut self) -> Result<(), ManifestError> {
        let Some(sink) = self.sink.take() else {
            return Err(self.failed_earlier());
        };
        let mut writer = sink.close()?;
        // The footer names the hash of every byte before it: the file's identity
        // (a loader state records it), known without reading the file again.
        writer
            .get_mut()
            .flush()
            .map_err(ManifestError::io(&self.tmp))?;
        let hash = content_hash_text(writer.get_ref().get_ref().hash());
        writer.write_metadata(keys::CONTENT_HASH, hash);
        writer.finish().map_err(|source| self.arrow_error(source))?;
        let file = writer
            .into_inner()
            .map_err(|source| self.arrow_error(source))?
            .into_inner()
            .map_err(|e| ManifestError::Io {
                path: self.tmp.clone(),
                source: e.into_error(),
            })?
            .into_inner();
        file.sync_all().map_err(ManifestError::io(&self.tmp))?;
        std::fs::rename(&self.tmp, &self.path).map_err(ManifestError::io(&self.path))?;
        self.finished = true;
        Ok(())
    }
}

impl Drop for IpcOut {
    fn drop(&mut self) {
        if let Some(sink) = self.sink.take() {
            let _ = sink.close();
        }
        if !self.finished {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes a manifest row by row, in batches, to a temporary file that
/// [`ManifestWriter::finish`] renames into place: readers never see a
/// half-written manifest.
pub struct ManifestWriter {
    out: IpcOut,
    meta: ManifestMeta,
    columns: Columns,
    batch_rows: usize,
    rows: usize,
    samples: u64,
}

impl std::fmt::Debug for ManifestWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManifestWriter")
            .field("path", &self.out.path)
            .field("rows", &self.rows)
            .finish()
    }
}

impl ManifestWriter {
    /// Starts a manifest at `path`.
    pub fn create(path: impl AsRef<Path>, meta: &ManifestMeta) -> Result<Self, ManifestError> {
        if meta.sampling.period_ns == 0 {
            return Err(ManifestError::InvalidRow {
                row: 0,
                reason: "sampling period must be positive".into(),
            });
        }
        Ok(Self {
            out: IpcOut::create(path.as_ref(), schema(meta))?,
            meta: meta.clone(),
            columns: Columns::with_capacity(BATCH_ROWS),
            batch_rows: BATCH_ROWS,
            rows: 0,
            samples: 0,
        })
    }

    /// Rows per record batch (default 2^20). Smaller batches only matter to
    /// tests of multi-batch manifests.
    pub fn with_batch_rows(mut self, rows: usize) -> Self {
        self.batch_rows = rows.max(1);
        self.columns = Columns::with_capacity(self.batch_rows);
        self
    }

    /// Appends one episode.
    pub fn push(&mut self, row: &ManifestRow<'_>) -> Result<(), ManifestError> {
        if row.end_ns < row.start_ns {
            return Err(ManifestError::InvalidRow {
                row: self.rows,
                reason: format!(
                    "{}: end {} before start {}",
                    row.episode_id, row.end_ns, row.start_ns
                ),
            });
        }
        if let Some(template) = &self.meta.uri_template
            && !template.matches(row.uri, row.episode_id)
        {
            return Err(self.off_template(self.rows, row.uri, row.episode_id));
        }
        let n = self.meta.sampling.num_samples(row.start_ns, row.end_ns);
        let c = &mut self.columns;
        c.episode_id.append_value(row.episode_id);
        if self.meta.uri_template.is_none() {
            c.uri.append_value(row.uri);
        }
        c.start_ns.append_value(row.start_ns);
        c.end_ns.append_value(row.end_ns);
        c.bytes.append_value(row.bytes);
        c.camera_frames.append_value(row.camera_frames);
        c.state_steps.append_value(row.state_steps);
        c.action_steps.append_value(row.action_steps);
        c.num_samples.append_value(n);
        c.sample_offset.append_value(self.samples);
        c.digest.append_value(row.digest);
        self.samples += n;
        self.rows += 1;
        if self.columns.len() >= self.batch_rows {
            self.flush_batch()?;
        }
        Ok(())
    }

    /// Appends many episodes at once, column by column: the fast path for a
    /// query result (arrays are built straight from the slices, no per-row
    /// builder calls). `episode_ids` and `uris` must yield one value per row
    /// of `numbers`.
    pub fn push_columns<'s>(
        &mut self,
        episode_ids: impl IntoIterator<Item = &'s str>,
        uris: impl IntoIterator<Item = &'s str>,
        numbers: ManifestNumbers<'_>,
    ) -> Result<(), ManifestError> {
        let Some(n) = numbers.len() else {
            return Err(ManifestError::InvalidRow {
                row: self.rows,
                reason: "columns of different lengths".into(),
            });
        };
        if let Some(bad) = (0..n).find(|&i| numbers.end_ns[i] < numbers.start_ns[i]) {
            return Err(ManifestError::InvalidRow {
                row: self.rows + bad,
                reason: format!(
                    "end {} before start {}",
                    numbers.end_ns[bad], numbers.start_ns[bad]
                ),
            });
        }
        // Rows pushed one by one so far close their own batch.
        if self.columns.len() > 0 {
            self.flush_batch()?;
        }
        let (mut ids, mut uris) = (episode_ids.into_iter(), uris.into_iter());
        let mut start = 0;
        while start < n {
            let end = (start + self.batch_rows).min(n);
            let rows = end - start;
            let short = |column: &str| ManifestError::InvalidRow {
                row: self.rows + rows,
                reason: format!("fewer {column} than rows"),
            };
            let id_array = string_array(ids.by_ref().take(rows), rows);
            if id_array.len() != rows {
                return Err(short("episode ids"));
            }
            // With a template the paths are checked against it, not stored.
            let uri_array = match &self.meta.uri_template {
                None => {
                    let uri_array = string_array(uris.by_ref().take(rows), rows);
                    if uri_array.len() != rows {
                        return Err(short("uris"));
                    }
                    Some(Arc::new(uri_array) as ArrayRef)
                }
                Some(template) => {
                    let mut checked = 0;
                    for (i, uri) in uris.by_ref().take(rows).enumerate() {
                        let id = id_array.value(i);
                        if !template.matches(uri, id) {
                            return Err(self.off_template(self.rows + i, uri, id));
                        }
                        checked += 1;
                    }
                    if checked != rows {
                        return Err(short("uris"));
                    }
                    None
                }
            };
            let (starts, ends) = (&numbers.start_ns[start..end], &numbers.end_ns[start..end]);
            let sampling = self.meta.sampling;
            let num_samples: Vec<u64> = starts
                .iter()
                .zip(ends)
                .map(|(&s, &e)| sampling.num_samples(s, e))
                .collect();
            let mut offsets = Vec::with_capacity(rows);
            for &k in &num_samples {
                offsets.push(self.samples);
                self.samples += k;
            }
            let arrays: Vec<ArrayRef> = [Arc::new(id_array) as ArrayRef]
                .into_iter()
                .chain(uri_array)
                .chain([
                    Arc::new(Int64Array::from(starts.to_vec())) as ArrayRef,
                    Arc::new(Int64Array::from(ends.to_vec())),
                    Arc::new(UInt64Array::from(numbers.bytes[start..end].to_vec())),
                    Arc::new(UInt32Array::from(
                        numbers.camera_frames[start..end].to_vec(),
                    )),
                    Arc::new(UInt32Array::from(numbers.state_steps[start..end].to_vec())),
                    Arc::new(UInt32Array::from(numbers.action_steps[start..end].to_vec())),
                    Arc::new(UInt64Array::from(num_samples)),
                    Arc::new(UInt64Array::from(offsets)),
                    Arc::new(UInt64Array::from(if numbers.digest.is_empty() {
                        vec![0; rows]
                    } else {
                        numbers.digest[start..end].to_vec()
                    })),
                ])
                .collect();
            let batch = RecordBatch::try_new(self.out.schema().clone(), arrays)
                .map_err(|source| self.out.arrow_error(source))?;
            self.rows += rows;
            self.out.send(batch)?;
            start = end;
        }
        Ok(())
    }

    fn flush_batch(&mut self) -> Result<(), ManifestError> {
        let batch = self
            .columns
            .finish(self.out.schema(), self.batch_rows)
            .map_err(|source| self.out.arrow_error(source))?;
        self.out.send(batch)
    }

    /// A row whose path does not follow the manifest's template.
    fn off_template(&self, row: usize, uri: &str, id: &str) -> ManifestError {
        let template = self
            .meta
            .uri_template
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        ManifestError::InvalidRow {
            row,
            reason: format!("{id}: path {uri} does not follow the manifest's template {template}"),
        }
    }

    /// Finishes the file, syncs it and renames it into place. Returns the
    /// number of rows and samples written.
    pub fn finish(mut self) -> Result<(usize, u64), ManifestError> {
        // An empty manifest still carries one (empty) batch, so readers see
        // the same layout whatever the row count.
        if self.columns.len() > 0 || self.rows == 0 {
            self.flush_batch()?;
        }
        self.out.finish()?;
        Ok((self.rows, self.samples))
    }
}

/// Writes `rows` as a manifest at `path` (atomically). Returns the number of
/// samples.
pub fn write_manifest(
    path: impl AsRef<Path>,
    rows: &[ManifestRow<'_>],
    meta: &ManifestMeta,
) -> Result<u64, ManifestError> {
    let mut writer = ManifestWriter::create(path, meta)?;
    for row in rows {
        writer.push(row)?;
    }
    Ok(writer.finish()?.1)
}
