//! What a curation query may read: the warehouse's tables and nothing else.
//!
//! Polars' SQL engine has table functions (`read_parquet('/any/path')`,
//! `read_csv`, `read_ipc`, `read_json`) that read any file the process can,
//! and DDL (`CREATE TABLE … AS`) that registers new tables. A curation's
//! snapshot names one warehouse, so a query that read elsewhere would make
//! a manifest whose provenance lies, and a query string passed through a
//! service would read the host. The query is parsed here, with the dialect
//! and options Polars parses it with, and refused unless it is one `SELECT`
//! (or `WITH … SELECT`) over the tables the warehouse registers and the
//! query's own common table expressions.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use sqlparser::ast::{Query, Statement, TableFactor, Visit, Visitor};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::{Parser, ParserOptions};

/// Why a query was refused before it ran.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryRefusal {
    #[error("the query does not parse: {0}")]
    Syntax(String),
    #[error("a curation is one SELECT statement; this query has {0}")]
    NotOneStatement(usize),
    #[error("a curation is a SELECT; this query is a {0}")]
    NotASelect(String),
    #[error(
        "table function {0}(…) is off: a curation reads only the warehouse's tables ({tables})",
        tables = .1.join(", ")
    )]
    TableFunction(String, Vec<String>),
    #[error(
        "the query reads table {0:?}, which the warehouse does not have (its tables: {tables})",
        tables = .1.join(", ")
    )]
    UnknownTable(String, Vec<String>),
}

/// Checks that `sql` reads only `tables` (and its own CTEs); returns the tables it reads.
pub fn check_query(sql: &str, tables: &[&str]) -> Result<BTreeSet<String>, QueryRefusal> {
    let statements = Parser::new(&GenericDialect)
        .with_options(ParserOptions {
            trailing_commas: true,
            ..Default::default()
        })
        .try_with_sql(sql)
        .and_then(|mut parser| parser.parse_statements())
        .map_err(|e| QueryRefusal::Syntax(e.to_string()))?;
    let [statement] = statements.as_slice() else {
        return Err(QueryRefusal::NotOneStatement(statements.len()));
    };
    if !matches!(statement, Statement::Query(_)) {
        let kind = statement.to_string();
        let kind = kind
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        return Err(QueryRefusal::NotASelect(kind));
    }
    let mut walk = Relations::default();
    if let ControlFlow::Break(function) = statement.visit(&mut walk) {
        return Err(QueryRefusal::TableFunction(function, owned(tables)));
    }
    // CTE names are collected over the whole query first: a CTE may be read
    // before the walk reaches its definition (a later CTE, a subquery).
    let known = |name: &str| {
        tables.iter().any(|t| t.eq_ignore_ascii_case(name))
            || walk.ctes.iter().any(|c| c.eq_ignore_ascii_case(name))
    };
    match walk.tables.iter().find(|name| !known(name)) {
        Some(name) => Err(QueryRefusal::UnknownTable(name.clone(), owned(tables))),
        None => Ok(walk.tables),
    }
}

fn owned(tables: &[&str]) -> Vec<String> {
    tables.iter().map(|t| t.to_string()).collect()
}

/// Table names read and CTE names defined, anywhere in a statement.
#[derive(Default)]
struct Relations {
    tables: BTreeSet<String>,
    ctes: BTreeSet<String>,
}

impl Visitor for Relations {
    /// The table function found.
    type Break = String;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<String> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.insert(cte.alias.name.value.clone());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<String> {
        match factor {
            TableFactor::Table {
                name,
                args: Some(_),
                ..
            } => ControlFlow::Break(name.to_string()),
            TableFactor::TableFunction { expr, .. } => ControlFlow::Break(expr.to_string()),
            TableFactor::Function { name, .. } => ControlFlow::Break(name.to_string()),
            TableFactor::Table { name, .. } => {
                self.tables.insert(name.to_string());
                ControlFlow::Continue(())
            }
            _ => ControlFlow::Continue(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLES: &[&str] = &["episodes"];

    #[test]
    fn selects_over_the_warehouse_and_its_ctes_pass() {
        for sql in [
            "SELECT * FROM episodes WHERE task = 'fold' AND qc_pass",
            "select e.uri from EPISODES e join episodes f on e.episode_id = f.episode_id",
            "WITH good AS (SELECT * FROM episodes WHERE success) SELECT * FROM good",
            "SELECT * FROM episodes WHERE episode_id IN (SELECT episode_id FROM episodes LIMIT 3)",
            "SELECT episode_id, uri, FROM episodes",
        ] {
            let read = check_query(sql, TABLES).unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert!(
                read.iter().any(|t| t.eq_ignore_ascii_case("episodes")),
                "{sql}: {read:?}"
            );
        }
    }

    #[test]
    fn table_functions_are_refused_wherever_they_hide() {
        for sql in [
            "SELECT * FROM read_parquet('/etc/warehouse/episodes/*.parquet')",
            "SELECT * FROM episodes WHERE uri IN (SELECT uri FROM read_csv('/etc/passwd'))",
            "WITH x AS (SELECT * FROM read_ipc('/tmp/m.arrow')) SELECT * FROM x",
            "SELECT * FROM episodes JOIN read_json('/tmp/a.json') j ON true",
        ] {
            let refusal = check_query(sql, TABLES).expect_err("refused");
            assert!(
                matches!(refusal, QueryRefusal::TableFunction(..)),
                "{sql}: {refusal}"
            );
            assert!(
                refusal
                    .to_string()
                    .contains("only the warehouse's tables (episodes)")
            );
        }
    }

    #[test]
    fn other_statements_and_tables_are_refused() {
        assert!(matches!(
            check_query("CREATE TABLE t AS SELECT * FROM episodes", TABLES),
            Err(QueryRefusal::NotASelect(kind)) if kind == "CREATE TABLE"
        ));
        assert!(matches!(
            check_query("SELECT 1; SELECT 2", TABLES),
            Err(QueryRefusal::NotOneStatement(2))
        ));
        assert!(matches!(
            check_query("DROP TABLE episodes", TABLES),
            Err(QueryRefusal::NotASelect(_))
        ));
        assert_eq!(
            check_query("SELECT * FROM other_warehouse.episodes", TABLES),
            Err(QueryRefusal::UnknownTable(
                "other_warehouse.episodes".into(),
                vec!["episodes".into()]
            ))
        );
        assert!(matches!(
            check_query("SELECT * FROM", TABLES),
            Err(QueryRefusal::Syntax(_))
        ));
    }
}
