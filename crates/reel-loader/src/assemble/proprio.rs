//! Filling a sample's numeric streams (state windows, action chunks): values on the
//! episode's grid, each element with its time and mask.

use super::*;

impl Worker {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fill_proprio(
        &mut self,
        episode: &OpenEpisode,
        row: usize,
        proprio: &ProprioPlan,
        anchor: i64,
        uri: &str,
        out: &mut StreamTensors,
        slot: usize,
    ) -> Result<()> {
        let Some((need, max_gap)) = proprio_need(episode, proprio, anchor) else {
            return Ok(());
        };
        let shared = Arc::clone(&self.shared);
        let windows = self.signal_span(episode, row, need, uri)?;
        let topic_index = shared
            .proprio_topics
            .iter()
            .position(|t| *t == proprio.topic)
            .ok_or_else(|| LoaderError::Mismatch {
                uri: uri.to_string(),
                reason: format!("{} not read", proprio.topic),
            })?;
        let window = &windows[topic_index];
        let fields = if !window.fields.is_empty() {
            window.fields.len()
        } else if !window.log_times.is_empty() {
            window.values.len() / window.log_times.len()
        } else {
            proprio.fields
        };
        if fields != proprio.fields {
            return Err(LoaderError::Mismatch {
                uri: uri.to_string(),
                reason: format!(
                    "{} has {fields} values per step, the batch {}",
                    proprio.topic, proprio.fields
                ),
            });
        }
        let steps = proprio.offsets_ns.len();
        for (i, offset) in proprio.offsets_ns.iter().enumerate() {
            let tau = anchor + offset;
            let element = slot * steps + i;
            let dst_range = element * fields..(element + 1) * fields;
            let (time, valid) = match value_at(window, tau, max_gap) {
                Some(Value::Exact(r)) => {
                    let src = &window.values[r * fields..(r + 1) * fields];
                    if let Some(dst) = out.data.data_f32_mut() {
                        for (d, s) in dst[dst_range].iter_mut().zip(src) {
                            *d = *s as f32;
                        }
                    }
                    (window.log_times[r] as i64, true)
                }
                Some(Value::Between(r, w)) => {
                    let (a, b) = (
                        &window.values[r * fields..(r + 1) * fields],
                        &window.values[(r + 1) * fields..(r + 2) * fields],
                    );
                    if let Some(dst) = out.data.data_f32_mut() {
                        for ((d, x), y) in dst[dst_range].iter_mut().zip(a).zip(b) {
                            *d = (x + (y - x) * w) as f32;
                        }
                    }
                    (tau, true)
                }
                None => (tau, false),
            };
            write_i64(&mut out.time_ns, element, 0, time);
            write_u8(&mut out.mask, element, u8::from(valid));
        }
        Ok(())
    }

    /// Decoded numeric streams of `row` covering `need`: from the last span read when it
    /// covers them, else one read of the numeric group (a little wider when samples come
    /// in runs, so the next anchors of the run are served from memory).
    pub(super) fn signal_span(
        &mut self,
        episode: &OpenEpisode,
        row: usize,
        need: std::ops::Range<i64>,
        uri: &str,
    ) -> Result<&[SignalWindow]> {
        if let Some(i) = self
            .signals
            .iter()
            .position(|s| s.row == row && s.span.start <= need.start && need.end <= s.span.end)
        {
            let entry = self.signals.remove(i).expect("index from position");
            self.signals.push_front(entry);
        } else {
            let widen = self.shared.signal_widen_ns;
            let span = (need.start - widen).max(0)..need.end + widen;
            let topics: Vec<&str> = self
                .shared
                .proprio_topics
                .iter()
                .map(String::as_str)
                .collect();
            let windows = episode
                .reader
                .signals(&topics, span.start as u64..span.end as u64)
                .map_err(|source| LoaderError::Episode {
                    uri: uri.to_string(),
                    source: Box::new(source),
                })?;
            self.signals.push_front(SignalSpan { row, span, windows });
            self.signals.truncate(SIGNAL_SPANS);
        }
        Ok(&self.signals[0].windows)
    }
}

/// The times `proprio` reads around `anchor` (its offsets, widened by the gap that
/// interpolation may bridge), and that gap; `None` when it has no offsets.
pub(super) fn proprio_need(
    episode: &OpenEpisode,
    proprio: &ProprioPlan,
    anchor: i64,
) -> Option<(std::ops::Range<i64>, i64)> {
    let period = episode.period(&proprio.topic, 20_000_000);
    // Interpolate across at most a missing step or two; farther apart is a gap.
    let max_gap = period * 5 / 2;
    let first = anchor + proprio.offsets_ns.first()? - max_gap;
    let last = anchor + proprio.offsets_ns.last()? + max_gap;
    Some((first..last + 1, max_gap))
}

enum Value {
    /// Row `r` is at the requested time.
    Exact(usize),
    /// Between rows `r` and `r + 1`, at weight `w` from `r`.
    Between(usize, f64),
}

/// Where `tau` falls in a stream: on a grid point, between two close ones, or nowhere.
fn value_at(w: &SignalWindow, tau: i64, max_gap: i64) -> Option<Value> {
    let times = &w.log_times;
    let i = times.partition_point(|&t| (t as i64) < tau);
    if i < times.len() && (times[i] as i64 - tau) <= ON_GRID_NS {
        return Some(Value::Exact(i));
    }
    if i > 0 && tau - (times[i - 1] as i64) <= ON_GRID_NS {
        return Some(Value::Exact(i - 1));
    }
    if i > 0 && i < times.len() {
        let (a, b) = (times[i - 1] as i64, times[i] as i64);
        if b - a <= max_gap {
            return Some(Value::Between(i - 1, (tau - a) as f64 / (b - a) as f64));
        }
    }
    None
}
