//! Checks a node before a job starts.
//!
//! A bad node rarely raises an alert: a cache disk that writes at a tenth of its speed, a
//! filesystem with no room for the working set, a GPU with uncorrected ECC errors, a clock
//! years in the past. [`run`] measures each of these and compares it with a threshold from
//! [`PreflightConfig`], so a job can refuse a node before it holds the rest of the fleet
//! hostage. Every check reports its name, [`Status`], measured value, threshold and a
//! reason in words; a check that cannot apply (no manifest given, no `nvidia-smi`) is
//! [`Status::Skipped`] with the reason, never silently passed.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Within its threshold.
    Pass,
    /// Worth a look, but the job may start.
    Warn,
    /// The node should not run the job.
    Fail,
    /// Does not apply here; the reason says why.
    Skipped,
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// What was checked (`cache_write_throughput`, `gpu_ecc_uncorrected`, ...).
    pub name: String,
    /// The folder, file or device checked, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub status: Status,
    /// The measured value, in `unit`.
    pub value: Option<f64>,
    /// The threshold it was held against, in `unit`.
    pub threshold: Option<f64>,
    pub unit: String,
    /// What was measured and why it passed or not.
    pub reason: String,
}

impl Check {
    fn new(name: &str, subject: Option<&Path>, unit: &str) -> Self {
        Self {
            name: name.to_owned(),
            subject: subject.map(|p| p.display().to_string()),
            status: Status::Skipped,
            value: None,
            threshold: None,
            unit: unit.to_owned(),
            reason: String::new(),
        }
    }

    fn with(
        mut self,
        status: Status,
        value: Option<f64>,
        threshold: Option<f64>,
        reason: String,
    ) -> Self {
        self.status = status;
        self.value = value;
        self.threshold = threshold;
        self.reason = reason;
        self
    }

    fn skipped(self, reason: impl Into<String>) -> Self {
        self.with(Status::Skipped, None, None, reason.into())
    }

    /// Pass when `value >= min`, fail otherwise.
    fn at_least(self, value: f64, min: f64, what: String) -> Self {
        let (status, verb) = if value >= min {
            (Status::Pass, "at least")
        } else {
            (Status::Fail, "below")
        };
        let reason = format!("{what}: {value:.1} {}, {verb} {min:.1}", self.unit);
        self.with(status, Some(value), Some(min), reason)
    }
}

/// Every check of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The node's host name.
    pub host: String,
    /// False when any check failed (warnings do not fail).
    pub passed: bool,
    pub checks: Vec<Check>,
}

impl Report {
    /// The checks that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.status == Status::Fail)
    }
}

/// What to check: the node-local cache folders and, optionally, the job's manifest.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// Cache folders (the first holds the cache's metadata, as in `reel-cache`).
    pub cache_dirs: Vec<PathBuf>,
    /// The training manifest whose working set the cache should hold.
    pub manifest: Option<PathBuf>,
}

/// Thresholds and settings of every check; any field left out of a TOML file keeps its
/// default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct PreflightConfig {
    pub io: IoConfig,
    pub space: SpaceConfig,
    pub cache: CacheCoverageConfig,
    pub memory: MemoryConfig,
    pub clock: ClockConfig,
    pub gpu: GpuConfig,
}

/// Sequential throughput of the cache folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IoConfig {
    /// Size of the test file written and read back, in MiB.
    pub test_mib: u64,
    /// Slowest acceptable write (including the final fsync), MiB/s.
    pub min_write_mib_s: f64,
    /// Slowest acceptable read of data not in the page cache, MiB/s.
    pub min_read_mib_s: f64,
}

impl Default for IoConfig {
    fn default() -> Self {
        Self {
            test_mib: 256,
            min_write_mib_s: 200.0,
            min_read_mib_s: 400.0,
        }
    }
}

/// Free space on the cache filesystem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpaceConfig {
    /// Space to keep free beyond the part of the working set not yet cached, MiB.
    pub headroom_mib: u64,
}

impl Default for SpaceConfig {
    fn default() -> Self {
        Self { headroom_mib: 1024 }
    }
}

