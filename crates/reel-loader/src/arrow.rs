//! Batches as Arrow: one row per sample, one fixed-size-list column per tensor, the
//! tensor's per-sample shape (JSON) under `reel.shape` in the field metadata. Buffers of
//! pageable batches move into Arrow without a copy.
//!
//! ```
//! use reel_loader::{ArrowStreamWriter, Batch, Tensor, TensorData, to_record_batch};
//!
//! let batch = Batch {
//!     epoch: 0,
//!     index: 0,
//!     tensors: vec![Tensor {
//!         name: "state".into(),
//!         shape: vec![2, 3],
//!         data: TensorData::F32(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0].into()),
//!     }],
//!     skipped: Vec::new(),
//! };
//! let record = to_record_batch(batch.clone())?;
//! assert_eq!(record.num_rows(), 2);
//! assert_eq!(record.schema().field(0).metadata()["reel.shape"], "[3]");
//!
//! let mut stream = ArrowStreamWriter::new(Vec::new());
//! stream.write(batch)?;
//! let bytes = stream.finish()?;
//! assert!(!bytes.is_empty());
//! # Ok::<(), reel_loader::ArrowExportError>(())
//! ```

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, UInt8Array, UInt16Array,
};
use arrow_buffer::ScalarBuffer;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{ArrowError, DataType, Field, Schema};

use crate::batch::{Batch, TensorData};

/// Field metadata key holding a column's per-sample shape, as a JSON array.
pub const SHAPE_KEY: &str = "reel.shape";

/// What can go wrong turning batches into Arrow.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArrowExportError {
    /// A tensor's sample is longer than an Arrow fixed-size list can be.
    #[error("tensor {tensor}: {elements} elements per sample do not fit an Arrow list")]
    SampleTooLarge { tensor: String, elements: usize },
    /// Arrow refused the columns, or writing the stream failed.
    #[error("arrow: {0}")]
    Arrow(#[from] ArrowError),
    /// An earlier write failed while opening the stream, and took its output with it.
    #[error("the Arrow stream failed to open earlier")]
    StreamLost,
}

