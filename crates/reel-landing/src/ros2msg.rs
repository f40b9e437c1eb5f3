//! ROS 2 messages decoded from the definitions the log carries: a parser of `ros2msg`
//! schemas (the root definition, then `MSG: pkg/Type` sections, as rosbag2 and the mcap
//! libraries concatenate them) and a CDR (XCDR1, either byte order) decoder walking the
//! parsed definition into a [`Value`] tree.
//!
//! Written here rather than taken from a crate: Rerun's `re_ros_msg` needs a newer
//! toolchain and Rerun's Arrow stack, and `ros2_message` reads little-endian CDR only.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::value::{Fields, Value};

/// A primitive field type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Primitive {
    Bool,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

impl Primitive {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "bool" => Self::Bool,
            "int8" => Self::I8,
            "uint8" | "byte" | "char" => Self::U8,
            "int16" => Self::I16,
            "uint16" => Self::U16,
            "int32" => Self::I32,
            "uint32" => Self::U32,
            "int64" => Self::I64,
            "uint64" => Self::U64,
            "float32" => Self::F32,
            "float64" => Self::F64,
            _ => return None,
        })
    }

    fn size(self) -> usize {
        match self {
            Self::Bool | Self::I8 | Self::U8 => 1,
            Self::I16 | Self::U16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::I64 | Self::U64 | Self::F64 => 8,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum FieldType {
    Primitive(Primitive),
    String,
    /// Index into [`Ros2Schema::types`].
    Message(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    One,
    Fixed(usize),
    /// Unbounded or bounded (`[<=N]`): both carry a length prefix.
    Sequence,
}

#[derive(Debug, Clone)]
struct Field {
    name: Arc<str>,
    ty: FieldType,
    arity: Arity,
}

#[derive(Debug, Clone)]
struct MessageType {
    fields: Vec<Field>,
}

/// A parsed and resolved `ros2msg` schema, ready to decode CDR messages of its root type.
#[derive(Debug, Clone)]
pub struct Ros2Schema {
    types: Vec<MessageType>,
    root: usize,
}

/// `pkg/msg/Type` → `pkg/Type`.
pub fn normalize_type(name: &str) -> String {
    name.trim().trim_start_matches('/').replace("/msg/", "/")
}

/// Definitions ROS 2 tools leave out of concatenated schemas because every ROS 2 install has them.
const BUILTIN_TYPES: [(&str, &str); 2] = [
    ("builtin_interfaces/Time", "int32 sec\nuint32 nanosec\n"),
    ("builtin_interfaces/Duration", "int32 sec\nuint32 nanosec\n"),
];

struct RawField {
    ty: String,
    name: String,
    arity: Arity,
}

fn parse_section(text: &str) -> Result<Vec<RawField>, String> {
    let mut fields = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (ty, rest) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| format!("line {}: `{line}` has a type but no name", number + 1))?;
        let rest = rest.trim();
        let name_end = rest
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(rest.len());
        let (name, after) = rest.split_at(name_end);
        if after.trim_start().starts_with('=') {
            continue; // a constant: not part of the wire format
        }
        let (ty, arity) = match ty.split_once('[') {
            None => (ty, Arity::One),
            Some((base, bound)) => {
                let bound = bound
                    .strip_suffix(']')
                    .ok_or_else(|| format!("line {}: bad array type `{ty}`", number + 1))?;
                let arity =
                    if bound.is_empty() || bound.starts_with("<=") {
                        Arity::Sequence
                    } else {
                        Arity::Fixed(bound.parse().map_err(|_| {
                            format!("line {}: bad array length in `{ty}`", number + 1)
                        })?)
                    };
                (base, arity)
            }
        };
        // `string<=10` is a bounded string: the bound is not on the wire.
        let ty = ty.split("<=").next().unwrap_or(ty);
        fields.push(RawField {
            ty: ty.to_owned(),
            name: name.to_owned(),
            arity,
        });
    }
    Ok(fields)
}

fn is_separator(line: &str) -> bool {
    let line = line.trim();
    line.len() >= 3 && line.bytes().all(|b| b == b'=')
}

impl Ros2Schema {
    /// Parses the concatenated definition `text` of the type `name` (`pkg/msg/Type`).
    pub fn parse(name: &str, text: &str) -> Result<Self, String> {
        let root_name = normalize_type(name);
        let mut sections: BTreeMap<String, Vec<RawField>> = BTreeMap::new();
        let mut current_name = root_name.clone();
        let mut current = String::new();
        let flush = |sections: &mut BTreeMap<String, Vec<RawField>>, name: &str, body: &str| {
            let fields = parse_section(body).map_err(|e| format!("definition of {name}: {e}"))?;
            sections.entry(name.to_owned()).or_insert(fields);
            Ok::<(), String>(())
        };
        for line in text.lines() {
            if is_separator(line) {
                flush(&mut sections, &current_name, &current)?;
                current.clear();
                current_name.clear();
            } else if current_name.is_empty() {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                current_name = line
                    .strip_prefix("MSG:")
                    .map(normalize_type)
                    .ok_or_else(|| format!("section starts with `{line}`, not `MSG: pkg/Type`"))?;
            } else {
                current.push_str(line);
                current.push('\n');
            }
        }
        if !current_name.is_empty() {
            flush(&mut sections, &current_name, &current)?;
        }
        for (builtin, body) in BUILTIN_TYPES {
            flush(&mut sections, builtin, body)?;
        }
        let mut resolver = Resolver {
            sections: &sections,
            index: BTreeMap::new(),
            types: Vec::new(),
        };
        let root = resolver.resolve(&root_name, 0)?;
        Ok(Self {
            types: resolver.types,
            root,
        })
    }

    /// Decodes one CDR message (with its 4-byte encapsulation header).
    pub fn decode(&self, data: &[u8]) -> Result<Fields, String> {
        let mut cdr = Cdr::new(data)?;
        self.message(&mut cdr, self.root, 0)
    }

    fn message(&self, cdr: &mut Cdr<'_>, index: usize, depth: usize) -> Result<Fields, String> {
        if depth > 64 {
            return Err("message nests deeper than 64 levels".into());
        }
        let ty = &self.types[index];
        let mut fields = Vec::with_capacity(ty.fields.len());
        for field in &ty.fields {
            let value = match field.arity {
                Arity::One => self.single(cdr, &field.ty, depth)?,
                Arity::Fixed(n) => self.array(cdr, &field.ty, n, depth)?,
                Arity::Sequence => {
                    let n = cdr.u32()? as usize;
                    self.array(cdr, &field.ty, n, depth)?
                }
            };
            fields.push((field.name.clone(), value));
        }
        Ok(Fields(fields))
    }

    fn single(&self, cdr: &mut Cdr<'_>, ty: &FieldType, depth: usize) -> Result<Value, String> {
        Ok(match ty {
            FieldType::Primitive(p) => cdr.primitive(*p)?,
            FieldType::String => Value::String(cdr.string()?),
            FieldType::Message(i) => Value::Message(self.message(cdr, *i, depth + 1)?),
        })
    }

    fn array(
        &self,
        cdr: &mut Cdr<'_>,
        ty: &FieldType,
        n: usize,
        depth: usize,
    ) -> Result<Value, String> {
        // Every element takes at least one byte (an empty message takes none, but an
        // array of millions of them is not a robot log), a primitive its own size.
        let least = match ty {
            FieldType::Primitive(p) => p.size(),
            _ => 1,
        };
        if n.saturating_mul(least) > cdr.remaining() {
            return Err(format!("array of {n} elements is longer than the message"));
        }
        if *ty == FieldType::Primitive(Primitive::U8) {
            return Ok(Value::Bytes(cdr.take(n, 1)?.to_vec()));
        }
        let values = (0..n)
            .map(|_| self.single(cdr, ty, depth))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Value::List(values))
    }
}

