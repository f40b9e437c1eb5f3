//! `tf.train.Example`, the record TFDS writes for each episode: a map from a feature's
//! flattened path (`steps/observation/image`) to a list of bytes, floats or integers. The
//! messages are TensorFlow's `example.proto` and `feature.proto`, declared here for prost.

use std::collections::BTreeMap;

use prost::Message;

/// `tensorflow.Example`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Example {
    #[prost(message, optional, tag = "1")]
    pub features: Option<Features>,
}

/// `tensorflow.Features`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Features {
    #[prost(btree_map = "string, message", tag = "1")]
    pub feature: BTreeMap<String, Feature>,
}

/// `tensorflow.Feature`: one of three lists.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Feature {
    #[prost(oneof = "Kind", tags = "1, 2, 3")]
    pub kind: Option<Kind>,
}

/// `tensorflow.Feature.kind`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Kind {
    #[prost(message, tag = "1")]
    Bytes(BytesList),
    #[prost(message, tag = "2")]
    Floats(FloatList),
    #[prost(message, tag = "3")]
    Int64s(Int64List),
}

/// `tensorflow.BytesList`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct BytesList {
    #[prost(bytes = "bytes", repeated, tag = "1")]
    pub value: Vec<bytes::Bytes>,
}

/// `tensorflow.FloatList`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct FloatList {
    #[prost(float, repeated, tag = "1")]
    pub value: Vec<f32>,
}

/// `tensorflow.Int64List`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Int64List {
    #[prost(int64, repeated, tag = "1")]
    pub value: Vec<i64>,
}

/// A record's features by flattened path; `None` when the bytes are not an `Example`.
pub(crate) fn decode(record: bytes::Bytes) -> Option<BTreeMap<String, Kind>> {
    let example = Example::decode(record).ok()?;
    Some(
        example
            .features
            .unwrap_or_default()
            .feature
            .into_iter()
            .filter_map(|(path, feature)| Some((path, feature.kind?)))
            .collect(),
    )
}

impl Kind {
    /// How many values the list holds.
    pub(crate) fn len(&self) -> usize {
        match self {
            Kind::Bytes(l) => l.value.len(),
            Kind::Floats(l) => l.value.len(),
            Kind::Int64s(l) => l.value.len(),
        }
    }

    /// What list it is, for errors.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Kind::Bytes(_) => "bytes",
            Kind::Floats(_) => "floats",
            Kind::Int64s(_) => "integers",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_example_round_trips_through_its_wire_form() {
        let example = Example {
            features: Some(Features {
                feature: BTreeMap::from([
                    (
                        "steps/action".to_owned(),
                        Feature {
                            kind: Some(Kind::Floats(FloatList {
                                value: vec![0.5, -1.25],
                            })),
                        },
                    ),
                    (
                        "steps/is_first".to_owned(),
                        Feature {
                            kind: Some(Kind::Int64s(Int64List { value: vec![1, 0] })),
                        },
                    ),
                ]),
            }),
        };
        let features = decode(example.encode_to_vec().into()).expect("decodes");
        assert_eq!(features.len(), 2);
        assert!(matches!(&features["steps/action"], Kind::Floats(l) if l.value == [0.5, -1.25]));
        assert_eq!(features["steps/is_first"].len(), 2);
        assert!(decode(bytes::Bytes::from_static(b"\xff\xff\xff")).is_none());
    }
}