/// How the cache is laid out and how much of the working set it should hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheCoverageConfig {
    /// Block size the cache was warmed with (`reel-warm --block-size`), bytes.
    pub block_size: u64,
    /// Checksum page size of the cache, bytes.
    pub page_size: u32,
    /// Warn when less than this share of the working set is cached, %.
    pub warn_below_pct: f64,
    /// Fail when less than this share is cached, %. 0 never fails: training then reads
    /// misses from the remote store, slower but correct.
    pub fail_below_pct: f64,
}

impl Default for CacheCoverageConfig {
    fn default() -> Self {
        Self {
            block_size: reel_cache::DEFAULT_BLOCK_SIZE,
            page_size: reel_cache::DEFAULT_PAGE_SIZE,
            warn_below_pct: 100.0,
            fail_below_pct: 0.0,
        }
    }
}

/// Available memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// Least `MemAvailable` (from `/proc/meminfo`), MiB.
    pub min_available_mib: u64,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            min_available_mib: 2048,
        }
    }
}

/// Clock sanity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClockConfig {
    /// The wall clock must read later than this (seconds since the Unix epoch; default
    /// 2025-01-01T00:00:00Z). A node whose clock is earlier lost its time source.
    pub not_before_unix_s: u64,
    /// A folder on a shared filesystem whose server stamps file times (NFS, Lustre):
    /// the check writes a file there and compares the modification time the server
    /// gave it with the local clock. On a local filesystem the local kernel stamps the
    /// time, so the skew is always about zero. `None` skips the check.
    pub reference_dir: Option<PathBuf>,
    /// Largest acceptable skew against the reference, seconds.
    pub max_skew_s: f64,
}

impl Default for ClockConfig {
    fn default() -> Self {
        Self {
            not_before_unix_s: 1_735_689_600,
            reference_dir: None,
            max_skew_s: 2.0,
        }
    }
}

/// GPU health through `nvidia-smi` (skipped when it is not on `PATH`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpuConfig {
    /// GPUs the node must show; `None` accepts any number, zero included (with a warning).
    pub expected_count: Option<u32>,
    /// Most uncorrected ECC errors since the driver loaded, summed over GPUs.
    pub max_uncorrected_ecc: u64,
    /// How long `nvidia-smi` may take before the GPU check fails (a hung query is itself
    /// a symptom of a GPU that fell off the bus).
    pub timeout_s: f64,
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self {
            expected_count: None,
            max_uncorrected_ecc: 0,
            timeout_s: 30.0,
        }
    }
}

/// Errors of loading a configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid configuration.
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
}

impl PreflightConfig {
    /// Reads a TOML file; fields not given keep their defaults, unknown fields are errors.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })
    }
}

/// Runs every check against `target` and returns the report. Never fails: what cannot be
/// checked is reported as a failed or skipped check.
pub fn run(target: &Target, config: &PreflightConfig) -> Report {
    let mut checks = Vec::new();
    let mut writable = Vec::new();
    for dir in &target.cache_dirs {
        let check = check_writable(dir);
        if check.status == Status::Pass {
            writable.push(dir.clone());
        }
        checks.push(check);
        checks.extend(check_throughput(dir, writable.contains(dir), &config.io));
    }
    if target.cache_dirs.is_empty() {
        checks.push(Check::new("cache_writable", None, "").skipped("no cache folder given"));
    }

    let manifest = check_manifest(target.manifest.as_deref());
    let working_set = manifest.1;
    checks.push(manifest.0);
    let (coverage, missing_bytes) =
        check_coverage(&target.cache_dirs, working_set.as_deref(), &config.cache);
    checks.push(coverage);
    for dir in &target.cache_dirs {
        // Blocks spread evenly over the folders by hash.
        let share = missing_bytes / target.cache_dirs.len() as u64;
        checks.push(check_free_space(dir, share, &config.space));
    }

    checks.push(check_memory(&config.memory));
    checks.extend(check_clock(&config.clock));
    checks.extend(check_gpus(&config.gpu));
    Report {
        host: host_name(),
        passed: checks.iter().all(|c| c.status != Status::Fail),
        checks,
    }
}

/// One object of the working set: its path in the store and its size.
type WorkingSet = Vec<(String, u64)>;

