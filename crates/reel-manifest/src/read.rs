use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Int64Array, StringArray, UInt32Array, UInt64Array};
use arrow_buffer::Buffer;
use arrow_ipc::convert::try_fb_to_schema;
use arrow_ipc::reader::{FileDecoder, read_footer_length};
use arrow_schema::DataType;

use crate::layout::{BaseRef, SELECTION_LAYOUT, check_positions, parse_bases};
use crate::layout::{LAYOUT, URI_POSITION, check_batch_header, column, parse_meta};
use crate::{ManifestError, ManifestMeta, SELECTION_VERSION, columns as col, keys};

/// An episode's columns for one record batch, borrowed from the mapped file.
#[derive(Debug, Clone)]
struct EpisodeColumns {
    episode_id: StringArray,
    /// `None` where the manifest's template gives every row's path.
    uri: Option<StringArray>,
    start_ns: Int64Array,
    end_ns: Int64Array,
    bytes: UInt64Array,
    camera_frames: UInt32Array,
    state_steps: UInt32Array,
    action_steps: UInt32Array,
    /// Format version 2 on.
    digest: Option<UInt64Array>,
}

/// One record batch's sample columns, borrowed from the mapped file.
#[derive(Debug)]
struct Batch {
    rows: usize,
    /// A selection's rows: positions in its bases, taken in order.
    base_row: Option<UInt64Array>,
    /// Stored by a self-contained manifest; a selection's follow from its bases' times.
    num_samples: Option<UInt64Array>,
    sample_offset: UInt64Array,
}

/// A memory-mapped manifest. Cheap to open at any size; see the crate docs.
#[derive(Debug)]
pub struct Manifest {
    path: PathBuf,
    meta: ManifestMeta,
    batches: Vec<Batch>,
    /// First global row of each batch, plus the total at the end.
    row_starts: Vec<usize>,
    /// First global sample of each batch, plus the total at the end.
    sample_starts: Vec<u64>,
    /// Episode columns: a self-contained manifest's own, one per batch; a selection's
    /// bases' batches, base after base.
    columns: Vec<EpisodeColumns>,
    /// First row (of the bases taken in order, for a selection) of each of `columns`,
    /// plus the total.
    column_starts: Vec<usize>,
    /// A selection's bases, opened, as its metadata names them.
    bases: Vec<(BaseRef, Manifest)>,
    /// For a selection, the base each of `columns` comes from.
    column_base: Vec<usize>,
    /// Format version 3: rows that are positions in `bases`.
    selection: bool,
    /// The hash the footer names, or one computed over the file when first asked for
    /// (manifests written before the footer carried it).
    content_hash: std::sync::OnceLock<String>,
    /// The whole mapped file, for that computation.
    buffer: Buffer,
}

/// Opens a selection's base (a version 1 or 2 manifest) as the selection names it.
pub(crate) type OpenBase<'a> = dyn Fn(&BaseRef) -> Result<Manifest, ManifestError> + 'a;

impl Manifest {
    /// Maps the manifest at `path` and checks its format version and schema; a
    /// selection's bases come from `open_base`, and a selection is refused as `a_base`.
    pub(crate) fn map(
        path: &Path,
        a_base: bool,
        open_base: &OpenBase<'_>,
    ) -> Result<Self, ManifestError> {
        let path = path.to_path_buf();
        let file = std::fs::File::open(&path).map_err(ManifestError::io(&path))?;
        // SAFETY: manifests are immutable once renamed into place; Reel never
        // writes to a published manifest, and the map is read-only.
        let mmap = unsafe { memmap2::Mmap::map(&file) }.map_err(ManifestError::io(&path))?;
        let buffer = Buffer::from(bytes::Bytes::from_owner(mmap));
        Self::from_buffer(path, buffer, a_base, open_base)
    }

