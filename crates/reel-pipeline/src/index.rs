//! Step 6: one warehouse row per episode, written as Parquet with arrow-rs.

use reel_manifest::warehouse::{WarehouseBatch, WarehouseRow, encode_parquet};

use crate::canonical::EpisodeSummary;
use crate::{Error, Result};

/// The warehouse row of a summary, ingested at `ingested_at_ns`.
pub fn row_of(summary: &EpisodeSummary, ingested_at_ns: i64) -> WarehouseRow<'_> {
    let info = &summary.info;
    // The time range curation builds manifests from: where every sampled stream has data.
    let (start_ns, end_ns) = summary.covered();
    WarehouseRow {
        episode_id: &summary.episode_id,
        pipeline_version: &summary.provenance.pipeline_version,
        robot_id: &info.robot_id,
        robot_software_version: &summary.provenance.robot_software_version,
        task: &info.task,
        operator: &info.operator,
        success: info.success,
        recorded_at_ns: info.recorded_at_ns,
        start_ns: start_ns as i64,
        end_ns: end_ns as i64,
        cameras: summary.cameras,
        camera_frames: summary.camera_frames,
        state_steps: summary.state_steps,
        action_steps: summary.action_steps,
        hand_steps: summary.hand_steps,
        bytes: summary.bytes,
        qc: summary.qc.summary(),
        uri: &summary.canonical_key,
        ingested_at_ns,
        source: info.source.as_ref(),
        canonical_digest: Some(summary.canonical_digest).filter(|&d| d != 0),
    }
}

/// One zstd Parquet file of warehouse rows (schema in `docs/FORMAT.md`). `name` is used
/// in errors.
pub fn encode_warehouse(
    name: &str,
    summaries: &[EpisodeSummary],
    ingested_at_ns: i64,
) -> Result<Vec<u8>> {
    let err = |reason: String| Error::Warehouse {
        name: name.to_owned(),
        reason,
    };
    let mut batch = WarehouseBatch::new();
    for summary in summaries {
        batch.push(&row_of(summary, ingested_at_ns));
    }
    let batch = batch.finish().map_err(|e| err(e.to_string()))?;
    encode_parquet(&[batch]).map_err(|e| err(e.to_string()))
}
