//! A throwaway PostgreSQL for tests and benchmarks: initdb into a temporary folder,
//! started on a free loopback port with `wal_level = logical`, stopped on drop.
//!
//! The binaries come from `$REEL_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`
//! (Debian's `postgresql` package, which `scripts/setup.sh` installs). Missing is an
//! error: a test that needs the database fails without it, it never skips. PostgreSQL
//! refuses to run as root, so as root the server runs as the `postgres` user.

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The password of the `postgres` user of a test server (host connections use SCRAM).
pub const PASSWORD: &str = "reel-test";

/// A running throwaway PostgreSQL.
#[derive(Debug)]
pub struct PgServer {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
}

type Result<T> = std::result::Result<T, String>;

/// PostgreSQL's programs: `$REEL_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`.
pub fn pg_bin() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("REEL_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| format!("/usr/lib/postgresql: {e}: PostgreSQL is not installed; run scripts/setup.sh (or set REEL_PG_BIN)"))?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).ok_or_else(|| {
        "no /usr/lib/postgresql/*/bin/initdb: run scripts/setup.sh (or set REEL_PG_BIN)".into()
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl PgServer {
    /// Starts a server with `wal_level = logical`.
    pub fn start() -> Result<Self> {
        Self::start_with_wal_level("logical")
    }

    /// Starts a server with the given `wal_level` (`replica` shows a misconfigured one).
    pub fn start_with_wal_level(wal_level: &str) -> Result<Self> {
        let bin = pg_bin()?;
        let dir = tempfile::Builder::new()
            .prefix("reel-pg-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let as_postgres = is_root();
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let server = Self {
            bin,
            dir,
            port,
            as_postgres,
        };
        std::fs::write(server.dir.path().join("pw"), PASSWORD).map_err(|e| e.to_string())?;
        if as_postgres {
            server.run("chown", &["-R", "postgres", &server.path_str(".")], false)?;
        }
        let data = server.path_str("data");
        server.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--pwfile",
                &server.path_str("pw"),
                "--no-sync",
            ],
            true,
        )?;
        let options = format!(
            "-c wal_level={wal_level} -c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=off -c max_wal_senders=20 -c max_replication_slots=20",
            server.path_str(".")
        );
        server.run(
            "pg_ctl",
            &[
                "-D",
                &data,
                "-l",
                &server.path_str("log"),
                "-w",
                "-t",
                "60",
                "start",
                "-o",
                &options,
            ],
            true,
        )?;
        Ok(server)
    }

    fn path_str(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    fn run(&self, program: &str, args: &[&str], postgres_tool: bool) -> Result<()> {
        let program_path = if postgres_tool {
            self.bin.join(program)
        } else {
            Path::new(program).to_owned()
        };
        let mut command = if self.as_postgres && postgres_tool {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program_path);
            c
        } else {
            Command::new(&program_path)
        };
        let out = command
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", program_path.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} failed: {}{}",
                program_path.display(),
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
            ));
        }
        Ok(())
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// URL of database `db` as user `postgres`.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgresql://postgres:{PASSWORD}@127.0.0.1:{}/{db}",
            self.port
        )
    }

    /// Creates database `db` with Reel's metadata schema ([`crate::SCHEMA_SQL`]) and
    /// returns its URL.
    pub fn metadata_database(&self, db: &str) -> Result<String> {
        let mut admin =
            crate::Database::connect(&self.url("postgres")).map_err(|e| e.to_string())?;
        admin
            .query(&format!("CREATE DATABASE {}", crate::database::ident(db)))
            .map_err(|e| e.to_string())?;
        let url = self.url(db);
        let mut session = crate::Database::connect(&url).map_err(|e| e.to_string())?;
        for statement in crate::SCHEMA_SQL.split(';') {
            let code = |l: &str| !l.trim().is_empty() && !l.trim().starts_with("--");
            if statement.lines().any(code) {
                session.query(statement).map_err(|e| e.to_string())?;
            }
        }
        Ok(url)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.path_str("data");
        let _ = self.run("pg_ctl", &["-D", &data, "-m", "immediate", "stop"], true);
    }
}
