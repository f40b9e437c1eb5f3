//! Planning reads: plain functions over the summary's chunk indexes that say which byte
//! ranges a request needs, and which GOPs serve requested times. Nothing here performs
//! I/O; the reader fetches what a plan names and feeds back what it found (the way the
//! mcap crate's `sans_io` readers ask for bytes instead of reading them), so every rule is
//! tested on hand-made chunk indexes.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Range;

use mcap::records::ChunkIndex;

/// Whether `chunk` may hold messages of `channel`. A chunk without message indexes does not
/// say what it holds, so it is assumed to hold every channel.
pub(crate) fn holds(chunk: &ChunkIndex, channel: u16) -> bool {
    chunk.message_index_offsets.is_empty() || chunk.message_index_offsets.contains_key(&channel)
}

/// Whether `chunk` may hold messages of any of `channels`.
pub(crate) fn holds_any(chunk: &ChunkIndex, channels: &HashSet<u16>) -> bool {
    chunk.message_index_offsets.is_empty()
        || chunk
            .message_index_offsets
            .keys()
            .any(|id| channels.contains(id))
}

/// Chunks adjacent in the file, in file order: one ranged read fetches them all.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChunkRun<'a> {
    /// The chunks, by offset; never empty.
    pub(crate) chunks: Vec<&'a ChunkIndex>,
}

impl ChunkRun<'_> {
    /// The bytes to read: from the first chunk's start to the last chunk's end (the message
    /// indexes between them come along; they are small).
    pub(crate) fn byte_range(&self) -> Range<u64> {
        match (self.chunks.first(), self.chunks.last()) {
            (Some(first), Some(last)) => {
                first.chunk_start_offset..last.chunk_start_offset + last.chunk_length
            }
            _ => 0..0,
        }
    }
}

/// Splits chunks into runs that are adjacent in the file (only their message indexes lie
/// between them), so each run is one ranged read. Sorts by offset and drops duplicates.
pub(crate) fn coalesce<'a>(chunks: impl IntoIterator<Item = &'a ChunkIndex>) -> Vec<ChunkRun<'a>> {
    let mut sorted: Vec<&ChunkIndex> = chunks.into_iter().collect();
    sorted.sort_by_key(|c| c.chunk_start_offset);
    sorted.dedup_by_key(|c| c.chunk_start_offset);
    let mut runs: Vec<ChunkRun<'a>> = Vec::new();
    for c in sorted {
        match runs.last_mut() {
            Some(run)
                if run.chunks.last().is_some_and(|p| {
                    p.chunk_start_offset + p.chunk_length + p.message_index_length
                        == c.chunk_start_offset
                }) =>
            {
                run.chunks.push(c)
            }
            _ => runs.push(ChunkRun { chunks: vec![c] }),
        }
    }
    runs
}

/// The runs to fetch for the messages of `channels` with log time in `window`.
pub(crate) fn window_runs<'a>(
    chunks: &'a [ChunkIndex],
    channels: &HashSet<u16>,
    window: &Range<u64>,
) -> Vec<ChunkRun<'a>> {
    coalesce(chunks.iter().filter(|c| {
        c.message_start_time < window.end
            && c.message_end_time >= window.start
            && holds_any(c, channels)
    }))
}

/// Byte ranges of the chunks that may hold any of `channels`, in index order.
pub(crate) fn chunk_ranges(chunks: &[ChunkIndex], channels: &HashSet<u16>) -> Vec<Range<u64>> {
    chunks
        .iter()
        .filter(|c| holds_any(c, channels))
        .map(|c| c.chunk_start_offset..c.chunk_start_offset + c.chunk_length)
        .collect()
}

/// The chunk of `channel` holding the frame shown at `t`: the one with the latest start at
/// or before `t`, or the channel's first chunk when none starts before `t`.
pub(crate) fn chunk_at(chunks: &[ChunkIndex], channel: u16, t: u64) -> Option<&ChunkIndex> {
    let order = |c: &&ChunkIndex| (c.message_start_time, c.chunk_start_offset);
    let of_channel = chunks.iter().filter(|c| holds(c, channel));
    of_channel
        .clone()
        .filter(|c| c.message_start_time <= t)
        .max_by_key(order)
        .or_else(|| of_channel.min_by_key(order))
}

