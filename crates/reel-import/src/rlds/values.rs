//! A feature's values out of a record, as TFDS's reader returns them: integers and
//! booleans from 64-bit integer lists (`uint64` bit-cast, as TFDS stores it), floats from
//! 32-bit float lists (so a `float64` tensor stored without encoding holds `float32`
//! values, as TFDS itself returns them), and tensors stored as raw bytes (`encoding`
//! `bytes` or `zlib`) decoded little-endian in their own dtype, `float64` exactly.

use std::io::Read;

use bytes::Bytes;

use super::example::Kind;
use super::features::{Dtype, FeatureSpec, Leaf, TensorEncoding};

/// The values of a numeric leaf: `items` rows (steps, or 1 for an episode's feature) of
/// `width` values each.
pub(crate) fn numbers(leaf: &Leaf, list: &Kind, items: usize) -> Result<Vec<Vec<f64>>, String> {
    let width = leaf
        .values_per_item()
        .ok_or_else(|| "a tensor of varying shape (not read)".to_owned())?;
    let (dtype, encoding) = match &leaf.spec {
        FeatureSpec::Tensor {
            dtype, encoding, ..
        } => (*dtype, *encoding),
        FeatureSpec::ClassLabel { .. } => (Dtype::Int64, TensorEncoding::None),
        _ => return Err("not a numeric feature".into()),
    };
    let flat: Vec<f64> = match (encoding, list) {
        (TensorEncoding::None, Kind::Floats(l)) => l.value.iter().map(|&v| f64::from(v)).collect(),
        (TensorEncoding::None, Kind::Int64s(l)) => match dtype {
            Dtype::Uint64 => l.value.iter().map(|&v| v as u64 as f64).collect(),
            _ => l.value.iter().map(|&v| v as f64).collect(),
        },
        (TensorEncoding::Bytes | TensorEncoding::Zlib, Kind::Bytes(l)) => {
            if l.value.len() != items {
                return Err(format!("{} byte strings for {items} items", l.value.len()));
            }
            let mut out = Vec::with_capacity(items * width);
            for (i, item) in l.value.iter().enumerate() {
                let raw = match encoding {
                    TensorEncoding::Zlib => {
                        inflate(item).map_err(|e| format!("item {i}: not zlib: {e}"))?
                    }
                    _ => item.clone(),
                };
                let values = raw_values(dtype, &raw)?;
                if values.len() != width {
                    return Err(format!(
                        "item {i} holds {} values, its shape {width}",
                        values.len()
                    ));
                }
                out.extend(values);
            }
            out
        }
        (_, other) => {
            return Err(format!(
                "stored as {} where its dtype and encoding say otherwise",
                other.name()
            ));
        }
    };
    if flat.len() != items * width {
        return Err(format!(
            "{} values, where {items} items of {width} make {}",
            flat.len(),
            items * width
        ));
    }
    Ok(match width {
        0 => vec![Vec::new(); items],
        w => flat.chunks(w).map(<[f64]>::to_vec).collect(),
    })
}

/// An integer leaf's values as text, exactly (`uint64` bit-cast back); `None` for others.
pub(crate) fn integer_texts(leaf: &Leaf, list: &Kind) -> Option<Vec<String>> {
    let Kind::Int64s(l) = list else {
        return None;
    };
    let dtype = match &leaf.spec {
        FeatureSpec::Tensor {
            dtype,
            encoding: TensorEncoding::None,
            ..
        } => *dtype,
        FeatureSpec::ClassLabel { .. } => Dtype::Int64,
        _ => return None,
    };
    Some(match dtype {
        Dtype::Uint64 => l.value.iter().map(|&v| (v as u64).to_string()).collect(),
        _ => l.value.iter().map(i64::to_string).collect(),
    })
}

/// The byte strings of an image or text leaf: one per item.
pub(crate) fn strings(list: &Kind, items: usize) -> Result<Vec<Bytes>, String> {
    match list {
        Kind::Bytes(l) if l.value.len() == items => Ok(l.value.clone()),
        Kind::Bytes(l) => Err(format!("{} byte strings for {items} items", l.value.len())),
        other => Err(format!("stored as {}, not bytes", other.name())),
    }
}

fn inflate(data: &[u8]) -> std::io::Result<Bytes> {
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(data).read_to_end(&mut out)?;
    Ok(out.into())
}

/// Little-endian values of `dtype` (numpy's `tobytes()` on the machines TFDS runs on).
fn raw_values(dtype: Dtype, raw: &[u8]) -> Result<Vec<f64>, String> {
    let width = dtype.width();
    if dtype == Dtype::String || !raw.len().is_multiple_of(width) {
        return Err(format!("{} bytes are not {dtype:?} values", raw.len()));
    }
    Ok(raw
        .chunks_exact(width)
        .map(|b| match dtype {
            Dtype::Bool => f64::from(u8::from(b[0] != 0)),
            Dtype::Int8 => f64::from(b[0] as i8),
            Dtype::Uint8 => f64::from(b[0]),
            Dtype::Int16 => f64::from(i16::from_le_bytes([b[0], b[1]])),
            Dtype::Uint16 => f64::from(u16::from_le_bytes([b[0], b[1]])),
            Dtype::Float16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
            Dtype::Int32 => f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Dtype::Uint32 => f64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Dtype::Float32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Dtype::Int64 => i64::from_le_bytes(eight(b)) as f64,
            Dtype::Uint64 => u64::from_le_bytes(eight(b)) as f64,
            Dtype::Float64 | Dtype::String => f64::from_le_bytes(eight(b)),
        })
        .collect())
}

fn eight(b: &[u8]) -> [u8; 8] {
    let mut out = [0; 8];
    out.copy_from_slice(&b[..8]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rlds::example::{BytesList, Int64List};

    fn tensor(dtype: Dtype, shape: Vec<i64>, encoding: TensorEncoding) -> Leaf {
        Leaf {
            path: "steps/x".into(),
            per_step: true,
            spec: FeatureSpec::Tensor {
                dtype,
                shape,
                encoding,
            },
        }
    }

    #[test]
    fn raw_bytes_decode_in_their_dtype_exactly() {
        let values = [0.1f64, -3.000000000000001];
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let list = Kind::Bytes(BytesList {
            value: vec![raw.into()],
        });
        let got = numbers(
            &tensor(Dtype::Float64, vec![2], TensorEncoding::Bytes),
            &list,
            1,
        )
        .expect("decodes");
        assert_eq!(got, [values.to_vec()]);
        let uint64 = Kind::Int64s(Int64List { value: vec![-1] });
        let got = numbers(
            &tensor(Dtype::Uint64, vec![], TensorEncoding::None),
            &uint64,
            1,
        )
        .expect("decodes");
        assert_eq!(got, [[u64::MAX as f64]]);
        let short = numbers(
            &tensor(Dtype::Uint64, vec![2], TensorEncoding::None),
            &uint64,
            1,
        )
        .expect_err("short");
        assert!(
            short.contains("1 values, where 1 items of 2 make 2"),
            "{short}"
        );
    }
}
