//! Protobuf messages decoded through the `FileDescriptorSet` the log embeds as the
//! channel's schema (what Foxglove's SDK and `mcap-protobuf-support` write), with
//! prost-reflect: the reflection crate of the prost stack Reel already builds on.

use std::sync::Arc;

use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, ReflectMessage};

use crate::value::{Fields, Value};

/// The descriptor of one protobuf channel's message type.
#[derive(Debug, Clone)]
pub struct ProtobufSchema {
    message: MessageDescriptor,
}

impl ProtobufSchema {
    /// Reads the serialized `FileDescriptorSet` `data` and finds `name` in it.
    pub fn parse(name: &str, data: &[u8]) -> Result<Self, String> {
        let pool = DescriptorPool::decode(data)
            .map_err(|e| format!("schema is not a FileDescriptorSet: {e}"))?;
        let message = pool
            .get_message_by_name(name.trim_start_matches('.'))
            .ok_or_else(|| format!("the FileDescriptorSet does not define `{name}`"))?;
        Ok(Self { message })
    }

    /// Decodes one message.
    pub fn decode(&self, data: &[u8]) -> Result<Fields, String> {
        let message = DynamicMessage::decode(self.message.clone(), data)
            .map_err(|e| format!("protobuf does not decode: {e}"))?;
        Ok(fields(&message))
    }
}

fn fields(message: &DynamicMessage) -> Fields {
    Fields(
        message
            .descriptor()
            .fields()
            .map(|field| {
                let value = message.get_field(&field);
                (Arc::from(field.name()), value_of(&value))
            })
            .collect(),
    )
}

fn value_of(value: &prost_reflect::Value) -> Value {
    use prost_reflect::Value as P;
    match value {
        P::Bool(b) => Value::Bool(*b),
        P::I32(i) | P::EnumNumber(i) => Value::Int(i64::from(*i)),
        P::I64(i) => Value::Int(*i),
        P::U32(u) => Value::UInt(u64::from(*u)),
        P::U64(u) => Value::UInt(*u),
        P::F32(f) => Value::Float(f64::from(*f)),
        P::F64(f) => Value::Float(*f),
        P::String(s) => Value::String(s.clone()),
        P::Bytes(b) => Value::Bytes(b.to_vec()),
        P::Message(m) => Value::Message(fields(m)),
        P::List(items) => Value::List(items.iter().map(value_of).collect()),
        // Maps have no order and no robot-log schema Reel reads uses them.
        P::Map(_) => Value::List(Vec::new()),
    }
}
