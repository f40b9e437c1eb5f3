//! The episode tables: `ingestions`, every ingestion of every episode (appended, never
//! rewritten), and `episodes`, one row per episode (its latest ingestion), kept so by every
//! commit. Their schema (version 4) is in `docs/FORMAT.md`; this module writes and parses
//! it, nothing else does.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::{Change, Operation, Result, Table, Warehouse};

/// The episode tables' schema version (stamped on every row). Version 2 added the
/// `source_*` columns, version 3 `canonical_digest`, version 4 made every column a type
/// every table reader has (signed integers, microsecond timestamps).
pub const EPISODE_SCHEMA_VERSION: i32 = 4;

/// Every ingestion of every episode: the full history.
pub const INGESTIONS: &str = "ingestions";
/// One row per episode: its latest ingestion. What curation queries.
pub const EPISODES: &str = "episodes";

/// The columns that identify an episode's row.
pub const EPISODE_KEY: [&str; 2] = ["episode_key", "episode_id"];

/// Properties of the episode tables: checkpoints every 10 commits (Delta's default: a
/// commit replays the log since the last checkpoint several times, and a checkpoint of
/// these tables is small), 7 days of data-file retention (Delta's default), 30 days of
/// writers' commit records, statistics of every column (39, past Delta's default of 32). `episodes` also names `episode_key` as its
/// files' Bloom filter column.
pub const EPISODE_TABLE_PROPERTIES: [(&str, &str); 4] = [
    ("delta.checkpointInterval", "10"),
    ("delta.deletedFileRetentionDuration", "interval 7 days"),
    ("delta.setTransactionRetentionDuration", "interval 30 days"),
    ("delta.dataSkippingNumIndexedCols", "-1"),
];

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

/// One episode row.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EpisodeRow<'a> {
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
    /// The canonical object's digest (`reel_manifest::object_digest`).
    pub canonical_digest: Option<u64>,
}

/// A stable 64-bit key of an episode id (FNV-1a), as the signed integer the tables store:
/// `episodes`' first key column, whose Bloom filters a commit probes before it reads a file
/// for the rows it replaces.
pub fn episode_key(episode_id: &str) -> i64 {
    episode_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) as i64
}

/// The episode tables' Arrow schema.
pub fn episode_schema() -> SchemaRef {
    let utf8 = |n: &str| Field::new(n, DataType::Utf8, false);
    let boolean = |n: &str| Field::new(n, DataType::Boolean, false);
    let float = |n: &str| Field::new(n, DataType::Float64, false);
    let int = |n: &str| Field::new(n, DataType::Int32, false);
    let long = |n: &str| Field::new(n, DataType::Int64, false);
    Arc::new(Schema::new(vec![
        utf8("episode_id"),
        long("episode_key"),
        utf8("pipeline_version"),
        int("schema_version"),
        utf8("robot_id"),
        utf8("robot_software_version"),
        utf8("task"),
        utf8("operator"),
        boolean("success"),
        Field::new(
            "recorded_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        long("start_ns"),
        long("end_ns"),
        float("duration_s"),
        int("cameras"),
        int("camera_frames"),
        int("state_steps"),
        int("action_steps"),
        int("hand_steps"),
        long("bytes"),
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
        long("ingested_at_ns"),
        // Null for an episode a robot recorded.
        Field::new("source_format", DataType::Utf8, true),
        Field::new("source_dataset", DataType::Utf8, true),
        Field::new("source_revision", DataType::Utf8, true),
        Field::new("source_episode_index", DataType::Int64, true),
        Field::new("source_fps", DataType::Float64, true),
        // The canonical object's 64-bit digest, as a signed integer (its two's complement).
        Field::new("canonical_digest", DataType::Int64, true),
    ]))
}

/// Builds episode rows as record batches of [`episode_schema`].
#[derive(Debug, Default)]
pub struct EpisodeRows {
    episode_id: StringBuilder,
    episode_key: Int64Builder,
    pipeline_version: StringBuilder,
    schema_version: Int32Builder,
    robot_id: StringBuilder,
    robot_software_version: StringBuilder,
    task: StringBuilder,
    operator: StringBuilder,
    success: BooleanBuilder,
    recorded_at: TimestampMicrosecondBuilder,
    start_ns: Int64Builder,
    end_ns: Int64Builder,
    duration_s: Float64Builder,
    counts: [Int32Builder; 5],
    bytes: Int64Builder,
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
    canonical_digest: Int64Builder,
    rows: usize,
}

impl EpisodeRows {
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

    pub fn push(&mut self, row: &EpisodeRow<'_>) {
        self.episode_id.append_value(row.episode_id);
        self.episode_key.append_value(episode_key(row.episode_id));
        self.pipeline_version.append_value(row.pipeline_version);
        self.schema_version.append_value(EPISODE_SCHEMA_VERSION);
        self.robot_id.append_value(row.robot_id);
        self.robot_software_version
            .append_value(row.robot_software_version);
        self.task.append_value(row.task);
        self.operator.append_value(row.operator);
        self.success.append_value(row.success);
        self.recorded_at
            .append_value(row.recorded_at_ns.div_euclid(1000));
        self.start_ns.append_value(row.start_ns);
        self.end_ns.append_value(row.end_ns);
        self.duration_s
            .append_value((row.end_ns - row.start_ns) as f64 / 1e9);
        let counts = [
            row.cameras,
            row.camera_frames,
            row.state_steps,
            row.action_steps,
            row.hand_steps,
        ];
        for (builder, count) in self.counts.iter_mut().zip(counts) {
            builder.append_value(i32::try_from(count).unwrap_or(i32::MAX));
        }
        self.bytes
            .append_value(i64::try_from(row.bytes).unwrap_or(i64::MAX));
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
        self.canonical_digest
            .append_option(row.canonical_digest.map(|d| d as i64));
        self.rows += 1;
    }

    /// The buffered rows as one record batch; the builder starts over.
    pub fn finish(&mut self) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
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
        ];
        arrays.extend(
            self.counts
                .iter_mut()
                .map(|b| Arc::new(b.finish()) as ArrayRef),
        );
        arrays.push(Arc::new(self.bytes.finish()));
        arrays.push(Arc::new(self.qc_pass.finish()));
        arrays.push(Arc::new(self.qc_flags.finish()));
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
        RecordBatch::try_new(episode_schema(), arrays)
    }
}

