//! A local S3-compatible server for tests and benchmarks of S3 paths (feature
//! `test-support`), and a proxy that makes it behave like a distant one.
//!
//! [`S3Server`] starts `s3s-fs` on 127.0.0.1 with a free port, serving a temporary folder.
//! The binary is looked up in `$REEL_S3S_FS`, then `$HOME/.cache/reel/tools/bin/s3s-fs`,
//! then `PATH`; [`python`] finds the test venv's Python the same way. A missing program
//! is an error, so the tests that need it fail instead of skipping. [`CloudProxy`] sits in
//! front of it with a per-request latency and a per-connection bandwidth cap.
//!
//! S3 has conditional writes (`If-None-Match: *` on PUT: create only if absent), which
//! Delta Lake commits rely on; `s3s-fs` checks the condition and then writes, so two
//! such PUTs at once could both succeed. The server is therefore reached through a
//! [`CloudProxy`] at full speed, which lets one conditional PUT through at a time (each
//! until its response starts): the condition then holds as on AWS S3.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::{Error, Result, Store, StoreOptions};

const ACCESS_KEY: &str = "reel-test";
const SECRET_KEY: &str = "reel-test-secret";

/// A running `s3s-fs`; stopped and its folder removed on drop.
#[derive(Debug)]
pub struct S3Server {
    child: Child,
    /// Where `s3s-fs` listens, behind `front`.
    upstream: u16,
    /// What clients connect to: conditional PUTs one at a time.
    front: CloudProxy,
    root: tempfile::TempDir,
}