    fn from_buffer(
        path: PathBuf,
        buffer: Buffer,
        a_base: bool,
        open_base: &OpenBase<'_>,
    ) -> Result<Self, ManifestError> {
        let not_arrow = |reason: &str| ManifestError::NotArrow {
            path: path.clone(),
            reason: reason.into(),
        };
        if buffer.len() < 16 || &buffer[..6] != b"ARROW1" {
            return Err(not_arrow("missing the ARROW1 header"));
        }
        let trailer_start = buffer.len() - 10;
        let trailer: [u8; 10] = buffer[trailer_start..]
            .try_into()
            .map_err(|_| not_arrow("short trailer"))?;
        let footer_len = read_footer_length(trailer)
            .map_err(|_| not_arrow("missing the ARROW1 trailer (truncated?)"))?;
        if footer_len > trailer_start {
            return Err(ManifestError::corrupt(
                &path,
                format!("footer of {footer_len} bytes overruns the file"),
            ));
        }
        let footer = arrow_ipc::root_as_footer(&buffer[trailer_start - footer_len..trailer_start])
            .map_err(|e| ManifestError::corrupt(&path, format!("unreadable footer: {e}")))?;
        let fb_schema = footer
            .schema()
            .ok_or_else(|| ManifestError::corrupt(&path, "footer has no schema"))?;
        let schema = Arc::new(
            try_fb_to_schema(fb_schema)
                .map_err(|e| ManifestError::corrupt(&path, format!("unreadable schema: {e}")))?,
        );
        let meta = parse_meta(&path, schema.metadata())?;
        let selection =
            schema.metadata().get(keys::VERSION).map(String::as_str) == Some(SELECTION_VERSION);
        let layout: Vec<(DataType, usize)> = if selection {
            SELECTION_LAYOUT.to_vec()
        } else {
            // Version 1 manifests end at `sample_offset`; version 2 adds the digests, and
            // may give every row's path by a template instead of the `uri` column.
            let has_digest = schema.column_with_name(col::DIGEST).is_some();
            let has_uri = schema.column_with_name(col::URI).is_some();
            if !has_uri && meta.uri_template.is_none() {
                return Err(ManifestError::corrupt(
                    &path,
                    format!("no uri column and no {} either", keys::URI_TEMPLATE),
                ));
            }
            LAYOUT
                .iter()
                .enumerate()
                .filter(|(i, _)| {
                    (*i != URI_POSITION || has_uri) && (*i != LAYOUT.len() - 1 || has_digest)
                })
                .map(|(_, column)| column.clone())
                .collect()
        };
        let content_hash = std::sync::OnceLock::new();
        if let Some(hash) = footer
            .custom_metadata()
            .into_iter()
            .flatten()
            .find(|kv| kv.key() == Some(keys::CONTENT_HASH))
            .and_then(|kv| kv.value())
        {
            let _ = content_hash.set(hash.to_string());
        }

        // A selection's episodes are its bases' rows: open those first.
        let mut bases = Vec::new();
        let mut columns = Vec::new();
        let mut column_starts = vec![0usize];
        let mut column_base = Vec::new();
        if selection && a_base {
            // Before anything it names is opened: no selection leads the reader from
            // base to base, or round in a circle.
            return Err(ManifestError::corrupt(&path, "is itself a selection"));
        }
        if selection {
            let text = schema.metadata().get(keys::BASES).ok_or_else(|| {
                ManifestError::corrupt(&path, format!("a selection without {}", keys::BASES))
            })?;
            for base_ref in parse_bases(&path, text)? {
                let base = open_base(&base_ref)?;
                for c in &base.columns {
                    columns.push(c.clone());
                    column_base.push(bases.len());
                    column_starts.push(column_starts.last().unwrap_or(&0) + c.start_ns.len());
                }
                bases.push((base_ref, base));
            }
        }
        let base_rows = *column_starts.last().unwrap_or(&0) as u64;

        let mut decoder =
            FileDecoder::new(schema.clone(), footer.version()).with_require_alignment(true);
        // SAFETY: full validation scans every value (O(rows)), which is what
        // memory-mapping avoids. Instead each column gets the O(1) structural
        // check in `column`, and string values are bounds- and UTF-8-checked
        // on access (`EpisodeRef::str`), so corrupt bytes give errors, not UB.
        decoder = unsafe { decoder.with_skip_validation(true) };
        let blocks = footer
            .recordBatches()
            .ok_or_else(|| ManifestError::corrupt(&path, "no record batches"))?;
        let mut batches = Vec::with_capacity(blocks.len());
        let mut row_starts = vec![0usize];
        let mut sample_starts = vec![0u64];
        for block in blocks.iter() {
            let len = block.bodyLength() as usize + block.metaDataLength() as usize;
            let offset = block.offset() as usize;
            if offset
                .checked_add(len)
                .is_none_or(|end| end > trailer_start)
            {
                return Err(ManifestError::corrupt(
                    &path,
                    format!("record batch at {offset}+{len} overruns the file"),
                ));
            }
            let data = buffer.slice_with_length(offset, len);
            check_batch_header(
                &path,
                &data,
                block.metaDataLength() as usize,
                block.bodyLength() as usize,
                &layout,
            )?;
            let batch = decoder
                .read_record_batch(block, &data)
                .map_err(|source| ManifestError::Arrow {
                    path: path.clone(),
                    source,
                })?
                .ok_or_else(|| ManifestError::corrupt(&path, "empty record batch block"))?;
            let sample_offset: UInt64Array =
                column(&path, &batch, col::SAMPLE_OFFSET, &DataType::UInt64)?;
            let rows = sample_offset.len();
            let (base_row, num_samples) = if selection {
                let base_row: UInt64Array = column(&path, &batch, col::ROW, &DataType::UInt64)?;
                (Some(base_row), None)
            } else {
                columns.push(EpisodeColumns {
                    episode_id: column(&path, &batch, col::EPISODE_ID, &DataType::Utf8)?,
                    uri: if schema.column_with_name(col::URI).is_some() {
                        Some(column(&path, &batch, col::URI, &DataType::Utf8)?)
                    } else {
                        None
                    },
                    start_ns: column(&path, &batch, col::START_NS, &DataType::Int64)?,
                    end_ns: column(&path, &batch, col::END_NS, &DataType::Int64)?,
                    bytes: column(&path, &batch, col::BYTES, &DataType::UInt64)?,
                    camera_frames: column(&path, &batch, col::CAMERA_FRAMES, &DataType::UInt32)?,
                    state_steps: column(&path, &batch, col::STATE_STEPS, &DataType::UInt32)?,
                    action_steps: column(&path, &batch, col::ACTION_STEPS, &DataType::UInt32)?,
                    digest: if schema.column_with_name(col::DIGEST).is_some() {
                        Some(column(&path, &batch, col::DIGEST, &DataType::UInt64)?)
                    } else {
                        None
                    },
                });
                column_starts.push(column_starts.last().unwrap_or(&0) + rows);
                let num_samples = column(&path, &batch, col::NUM_SAMPLES, &DataType::UInt64)?;
                (None, Some(num_samples))
            };
            batches.push(Batch {
                rows,
                base_row,
                num_samples,
                sample_offset,
            });
            row_starts.push(row_starts.last().unwrap_or(&0) + rows);
        }
        // One pass over the positions (8 bytes a row), whoever wrote the selection: every
        // later lookup is inside the bases, and no episode is sampled twice.
        let runs: Vec<&[u64]> = batches
            .iter()
            .filter_map(|b| b.base_row.as_ref().map(|rows| rows.values().as_ref()))
            .collect();
        if let Err(bad) = check_positions(&runs, base_rows) {
            return Err(ManifestError::corrupt(
                &path,
                format!("row {}: {bad}", bad.row()),
            ));
        }
        let mut manifest = Self {
            path,
            meta,
            batches,
            row_starts,
            sample_starts: Vec::new(),
            columns,
            column_starts,
            bases,
            column_base,
            selection,
            content_hash,
            buffer,
        };
        // The cumulative offsets must continue exactly across batches.
        for b in 0..manifest.batches.len() {
            let samples_before = *sample_starts.last().unwrap_or(&0);
            let rows = manifest.batches[b].rows;
            if rows == 0 {
                sample_starts.push(samples_before);
                continue;
            }
            let first = manifest.batches[b].sample_offset.value(0);
            if first != samples_before {
                return Err(ManifestError::corrupt(
                    &manifest.path,
                    format!("batch starts at sample {first}, expected {samples_before}"),
                ));
            }
            let last = manifest.episode_at(b, rows - 1);
            let end = last.sample_offset().checked_add(last.num_samples());
            let end = end
                .ok_or_else(|| ManifestError::corrupt(&manifest.path, "sample count overflows"))?;
            sample_starts.push(end);
        }
        manifest.sample_starts = sample_starts;
        Ok(manifest)
    }

