//! The `reel.streams` record: each stream's time grid (messages, span, median period and
//! largest gap), which the loader checks manifest rows against and exporters take rates
//! from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::RecordError;
use crate::keys;

/// A stream's period: the median interval between its consecutive times, leaving out
/// zero intervals (repeated times say nothing of a rate); `None` with no positive
/// interval. The one rule Reel sets a stream's period, camera windows and frame rates by.
pub fn median_period_ns(times: impl IntoIterator<Item = u64>) -> Option<u64> {
    let mut times = times.into_iter();
    let mut previous = times.next()?;
    let mut gaps: Vec<u64> = times
        .filter_map(|t| {
            let gap = t.saturating_sub(previous);
            previous = t;
            (gap > 0).then_some(gap)
        })
        .collect();
    if gaps.is_empty() {
        return None;
    }
    let middle = gaps.len() / 2;
    Some(*gaps.select_nth_unstable(middle).1)
}

/// Time grid of one stream, recorded in the `reel.streams` metadata record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StreamGrid {
    /// Messages.
    pub count: u64,
    /// First log time (ns).
    pub start_ns: u64,
    /// Last log time (ns).
    pub end_ns: u64,
    /// The stream's period ([`median_period_ns`]; 0 when it has none).
    pub median_period_ns: u64,
    /// Largest interval between messages (ns).
    pub max_gap_ns: u64,
}

impl StreamGrid {
    /// The grid of messages at `times` (in order).
    pub fn of(times: impl Iterator<Item = u64>) -> Self {
        let times: Vec<u64> = times.collect();
        Self {
            count: times.len() as u64,
            start_ns: times.first().copied().unwrap_or(0),
            end_ns: times.last().copied().unwrap_or(0),
            median_period_ns: median_period_ns(times.iter().copied()).unwrap_or(0),
            max_gap_ns: times
                .windows(2)
                .map(|w| w[1].saturating_sub(w[0]))
                .max()
                .unwrap_or(0),
        }
    }

    /// The median period, when the stream has one (two messages or more, not all at
    /// one time).
    pub fn period_ns(&self) -> Option<u64> {
        (self.median_period_ns > 0).then_some(self.median_period_ns)
    }
}

/// The `reel.streams` metadata record: each topic's [`StreamGrid`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamsRecord {
    /// Grids by topic.
    pub grids: BTreeMap<String, StreamGrid>,
}

impl StreamsRecord {
    /// The record's name in the file.
    pub const NAME: &'static str = keys::STREAMS_RECORD;

    /// The record as written: one JSON grid per topic.
    pub fn to_metadata(&self) -> BTreeMap<String, String> {
        self.grids
            .iter()
            .map(|(topic, grid)| {
                (
                    topic.clone(),
                    serde_json::to_string(grid).unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Parses the record; every grid must be whole.
    pub fn parse(metadata: &BTreeMap<String, String>) -> Result<Self, RecordError> {
        let grids = metadata
            .iter()
            .map(|(topic, json)| {
                serde_json::from_str(json)
                    .map(|grid| (topic.clone(), grid))
                    .map_err(|e| RecordError {
                        record: keys::STREAMS_RECORD.to_owned(),
                        problem: format!("{topic}: {e}"),
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { grids })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests fail loudly by design.
mod tests {
    use super::*;

    #[test]
    fn it_parses_back_to_what_was_written() {
        let record = StreamsRecord {
            grids: BTreeMap::from([
                ("/a".into(), StreamGrid::of([0, 10, 20, 40].into_iter())),
                ("/b".into(), StreamGrid::of(std::iter::empty())),
            ]),
        };
        assert_eq!(
            StreamsRecord::parse(&record.to_metadata()),
            Ok(record.clone())
        );
        assert_eq!(record.grids["/a"].period_ns(), Some(10));
        assert_eq!(record.grids["/a"].max_gap_ns, 20);
        assert_eq!(record.grids["/b"].period_ns(), None);
    }

    #[test]
    fn a_period_leaves_repeated_times_out() {
        assert_eq!(median_period_ns([0, 0, 0, 10, 20, 20, 20, 30]), Some(10));
        assert_eq!(median_period_ns([5, 5, 5]), None);
        assert_eq!(median_period_ns([7]), None);
        assert_eq!(median_period_ns([0, 10, 30, 60]), Some(20));
        let grid = StreamGrid::of([0, 0, 0, 10, 20].into_iter());
        assert_eq!((grid.median_period_ns, grid.max_gap_ns), (10, 10));
    }

    #[test]
    fn a_broken_grid_is_named() {
        let metadata = BTreeMap::from([("/a".to_owned(), "{\"count\": 3}".to_owned())]);
        let error = StreamsRecord::parse(&metadata).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("reel.streams: /a: missing field"),
            "{error}"
        );
    }
}
