//! What every layout's landing log is made of: signal streams on the episode's fps grid
//! from 0, numbered value names, the check that streams have the episode's length, and the
//! `episode` record.

use std::collections::BTreeMap;
use std::path::Path;

use reel_mcap::{SignalKind, SignalStream};

use super::episode::Episode;
use crate::{Error, Result};

pub(super) fn signal(
    topic: &str,
    kind: SignalKind,
    fields: Vec<String>,
    values: Vec<Vec<f64>>,
    period_ns: u64,
) -> SignalStream {
    crate::grid::grid_signal(topic, kind, fields, values, period_ns, "hdf5")
}

pub(super) use crate::grid::numbered;

/// Checks every stream of an episode has `frames` rows.
pub(super) fn same_length(path: &Path, what: &str, rows: usize, frames: usize) -> Result<()> {
    if rows == frames {
        return Ok(());
    }
    Err(Error::dataset(
        path.display(),
        format!("{what} has {rows} frames, the episode {frames}"),
    ))
}

pub(super) fn record(
    episode: &Episode,
    task: String,
    robot: String,
    extra: &[(&str, String)],
) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut record = BTreeMap::from([
        ("episode_id".to_owned(), episode.id.clone()),
        ("task".to_owned(), task),
        ("robot_id".to_owned(), robot),
        (
            crate::keys::SOURCE.to_owned(),
            format!("hdf5.{}", episode.layout.name()),
        ),
        (
            crate::keys::SOURCE_DATASET.to_owned(),
            episode.file.display().to_string(),
        ),
        (crate::keys::FPS.to_owned(), episode.fps.to_string()),
    ]);
    if let Some(index) = episode.index() {
        record.insert(
            crate::keys::SOURCE_EPISODE_INDEX.to_owned(),
            index.to_string(),
        );
    }
    for (k, v) in extra {
        record.insert((*k).to_owned(), v.clone());
    }
    BTreeMap::from([("episode".to_owned(), record)])
}
