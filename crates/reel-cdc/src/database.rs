//! The control connection: plain SQL to check the server, keep the publication in step
//! and read the catalog, on a connection of its own (the replication one streams).

use std::collections::BTreeMap;

use pg_walstream::PgReplicationConnection;

use crate::{Error, Result};

/// Prefix of the logical decoding messages a capture writes as markers.
pub(crate) const MARKER_PREFIX: &str = "reel-cdc";

/// A plain SQL session with the metadata database.
pub struct Database {
    url: String,
    conn: PgReplicationConnection,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("url", &reel_io::redact(&self.url))
            .finish_non_exhaustive()
    }
}

/// `url` with any `replication=` parameter removed (a plain session) or set (a walsender).
pub(crate) fn with_replication(url: &str, replication: bool) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut params: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("replication="))
        .collect();
    if replication {
        params.push("replication=database");
    }
    if params.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", params.join("&"))
    }
}

/// `name` as a quoted SQL identifier.
pub(crate) fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `value` as a quoted SQL string literal.
pub(crate) fn literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// Parses an LSN as PostgreSQL prints it (`16/B374D848`).
pub fn parse_lsn(text: &str) -> Option<u64> {
    let (hi, lo) = text.split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

impl Database {
    /// Opens a session with the database at `url` (`postgresql://user:pw@host:port/db`).
    pub fn connect(url: &str) -> Result<Self> {
        let plain = with_replication(url, false);
        let conn = PgReplicationConnection::connect(&plain).map_err(|e| Error::from_pg(url, e))?;
        Ok(Self {
            url: url.to_owned(),
            conn,
        })
    }

    /// The database's URL, credentials redacted.
    pub fn url(&self) -> String {
        reel_io::redact(&self.url).into_owned()
    }

    /// Runs one statement and returns its rows (NULL as `None`).
    pub fn query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>> {
        let result = self
            .conn
            .exec(sql)
            .map_err(|e| Error::from_pg(&self.url, e))?;
        Ok((0..result.ntuples())
            .map(|row| {
                (0..result.nfields())
                    .map(|col| result.get_value(row, col))
                    .collect()
            })
            .collect())
    }

    /// The first column of the first row of `sql`.
    fn scalar(&mut self, sql: &str) -> Result<Option<String>> {
        Ok(self
            .query(sql)?
            .into_iter()
            .next()
            .and_then(|row| row.into_iter().next().flatten()))
    }

    /// Refuses a server whose `wal_level` is not `logical`, saying what to change.
    pub fn check_wal_level(&mut self) -> Result<()> {
        let level = self.scalar("SHOW wal_level")?.unwrap_or_default();
        if level == "logical" {
            return Ok(());
        }
        Err(Error::ServerConfig {
            url: self.url(),
            reason: format!(
                "wal_level is {level:?}, and change capture needs \"logical\": set wal_level = logical in postgresql.conf (or ALTER SYSTEM SET wal_level = logical) and restart the server"
            ),
        })
    }

    /// The primary-key columns of each table (schema `public`), refusing a table that
    /// does not exist or has no primary key: without one a change cannot be tied to a row.
    pub fn table_keys(&mut self, tables: &[String]) -> Result<BTreeMap<String, Vec<String>>> {
        let mut keys = BTreeMap::new();
        for table in tables {
            let exists = self.scalar(&format!(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = 'public' AND c.relname = {} AND c.relkind IN ('r', 'p')",
                literal(table)
            ))?;
            if exists.as_deref() != Some("1") {
                return Err(Error::Schema {
                    table: table.clone(),
                    reason: format!("no such table in schema public of {}", self.url()),
                });
            }
            let rows = self.query(&format!(
                "SELECT a.attname FROM pg_index i \
                 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
                 WHERE i.indrelid = {}::regclass AND i.indisprimary \
                 ORDER BY array_position(i.indkey::int2[], a.attnum)",
                literal(&format!("public.{}", ident(table)))
            ))?;
            let key: Vec<String> = rows
                .into_iter()
                .filter_map(|r| r.into_iter().next().flatten())
                .collect();
            if key.is_empty() {
                return Err(Error::Schema {
                    table: table.clone(),
                    reason: "has no primary key; change capture needs one to know which row a change belongs to (ALTER TABLE … ADD PRIMARY KEY)".into(),
                });
            }
            keys.insert(table.clone(), key);
        }
        Ok(keys)
    }

    /// Creates `publication` for exactly `tables`, or sets an existing one to them.
    pub fn ensure_publication(&mut self, publication: &str, tables: &[String]) -> Result<()> {
        let list = tables
            .iter()
            .map(|t| format!("public.{}", ident(t)))
            .collect::<Vec<_>>()
            .join(", ");
        let exists = self.scalar(&format!(
            "SELECT count(*) FROM pg_publication WHERE pubname = {}",
            literal(publication)
        ))?;
        let verb = if exists.as_deref() == Some("1") {
            format!("ALTER PUBLICATION {} SET TABLE {list}", ident(publication))
        } else {
            format!("CREATE PUBLICATION {} FOR TABLE {list}", ident(publication))
        };
        self.query(&verb)?;
        Ok(())
    }

    /// Whether the replication slot `slot` exists.
    pub fn slot_exists(&mut self, slot: &str) -> Result<bool> {
        let n = self.scalar(&format!(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = {}",
            literal(slot)
        ))?;
        Ok(n.as_deref() == Some("1"))
    }

    /// Waits until no session streams from `slot`: the server notices a killed
    /// capture's connection a moment after it dies. Refuses one still in use after
    /// `patience`: another capture is running on this slot.
    pub fn wait_until_slot_is_free(
        &mut self,
        slot: &str,
        patience: std::time::Duration,
    ) -> Result<()> {
        let deadline = std::time::Instant::now() + patience;
        loop {
            let active = self.scalar(&format!(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = {} AND active",
                literal(slot)
            ))?;
            let Some(pid) = active else {
                return Ok(());
            };
            if std::time::Instant::now() >= deadline {
                return Err(Error::Slot {
                    slot: slot.to_owned(),
                    reason: format!(
                        "is in use by server process {pid}: another reel-cdc is capturing with it (one capture per slot; --slot names another)"
                    ),
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Drops the replication slot `slot` if it exists; returns whether it did.
    pub fn drop_slot(&mut self, slot: &str) -> Result<bool> {
        if !self.slot_exists(slot)? {
            return Ok(false);
        }
        self.wait_until_slot_is_free(slot, std::time::Duration::from_secs(10))?;
        self.query(&format!(
            "SELECT pg_drop_replication_slot({})",
            literal(slot)
        ))?;
        Ok(true)
    }

    /// Drops `publication` if it exists.
    pub fn drop_publication(&mut self, publication: &str) -> Result<()> {
        self.query(&format!(
            "DROP PUBLICATION IF EXISTS {}",
            ident(publication)
        ))?;
        Ok(())
    }

    /// Writes a non-transactional logical decoding message with prefix `reel-cdc` and
    /// `content`; returns its LSN. Captures see it in WAL order.
    pub fn emit_marker(&mut self, content: &str) -> Result<u64> {
        let text = self
            .scalar(&format!(
                "SELECT pg_logical_emit_message(false, {}, {})",
                literal(MARKER_PREFIX),
                literal(content)
            ))?
            .unwrap_or_default();
        parse_lsn(&text).ok_or_else(|| Error::Replication {
            url: self.url(),
            reason: format!("unreadable marker position {text:?}"),
        })
    }

    /// The server's current WAL write position.
    pub fn current_wal_lsn(&mut self) -> Result<u64> {
        let text = self
            .scalar("SELECT pg_current_wal_lsn()")?
            .unwrap_or_default();
        parse_lsn(&text).ok_or_else(|| Error::Replication {
            url: self.url(),
            reason: format!("unreadable WAL position {text:?}"),
        })
    }

    /// Bytes of WAL the slot keeps on the server's disk (from its restart LSN to the
    /// current position), or `None` when there is no such slot.
    pub fn retained_wal_bytes(&mut self, slot: &str) -> Result<Option<u64>> {
        let bytes = self.scalar(&format!(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint \
             FROM pg_replication_slots WHERE slot_name = {}",
            literal(slot)
        ))?;
        Ok(bytes.and_then(|b| b.parse().ok()))
    }

    /// The position up to which the server knows the slot's changes are durable.
    pub fn confirmed_flush_lsn(&mut self, slot: &str) -> Result<Option<u64>> {
        let text = self.scalar(&format!(
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = {}",
            literal(slot)
        ))?;
        Ok(text.as_deref().and_then(parse_lsn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lsns_and_quoting() {
        assert_eq!(
            with_replication(
                "postgresql://u@h:5/db?sslmode=disable&replication=database",
                false
            ),
            "postgresql://u@h:5/db?sslmode=disable"
        );
        assert_eq!(
            with_replication("postgresql://u@h:5/db", true),
            "postgresql://u@h:5/db?replication=database"
        );
        assert_eq!(parse_lsn("16/B374D848"), Some(0x16_B374_D848));
        assert_eq!(parse_lsn("nope"), None);
        assert_eq!(ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(literal("it's"), "'it''s'");
    }
}
