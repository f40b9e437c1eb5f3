//! `features.json`, TFDS's description of what each record holds: a tree of
//! `FeaturesDict`s whose leaves are `Tensor`s (and `Scalar`s), `Image`s, `Text` and
//! `ClassLabel`s, with RLDS's `steps` a `Dataset` (a sequence of dicts). Parsed once into
//! [`FeatureSpec`] and flattened into [`Leaf`]s, each named by the path TFDS flattens it
//! to in a record (`steps/observation/image`).

use std::collections::BTreeMap;

use serde_json::Value;

/// A value type of a `Tensor`, as `features.json` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// `bool`.
    Bool,
    /// `int8`.
    Int8,
    /// `int16`.
    Int16,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `uint8`.
    Uint8,
    /// `uint16`.
    Uint16,
    /// `uint32`.
    Uint32,
    /// `uint64`.
    Uint64,
    /// `float16`.
    Float16,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `string` (bytes, or UTF-8 text).
    String,
}

impl Dtype {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "bool" => Self::Bool,
            "int8" => Self::Int8,
            "int16" => Self::Int16,
            "int32" => Self::Int32,
            "int64" => Self::Int64,
            "uint8" => Self::Uint8,
            "uint16" => Self::Uint16,
            "uint32" => Self::Uint32,
            "uint64" => Self::Uint64,
            "float16" => Self::Float16,
            "float32" => Self::Float32,
            "float64" => Self::Float64,
            "string" => Self::String,
            _ => return None,
        })
    }

    /// Bytes per value when a tensor is stored as raw bytes (`encoding` `bytes`, `zlib`).
    pub(crate) fn width(self) -> usize {
        match self {
            Self::Bool | Self::Int8 | Self::Uint8 => 1,
            Self::Int16 | Self::Uint16 | Self::Float16 => 2,
            Self::Int32 | Self::Uint32 | Self::Float32 => 4,
            Self::Int64 | Self::Uint64 | Self::Float64 | Self::String => 8,
        }
    }
}

/// How a `Tensor` is stored in a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorEncoding {
    /// As a list of floats (32-bit: TFDS stores `float64` rounded to `float32`) or 64-bit
    /// integers.
    None,
    /// Raw little-endian bytes, one entry per value of the sequence.
    Bytes,
    /// Raw bytes, zlib-compressed.
    Zlib,
}

/// How an `Image` is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// A JPEG file per picture.
    Jpeg,
    /// A PNG file per picture.
    Png,
}

/// One node of `features.json`.
#[derive(Debug, Clone, PartialEq)]
pub enum FeatureSpec {
    /// `FeaturesDict`.
    Dict(BTreeMap<String, FeatureSpec>),
    /// `Dataset`: a sequence of its feature, one per step (RLDS's `steps`).
    Steps(Box<FeatureSpec>),
    /// `Tensor` or `Scalar`: `shape` without the sequence's dimension.
    Tensor {
        /// Value type.
        dtype: Dtype,
        /// Dimensions (`-1` for one that varies).
        shape: Vec<i64>,
        /// Storage.
        encoding: TensorEncoding,
    },
    /// `Image`.
    Image {
        /// (height, width, channels), `-1` where they vary.
        shape: Vec<i64>,
        /// `uint8`, or `uint16` for depth.
        dtype: Dtype,
        /// JPEG or PNG.
        format: ImageFormat,
    },
    /// `Text`: UTF-8.
    Text,
    /// `ClassLabel`: an integer below `classes`.
    ClassLabel {
        /// How many classes.
        classes: u64,
    },
}

/// A leaf of the tree with the path TFDS flattens it to (`steps/observation/state`).
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    /// `/`-separated path from the root.
    pub path: String,
    /// Whether it is inside `steps` (one value per step) or of the episode.
    pub per_step: bool,
    /// What it is.
    pub spec: FeatureSpec,
}

impl Leaf {
    /// The path below `steps/` (or the whole path for an episode's feature).
    pub fn step_path(&self) -> &str {
        self.path.strip_prefix("steps/").unwrap_or(&self.path)
    }

