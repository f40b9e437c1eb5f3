//! The episode warehouse: one Parquet row per ingested episode.
//!
//! Ingest appends files under `episodes/` (never rewrites one); curation
//! queries them as the SQL table `episodes`, seeing the latest ingestion of
//! each episode. Each file name is derived from what produced it, so writing
//! the same rows again replaces a file with identical content: ingestion is
//! idempotent by (episode id, pipeline version). The schema is in
//! `docs/FORMAT.md`.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, StringBuilder, TimestampNanosecondBuilder,
    UInt32Builder, UInt64Builder,
};
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

/// The warehouse schema version (stamped on every row). Version 2 added the `source_*`
/// columns, version 3 `canonical_digest`; an older part reads as if they were null.
pub const WAREHOUSE_SCHEMA_VERSION: u32 = 3;

/// The folder of the `episodes` table inside a warehouse store.
pub const EPISODES_PREFIX: &str = "episodes/";

/// Quality-check outcome of one episode: a flag per check, and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QcSummary {
    pub camera_blackout: bool,
    pub frozen_frames: bool,
    pub corrupt_frames: bool,
    pub choppy_joints: bool,
    pub hand_dropout: bool,
    pub timestamp_gap: bool,
    pub rate_shortfall: bool,
    /// Share of camera frames judged dark.
    pub dark_frame_ratio: f64,
    /// Share of camera frames judged frozen.
    pub frozen_frame_ratio: f64,
    /// Largest single-step joint change, radians.
    pub max_joint_step_rad: f64,
}

impl QcSummary {
    /// True when no check flagged the episode.
    pub fn pass(&self) -> bool {
        !(self.camera_blackout
            || self.frozen_frames
            || self.corrupt_frames
            || self.choppy_joints
            || self.hand_dropout
            || self.timestamp_gap
            || self.rate_shortfall)
    }

    /// Names of the raised flags, comma-separated (for humans and LIKE queries).
    pub fn flags(&self) -> String {
        let named = [
            (self.camera_blackout, "camera_blackout"),
            (self.frozen_frames, "frozen_frames"),
            (self.corrupt_frames, "corrupt_frames"),
            (self.choppy_joints, "choppy_joints"),
            (self.hand_dropout, "hand_dropout"),
            (self.timestamp_gap, "timestamp_gap"),
            (self.rate_shortfall, "rate_shortfall"),
        ];
        named
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The dataset an imported episode came from (`reel-import`): none for an episode a
/// robot recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceDataset {
    /// Its format: `lerobot`, `hdf5.aloha`, `hdf5.robomimic`, `hdf5.mapped`.
    pub format: String,
    /// The dataset: its folder, its repository id, or the HDF5 file.
    pub dataset: String,
    /// The dataset's revision (LeRobot: format version and snapshot), when it has one.
    #[serde(default)]
    pub revision: String,
    /// The episode's index in the dataset, when it numbers its episodes.
    #[serde(default)]
    pub episode_index: Option<i64>,
    /// The dataset's frame rate, Hz, when it has one.
    #[serde(default)]
    pub fps: Option<f64>,
}

/// One warehouse row.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WarehouseRow<'a> {
    pub episode_id: &'a str,
    pub pipeline_version: &'a str,
    pub robot_id: &'a str,
    pub robot_software_version: &'a str,
    pub task: &'a str,
    pub operator: &'a str,
    pub success: bool,
    pub recorded_at_ns: i64,
    pub start_ns: i64,
    pub end_ns: i64,
    pub cameras: u32,
    pub camera_frames: u32,
    pub state_steps: u32,
    pub action_steps: u32,
    pub hand_steps: u32,
    pub bytes: u64,
    pub qc: QcSummary,
    /// Object path of the canonical episode, relative to the store root.
    pub uri: &'a str,
    pub ingested_at_ns: i64,
    /// Where an imported episode came from.
    pub source: Option<&'a SourceDataset>,
    /// The canonical object's [`object_digest`](crate::object_digest).
    pub canonical_digest: Option<u64>,
}

/// A stable 64-bit key of an episode id (FNV-1a): grouping on it is much
/// cheaper than on the string when the warehouse deduplicates versions.
pub fn episode_key(episode_id: &str) -> u64 {
    crate::fnv1a(episode_id.bytes())
}