    /// The manifest's identity: the hash of its content (`xxh3_128:` and 32 hex digits),
    /// the same wherever the file is copied or however it is named. A manifest names it
    /// in its footer; one written before that is hashed whole on the first call.
    pub fn content_hash(&self) -> &str {
        self.content_hash
            .get_or_init(|| crate::hash::content_hash_of(&self.buffer))
    }

    /// Where the manifest was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The query, snapshot, creation time and sampling rule.
    pub fn meta(&self) -> &ManifestMeta {
        &self.meta
    }

    /// Episodes (rows).
    pub fn len(&self) -> usize {
        *self.row_starts.last().unwrap_or(&0)
    }

    /// True when the manifest lists no episode.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Training samples over all episodes.
    pub fn num_samples(&self) -> u64 {
        *self.sample_starts.last().unwrap_or(&0)
    }

    /// Total bytes of the listed episodes.
    pub fn total_bytes(&self) -> u64 {
        if self.selection {
            return self.episodes().map(|e| e.bytes()).sum();
        }
        self.columns
            .iter()
            .flat_map(|c| c.bytes.values().iter())
            .sum()
    }

    /// Each record batch's episode times, in order: its first row and its `start_ns` and
    /// `end_ns` values, borrowed from the mapped file. For walking many rows in order
    /// without a lookup per row; a selection has none of its own (see its bases).
    pub fn time_columns(&self) -> impl Iterator<Item = (usize, &[i64], &[i64])> {
        let own = if self.selection {
            0
        } else {
            self.columns.len()
        };
        self.columns
            .iter()
            .zip(&self.column_starts)
            .take(own)
            .map(|(c, &first)| {
                (
                    first,
                    c.start_ns.values().as_ref(),
                    c.end_ns.values().as_ref(),
                )
            })
    }