    /// The last part of the path.
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// Values per step (or per episode): the product of the shape.
    pub fn values_per_item(&self) -> Option<usize> {
        match &self.spec {
            FeatureSpec::Tensor { shape, .. } => shape
                .iter()
                .try_fold(1usize, |n, &d| usize::try_from(d).ok().map(|d| n * d)),
            FeatureSpec::ClassLabel { .. } => Some(1),
            _ => None,
        }
    }
}

impl FeatureSpec {
    /// Parses `features.json`; the error says which feature is not understood and why.
    pub fn parse(text: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        Self::from_json(&value, "")
    }

    fn from_json(value: &Value, path: &str) -> Result<Self, String> {
        let at = |what: String| {
            if path.is_empty() {
                what
            } else {
                format!("feature `{path}`: {what}")
            }
        };
        let class = value
            .get("pythonClassName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let short = class.rsplit('.').next().unwrap_or(class);
        if let Some(dict) = value.get("featuresDict") {
            let features = dict
                .get("features")
                .and_then(Value::as_object)
                .ok_or_else(|| at("a FeaturesDict without `features`".into()))?;
            let mut out = BTreeMap::new();
            for (name, feature) in features {
                let child = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}/{name}")
                };
                out.insert(name.clone(), Self::from_json(feature, &child)?);
            }
            return Ok(Self::Dict(out));
        }
        if let Some(sequence) = value.get("sequence") {
            let feature = sequence
                .get("feature")
                .ok_or_else(|| at("a sequence without `feature`".into()))?;
            let length = sequence
                .get("length")
                .and_then(Value::as_str)
                .unwrap_or("-1");
            if short != "Dataset" {
                return Err(at(format!(
                    "a `{short}` of length {length} (Reel reads RLDS's `steps` Dataset; a Sequence inside it is not read)"
                )));
            }
            return Ok(Self::Steps(Box::new(Self::from_json(feature, path)?)));
        }
        if let Some(tensor) = value.get("tensor") {
            let dtype_name = tensor
                .get("dtype")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let dtype = Dtype::parse(dtype_name)
                .ok_or_else(|| at(format!("a Tensor of unknown dtype `{dtype_name}`")))?;
            let encoding = match tensor
                .get("encoding")
                .and_then(Value::as_str)
                .unwrap_or("none")
            {
                "none" => TensorEncoding::None,
                "bytes" => TensorEncoding::Bytes,
                "zlib" => TensorEncoding::Zlib,
                other => return Err(at(format!("a Tensor of unknown encoding `{other}`"))),
            };
            return Ok(Self::Tensor {
                dtype,
                shape: shape(tensor).map_err(at)?,
                encoding,
            });
        }
        if let Some(image) = value.get("image") {
            let dtype_name = image
                .get("dtype")
                .and_then(Value::as_str)
                .unwrap_or("uint8");
            let dtype = Dtype::parse(dtype_name)
                .ok_or_else(|| at(format!("an Image of unknown dtype `{dtype_name}`")))?;
            // TFDS encodes images as PNG unless told otherwise.
            let format = match image
                .get("encodingFormat")
                .and_then(Value::as_str)
                .unwrap_or("png")
            {
                "jpeg" => ImageFormat::Jpeg,
                "png" | "" => ImageFormat::Png,
                other => return Err(at(format!("an Image encoded as `{other}`"))),
            };
            return Ok(Self::Image {
                shape: shape(image).map_err(at)?,
                dtype,
                format,
            });
        }
        if value.get("text").is_some() {
            return Ok(Self::Text);
        }
        if let Some(label) = value.get("classLabel") {
            let classes = label
                .get("numClasses")
                .and_then(|n| {
                    n.as_str()
                        .and_then(|s| s.parse().ok())
                        .or_else(|| n.as_u64())
                })
                .unwrap_or(0);
            return Ok(Self::ClassLabel { classes });
        }
        Err(at(format!(
            "an unknown feature type `{}`",
            if class.is_empty() {
                "(no pythonClassName)"
            } else {
                class
            }
        )))
    }

    /// The tree's leaves, in path order.
    pub fn leaves(&self) -> Vec<Leaf> {
        let mut out = Vec::new();
        self.collect("", false, &mut out);
        out
    }

    fn collect(&self, path: &str, per_step: bool, out: &mut Vec<Leaf>) {
        match self {
            Self::Dict(children) => {
                for (name, child) in children {
                    let child_path = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}/{name}")
                    };
                    child.collect(&child_path, per_step, out);
                }
            }
            Self::Steps(inner) => inner.collect(path, true, out),
            leaf => out.push(Leaf {
                path: path.to_owned(),
                per_step,
                spec: leaf.clone(),
            }),
        }
    }
}