/// The warehouse's Arrow schema.
pub fn warehouse_schema() -> SchemaRef {
    let utf8 = |n: &str| Field::new(n, DataType::Utf8, false);
    let boolean = |n: &str| Field::new(n, DataType::Boolean, false);
    let float = |n: &str| Field::new(n, DataType::Float64, false);
    let u32f = |n: &str| Field::new(n, DataType::UInt32, false);
    let i64f = |n: &str| Field::new(n, DataType::Int64, false);
    Arc::new(Schema::new(vec![
        utf8("episode_id"),
        Field::new("episode_key", DataType::UInt64, false),
        utf8("pipeline_version"),
        u32f("schema_version"),
        utf8("robot_id"),
        utf8("robot_software_version"),
        utf8("task"),
        utf8("operator"),
        boolean("success"),
        Field::new(
            "recorded_at",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
        i64f("start_ns"),
        i64f("end_ns"),
        float("duration_s"),
        u32f("cameras"),
        u32f("camera_frames"),
        u32f("state_steps"),
        u32f("action_steps"),
        u32f("hand_steps"),
        Field::new("bytes", DataType::UInt64, false),
        boolean("qc_pass"),
        utf8("qc_flags"),
        boolean("qc_camera_blackout"),
        boolean("qc_frozen_frames"),
        boolean("qc_corrupt_frames"),
        boolean("qc_choppy_joints"),
        boolean("qc_hand_dropout"),
        boolean("qc_timestamp_gap"),
        boolean("qc_rate_shortfall"),
        float("qc_dark_frame_ratio"),
        float("qc_frozen_frame_ratio"),
        float("qc_max_joint_step_rad"),
        utf8("uri"),
        i64f("ingested_at_ns"),
        // Version 2: null for an episode a robot recorded.
        Field::new("source_format", DataType::Utf8, true),
        Field::new("source_dataset", DataType::Utf8, true),
        Field::new("source_revision", DataType::Utf8, true),
        Field::new("source_episode_index", DataType::Int64, true),
        Field::new("source_fps", DataType::Float64, true),
        // Version 3: the canonical object's digest (`reel_manifest::object_digest`).
        Field::new("canonical_digest", DataType::UInt64, true),
    ]))
}

/// Builds warehouse record batches row by row.
#[derive(Debug, Default)]
pub struct WarehouseBatch {
    episode_id: StringBuilder,
    episode_key: UInt64Builder,
    pipeline_version: StringBuilder,
    schema_version: UInt32Builder,
    robot_id: StringBuilder,
    robot_software_version: StringBuilder,
    task: StringBuilder,
    operator: StringBuilder,
    success: BooleanBuilder,
    recorded_at: TimestampNanosecondBuilder,
    start_ns: Int64Builder,
    end_ns: Int64Builder,
    duration_s: Float64Builder,
    cameras: UInt32Builder,
    camera_frames: UInt32Builder,
    state_steps: UInt32Builder,
    action_steps: UInt32Builder,
    hand_steps: UInt32Builder,
    bytes: UInt64Builder,
    qc_pass: BooleanBuilder,
    qc_flags: StringBuilder,
    qc_bools: [BooleanBuilder; 7],
    qc_dark: Float64Builder,
    qc_frozen: Float64Builder,
    qc_step: Float64Builder,
    uri: StringBuilder,
    ingested_at_ns: Int64Builder,
    source_format: StringBuilder,
    source_dataset: StringBuilder,
    source_revision: StringBuilder,
    source_episode_index: Int64Builder,
    source_fps: Float64Builder,
    canonical_digest: UInt64Builder,
    rows: usize,
}

impl WarehouseBatch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Rows buffered.
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn push(&mut self, row: &WarehouseRow<'_>) {
        self.episode_id.append_value(row.episode_id);
        self.episode_key.append_value(episode_key(row.episode_id));
        self.pipeline_version.append_value(row.pipeline_version);
        self.schema_version.append_value(WAREHOUSE_SCHEMA_VERSION);
        self.robot_id.append_value(row.robot_id);
        self.robot_software_version
            .append_value(row.robot_software_version);
        self.task.append_value(row.task);
        self.operator.append_value(row.operator);
        self.success.append_value(row.success);
        self.recorded_at.append_value(row.recorded_at_ns);
        self.start_ns.append_value(row.start_ns);
        self.end_ns.append_value(row.end_ns);
        self.duration_s
            .append_value((row.end_ns - row.start_ns) as f64 / 1e9);
        self.cameras.append_value(row.cameras);
        self.camera_frames.append_value(row.camera_frames);
        self.state_steps.append_value(row.state_steps);
        self.action_steps.append_value(row.action_steps);
        self.hand_steps.append_value(row.hand_steps);
        self.bytes.append_value(row.bytes);
        let qc = &row.qc;
        self.qc_pass.append_value(qc.pass());
        self.qc_flags.append_value(qc.flags());
        let flags = [
            qc.camera_blackout,
            qc.frozen_frames,
            qc.corrupt_frames,
            qc.choppy_joints,
            qc.hand_dropout,
            qc.timestamp_gap,
            qc.rate_shortfall,
        ];
        for (builder, flag) in self.qc_bools.iter_mut().zip(flags) {
            builder.append_value(flag);
        }
        self.qc_dark.append_value(qc.dark_frame_ratio);
        self.qc_frozen.append_value(qc.frozen_frame_ratio);
        self.qc_step.append_value(qc.max_joint_step_rad);
        self.uri.append_value(row.uri);
        self.ingested_at_ns.append_value(row.ingested_at_ns);
        let source = row.source;
        let revision = source
            .map(|s| s.revision.as_str())
            .filter(|r| !r.is_empty());
        self.source_format
            .append_option(source.map(|s| s.format.as_str()));
        self.source_dataset
            .append_option(source.map(|s| s.dataset.as_str()));
        self.source_revision.append_option(revision);
        self.source_episode_index
            .append_option(source.and_then(|s| s.episode_index));
        self.source_fps.append_option(source.and_then(|s| s.fps));
        self.canonical_digest.append_option(row.canonical_digest);
        self.rows += 1;
    }

    /// The buffered rows as one record batch; the builder starts over.
    pub fn finish(&mut self) -> Result<RecordBatch, arrow_schema::ArrowError> {
        let mut arrays: Vec<ArrayRef> = vec![
            Arc::new(self.episode_id.finish()),
            Arc::new(self.episode_key.finish()),
            Arc::new(self.pipeline_version.finish()),
            Arc::new(self.schema_version.finish()),
            Arc::new(self.robot_id.finish()),
            Arc::new(self.robot_software_version.finish()),
            Arc::new(self.task.finish()),
            Arc::new(self.operator.finish()),
            Arc::new(self.success.finish()),
            Arc::new(self.recorded_at.finish().with_timezone("UTC")),
            Arc::new(self.start_ns.finish()),
            Arc::new(self.end_ns.finish()),
            Arc::new(self.duration_s.finish()),
            Arc::new(self.cameras.finish()),
            Arc::new(self.camera_frames.finish()),
            Arc::new(self.state_steps.finish()),
            Arc::new(self.action_steps.finish()),
            Arc::new(self.hand_steps.finish()),
            Arc::new(self.bytes.finish()),
            Arc::new(self.qc_pass.finish()),
            Arc::new(self.qc_flags.finish()),
        ];
        arrays.extend(
            self.qc_bools
                .iter_mut()
                .map(|b| Arc::new(b.finish()) as ArrayRef),
        );
        arrays.push(Arc::new(self.qc_dark.finish()));
        arrays.push(Arc::new(self.qc_frozen.finish()));
        arrays.push(Arc::new(self.qc_step.finish()));
        arrays.push(Arc::new(self.uri.finish()));
        arrays.push(Arc::new(self.ingested_at_ns.finish()));
        arrays.push(Arc::new(self.source_format.finish()));
        arrays.push(Arc::new(self.source_dataset.finish()));
        arrays.push(Arc::new(self.source_revision.finish()));
        arrays.push(Arc::new(self.source_episode_index.finish()));
        arrays.push(Arc::new(self.source_fps.finish()));
        arrays.push(Arc::new(self.canonical_digest.finish()));
        self.rows = 0;
        RecordBatch::try_new(warehouse_schema(), arrays)
    }
}