struct Resolver<'a> {
    sections: &'a BTreeMap<String, Vec<RawField>>,
    index: BTreeMap<String, usize>,
    types: Vec<MessageType>,
}

impl Resolver<'_> {
    fn resolve(&mut self, name: &str, depth: usize) -> Result<usize, String> {
        if let Some(&i) = self.index.get(name) {
            return Ok(i);
        }
        if depth > 64 {
            return Err(format!(
                "{name}: definitions refer to each other in a cycle"
            ));
        }
        let raw = self
            .sections
            .get(name)
            .ok_or_else(|| format!("no definition of {name} in the schema"))?;
        let package = name.split('/').next().unwrap_or("");
        let mut fields = Vec::with_capacity(raw.len());
        for f in raw {
            let ty = if let Some(p) = Primitive::parse(&f.ty) {
                FieldType::Primitive(p)
            } else if f.ty == "string" {
                FieldType::String
            } else if f.ty == "wstring" {
                return Err(format!("{name}.{}: wstring is not supported", f.name));
            } else {
                let target = match f.ty.as_str() {
                    "time" => "builtin_interfaces/Time".to_owned(),
                    "duration" => "builtin_interfaces/Duration".to_owned(),
                    "Header" => "std_msgs/Header".to_owned(),
                    t if t.contains('/') => normalize_type(t),
                    t => format!("{package}/{t}"),
                };
                FieldType::Message(self.resolve(&target, depth + 1)?)
            };
            fields.push(Field {
                name: Arc::from(f.name.as_str()),
                ty,
                arity: f.arity,
            });
        }
        self.types.push(MessageType { fields });
        let i = self.types.len() - 1;
        self.index.insert(name.to_owned(), i);
        Ok(i)
    }
}