/// `shape.dimensions` as integers (absent: a scalar).
fn shape(value: &Value) -> Result<Vec<i64>, String> {
    let Some(dims) = value.get("shape").and_then(|s| s.get("dimensions")) else {
        return Ok(Vec::new());
    };
    dims.as_array()
        .ok_or("a shape that is not a list")?
        .iter()
        .map(|d| {
            d.as_str()
                .and_then(|s| s.parse().ok())
                .or_else(|| d.as_i64())
                .ok_or_else(|| format!("a dimension `{d}` that is not an integer"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FEATURES: &str = r#"{
      "pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
      "featuresDict": {"features": {
        "episode_metadata": {"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
          "featuresDict": {"features": {"file_path": {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text", "text": {}}}}},
        "steps": {"pythonClassName": "tensorflow_datasets.core.features.dataset_feature.Dataset",
          "sequence": {"feature": {"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
            "featuresDict": {"features": {
              "action": {"pythonClassName": "tensorflow_datasets.core.features.tensor_feature.Tensor",
                "tensor": {"shape": {"dimensions": ["7"]}, "dtype": "float64", "encoding": "none"}},
              "is_first": {"pythonClassName": "tensorflow_datasets.core.features.scalar.Scalar",
                "tensor": {"shape": {}, "dtype": "bool", "encoding": "none"}},
              "observation": {"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
                "featuresDict": {"features": {"image": {"pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
                  "image": {"shape": {"dimensions": ["180", "320", "3"]}, "dtype": "uint8", "encodingFormat": "jpeg"}}}}}
            }}}, "length": "-1"}}
      }}
    }"#;

    #[test]
    fn features_flatten_to_the_paths_records_use() {
        let spec = FeatureSpec::parse(FEATURES).expect("parses");
        let leaves = spec.leaves();
        let paths: Vec<(&str, bool)> = leaves
            .iter()
            .map(|l| (l.path.as_str(), l.per_step))
            .collect();
        assert_eq!(
            paths,
            [
                ("episode_metadata/file_path", false),
                ("steps/action", true),
                ("steps/is_first", true),
                ("steps/observation/image", true),
            ]
        );
        assert_eq!(leaves[1].values_per_item(), Some(7));
        assert_eq!(leaves[2].values_per_item(), Some(1));
        assert_eq!(leaves[3].step_path(), "observation/image");
        assert!(matches!(
            leaves[3].spec,
            FeatureSpec::Image {
                format: ImageFormat::Jpeg,
                ..
            }
        ));
    }

    #[test]
    fn an_unknown_feature_is_named() {
        let text = FEATURES
            .replace(r#""text": {}"#, r#""audio": {"sampleRate": "16000"}"#)
            .replace("text_feature.Text", "audio_feature.Audio");
        let err = FeatureSpec::parse(&text).expect_err("audio is not read");
        assert!(
            err.contains("feature `episode_metadata/file_path`: an unknown feature type `tensorflow_datasets.core.features.audio_feature.Audio`"),
            "{err}"
        );
        let err = FeatureSpec::parse(&FEATURES.replace("float64", "complex64")).expect_err("dtype");
        assert!(
            err.contains("feature `steps/action`: a Tensor of unknown dtype `complex64`"),
            "{err}"
        );
    }
}
