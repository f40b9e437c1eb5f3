//! One RLDS record as a landing log: where each feature goes ([`target`]) and the
//! streams and episode record made from a record's values.

use std::collections::BTreeMap;

use bytes::Bytes;
use reel_landing::{LandingImage, LandingImages, LandingLog};
use reel_mcap::SignalKind;

use super::example::{self, Kind};
use super::features::{Dtype, FeatureSpec, ImageFormat, Leaf};
use super::values;
use crate::grid::{MAX_SIGNAL_VALUES, grid_signal, numbered};
use crate::record::{EpisodeSource, number_text};
use crate::{Error, Result, keys};

/// What an episode's landing log says about where it came from.
pub(super) struct EpisodeContext {
    /// The shard and record, for errors.
    pub record_name: String,
    pub id: String,
    pub dataset: String,
    pub revision: String,
    pub split: String,
    pub index: usize,
    pub fps: f64,
    pub features_text: String,
}

/// Where a feature goes.
pub(super) enum Target {
    /// A numeric stream.
    Signal {
        topic: String,
        kind: SignalKind,
        width: usize,
    },
    /// A camera of pictures as recorded.
    Camera { topic: String, format: ImageFormat },
    /// Text or numbers in the episode record; the task too for a language instruction.
    Record { key: String, task: bool },
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
            Target::Camera { topic, format } => format!(
                "camera {topic} ({}, H.264 on ingest; left out of an episode whose has_<camera> is false)",
                match format {
                    ImageFormat::Jpeg => "JPEG",
                    ImageFormat::Png => "PNG",
                }
            ),
            Target::Record { key, task: true } => format!("task and record {key}"),
            Target::Record { key, task: false } => format!("record {key}"),
            Target::Skipped(why) => format!("not read: {why}"),
        }
    }
}

/// TFDS's description of a feature, for `--list`.
pub(super) fn describe_spec(spec: &FeatureSpec) -> String {
    match spec {
        FeatureSpec::Tensor {
            dtype,
            shape,
            encoding,
        } => format!(
            "Tensor {} {shape:?}{}",
            format!("{dtype:?}").to_lowercase(),
            match encoding {
                super::TensorEncoding::None => "",
                super::TensorEncoding::Bytes => " (bytes)",
                super::TensorEncoding::Zlib => " (zlib)",
            }
        ),
        FeatureSpec::Image {
            shape,
            dtype,
            format,
        } => format!(
            "Image {} {} {shape:?}",
            match format {
                ImageFormat::Jpeg => "jpeg",
                ImageFormat::Png => "png",
            },
            format!("{dtype:?}").to_lowercase()
        ),
        FeatureSpec::Text => "Text".into(),
        FeatureSpec::ClassLabel { classes } => format!("ClassLabel ({classes} classes)"),
        FeatureSpec::Dict(_) | FeatureSpec::Steps(_) => "FeaturesDict".into(),
    }
}

/// The record key of a feature: `rlds.` and its path with dots.
fn record_key(leaf: &Leaf) -> String {
    format!("rlds.{}", leaf.step_path().replace('/', "."))
}

/// Where `leaf` goes (`leaves`: all of the build's, for the language instruction that is
/// the task: the first one by path).
pub(super) fn target(leaf: &Leaf, leaves: &[Leaf]) -> Target {
    let text = |leaf: &Leaf| {
        matches!(leaf.spec, FeatureSpec::Text)
            || matches!(
                leaf.spec,
                FeatureSpec::Tensor {
                    dtype: Dtype::String,
                    ..
                }
            )
    };
    if !leaf.per_step {
        return match &leaf.spec {
            FeatureSpec::Image { .. } => Target::Skipped("an episode's picture".into()),
            _ if text(leaf) || leaf.values_per_item().is_some() => Target::Record {
                key: record_key(leaf),
                task: false,
            },
            _ => Target::Skipped("a tensor of varying shape".into()),
        };
    }
    let topic = format!("/{}", leaf.step_path());
    match &leaf.spec {
        _ if text(leaf) => {
            let is_instruction =
                |l: &Leaf| l.per_step && text(l) && l.name().starts_with("language_instruction");
            let task = is_instruction(leaf)
                && leaves
                    .iter()
                    .find(|l| is_instruction(l))
                    .is_some_and(|l| l.path == leaf.path);
            Target::Record {
                key: record_key(leaf),
                task,
            }
        }
        FeatureSpec::Image {
            dtype: Dtype::Uint8,
            format,
            shape,
        } if shape.last().is_none_or(|&c| c == 3 || c == -1) => Target::Camera {
            topic,
            format: *format,
        },
        FeatureSpec::Image { .. } => Target::Skipped(
            "an image that is not 8-bit RGB (depth and grey pictures are not read yet)".into(),
        ),
        _ => match leaf.values_per_item() {
            Some(width) if width > MAX_SIGNAL_VALUES => Target::Skipped(format!(
                "{width} values a step (a picture or map stored as a tensor; more than {MAX_SIGNAL_VALUES})"
            )),
            Some(width) => {
                let path = leaf.step_path();
                let kind = if path.starts_with("action") {
                    SignalKind::Action
                } else if path.starts_with("observation/") {
                    SignalKind::State
                } else {
                    SignalKind::Signal
                };
                Target::Signal { topic, kind, width }
            }
            None => Target::Skipped("a tensor of varying shape".into()),
        },
    }
}

/// A picture's format from its first bytes (JPEG's SOI marker, PNG's signature).
fn picture_format(bytes: &[u8]) -> Option<ImageFormat> {
    if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some(ImageFormat::Jpeg)
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageFormat::Png)
    } else {
        None
    }
}

