//! The Parquet tables of a LeRobot v3.0 dataset (frames, episodes, tasks), written with
//! arrow-rs in the column types and metadata LeRobot's own writer gives them.

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{
    ArrayRef, FixedSizeListArray, Float32Array, Float64Array, Int64Array, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde_json::json;

use crate::{Error, Result};

/// Columns in order, with the schema metadata LeRobot's readers look for.
#[derive(Default)]
pub(crate) struct Columns {
    fields: Vec<Field>,
    arrays: Vec<ArrayRef>,
}

impl Columns {
    pub(crate) fn int64(&mut self, name: &str, values: Vec<i64>) {
        self.push(name, Arc::new(Int64Array::from(values)));
    }

    pub(crate) fn float32(&mut self, name: &str, values: Vec<f32>) {
        self.push(name, Arc::new(Float32Array::from(values)));
    }

    pub(crate) fn float64(&mut self, name: &str, values: Vec<f64>) {
        self.push(name, Arc::new(Float64Array::from(values)));
    }

    pub(crate) fn string(&mut self, name: &str, values: Vec<String>) {
        self.push(name, Arc::new(StringArray::from(values)));
    }

    /// Rows of `width` float32 values: a fixed-size list, as LeRobot stores a vector
    /// feature (a plain float32 column when `width` is 1, as LeRobot stores shape `[1]`).
    pub(crate) fn float32_rows(
        &mut self,
        name: &str,
        width: usize,
        rows: &[Vec<f32>],
    ) -> Result<()> {
        let values: Float32Array = rows.iter().flatten().copied().collect();
        if width == 1 {
            self.push(name, Arc::new(values));
            return Ok(());
        }
        let item = Arc::new(Field::new("element", DataType::Float32, true));
        let list = FixedSizeListArray::try_new(item, width as i32, Arc::new(values), None)
            .map_err(|e| Error::dataset(name, format!("rows of {width} values: {e}")))?;
        self.push(name, Arc::new(list));
        Ok(())
    }

    pub(crate) fn string_lists(&mut self, name: &str, values: &[Vec<String>]) {
        let mut builder = ListBuilder::new(StringBuilder::new()).with_field(Arc::new(Field::new(
            "element",
            DataType::Utf8,
            true,
        )));
        for list in values {
            for s in list {
                builder.values().append_value(s);
            }
            builder.append(true);
        }
        self.push(name, Arc::new(builder.finish()));
    }

    fn push(&mut self, name: &str, array: ArrayRef) {
        self.fields
            .push(Field::new(name, array.data_type().clone(), true));
        self.arrays.push(array);
    }

    /// Writes the columns to `path` (Snappy, as LeRobot writes), with `metadata` in the
    /// schema.
    pub(crate) fn write(self, path: &Path, metadata: Vec<(&str, String)>) -> Result<()> {
        let name = path.display().to_string();
        let schema = Schema::new(self.fields).with_metadata(
            metadata
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect::<std::collections::HashMap<String, String>>(),
        );
        let batch = RecordBatch::try_new(Arc::new(schema), self.arrays)
            .map_err(|e| Error::dataset(&name, format!("columns do not form a table: {e}")))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| Error::Write {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let file = std::fs::File::create(path).map_err(|source| Error::Write {
            path: name.clone(),
            source,
        })?;
        let parquet_err = |e: parquet::errors::ParquetError| Error::Write {
            path: name.clone(),
            source: std::io::Error::other(e),
        };
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let mut writer =
            ArrowWriter::try_new(file, batch.schema(), Some(props)).map_err(parquet_err)?;
        writer.write(&batch).map_err(parquet_err)?;
        writer.close().map_err(parquet_err)?;
        Ok(())
    }
}

/// The `pandas` schema metadata that makes `pd.read_parquet` index the tasks table by its
/// `task` column, as LeRobot's `load_tasks` expects.
pub(crate) fn tasks_pandas_metadata() -> String {
    json!({
        "index_columns": ["task"],
        "column_indexes": [{"name": null, "field_name": null, "pandas_type": "unicode",
                            "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
             "numpy_type": "int64", "metadata": null},
            {"name": "task", "field_name": "task", "pandas_type": "unicode",
             "numpy_type": "object", "metadata": null}
        ],
        "attributes": {},
        "creator": {"library": "reel"},
    })
    .to_string()
}

/// The `huggingface` schema metadata of a frames table: the Hugging Face `datasets`
/// features of each column (`widths`: numeric features and their value counts).
pub(crate) fn frames_hf_metadata(widths: &[(String, usize)]) -> String {
    let mut features = serde_json::Map::new();
    for (key, width) in widths {
        let value = json!({"dtype": "float32", "_type": "Value"});
        features.insert(
            key.clone(),
            if *width == 1 {
                value
            } else {
                json!({"feature": value, "length": width, "_type": "List"})
            },
        );
    }
    features.insert(
        "timestamp".into(),
        json!({"dtype": "float32", "_type": "Value"}),
    );
    for key in ["frame_index", "episode_index", "index", "task_index"] {
        features.insert(key.into(), json!({"dtype": "int64", "_type": "Value"}));
    }
    json!({"info": {"features": features}}).to_string()
}
