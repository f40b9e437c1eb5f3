//! Checks of the cache folders' disks: writable, fast enough for sequential reads and
//! writes, and with room for the part of the working set not cached yet.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Instant;

use super::RemoveOnDrop;
use super::config::{IoConfig, SpaceConfig};
use super::report::{Check, Status};

pub(super) fn check_writable(dir: &Path) -> Check {
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

pub(super) fn check_throughput(dir: &Path, writable: bool, config: &IoConfig) -> [Check; 2] {
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

pub(super) fn check_free_space(dir: &Path, missing_bytes: u64, config: &SpaceConfig) -> Check {
    let check = Check::new("cache_free_space", Some(dir), "MiB");
    // The same free space reel-warm's default capacity starts from.
    let free = match reel_cache::free_bytes(dir) {
        Ok(free) => free,
        Err(e) => return check.with(Status::Fail, None, None, format!("statvfs failed: {e}")),
    };
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
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