fn check_writable(dir: &Path) -> Check {
    let check = Check::new("cache_writable", Some(dir), "");
    if !dir.is_dir() {
        return check.with(Status::Fail, None, None, "not an existing folder".into());
    }
    let probe = dir.join(format!(".reel-preflight-probe-{}", std::process::id()));
    let payload = b"reel preflight probe";
    let result = (|| {
        let mut file = File::create(&probe)?;
        file.write_all(payload)?;
        file.sync_all()?;
        let back = std::fs::read(&probe)?;
        if back != payload {
            return Err(std::io::Error::other("read back different bytes"));
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&probe);
    match result {
        Ok(()) => check.with(
            Status::Pass,
            None,
            None,
            "created, fsynced, read back and removed a file".into(),
        ),
        Err(e) => check.with(
            Status::Fail,
            None,
            None,
            format!("cannot write a file: {e}"),
        ),
    }
}

/// What one sequential write + read of the test file measured.
#[derive(Debug, Clone, Copy)]
struct IoMeasure {
    write_mib_s: f64,
    read_mib_s: f64,
    read_method: ReadMethod,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadMethod {
    /// `O_DIRECT`: the page cache is bypassed for sure.
    Direct,
    /// Buffered read after `posix_fadvise(DONTNEED)` dropped the file's pages.
    AfterDontNeed,
    /// Buffered read; the page cache may have served some of it.
    Buffered,
}

impl ReadMethod {
    fn describe(self) -> &'static str {
        match self {
            Self::Direct => "read with O_DIRECT",
            Self::AfterDontNeed => {
                "buffered read after posix_fadvise(DONTNEED) (O_DIRECT refused by this filesystem)"
            }
            Self::Buffered => {
                "buffered read (O_DIRECT and fadvise refused; the page cache may have served it)"
            }
        }
    }
}

const IO_CHUNK: usize = 4 << 20;
const DIRECT_ALIGN: usize = 4096;

fn check_throughput(dir: &Path, writable: bool, config: &IoConfig) -> [Check; 2] {
    let write = Check::new("cache_write_throughput", Some(dir), "MiB/s");
    let read = Check::new("cache_read_throughput", Some(dir), "MiB/s");
    if !writable {
        let why = "the cache folder is not writable";
        return [write.skipped(why), read.skipped(why)];
    }
    if config.test_mib == 0 {
        let why = "io.test_mib is 0";
        return [write.skipped(why), read.skipped(why)];
    }
    match measure_io(dir, config.test_mib) {
        Ok(m) => [
            write.at_least(
                m.write_mib_s,
                config.min_write_mib_s,
                format!("wrote {} MiB sequentially, then fsync", config.test_mib),
            ),
            read.at_least(
                m.read_mib_s,
                config.min_read_mib_s,
                format!("{} MiB, {}", config.test_mib, m.read_method.describe()),
            ),
        ],
        Err(e) => {
            let reason = format!("the throughput test failed: {e}");
            [
                write.with(
                    Status::Fail,
                    None,
                    Some(config.min_write_mib_s),
                    reason.clone(),
                ),
                read.with(Status::Fail, None, Some(config.min_read_mib_s), reason),
            ]
        }
    }
}

/// Removes the test file however the measurement ends.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn measure_io(dir: &Path, mib: u64) -> std::io::Result<IoMeasure> {
    let path = dir.join(format!(".reel-preflight-io-{}.tmp", std::process::id()));
    let _guard = RemoveOnDrop(path.clone());
    let total = mib << 20;

    // Incompressible content, so a compressing or deduplicating filesystem cannot cheat.
    let mut chunk = vec![0u8; IO_CHUNK];
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for word in chunk.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        word.copy_from_slice(&x.to_le_bytes());
    }
    let started = Instant::now();
    let mut file = File::create(&path)?;
    let mut written = 0u64;
    while written < total {
        let n = (total - written).min(IO_CHUNK as u64) as usize;
        file.write_all(&chunk[..n])?;
        written += n as u64;
    }
    file.sync_all()?;
    let write_s = started.elapsed().as_secs_f64();

    let dropped = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).is_ok();
    drop(file);

    let started = Instant::now();
    let (read, method) = match read_direct(&path) {
        Ok(n) => (n, ReadMethod::Direct),
        Err(_) => {
            let mut file = File::open(&path)?;
            let mut buf = vec![0u8; IO_CHUNK];
            let mut n = 0u64;
            loop {
                let got = file.read(&mut buf)?;
                if got == 0 {
                    break;
                }
                n += got as u64;
            }
            let method = if dropped {
                ReadMethod::AfterDontNeed
            } else {
                ReadMethod::Buffered
            };
            (n, method)
        }
    };
    let read_s = started.elapsed().as_secs_f64();
    if read != total {
        return Err(std::io::Error::other(format!(
            "read back {read} of {total} bytes"
        )));
    }
    let mib = mib as f64;
    Ok(IoMeasure {
        write_mib_s: mib / write_s.max(1e-9),
        read_mib_s: mib / read_s.max(1e-9),
        read_method: method,
    })
}

