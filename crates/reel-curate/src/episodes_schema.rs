//! The `episodes` table's columns in Polars' types, from the warehouse's Arrow schema.

use arrow_schema::{DataType as ArrowType, TimeUnit as ArrowUnit};
use polars::prelude::*;

/// The current warehouse schema in Polars' types. A scan given it reads a part of an
/// older schema version as if the columns that version lacks were null.
pub(crate) fn episodes_schema() -> PolarsResult<SchemaRef> {
    let arrow = reel_manifest::warehouse::warehouse_schema();
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
        ArrowType::UInt32 => DataType::UInt32,
        ArrowType::UInt64 => DataType::UInt64,
        ArrowType::Int64 => DataType::Int64,
        ArrowType::Float64 => DataType::Float64,
        ArrowType::Timestamp(ArrowUnit::Nanosecond, Some(zone)) if zone.as_ref() == "UTC" => {
            DataType::Datetime(TimeUnit::Nanoseconds, Some(TimeZone::UTC))
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
        let arrow = reel_manifest::warehouse::warehouse_schema();
        assert_eq!(schema.len(), arrow.fields().len());
        assert_eq!(
            schema.get("recorded_at"),
            Some(&DataType::Datetime(
                TimeUnit::Nanoseconds,
                Some(TimeZone::UTC)
            ))
        );
        assert_eq!(schema.get("source_episode_index"), Some(&DataType::Int64));
    }
}
