//! `watch`: follow agents' session folders and import what they write as they write it.

use super::{render, CliResult, Out};
use clap::Args;
use forktrail::{ImportFormat, Store, TranscriptOptions, TranscriptReport};
use notify::{RecursiveMode, Watcher};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

#[derive(Args)]
pub(super) struct WatchArgs {
    /// Folders to follow, with their subfolders (default: those of ~/.claude/projects,
    /// ~/.codex/sessions and ~/.pi/agent/sessions that exist).
    dirs: Vec<PathBuf>,
    /// Import what the folders hold now, then exit instead of following them.
    #[arg(long)]
    once: bool,
    /// How long a file must be left alone before what it gained is imported, in
    /// milliseconds: a burst of writes goes in as one import.
    #[arg(long, default_value_t = 300, value_name = "MS")]
    settle_ms: u64,
    /// Print one JSON object per import (its report and the file) instead of text.
    #[arg(long)]
    json: bool,
}

/// What was last imported of a file: its length and time of change.
type Seen = (u64, Option<SystemTime>);

impl WatchArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let dirs = if self.dirs.is_empty() {
            default_dirs()
        } else {
            self.dirs.clone()
        };
        for dir in &dirs {
            if !dir.is_dir() {
                return Err(
                    format!("{} is not a folder; nothing is watched", dir.display()).into(),
                );
            }
        }
        if dirs.is_empty() {
            return Err("none of ~/.claude/projects, ~/.codex/sessions or \
                        ~/.pi/agent/sessions exists: name the folders to watch"
                .into());
        }
        let mut seen: HashMap<PathBuf, Seen> = HashMap::new();
        // Everything there now, first (imports are idempotent: a restart writes only
        // what is new).
        let mut files: Vec<PathBuf> = dirs.iter().flat_map(|d| logs_under(d)).collect();
        files.sort_by_key(|p| is_sub_agent(p));
        for file in files {
            self.import(out, store, &file, &mut seen)?;
        }
        if self.once {
            return Ok(());
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // Writes and new files; not reads (this process's own among them).
                let Ok(event) = event else { return };
                if matches!(
                    event.kind,
                    notify::EventKind::Create(_) | notify::EventKind::Modify(_)
                ) {
                    for path in event.paths {
                        let _ = tx.send(path);
                    }
                }
            })?;
        for dir in &dirs {
            watcher.watch(dir, RecursiveMode::Recursive)?;
        }
        eprintln!(
            "watching {} (Ctrl-C stops)",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let settle = Duration::from_millis(self.settle_ms);
        // Files changed, by when they last changed: each is imported once it has been
        // left alone for `settle`.
        let mut pending: BTreeMap<PathBuf, Instant> = BTreeMap::new();
        loop {
            let wait = pending
                .values()
                .map(|at| (*at + settle).saturating_duration_since(Instant::now()))
                .min()
                .unwrap_or(Duration::from_secs(3600));
            match rx.recv_timeout(wait) {
                Ok(path) => {
                    if path.extension().is_some_and(|e| e == "jsonl") {
                        pending.insert(path, Instant::now());
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            }
            let ready: Vec<PathBuf> = pending
                .iter()
                .filter(|(_, at)| at.elapsed() >= settle)
                .map(|(p, _)| p.clone())
                .collect();
            for path in ready {
                pending.remove(&path);
                self.import(out, store, &path, &mut seen)?;
            }
        }
    }

    /// Imports what `file` gained since it was last imported, if anything: its log (a
    /// sub-agent's transcript brings in its session's log, which links it), up to its
    /// last whole line. A file of another format, or one refused, is reported and left
    /// until it changes again.
    fn import(
        &self,
        out: Out,
        store: &Store,
        file: &Path,
        seen: &mut HashMap<PathBuf, Seen>,
    ) -> CliResult {
        let Ok(meta) = std::fs::metadata(file) else {
            return Ok(()); // gone (renamed, deleted) since it changed
        };
        let now: Seen = (meta.len(), meta.modified().ok());
        if seen.get(file) == Some(&now) {
            return Ok(());
        }
        let target = trunk_of(file).unwrap_or_else(|| file.to_path_buf());
        let bytes = std::fs::read(&target).unwrap_or_default();
        let whole = &bytes[..bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1)];
        if whole.iter().all(u8::is_ascii_whitespace) {
            return Ok(()); // nothing whole yet: a first line being written
        }
        let format = match ImportFormat::sniff(whole) {
            Some(f @ (ImportFormat::ClaudeCode | ImportFormat::Codex | ImportFormat::Pi)) => f,
            _ => {
                seen.insert(file.to_path_buf(), now);
                eprintln!(
                    "{}: not a Claude Code, Codex or Pi log; skipped",
                    file.display()
                );
                return Ok(());
            }
        };
        let options = TranscriptOptions {
            complete_lines: true,
            ..Default::default()
        };
        let report = match store.import_path(&target, Some(format), &options) {
            Ok(report) => report,
            Err(e) => {
                // The next change tries again.
                seen.insert(file.to_path_buf(), now);
                eprintln!("{}: {e}", target.display());
                return Ok(());
            }
        };
        seen.insert(file.to_path_buf(), now);
        if report.sessions.is_empty() && report.extended.is_empty() {
            return Ok(());
        }
        if self.json {
            let mut value = serde_json::to_value(&report)?;
            value["file"] = target.display().to_string().into();
            // One line per import, so that a reader can take them as they come.
            writeln!(out, "{value}")?;
        } else {
            print_report(out, &report, &target)?;
        }
        // Each import is reported as it happens, not when the watch ends.
        out.flush()?;
        Ok(())
    }
}

fn print_report(out: Out, report: &TranscriptReport, file: &Path) -> CliResult {
    let turns = render::count(report.turns, "turn", "turns");
    for id in &report.sessions {
        writeln!(out, "imported {id} from {}", file.display())?;
    }
    for id in &report.extended {
        writeln!(out, "extended {id} from {}", file.display())?;
    }
    writeln!(out, "  {turns}")?;
    Ok(())
}

/// The folders agents write their logs to, those that exist.
fn default_dirs() -> Vec<PathBuf> {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return Vec::new();
    };
    [".claude/projects", ".codex/sessions", ".pi/agent/sessions"]
        .into_iter()
        .map(|d| home.join(d))
        .filter(|d| d.is_dir())
        .collect()
}

/// Every `.jsonl` file under `dir`, in name order.
fn logs_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Whether `file` is a Claude Code sub-agent's transcript (`agent-<id>.jsonl`).
fn is_sub_agent(file: &Path) -> bool {
    file.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("agent-"))
}

/// The session log a Claude Code sub-agent's transcript belongs to:
/// `<session>/subagents/agent-<id>.jsonl` (or `agent-<id>.jsonl` beside older logs,
/// which name their sub-agents themselves) → `<session>.jsonl`, if it exists.
fn trunk_of(file: &Path) -> Option<PathBuf> {
    if !is_sub_agent(file) {
        return None;
    }
    let folder = file.parent()?;
    if folder.file_name()? != "subagents" {
        return None;
    }
    let session = folder.parent()?;
    let trunk = session.with_extension("jsonl");
    trunk.is_file().then_some(trunk)
}
