//! A decoded landing message, whatever its encoding: the one tree that the ROS 2 CDR,
//! protobuf and JSON decoders produce and that recognition reads by field name.

use std::sync::Arc;

/// One decoded value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// Any signed integer type.
    Int(i64),
    /// Any unsigned integer type.
    UInt(u64),
    /// `float32` / `float64`.
    Float(f64),
    /// A string.
    String(String),
    /// A byte array (`uint8[]`, `byte[]`, protobuf `bytes`): kept whole, images live here.
    Bytes(Vec<u8>),
    /// Any other array or sequence.
    List(Vec<Value>),
    /// A nested message, fields in schema order.
    Message(Fields),
}

/// A message's fields in schema order; names are shared with the schema.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields(pub Vec<(Arc<str>, Value)>);

impl Fields {
    /// The field called `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| &**n == name).map(|(_, v)| v)
    }

    /// The value at a dotted path (`pose.position.x`).
    pub fn path(&self, path: &str) -> Option<&Value> {
        let mut parts = path.split('.');
        let mut value = self.get(parts.next()?)?;
        for part in parts {
            value = value.as_message()?.get(part)?;
        }
        Some(value)
    }
}

impl Value {
    /// The value as a number: integers and bools convert, anything else is `None`.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::Bool(b) => Some(if b { 1.0 } else { 0.0 }),
            Self::Int(i) => Some(i as f64),
            Self::UInt(u) => Some(u as f64),
            Self::Float(f) => Some(f),
            _ => None,
        }
    }

    /// The value as an unsigned integer, when it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Self::Int(i) => u64::try_from(i).ok(),
            Self::UInt(u) => Some(u),
            _ => None,
        }
    }

    /// The nested message.
    pub fn as_message(&self) -> Option<&Fields> {
        match self {
            Self::Message(m) => Some(m),
            _ => None,
        }
    }

    /// The string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements of an array (a byte array's bytes as integers are not included).
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Self::List(l) => Some(l),
            _ => None,
        }
    }

    /// Numbers of a numeric array: a list of numbers or a byte array.
    pub fn as_f64s(&self) -> Option<Vec<f64>> {
        match self {
            Self::List(l) => l.iter().map(Value::as_f64).collect(),
            Self::Bytes(b) => Some(b.iter().map(|&v| f64::from(v)).collect()),
            _ => None,
        }
    }
}

/// Nanoseconds since the epoch of a time message in any of its spellings: ROS 2
/// `builtin_interfaces/Time` (`sec`, `nanosec`), protobuf `Timestamp` (`seconds`,
/// `nanos`), Foxglove JSON (`sec`, `nsec`). Negative times clamp to 0.
pub fn time_ns(time: &Fields) -> Option<u64> {
    let sec = ["sec", "seconds", "secs"]
        .iter()
        .find_map(|k| time.get(k))?
        .as_f64()?;
    let nsec = ["nanosec", "nanos", "nsec", "nsecs"]
        .iter()
        .find_map(|k| time.get(k))
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let ns = sec.max(0.0) as u64 * 1_000_000_000 + nsec.max(0.0) as u64;
    Some(ns)
}
