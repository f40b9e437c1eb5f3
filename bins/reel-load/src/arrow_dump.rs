//! Batches as an Arrow IPC stream: one row per sample, one fixed-size-list column per
//! tensor, its per-sample shape and element type in the field metadata.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, UInt8Array,
};
use arrow_buffer::ScalarBuffer;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, Field, Schema};
use reel_loader::{Batch, TensorData};

pub struct Dump<W: Write> {
    out: Option<W>,
    writer: Option<StreamWriter<W>>,
}

impl<W: Write> Dump<W> {
    pub fn new(out: W) -> Self {
        Self {
            out: Some(out),
            writer: None,
        }
    }

    pub fn write(&mut self, batch: Batch) -> anyhow::Result<()> {
        let mut fields = Vec::with_capacity(batch.tensors.len());
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(batch.tensors.len());
        for tensor in batch.tensors {
            let per_sample = tensor.sample_len();
            let (item, values): (DataType, ArrayRef) = match tensor.data {
                TensorData::U8(v) => (
                    DataType::UInt8,
                    Arc::new(UInt8Array::new(ScalarBuffer::from(v.into_vec()), None)),
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
            let size = i32::try_from(per_sample.max(1))?;
            let list = FixedSizeListArray::try_new(Arc::clone(&item), size, values, None)?;
            let shape = serde_json::to_string(&tensor.shape[1..])?;
            let metadata = HashMap::from([("reel.shape".to_string(), shape)]);
            fields.push(
                Field::new(&tensor.name, DataType::FixedSizeList(item, size), false)
                    .with_metadata(metadata),
            );
            columns.push(Arc::new(list));
        }
        let schema = Arc::new(Schema::new(fields));
        let record = RecordBatch::try_new(Arc::clone(&schema), columns)?;
        if self.writer.is_none() {
            let out = self
                .out
                .take()
                .ok_or_else(|| anyhow::anyhow!("dump already finished"))?;
            self.writer = Some(StreamWriter::try_new(out, &schema)?);
        }
        if let Some(writer) = self.writer.as_mut() {
            writer.write(&record)?;
        }
        Ok(())
    }

    pub fn finish(self) -> anyhow::Result<()> {
        if let Some(mut writer) = self.writer {
            writer.finish()?;
        }
        Ok(())
    }
}