/// An external program the tests need: `$env_var` if set, else `~/.cache/reel/<cached>`
/// (where `scripts/setup.sh` installs it), else `name` on `PATH` when given. Missing is an
/// error that says how to install it: a test whose dependency is absent fails, it never
/// passes by skipping.
pub fn external_program(env_var: &str, cached: &str, name: Option<&str>) -> Result<PathBuf> {
    let missing = |looked: String| Error::Io {
        name: looked,
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("not installed: run scripts/setup.sh (or set {env_var})"),
        ),
    };
    if let Some(path) = std::env::var_os(env_var) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(missing(format!("${env_var} = {}", path.display())))
        };
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let installed = home.join(".cache/reel").join(cached);
    if installed.is_file() {
        return Ok(installed);
    }
    let on_path = name.and_then(|name| {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    on_path.ok_or_else(|| missing(installed.display().to_string()))
}

/// The `s3s-fs` binary: `$REEL_S3S_FS`, `~/.cache/reel/tools/bin/s3s-fs`, or `PATH`.
pub fn s3s_fs_binary() -> Result<PathBuf> {
    external_program("REEL_S3S_FS", "tools/bin/s3s-fs", Some("s3s-fs"))
}

/// The Python of Reel's test venv, which has the independent readers (`mcap`, `pyarrow`,
/// `polars`, ...): `$REEL_PYTHON` or `~/.cache/reel/venv/bin/python`. A system Python
/// lacks those packages, so `PATH` is not searched.
pub fn python() -> Result<PathBuf> {
    external_program("REEL_PYTHON", "venv/bin/python", None)
}

/// The Python of LeRobot's venv (LeRobot 0.6.1, which needs Python 3.12; made by
/// `scripts/setup.sh` from `benches/peers/requirements-lerobot.txt`), where tests let
/// LeRobot itself read what Reel writes: `$REEL_LEROBOT_PYTHON` or
/// `~/.cache/reel/venv-lerobot/bin/python`.
pub fn lerobot_python() -> Result<PathBuf> {
    external_program("REEL_LEROBOT_PYTHON", "venv-lerobot/bin/python", None)
}

impl S3Server {
    /// Starts a server with an empty bucket named `bucket`; fails when `s3s-fs` is not
    /// installed ([`s3s_fs_binary`]).
    pub fn start(bucket: &str) -> Result<Self> {
        let binary = s3s_fs_binary()?;
        let io_err = |source| Error::Io {
            name: binary.display().to_string(),
            source,
        };
        let root = tempfile::tempdir().map_err(io_err)?;
        std::fs::create_dir(root.path().join(bucket)).map_err(io_err)?;
        // Ask the OS for a free port; the tiny window before s3s-fs binds it is acceptable in tests.
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map_err(io_err)?
            .port();
        let child = spawn(&binary, port, root.path())?;
        let front = CloudProxy::start(port, f64::INFINITY, Duration::ZERO)?;
        Ok(Self {
            child,
            upstream: port,
            front,
            root,
        })
    }

    /// Kills the server (SIGKILL), as an outage would: its folder stays.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same port and folder, after [`S3Server::kill`].
    pub fn restart(&mut self) -> Result<()> {
        self.kill();
        self.child = spawn(&s3s_fs_binary()?, self.upstream, self.root.path())?;
        Ok(())
    }

    /// The store URI of `prefix` in `bucket` on this server.
    pub fn uri(&self, bucket: &str, prefix: &str) -> String {
        format!(
            "s3://{bucket}/{prefix}?endpoint=http://127.0.0.1:{}&region=us-east-1",
            self.front.port
        )
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.front.port
    }

    /// Credentials accepted by this server.
    pub fn options(&self) -> StoreOptions {
        StoreOptions {
            access_key_id: Some(ACCESS_KEY.to_owned()),
            secret_access_key: Some(SECRET_KEY.to_owned()),
            retries: None,
        }
    }

    /// Opens `prefix` in `bucket` as a store.
    pub fn store(&self, bucket: &str, prefix: &str) -> Result<Store> {
        Store::open_with(&self.uri(bucket, prefix), &self.options())
    }

    /// Opens `prefix` in `bucket` as a store reached through `proxy`.
    pub fn store_through(&self, proxy: &CloudProxy, bucket: &str, prefix: &str) -> Result<Store> {
        let uri = format!(
            "s3://{bucket}/{prefix}?endpoint=http://127.0.0.1:{}&region=us-east-1",
            proxy.port
        );
        Store::open_with(&uri, &self.options())
    }

    /// The local folder served (bucket folders inside).
    pub fn root(&self) -> &Path {
        self.root.path()
    }
}

/// Runs `s3s-fs` on `port` serving `root`, and waits until it listens.
fn spawn(binary: &Path, port: u16, root: &Path) -> Result<Child> {
    let io_err = |source| Error::Io {
        name: binary.display().to_string(),
        source,
    };
    let mut child = Command::new(binary)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(io_err)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io_err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "s3s-fs did not start listening within 10 s",
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(child)
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback TCP proxy in front of a local server that delays each request by a fixed
/// latency and caps each connection's download rate: one connection to a cloud store,
/// emulated. (opendal's throttle layer limits writes only, so it cannot model a slow read
/// path.) Stops when dropped.
#[derive(Debug)]
pub struct CloudProxy {
    // Runs the proxy's tasks; dropping it stops them.
    _runtime: tokio::runtime::Runtime,
    port: u16,
    faults: Arc<Faults>,
}

/// Held by the connection whose conditional PUT (`If-None-Match`) is with the server, until
/// its response starts.
type CreateLock = Arc<tokio::sync::Mutex<()>>;

/// Requests a [`CloudProxy`] fails on purpose: every `every`-th request's connection is
/// closed before the request reaches the server, as a store dropping connections does;
/// and, once asked ([`CloudProxy::garble_once_then_fail`]), one response garbled and
/// every later request failed.
#[derive(Debug, Default)]
struct Faults {
    every: u64,
    seen: AtomicU64,
    failed: AtomicU64,
    /// [`SERVING`], [`GARBLE_NEXT`] or [`DOWN`].
    mode: AtomicU8,
}

const SERVING: u8 = 0;
const GARBLE_NEXT: u8 = 1;
const DOWN: u8 = 2;

impl Faults {
    /// Whether to fail the request that just arrived.
    fn fail_next(&self) -> bool {
        let n = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        let fail = (self.every > 0 && n.is_multiple_of(self.every))
            || self.mode.load(Ordering::SeqCst) == DOWN;
        if fail {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        fail
    }

    /// Whether the response starting now is the one to garble (the store goes down
    /// behind it).
    fn garble_this_response(&self) -> bool {
        self.mode
            .compare_exchange(GARBLE_NEXT, DOWN, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
}

impl CloudProxy {
    /// Proxies 127.0.0.1:`upstream` on a free port, adding `latency` before each request
    /// reaches the server and capping each connection at `bytes_per_s`.
    pub fn start(upstream: u16, bytes_per_s: f64, latency: Duration) -> Result<Self> {
        Self::start_with_faults(upstream, bytes_per_s, latency, 0)
    }

    /// Proxies 127.0.0.1:`upstream` at full speed, closing the connection of every
    /// `fail_every`-th request before it reaches the server (a share of `1/fail_every`
    /// failed requests), to test retries.
    pub fn flaky(upstream: u16, fail_every: u64) -> Result<Self> {
        Self::start_with_faults(upstream, f64::INFINITY, Duration::ZERO, fail_every)
    }

    /// Requests failed on purpose so far.
    pub fn failed_requests(&self) -> u64 {
        self.faults.failed.load(Ordering::Relaxed)
    }

    /// The body of the next response to start comes back with every byte flipped (its
    /// length and headers intact), and every request after it fails (its connection
    /// closed): a store that served bad bytes once, then became unreachable.
    pub fn garble_once_then_fail(&self) {
        self.faults.mode.store(GARBLE_NEXT, Ordering::SeqCst);
    }

    /// Serves every request faithfully again.
    pub fn heal(&self) {
        self.faults.mode.store(SERVING, Ordering::SeqCst);
    }

    fn start_with_faults(
        upstream: u16,
        bytes_per_s: f64,
        latency: Duration,
        fail_every: u64,
    ) -> Result<Self> {
        let io_err = |source| Error::Io {
            name: format!("proxy to 127.0.0.1:{upstream}"),
            source,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(io_err)?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .map_err(io_err)?;
        let port = listener.local_addr().map_err(io_err)?.port();
        let faults = Arc::new(Faults {
            every: fail_every,
            ..Faults::default()
        });
        let shared = Arc::clone(&faults);
        let creates = CreateLock::default();
        runtime.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let faults = Arc::clone(&shared);
                tokio::spawn(proxy_connection(
                    client,
                    upstream,
                    bytes_per_s,
                    latency,
                    faults,
                    Arc::clone(&creates),
                ));
            }
        });
        Ok(Self {
            _runtime: runtime,
            port,
            faults,
        })
    }

    /// The port the proxy listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }
}

async fn proxy_connection(
    client: tokio::net::TcpStream,
    upstream: u16,
    bytes_per_s: f64,
    latency: Duration,
    faults: Arc<Faults>,
    creates: CreateLock,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // The create lock while this connection's conditional PUT is with the server. A
    // client sends its next request only after a response, so a request starts a read.
    let held: Arc<std::sync::Mutex<Option<tokio::sync::OwnedMutexGuard<()>>>> = Arc::default();
    let held_by_request = Arc::clone(&held);
    let upstream = SocketAddr::from((Ipv4Addr::LOCALHOST, upstream));
    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    let shared_faults = Arc::clone(&faults);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 << 10];
        while let Ok(n @ 1..) = client_rx.read(&mut buf).await {
            if faults.fail_next() {
                // Dropping both halves closes the connection, the request unsent.
                return;
            }
            if is_conditional_put(&buf[..n]) {
                let guard = Arc::clone(&creates).lock_owned().await;
                if let Ok(mut slot) = held_by_request.lock() {
                    *slot = Some(guard);
                }
            }
            tokio::time::sleep(latency).await;
            if server_tx.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_tx.shutdown().await;
    });
    let mut buf = vec![0u8; 64 << 10];
    let mut next = tokio::time::Instant::now();
    // Body bytes of a garbled response still to flip.
    let mut garbling = 0usize;
    while let Ok(n @ 1..) = server_rx.read(&mut buf).await {
        let mut from = 0;
        if garbling == 0
            && buf[..n].starts_with(b"HTTP/1.")
            && let Ok(mut slot) = held.lock()
        {
            // The server has written the object (or refused to): others may go on.
            slot.take();
        }
        if garbling == 0 && buf[..n].starts_with(b"HTTP/1.") && shared_faults.garble_this_response()
        {
            (from, garbling) = body_of(&buf[..n]);
        }
        let end = n.min(from + garbling);
        buf[from..end].iter_mut().for_each(|b| *b ^= 0xa5);
        garbling -= end - from;
        if client_tx.write_all(&buf[..n]).await.is_err() {
            break;
        }
        // A token bucket without burst credit (idle time is not saved up). Tokio's timer
        // ticks in milliseconds, so sleep only once a few milliseconds of debt have built
        // up, or short sleeps would round up and undercut the rate.
        let now = tokio::time::Instant::now();
        if bytes_per_s.is_infinite() {
            continue;
        }
        next = next.max(now) + Duration::from_secs_f64(n as f64 / bytes_per_s);
        if next > now + Duration::from_millis(4) {
            tokio::time::sleep_until(next).await;
        }
    }
    let _ = client_tx.shutdown().await;
}

/// Whether `bytes`, the start of a request, is a PUT with `If-None-Match` among its
/// headers.
fn is_conditional_put(bytes: &[u8]) -> bool {
    if !bytes.starts_with(b"PUT ") {
        return false;
    }
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end])
        .to_ascii_lowercase()
        .contains("\r\nif-none-match:")
}

