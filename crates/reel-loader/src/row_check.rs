//! A manifest row checked against the episode it names, when a worker first opens it: a
//! row whose time range, size or step counts the file does not bear out makes the
//! episode a corrupt one (its samples skipped and reported), never zeros served as data.
//! The facts it checks against (the episode's `reel.streams` record) are read here too.

use std::collections::HashMap;

use reel_manifest::EpisodeRef;
use reel_mcap::keys;

use reel_io::ByteSource;
use reel_mcap::EpisodeReader;

/// An episode as a worker reads it: from the store or the cache.
pub(crate) type Reader = EpisodeReader<Box<dyn ByteSource>>;

/// What an episode's `reel.streams` record says of one stream.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StreamFacts {
    /// Messages the stream holds (0 when the record does not say).
    pub(crate) count: u64,
    /// Median interval between its messages, when the record gives a positive one.
    pub(crate) period_ns: Option<i64>,
}

/// The `reel.streams` record of an episode, read once, by topic; `None` for a file
/// written before the record existed.
pub(crate) fn stream_facts(reader: &Reader) -> Option<HashMap<String, StreamFacts>> {
    let streams = reader.metadata().get(reel_mcap::keys::STREAMS_RECORD)?;
    let facts = streams.iter().map(|(topic, json)| {
        let value = serde_json::from_str::<serde_json::Value>(json).ok();
        let field = |name: &str| value.as_ref().and_then(|v| v.get(name));
        let facts = StreamFacts {
            count: field("count")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
            period_ns: field("median_period_ns")
                .and_then(serde_json::Value::as_i64)
                .filter(|p| *p > 0),
        };
        (topic.clone(), facts)
    });
    Some(facts.collect())
}

/// `Err` saying what of `row` the episode (`reader`, an object of `object_len` bytes,
/// whose `reel.streams` record says `streams`) contradicts.
pub(crate) fn check_row(
    row: &EpisodeRef<'_>,
    reader: &Reader,
    streams: Option<&HashMap<String, StreamFacts>>,
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
    let episode = reader.metadata().get("episode");
    let bound = |key: &str| {
        episode
            .and_then(|e| e.get(key))
            .and_then(|v| v.parse::<i64>().ok())
    };
    if let (Some(first), Some(last)) = (bound("start_ns"), bound("end_ns"))
        && (start < first || end > last)
    {
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
    let mut most: HashMap<String, u64> = HashMap::new();
    for (topic, facts) in streams {
        let Ok(channel) = reader.channel(topic) else {
            continue;
        };
        let kind = channel
            .metadata
            .get(keys::KIND)
            .cloned()
            .unwrap_or_default();
        let entry = most.entry(kind).or_default();
        *entry = (*entry).max(facts.count);
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
