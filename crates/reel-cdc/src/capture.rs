//! The capture loop: snapshot once, then stream commits into the change log, flushing
//! on a row count or a deadline, and telling the server only what is durable.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pg_walstream::{
    CancellationToken, ChangeEvent, EventType, LogicalReplicationStream, ReplicationError,
    ReplicationStreamConfig, RetryConfig, SnapshotOutcome, StreamingMode,
};
use reel_io::Store;
use reel_manifest::changes::ops;

use crate::change_log::{ChangeLog, Flush, now_ns};
use crate::database::{Database, MARKER_PREFIX, with_replication};
use crate::table_log::RowChange;
use crate::{Error, Result};

/// A transaction's changes in order, by table.
type Changes = Vec<(Arc<str>, RowChange)>;

/// How often a quiet capture writes a marker, letting the slot release WAL.
const MARKER_INTERVAL: Duration = Duration::from_secs(5);

/// When a capture stops by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Until {
    /// Never: follow the database until killed.
    #[default]
    Forever,
    /// Once every change committed before the capture started is in the warehouse
    /// (a batch sync; also how tests wait for the warehouse to catch up).
    CaughtUp,
}

/// What to capture, from where, and how often to flush.
#[derive(Debug, Clone)]
pub struct CaptureOptions {
    /// `postgresql://user:password@host:port/database`.
    pub postgres: String,
    /// Tables (schema `public`) to capture.
    pub tables: Vec<String>,
    /// Replication slot name: one per capture.
    pub slot: String,
    /// Publication name.
    pub publication: String,
    /// Longest a committed change waits before it is flushed (the lag floor).
    pub flush_interval: Duration,
    /// Changes that trigger a flush before the deadline (bounds memory).
    pub flush_rows: usize,
    pub until: Until,
    /// Set to true to stop: the capture flushes what it has and returns (within one
    /// flush interval).
    pub stop: Option<Arc<AtomicBool>>,
}

impl CaptureOptions {
    /// The documented metadata tables (`docs/METADATA.md`), slot and publication `reel`.
    pub fn new(postgres: &str) -> Self {
        Self {
            postgres: postgres.to_owned(),
            tables: ["episodes", "annotations", "qc_overrides"]
                .map(String::from)
                .to_vec(),
            slot: "reel".into(),
            publication: "reel".into(),
            flush_interval: Duration::from_millis(200),
            flush_rows: 50_000,
            until: Until::Forever,
            stop: None,
        }
    }
}

/// What a capture did.
#[derive(Debug, Clone, Default)]
pub struct CaptureSummary {
    /// Whether this run took the initial snapshot.
    pub snapshot_taken: bool,
    /// Changes written, snapshot rows included.
    pub changes: usize,
    /// The LSN everything is in the warehouse up to.
    pub lsn: u64,
}

/// A replication error of the database at `url`, classified.
fn pg(url: &str) -> impl Fn(ReplicationError) -> Error + '_ {
    move |e| Error::from_pg(url, e)
}

