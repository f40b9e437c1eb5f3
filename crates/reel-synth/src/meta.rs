//! The episode's identity and stamps (id, robot, task, operator, start time), derived from
//! the seed alone, and the `episode` metadata record they make.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng, seq::IndexedRandom};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::config::SynthConfig;
use crate::seed::sub_seed;

/// The `episode` metadata record, as a recorder would stamp it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeMeta {
    pub episode_id: String,
    pub robot_id: String,
    pub task: String,
    pub operator: String,
    pub success: bool,
    pub robot_software_version: String,
    /// RFC 3339, UTC.
    pub recorded_at: String,
    /// Log time of the episode's origin, ns since the Unix epoch.
    pub start_ns: u64,
}

impl EpisodeMeta {
    /// The record's key/value map.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("episode_id".into(), self.episode_id.clone()),
            ("robot_id".into(), self.robot_id.clone()),
            ("task".into(), self.task.clone()),
            ("operator".into(), self.operator.clone()),
            ("success".into(), self.success.to_string()),
            (
                "robot_software_version".into(),
                self.robot_software_version.clone(),
            ),
            ("recorded_at".into(), self.recorded_at.clone()),
        ])
    }
}

const ROBOTS: [&str; 6] = [
    "aloha-01",
    "aloha-02",
    "aloha-03",
    "franka-01",
    "franka-02",
    "ur5e-01",
];
const TASKS: [&str; 6] = [
    "pick_cube",
    "fold_towel",
    "open_drawer",
    "stack_cups",
    "wipe_table",
    "insert_peg",
];
const OPERATORS: [&str; 5] = ["op-ada", "op-ben", "op-chen", "op-dia", "op-eli"];
const SOFTWARE: [&str; 4] = ["2.3.0", "2.3.1", "2.4.0", "3.0.0-rc1"];

/// The episode's identity and stamps, derived from the seed alone.
pub fn episode_meta(config: &SynthConfig, index: u64) -> EpisodeMeta {
    let mut rng = ChaCha8Rng::seed_from_u64(sub_seed(config, index, 1));
    // Recorded some time in 2026, to the millisecond.
    let start_ms = 1_767_225_600_000u64 + rng.random_range(0..365 * 24 * 3600 * 1000u64);
    let start_ns = start_ms * 1_000_000;
    let recorded_at = time::OffsetDateTime::from_unix_timestamp_nanos(start_ns as i128)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default();
    EpisodeMeta {
        episode_id: format!("ep-{:016x}", sub_seed(config, index, 0)),
        robot_id: pick(&mut rng, &ROBOTS),
        task: pick(&mut rng, &TASKS),
        operator: pick(&mut rng, &OPERATORS),
        success: rng.random_bool(0.8),
        robot_software_version: pick(&mut rng, &SOFTWARE),
        recorded_at,
        start_ns,
    }
}

fn pick(rng: &mut ChaCha8Rng, items: &[&str]) -> String {
    items.choose(rng).map(|s| s.to_string()).unwrap_or_default()
}