    /// Whether this manifest is a selection (format version 3): positions in the base
    /// manifests [`Manifest::bases`] names, not episodes of its own.
    pub fn is_selection(&self) -> bool {
        self.selection
    }

    /// A selection's bases, as it names them; empty for a self-contained manifest.
    pub fn bases(&self) -> impl Iterator<Item = &BaseRef> {
        self.bases.iter().map(|(base_ref, _)| base_ref)
    }

    /// Row `index` of batch `batch`, wherever its columns are.
    fn episode_at(&self, batch: usize, index: usize) -> EpisodeRef<'_> {
        let row = self.row_starts[batch] + index;
        let (c, at, holder) = match &self.batches[batch].base_row {
            None => (batch, index, self),
            Some(positions) => {
                // Checked at open to be inside the bases.
                let position = positions.value(index) as usize;
                let c = self.column_starts.partition_point(|&s| s <= position) - 1;
                let holder = &self.bases[self.column_base[c]].1;
                (c, position - self.column_starts[c], holder)
            }
        };
        EpisodeRef {
            manifest: self,
            batch,
            index,
            row,
            columns: &self.columns[c],
            at,
            holder,
        }
    }

    /// Episode `row`.
    pub fn episode(&self, row: usize) -> Result<EpisodeRef<'_>, ManifestError> {
        if row >= self.len() {
            return Err(ManifestError::RowOutOfRange {
                row,
                rows: self.len(),
            });
        }
        let batch = self.row_starts.partition_point(|&start| start <= row) - 1;
        Ok(self.episode_at(batch, row - self.row_starts[batch]))
    }

    /// Every episode, in order.
    pub fn episodes(&self) -> impl Iterator<Item = EpisodeRef<'_>> {
        self.batches
            .iter()
            .enumerate()
            .flat_map(move |(b, batch)| (0..batch.rows).map(move |i| self.episode_at(b, i)))
    }

    /// The first row of each distinct object (URI), in manifest order: the objects a run
    /// reads, each once. Fails on the first row whose URI is unreadable.
    pub fn distinct_objects(&self) -> Result<Vec<EpisodeRef<'_>>, ManifestError> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for episode in self.episodes() {
            if seen.insert(episode.uri()?) {
                out.push(episode);
            }
        }
        Ok(out)
    }

    /// Sample `index` of the whole manifest: its episode and anchor time.
    /// O(log rows): a search over batches, then over the batch's offsets.
    pub fn sample(&self, index: u64) -> Result<Sample<'_>, ManifestError> {
        let total = self.num_samples();
        if index >= total {
            return Err(ManifestError::SampleOutOfRange { index, total });
        }
        let b = self.sample_starts.partition_point(|&start| start <= index) - 1;
        let batch = &self.batches[b];
        let offsets = batch.sample_offset.values();
        // The last row whose offset is <= index; rows with no samples share
        // their successor's offset and are skipped by taking the last.
        let i = offsets.partition_point(|&o| o <= index) - 1;
        let k = index - offsets[i];
        let episode = self.episode_at(b, i);
        if k >= episode.num_samples() {
            return Err(ManifestError::corrupt(
                &self.path,
                format!("sample offsets do not cover sample {index}"),
            ));
        }
        let time_ns = self.meta.sampling.anchor_ns(episode.start_ns(), k);
        Ok(Sample {
            index,
            episode,
            local_index: k,
            time_ns,
        })
    }

    /// Rank `rank`'s share of the samples: contiguous, disjoint across ranks,
    /// together exactly the whole manifest.
    pub fn shard(&self, rank: usize, world: usize) -> Result<ShardView<'_>, ManifestError> {
        if world == 0 || rank >= world {
            return Err(ManifestError::Shard { rank, world });
        }
        let total = self.num_samples() as u128;
        let start = (total * rank as u128 / world as u128) as u64;
        let end = (total * (rank as u128 + 1) / world as u128) as u64;
        Ok(ShardView {
            manifest: self,
            start,
            end,
        })
    }
}

