//! Whether a curation query hands each manifest column through unchanged, read off the
//! query's plan rather than its text.
//!
//! Curation by position writes where each selected row sits in the compaction's bases;
//! the loader then reads the row's columns from there. That equals the self-contained
//! manifest only where every manifest column of the query's result is the `episodes`
//! table's own value, of the row its position names. So the query is planned (not run)
//! over a stand-in `episodes` table with the real one's schema and no rows, and each of
//! those columns is followed down the plan: through filters, sorts, slices, DISTINCT,
//! caches, projections that pass it on unchanged (window or other computed columns may
//! sit beside it), one side of a join, and every input of a UNION, to the stand-in itself
//! under its own name, all of them along the same rows. Anything else declines: an
//! expression or another column in its place (`AS`, quoted or not, `REPLACE`), a column of
//! another table or of the other side of a join, an aggregation, a join side whose rows
//! may be missing (nulls), or a plan node not known here. A declined query is curated
//! self-contained, with the reason said.

use std::sync::Arc;

use polars::polars_utils::arena::{Arena, Node};
use polars::prelude::*;
use polars_plan::plans::expr_ir::ExprIR;
use polars_plan::plans::{AExpr, FunctionIR, IR};

/// Why a query's result may not keep a manifest column as the table's value.
pub(crate) type Decline = String;

/// Checks that `query` (planned over `stand_in`, the `episodes` table) gives each of
/// `columns` that its result has as the stand-in's own column of that name, all from the
/// same input row.
pub(crate) fn check(
    query: LazyFrame,
    stand_in: &Arc<DataFrame>,
    columns: &[&str],
) -> Result<(), Decline> {
    let plan = query
        .to_alp()
        .map_err(|e| format!("the query does not plan: {e}"))?;
    let schema = plan.lp_arena.get(plan.lp_top).schema(&plan.lp_arena);
    let tracked: Vec<Tracked> = columns
        .iter()
        .filter(|c| schema.contains(c))
        .map(|c| Tracked {
            column: c.to_string(),
            name: PlSmallStr::from(*c),
        })
        .collect();
    Walk {
        plans: &plan.lp_arena,
        exprs: &plan.expr_arena,
        stand_in,
    }
    .trace(plan.lp_top, tracked)
}

/// A manifest column, and its name at the plan node being looked at.
#[derive(Debug, Clone)]
struct Tracked {
    column: String,
    name: PlSmallStr,
}

struct Walk<'a> {
    plans: &'a Arena<IR>,
    exprs: &'a Arena<AExpr>,
    stand_in: &'a Arc<DataFrame>,
}