/// Reads the whole file with `O_DIRECT`; fails at once where the filesystem refuses it
/// (tmpfs, some FUSE mounts), so the caller can fall back.
fn read_direct(path: &Path) -> std::io::Result<u64> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
        .open(path)?;
    let mut raw = vec![0u8; IO_CHUNK + DIRECT_ALIGN];
    let offset = raw.as_ptr().align_offset(DIRECT_ALIGN);
    let buf = &mut raw[offset..offset + IO_CHUNK];
    let mut n = 0u64;
    loop {
        let got = file.read(buf)?;
        if got == 0 {
            return Ok(n);
        }
        n += got as u64;
    }
}

fn check_manifest(path: Option<&Path>) -> (Check, Option<WorkingSet>) {
    let check = Check::new("manifest", path, "episodes");
    let Some(path) = path else {
        return (check.skipped("no manifest given"), None);
    };
    let manifest = match reel_manifest::Manifest::open(path) {
        Ok(m) => m,
        Err(e) => {
            return (
                check.with(
                    Status::Fail,
                    None,
                    None,
                    format!("cannot map the manifest: {e}"),
                ),
                None,
            );
        }
    };
    // The working set is the distinct objects the episodes live in.
    let set: Vec<(String, u64)> = match manifest.distinct_objects().and_then(|objects| {
        objects
            .iter()
            .map(|e| Ok((e.uri()?.to_owned(), e.bytes())))
            .collect()
    }) {
        Ok(set) => set,
        Err(e) => {
            return (
                check.with(Status::Fail, None, None, format!("unreadable row: {e}")),
                None,
            );
        }
    };
    let bytes: u64 = set.iter().map(|(_, b)| b).sum();
    let reason = format!(
        "mapped {} episodes in {} objects, {:.1} MiB working set",
        manifest.len(),
        set.len(),
        bytes as f64 / (1u64 << 20) as f64
    );
    (
        check.with(Status::Pass, Some(manifest.len() as f64), None, reason),
        Some(set),
    )
}

/// The coverage check and the working-set bytes not yet cached.
fn check_coverage(
    dirs: &[PathBuf],
    set: Option<&[(String, u64)]>,
    config: &CacheCoverageConfig,
) -> (Check, u64) {
    let check = Check::new("cache_coverage", dirs.first().map(PathBuf::as_path), "%");
    let Some(set) = set else {
        return (check.skipped("no usable manifest"), 0);
    };
    let total: u64 = set.iter().map(|(_, b)| b).sum();
    if dirs.is_empty() || !dirs.iter().all(|d| d.is_dir()) {
        return (check.skipped("no usable cache folder"), total);
    }
    let mut cache = reel_cache::CacheConfig::new(dirs[0].clone(), u64::MAX);
    cache.dirs = dirs.to_vec();
    cache.block_size = config.block_size;
    cache.page_size = config.page_size;
    let mut cached = 0u64;
    let mut whole = 0usize;
    for (path, bytes) in set {
        match reel_cache::cached_coverage(&cache, path) {
            Ok(Some(c)) => {
                cached += c.cached_bytes.min(*bytes);
                whole += usize::from(c.cached_blocks == c.blocks);
            }
            Ok(None) => {}
            Err(e) => return (check.with(Status::Fail, None, None, e.to_string()), total),
        }
    }
    let pct = if total == 0 {
        100.0
    } else {
        100.0 * cached as f64 / total as f64
    };
    let what = format!(
        "{whole} of {} objects wholly cached, {:.1} of {:.1} MiB",
        set.len(),
        cached as f64 / (1u64 << 20) as f64,
        total as f64 / (1u64 << 20) as f64
    );
    let (status, threshold, reason) = if pct < config.fail_below_pct {
        (
            Status::Fail,
            config.fail_below_pct,
            format!("{what}: {pct:.1} % is below {:.1} %", config.fail_below_pct),
        )
    } else if pct < config.warn_below_pct {
        (
            Status::Warn,
            config.warn_below_pct,
            format!(
                "{what}: {pct:.1} % is below {:.1} % (misses will be read from the remote store)",
                config.warn_below_pct
            ),
        )
    } else {
        (
            Status::Pass,
            config.warn_below_pct,
            format!("{what}: {pct:.1} %"),
        )
    };
    (
        check.with(status, Some(pct), Some(threshold), reason),
        total - cached,
    )
}