/// One batch as an Arrow record batch: a row per sample, a column per tensor, in the
/// batch's tensor order.
pub fn to_record_batch(batch: Batch) -> Result<RecordBatch, ArrowExportError> {
    let mut fields = Vec::with_capacity(batch.tensors.len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(batch.tensors.len());
    for tensor in batch.tensors {
        let per_sample = tensor.sample_len();
        let (item, values): (DataType, ArrayRef) = match tensor.data {
            TensorData::U8(v) => (
                DataType::UInt8,
                Arc::new(UInt8Array::new(ScalarBuffer::from(v.into_vec()), None)),
            ),
            TensorData::U16(v) => (
                DataType::UInt16,
                Arc::new(UInt16Array::new(ScalarBuffer::from(v.into_vec()), None)),
            ),
            TensorData::F32(v) => (
                DataType::Float32,
                Arc::new(Float32Array::new(ScalarBuffer::from(v.into_vec()), None)),
            ),
            TensorData::I64(v) => (
                DataType::Int64,
                Arc::new(Int64Array::new(ScalarBuffer::from(v.into_vec()), None)),
            ),
        };
        let item = Arc::new(Field::new("item", item, false));
        // Arrow lists have at least one element; a sample of none is a list of one.
        let size =
            i32::try_from(per_sample.max(1)).map_err(|_| ArrowExportError::SampleTooLarge {
                tensor: tensor.name.clone(),
                elements: per_sample,
            })?;
        let list = FixedSizeListArray::try_new(Arc::clone(&item), size, values, None)?;
        let metadata = HashMap::from([(
            SHAPE_KEY.to_string(),
            shape_json(tensor.shape.get(1..).unwrap_or_default()),
        )]);
        fields.push(
            Field::new(&tensor.name, DataType::FixedSizeList(item, size), false)
                .with_metadata(metadata),
        );
        columns.push(Arc::new(list));
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

/// `[2,48,64,3]`: the per-sample shape as a JSON array.
fn shape_json(dims: &[usize]) -> String {
    let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// Batches written as one Arrow IPC stream; the schema is the first batch's.
pub struct ArrowStreamWriter<W: Write> {
    /// The output until the first batch gives the schema to open the stream with.
    out: Option<W>,
    stream: Option<StreamWriter<W>>,
}

impl<W: Write> std::fmt::Debug for ArrowStreamWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArrowStreamWriter")
            .field("started", &self.stream.is_some())
            .finish_non_exhaustive()
    }
}

impl<W: Write> ArrowStreamWriter<W> {
    /// A stream into `out`; nothing is written before the first batch.
    pub fn new(out: W) -> Self {
        Self {
            out: Some(out),
            stream: None,
        }
    }

    /// Appends `batch` (see [`to_record_batch`]).
    pub fn write(&mut self, batch: Batch) -> Result<(), ArrowExportError> {
        let record = to_record_batch(batch)?;
        let stream = match &mut self.stream {
            Some(stream) => stream,
            None => {
                let out = self.out.take().ok_or(ArrowExportError::StreamLost)?;
                self.stream
                    .insert(StreamWriter::try_new(out, &record.schema())?)
            }
        };
        stream.write(&record)?;
        Ok(())
    }

    /// Ends the stream and gives back the output (untouched when no batch was written).
    pub fn finish(self) -> Result<W, ArrowExportError> {
        match (self.stream, self.out) {
            (Some(stream), _) => Ok(stream.into_inner()?),
            (None, Some(out)) => Ok(out),
            (None, None) => Err(ArrowExportError::StreamLost),
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Int64Type, UInt8Type};
    use arrow_ipc::reader::StreamReader;

    use super::*;
    use crate::batch::Tensor;

    fn batch(index: u64, rows: usize) -> Batch {
        let n = rows as i64;
        Batch {
            epoch: 1,
            index,
            tensors: vec![
                Tensor {
                    name: "cam".into(),
                    shape: vec![rows, 2, 2, 3],
                    data: TensorData::U8(
                        (0..rows * 12).map(|i| i as u8).collect::<Vec<_>>().into(),
                    ),
                },
                Tensor {
                    name: "state".into(),
                    shape: vec![rows, 4],
                    data: TensorData::F32(
                        (0..rows * 4)
                            .map(|i| i as f32 * 0.5)
                            .collect::<Vec<_>>()
                            .into(),
                    ),
                },
                Tensor {
                    name: "anchor_ns".into(),
                    shape: vec![rows],
                    data: TensorData::I64((0..n).map(|i| 100 * i).collect::<Vec<_>>().into()),
                },
            ],
            skipped: Vec::new(),
        }
    }

    #[test]
    fn a_record_batch_has_a_row_per_sample_and_a_column_per_tensor() {
        let record = to_record_batch(batch(0, 3)).expect("converts");
        assert_eq!(record.num_rows(), 3);
        let schema = record.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["cam", "state", "anchor_ns"]);
        let shapes: Vec<&str> = schema
            .fields()
            .iter()
            .map(|f| f.metadata()[SHAPE_KEY].as_str())
            .collect();
        assert_eq!(shapes, ["[2,2,3]", "[4]", "[]"]);

        let cam = record.column(0).as_fixed_size_list();
        assert_eq!(cam.value_length(), 12);
        assert_eq!(
            cam.value(2).as_primitive::<UInt8Type>().values().to_vec(),
            (24..36).collect::<Vec<u8>>()
        );
        let state = record.column(1).as_fixed_size_list();
        assert_eq!(
            state
                .value(1)
                .as_primitive::<Float32Type>()
                .values()
                .to_vec(),
            [2.0, 2.5, 3.0, 3.5]
        );
        // A scalar per sample is a list of one.
        let anchors = record.column(2).as_fixed_size_list();
        assert_eq!(anchors.value_length(), 1);
        assert_eq!(
            anchors
                .values()
                .as_primitive::<Int64Type>()
                .values()
                .to_vec(),
            [0, 100, 200]
        );
    }

    #[test]
    fn a_stream_reads_back_as_the_batches_written() {
        let mut stream = ArrowStreamWriter::new(Vec::new());
        // The last batch of an epoch may be smaller: same schema, fewer rows.
        for (index, rows) in [(0, 3), (1, 1)] {
            stream.write(batch(index, rows)).expect("writes");
        }
        let bytes = stream.finish().expect("finishes");
        let reader = StreamReader::try_new(bytes.as_slice(), None).expect("a stream");
        let read: Vec<RecordBatch> = reader.map(|r| r.expect("a record batch")).collect();
        let expected = [
            to_record_batch(batch(0, 3)).expect("converts"),
            to_record_batch(batch(1, 1)).expect("converts"),
        ];
        assert_eq!(read, expected);
    }

    #[test]
    fn a_stream_without_batches_writes_nothing() {
        let bytes = ArrowStreamWriter::new(Vec::new())
            .finish()
            .expect("finishes");
        assert!(bytes.is_empty());
    }
}
