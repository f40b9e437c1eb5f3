//! A spec resolved against the episodes it will read: each stream's frame size or value
//! count, found in the first episode of each source that opens, as the tensors a batch
//! holds.

use reel_io::ByteSource;
use reel_mcap::EpisodeReader;
use reel_mcap::records::ChannelContent;

use crate::error::{LoaderError, Result};
use crate::mixture::Catalog;
use crate::spec::{DepthTensorUnit, Layout, ProprioSpec, SampleSpec};

/// A camera of the spec, resolved against the first episode.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CameraPlan {
    pub name: String,
    pub topic: String,
    pub offsets_ns: Vec<i64>,
    pub width: usize,
    pub height: usize,
    /// Decode at this size (`None`: the stream's own, which must be `width`×`height`).
    pub resize: Option<(usize, usize)>,
    pub layout: Layout,
}

/// A depth camera of the spec, resolved against the first episode.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DepthPlan {
    pub name: String,
    pub topic: String,
    pub offsets_ns: Vec<i64>,
    pub width: usize,
    pub height: usize,
    pub unit: DepthTensorUnit,
}

/// A numeric stream of the spec, resolved against the first episode.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProprioPlan {
    pub name: String,
    pub topic: String,
    pub offsets_ns: Vec<i64>,
    pub fields: usize,
}

impl ProprioPlan {
    pub(crate) fn new(spec: &ProprioSpec, fields: usize) -> Self {
        Self {
            name: spec.name.clone(),
            topic: spec.topic.clone(),
            offsets_ns: spec.offsets_ns(),
            fields,
        }
    }
}

/// The streams of a batch, resolved.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plans {
    pub cameras: Vec<CameraPlan>,
    pub depths: Vec<DepthPlan>,
    pub proprio: Vec<ProprioPlan>,
    /// Every numeric topic of the spec, read together (one read of their group).
    pub proprio_topics: Vec<String>,
}

impl Plans {
    /// `spec` resolved against every source's first readable episode: sources whose
    /// episodes differ in what the spec reads cannot share a batch.
    pub(crate) fn resolve(spec: &SampleSpec, catalog: &Catalog) -> Result<Self> {
        let mut first: Option<(Self, String)> = None;
        for source in 0..catalog.len() {
            let (uri, reader) = first_readable(catalog, source)?;
            let plans = Self::of_episode(spec, &uri, &reader)?;
            match &first {
                None => first = Some((plans, uri)),
                Some((want, want_uri)) if *want != plans => {
                    return Err(LoaderError::Mixture {
                        reason: format!(
                            "source {source}'s episode {uri} differs from source 0's \
                             {want_uri} in what the spec reads ({}): the sources of one \
                             batch need streams of the same sizes",
                            difference(want, &plans)
                        ),
                    });
                }
                Some(_) => {}
            }
        }
        first
            .map(|(plans, _)| plans)
            .ok_or_else(|| LoaderError::Mixture {
                reason: "no source to load from".into(),
            })
    }