/// Where the body of the HTTP response starting `bytes` begins, and its length (its
/// `Content-Length`; 0 where the headers are not all in `bytes` or do not say).
fn body_of(bytes: &[u8]) -> (usize, usize) {
    let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (0, 0);
    };
    let headers = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
    let length = headers
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    (end + 4, length)
}

/// What the scale benches share: their `--name value` arguments and the peak memory of
/// the process measuring one size.
pub mod bench {
    /// The value after `name` in `args`.
    pub fn arg(args: &[String], name: &str) -> Option<String> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    }

    /// The comma-separated sizes after `name`, else `default`.
    pub fn sizes(
        args: &[String],
        name: &str,
        default: &str,
    ) -> Result<Vec<u64>, std::num::ParseIntError> {
        arg(args, name)
            .unwrap_or_else(|| default.into())
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::parse)
            .collect()
    }

    /// This process's peak resident memory (VmHWM), MiB.
    pub fn peak_rss_mib() -> f64 {
        status_mib("VmHWM:")
    }

    /// A memory line of `/proc/self/status` (`VmHWM:`, `RssAnon:`), MiB; NaN where absent.
    pub fn status_mib(line: &str) -> f64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with(line))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            })
            .map_or(f64::NAN, |kib| kib / 1024.0)
    }
}
