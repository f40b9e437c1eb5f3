//! Realistic generated warehouse rows, for tests and benchmarks at sizes no ingest run
//! here could produce (tens of millions of episodes). Feature `test-support`.

use arrow_array::RecordBatch;
use reel_warehouse::Change;
use reel_warehouse::episodes::{
    EPISODES, EpisodeRow, EpisodeRows, INGESTIONS, QcSummary, latest_ingestion,
};

pub const ROBOTS: [&str; 8] = [
    "aloha-01",
    "aloha-02",
    "aloha-03",
    "franka-01",
    "franka-02",
    "ur5e-01",
    "ur5e-02",
    "g1-01",
];
pub const TASKS: [&str; 8] = [
    "pick_cube",
    "fold_towel",
    "open_drawer",
    "stack_cups",
    "wipe_table",
    "insert_peg",
    "pour_water",
    "hang_mug",
];
pub const OPERATORS: [&str; 6] = ["op-ada", "op-ben", "op-chen", "op-dia", "op-eli", "op-fay"];
pub const SOFTWARE: [&str; 5] = ["2.2.4", "2.3.0", "2.3.1", "2.4.0", "3.0.0"];
pub const PIPELINES: [&str; 3] = ["0.9.0", "1.0.0", "1.1.0"];

/// An owned warehouse row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub episode_id: String,
    pub pipeline_version: &'static str,
    pub robot_id: &'static str,
    pub robot_software_version: &'static str,
    pub task: &'static str,
    pub operator: &'static str,
    pub success: bool,
    pub recorded_at_ns: i64,
    pub start_ns: i64,
    pub end_ns: i64,
    pub bytes: u64,
    pub qc: QcSummary,
    pub uri: String,
    pub ingested_at_ns: i64,
}

impl Row {
    pub fn as_episode_row(&self) -> EpisodeRow<'_> {
        let seconds = ((self.end_ns - self.start_ns) / 1_000_000_000) as u32;
        EpisodeRow {
            episode_id: &self.episode_id,
            pipeline_version: self.pipeline_version,
            robot_id: self.robot_id,
            robot_software_version: self.robot_software_version,
            task: self.task,
            operator: self.operator,
            success: self.success,
            recorded_at_ns: self.recorded_at_ns,
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            cameras: 3,
            camera_frames: seconds * 30,
            state_steps: seconds * 200,
            action_steps: seconds * 50,
            hand_steps: seconds * 30,
            bytes: self.bytes,
            qc: self.qc,
            uri: &self.uri,
            ingested_at_ns: self.ingested_at_ns,
            source: None,
            // As random as a real object's digest (a version's own, re-ingests differ).
            canonical_digest: Some(
                mix(reel_manifest::fnv1a(self.episode_id.bytes()) ^ self.ingested_at_ns as u64)
                    .max(1),
            ),
        }
    }
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// When row `i` of a generated corpus was recorded: within 700 days from 2025-01-01.
pub fn recorded_at_ns(seed: u64, i: u64) -> i64 {
    let h = mix(seed ^ mix(i));
    1_735_689_600_000_000_000 + (h % (700 * 86_400)) as i64 * 1_000_000_000
}

