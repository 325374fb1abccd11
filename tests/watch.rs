//! `forktrail watch`: logs written line by line, a branch among the new lines, a line
//! half written, a grown Codex rollout, and a restart end as one import of the final
//! files; a half-written line is never imported.

mod common;

use common::*;
use forktrail::{Store, TranscriptOptions};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// A `forktrail watch` of `dir` into the store at `store`, and its reports (one JSON
/// object per import) as they come.
struct Watch {
    child: Child,
    reports: Receiver<Value>,
}

impl Watch {
    fn start(store: &Path, dir: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_forktrail"))
            .arg("--store")
            .arg(store)
            .args(["watch", "--json", "--settle-ms", "150"])
            .arg(dir)
            .env_remove("FORKTRAIL_STORE")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, reports) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    if tx.send(value).is_err() {
                        break;
                    }
                }
            }
        });
        Watch { child, reports }
    }

    /// Waits for reports until they add up to `turns` turns (failing after a while).
    fn until_turns(&self, mut turns: u64) {
        while turns > 0 {
            let report = self
                .reports
                .recv_timeout(Duration::from_secs(30))
                .expect("watch imported nothing for 30 s");
            turns = turns
                .checked_sub(report["turns"].as_u64().unwrap())
                .unwrap_or_else(|| panic!("more turns than written: {report}"));
        }
    }

    /// Asserts nothing is imported for a while (longer than the settle time).
    fn quiet(&self) {
        match self.reports.recv_timeout(Duration::from_millis(900)) {
            Err(RecvTimeoutError::Timeout) => {}
            other => panic!("expected no import, got {other:?}"),
        }
    }

    fn stop(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// A Claude Code message line.
fn cc(uuid: &str, parent: Option<&str>, text: &str) -> String {
    let role = if uuid.starts_with('u') {
        "user"
    } else {
        "assistant"
    };
    json!({"type": role, "uuid": uuid, "parentUuid": parent, "sessionId": "w1",
           "message": {"role": role, "content": text}})
    .to_string()
        + "\n"
}

fn append(path: &Path, text: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    file.write_all(text.as_bytes()).unwrap();
    file.flush().unwrap();
}

fn codex_rollout() -> String {
    std::fs::read_to_string(format!(
        "{}/tests/data/codex/rollout.jsonl",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// What importing `files` once, whole, into a fresh store gives.
fn imported_once(files: &[PathBuf]) -> std::collections::BTreeMap<String, String> {
    let store = Store::in_memory().unwrap();
    for file in files {
        store
            .import_path(file, None, &TranscriptOptions::default())
            .unwrap();
    }
    shape(&store)
}

#[test]
fn logs_written_line_by_line_end_as_one_import_of_the_final_files() {
    let temp = tempfile::tempdir().unwrap();
    let logs = temp.path().join("projects");
    std::fs::create_dir_all(logs.join("-home-dev-app")).unwrap();
    std::fs::create_dir_all(logs.join("codex")).unwrap();
    let log = logs.join("-home-dev-app/w1.jsonl");
    let rollout = logs.join("codex/rollout-w.jsonl");
    let store = temp.path().join("store");
    let watch = Watch::start(&store, &logs);

    append(
        &log,
        &(cc("u1", None, "Plan the release.") + &cc("a1", Some("u1"), "Three steps.")),
    );
    watch.until_turns(2);
    // A line half written is left until its newline comes.
    let third = cc("u2", Some("a1"), "Start with the changelog.");
    let (head, tail) = third.split_at(25);
    append(&log, head);
    watch.quiet();
    append(&log, tail);
    watch.until_turns(1);
    // Among the new lines, an answer and then another answer to the same prompt: a
    // branch that starts in the lines this import brings.
    append(
        &log,
        &(cc("a2", Some("u2"), "Done.") + &cc("a2b", Some("u2"), "Done, with links.")),
    );
    watch.until_turns(2);

    // A Codex rollout, written in two parts.
    let text = codex_rollout();
    let lines: Vec<&str> = text.lines().collect();
    append(&rollout, &(lines[..6].join("\n") + "\n"));
    watch.until_turns(3);
    append(&rollout, &(lines[6..].join("\n") + "\n"));
    watch.until_turns(7);
    watch.stop();

    // A restart over the same files writes nothing more; one more line goes in.
    let watch = Watch::start(&store, &logs);
    append(&log, &cc("u3", Some("a2b"), "Thanks."));
    watch.until_turns(1);
    watch.quiet();
    watch.stop();

    let watched = Store::open(&store).unwrap();
    assert_eq!(shape(&watched), imported_once(&[log, rollout]));
    assert!(watched.verify(None).unwrap().problems.is_empty());
}

#[test]
fn watch_once_imports_the_default_folders_under_home() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join(".claude/projects/-home-dev-app");
    std::fs::create_dir_all(&project).unwrap();
    append(&project.join("w1.jsonl"), &cc("u1", None, "Hello."));
    // A line not finished when the watch runs stays out.
    append(
        &project.join("w1.jsonl"),
        "{\"type\":\"assistant\",\"uuid\":\"a1\"",
    );
    let store = home.path().join("store");
    let out = Command::new(env!("CARGO_BIN_EXE_forktrail"))
        .arg("--store")
        .arg(&store)
        .args(["watch", "--once"])
        .env("HOME", home.path())
        .env_remove("FORKTRAIL_STORE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("imported w1 from "), "{stdout}");
    let store = Store::open(&store).unwrap();
    assert_eq!(store.info(&sid("w1")).unwrap().length, 1);

    // No folder to watch: said.
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_forktrail"))
        .arg("--store")
        .arg(empty.path().join("store"))
        .args(["watch", "--once"])
        .env("HOME", empty.path())
        .env_remove("FORKTRAIL_STORE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("name the folders to watch"), "{stderr}");
}
