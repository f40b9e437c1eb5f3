//! A manifest row checked against the episode it names, when a worker first opens it: a
//! row whose time range, size or step counts the file does not bear out makes the
//! episode a corrupt one (its samples skipped and reported), never zeros served as data.

use std::collections::HashMap;

use reel_io::ByteSource;
use reel_manifest::EpisodeRef;
use reel_mcap::EpisodeReader;
use reel_mcap::records::StreamsRecord;

/// An episode as a worker reads it: from the store or the cache.
pub(crate) type Reader = EpisodeReader<Box<dyn ByteSource>>;

/// `Err` saying what of `row` the episode (`reader`, an object of `object_len` bytes,
/// whose `reel.streams` record says `streams`) contradicts.
pub(crate) fn check_row(
    row: &EpisodeRef<'_>,
    reader: &Reader,
    streams: Option<&StreamsRecord>,
    object_len: u64,
) -> Result<(), String> {
    if row.bytes() != object_len {
        return Err(format!(
            "the manifest says {} bytes, the object has {object_len}",
            row.bytes()
        ));
    }
    let (start, end) = (row.start_ns(), row.end_ns());
    if start > end {
        return Err(format!(
            "its time range {start}..{end} ends before it starts"
        ));
    }
    let episode = reader.episode_record().map_err(|e| e.to_string())?;
    let (first, last) = (episode.start_ns as i64, episode.end_ns as i64);
    if start < first || end > last {
        return Err(format!(
            "its time range {start}..{end} is not inside the episode's {first}..{last}"
        ));
    }
    // The most messages any stream of a kind holds (reel.streams), against the steps the
    // row counts for that kind. A file without the record (written before it existed) is
    // not judged on counts.
    let Some(streams) = streams else {
        return Ok(());
    };
    let mut most: HashMap<&str, u64> = HashMap::new();
    for (topic, grid) in &streams.grids {
        let Ok(channel) = reader.channel_info(topic) else {
            continue;
        };
        let entry = most.entry(channel.kind_name()).or_default();
        *entry = (*entry).max(grid.count);
    }
    for (kind, steps) in [
        ("camera", row.camera_frames()),
        ("state", row.state_steps()),
        ("action", row.action_steps()),
    ] {
        let held = most.get(kind).copied().unwrap_or(0);
        if u64::from(steps) > held {
            return Err(format!(
                "the manifest counts {steps} {kind} steps, the episode's {kind} streams hold at most {held}"
            ));
        }
    }
    Ok(())
}
