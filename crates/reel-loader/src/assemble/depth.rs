//! Filling a sample's depth frames: decoded windows of a depth camera, kept for nearby
//! samples.

use super::*;

impl Worker {
    /// Each offset takes the frame nearest its time, as cameras do (the latest at or
    /// before it plus half a period, else the first after it), masked when it is more than
    /// half a period away; with no frame nearby the element stays 0, masked.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fill_depth(
        &mut self,
        episode: &OpenEpisode,
        row: usize,
        di: usize,
        depth: &DepthPlan,
        anchor: i64,
        uri: &str,
        out: &mut StreamTensors,
        slot: usize,
    ) -> Result<()> {
        let period = episode.period(&depth.topic, 33_333_333);
        let half = period / 2;
        let (Some(&first), Some(&last)) =
            (depth.offsets_ns.iter().min(), depth.offsets_ns.iter().max())
        else {
            return Ok(());
        };
        let need = anchor + first - period..anchor + last + period + 1;
        let window = self.depth_span(episode, row, di, need, uri)?;
        if (window.width, window.height) != (depth.width, depth.height) {
            return Err(LoaderError::Mismatch {
                uri: uri.to_string(),
                reason: format!(
                    "{} is {}x{}, the batch is {}x{}",
                    depth.topic, window.width, window.height, depth.width, depth.height
                ),
            });
        }
        let frame_len = depth.width * depth.height;
        for (j, offset) in depth.offsets_ns.iter().enumerate() {
            let requested = anchor + offset;
            let element = slot * depth.offsets_ns.len() + j;
            let times = &window.log_times;
            let i = times.partition_point(|&t| t as i64 <= requested + half);
            let Some(i) = i.checked_sub(1).or((!times.is_empty()).then_some(0)) else {
                write_i64(&mut out.time_ns, element, 0, requested);
                continue;
            };
            let values = window.frame(i);
            let dst = element * frame_len..(element + 1) * frame_len;
            match depth.unit {
                DepthTensorUnit::Mm => {
                    if let Some(d) = out.data.data_u16_mut() {
                        d[dst].copy_from_slice(values);
                    }
                }
                DepthTensorUnit::M => {
                    if let Some(d) = out.data.data_f32_mut() {
                        for (m, &mm) in d[dst].iter_mut().zip(values) {
                            *m = reel_video::mm_to_metres(mm);
                        }
                    }
                }
            }
            let time = times[i] as i64;
            write_i64(&mut out.time_ns, element, 0, time);
            write_u8(
                &mut out.mask,
                element,
                u8::from((time - requested).abs() <= half),
            );
        }
        Ok(())
    }

    /// Frames of depth camera `di` of `row` covering `need`: from a span read before when
    /// it covers them, else one read (widened like the numeric streams').
    pub(super) fn depth_span(
        &mut self,
        episode: &OpenEpisode,
        row: usize,
        di: usize,
        need: std::ops::Range<i64>,
        uri: &str,
    ) -> Result<&DepthWindow> {
        if let Some(i) = self.depth_spans.iter().position(|s| {
            s.row == row && s.depth == di && s.span.start <= need.start && need.end <= s.span.end
        }) {
            let entry = self.depth_spans.remove(i).expect("index from position");
            self.depth_spans.push_front(entry);
        } else {
            let widen = self.shared.signal_widen_ns;
            let span = (need.start - widen).max(0)..need.end + widen;
            let topic = &self.shared.depths[di].topic;
            let window = episode
                .reader
                .depth(topic, span.start as u64..span.end as u64)
                .map_err(|source| LoaderError::Episode {
                    uri: uri.to_string(),
                    source: Box::new(source),
                })?;
            self.depth_spans.push_front(DepthSpan {
                row,
                depth: di,
                span,
                window,
            });
            self.depth_spans
                .truncate(DEPTH_SPANS * self.shared.depths.len().max(1));
        }
        Ok(&self.depth_spans[0].window)
    }
}