/// Record text of one value per item: the value when every item has the same, else the
/// values as a JSON list; `None` when all are empty.
fn text_value(items: &[Bytes]) -> Option<String> {
    let texts: Vec<String> = items
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    if texts.iter().all(String::is_empty) {
        return None;
    }
    if texts.windows(2).all(|w| w[0] == w[1]) {
        return texts.into_iter().next();
    }
    serde_json::to_string(&texts).ok()
}

/// Integers as text: the one, or a JSON list.
fn list_text(texts: &[String]) -> String {
    match texts {
        [one] => one.clone(),
        many => format!("[{}]", many.join(",")),
    }
}

/// The landing log of one record.
pub(super) fn landing_log(
    episode: &EpisodeContext,
    leaves: &[Leaf],
    record: Bytes,
) -> Result<LandingLog> {
    let bad = |what: String| Error::dataset(&episode.record_name, what);
    let mut features =
        example::decode(record).ok_or_else(|| bad("not a tf.train.Example".into()))?;
    let steps = step_count(leaves, &features);
    let mut take = |leaf: &Leaf| -> Result<Kind> {
        features.remove(&leaf.path).ok_or_else(|| {
            bad(format!(
                "no feature `{}`, which features.json lists",
                leaf.path
            ))
        })
    };
    let period_ns = (1e9 / episode.fps).round() as u64;
    let mut signals = Vec::new();
    let mut images = Vec::new();
    let mut record = EpisodeSource {
        id: &episode.id,
        format: "rlds",
        dataset: &episode.dataset,
        revision: &episode.revision,
        index: episode.index,
        fps: episode.fps,
    }
    .record();
    record.insert(keys::RLDS_SPLIT.to_owned(), episode.split.clone());
    record.insert(
        keys::RLDS_FEATURES.to_owned(),
        episode.features_text.clone(),
    );
    // Episode features first: a camera's `has_<camera>` decides whether it is kept.
    let mut absent_cameras = Vec::new();
    for leaf in leaves.iter().filter(|l| !l.per_step) {
        let Target::Record { key, .. } = target(leaf, leaves) else {
            continue;
        };
        let list = take(leaf)?;
        let value = match leaf.values_per_item() {
            Some(_) => {
                let rows = values::numbers(leaf, &list, 1)
                    .map_err(|e| bad(format!("`{}`: {e}", leaf.path)))?;
                if let Some(camera) = leaf.name().strip_prefix("has_")
                    && rows[0] == [0.0]
                {
                    absent_cameras.push(camera.to_owned());
                }
                // Integers as the record holds them: 64-bit ids and times past 2^53 stay exact.
                Some(
                    values::integer_texts(leaf, &list)
                        .map_or_else(|| number_text(&rows[0]), |texts| list_text(&texts)),
                )
            }
            None => text_value(
                &values::strings(&list, 1).map_err(|e| bad(format!("`{}`: {e}", leaf.path)))?,
            ),
        };
        if let Some(value) = value {
            record.insert(key, value);
        }
    }
    for leaf in leaves.iter().filter(|l| l.per_step) {
        let target = target(leaf, leaves);
        if matches!(target, Target::Skipped(_)) {
            continue;
        }
        let list = take(leaf)?;
        let context = |e: String| bad(format!("`{}`: {e}", leaf.path));
        match target {
            Target::Signal { topic, kind, width } => {
                let rows = values::numbers(leaf, &list, steps).map_err(context)?;
                signals.push(grid_signal(
                    &topic,
                    kind,
                    numbered(leaf.name(), width),
                    rows,
                    period_ns,
                    "rlds",
                ));
            }
            Target::Camera { topic, format } => {
                if absent_cameras.iter().any(|c| c == leaf.name()) {
                    continue;
                }
                let pictures = values::strings(&list, steps).map_err(context)?;
                let frames = pictures
                    .into_iter()
                    .enumerate()
                    .map(|(i, bytes)| {
                        // TFDS stores bytes it is given as they are, whatever the feature's
                        // `encodingFormat` says: the picture's own signature decides.
                        let picture = match picture_format(&bytes).unwrap_or(format) {
                            _ if bytes.is_empty() => {
                                return Err(context(format!("step {i}: an empty picture")));
                            }
                            ImageFormat::Jpeg => LandingImage::Jpeg(bytes),
                            ImageFormat::Png => LandingImage::Png(bytes),
                        };
                        Ok((i as u64 * period_ns, picture))
                    })
                    .collect::<Result<_>>()?;
                images.push(LandingImages {
                    topic,
                    frame_id: leaf.name().to_owned(),
                    frames,
                });
            }
            Target::Record { key, task } => {
                let texts = values::strings(&list, steps).map_err(context)?;
                if let Some(value) = text_value(&texts) {
                    if task {
                        record.insert("task".to_owned(), value.clone());
                    }
                    record.insert(key, value);
                }
            }
            Target::Skipped(_) => {}
        }
    }
    Ok(LandingLog {
        videos: Vec::new(),
        images,
        signals,
        metadata: BTreeMap::from([("episode".to_owned(), record)]),
    })
}

/// How many steps the record holds: `steps/is_first`'s length where the build has it,
/// else the first per-step feature's. The others are checked against it as they are read.
fn step_count(leaves: &[Leaf], features: &BTreeMap<String, Kind>) -> usize {
    let first = leaves
        .iter()
        .filter(|l| l.per_step && !matches!(target(l, leaves), Target::Skipped(_)))
        .filter(|l| features.contains_key(&l.path))
        .min_by_key(|l| l.path != "steps/is_first");
    let Some((leaf, list)) = first.and_then(|l| Some((l, features.get(&l.path)?))) else {
        return 0;
    };
    match (leaf.values_per_item(), list) {
        (Some(width), Kind::Floats(_) | Kind::Int64s(_)) if width > 0 => list.len() / width,
        _ => list.len(),
    }
}
