//! The bytes a loader reads: what to warm into the block cache before training when a
//! sample spec reads only part of each episode (a state-only policy skips every camera
//! chunk, most of the bytes).

use std::ops::Range;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use reel_cache::WarmItem;
use reel_io::{ByteSource, Store};
use reel_manifest::Manifest;
use reel_mcap::EpisodeReader;

use crate::error::{LoaderError, Result};
use crate::spec::SampleSpec;

/// For each episode of `manifest` (in manifest order, each once): the byte ranges a
/// loader with `spec` reads from it: what opening it reads (footer, summary, metadata)
/// and every chunk holding one of the spec's topics. Opening each episode costs two
/// ranged reads of `store`.
pub fn working_set(manifest: &Manifest, spec: &SampleSpec, store: &Store) -> Result<Vec<WarmItem>> {
    let topics: Vec<&str> = spec
        .cameras
        .iter()
        .map(|c| c.topic.as_str())
        .chain(spec.proprio.iter().map(|p| p.topic.as_str()))
        .collect();
    let mut items = Vec::new();
    for episode in manifest.distinct_objects()? {
        let uri = episode.uri()?;
        let episode_error = |source| LoaderError::Episode {
            uri: uri.to_string(),
            source: Box::new(source),
        };
        let source = RecordingSource {
            inner: store.source(&uri),
            ranges: Mutex::new(Vec::new()),
        };
        let chunks = EpisodeReader::open(&source)
            .and_then(|reader| reader.chunk_ranges(&topics))
            .map_err(episode_error)?;
        let mut ranges = source
            .ranges
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        ranges.extend(chunks);
        items.push(WarmItem {
            path: uri.into_owned(),
            ranges: Some(merge(ranges)),
        });
    }
    Ok(items)
}

/// Sorted, overlapping and touching ranges joined.
fn merge(mut ranges: Vec<Range<u64>>) -> Vec<Range<u64>> {
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges.into_iter().filter(|r| !r.is_empty()) {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// A byte source that notes every range read through it.
#[derive(Debug)]
struct RecordingSource<S> {
    inner: S,
    ranges: Mutex<Vec<Range<u64>>>,
}

impl<S: ByteSource> ByteSource for RecordingSource<S> {
    fn len(&self) -> reel_io::Result<u64> {
        self.inner.len()
    }

    fn read_range(&self, range: Range<u64>) -> reel_io::Result<Bytes> {
        self.ranges
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(range.clone());
        self.inner.read_range(range)
    }

    fn name(&self) -> &str {
        self.inner.name()
    }
}

/// The working set of a manifest read whole: every byte of every listed episode, in
/// manifest order without repeats (what [`working_set`] narrows to a spec's reads).
pub fn whole_episodes(manifest: &Manifest) -> Result<reel_cache::WorkingSet> {
    let objects = manifest
        .distinct_objects()?
        .iter()
        .map(|episode| Ok((episode.uri()?.into_owned(), episode.bytes())))
        .collect::<Result<Vec<_>>>()?;
    Ok(reel_cache::WorkingSet::new(objects))
}

#[cfg(test)]
mod tests {
    use super::merge;

    #[test]
    fn ranges_merge_when_they_touch_or_overlap() {
        assert_eq!(
            merge(vec![10..20, 0..5, 5..8, 15..30, 40..40, 31..35]),
            vec![0..8, 10..30, 31..35]
        );
    }
}
