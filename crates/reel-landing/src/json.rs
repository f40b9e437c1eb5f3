//! JSON messages (Foxglove's `json` encoding): read by field name, no schema needed.

use std::sync::Arc;

use crate::value::{Fields, Value};

/// Decodes one JSON object.
pub fn decode(data: &[u8]) -> Result<Fields, String> {
    let value: serde_json::Value =
        serde_json::from_slice(data).map_err(|e| format!("JSON does not parse: {e}"))?;
    match convert(value) {
        Value::Message(fields) => Ok(fields),
        _ => Err("JSON message is not an object".into()),
    }
}

fn convert(value: serde_json::Value) -> Value {
    use serde_json::Value as J;
    match value {
        // A JSON null in a numeric array is a missing reading.
        J::Null => Value::Float(f64::NAN),
        J::Bool(b) => Value::Bool(b),
        J::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Value::UInt(u),
            (None, Some(i)) => Value::Int(i),
            _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::String(s),
        J::Array(items) => Value::List(items.into_iter().map(convert).collect()),
        J::Object(map) => Value::Message(Fields(
            map.into_iter()
                .map(|(k, v)| (Arc::from(k.as_str()), convert(v)))
                .collect(),
        )),
    }
}