/// The next event, or `None` when `wait` passes first (cancelled through the stream's
/// token, which leaves the connection consistent; dropping the future would not).
async fn next_within(
    stream: &mut LogicalReplicationStream,
    wait: Duration,
) -> std::result::Result<Option<ChangeEvent>, ReplicationError> {
    let token = CancellationToken::new();
    let timer = {
        let token = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            token.cancel();
        })
    };
    let event = stream.next_event(&token).await;
    timer.abort();
    match event {
        Ok(event) => Ok(Some(event)),
        Err(ReplicationError::Cancelled(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Removes the replication slot and publication of a capture: the server stops keeping
/// WAL for it. Returns whether the slot existed.
pub fn drop_capture(postgres: &str, slot: &str, publication: &str) -> Result<bool> {
    let mut db = Database::connect(postgres)?;
    let dropped = db.drop_slot(slot)?;
    db.drop_publication(publication)?;
    Ok(dropped)
}

/// Captures `options.tables` into the warehouse `store`, calling `on_flush` after each
/// flush (parts and progress durable, LSN confirmed to the server).
pub fn capture(
    options: &CaptureOptions,
    store: Store,
    on_flush: &mut dyn FnMut(&Flush),
) -> Result<CaptureSummary> {
    let url = options.postgres.as_str();
    for table in &options.tables {
        if table.is_empty()
            || !table
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(Error::Schema {
                table: table.clone(),
                reason: "names of captured tables are letters, digits and underscores".into(),
            });
        }
    }
    let mut db = Database::connect(url)?;
    db.check_wal_level()?;
    let keys = db.table_keys(&options.tables)?;
    db.ensure_publication(&options.publication, &options.tables)?;
    let mut log = ChangeLog::open(store, &options.slot, &options.publication, &keys)?;
    let mut summary = CaptureSummary::default();
    if !log.snapshot_done() {
        // A snapshot that never finished cannot be resumed: its slot's exported
        // snapshot is gone. Start over from a new slot.
        db.drop_slot(&options.slot)?;
        log.reset()?;
    } else if !db.slot_exists(&options.slot)? {
        return Err(Error::Slot {
            slot: options.slot.clone(),
            reason: format!(
                "is gone from {}, so the changes after {} cannot be read; run `reel-cdc --drop` and capture again (a new snapshot)",
                db.url(),
                reel_manifest::changes::lsn_text(log.lsn())
            ),
        });
    }
    db.wait_until_slot_is_free(&options.slot, Duration::from_secs(10))?;

    // A multi-thread runtime, so that the replication connection is driven on it
    // directly (the library's inline driver) and survives a cancelled wait.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| Error::Replication {
            url: db.url(),
            reason: format!("cannot start the async runtime: {e}"),
        })?;
    let config = ReplicationStreamConfig::builder(&options.slot, &options.publication)
        .with_protocol_version(1)
        .with_streaming_mode(StreamingMode::Off)
        // Markers (below) arrive as logical decoding messages.
        .with_messages(true)
        .with_feedback_interval(Duration::from_secs(1))
        .with_connection_timeout(Duration::from_secs(10))
        // Wrong credentials or a stopped server are reported, not retried for minutes.
        .with_retry_config(RetryConfig {
            max_attempts: 2,
            initial_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(1),
            multiplier: 2.0,
            max_duration: Duration::from_secs(5),
            jitter: false,
        });
    let replication_url = with_replication(url, true);
    let stream = runtime
        .block_on(LogicalReplicationStream::new(&replication_url, config))
        .map_err(pg(url))?;

    let mut stream = if log.snapshot_done() {
        stream
    } else {
        let (stream, rows) = take_snapshot(&runtime, stream, &mut log, options, on_flush)?;
        summary.snapshot_taken = true;
        summary.changes += rows;
        stream
    };
    runtime
        .block_on(stream.start(Some(log.lsn())))
        .map_err(pg(url))?;

    // A marker is a logical decoding message written through the control connection.
    // It is decoded in WAL order, so when it arrives every commit before it has
    // arrived too: the point the slot may be confirmed to when nothing is pending (the
    // server sends nothing for other tables' WAL, so without markers a quiet capture
    // would hold WAL for ever), and, with `Until::CaughtUp`, the point to stop at.
    let marker = format!("{}:{}", options.slot, now_ns());
    let caught_up_marker =
        (options.until == Until::CaughtUp).then(|| format!("{marker}:caught-up"));
    if let Some(caught_up) = &caught_up_marker {
        db.emit_marker(caught_up)?;
    }
    let mut last_marker = std::time::Instant::now();
    // The open transaction's changes, in order.
    let mut open: Option<Changes> = None;
    loop {
        let wait = match log.pending_for() {
            Some(waited) => options.flush_interval.saturating_sub(waited),
            None => options.flush_interval,
        };
        let event = runtime
            .block_on(next_within(&mut stream, wait.max(Duration::from_millis(1))))
            .map_err(pg(url))?;
        let idle = event.is_none();
        let reached_marker = match event {
            Some(event) => {
                take_event(event.event_type, &mut open, &mut log, &mut summary, &marker)?
            }
            None => None,
        };
        let stopping = (options.stop.as_ref()).is_some_and(|s| s.load(Ordering::Relaxed));
        let due = stopping
            || log.pending_rows() >= options.flush_rows
            || log
                .pending_for()
                .is_some_and(|w| w >= options.flush_interval)
            || reached_marker.is_some();
        if (due || idle)
            && open.is_none()
            && let Some(flush) = log.flush(true)?
        {
            confirm(&runtime, &mut stream, flush.lsn, url)?;
            on_flush(&flush);
        }
        if let Some((lsn, content)) = reached_marker
            && open.is_none()
            && !log.has_pending()
        {
            // Every commit before the marker is durable: the slot may move up to it.
            confirm(&runtime, &mut stream, lsn, url)?;
            if caught_up_marker
                .as_deref()
                .is_some_and(|m| content == m.as_bytes())
            {
                break;
            }
        }
        if stopping && open.is_none() && !log.has_pending() {
            break;
        }
        if idle && last_marker.elapsed() >= MARKER_INTERVAL {
            db.emit_marker(&marker)?;
            last_marker = std::time::Instant::now();
        }
    }
    summary.lsn = log.lsn();
    let _ = runtime.block_on(stream.stop());
    Ok(summary)
}

