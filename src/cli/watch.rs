//! `watch`: follow agents' session folders and import what they write as they write it.
//!
//! What is read stays inside the folders watched: links to folders are not followed
//! (by the walk nor by the file notifications), a file is opened only if it resolves
//! inside one of them (a link to a log elsewhere is reported, not read), and folders
//! deeper than [`MAX_DEPTH`] below one are left alone. Each line is bounded
//! (`--max-line-bytes`); a line past the bound, not UTF-8 or malformed is skipped and
//! reported, and the rest of its log goes in.

use super::{render, CliResult, Out};
use clap::Args;
use forktrail::{ImportFormat, Store, TranscriptOptions, TranscriptReport, MAX_LINE_BYTES};
use notify::{RecursiveMode, Watcher};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// How many folders below a watched folder logs are looked for: agents keep theirs a
/// few levels down (Codex: `sessions/YYYY/MM/DD/`), and a tree deeper than this is not
/// an agent's.
const MAX_DEPTH: usize = 16;

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
    /// The longest line read, in bytes: a longer one is skipped and reported without
    /// being held in memory, and the rest of its log imported.
    #[arg(long, value_name = "BYTES", default_value_t = MAX_LINE_BYTES)]
    max_line_bytes: usize,
}

/// What was last imported of a file: its length and time of change.
type Seen = (u64, Option<SystemTime>);

/// What the watch remembers between imports.
#[derive(Default)]
struct Followed {
    /// By file: what was last imported of it.
    seen: HashMap<PathBuf, Seen>,
    /// Lines and files already reported as skipped (`file`, line), so that a log that
    /// grows does not report its bad lines again at every import.
    noted: HashSet<(String, Option<u64>)>,
}

impl WatchArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let named = if self.dirs.is_empty() {
            default_dirs()
        } else {
            self.dirs.clone()
        };
        // Each folder as it resolves: what is read must resolve inside one of these.
        let mut dirs = Vec::new();
        for dir in &named {
            match std::fs::canonicalize(dir) {
                Ok(real) if real.is_dir() => dirs.push(real),
                _ => {
                    return Err(
                        format!("{} is not a folder; nothing is watched", dir.display()).into(),
                    )
                }
            }
        }
        if dirs.is_empty() {
            return Err("none of ~/.claude/projects, ~/.codex/sessions or \
                        ~/.pi/agent/sessions exists: name the folders to watch"
                .into());
        }
        let mut followed = Followed::default();
        // Everything there now, first (imports are idempotent: a restart writes only
        // what is new).
        let mut files: Vec<PathBuf> = dirs.iter().flat_map(|d| logs_under(d)).collect();
        files.sort_by_key(|p| is_sub_agent(p));
        for file in files {
            self.import(out, store, &dirs, &file, &mut followed)?;
        }
        if self.once {
            return Ok(());
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let handler = move |event: notify::Result<notify::Event>| {
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
        };
        // Links to folders are not followed here either: a link to `/` would have every
        // folder of the machine watched.
        let config = notify::Config::default().with_follow_symlinks(false);
        let mut watcher = notify::RecommendedWatcher::new(handler, config)?;
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
                    let shallow = dirs.iter().any(|d| depth_below(d, &path) <= MAX_DEPTH);
                    if path.extension().is_some_and(|e| e == "jsonl") && shallow {
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
                self.import(out, store, &dirs, &path, &mut followed)?;
            }
        }
    }

    /// Imports what `file` gained since it was last imported, if anything: its log (a
    /// sub-agent's transcript brings in its session's log, which links it), up to its
    /// last whole line, reading only inside `roots`. A file of another format, or one
    /// refused, is reported and left until it changes again; lines skipped are
    /// reported once.
    fn import(
        &self,
        out: Out,
        store: &Store,
        roots: &[PathBuf],
        file: &Path,
        followed: &mut Followed,
    ) -> CliResult {
        let Ok(meta) = std::fs::metadata(file) else {
            return Ok(()); // gone (renamed, deleted) since it changed
        };
        let now: Seen = (meta.len(), meta.modified().ok());
        if followed.seen.get(file) == Some(&now) {
            return Ok(());
        }
        followed.seen.insert(file.to_path_buf(), now);
        let target = trunk_of(file).unwrap_or_else(|| file.to_path_buf());
        let options = TranscriptOptions {
            complete_lines: true,
            // A bad line in a log that only grows stays bad: skipped, so that the lines
            // after it still go in.
            skip_invalid: true,
            max_line_bytes: Some(self.max_line_bytes),
            within: roots,
            ..Default::default()
        };
        let head = match ImportFormat::head(&target, &options) {
            Ok(head) => head,
            Err(e) => {
                eprintln!("{}: {e}", target.display());
                return Ok(());
            }
        };
        if head.iter().all(u8::is_ascii_whitespace) {
            // Nothing whole yet: a first line being written.
            followed.seen.remove(file);
            return Ok(());
        }
        let format = match ImportFormat::sniff(&head) {
            Some(f @ (ImportFormat::ClaudeCode | ImportFormat::Codex | ImportFormat::Pi)) => f,
            _ => {
                eprintln!(
                    "{}: not a Claude Code, Codex or Pi log; skipped",
                    file.display()
                );
                return Ok(());
            }
        };
        let report = match store.import_path(&target, Some(format), &options) {
            Ok(report) => report,
            Err(e) => {
                // The next change tries again.
                eprintln!("{}: {e}", target.display());
                return Ok(());
            }
        };
        for skipped in &report.skipped {
            let file = skipped
                .file
                .clone()
                .unwrap_or_else(|| target.display().to_string());
            if followed.noted.insert((file.clone(), skipped.line)) {
                match skipped.line {
                    Some(line) => eprintln!("{file} line {line}: {}; skipped", skipped.why),
                    None => eprintln!("{file}: {}", skipped.why),
                }
            }
        }
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

/// Every `.jsonl` file under `root`, in name order, down to [`MAX_DEPTH`] folders
/// below it, without following links to folders. A link named `.jsonl` is listed: the
/// import reads it only if it resolves inside a watched folder.
fn logs_under(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // The entry's own type: a link is a link, wherever it leads.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                if depth < MAX_DEPTH {
                    stack.push((path, depth + 1));
                } else {
                    eprintln!(
                        "{}: more than {MAX_DEPTH} folders below {}; not watched",
                        path.display(),
                        root.display()
                    );
                }
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// How many folders below `root` the file `path` is (0: in `root` itself); past
/// [`MAX_DEPTH`] when it is not under `root` at all.
fn depth_below(root: &Path, path: &Path) -> usize {
    match path.strip_prefix(root) {
        Ok(rest) => rest.components().count().saturating_sub(1),
        Err(_) => usize::MAX,
    }
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
