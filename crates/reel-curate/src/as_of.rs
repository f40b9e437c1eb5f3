//! The versions of the warehouse's tables a curation read: what a manifest records as its
//! warehouse snapshot, and what a curation runs at again (time travel).

use std::fmt;

use reel_warehouse::{Table, TableVersion, WarehouseError};

use crate::CurateError;

/// Table versions (`episodes@12 ingestions@12`), and the capture's position where the
/// database's tables were read (`+db-0/16B6C50`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsOf {
    tables: Vec<(String, u64)>,
    cdc_lsn: u64,
}

impl AsOf {
    pub(crate) fn new(tables: Vec<(String, u64)>, cdc_lsn: u64) -> Self {
        Self { tables, cdc_lsn }
    }

    /// The versions a snapshot text names (a manifest's `warehouse_snapshot`, or what a
    /// user types: `episodes@12`).
    pub fn parse(text: &str) -> Result<Self, CurateError> {
        let bad = |reason: String| CurateError::AsOf {
            as_of: text.to_owned(),
            reason,
        };
        let (tables, cdc) = match text.split_once(reel_manifest::CDC_POSITION_MARK) {
            Some((tables, lsn)) => (tables, Some(lsn)),
            None => (text, None),
        };
        let mut versions = Vec::new();
        for part in tables.split_whitespace() {
            let (name, version) = part.split_once('@').ok_or_else(|| {
                bad(format!(
                    "{part:?} is not a table version (`episodes@12`); a manifest written \
                     before the warehouse's tables names no versions"
                ))
            })?;
            let version = version
                .parse()
                .map_err(|_| bad(format!("{version:?} is not a version number")))?;
            versions.push((name.to_owned(), version));
        }
        if versions.is_empty() {
            return Err(bad("names no table version".into()));
        }
        let cdc_lsn = match cdc {
            Some(lsn) => reel_manifest::changes::parse_lsn(lsn)
                .ok_or_else(|| bad(format!("{lsn:?} is not a capture position")))?,
            None => 0,
        };
        Ok(Self {
            tables: versions,
            cdc_lsn,
        })
    }

    /// The versions `text` names (`episodes@12 ingestions@12`), or, where `text` is a
    /// manifest's path or store URI, the versions that manifest records.
    pub fn resolve(text: &str) -> Result<Self, CurateError> {
        if text.contains('@') && !text.ends_with(".arrow") {
            return Self::parse(text);
        }
        let manifest = reel_manifest::open_uri(text, &reel_manifest::node_manifest_dir())?;
        Self::of_manifest(&manifest)
    }

    /// The versions `manifest` records.
    pub fn of_manifest(manifest: &reel_manifest::Manifest) -> Result<Self, CurateError> {
        Self::parse(&manifest.meta().warehouse_snapshot)
    }

    /// The version named for table `name`.
    pub fn version_of(&self, name: &str) -> Option<u64> {
        self.tables
            .iter()
            .find(|(table, _)| table == name)
            .map(|(_, v)| *v)
    }

    /// The capture's position the database's tables were read at (0: none captured).
    pub fn cdc_lsn(&self) -> u64 {
        self.cdc_lsn
    }
}

impl fmt::Display for AsOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, version)) in self.tables.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{name}@{version}")?;
        }
        if self.cdc_lsn != 0 {
            write!(
                f,
                "{}{}",
                reel_manifest::CDC_POSITION_MARK,
                reel_manifest::changes::lsn_text(self.cdc_lsn)
            )?;
        }
        Ok(())
    }
}

/// `table` at `version` (its latest when `None`). A version asked for that the table no
/// longer keeps, its log or its files removed by the retention, is an error naming it, not
/// another version's rows.
pub(crate) fn version(
    table: &Table,
    version: Option<u64>,
    as_of: Option<&AsOf>,
) -> Result<TableVersion, CurateError> {
    let gone = |reason: String| CurateError::AsOf {
        as_of: as_of.map(ToString::to_string).unwrap_or_default(),
        reason,
    };
    let opened = match table.version(version) {
        Ok(opened) => opened,
        Err(WarehouseError::NoVersion {
            version, reason, ..
        }) => {
            return Err(gone(format!(
                "version {version} of table {} is not kept ({reason}); a warehouse keeps \
                 versions for its retention (7 days unless `reel-compact --vacuum --retention-hours` \
                 said otherwise)",
                table.name()
            )));
        }
        Err(e) => return Err(e.into()),
    };
    if version.is_some() {
        let present: std::collections::HashSet<String> = table
            .store()
            .list(&table.prefix())
            .map_err(|e| crate::store_error(table.store(), e))?
            .into_iter()
            .collect();
        if let Some(missing) = opened.files()?.iter().find(|f| !present.contains(&f.key)) {
            return Err(gone(format!(
                "version {} of table {} reads {}, which vacuum removed: a warehouse keeps \
                 versions for its retention (7 days unless `reel-compact --vacuum --retention-hours` \
                 said otherwise)",
                opened.number(),
                table.name(),
                missing.key
            )));
        }
    }
    Ok(opened)
}