/// Takes one streamed event into the open transaction or the log; returns the LSN and
/// content of a marker of this capture.
fn take_event(
    event: EventType,
    open: &mut Option<Changes>,
    log: &mut ChangeLog,
    summary: &mut CaptureSummary,
    marker: &str,
) -> Result<Option<(u64, bytes::Bytes)>> {
    match event {
        EventType::Begin { .. } => *open = Some(Vec::new()),
        EventType::Relation {
            namespace,
            relation_name,
            columns,
            ..
        } if &*namespace == "public" => {
            if let Some(table_log) = log.table(&relation_name) {
                let columns: Vec<_> = (columns.iter())
                    .map(|c| (c.name.clone(), c.type_id))
                    .collect();
                table_log.fit(&columns)?;
            }
        }
        EventType::Insert { table, data, .. } => {
            if let (Some(changes), Some(table_log)) = (open.as_mut(), log.table(&table)) {
                let values = table_log.values(&data, None, false)?;
                let op = ops::INSERT;
                changes.push((table, RowChange { op, values }));
            }
        }
        EventType::Update {
            table,
            old_data,
            new_data,
            ..
        } => {
            if let (Some(changes), Some(table_log)) = (open.as_mut(), log.table(&table)) {
                let values = table_log.values(&new_data, old_data.as_ref(), true)?;
                // A changed key is the old row leaving and a new one arriving.
                if let Some(old) = &old_data {
                    let old_values = table_log.values(old, None, false)?;
                    if table_log.key_of(&old_values) != table_log.key_of(&values) {
                        changes.push((table.clone(), delete_of(table_log, &old_values)));
                    }
                }
                let op = ops::UPDATE;
                changes.push((table, RowChange { op, values }));
            }
        }
        EventType::Delete {
            table, old_data, ..
        } => {
            if let (Some(changes), Some(table_log)) = (open.as_mut(), log.table(&table)) {
                let old_values = table_log.values(&old_data, None, false)?;
                changes.push((table, delete_of(table_log, &old_values)));
            }
        }
        EventType::Truncate { tables, .. } => {
            if let Some(changes) = open.as_mut() {
                for qualified in tables {
                    let name: Arc<str> = qualified
                        .strip_prefix("public.")
                        .unwrap_or(&qualified)
                        .into();
                    if let Some(table_log) = log.table(&name) {
                        let values = vec![None; table_log.shape.columns.len()];
                        let op = ops::TRUNCATE;
                        changes.push((name, RowChange { op, values }));
                    }
                }
            }
        }
        EventType::Commit {
            end_lsn,
            commit_timestamp,
            ..
        } => {
            let changes = open.take().unwrap_or_default();
            // A commit the warehouse already holds (the server resends from its last
            // confirmed position) is skipped: each change lands once.
            if end_lsn.0 > log.lsn() {
                summary.changes += changes.len();
                let commit_ns = commit_timestamp.timestamp_nanos_opt().unwrap_or(0);
                log.take_commit(end_lsn.0, commit_ns, changes);
            }
        }
        EventType::Message {
            prefix,
            content,
            message_lsn,
            ..
        } if &*prefix == MARKER_PREFIX && content.starts_with(marker.as_bytes()) => {
            return Ok(Some((message_lsn.0, content)));
        }
        _ => {}
    }
    Ok(None)
}