/// Encodes record batches as one zstd-compressed Parquet file.
pub fn encode_parquet(batches: &[RecordBatch]) -> Result<Vec<u8>, parquet::errors::ParquetError> {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .set_max_row_group_row_count(Some(1 << 20))
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, warehouse_schema(), Some(props))?;
    for batch in batches {
        writer.write(batch)?;
    }
    writer.close()?;
    Ok(out)
}

/// Whether `part`, a warehouse part [`encode_parquet`] wrote, holds exactly `rows` apart
/// from their ingestion time: writing them again would change nothing a query can use.
/// A part that cannot be read does not hold them.
pub fn part_holds(part: bytes::Bytes, rows: &[WarehouseRow<'_>]) -> bool {
    let Some(written) = ParquetRecordBatchReaderBuilder::try_new(part)
        // One row more than expected, so that a longer part reads as longer.
        .and_then(|b| b.with_batch_size(rows.len() + 1).build())
        .ok()
        .and_then(|mut reader| reader.next())
        .and_then(|batch| batch.ok())
    else {
        return false;
    };
    let Some(ingested_at_ns) = written
        .column_by_name("ingested_at_ns")
        .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
        .filter(|c| !c.is_empty())
        .map(|c| c.value(0))
    else {
        return false;
    };
    let mut expected = WarehouseBatch::new();
    for row in rows {
        expected.push(&WarehouseRow {
            ingested_at_ns,
            ..*row
        });
    }
    expected.finish().is_ok_and(|expected| {
        expected.num_rows() == written.num_rows()
            && expected.num_columns() == written.num_columns()
            && (expected.columns().iter())
                .zip(written.columns())
                .all(|(a, b)| a.as_ref() == b.as_ref())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_spread() {
        assert_eq!(episode_key(""), 0xcbf2_9ce4_8422_2325);
        assert_ne!(episode_key("ep-1"), episode_key("ep-2"));
    }

    #[test]
    fn rows_encode_to_parquet() {
        let mut batch = WarehouseBatch::new();
        let qc = QcSummary {
            frozen_frames: true,
            choppy_joints: true,
            ..Default::default()
        };
        batch.push(&WarehouseRow {
            episode_id: "ep-1",
            end_ns: 2_000_000_000,
            qc,
            ..Default::default()
        });
        let rb = batch.finish().expect("batch");
        assert_eq!(rb.num_rows(), 1);
        assert!(batch.is_empty());
        let bytes = encode_parquet(&[rb]).expect("encodes");
        assert_eq!(&bytes[..4], b"PAR1");
        assert_eq!(qc.flags(), "frozen_frames,choppy_joints");
        assert!(!qc.pass());
    }

    #[test]
    fn source_columns_are_null_for_recordings_and_set_for_imports() {
        let imported = SourceDataset {
            format: "lerobot".into(),
            dataset: "lerobot/pusht".into(),
            revision: String::new(),
            episode_index: Some(7),
            fps: Some(10.0),
        };
        let mut batch = WarehouseBatch::new();
        batch.push(&WarehouseRow {
            episode_id: "recorded",
            ..Default::default()
        });
        batch.push(&WarehouseRow {
            episode_id: "imported",
            source: Some(&imported),
            ..Default::default()
        });
        let rb = batch.finish().expect("batch");
        let column = |name: &str| rb.column_by_name(name).expect(name).clone();
        for name in [
            "source_format",
            "source_dataset",
            "source_episode_index",
            "source_fps",
        ] {
            assert!(column(name).is_null(0), "{name} of a recording");
            assert!(column(name).is_valid(1), "{name} of an import");
        }
        // An empty revision is no revision.
        assert!(column("source_revision").is_null(1));
        let index = column("source_episode_index");
        let index = index.as_any().downcast_ref::<Int64Array>().expect("int64");
        assert_eq!(index.value(1), 7);
    }

    #[test]
    fn a_part_holds_its_rows_whenever_they_were_ingested() {
        let row = |id, ingested_at_ns| WarehouseRow {
            episode_id: id,
            end_ns: 2_000_000_000,
            ingested_at_ns,
            ..Default::default()
        };
        let mut batch = WarehouseBatch::new();
        batch.push(&row("ep-1", 5));
        batch.push(&row("ep-2", 5));
        let part =
            bytes::Bytes::from(encode_parquet(&[batch.finish().expect("batch")]).expect("encodes"));
        assert!(part_holds(part.clone(), &[row("ep-1", 9), row("ep-2", 9)]));
        assert!(!part_holds(part.clone(), &[row("ep-1", 9)]));
        assert!(!part_holds(part.clone(), &[row("ep-2", 9), row("ep-1", 9)]));
        let changed = WarehouseRow {
            end_ns: 3_000_000_000,
            ..row("ep-2", 9)
        };
        assert!(!part_holds(part.clone(), &[row("ep-1", 9), changed]));
        assert!(!part_holds(
            part.slice(..part.len() / 2),
            &[row("ep-1", 9), row("ep-2", 9)]
        ));
    }
}
