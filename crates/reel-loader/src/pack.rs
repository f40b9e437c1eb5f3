//! Packing: variable-length samples (the valid steps of one numeric stream) packed into
//! rows of a fixed token budget for variable-length attention, instead of padding every
//! sample to the longest.

use crate::batch::{Batch, DType, Tensor};
use crate::host::HostMemory;

/// A batch's stream packed into rows of `budget` tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    /// `[rows, budget, fields]`: each sample's valid steps, one after another.
    pub tokens: Tensor,
    /// `[rows, budget]`: position of each token within its sample, 0 on padding.
    pub position_ids: Tensor,
    /// `[rows, budget]`: the sample (index in the batch) each token belongs to, -1 on padding.
    pub sequence_ids: Tensor,
    /// Boundaries of every segment over the flattened `rows * budget` tokens, as
    /// variable-length attention kernels take them (`cu_seqlens`); a row's padding tail
    /// is a segment of its own, so segments never cross rows and the last value is
    /// `rows * budget`.
    pub cu_seqlens: Vec<i32>,
    /// Samples cut to `budget` tokens because they were longer.
    pub truncated: usize,
    /// Padding tokens over all tokens.
    pub padding_fraction: f64,
}

/// Why a batch could not be packed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackError {
    #[error("the batch has no tensor {0} (or its mask) of f32 steps")]
    NoStream(String),
    #[error("a packing budget must be at least one token")]
    ZeroBudget,
}