fn check_free_space(dir: &Path, missing_bytes: u64, config: &SpaceConfig) -> Check {
    let check = Check::new("cache_free_space", Some(dir), "MiB");
    let stat = match rustix::fs::statvfs(dir) {
        Ok(s) => s,
        Err(e) => return check.with(Status::Fail, None, None, format!("statvfs failed: {e}")),
    };
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let free = stat.f_bavail.saturating_mul(stat.f_frsize);
    let needed = missing_bytes + (config.headroom_mib << 20);
    check.at_least(
        mib(free),
        mib(needed),
        format!(
            "free for unprivileged users; needed: {:.1} MiB of working set not cached yet + {} MiB headroom",
            mib(missing_bytes),
            config.headroom_mib
        ),
    )
}

fn check_memory(config: &MemoryConfig) -> Check {
    let check = Check::new("memory_available", Some(Path::new("/proc/meminfo")), "MiB");
    let text = match std::fs::read_to_string("/proc/meminfo") {
        Ok(t) => t,
        Err(e) => {
            return check.with(
                Status::Fail,
                None,
                None,
                format!("cannot read /proc/meminfo: {e}"),
            );
        }
    };
    match mem_available_kib(&text) {
        Some(kib) => check.at_least(
            kib as f64 / 1024.0,
            config.min_available_mib as f64,
            "MemAvailable".into(),
        ),
        None => check.with(
            Status::Fail,
            None,
            None,
            "no MemAvailable line in /proc/meminfo".into(),
        ),
    }
}

/// `MemAvailable` in KiB from the text of `/proc/meminfo`.
fn mem_available_kib(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix("MemAvailable:")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

fn check_clock(config: &ClockConfig) -> [Check; 3] {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let wall = Check::new("clock_wall", None, "s since epoch").at_least(
        now,
        config.not_before_unix_s as f64,
        "system time".into(),
    );

    // A monotonic clock that does not move breaks every timeout and heartbeat.
    let pause = Duration::from_millis(20);
    let before = Instant::now();
    std::thread::sleep(pause);
    let advanced = before.elapsed();
    let monotonic = Check::new("clock_monotonic", None, "ms").at_least(
        advanced.as_secs_f64() * 1e3,
        pause.as_secs_f64() * 1e3,
        format!(
            "monotonic clock advance across a {} ms sleep",
            pause.as_millis()
        ),
    );

    let skew = match &config.reference_dir {
        None => Check::new("clock_skew", None, "s").skipped("no clock.reference_dir configured"),
        Some(dir) => check_skew(dir, config.max_skew_s),
    };
    [wall, monotonic, skew]
}

fn check_skew(dir: &Path, max_skew_s: f64) -> Check {
    let check = Check::new("clock_skew", Some(dir), "s");
    let path = dir.join(format!(".reel-preflight-clock-{}", std::process::id()));
    let _guard = RemoveOnDrop(path.clone());
    let result = (|| {
        let before = SystemTime::now();
        let mut file = File::create(&path)?;
        file.write_all(b"clock")?;
        file.sync_all()?;
        let after = SystemTime::now();
        let stamped = std::fs::metadata(&path)?.modified()?;
        let secs = |t: SystemTime| {
            t.duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0)
        };
        Ok::<_, std::io::Error>(secs(stamped) - (secs(before) + secs(after)) / 2.0)
    })();
    match result {
        Ok(skew) => {
            let status = if skew.abs() <= max_skew_s {
                Status::Pass
            } else {
                Status::Fail
            };
            let reason = format!(
                "file time stamped by the reference filesystem minus local time: {skew:+.3} s (limit ±{max_skew_s} s)"
            );
            check.with(status, Some(skew), Some(max_skew_s), reason)
        }
        Err(e) => check.with(
            Status::Fail,
            None,
            Some(max_skew_s),
            format!("cannot write a file there: {e}"),
        ),
    }
}