/// A CDR (XCDR1) reader; alignment counts from after the 4-byte encapsulation header.
struct Cdr<'a> {
    buf: &'a [u8],
    pos: usize,
    little: bool,
}

impl<'a> Cdr<'a> {
    fn new(data: &'a [u8]) -> Result<Self, String> {
        if data.len() < 4 {
            return Err("shorter than the CDR header".into());
        }
        let little = match (data[0], data[1]) {
            (0, 0) => false,
            (0, 1) => true,
            (0, 2 | 3) => return Err("parameter-list CDR is not supported".into()),
            (0, 6..=11) => return Err("XCDR2 encoding is not supported".into()),
            (a, b) => return Err(format!("unknown CDR representation 0x{a:02x}{b:02x}")),
        };
        Ok(Self {
            buf: &data[4..],
            pos: 0,
            little,
        })
    }

    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn take(&mut self, n: usize, align: usize) -> Result<&'a [u8], String> {
        let start = self.pos.div_ceil(align) * align;
        let end = start
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or("message ends early")?;
        self.pos = end;
        Ok(&self.buf[start..end])
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut b: [u8; N] = self
            .take(N, N)?
            .try_into()
            .map_err(|_| "short read".to_owned())?;
        if !self.little {
            b.reverse();
        }
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.fixed()?))
    }

    fn primitive(&mut self, p: Primitive) -> Result<Value, String> {
        Ok(match p {
            Primitive::Bool => Value::Bool(self.take(1, 1)?[0] != 0),
            Primitive::I8 => Value::Int(i64::from(self.take(1, 1)?[0] as i8)),
            Primitive::U8 => Value::UInt(u64::from(self.take(1, 1)?[0])),
            Primitive::I16 => Value::Int(i64::from(i16::from_le_bytes(self.fixed()?))),
            Primitive::U16 => Value::UInt(u64::from(u16::from_le_bytes(self.fixed()?))),
            Primitive::I32 => Value::Int(i64::from(i32::from_le_bytes(self.fixed()?))),
            Primitive::U32 => Value::UInt(u64::from(u32::from_le_bytes(self.fixed()?))),
            Primitive::I64 => Value::Int(i64::from_le_bytes(self.fixed()?)),
            Primitive::U64 => Value::UInt(u64::from_le_bytes(self.fixed()?)),
            Primitive::F32 => Value::Float(f64::from(f32::from_le_bytes(self.fixed()?))),
            Primitive::F64 => Value::Float(f64::from_le_bytes(self.fixed()?)),
        })
    }

    fn string(&mut self) -> Result<String, String> {
        let n = self.u32()? as usize;
        let bytes = self.take(n, 1)?;
        let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
        String::from_utf8(bytes.to_vec()).map_err(|_| "string is not UTF-8".into())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests fail loudly by design.
mod tests {
    use super::*;

    const POSE_STAMPED: &str = "std_msgs/Header header\ngeometry_msgs/Pose pose\n\
================================================================================\n\
MSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n\
================================================================================\n\
MSG: geometry_msgs/Pose\nPoint position # where\nQuaternion orientation\n\
================================================================================\n\
MSG: geometry_msgs/Point\nfloat64 x\nfloat64 y\nfloat64 z\n\
================================================================================\n\
MSG: geometry_msgs/Quaternion\nfloat64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n";

    fn pose_cdr(little: bool) -> Vec<u8> {
        let mut out = vec![0, u8::from(little), 0, 0];
        let put32 = |out: &mut Vec<u8>, v: u32| {
            out.extend(if little {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            })
        };
        put32(&mut out, 12); // sec
        put32(&mut out, 34); // nanosec
        put32(&mut out, 4);
        out.extend(b"map\0");
        // 16 bytes after the header: the doubles are already 8-aligned.
        for v in [1.0f64, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0] {
            out.extend(if little {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            });
        }
        out
    }

    #[test]
    fn pose_stamped_decodes_in_both_byte_orders() {
        let schema = Ros2Schema::parse("geometry_msgs/msg/PoseStamped", POSE_STAMPED).unwrap();
        for little in [true, false] {
            let m = schema.decode(&pose_cdr(little)).unwrap();
            assert_eq!(m.path("header.stamp.sec"), Some(&Value::Int(12)));
            assert_eq!(m.path("header.stamp.nanosec"), Some(&Value::UInt(34)));
            assert_eq!(
                m.path("header.frame_id").and_then(Value::as_str),
                Some("map")
            );
            assert_eq!(m.path("pose.position.z"), Some(&Value::Float(3.0)));
            assert_eq!(m.path("pose.orientation.w"), Some(&Value::Float(1.0)));
        }
    }

    #[test]
    fn constants_bounds_and_arrays_parse() {
        let text = "uint8 RED=1\nstring<=8 NAME=\"a#b\"\nstring<=8 label\nfloat32[3] xyz\nint16[<=4] few\nuint8[] data\n";
        let schema = Ros2Schema::parse("pkg/msg/Thing", text).unwrap();
        let mut data = vec![0, 1, 0, 0];
        data.extend(3u32.to_le_bytes());
        data.extend(b"ab\0\0");
        for v in [1.0f32, 2.0, 3.0] {
            data.extend(v.to_le_bytes());
        }
        data.extend(2u32.to_le_bytes());
        data.extend(7i16.to_le_bytes());
        data.extend((-7i16).to_le_bytes());
        data.extend(3u32.to_le_bytes());
        data.extend([9, 8, 7]);
        let m = schema.decode(&data).unwrap();
        assert_eq!(m.get("label").and_then(Value::as_str), Some("ab"));
        assert_eq!(
            m.get("xyz").and_then(Value::as_f64s),
            Some(vec![1.0, 2.0, 3.0])
        );
        assert_eq!(
            m.get("few"),
            Some(&Value::List(vec![Value::Int(7), Value::Int(-7)]))
        );
        assert_eq!(m.get("data"), Some(&Value::Bytes(vec![9, 8, 7])));
    }

    #[test]
    fn bad_schemas_and_messages_say_what_is_wrong() {
        let missing = Ros2Schema::parse("a/msg/B", "c/D inner\n").unwrap_err();
        assert!(missing.contains("no definition of c/D"), "{missing}");
        let schema = Ros2Schema::parse("geometry_msgs/msg/PoseStamped", POSE_STAMPED).unwrap();
        let short = schema.decode(&pose_cdr(true)[..30]).unwrap_err();
        assert!(short.contains("ends early"), "{short}");
        let mut huge = vec![0, 1, 0, 0];
        huge.extend(u32::MAX.to_le_bytes());
        let text = Ros2Schema::parse("a/msg/B", "float64[] v\n").unwrap();
        assert!(
            text.decode(&huge)
                .unwrap_err()
                .contains("longer than the message")
        );
        assert!(
            schema
                .decode(&[0, 3, 0, 0])
                .unwrap_err()
                .contains("parameter-list")
        );
    }
}
