//! One episode of a replay buffer as a landing log: where each array goes ([`target`])
//! and the streams and episode record made from the episode's rows.

use std::collections::BTreeMap;

use bytes::Bytes;
use reel_landing::{LandingImage, LandingImages, LandingLog};
use reel_mcap::SignalKind;

use super::arrays::ZarrArray;
use crate::grid::{MAX_SIGNAL_VALUES, grid_signal, numbered};
use crate::record::{EpisodeSource, number_text};
use crate::{Error, Result, keys};

/// Where an array of `data/` goes.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Target {
    /// A numeric stream.
    Signal {
        topic: String,
        kind: SignalKind,
        width: usize,
    },
    /// A camera of 8-bit RGB pictures, `width` x `height`.
    Camera {
        topic: String,
        width: usize,
        height: usize,
    },
    /// Not read, and why.
    Skipped(String),
}

impl Target {
    pub(super) fn describe(&self) -> String {
        match self {
            Target::Signal { topic, kind, width } => {
                let values = if *width == 1 { "value" } else { "values" };
                format!("signal {topic} ({}, {width} {values})", kind.as_str())
            }
            Target::Camera {
                topic,
                width,
                height,
            } => format!("camera {topic} ({width}x{height} RGB, H.264 on ingest)"),
            Target::Skipped(why) => format!("not read: {why}"),
        }
    }
}

/// The least height and width an array's rows need to be pictures: smaller `[.., .., 3]`
/// rows are numbers (two hands' 21 keypoints in 3-D are `[2, 21, 3]`).
const MIN_PICTURE_SIDE: u64 = 16;

/// Where `array` (of `data/`) goes: `[steps, height, width, 3]` of at least
/// [`MIN_PICTURE_SIDE`] a camera, rows of at most [`MAX_SIGNAL_VALUES`] numbers a signal
/// (`action…` an action, the rest state).
pub(super) fn target(array: &ZarrArray) -> Target {
    let key = array.path.rsplit('/').next().unwrap_or(&array.path);
    let topic = format!("/{key}");
    if array.dtype.is_none() {
        return Target::Skipped(format!("`{}` values (not numbers)", array.type_name));
    }
    let picture = |h: u64, w: u64| h >= MIN_PICTURE_SIDE && w >= MIN_PICTURE_SIDE;
    match array.shape[1..] {
        [height, width, 3] if picture(height, width) => {
            return Target::Camera {
                topic,
                width: width as usize,
                height: height as usize,
            };
        }
        [height, width, channels @ (1 | 2 | 4)] if picture(height, width) => {
            return Target::Skipped(format!(
                "pictures of {channels} channels (grey, depth and RGBA are not read yet)"
            ));
        }
        _ => {}
    }
    let width = array.row_width() as usize;
    if width > MAX_SIGNAL_VALUES {
        return Target::Skipped(format!(
            "{width} values a step (a picture or map stored as numbers; more than {MAX_SIGNAL_VALUES})"
        ));
    }
    let kind = if key.starts_with("action") {
        SignalKind::Action
    } else {
        SignalKind::State
    };
    Target::Signal { topic, kind, width }
}

/// What the landing log of an episode says about where it came from.
pub(super) struct EpisodeContext<'a> {
    pub id: String,
    pub dataset: String,
    /// `zarr v2` or `zarr v3`.
    pub revision: String,
    pub index: usize,
    pub steps: std::ops::Range<u64>,
    pub fps: f64,
    /// `meta/` arrays with a row per episode: `zarr.meta.<key>` in the record.
    pub meta: &'a [ZarrArray],
    /// The root group's attributes, when it has any.
    pub attributes: Option<&'a str>,
}

/// The landing log of one episode: every `data/` array read for its steps.
pub(super) fn landing_log(episode: &EpisodeContext, data: &[ZarrArray]) -> Result<LandingLog> {
    let steps = episode.steps.clone();
    if steps.is_empty() {
        return Err(Error::dataset(
            &episode.dataset,
            format!("episode {} has no steps", episode.index),
        ));
    }
    let period_ns = (1e9 / episode.fps).round() as u64;
    let mut signals = Vec::new();
    let mut images = Vec::new();
    for array in data {
        match target(array) {
            Target::Signal { topic, kind, width } => {
                let rows = array.numbers(steps.clone())?;
                let key = topic.trim_start_matches('/');
                signals.push(grid_signal(
                    &topic,
                    kind,
                    numbered(key, width),
                    rows,
                    period_ns,
                    "zarr",
                ));
            }
            Target::Camera {
                topic,
                width,
                height,
            } => {
                let samples = Bytes::from(array.samples(steps.clone())?);
                let size = width * height * 3;
                let frames = (0..steps.end - steps.start)
                    .map(|i| {
                        let at = i as usize * size;
                        let picture = LandingImage::Rgb {
                            width,
                            height,
                            data: samples.slice(at..at + size),
                        };
                        (i * period_ns, picture)
                    })
                    .collect();
                images.push(LandingImages {
                    frame_id: topic.trim_start_matches('/').to_owned(),
                    topic,
                    frames,
                });
            }
            Target::Skipped(_) => {}
        }
    }
    let mut record = EpisodeSource {
        id: &episode.id,
        format: "zarr",
        dataset: &episode.dataset,
        revision: &episode.revision,
        index: episode.index,
        fps: episode.fps,
    }
    .record();
    for array in episode.meta {
        let row = episode.index as u64;
        let values = array.numbers(row..row + 1)?.pop().unwrap_or_default();
        let key = array.path.rsplit('/').next().unwrap_or(&array.path);
        record.insert(format!("{}{key}", keys::ZARR_META), number_text(&values));
    }
    if let Some(attributes) = episode.attributes {
        record.insert(keys::ZARR_ATTRIBUTES.to_owned(), attributes.to_owned());
    }
    Ok(LandingLog {
        videos: Vec::new(),
        images,
        signals,
        metadata: BTreeMap::from([("episode".to_owned(), record)]),
    })
}