/// Query of `nvidia-smi --query-gpu`; the fallback drops the row-remapping fields, which
/// drivers before row remapping (pre-Ampere) do not know.
const GPU_QUERY: &str =
    "index,name,ecc.errors.uncorrected.volatile.total,remapped_rows.pending,remapped_rows.failure";
const GPU_QUERY_FALLBACK: &str = "index,name,ecc.errors.uncorrected.volatile.total";

fn check_gpus(config: &GpuConfig) -> Vec<Check> {
    let count = Check::new("gpu_count", None, "GPUs");
    let ecc = Check::new("gpu_ecc_uncorrected", None, "errors");
    let remap = Check::new("gpu_remapped_rows", None, "GPUs");
    let Some(smi) = find_on_path("nvidia-smi") else {
        let why = "nvidia-smi is not on PATH";
        return vec![count.skipped(why), ecc.skipped(why), remap.skipped(why)];
    };
    let timeout = Duration::from_secs_f64(config.timeout_s.max(0.1));
    let output = match query_gpus(&smi, GPU_QUERY, timeout) {
        Ok(out) => Ok(out),
        Err(first) => query_gpus(&smi, GPU_QUERY_FALLBACK, timeout).map_err(|_| first),
    };
    let gpus = match output {
        Ok(text) => parse_gpu_rows(&text),
        Err(e) => {
            let reason = format!("{} failed: {e}", smi.display());
            return vec![
                count.with(
                    Status::Fail,
                    None,
                    config.expected_count.map(f64::from),
                    reason.clone(),
                ),
                ecc.skipped("no GPU data"),
                remap.skipped("no GPU data"),
            ];
        }
    };

    let n = gpus.len() as f64;
    let count = match config.expected_count {
        Some(expected) => count.at_least(n, f64::from(expected), "devices nvidia-smi lists".into()),
        None if gpus.is_empty() => count.with(
            Status::Warn,
            Some(0.0),
            None,
            "nvidia-smi lists no device".into(),
        ),
        None => count.with(
            Status::Pass,
            Some(n),
            None,
            format!("{} listed: {}", gpus.len(), gpu_names(&gpus)),
        ),
    };

    let reported: Vec<_> = gpus
        .iter()
        .filter_map(|g| g.ecc_uncorrected.map(|e| (g.index, e)))
        .collect();
    let ecc = if reported.is_empty() {
        ecc.skipped("no GPU reports ECC counters (ECC off or unsupported)")
    } else {
        let total: u64 = reported.iter().map(|(_, e)| e).sum();
        let worst: Vec<String> = reported
            .iter()
            .filter(|(_, e)| *e > 0)
            .map(|(i, e)| format!("GPU {i}: {e}"))
            .collect();
        let status = if total > config.max_uncorrected_ecc {
            Status::Fail
        } else {
            Status::Pass
        };
        let reason = format!(
            "uncorrected volatile ECC errors over {} GPUs: {total} (limit {}){}",
            reported.len(),
            config.max_uncorrected_ecc,
            if worst.is_empty() {
                String::new()
            } else {
                format!("; {}", worst.join(", "))
            }
        );
        ecc.with(
            status,
            Some(total as f64),
            Some(config.max_uncorrected_ecc as f64),
            reason,
        )
    };

    let known: Vec<_> = gpus
        .iter()
        .filter(|g| g.remap_pending.is_some() || g.remap_failure.is_some())
        .collect();
    let remap = if known.is_empty() {
        remap.skipped("no GPU reports row remapping (pre-Ampere, or the driver does not expose it)")
    } else {
        let bad: Vec<String> = known
            .iter()
            .filter(|g| g.remap_pending == Some(true) || g.remap_failure == Some(true))
            .map(|g| format!("GPU {}", g.index))
            .collect();
        if bad.is_empty() {
            remap.with(
                Status::Pass,
                Some(0.0),
                Some(0.0),
                format!("no pending or failed row remapping on {} GPUs", known.len()),
            )
        } else {
            remap.with(
                Status::Fail,
                Some(bad.len() as f64),
                Some(0.0),
                format!(
                    "row remapping pending or failed (the GPU needs a reset or repair): {}",
                    bad.join(", ")
                ),
            )
        }
    };
    vec![count, ecc, remap]
}