/// Takes the initial snapshot through the slot's exported snapshot: every row of the
/// captured tables at the slot's consistent point, flushed as it grows and marked done
/// last. Returns the stream, ready to start at that point, and the rows taken.
fn take_snapshot(
    runtime: &tokio::runtime::Runtime,
    stream: LogicalReplicationStream,
    log: &mut ChangeLog,
    options: &CaptureOptions,
    on_flush: &mut dyn FnMut(&Flush),
) -> Result<(LogicalReplicationStream, usize)> {
    let url = options.postgres.as_str();
    let snapshot = match runtime.block_on(stream.snapshot()).map_err(pg(url))? {
        SnapshotOutcome::Available(snapshot) => snapshot,
        SnapshotOutcome::Unavailable(_) => {
            return Err(Error::Slot {
                slot: options.slot.clone(),
                reason:
                    "another process created it while this one started; run one reel-cdc per slot"
                        .into(),
            });
        }
    };
    let point = snapshot.consistent_point().0;
    for table in snapshot.tables() {
        let relation = table.relation();
        if let Some(table_log) = log.table(&relation.relation_name) {
            let columns: Vec<_> = (relation.columns.iter())
                .map(|c| (c.name.clone(), c.type_id))
                .collect();
            table_log.fit(&columns)?;
        }
    }
    log.begin_snapshot(point);
    let taken_ns = now_ns();
    let mut rows = 0;
    let mut events = snapshot.events();
    while let Some(event) = runtime.block_on(events.next_event()).map_err(pg(url))? {
        if let EventType::Insert { table, data, .. } = &event.event_type
            && let Some(table_log) = log.table(table)
        {
            let values = table_log.values(data, None, false)?;
            let change = RowChange {
                op: ops::SNAPSHOT,
                values,
            };
            log.take_snapshot_row(point, taken_ns, table, change);
            rows += 1;
        }
        if log.pending_rows() >= options.flush_rows
            && let Some(flush) = log.flush(false)?
        {
            on_flush(&flush);
        }
    }
    let stream = runtime.block_on(events.finish()).map_err(pg(url))?;
    log.begin_snapshot(point);
    if let Some(flush) = log.flush(true)? {
        on_flush(&flush);
    }
    Ok((stream, rows))
}

/// A delete of the row whose old values are `old` (only its key is kept).
fn delete_of(table_log: &crate::table_log::TableLog, old: &[Option<bytes::Bytes>]) -> RowChange {
    let key = &table_log.shape.key;
    let values = (table_log.shape.columns.iter().zip(old))
        .map(|(column, value)| key.contains(&column.name).then(|| value.clone()).flatten())
        .collect();
    RowChange {
        op: ops::DELETE,
        values,
    }
}

/// Tells the server that everything up to `lsn` is durable: it may drop that WAL.
fn confirm(
    runtime: &tokio::runtime::Runtime,
    stream: &mut LogicalReplicationStream,
    lsn: u64,
    url: &str,
) -> Result<()> {
    stream.shared_lsn_feedback.update_flushed_lsn(lsn);
    stream.shared_lsn_feedback.update_applied_lsn(lsn);
    runtime.block_on(stream.send_feedback()).map_err(pg(url))
}
