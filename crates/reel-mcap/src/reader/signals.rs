//! Numeric streams: `reel.FloatArray` messages decoded into windows of named values.

use std::ops::Range;

use prost::Message as _;
use reel_io::ByteSource;

use super::EpisodeReader;
use crate::proto::FloatArray;
use crate::{Error, Result, keys};

/// A window of one numeric stream, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalWindow {
    /// Topic.
    pub topic: String,
    /// Value names (`reel.fields`).
    pub fields: Vec<String>,
    /// Log time of each sample (ns).
    pub log_times: Vec<u64>,
    /// Values, row-major: `log_times.len()` rows of `fields.len()`.
    pub values: Vec<f64>,
}

impl<S: ByteSource> EpisodeReader<S> {
    /// Decoded numeric streams over `window`, all fetched together (one ranged read per
    /// group on a canonical file).
    pub fn signals(&self, topics: &[&str], window: Range<u64>) -> Result<Vec<SignalWindow>> {
        let messages = self.read_topics(topics, window)?;
        let mut out: Vec<SignalWindow> = Vec::with_capacity(topics.len());
        for topic in topics {
            let channel = self.channel(topic)?;
            let fields: Vec<String> = keys::fields(&channel)
                .into_iter()
                .map(str::to_owned)
                .collect();
            let mut w = SignalWindow {
                topic: (*topic).to_owned(),
                fields,
                log_times: Vec::new(),
                values: Vec::new(),
            };
            for m in messages.iter().filter(|m| &*m.topic == *topic) {
                let bad = |reason: String| Error::BadMessage {
                    name: self.name.clone(),
                    topic: (*topic).to_owned(),
                    log_time: m.log_time,
                    reason,
                };
                let sample = FloatArray::decode(m.data.as_ref()).map_err(|e| bad(e.to_string()))?;
                if !w.fields.is_empty() && sample.values.len() != w.fields.len() {
                    return Err(bad(format!(
                        "{} values for {} fields",
                        sample.values.len(),
                        w.fields.len()
                    )));
                }
                w.log_times.push(m.log_time);
                w.values.extend_from_slice(&sample.values);
            }
            out.push(w);
        }
        Ok(out)
    }
}
