//! Sessions in and out: `import`, `export`, `copy`.

use super::{existing_path, open, print_json, render, CliResult, Out, Target};
use clap::Args;
use forktrail::{ExportFormat, ImportFormat, SessionId, Store, TranscriptReport};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub(super) struct ImportArgs {
    /// The file, or a Claude Code project folder (e.g. ~/.claude/projects/NAME).
    #[arg(value_parser = existing_path)]
    file: PathBuf,
    /// trig, nquads, openai, claude-code, codex, pi or otlp (default: told from the
    /// content).
    #[arg(long)]
    format: Option<ImportFormat>,
    /// Transcripts: skip malformed lines (they are reported) instead of importing
    /// nothing.
    #[arg(long)]
    skip_invalid: bool,
    /// Store a session whose first turns repeat a stored session's as a new root, whole.
    /// By default it becomes a fork of that session holding only the turns past what
    /// they share (found by the turns' digests; a shared prefix of system turns alone
    /// does not count).
    #[arg(long)]
    no_dedup: bool,
    /// Transcripts: the longest line read, in bytes; a longer one is refused like a
    /// malformed one (skipped with --skip-invalid) without being held in memory.
    #[arg(long, value_name = "BYTES", default_value_t = forktrail::MAX_LINE_BYTES)]
    max_line_bytes: usize,
    /// Print a JSON report; also keeps the progress bar off.
    #[arg(long)]
    json: bool,
}

impl ImportArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        // A progress bar on a terminal only, and never with --json.
        // With its rate and time left: a large import takes a while.
        let bar = (!self.json && std::io::IsTerminal::is_terminal(&std::io::stderr())).then(|| {
            indicatif::ProgressBar::new(0).with_style(
                indicatif::ProgressStyle::with_template(
                    "{wide_bar} {human_pos}/{human_len} turns{msg}",
                )
                .expect("a valid template"),
            )
        });
        // The rate and time left count from the first turn written, not from the
        // parsing and checking before it.
        let first = std::cell::OnceCell::new();
        let progress = |done: u64, total: u64| {
            let Some(bar) = &bar else {
                return;
            };
            bar.set_length(total);
            bar.set_position(done);
            let (at, from) = *first.get_or_init(|| (std::time::Instant::now(), done));
            if let Some(text) = rate_and_left(
                done.saturating_sub(from),
                total.saturating_sub(done),
                at.elapsed(),
            ) {
                bar.set_message(text);
            }
        };
        let options = forktrail::TranscriptOptions {
            skip_invalid: self.skip_invalid,
            progress: Some(&progress),
            no_dedup: self.no_dedup,
            max_line_bytes: Some(self.max_line_bytes),
            ..Default::default()
        };
        let report = store.import_path(&self.file, self.format, &options);
        if let Some(bar) = &bar {
            bar.finish_and_clear();
        }
        let report = report?;
        if self.json {
            return print_json(out, &report);
        }
        report_text(out, &report, &self.file)
    }
}

/// The progress bar's rate and time left, once `done` turns have gone in over at least
/// half a second, with `left` still to go.
fn rate_and_left(done: u64, left: u64, elapsed: std::time::Duration) -> Option<String> {
    let secs = elapsed.as_secs_f64();
    if secs < 0.5 || done == 0 {
        return None;
    }
    let rate = done as f64 / secs;
    let left = std::time::Duration::from_secs((left as f64 / rate).round() as u64);
    Some(format!(
        ", {} turns/s, {} left",
        indicatif::HumanCount(rate as u64),
        indicatif::HumanDuration(left)
    ))
}

fn report_text(out: Out, report: &TranscriptReport, file: &Path) -> CliResult {
    for id in &report.sessions {
        writeln!(out, "imported {id}")?;
    }
    for id in &report.extended {
        writeln!(out, "extended {id}")?;
    }
    for copy in &report.shared {
        let turns = render::count(copy.shared_turns, "turn", "turns");
        writeln!(
            out,
            "shared {}: a fork ({}) of {}, whose first {turns} it repeats; they were not \
             stored again",
            copy.session, copy.branch, copy.parent
        )?;
    }
    if report.sessions.is_empty() && report.extended.is_empty() {
        writeln!(out, "up to date: nothing new in {}", file.display())?;
    }
    if report.turns > 0 {
        writeln!(out, "{}", render::count(report.turns, "turn", "turns"))?;
    }
    for (kind, n) in &report.skipped_types {
        let lines = render::count(*n, "line", "lines");
        writeln!(out, "skipped {lines} of type {kind}")?;
    }
    for skipped in &report.skipped {
        // A line of the file imported is named by its number alone.
        let file = skipped.file.as_deref().filter(|f| Path::new(f) != file);
        match (file, skipped.line) {
            (Some(file), Some(line)) => {
                writeln!(out, "skipped {file} line {line}: {}", skipped.why)?
            }
            (None, Some(line)) => writeln!(out, "skipped line {line}: {}", skipped.why)?,
            (Some(file), None) => writeln!(out, "skipped {file}: {}", skipped.why)?,
            (None, None) => writeln!(out, "skipped: {}", skipped.why)?,
        }
    }
    for id in &report.unresolved_subagents {
        writeln!(
            out,
            "sub-agent {id}: the turn that launched it is not in the store (link unresolved)"
        )?;
    }
    Ok(())
}

