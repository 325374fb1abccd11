//! `forktrail watch`: logs written line by line, a branch among the new lines, a line
//! half written, a grown Codex rollout, and a restart end as one import of the final
//! files; a half-written line is never imported. What is read stays inside the folders
//! watched (links to `/`, loops, logs elsewhere, folders too deep), and a line too long
//! or not UTF-8 is skipped and reported while the rest of its log goes in, in every
//! format read line by line.

use crate::common;

use common::cli::{forktrail, succeeds};
use common::*;
use forktrail::{ImportFormat, Store, TranscriptOptions};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
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
        let mut child = forktrail(store, &["watch", "--json", "--settle-ms", "150"])
            .arg(dir)
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
    cc_of("w1", uuid, parent, text)
}

/// A Claude Code message line of session `session`.
fn cc_of(session: &str, uuid: &str, parent: Option<&str>, text: &str) -> String {
    let role = if uuid.starts_with('u') {
        "user"
    } else {
        "assistant"
    };
    json!({"type": role, "uuid": uuid, "parentUuid": parent, "sessionId": session,
           "message": {"role": role, "content": text}})
    .to_string()
        + "\n"
}

/// A `forktrail watch --once --json` of `dirs` into `store`, given a minute at most (a
/// watch that walks out of its folders may never end): its reports and its stderr.
fn watch_once(store: &Path, dirs: &[&Path], extra: &[&str]) -> (Vec<Value>, String) {
    let mut child = forktrail(store, &["watch", "--once", "--json"])
        .args(extra)
        .args(dirs)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (stdout, stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap());
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("watch --once did not finish within a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(child.wait().unwrap().success());
    let reports = out
        .join()
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (reports, err.join().unwrap())
}

fn session_ids(store: &Store) -> Vec<String> {
    let mut ids: Vec<String> = store
        .list()
        .unwrap()
        .iter()
        .map(|s| s.session.to_string())
        .collect();
    ids.sort();
    ids
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
    let out = succeeds(
        forktrail(&store, &["watch", "--once"]).env("HOME", home.path()),
        "watch --once",
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("imported w1 from "), "{stdout}");
    let store = Store::open(&store).unwrap();
    assert_eq!(store.info(&sid("w1")).unwrap().length, 1);

    // No folder to watch: said.
    let empty = tempfile::tempdir().unwrap();
    let out = forktrail(empty.path().join("store"), &["watch", "--once"])
        .env("HOME", empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("name the folders to watch"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn watch_reads_nothing_outside_its_folders_whatever_their_links_and_depth() {
    use std::os::unix::fs::symlink;
    let temp = tempfile::tempdir().unwrap();
    // Logs elsewhere on the machine.
    let outside = temp.path().join("elsewhere");
    std::fs::create_dir_all(outside.join("more")).unwrap();
    append(
        &outside.join("secret.jsonl"),
        &cc_of("secret", "u-secret", None, "Not yours."),
    );
    append(
        &outside.join("more/other.jsonl"),
        &cc_of("other", "u-other", None, "Nor this."),
    );
    let agent = cc_of("w1", "x-agent", None, "An agent's notes kept elsewhere.");
    append(&outside.join("agent-x.jsonl"), &agent);
    // The folder watched: a log with a sub-agent folder, and links of every kind.
    let logs = temp.path().join("projects");
    let project = logs.join("-home-dev-app");
    std::fs::create_dir_all(project.join("w1/subagents")).unwrap();
    append(
        &project.join("w1.jsonl"),
        &(cc("u1", None, "Plan the release.") + &cc("a1", Some("u1"), "Three steps.")),
    );
    symlink("/", logs.join("root")).unwrap();
    symlink(".", logs.join("loop")).unwrap();
    symlink(&outside, logs.join("linked-folder")).unwrap();
    symlink(outside.join("secret.jsonl"), project.join("stolen.jsonl")).unwrap();
    symlink(
        outside.join("agent-x.jsonl"),
        project.join("w1/subagents/agent-x.jsonl"),
    )
    .unwrap();
    // A link that stays inside is read: it is the same log.
    symlink(project.join("w1.jsonl"), logs.join("same.jsonl")).unwrap();
    // Folders nested deeper than the watch looks: a log 16 folders down is read, one
    // 17 down is not.
    let mut deep = logs.clone();
    for _ in 0..16 {
        deep = deep.join("d");
    }
    std::fs::create_dir_all(deep.join("d")).unwrap();
    append(
        &deep.join("edge.jsonl"),
        &cc_of("edge", "u-edge", None, "Deep enough."),
    );
    append(
        &deep.join("d/deep.jsonl"),
        &cc_of("deep", "u-deep", None, "Too deep."),
    );

    let store = temp.path().join("store");
    let (reports, stderr) = watch_once(&store, &[&logs], &[]);
    let mut imported: Vec<&str> = reports
        .iter()
        .flat_map(|r| r["imported"].as_array().unwrap())
        .map(|id| id.as_str().unwrap())
        .collect();
    imported.sort();
    assert_eq!(imported, ["edge", "w1"], "{stderr}");
    assert!(
        stderr.contains("stolen.jsonl") && stderr.contains("leads outside the folders"),
        "{stderr}"
    );
    assert!(
        stderr.contains("agent-x.jsonl: it leads outside the folders"),
        "{stderr}"
    );
    assert!(stderr.contains("more than 16 folders below"), "{stderr}");
    let watched = Store::open(&store).unwrap();
    assert_eq!(session_ids(&watched), ["edge", "w1"]);
    assert_eq!(watched.info(&sid("w1")).unwrap().length, 2);

    // Following the folder: a link to a log elsewhere and a link to a folder elsewhere
    // that appear later bring nothing in; a line written to the log does.
    drop(watched);
    let watch = Watch::start(&store, &logs);
    symlink(outside.join("secret.jsonl"), project.join("later.jsonl")).unwrap();
    symlink(outside.join("more"), project.join("later-folder")).unwrap();
    append(
        &outside.join("more/other.jsonl"),
        &cc_of("other", "a-other", Some("u-other"), "Still not."),
    );
    append(&project.join("w1.jsonl"), &cc("u2", Some("a1"), "Go."));
    watch.until_turns(1);
    watch.quiet();
    watch.stop();
    let watched = Store::open(&store).unwrap();
    assert_eq!(session_ids(&watched), ["edge", "w1"]);
    assert_eq!(watched.info(&sid("w1")).unwrap().length, 3);
}

#[test]
fn a_line_too_long_or_not_utf8_is_skipped_and_reported_once_and_the_rest_goes_in() {
    let temp = tempfile::tempdir().unwrap();
    let logs = temp.path().join("projects");
    std::fs::create_dir_all(&logs).unwrap();
    let log = logs.join("w1.jsonl");
    let mut bytes = cc("u1", None, "Plan the release.").into_bytes();
    // Line 2: a message longer than the bound; line 3: one invalid byte.
    bytes.extend(cc("a0", Some("u1"), &"x".repeat(5000)).into_bytes());
    let mut bad = cc("a9", Some("u1"), "caf\u{e9}").into_bytes();
    let e9 = bad.windows(2).position(|w| w == [0xc3, 0xa9]).unwrap();
    bad.splice(e9..e9 + 2, [0xe9]);
    bytes.extend(bad);
    bytes.extend(cc("a1", Some("u1"), "Three steps.").into_bytes());
    std::fs::write(&log, &bytes).unwrap();

    let store = temp.path().join("store");
    let bound = ["--max-line-bytes", "4096"];
    let (reports, stderr) = watch_once(&store, &[&logs], &bound);
    assert_eq!(reports.len(), 1, "{stderr}");
    assert_eq!(reports[0]["imported"], json!(["w1"]));
    assert_eq!(reports[0]["turns"], 2);
    let skipped = reports[0]["skipped"].as_array().unwrap();
    assert_eq!(
        skipped
            .iter()
            .map(|s| s["line"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [2, 3]
    );
    let why = |i: usize| skipped[i]["why"].as_str().unwrap().to_string();
    assert!(
        why(0).contains("over the limit of 4096 bytes"),
        "{}",
        why(0)
    );
    assert!(why(1).contains("not valid UTF-8"), "{}", why(1));
    assert!(
        stderr.contains("w1.jsonl line 2: the line is ")
            && stderr.contains("over the limit of 4096 bytes"),
        "{stderr}"
    );
    assert!(
        stderr.contains("w1.jsonl line 3: the line is not valid UTF-8"),
        "{stderr}"
    );
    let watched = Store::open(&store).unwrap();
    let turns = turns_of(&watched, &sid("w1"));
    assert_eq!(
        turns.iter().map(|t| t.2.as_str()).collect::<Vec<_>>(),
        ["Plan the release.", "Three steps."]
    );
    drop(watched);

    // The log grows: the new line goes in, the bad ones are not reported again.
    append(&log, &cc("u2", Some("a1"), "Go."));
    let (reports, stderr) = watch_once(&store, &[&logs], &bound);
    assert_eq!(reports[0]["extended"], json!(["w1"]));
    assert_eq!(reports[0]["turns"], 1);
    assert_eq!(stderr.matches("; skipped").count(), 2, "{stderr}");
}

#[test]
fn every_log_format_read_by_lines_bounds_each_line_and_names_the_bad_one() {
    let user = |text: &str| {
        json!({"type": "message", "id": text, "parentId": null,
               "message": {"role": "user", "content": text}})
        .to_string()
    };
    let pi = [
        json!({"type": "session", "version": 3, "id": "p1", "timestamp": "2025-01-01T00:00:00Z",
               "cwd": "/w"})
        .to_string(),
        user("first"),
    ];
    let codex = codex_rollout();
    let codex: Vec<&str> = codex.lines().collect();
    let claude = [cc("u1", None, "Plan."), cc("a1", Some("u1"), "Done.")];
    let claude: Vec<&str> = claude.iter().map(|l| l.trim_end()).collect();
    let cases: [(ImportFormat, Vec<&str>); 3] = [
        (ImportFormat::ClaudeCode, claude),
        (ImportFormat::Codex, codex),
        (ImportFormat::Pi, pi.iter().map(String::as_str).collect()),
    ];
    for (format, lines) in cases {
        // The log, then a line past the bound and a line with an invalid byte.
        let mut bytes: Vec<u8> = lines.join("\n").into_bytes();
        bytes.extend(format!("\n{{\"pad\": \"{}\"}}\n", "y".repeat(3000)).into_bytes());
        bytes.extend(b"{\"bad\": \"\xff\"}\n");
        let n = lines.len() as u64;
        let bounded = |skip_invalid: bool| TranscriptOptions {
            skip_invalid,
            max_line_bytes: Some(2048),
            ..Default::default()
        };
        let store = Store::in_memory().unwrap();
        let err = store
            .import_with(&bytes, Some(format), &bounded(false))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("line {}: the line is 30", n + 1))
                && err.contains("over the limit of 2048 bytes")
                && err.contains("nothing was imported"),
            "{format:?}: {err}"
        );
        assert!(store.list().unwrap().is_empty());
        let report = store
            .import_with(&bytes, Some(format), &bounded(true))
            .unwrap();
        assert_eq!(report.skipped_invalid, [n + 1, n + 2], "{format:?}");
        assert!(
            report.skipped[1].why.contains("not valid UTF-8"),
            "{format:?}"
        );
        assert_eq!(report.skipped[1].line, Some(n + 2));
        assert!(report.turns > 0, "{format:?}");
        // Unbounded but for the default, the long line is read (and, not being a
        // line of the log's kind, refused as malformed: the bound is what differs).
        let err = Store::in_memory()
            .unwrap()
            .import_with(&bytes, Some(format), &TranscriptOptions::default())
            .unwrap_err()
            .to_string();
        assert!(!err.contains("over the limit"), "{format:?}: {err}");
    }
}