/// One row of `nvidia-smi --query-gpu` output.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GpuRow {
    index: u32,
    name: String,
    ecc_uncorrected: Option<u64>,
    remap_pending: Option<bool>,
    remap_failure: Option<bool>,
}

fn gpu_names(gpus: &[GpuRow]) -> String {
    gpus.iter()
        .map(|g| format!("{} {}", g.index, g.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses `--format=csv,noheader,nounits` rows of [`GPU_QUERY`] or [`GPU_QUERY_FALLBACK`].
/// Fields a GPU does not support read `[N/A]` or `[Not Supported]` and become `None`.
fn parse_gpu_rows(text: &str) -> Vec<GpuRow> {
    let known = |s: &str| {
        let s = s.trim();
        (!s.is_empty() && !s.starts_with('[') && s != "N/A").then(|| s.to_owned())
    };
    let yes_no = |s: Option<&str>| {
        s.and_then(known)
            .and_then(|v| match v.to_ascii_lowercase().as_str() {
                "yes" | "1" => Some(true),
                "no" | "0" => Some(false),
                _ => None,
            })
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            Some(GpuRow {
                index: fields.first()?.parse().ok()?,
                name: fields.get(1).copied().unwrap_or_default().to_owned(),
                ecc_uncorrected: fields
                    .get(2)
                    .copied()
                    .and_then(known)
                    .and_then(|v| v.parse().ok()),
                remap_pending: yes_no(fields.get(3).copied()),
                remap_failure: yes_no(fields.get(4).copied()),
            })
        })
        .collect()
}

fn query_gpus(smi: &Path, fields: &str, timeout: Duration) -> Result<String, String> {
    let mut child = Command::new(smi)
        .arg(format!("--query-gpu={fields}"))
        .arg("--format=csv,noheader,nounits")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {:.0} s", timeout.as_secs_f64()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let text = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        Err(format!("{} ({})", text.trim(), output.status))
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests fail loudly by design.

    use super::*;

    #[test]
    fn gpu_rows_parse_with_unsupported_fields() {
        let text = "0, NVIDIA H200, 0, No, No\n1, NVIDIA H200, 3, Yes, No\n2, Tesla V100-SXM2-32GB, [N/A], [Not Supported], [Not Supported]\n";
        let rows = parse_gpu_rows(text);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1].ecc_uncorrected, Some(3));
        assert_eq!(rows[1].remap_pending, Some(true));
        assert_eq!(rows[2].name, "Tesla V100-SXM2-32GB");
        assert_eq!(rows[2].ecc_uncorrected, None);
        assert_eq!(rows[2].remap_failure, None);
        // The fallback query has three fields.
        let short = parse_gpu_rows("0, NVIDIA A100-SXM4-80GB, 0\n");
        assert_eq!(short[0].remap_pending, None);
    }

    #[test]
    fn mem_available_is_read_in_kib() {
        let text = "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   21000000 kB\n";
        assert_eq!(mem_available_kib(text), Some(21_000_000));
        assert_eq!(mem_available_kib("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn config_reads_partial_toml_and_refuses_unknown_fields() {
        let config: PreflightConfig =
            toml::from_str("[io]\nmin_write_mib_s = 50.0\n[gpu]\nexpected_count = 8\n").unwrap();
        assert_eq!(config.io.min_write_mib_s, 50.0);
        assert_eq!(config.io.test_mib, IoConfig::default().test_mib);
        assert_eq!(config.gpu.expected_count, Some(8));
        assert!(toml::from_str::<PreflightConfig>("[io]\nmin_write = 1\n").is_err());
    }
}