/// Packs the valid steps (`<stream>.mask` = 1) of `stream` of every sample, largest
/// first, each into the first row with room (first-fit decreasing).
pub fn pack(batch: &Batch, stream: &str, budget: usize) -> Result<Packed, PackError> {
    if budget == 0 {
        return Err(PackError::ZeroBudget);
    }
    let missing = || PackError::NoStream(stream.to_string());
    let values = batch.get(stream).ok_or_else(missing)?;
    let mask = batch
        .get(&format!("{stream}.mask"))
        .and_then(Tensor::as_u8)
        .ok_or_else(missing)?;
    let data = values.as_f32().ok_or_else(missing)?;
    let (samples, steps, fields) = match values.shape[..] {
        [n, s, f] => (n, s, f),
        _ => return Err(missing()),
    };
    // Valid steps of each sample, in time order.
    let sequences: Vec<Vec<usize>> = (0..samples)
        .map(|i| (0..steps).filter(|&s| mask[i * steps + s] == 1).collect())
        .collect();
    let mut order: Vec<usize> = (0..samples).filter(|&i| !sequences[i].is_empty()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sequences[i].len()));
    let mut rows: Vec<(usize, Vec<usize>)> = Vec::new(); // (used, samples)
    let mut truncated = 0;
    for i in order {
        let len = sequences[i].len().min(budget);
        truncated += usize::from(sequences[i].len() > budget);
        match rows.iter_mut().find(|(used, _)| used + len <= budget) {
            Some((used, members)) => {
                *used += len;
                members.push(i);
            }
            None => rows.push((len, vec![i])),
        }
    }
    let n_rows = rows.len();
    let mut tokens = Tensor::zeros(
        format!("{stream}.packed"),
        vec![n_rows, budget, fields],
        DType::F32,
        &HostMemory::Pageable,
    );
    let mut positions = Tensor::zeros(
        format!("{stream}.position_ids"),
        vec![n_rows, budget],
        DType::I64,
        &HostMemory::Pageable,
    );
    let mut sequence_ids = Tensor::zeros(
        format!("{stream}.sequence_ids"),
        vec![n_rows, budget],
        DType::I64,
        &HostMemory::Pageable,
    );
    let mut cu_seqlens = vec![0i32];
    let mut padding = 0;
    for (r, (used, members)) in rows.iter().enumerate() {
        let mut at = 0;
        for &i in members {
            for (p, &step) in sequences[i].iter().take(budget).enumerate() {
                let token = r * budget + at + p;
                let src = &data[(i * steps + step) * fields..(i * steps + step + 1) * fields];
                if let Some(dst) = tokens.data_f32_mut() {
                    dst[token * fields..(token + 1) * fields].copy_from_slice(src);
                }
                if let Some(v) = positions.data_i64_mut() {
                    v[token] = p as i64;
                }
                if let Some(v) = sequence_ids.data_i64_mut() {
                    v[token] = i as i64;
                }
            }
            at += sequences[i].len().min(budget);
            cu_seqlens.push((r * budget + at) as i32);
        }
        if *used < budget {
            padding += budget - used;
            for token in r * budget + used..(r + 1) * budget {
                if let Some(v) = sequence_ids.data_i64_mut() {
                    v[token] = -1;
                }
            }
            cu_seqlens.push(((r + 1) * budget) as i32);
        }
    }
    let total = n_rows * budget;
    Ok(Packed {
        tokens,
        position_ids: positions,
        sequence_ids,
        cu_seqlens,
        truncated,
        padding_fraction: if total == 0 {
            0.0
        } else {
            padding as f64 / total as f64
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::TensorData;

    /// A batch of `lens.len()` samples of 6 steps with 2 fields; sample i has its first
    /// `lens[i]` steps valid, values `100 i + step`.
    fn batch(lens: &[usize]) -> Batch {
        let (steps, fields) = (6, 2);
        let mut values = Vec::new();
        let mut mask = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            for s in 0..steps {
                values.extend([(100 * i + s) as f32; 2]);
                mask.push(u8::from(s < len));
            }
        }
        Batch {
            epoch: 0,
            index: 0,
            tensors: vec![
                Tensor {
                    name: "state".into(),
                    shape: vec![lens.len(), steps, fields],
                    data: TensorData::F32(values.into()),
                },
                Tensor {
                    name: "state.mask".into(),
                    shape: vec![lens.len(), steps],
                    data: TensorData::U8(mask.into()),
                },
            ],
            skipped: Vec::new(),
        }
    }

    #[test]
    fn packs_every_valid_step_once_with_restarting_positions() {
        let lens = [6, 2, 4, 3, 1, 0];
        let packed = pack(&batch(&lens), "state", 8).expect("packs");
        // 16 tokens into rows of 8: first-fit decreasing needs 2 rows, no token lost.
        assert_eq!(packed.tokens.shape, vec![2, 8, 2]);
        let ids = packed.sequence_ids.as_i64().expect("ids");
        let pos = packed.position_ids.as_i64().expect("pos");
        let tok = packed.tokens.as_f32().expect("tokens");
        for (i, &len) in lens.iter().enumerate() {
            let mine: Vec<usize> = (0..16).filter(|&t| ids[t] == i as i64).collect();
            assert_eq!(mine.len(), len, "sample {i}");
            for (p, &t) in mine.iter().enumerate() {
                assert_eq!(pos[t], p as i64);
                assert_eq!(tok[t * 2], (100 * i + p) as f32);
            }
        }
        assert_eq!(packed.padding_fraction, 0.0);
        assert_eq!(*packed.cu_seqlens.last().expect("end"), 16);
        assert!(packed.cu_seqlens.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn reports_padding_and_truncation() {
        let packed = pack(&batch(&[5, 5]), "state", 4).expect("packs");
        assert_eq!(packed.truncated, 2);
        assert_eq!(packed.tokens.shape[0], 2);
        assert_eq!(packed.padding_fraction, 0.0);
        let packed = pack(&batch(&[3, 3]), "state", 4).expect("packs");
        assert_eq!(packed.padding_fraction, 0.25);
        assert_eq!(packed.cu_seqlens, vec![0, 3, 4, 7, 8]);
        assert!(pack(&batch(&[1]), "action", 4).is_err());
        assert_eq!(pack(&batch(&[1]), "state", 0), Err(PackError::ZeroBudget));
    }
}
