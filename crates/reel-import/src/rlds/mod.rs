//! RLDS datasets as TensorFlow Datasets builds them (Open X-Embodiment, DROID, BridgeData
//! V2): a version folder holding `dataset_info.json`, `features.json` and
//! `<name>-<split>.tfrecord-NNNNN-of-NNNNN` shards, on a local disk or in a store. Read in
//! Rust, without TensorFlow: TFRecord framing with its checksums, `tf.train.Example`
//! records, and the feature tree of `features.json`.
//!
//! Each record is an episode. Every feature of its `steps` becomes a stream on the
//! episode's fps grid from 0: numbers a signal (`/action…` an action, `/observation/…`
//! state, the rest — `reward`, `discount`, `is_first`… — signals), values as TFDS's own
//! reader returns them; pictures a camera, stored as recorded (JPEG or PNG); text
//! (`language_instruction…`) and the episode's own features (`episode_metadata/…`) go into
//! the episode record as `rlds.<path>`, the first language instruction as its task. A
//! camera whose `episode_metadata/has_<camera>` is false (Bridge's absent cameras, stored
//! black) is left out. [`RldsDataset::mappings`] says how each feature maps before
//! anything is read.
//!
//! Files: `tfrecord` (framing), `example` (the record), `features` (`features.json`),
//! `values` (a feature's values out of a record), `landing` (a record as a landing log).

mod example;
mod features;
mod landing;
mod tfrecord;
mod values;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use reel_io::Store;
use reel_landing::LandingLog;
use serde::{Deserialize, Serialize};

use crate::record::path_segment;
use crate::{Error, Result, Source, SourceEpisode};
pub use features::{Dtype, FeatureSpec, ImageFormat, Leaf, TensorEncoding};

/// Frame rates of datasets whose builds do not record theirs, by the start of the
/// dataset's name: DROID records at 15 Hz, BridgeData V2 at 5 Hz (their papers).
pub const KNOWN_RATES: [(&str, f64); 2] = [("droid", 15.0), ("bridge", 5.0)];

/// How many shards' record offsets are kept (each a list of its records' offsets).
const OFFSET_CACHE: usize = 64;

/// What to import of an RLDS build.
#[derive(Debug, Clone, Default)]
pub struct RldsOptions {
    /// Frames per second (overrides [`KNOWN_RATES`]; needed for other datasets).
    pub fps: Option<f64>,
    /// One split (default: every split the build holds).
    pub split: Option<String>,
    /// Only these shards (keys in the build folder, as a plan's batch names them);
    /// episodes keep the ids and indexes they have in the whole split.
    pub shards: Option<Vec<String>>,
}

/// One shard of a split.
#[derive(Debug, Clone)]
struct Shard {
    split: String,
    key: String,
    /// Position of its first record among the import's episodes, and within its split.
    first: usize,
    first_in_split: usize,
    len: usize,
}

/// An RLDS build opened for import: its features parsed, its shards listed (from
/// `dataset_info.json`'s shard lengths: nothing per episode is held).
#[derive(Debug)]
pub struct RldsDataset {
    store: Store,
    name: String,
    /// The name its import's batch key derives from: the dataset's, and a hash of the
    /// shards when only some are imported (so the tasks of an array do not share one).
    batch: String,
    version: String,
    features_text: String,
    leaves: Vec<Leaf>,
    shards: Vec<Shard>,
    fps: Option<f64>,
    info_uri: String,
    offsets: Mutex<BTreeMap<usize, Arc<tfrecord::ShardIndex>>>,
}

/// `dataset_info.json`, the part Reel reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DatasetInfo {
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    file_format: Option<String>,
    #[serde(default)]
    splits: Vec<SplitInfo>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SplitInfo {
    name: String,
    #[serde(default)]
    shard_lengths: Vec<serde_json::Value>,
    #[serde(default)]
    filepath_template: Option<String>,
}

/// How one feature of the build maps into Reel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FeatureMapping {
    /// Its path in the record (`steps/observation/image`).
    pub feature: String,
    /// What TFDS says it is (`Tensor float64 [7]`, `Image jpeg [180, 320, 3]`…).
    pub tfds: String,
    /// What Reel makes of it: `signal /action (action, 7 values)`, `camera …`,
    /// `record rlds.…`, `task and record rlds.…`, or `not read: <why>`.
    pub reel: String,
}

impl RldsDataset {
    /// Opens the build at `uri` (a local folder or a store URI: the version folder, the
    /// one holding `dataset_info.json`). Errors name the file and what is wrong with it.
    pub fn open(uri: &str, options: &RldsOptions) -> Result<Self> {
        Self::open_in(Store::open_existing(uri)?, options)
    }

