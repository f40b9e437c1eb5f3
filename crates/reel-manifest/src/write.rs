use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{Int64Builder, StringBuilder, UInt32Builder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_ipc::writer::FileWriter;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

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
}

/// The manifest's Arrow schema, with `meta` as schema metadata.
pub(crate) fn schema(meta: &ManifestMeta) -> Schema {
    let fields = vec![
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
    ];
    let metadata = HashMap::from([
        (keys::VERSION.to_string(), FORMAT_VERSION.to_string()),
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
    ]);
    Schema::new_with_metadata(fields, metadata)
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
}

impl Columns {
    fn new() -> Self {
        let n = BATCH_ROWS;
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
        }
    }

    fn len(&self) -> usize {
        arrow_array::builder::ArrayBuilder::len(&self.start_ns)
    }

    fn finish(&mut self, schema: &SchemaRef) -> Result<RecordBatch, arrow_schema::ArrowError> {
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(self.episode_id.finish()),
            Arc::new(self.uri.finish()),
            Arc::new(self.start_ns.finish()),
            Arc::new(self.end_ns.finish()),
            Arc::new(self.bytes.finish()),
            Arc::new(self.camera_frames.finish()),
            Arc::new(self.state_steps.finish()),
            Arc::new(self.action_steps.finish()),
            Arc::new(self.num_samples.finish()),
            Arc::new(self.sample_offset.finish()),
        ];
        RecordBatch::try_new(schema.clone(), arrays)
    }
}

/// Writes a manifest row by row, in batches, to a temporary file that
/// [`ManifestWriter::finish`] renames into place: readers never see a
/// half-written manifest.
pub struct ManifestWriter {
    path: PathBuf,
    tmp: PathBuf,
    meta: ManifestMeta,
    schema: SchemaRef,
    /// `None` once finished; an unfinished writer removes its temporary file on drop.
    writer: Option<FileWriter<BufWriter<File>>>,
    columns: Columns,
    batch_rows: usize,
    rows: usize,
    samples: u64,
}

impl std::fmt::Debug for ManifestWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManifestWriter")
            .field("path", &self.path)
            .field("rows", &self.rows)
            .finish()
    }
}

impl ManifestWriter {
    /// Starts a manifest at `path`.
    pub fn create(path: impl AsRef<Path>, meta: &ManifestMeta) -> Result<Self, ManifestError> {
        let path = path.as_ref().to_path_buf();
        if meta.sampling.period_ns == 0 {
            return Err(ManifestError::InvalidRow {
                row: 0,
                reason: "sampling period must be positive".into(),
            });
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(ManifestError::io(parent))?;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let file = File::create(&tmp).map_err(ManifestError::io(&tmp))?;
        let schema: SchemaRef = Arc::new(schema(meta));
        let writer =
            FileWriter::try_new_buffered(file, &schema).map_err(|source| ManifestError::Arrow {
                path: tmp.clone(),
                source,
            })?;
        Ok(Self {
            path,
            tmp,
            meta: meta.clone(),
            schema,
            writer: Some(writer),
            columns: Columns::new(),
            batch_rows: BATCH_ROWS,
            rows: 0,
            samples: 0,
        })
    }

    /// Rows per record batch (default 2^20). Smaller batches only matter to
    /// tests of multi-batch manifests.
    pub fn with_batch_rows(mut self, rows: usize) -> Self {
        self.batch_rows = rows.max(1);
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
        let n = self.meta.sampling.num_samples(row.start_ns, row.end_ns);
        let c = &mut self.columns;
        c.episode_id.append_value(row.episode_id);
        c.uri.append_value(row.uri);
        c.start_ns.append_value(row.start_ns);
        c.end_ns.append_value(row.end_ns);
        c.bytes.append_value(row.bytes);
        c.camera_frames.append_value(row.camera_frames);
        c.state_steps.append_value(row.state_steps);
        c.action_steps.append_value(row.action_steps);
        c.num_samples.append_value(n);
        c.sample_offset.append_value(self.samples);
        self.samples += n;
        self.rows += 1;
        if self.columns.len() >= self.batch_rows {
            self.flush_batch()?;
        }
        Ok(())
    }

    fn flush_batch(&mut self) -> Result<(), ManifestError> {
        let arrow = |source| ManifestError::Arrow {
            path: self.tmp.clone(),
            source,
        };
        let batch = self.columns.finish(&self.schema).map_err(arrow)?;
        match self.writer.as_mut() {
            Some(writer) => writer.write(&batch).map_err(|source| ManifestError::Arrow {
                path: self.tmp.clone(),
                source,
            }),
            None => Ok(()),
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
        let arrow = |source| ManifestError::Arrow {
            path: self.tmp.clone(),
            source,
        };
        let Some(mut writer) = self.writer.take() else {
            return Ok((self.rows, self.samples));
        };
        writer.finish().map_err(arrow)?;
        let file = writer
            .into_inner()
            .map_err(|source| ManifestError::Arrow {
                path: self.tmp.clone(),
                source,
            })?
            .into_inner()
            .map_err(|e| ManifestError::Io {
                path: self.tmp.clone(),
                source: e.into_error(),
            })?;
        file.sync_all().map_err(ManifestError::io(&self.tmp))?;
        std::fs::rename(&self.tmp, &self.path).map_err(ManifestError::io(&self.path))?;
        Ok((self.rows, self.samples))
    }
}

impl Drop for ManifestWriter {
    fn drop(&mut self) {
        if self.writer.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
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