impl Walk<'_> {
    fn trace(&self, mut node: Node, mut tracked: Vec<Tracked>) -> Result<(), Decline> {
        loop {
            if tracked.is_empty() {
                return Ok(());
            }
            let next = match self.plans.get(node) {
                // Rows kept, dropped or reordered, never changed.
                IR::Filter { input, .. }
                | IR::Sort { input, .. }
                | IR::Slice { input, .. }
                | IR::Distinct { input, .. }
                | IR::Cache { input, .. }
                | IR::SimpleProjection { input, .. } => *input,
                IR::Select { input, expr, .. } => {
                    self.through_projection(expr, &mut tracked, true)?;
                    *input
                }
                IR::HStack { input, exprs, .. } => {
                    self.through_projection(exprs, &mut tracked, false)?;
                    *input
                }
                IR::MapFunction { input, function } => {
                    through_function(function, &tracked)?;
                    *input
                }
                IR::Join {
                    input_left,
                    input_right,
                    options,
                    ..
                } => self.through_join(*input_left, *input_right, &options.args, &mut tracked)?,
                IR::Union { inputs, .. } => {
                    return inputs
                        .iter()
                        .try_for_each(|&input| self.trace(input, tracked.clone()));
                }
                IR::DataFrameScan { df, .. } if Arc::ptr_eq(df, self.stand_in) => {
                    return match tracked.iter().find(|t| t.name != t.column.as_str()) {
                        None => Ok(()),
                        Some(t) => Err(format!(
                            "the query's column {} is the table's column {}",
                            t.column, t.name
                        )),
                    };
                }
                IR::DataFrameScan { .. } | IR::Scan { .. } => {
                    return Err(format!(
                        "the query's column {} comes from another table than episodes",
                        tracked[0].column
                    ));
                }
                IR::GroupBy { .. } => {
                    return Err("the query aggregates (GROUP BY)".into());
                }
                other => {
                    return Err(format!(
                        "the query's plan has a step this check does not follow ({})",
                        step_name(other)
                    ));
                }
            };
            node = next;
        }
    }

    /// Follows each tracked column through a projection: one the projection computes
    /// must be a plain column (then followed under that column's name); one it does not
    /// name passes through an `HStack` (with_columns) and is missing from a `Select`.
    fn through_projection(
        &self,
        exprs: &[ExprIR],
        tracked: &mut [Tracked],
        select: bool,
    ) -> Result<(), Decline> {
        for t in tracked.iter_mut() {
            match exprs.iter().find(|e| e.output_name() == &t.name) {
                Some(e) => match self.exprs.get(e.node()) {
                    AExpr::Column(source) => t.name = source.clone(),
                    _ => {
                        return Err(format!(
                            "the query computes its column {} (not the table's value)",
                            t.column
                        ));
                    }
                },
                None if select => {
                    return Err(format!(
                        "the query's column {} is not one its projection names",
                        t.column
                    ));
                }
                None => {}
            }
        }
        Ok(())
    }

    /// The join input every tracked column comes from (one side for all of them, a side
    /// whose every row is in the result), with their names there.
    fn through_join(
        &self,
        left: Node,
        right: Node,
        args: &JoinArgs,
        tracked: &mut [Tracked],
    ) -> Result<Node, Decline> {
        let left_schema = self.plans.get(left).schema(self.plans).into_owned();
        let right_schema = self.plans.get(right).schema(self.plans).into_owned();
        let suffix = args.suffix();
        let mut side = None;
        for t in tracked.iter_mut() {
            let from_left = matches!(args.how, JoinType::Semi | JoinType::Anti)
                || left_schema.contains(&t.name);
            let this = if from_left {
                Side::Left
            } else if right_schema.contains(&t.name) {
                Side::Right
            } else if let Some(stripped) = t.name.strip_suffix(suffix.as_str())
                && right_schema.contains(stripped)
            {
                t.name = PlSmallStr::from(stripped);
                Side::Right
            } else {
                return Err(format!(
                    "the query's column {} comes out of a join as neither side's",
                    t.column
                ));
            };
            if side.is_some_and(|s| s != this) {
                return Err("the query takes manifest columns from both sides of a join".into());
            }
            side = Some(this);
        }
        // A side some of whose rows may be missing from a match reads as nulls there.
        let whole = matches!(
            (side, &args.how),
            (
                _,
                JoinType::Inner | JoinType::Cross | JoinType::Semi | JoinType::Anti
            ) | (Some(Side::Left), JoinType::Left)
                | (Some(Side::Right), JoinType::Right)
        );
        if !whole {
            return Err(format!(
                "the query takes manifest columns from a side of a {:?} join that may be null",
                args.how
            ));
        }
        Ok(match side {
            Some(Side::Right) => right,
            _ => left,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Left,
    Right,
}

/// A row-wise function step: passes tracked columns on unless it makes or explodes one.
fn through_function(function: &FunctionIR, tracked: &[Tracked]) -> Result<(), Decline> {
    match function {
        FunctionIR::Rechunk | FunctionIR::Hint(_) => Ok(()),
        FunctionIR::RowIndex { name, .. } => match tracked.iter().find(|t| t.name == *name) {
            None => Ok(()),
            Some(t) => Err(format!("the query numbers its rows as {}", t.column)),
        },
        FunctionIR::Explode { columns, .. } => {
            match tracked.iter().find(|t| columns.contains(&t.name)) {
                None => Ok(()),
                Some(t) => Err(format!("the query explodes its column {}", t.column)),
            }
        }
        _ => Err("the query's plan applies a function this check does not follow".into()),
    }
}

/// The kind of a plan step, for a decline's reason.
fn step_name(step: &IR) -> &'static str {
    match step {
        IR::Gather { .. } => "gather",
        IR::HConcat { .. } => "horizontal concatenation",
        IR::ExtContext { .. } => "external context",
        IR::Sink { .. } | IR::SinkMultiple { .. } => "sink",
        _ => "other",
    }
}

/// An `episodes` table with `schema` and no rows, for planning a query over, and the
/// frame the plan's scan of it holds (to know it again).
pub(crate) fn stand_in(schema: SchemaRef) -> (LazyFrame, Arc<DataFrame>) {
    let frame = Arc::new(DataFrame::empty_with_schema(&schema));
    let plan = DslPlan::DataFrameScan {
        df: frame.clone(),
        schema,
    };
    (LazyFrame::from(plan), frame)
}