    /// Opens the build that `store` is the version folder of: for a store opened with
    /// options of its own ([`Store::open_existing_with`]: credentials, retries).
    pub fn open_in(store: Store, options: &RldsOptions) -> Result<Self> {
        let read_text = |key: &str| -> Result<String> {
            let bytes = store.read(key).map_err(|e| match e {
                reel_io::Error::NotFound { .. } => Error::dataset(
                    store.object_uri(key),
                    "missing: not a TFDS build folder (the version folder, e.g. droid/1.0.0)",
                ),
                other => other.into(),
            })?;
            String::from_utf8(bytes.to_vec())
                .map_err(|_| Error::dataset(store.object_uri(key), "not UTF-8 text"))
        };
        let info_uri = store.object_uri("dataset_info.json");
        let info: DatasetInfo = serde_json::from_str(&read_text("dataset_info.json")?)
            .map_err(|e| Error::dataset(&info_uri, format!("not TFDS's dataset info: {e}")))?;
        if let Some(format) = info.file_format.as_deref().filter(|f| *f != "tfrecord") {
            return Err(Error::dataset(
                &info_uri,
                format!("shards in `{format}` (Reel reads TFRecord builds)"),
            ));
        }
        let features_text = read_text("features.json")?;
        let spec = FeatureSpec::parse(&features_text)
            .map_err(|e| Error::dataset(store.object_uri("features.json"), e))?;
        let leaves = spec.leaves();
        if !leaves.iter().any(|l| l.per_step) {
            return Err(Error::dataset(
                store.object_uri("features.json"),
                "no `steps` Dataset: not an RLDS build",
            ));
        }
        // A build that does not record its rate is still listed and checked; an import
        // asks for the rate (`fps`).
        let fps = options.fps.or_else(|| {
            KNOWN_RATES
                .iter()
                .find(|(prefix, _)| info.name.starts_with(prefix))
                .map(|(_, fps)| *fps)
        });
        if let Some(fps) = fps
            && !(fps.is_finite() && fps > 0.0)
        {
            return Err(Error::dataset(&info_uri, format!("fps is {fps}")));
        }
        let mut shards = Vec::new();
        let mut position = 0;
        let splits: Vec<&SplitInfo> = match &options.split {
            Some(want) => {
                let split = info
                    .splits
                    .iter()
                    .find(|s| &s.name == want)
                    .ok_or_else(|| {
                        let names: Vec<&str> =
                            info.splits.iter().map(|s| s.name.as_str()).collect();
                        Error::dataset(&info_uri, format!("no split `{want}` (it has {names:?})"))
                    })?;
                vec![split]
            }
            None => info.splits.iter().collect(),
        };
        for split in splits {
            let count = split.shard_lengths.len();
            if count == 0 {
                return Err(Error::dataset(
                    &info_uri,
                    format!("split `{}` lists no shard lengths", split.name),
                ));
            }
            let template = split
                .filepath_template
                .as_deref()
                .unwrap_or("{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}");
            let mut in_split = 0;
            for (index, length) in split.shard_lengths.iter().enumerate() {
                let len = length
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .or_else(|| length.as_u64())
                    .ok_or_else(|| {
                        Error::dataset(&info_uri, format!("a shard length `{length}`"))
                    })? as usize;
                let key = template
                    .replace("{DATASET}", &info.name)
                    .replace("{SPLIT}", &split.name)
                    .replace("{FILEFORMAT}", "tfrecord")
                    .replace("{SHARD_X_OF_Y}", &format!("{index:05}-of-{count:05}"))
                    .replace("{SHARD_INDEX}", &format!("{index:05}"))
                    .replace("{NUM_SHARDS}", &format!("{count:05}"));
                shards.push(Shard {
                    split: split.name.clone(),
                    key,
                    first: position,
                    first_in_split: in_split,
                    len,
                });
                position += len;
                in_split += len;
            }
        }
        if let Some(keep) = &options.shards {
            if let Some(unknown) = keep.iter().find(|k| !shards.iter().any(|s| &s.key == *k)) {
                return Err(Error::dataset(
                    &info_uri,
                    format!("lists no shard `{unknown}` (in the plan's batch)"),
                ));
            }
            shards.retain(|s| keep.contains(&s.key));
            let mut position = 0;
            for shard in &mut shards {
                shard.first = position;
                position += shard.len;
            }
        }
        let batch = match &options.shards {
            Some(keys) => format!(
                "{}-{:08x}",
                info.name,
                reel_manifest::fnv1a(keys.join("\n").into_bytes()) >> 32
            ),
            None => info.name.clone(),
        };
        Ok(Self {
            store,
            batch,
            name: info.name,
            version: info.version,
            features_text,
            leaves,
            shards,
            fps,
            info_uri,
            offsets: Mutex::new(BTreeMap::new()),
        })
    }

    /// The dataset's frame rate (the option, else [`KNOWN_RATES`]); an error naming the
    /// build when neither gives it.
    pub fn fps(&self) -> Result<f64> {
        self.fps.ok_or_else(|| {
            Error::dataset(
                &self.info_uri,
                format!(
                    "the build does not record `{}`'s frame rate: pass it (--fps)",
                    self.name
                ),
            )
        })
    }

