//! Batches: named contiguous tensors, built in place by a worker and moved, never copied,
//! to the consumer.

use serde::Serialize;

use crate::host::{Allocate, HostBuf};

/// Element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    U8,
    U16,
    F32,
    I64,
}

/// A tensor's elements, one contiguous buffer (pinned when the loader pins memory).
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    U8(HostBuf<u8>),
    U16(HostBuf<u16>),
    F32(HostBuf<f32>),
    I64(HostBuf<i64>),
}

impl TensorData {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Self::U8(_) => DType::U8,
            Self::U16(_) => DType::U16,
            Self::F32(_) => DType::F32,
            Self::I64(_) => DType::I64,
        }
    }

    /// Elements.
    pub fn len(&self) -> usize {
        match self {
            Self::U8(v) => v.len(),
            Self::U16(v) => v.len(),
            Self::F32(v) => v.len(),
            Self::I64(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The raw little-endian bytes (what an Arrow buffer or a DLPack consumer takes).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::U8(v) => v,
            Self::U16(v) => bytemuck::cast_slice(v),
            Self::F32(v) => bytemuck::cast_slice(v),
            Self::I64(v) => bytemuck::cast_slice(v),
        }
    }

    /// Whether the buffer is page-locked host memory.
    pub fn is_pinned(&self) -> bool {
        match self {
            Self::U8(v) => v.is_pinned(),
            Self::U16(v) => v.is_pinned(),
            Self::F32(v) => v.is_pinned(),
            Self::I64(v) => v.is_pinned(),
        }
    }

    fn truncate(&mut self, len: usize) {
        match self {
            Self::U8(v) => v.truncate(len),
            Self::U16(v) => v.truncate(len),
            Self::F32(v) => v.truncate(len),
            Self::I64(v) => v.truncate(len),
        }
    }
}

/// A named tensor: row-major `shape`, first dimension the batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: TensorData,
}

impl Tensor {
    pub(crate) fn zeros(
        name: String,
        shape: Vec<usize>,
        dtype: DType,
        memory: &impl Allocate,
    ) -> Self {
        let n = shape.iter().product();
        let data = match dtype {
            DType::U8 => TensorData::U8(memory.zeroed(n)),
            DType::U16 => TensorData::U16(memory.zeroed(n)),
            DType::F32 => TensorData::F32(memory.zeroed(n)),
            DType::I64 => TensorData::I64(memory.zeroed(n)),
        };
        Self { name, shape, data }
    }

    /// Elements per sample (the product of all but the first dimension).
    pub fn sample_len(&self) -> usize {
        self.shape.iter().skip(1).product()
    }

    /// The `u8` elements, if that is the type.
    pub fn as_u8(&self) -> Option<&[u8]> {
        match &self.data {
            TensorData::U8(v) => Some(v),
            _ => None,
        }
    }

    /// The `u16` elements, if that is the type.
    pub fn as_u16(&self) -> Option<&[u16]> {
        match &self.data {
            TensorData::U16(v) => Some(v),
            _ => None,
        }
    }

    /// The `f32` elements, if that is the type.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The `i64` elements, if that is the type.
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.data {
            TensorData::I64(v) => Some(v),
            _ => None,
        }
    }

    pub(crate) fn data_u8_mut(&mut self) -> Option<&mut [u8]> {
        match &mut self.data {
            TensorData::U8(v) => Some(v),
            _ => None,
        }
    }

    pub(crate) fn data_u16_mut(&mut self) -> Option<&mut [u16]> {
        match &mut self.data {
            TensorData::U16(v) => Some(v),
            _ => None,
        }
    }

    pub(crate) fn data_f32_mut(&mut self) -> Option<&mut [f32]> {
        match &mut self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }

    pub(crate) fn data_i64_mut(&mut self) -> Option<&mut [i64]> {
        match &mut self.data {
            TensorData::I64(v) => Some(v),
            _ => None,
        }
    }

    /// Keeps the first `samples` samples.
    pub(crate) fn truncate_samples(&mut self, samples: usize) {
        let per = self.sample_len();
        self.data.truncate(samples * per);
        self.shape[0] = samples;
    }
}

/// A sample the loader could not build, and why; its episode is skipped from then on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub episode_id: String,
    pub uri: String,
    pub anchor_ns: i64,
    pub reason: String,
}

/// One batch: tensors over the samples that were built, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub epoch: u64,
    /// Index of the batch in its epoch (on this rank).
    pub index: u64,
    pub tensors: Vec<Tensor>,
    /// Samples left out because their episode is unreadable.
    pub skipped: Vec<Skipped>,
}

impl Batch {
    /// The tensor called `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Samples in the batch.
    pub fn len(&self) -> usize {
        self.tensors.first().map_or(0, |t| t.shape[0])
    }

    /// Whether the batch holds no sample.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