/// One step of the walk back for a keyframe: the latest chunk of `channel` not yet fetched
/// that starts at or before `t`.
pub(crate) fn chunk_before<'a>(
    chunks: &'a [ChunkIndex],
    channel: u16,
    t: u64,
    fetched: &HashSet<u64>,
) -> Option<&'a ChunkIndex> {
    chunks
        .iter()
        .filter(|c| {
            holds(c, channel)
                && !fetched.contains(&c.chunk_start_offset)
                && c.message_start_time <= t
        })
        .max_by_key(|c| (c.message_start_time, c.chunk_start_offset))
}

/// A fetched access unit as the planner sees it: only whether decoding can start there.
pub(crate) trait Keyframe {
    /// Whether the unit is a keyframe (an IDR picture).
    fn is_keyframe(&self) -> bool;

    /// Whether later units may predict from it (a reference picture).
    fn is_reference(&self) -> bool {
        true
    }
}

impl Keyframe for bool {
    fn is_keyframe(&self) -> bool {
        *self
    }
}

/// A camera's units fetched so far, by log time.
pub(crate) type Units<U> = BTreeMap<u64, U>;

/// Log time of the latest keyframe at or before `t`.
fn keyframe_through<U: Keyframe>(units: &Units<U>, t: u64) -> Option<u64> {
    units
        .range(..=t)
        .rev()
        .find(|(_, u)| u.is_keyframe())
        .map(|(k, _)| *k)
}

/// The frame shown at `t` and the keyframe its GOP starts at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shown {
    /// Log time of the frame shown: the latest at or before `t`, the first for earlier `t`.
    pub(crate) frame: u64,
    /// Log time of the keyframe decoding starts from.
    pub(crate) keyframe: u64,
}

/// The frame shown at `t` among `units`; `None` if they hold no frame or no keyframe
/// before the one shown.
pub(crate) fn shown_at<U: Keyframe>(units: &Units<U>, t: u64) -> Option<Shown> {
    let frame = units
        .range(..=t)
        .next_back()
        .or_else(|| units.iter().next())
        .map(|(k, _)| *k)?;
    let keyframe = keyframe_through(units, frame)?;
    Some(Shown { frame, keyframe })
}

/// The chunks to fetch for frames of several cameras at requested times, step by step:
/// first the chunk holding each requested time; then, while a GOP's keyframe or a frame
/// between it and the one shown is missing from the units fetched, the chunks holding
/// them. On canonical files (chunks start at keyframes) the first step is the only one.
#[derive(Debug)]
pub(crate) struct FrameFetch<'a> {
    chunks: &'a [ChunkIndex],
    /// `(channel, requested times)` per camera request.
    requests: Vec<(u16, &'a [u64])>,
    /// Start offsets of the chunks already handed out (none: the first step).
    fetched: HashSet<u64>,
}

impl<'a> FrameFetch<'a> {
    pub(crate) fn new(chunks: &'a [ChunkIndex], requests: Vec<(u16, &'a [u64])>) -> Self {
        Self {
            chunks,
            requests,
            fetched: HashSet::new(),
        }
    }

    /// The next runs to fetch, given the units fetched so far per channel (those of the
    /// runs this returned before); empty when nothing more is needed or can be found.
    pub(crate) fn next_runs<U: Keyframe>(
        &mut self,
        units: &HashMap<u16, Units<U>>,
    ) -> Vec<ChunkRun<'a>> {
        let mut wanted: Vec<&'a ChunkIndex> = Vec::new();
        let chunks = self.chunks;
        let first_step = self.fetched.is_empty();
        for &(channel, times) in &self.requests {
            for &t in times {
                if first_step {
                    wanted.extend(chunk_at(chunks, channel, t));
                    continue;
                }
                let stream = units.get(&channel);
                let frame = stream.and_then(|s| s.range(..=t).next_back().map(|(k, _)| *k));
                let keyframe = frame.and_then(|f| stream.and_then(|s| keyframe_through(s, f)));
                match (keyframe, frame) {
                    // Chunks of this camera between keyframe and frame not yet read (on
                    // interleaved layouts a GOP spans several chunks).
                    (Some(keyframe), Some(frame)) => wanted.extend(chunks.iter().filter(|c| {
                        holds(c, channel)
                            && c.message_start_time <= frame
                            && c.message_end_time >= keyframe
                    })),
                    // No keyframe yet: one chunk further back.
                    _ => wanted.extend(chunk_before(
                        chunks,
                        channel,
                        frame.unwrap_or(t),
                        &self.fetched,
                    )),
                }
            }
        }
        wanted.retain(|c| !self.fetched.contains(&c.chunk_start_offset));
        let runs = coalesce(wanted);
        for run in &runs {
            self.fetched
                .extend(run.chunks.iter().map(|c| c.chunk_start_offset));
        }
        runs
    }
}