    /// The build's version (`1.0.0`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The shards' keys in the build folder, with the episodes each holds.
    pub fn shards(&self) -> Vec<(String, usize)> {
        self.shards.iter().map(|s| (s.key.clone(), s.len)).collect()
    }

    /// How each feature maps into Reel, in path order.
    pub fn mappings(&self) -> Vec<FeatureMapping> {
        self.leaves
            .iter()
            .map(|leaf| FeatureMapping {
                feature: leaf.path.clone(),
                tfds: landing::describe_spec(&leaf.spec),
                reel: landing::target(leaf, &self.leaves).describe(),
            })
            .collect()
    }

    /// The episode id of a split's `index`-th episode: dataset, split and index, so no two
    /// datasets' or splits' episodes share one.
    fn episode_id(&self, split: &str, index: usize) -> String {
        format!(
            "{}_{}_{index:06}",
            path_segment(&self.name),
            path_segment(split)
        )
    }

    /// The shard holding episode `position`, and its index.
    fn shard_of(&self, position: usize) -> Option<(usize, &Shard)> {
        let at = self.shards.partition_point(|s| s.first + s.len <= position);
        self.shards
            .get(at)
            .filter(|s| position >= s.first)
            .map(|s| (at, s))
    }

    /// The record offsets of shard `index`, walked once and kept for the next episodes.
    fn offsets_of(&self, index: usize, shard: &Shard) -> Result<Arc<tfrecord::ShardIndex>> {
        if let Some(found) = self.lock_offsets().get(&index) {
            return Ok(Arc::clone(found));
        }
        let source = self.store.source(&shard.key);
        let walked = tfrecord::record_offsets(&source).map_err(|e| match e {
            // A shard the build lists but lacks (a partial copy) costs its episodes only.
            Error::Store(reel_io::Error::NotFound { .. }) => Error::dataset(
                self.store.object_uri(&shard.key),
                "missing: dataset_info.json lists it",
            ),
            other => other,
        })?;
        let walked = Arc::new(walked);
        let mut cache = self.lock_offsets();
        if cache.len() >= OFFSET_CACHE {
            cache.pop_first();
        }
        cache.insert(index, Arc::clone(&walked));
        Ok(walked)
    }

    /// Where record `k` of `shard` starts and its length: an error naming the shard when
    /// damage before it hides it, or when the shard does not hold the records
    /// `dataset_info.json` says.
    fn record_place(&self, index: usize, shard: &Shard, k: usize) -> Result<(u64, u64)> {
        let walked = self.offsets_of(index, shard)?;
        match (&walked.damage, walked.offsets.get(k)) {
            (_, Some(&offset)) if walked.damage.is_some() || walked.offsets.len() == shard.len => {
                Ok((offset, walked.lengths[k]))
            }
            (Some(damage), None) => Err(Error::dataset(
                self.store.object_uri(&shard.key),
                format!("record {k} is after damage: {damage}"),
            )),
            _ => Err(Error::dataset(
                self.store.object_uri(&shard.key),
                format!(
                    "holds {} records, dataset_info.json says {}",
                    walked.offsets.len(),
                    shard.len
                ),
            )),
        }
    }

    fn lock_offsets(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<usize, Arc<tfrecord::ShardIndex>>> {
        self.offsets.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Source for RldsDataset {
    fn name(&self) -> &str {
        &self.name
    }

    fn batch_name(&self) -> &str {
        &self.batch
    }

    fn kind(&self) -> &'static str {
        "rlds"
    }

    fn episodes(&self) -> Vec<SourceEpisode> {
        self.shards
            .iter()
            .flat_map(|s| {
                (0..s.len).map(move |k| SourceEpisode {
                    index: (s.first_in_split + k) as i64,
                    id: self.episode_id(&s.split, s.first_in_split + k),
                })
            })
            .collect()
    }

    fn landing_log(&self, position: usize) -> Result<LandingLog> {
        let (index, shard) = self
            .shard_of(position)
            .ok_or_else(|| Error::dataset(&self.name, format!("no episode {position}")))?;
        let k = position - shard.first;
        let (offset, length) = self.record_place(index, shard, k)?;
        let source = self.store.source(&shard.key);
        let record = tfrecord::read_record(&source, offset, length, k)?;
        let index_in_split = shard.first_in_split + k;
        let episode = landing::EpisodeContext {
            record_name: format!("{} record {k}", self.store.object_uri(&shard.key)),
            id: self.episode_id(&shard.split, index_in_split),
            dataset: self.name.clone(),
            revision: self.version.clone(),
            split: shard.split.clone(),
            index: index_in_split,
            fps: self.fps()?,
            features_text: self.features_text.clone(),
        };
        landing::landing_log(&episode, &self.leaves, record)
    }
}