/// What committing an ingestion did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ingested {
    /// The rows' ingestion time (the writer's version in both tables).
    pub ingested_at_ns: i64,
    /// `ingestions` and `episodes` after the commit.
    pub ingestions_version: u64,
    pub episodes_version: u64,
    /// The batch had been committed before (a rerun): nothing was added.
    pub already: bool,
    /// Episodes whose row it replaced, and ones a newer ingestion already held.
    pub replaced: u64,
    pub older: u64,
}

impl Warehouse {
    /// The episode tables, created if missing.
    pub fn episode_tables(&self) -> Result<(Table, Table)> {
        let ingestions = self.table(INGESTIONS)?;
        let episodes = self.table(EPISODES)?;
        ingestions.create(&episode_schema(), &EPISODE_TABLE_PROPERTIES)?;
        let mut properties = EPISODE_TABLE_PROPERTIES.to_vec();
        properties.push((crate::BLOOM_COLUMN_PROPERTY, EPISODE_KEY[0]));
        episodes.create(&episode_schema(), &properties)?;
        Ok((ingestions, episodes))
    }

    /// Commits a batch's ingestion, made by `writer` (an ingest batch's name: one per
    /// batch and pipeline version): its rows appended to `ingestions` and replacing each
    /// episode's row in `episodes` unless a newer ingestion holds it. `rows_at` gives the
    /// rows ingested at a time. Made again after a crash or by a rerun, it adds nothing
    /// and says when it was made.
    pub fn commit_ingestion(
        &self,
        writer: &str,
        rows_at: &dyn Fn(i64) -> std::result::Result<RecordBatch, arrow_schema::ArrowError>,
        now_ns: i64,
    ) -> Result<Ingested> {
        let (ingestions, episodes) = self.episode_tables()?;
        let app = format!("ingest/{writer}");
        let done = ingestions.version(None)?.app_version(&app)?;
        let ingested_at_ns = done.unwrap_or(now_ns);
        let rows = rows_at(ingested_at_ns).map_err(|e| crate::WarehouseError::BadRows {
            table: INGESTIONS.to_owned(),
            reason: e.to_string(),
        })?;
        let appended = ingestions.commit(&Change {
            app: Some((&app, ingested_at_ns)),
            add: vec![rows.clone()],
            ..Change::default()
        })?;
        let current = episodes.commit(&latest_ingestion((&app, ingested_at_ns), rows))?;
        Ok(Ingested {
            ingested_at_ns,
            ingestions_version: appended.version,
            episodes_version: current.version,
            already: appended.already && current.already,
            replaced: current.rows_removed,
            older: current.rows_older,
        })
    }
}

/// The change to `episodes` that `rows` (episode rows) make as an ingestion by `app`: each
/// replaces its episode's row unless that row's ingestion is newer.
pub fn latest_ingestion<'a>(app: (&'a str, i64), rows: RecordBatch) -> Change<'a> {
    Change {
        app: Some(app),
        add: vec![rows],
        key: EPISODE_KEY.to_vec(),
        newest: Some("ingested_at_ns"),
        operation: Operation::Merge,
        ..Change::default()
    }
}
