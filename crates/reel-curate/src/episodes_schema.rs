//! The episode tables' columns in Polars' types, from their Arrow schema.

use arrow_schema::{DataType as ArrowType, TimeUnit as ArrowUnit};
use polars::prelude::*;

/// The episode tables' schema in Polars' types. A scan given it reads a file written
/// before a column was added as if that column were null.
pub(crate) fn episodes_schema() -> PolarsResult<SchemaRef> {
    polars_schema(&reel_warehouse::episodes::episode_schema())
}

/// A table's Arrow schema in Polars' types.
pub(crate) fn polars_schema(arrow: &arrow_schema::Schema) -> PolarsResult<SchemaRef> {
    let mut schema = Schema::with_capacity(arrow.fields().len());
    for field in arrow.fields() {
        schema.insert(
            field.name().as_str().into(),
            polars_type(field.data_type())?,
        );
    }
    Ok(Arc::new(schema))
}

fn polars_type(arrow: &ArrowType) -> PolarsResult<DataType> {
    Ok(match arrow {
        ArrowType::Utf8 => DataType::String,
        ArrowType::Boolean => DataType::Boolean,
        ArrowType::Int32 => DataType::Int32,
        ArrowType::Int64 => DataType::Int64,
        ArrowType::Float64 => DataType::Float64,
        ArrowType::Timestamp(ArrowUnit::Microsecond, Some(zone)) if zone.as_ref() == "UTC" => {
            DataType::Datetime(TimeUnit::Microseconds, Some(TimeZone::UTC))
        }
        other => {
            polars_bail!(ComputeError: "warehouse column type {other:?} has no Polars type here")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_warehouse_column_has_a_polars_type() {
        let schema = episodes_schema().expect("every type maps");
        let arrow = reel_warehouse::episodes::episode_schema();
        assert_eq!(schema.len(), arrow.fields().len());
        assert_eq!(
            schema.get("recorded_at"),
            // Delta's timestamps are microseconds.
            Some(&DataType::Datetime(
                TimeUnit::Microseconds,
                Some(TimeZone::UTC)
            ))
        );
        assert_eq!(schema.get("source_episode_index"), Some(&DataType::Int64));
    }
}