/// One episode of a manifest, borrowed from the mapped file.
#[derive(Debug, Clone, Copy)]
pub struct EpisodeRef<'m> {
    manifest: &'m Manifest,
    batch: usize,
    index: usize,
    row: usize,
    /// The episode's columns and its index in them: the manifest's own, or, in a
    /// selection, its base's.
    columns: &'m EpisodeColumns,
    at: usize,
    /// The manifest those columns belong to.
    holder: &'m Manifest,
}

impl<'m> EpisodeRef<'m> {
    /// A string value, checked against its buffers: validation was skipped
    /// at open time to keep opening O(1).
    fn str(&self, array: &'m StringArray, column: &'static str) -> Result<&'m str, ManifestError> {
        let offsets = array.value_offsets();
        let values = array.values();
        let (a, b) = (offsets[self.at], offsets[self.at + 1]);
        let bytes = usize::try_from(a)
            .ok()
            .zip(usize::try_from(b).ok())
            .filter(|(a, b)| a <= b && *b <= values.len())
            .map(|(a, b)| &values[a..b])
            .ok_or_else(|| {
                ManifestError::corrupt(
                    &self.holder.path,
                    format!("row {}: {column} offsets {a}..{b} out of bounds", self.row),
                )
            })?;
        std::str::from_utf8(bytes).map_err(|_| {
            ManifestError::corrupt(
                &self.holder.path,
                format!("row {}: {column} is not UTF-8", self.row),
            )
        })
    }

    /// Global row number.
    pub fn row(&self) -> usize {
        self.row
    }
    pub fn episode_id(&self) -> Result<&'m str, ManifestError> {
        self.str(&self.columns.episode_id, col::EPISODE_ID)
    }
    /// Object path of the canonical episode, relative to the store root: the `uri`
    /// column's value, or the manifest's template filled with the episode id.
    pub fn uri(&self) -> Result<std::borrow::Cow<'m, str>, ManifestError> {
        match (&self.columns.uri, &self.holder.meta.uri_template) {
            (Some(uris), _) => Ok(std::borrow::Cow::Borrowed(self.str(uris, col::URI)?)),
            (None, Some(template)) => Ok(std::borrow::Cow::Owned(template.uri(self.episode_id()?))),
            (None, None) => Err(ManifestError::corrupt(
                &self.holder.path,
                "no uri column and no uri template",
            )),
        }
    }
    pub fn start_ns(&self) -> i64 {
        self.columns.start_ns.value(self.at)
    }
    pub fn end_ns(&self) -> i64 {
        self.columns.end_ns.value(self.at)
    }
    pub fn bytes(&self) -> u64 {
        self.columns.bytes.value(self.at)
    }
    pub fn camera_frames(&self) -> u32 {
        self.columns.camera_frames.value(self.at)
    }
    pub fn state_steps(&self) -> u32 {
        self.columns.state_steps.value(self.at)
    }
    pub fn action_steps(&self) -> u32 {
        self.columns.action_steps.value(self.at)
    }
    /// Samples of this episode under the manifest's sampling rule.
    pub fn num_samples(&self) -> u64 {
        match &self.manifest.batches[self.batch].num_samples {
            Some(stored) => stored.value(self.index),
            None => self
                .manifest
                .meta
                .sampling
                .num_samples(self.start_ns(), self.end_ns()),
        }
    }
    /// Global index of this episode's first sample.
    pub fn sample_offset(&self) -> u64 {
        self.manifest.batches[self.batch]
            .sample_offset
            .value(self.index)
    }
    /// The canonical object's [`object_digest`](crate::object_digest) when the manifest
    /// was written; `None` in a version 1 manifest or where the warehouse had none.
    pub fn digest(&self) -> Option<u64> {
        let digests = self.columns.digest.as_ref()?;
        Some(digests.value(self.at)).filter(|&d| d != 0)
    }
}

/// A training sample: an episode and an anchor time in it.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'m> {
    /// Global sample index.
    pub index: u64,
    pub episode: EpisodeRef<'m>,
    /// Index of the sample within its episode.
    pub local_index: u64,
    /// Anchor time, in the episode's log-time nanoseconds.
    pub time_ns: i64,
}

/// One rank's contiguous slice of a manifest's samples.
#[derive(Debug, Clone, Copy)]
pub struct ShardView<'m> {
    manifest: &'m Manifest,
    start: u64,
    end: u64,
}

impl<'m> ShardView<'m> {
    /// Samples in this shard.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
    /// The global sample range of this shard.
    pub fn range(&self) -> std::ops::Range<u64> {
        self.start..self.end
    }
    /// Local sample `index` of this shard.
    pub fn sample(&self, index: u64) -> Result<Sample<'m>, ManifestError> {
        if index >= self.len() {
            return Err(ManifestError::SampleOutOfRange {
                index,
                total: self.len(),
            });
        }
        self.manifest.sample(self.start + index)
    }
}