/// A GOP to decode for requested times of one camera.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GopSpan {
    /// Log time of its keyframe.
    pub(crate) keyframe: u64,
    /// Log time of the last unit to decode, inclusive.
    pub(crate) through: u64,
    /// End of the span it is known to cover, exclusive (see `DecodedGop::end_ns`).
    pub(crate) end_ns: u64,
    /// The frames shown at the requested times it serves.
    pub(crate) shown: BTreeSet<u64>,
}

/// The GOPs that serve a camera's requested times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GopPlan {
    /// By keyframe time.
    pub(crate) gops: Vec<GopSpan>,
    /// For each requested time, in request order: the index of its GOP and the log time of
    /// the frame shown.
    pub(crate) shown: Vec<(usize, u64)>,
}

/// Plans the GOPs serving `times` among a camera's fetched `units`: whole (`whole`: to the
/// next keyframe fetched, or to the last unit fetched) or from the keyframe through the
/// latest frame shown. A GOP whose frames after the keyframe are all non-reference (a star
/// GOP) is never planned whole: any of its frames decodes from the keyframe and itself, so
/// decoding the others in advance would only cost. Fails with the first time for which no
/// frame decodes.
pub(crate) fn plan_gops<U: Keyframe>(
    units: &Units<U>,
    times: &[u64],
    whole: bool,
) -> Result<GopPlan, u64> {
    // Keyframe of each GOP needed, with the latest requested time it serves and the frames
    // shown at the requested times.
    let mut by_keyframe: BTreeMap<u64, (u64, BTreeSet<u64>)> = BTreeMap::new();
    let mut shown = Vec::with_capacity(times.len());
    for &t in times {
        let s = shown_at(units, t).ok_or(t)?;
        let (served, frames) = by_keyframe
            .entry(s.keyframe)
            .or_insert((t, BTreeSet::new()));
        *served = (*served).max(t);
        frames.insert(s.frame);
        shown.push(s);
    }
    let mut gops = Vec::with_capacity(by_keyframe.len());
    for (keyframe, (latest_served, frames)) in by_keyframe {
        let latest_shown = frames.last().copied().unwrap_or(keyframe);
        let whole = whole
            && units
                .range(keyframe + 1..)
                .take_while(|(_, u)| !u.is_keyframe())
                .any(|(_, u)| u.is_reference());
        // The GOP runs to the next keyframe; without one among the units fetched it is
        // known to cover only up to its last unit or the latest time it serves.
        let next_keyframe = if whole {
            units
                .range(keyframe + 1..)
                .find(|(_, u)| u.is_keyframe())
                .map(|(k, _)| *k)
        } else {
            None
        };
        let through = match (whole, next_keyframe) {
            (true, Some(next)) => next - 1,
            (true, None) => u64::MAX,
            (false, _) => latest_shown,
        };
        let last = units
            .range(keyframe..=through)
            .next_back()
            .map_or(keyframe, |(k, _)| *k);
        gops.push(GopSpan {
            keyframe,
            through,
            end_ns: next_keyframe.unwrap_or(last.max(latest_served).saturating_add(1)),
            shown: frames,
        });
    }
    let shown = shown
        .into_iter()
        .map(|s| {
            let gop = gops.partition_point(|g| g.keyframe < s.keyframe);
            (gop, s.frame)
        })
        .collect();
    Ok(GopPlan { gops, shown })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk of `channels` at `offset` (`length` bytes, then `index` bytes of message
    /// indexes) holding log times `start..=end`.
    fn chunk(
        offset: u64,
        length: u64,
        index: u64,
        start: u64,
        end: u64,
        channels: &[u16],
    ) -> ChunkIndex {
        ChunkIndex {
            message_start_time: start,
            message_end_time: end,
            chunk_start_offset: offset,
            chunk_length: length,
            message_index_offsets: channels.iter().map(|&c| (c, offset + length)).collect(),
            message_index_length: index,
            compression: "zstd".into(),
            compressed_size: length - 40,
            uncompressed_size: 2 * length,
        }
    }

    fn offsets(runs: &[ChunkRun<'_>]) -> Vec<Vec<u64>> {
        runs.iter()
            .map(|r| r.chunks.iter().map(|c| c.chunk_start_offset).collect())
            .collect()
    }

    fn units(frames: &[(u64, bool)]) -> Units<bool> {
        frames.iter().copied().collect()
    }

    #[test]
    fn adjacent_chunks_coalesce_into_one_read() {
        // 100..200 and 210..300 are adjacent (10 bytes of message index between them);
        // 400.. is not.
        let chunks = [
            chunk(100, 100, 10, 0, 9, &[1]),
            chunk(210, 90, 10, 10, 19, &[1]),
            chunk(400, 50, 10, 20, 29, &[1]),
        ];
        let runs = coalesce(chunks.iter().rev());
        assert_eq!(offsets(&runs), [vec![100, 210], vec![400]]);
        assert_eq!(runs[0].byte_range(), 100..300);
        assert_eq!(runs[1].byte_range(), 400..450);
        // The same chunk asked for twice is read once.
        assert_eq!(offsets(&coalesce([&chunks[2], &chunks[2]])), [vec![400]]);
        assert!(coalesce(std::iter::empty()).is_empty());
    }

    #[test]
    fn window_takes_overlapping_chunks_of_the_channels_asked_for() {
        let chunks = [
            chunk(0, 100, 10, 0, 9, &[1]),
            chunk(110, 100, 10, 0, 9, &[2]),
            chunk(220, 100, 10, 10, 19, &[1]),
            chunk(330, 100, 10, 20, 29, &[1]),
            // No message indexes: may hold anything.
            chunk(440, 100, 0, 15, 16, &[]),
        ];
        let one = HashSet::from([1]);
        assert_eq!(
            offsets(&window_runs(&chunks, &one, &(5..20))),
            [vec![0], vec![220], vec![440]]
        );
        // The window's end is exclusive, its start inclusive.
        assert_eq!(offsets(&window_runs(&chunks, &one, &(19..20))), [vec![220]]);
        assert_eq!(
            offsets(&window_runs(&chunks, &HashSet::from([1, 2]), &(0..10))),
            [vec![0, 110]]
        );
        assert_eq!(
            chunk_ranges(&chunks, &HashSet::from([2])),
            [110..210, 440..540]
        );
    }

    #[test]
    fn chunk_at_a_time_is_the_latest_starting_before_it() {
        let chunks = [
            chunk(0, 100, 10, 100, 199, &[1]),
            chunk(110, 100, 10, 200, 299, &[1]),
            chunk(220, 100, 10, 150, 250, &[2]),
        ];
        let at = |t| chunk_at(&chunks, 1, t).map(|c| c.chunk_start_offset);
        assert_eq!(at(250), Some(110));
        assert_eq!(at(199), Some(0));
        // Before the first chunk: the first chunk; after the last: the last.
        assert_eq!(at(5), Some(0));
        assert_eq!(at(10_000), Some(110));
        assert_eq!(chunk_at(&chunks, 3, 0), None);
        // Walking back passes over chunks already fetched.
        let fetched = HashSet::from([110]);
        let before = |t| chunk_before(&chunks, 1, t, &fetched).map(|c| c.chunk_start_offset);
        assert_eq!(before(250), Some(0));
        assert_eq!(before(50), None);
    }

    #[test]
    fn keyframe_walk_back_stops_once_the_gop_is_complete() {
        // Interleaved: camera 1 in every chunk, a keyframe only at 0 and 40; chunk 2 also
        // holds channel 2.
        let chunks = [
            chunk(0, 100, 10, 0, 9, &[1]),
            chunk(110, 100, 10, 10, 19, &[1, 2]),
            chunk(220, 100, 10, 20, 29, &[1]),
            chunk(330, 100, 10, 30, 39, &[1]),
            chunk(440, 100, 10, 40, 49, &[1]),
        ];
        let all: Units<bool> = (0..50).map(|t| (t, t % 40 == 0)).collect();
        let fetch_of = |fetched: &[u64]| -> HashMap<u16, Units<bool>> {
            let mut units = HashMap::new();
            for c in chunks
                .iter()
                .filter(|c| fetched.contains(&c.chunk_start_offset))
            {
                let s: &mut Units<bool> = units.entry(1).or_default();
                s.extend(all.range(c.message_start_time..=c.message_end_time));
            }
            units
        };
        let times = [25u64];
        let mut fetch = FrameFetch::new(&chunks, vec![(1, &times[..])]);
        let mut fetched = Vec::new();
        let mut steps = Vec::new();
        loop {
            let runs = fetch.next_runs(&fetch_of(&fetched));
            if runs.is_empty() {
                break;
            }
            steps.push(offsets(&runs));
            fetched.extend(
                runs.iter()
                    .flat_map(|r| r.chunks.iter().map(|c| c.chunk_start_offset)),
            );
        }
        // The chunk holding 25, then one chunk back, then one more (the keyframe at 0);
        // then nothing: 0..=25 is all fetched.
        assert_eq!(steps, [vec![vec![220]], vec![vec![110]], vec![vec![0]]]);

        // A frame right after a keyframe needs only its own chunk.
        let times = [45u64];
        let mut fetch = FrameFetch::new(&chunks, vec![(1, &times[..])]);
        assert_eq!(offsets(&fetch.next_runs(&fetch_of(&[]))), [vec![440]]);
        assert!(fetch.next_runs(&fetch_of(&[440])).is_empty());
    }

    #[test]
    fn walk_back_fills_the_gap_between_keyframe_and_frame() {
        // Two cameras asked together: chunk 0 holds camera 1's keyframe, chunk 330 the
        // frame; the chunks in between hold its frames too and must be read.
        let chunks = [
            chunk(0, 100, 10, 0, 9, &[1]),
            chunk(110, 100, 10, 10, 19, &[1]),
            chunk(220, 100, 10, 20, 29, &[1]),
            chunk(330, 100, 10, 30, 39, &[1]),
        ];
        let times = [35u64, 5];
        let mut fetch = FrameFetch::new(&chunks, vec![(1, &times[..])]);
        // First step: the chunks at 35 and at 5 (not adjacent: two runs).
        assert_eq!(
            offsets(&fetch.next_runs(&HashMap::<u16, Units<bool>>::new())),
            [vec![0], vec![330]]
        );
        let units = HashMap::from([(1, units(&[(0, true), (5, false), (30, false), (35, false)]))]);
        // The keyframe at 0 is known: the chunks between it and 35, in one read.
        assert_eq!(offsets(&fetch.next_runs(&units)), [vec![110, 220]]);
    }

    #[test]
    fn a_stream_without_keyframes_ends_the_walk() {
        let chunks = [
            chunk(0, 100, 10, 0, 9, &[1]),
            chunk(110, 100, 10, 10, 19, &[1]),
        ];
        let times = [15u64];
        let mut fetch = FrameFetch::new(&chunks, vec![(1, &times[..])]);
        let none = |ts: &[u64]| {
            HashMap::from([(1, ts.iter().map(|&t| (t, false)).collect::<Units<bool>>())])
        };
        assert_eq!(offsets(&fetch.next_runs(&none(&[]))), [vec![110]]);
        assert_eq!(offsets(&fetch.next_runs(&none(&[10, 15]))), [vec![0]]);
        assert!(fetch.next_runs(&none(&[0, 5, 10, 15])).is_empty());
        assert_eq!(plan_gops(&none(&[0, 5, 10, 15])[&1], &[15], false), Err(15));
    }

    #[test]
    fn frames_shown_are_the_latest_at_or_before_a_time() {
        let u = units(&[(10, true), (20, false), (30, true), (40, false)]);
        let at = |t| shown_at(&u, t).map(|s| (s.frame, s.keyframe));
        assert_eq!(at(25), Some((20, 10)));
        assert_eq!(at(30), Some((30, 30)));
        assert_eq!(at(u64::MAX), Some((40, 30)));
        // Before the first frame: the first frame.
        assert_eq!(at(0), Some((10, 10)));
        assert_eq!(shown_at(&Units::<bool>::new(), 5), None);
    }

    #[test]
    fn gops_group_requested_times_by_keyframe() {
        let u = units(&[
            (10, true),
            (20, false),
            (30, false),
            (40, true),
            (50, false),
            (60, false),
        ]);
        let plan = plan_gops(&u, &[25, 12, 55], false).expect("every time has a frame");
        assert_eq!(
            plan.gops,
            [
                GopSpan {
                    keyframe: 10,
                    through: 20,
                    end_ns: 26,
                    shown: BTreeSet::from([10, 20])
                },
                GopSpan {
                    keyframe: 40,
                    through: 50,
                    end_ns: 56,
                    shown: BTreeSet::from([50])
                },
            ]
        );
        assert_eq!(plan.shown, [(0, 20), (0, 10), (1, 50)]);

        // Whole GOPs run to the next keyframe, or past the last unit fetched.
        let plan = plan_gops(&u, &[25, 55], true).expect("every time has a frame");
        assert_eq!((plan.gops[0].through, plan.gops[0].end_ns), (39, 40));
        assert_eq!((plan.gops[1].through, plan.gops[1].end_ns), (u64::MAX, 61));
        // The latest time a GOP serves counts even past its last unit; never overflows.
        let plan = plan_gops(&u, &[u64::MAX], false).expect("every time has a frame");
        assert_eq!(plan.gops[0].end_ns, u64::MAX);
        assert_eq!(plan.shown, [(0, 60)]);
    }
}
