//! The `forktrail` binary as a user runs it: commands on a store of their own, a
//! `forktrail serve` process, and a command that must succeed.

use super::Reaped;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// `forktrail --store STORE ARGS`, with no store named by `FORKTRAIL_STORE`, and the
/// catalogs of shared stores kept under the tests' temp directory, not the user's cache.
pub fn forktrail(store: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_forktrail"));
    command
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("FORKTRAIL_STORE")
        .env(
            "FORKTRAIL_CACHE_DIR",
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cache"),
        );
    command
}

/// Runs `command` to its end, which must be a success (else its stderr is shown under
/// `what`); returns its output.
pub fn succeeds(command: &mut Command, what: &str) -> Output {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Starts `command`, a `forktrail serve`, its stdout piped and its stderr dropped, and
/// waits for its first line, which must say where it serves; returns the process (killed
/// when dropped) and its base URL (`http://HOST:PORT`).
pub fn serving(command: &mut Command) -> (Reaped, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let base = first
        .split_once("serving on ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("not serving: {first:?}"))
        .to_string();
    (Reaped(child), base)
}

/// The binary on a store directory in a temp dir (created by the first command that
/// writes), run from the checkout so that relative paths such as `queries/…` resolve.
#[cfg(feature = "rocksdb")]
pub struct Cli {
    pub dir: tempfile::TempDir,
    pub store: PathBuf,
}

#[cfg(feature = "rocksdb")]
impl Default for Cli {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "rocksdb")]
impl Cli {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        Self { dir, store }
    }

    /// The temp dir the store is in, for files a test writes beside it.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The command for `args`, standard input empty, no model endpoint from the
    /// environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = forktrail(&self.store, args);
        command
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env_remove("OPENAI_BASE_URL")
            .stdin(Stdio::null());
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    pub fn run_with_stdin(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        child.wait_with_output().unwrap()
    }

    /// Runs a command that must succeed; returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_with_stderr(args).0
    }

    /// Runs a command that must succeed; returns its stdout and stderr.
    pub fn ok_with_stderr(&self, args: &[&str]) -> (String, String) {
        let out = self.run(args);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(out.status.success(), "{args:?} failed: {stderr}");
        (String::from_utf8(out.stdout).unwrap(), stderr)
    }

    pub fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }

    /// Runs a command that must fail without printing data or changing the store;
    /// returns its stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        self.fails_with_stdin(args, b"")
    }

    pub fn fails_with_stdin(&self, args: &[&str], stdin: &[u8]) -> String {
        let before = self.quads();
        let out = self.run_with_stdin(args, stdin);
        assert!(!out.status.success(), "{args:?} should have failed");
        assert!(out.stdout.is_empty(), "{args:?} printed data on failure");
        assert_eq!(before, self.quads(), "{args:?} changed the store");
        String::from_utf8(out.stderr).unwrap()
    }

    /// The store, opened for the moment (no command may hold it meanwhile).
    pub fn open(&self) -> forktrail::Store {
        forktrail::Store::open(&self.store).unwrap()
    }

    /// Every quad of the store, none before it exists.
    pub fn quads(&self) -> Vec<String> {
        if !self.store.exists() {
            return Vec::new();
        }
        super::quads(&self.open())
    }

    /// The store as `forktrail export --format nquads` writes it, its lines sorted;
    /// empty before the store exists.
    pub fn snapshot(&self) -> String {
        if !self.store.exists() {
            return String::new();
        }
        let out = self.run(&["export", "--format", "nquads"]);
        assert!(
            out.status.success(),
            "snapshot: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
        lines.sort();
        lines.join("\n")
    }
}