#[derive(Args)]
pub(super) struct ExportArgs {
    /// The session to export (default: every session; one is needed for turtle, jsonl,
    /// openai and html).
    session: Option<SessionId>,
    /// trig, nquads, turtle, jsonl, openai, prov (PROV-O as Turtle, with the PROV
    /// types and relations written out for PROV tools) or html (one self-contained
    /// page of the session's playback and fork tree, for sharing offline).
    #[arg(long, default_value = "trig")]
    format: ExportFormat,
    /// Write to this file instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

impl ExportArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let session = self.session.as_ref();
        let Some(path) = &self.output else {
            return Ok(store.export(session, self.format, out)?);
        };
        // Write beside the target and rename, so a failure leaves no half file.
        let tmp = path.with_extension("partial");
        let file = std::fs::File::create(&tmp)
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        if let Err(e) = store.export(session, self.format, std::io::BufWriter::new(file)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
        std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(())
    }
}

#[derive(Args)]
pub(super) struct CopyArgs {
    /// The store to copy from (default: --store).
    #[arg(long, value_name = "STORE")]
    from: Option<PathBuf>,
    /// The store to copy into: a directory (created if missing) or the http:// URL of a
    /// SPARQL 1.1 query endpoint.
    #[arg(long, value_name = "STORE")]
    to: PathBuf,
    /// With a URL --to: its SPARQL update endpoint (default as for --update-endpoint).
    #[arg(long, value_name = "URL")]
    to_update_endpoint: Option<String>,
    /// Print a JSON report.
    #[arg(long)]
    json: bool,
}

impl CopyArgs {
    pub(super) fn run(self, out: Out, store: Target) -> CliResult {
        let from = match self.from {
            Some(from) => Target {
                store: from,
                ..store
            },
            None => store,
        };
        let to = Target {
            store: self.to,
            update_endpoint: self.to_update_endpoint,
            credentials: "FORKTRAIL_TO",
            durability: from.durability,
            limits: from.limits,
        };
        let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => a == b,
        };
        if same(&from.store, &to.store) {
            return Err(format!("--from and --to are the same store, {from}").into());
        }
        let source = open(&from, false)?;
        let dest = open(&to, true)?;
        let report = source.copy_to(&dest)?;
        if self.json {
            return print_json(out, &report);
        }
        let sessions = render::count(report.sessions.len() as u64, "session", "sessions");
        let turns = render::count(report.own_turns, "turn", "turns");
        let quads = render::count(report.quads, "quad", "quads");
        writeln!(
            out,
            "copied {sessions} ({turns}, {quads}) from {from} to {to}"
        )?;
        writeln!(
            out,
            "checked: {} of {} sessions have the same length and head digest in both",
            report.verified,
            report.sessions.len()
        )?;
        Ok(())
    }
}

#[derive(Args)]
pub(super) struct BackupArgs {
    /// The new directory to back up into (must not exist).
    dir: PathBuf,
    /// Print a JSON report.
    #[arg(long)]
    json: bool,
}

impl BackupArgs {
    #[cfg(feature = "rocksdb")]
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let report = store.backup(&self.dir)?;
        if self.json {
            return print_json(out, &report);
        }
        let sessions = render::count(report.sessions as u64, "session", "sessions");
        writeln!(
            out,
            "backed up {sessions} to {} ({}); open it with --store {}",
            report.path.display(),
            report.method,
            report.path.display()
        )?;
        Ok(())
    }

    #[cfg(not(feature = "rocksdb"))]
    pub(super) fn run(self, _out: Out, _store: &Store) -> CliResult {
        Err(format!(
            "cannot back up into {}: this forktrail was built without the rocksdb feature",
            self.dir.display()
        )
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::rate_and_left;
    use std::time::Duration;

    #[test]
    fn the_rate_counts_turns_written_and_the_time_left_follows_from_it() {
        // Nothing shown before half a second or before a turn went in.
        assert_eq!(
            rate_and_left(1_000, 9_000, Duration::from_millis(400)),
            None
        );
        assert_eq!(rate_and_left(0, 9_000, Duration::from_secs(3)), None);
        assert_eq!(
            rate_and_left(50_000, 950_000, Duration::from_secs(2)).as_deref(),
            Some(", 25,000 turns/s, 38 seconds left")
        );
        assert_eq!(
            rate_and_left(120_000, 0, Duration::from_secs(3)).as_deref(),
            Some(", 40,000 turns/s, 0 seconds left")
        );
    }
}