    /// `spec` resolved against one episode.
    fn of_episode(
        spec: &SampleSpec,
        uri: &str,
        reader: &EpisodeReader<Box<dyn ByteSource>>,
    ) -> Result<Self> {
        let mismatch = |reason: String| LoaderError::Mismatch {
            uri: uri.to_string(),
            reason,
        };
        let channel = |topic: &str| {
            reader
                .channel_info(topic)
                .map(|info| info.content)
                .map_err(|e| mismatch(format!("the spec's topic {topic}: {e}")))
        };
        let mut cameras = Vec::new();
        for c in &spec.cameras {
            let ChannelContent::Camera(camera) = channel(&c.topic)? else {
                return Err(mismatch(format!("{} is not a camera", c.topic)));
            };
            let (width, height, resize) = match c.size {
                Some([w, h]) => (w, h, Some((w, h))),
                None => (camera.width, camera.height, None),
            };
            cameras.push(CameraPlan {
                name: c.name.clone(),
                topic: c.topic.clone(),
                offsets_ns: c.offsets_ns(),
                width,
                height,
                resize,
                layout: c.layout,
            });
        }
        let mut depths = Vec::new();
        for d in &spec.depths {
            let ChannelContent::Depth(depth) = channel(&d.topic)? else {
                return Err(mismatch(format!("{} is not a depth camera", d.topic)));
            };
            if d.unit == DepthTensorUnit::M && depth.unit != reel_video::DepthUnit::Millimetres {
                return Err(mismatch(format!(
                    "{} holds {:?} values, not millimetres: it has no metres",
                    d.topic,
                    depth.unit.as_str()
                )));
            }
            depths.push(DepthPlan {
                name: d.name.clone(),
                topic: d.topic.clone(),
                offsets_ns: d.offsets_ns(),
                width: depth.width,
                height: depth.height,
                unit: d.unit,
            });
        }
        let mut proprio = Vec::new();
        let mut proprio_topics: Vec<String> = Vec::new();
        for p in &spec.proprio {
            let ChannelContent::Signal(signal) = channel(&p.topic)? else {
                return Err(mismatch(format!("{} is not a numeric stream", p.topic)));
            };
            let fields = Some(signal.fields.len())
                .filter(|n| *n > 0)
                .ok_or_else(|| mismatch(format!("{} has no value names", p.topic)))?;
            proprio.push(ProprioPlan::new(p, fields));
            if !proprio_topics.contains(&p.topic) {
                proprio_topics.push(p.topic.clone());
            }
        }
        Ok(Self {
            cameras,
            depths,
            proprio,
            proprio_topics,
        })
    }
}

/// The first stream whose size differs between `a` and `b`.
fn difference(a: &Plans, b: &Plans) -> String {
    let sized = |topic: &str, w: usize, h: usize, w2: usize, h2: usize| {
        format!("{topic}: {w}x{h} against {w2}x{h2}")
    };
    if let Some((x, y)) = a.cameras.iter().zip(&b.cameras).find(|(x, y)| x != y) {
        return sized(&x.topic, x.width, x.height, y.width, y.height);
    }
    if let Some((x, y)) = a.depths.iter().zip(&b.depths).find(|(x, y)| x != y) {
        return sized(&x.topic, x.width, x.height, y.width, y.height);
    }
    if let Some((x, y)) = a.proprio.iter().zip(&b.proprio).find(|(x, y)| x != y) {
        return format!("{}: {} values against {}", x.topic, x.fields, y.fields);
    }
    "their streams differ".into()
}

/// The first episode of `source` with samples that opens: a corrupt episode is skipped
/// and reported in the batches like any other, whichever row it is in.
fn first_readable(
    catalog: &Catalog,
    source: usize,
) -> Result<(String, EpisodeReader<Box<dyn ByteSource>>)> {
    let mut failures = Vec::new();
    let rows = catalog.manifest(source).map_or(0, |m| m.len());
    for source_row in 0..rows {
        let row = catalog.row(source, source_row)?;
        if !catalog.count(row).is_ok_and(|n| n > 0) {
            continue;
        }
        let uri = catalog.episode(row)?.uri()?.to_string();
        let reader = catalog.open(row, &uri).and_then(|bytes| {
            EpisodeReader::open(bytes).map_err(|e| LoaderError::Episode {
                uri: uri.clone(),
                source: Box::new(e),
            })
        });
        match reader {
            Ok(reader) => return Ok((uri, reader)),
            Err(e) => failures.push(format!("row {source_row}: {e}")),
        }
        // Sixteen in a row is not bad episodes but a broken store: stop asking.
        if failures.len() == 16 {
            break;
        }
    }
    let path = catalog
        .manifest(source)
        .map(|m| m.path().display().to_string());
    Err(LoaderError::NoReadableEpisode {
        reasons: format!("{}: {}", path.unwrap_or_default(), failures.join("; ")),
    })
}