/// Row `i` of a generated corpus (`version` 0 is the first ingestion;
/// higher versions re-ingest the same episode later with a newer pipeline).
pub fn row(seed: u64, i: u64, version: usize) -> Row {
    let h = mix(seed ^ mix(i));
    let pick = |shift: u32, n: usize| ((h >> shift) as usize) % n;
    let recorded_at_ns = recorded_at_ns(seed, i);
    let seconds = 20 + (h >> 40) % 160;
    let qc_bits = mix(h) ^ version as u64;
    let qc = QcSummary {
        camera_blackout: qc_bits.is_multiple_of(50),
        frozen_frames: (qc_bits >> 8).is_multiple_of(40),
        corrupt_frames: (qc_bits >> 16).is_multiple_of(100),
        choppy_joints: (qc_bits >> 24).is_multiple_of(30),
        hand_dropout: (qc_bits >> 32).is_multiple_of(25),
        timestamp_gap: (qc_bits >> 40).is_multiple_of(60),
        rate_shortfall: (qc_bits >> 48).is_multiple_of(200),
        dark_frame_ratio: ((qc_bits >> 4) % 1000) as f64 / 20_000.0,
        frozen_frame_ratio: ((qc_bits >> 12) % 1000) as f64 / 50_000.0,
        max_joint_step_rad: ((qc_bits >> 20) % 1000) as f64 / 2_000.0,
    };
    let episode_id = format!("ep-{:016x}", mix(seed.wrapping_add(i)));
    Row {
        uri: format!("canonical/{episode_id}.mcap"),
        episode_id,
        pipeline_version: PIPELINES[version.min(PIPELINES.len() - 1)],
        robot_id: ROBOTS[pick(3, ROBOTS.len())],
        robot_software_version: SOFTWARE[pick(9, SOFTWARE.len())],
        task: TASKS[pick(15, TASKS.len())],
        operator: OPERATORS[pick(21, OPERATORS.len())],
        success: pick(27, 10) < 8,
        recorded_at_ns,
        start_ns: recorded_at_ns,
        end_ns: recorded_at_ns + seconds as i64 * 1_000_000_000,
        bytes: seconds * 3 * 900_000,
        qc,
        ingested_at_ns: recorded_at_ns + 86_400_000_000_000 * (1 + version as i64 * 30),
    }
}

/// Rows `indices` (a range, or any) of a generated corpus as record batches of at most 2^20 rows, every row
/// ingested at `ingested_at_ns` when given (a re-ingestion that happens now, after
/// everything generated so far).
pub fn rows(
    seed: u64,
    indices: impl IntoIterator<Item = u64>,
    version: usize,
    ingested_at_ns: Option<i64>,
) -> Result<Vec<RecordBatch>, arrow_schema::ArrowError> {
    let mut batch = EpisodeRows::new();
    let mut batches = Vec::new();
    for i in indices {
        let mut row = row(seed, i, version);
        if let Some(t) = ingested_at_ns {
            row.ingested_at_ns = t;
        }
        batch.push(&row.as_episode_row());
        if batch.len() == 1 << 20 {
            batches.push(batch.finish()?);
        }
    }
    if !batch.is_empty() {
        batches.push(batch.finish()?);
    }
    Ok(batches)
}

/// Commits rows `indices` (version `version`, see [`rows`]) to the warehouse at `uri` as one
/// ingestion by `writer`: appended to `ingestions`, replacing each episode's older row in
/// `episodes`. With `new`, the rows are known not to be there yet (a first ingestion of
/// these episodes): `episodes` takes them as an append, without looking for rows to
/// replace (a bulk load at millions of rows). Returns `episodes`' version after it.
pub fn ingest(
    warehouse: &reel_warehouse::Warehouse,
    writer: &str,
    seed: u64,
    indices: impl IntoIterator<Item = u64>,
    version: usize,
    ingested_at_ns: Option<i64>,
    new: bool,
) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
    let (ingestions, episodes) = warehouse.episode_tables()?;
    debug_assert_eq!((ingestions.name(), episodes.name()), (INGESTIONS, EPISODES));
    let app = format!("synthetic/{writer}");
    let batches = rows(seed, indices, version, ingested_at_ns)?;
    let mut last = 0;
    for (i, batch) in batches.into_iter().enumerate() {
        let app = (app.as_str(), i as i64 + 1);
        ingestions.commit(&Change {
            app: Some(app),
            add: vec![batch.clone()],
            ..Change::default()
        })?;
        let change = match new {
            true => Change {
                app: Some(app),
                add: vec![batch],
                ..Change::default()
            },
            false => latest_ingestion(app, batch),
        };
        last = episodes.commit(&change)?.version;
    }
    Ok(last)
}
