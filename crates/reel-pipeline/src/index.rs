//! Step 6: one row per episode of the batch, committed to the warehouse's episode tables.

use reel_warehouse::episodes::{EpisodeRow, EpisodeRows};

use crate::canonical::EpisodeSummary;

/// The episode row of a summary, ingested at `ingested_at_ns`.
pub fn row_of(summary: &EpisodeSummary, ingested_at_ns: i64) -> EpisodeRow<'_> {
    let info = &summary.info;
    // The time range curation builds manifests from: where every sampled stream has data.
    let (start_ns, end_ns) = summary.covered();
    EpisodeRow {
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

/// The rows of `summaries`, ingested at `ingested_at_ns`, as one record batch.
pub fn episode_rows(
    summaries: &[EpisodeSummary],
    ingested_at_ns: i64,
) -> Result<arrow_array::RecordBatch, arrow_schema::ArrowError> {
    let mut rows = EpisodeRows::new();
    for summary in summaries {
        rows.push(&row_of(summary, ingested_at_ns));
    }
    rows.finish()
}
