//! `verify`: a store's sessions, or an exported file on its own.

use super::{existing_path, print_json, render, CliResult, Out};
use clap::Args;
use forktrail::{ImportFormat, SessionId, Store, VerifyReport};
use std::collections::BTreeSet;
use std::path::PathBuf;

#[derive(Args)]
pub(super) struct VerifyArgs {
    /// The session to check, with its chain (default: every session).
    #[arg(conflicts_with_all = ["all", "file"])]
    session: Option<SessionId>,
    /// Check every session (the default).
    #[arg(long)]
    all: bool,
    /// Check an exported TriG or N-Quads file on its own, without a store.
    #[arg(long, value_name = "EXPORT", value_parser = existing_path)]
    file: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

impl VerifyArgs {
    /// Whether the command reads a file and needs no store.
    pub(super) fn is_file(&self) -> bool {
        self.file.is_some()
    }

    /// Checks the exported file.
    pub(super) fn run_file(self, out: Out) -> CliResult {
        let path = self.file.clone().expect("called with --file");
        let bytes =
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let format = ImportFormat::sniff_or_explain(&bytes, &path.display().to_string())?;
        let report = Store::verify_export(bytes.as_slice(), format, None)?;
        if report.sessions == 0 {
            return Err(format!(
                "{} holds no forktrail session graph under {}",
                path.display(),
                forktrail::DEFAULT_BASE_IRI
            )
            .into());
        }
        self.report(out, &report)
    }

    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let report = store.verify(self.session.as_ref())?;
        self.report(out, &report)
    }

    /// Prints the report; problems make the command fail (exit 1).
    fn report(&self, out: Out, report: &VerifyReport) -> CliResult {
        if self.json {
            print_json(out, report)?;
        } else {
            for problem in &report.problems {
                writeln!(out, "{problem}")?;
            }
        }
        if report.is_clean() {
            if !self.json {
                let sessions = render::count(report.sessions as u64, "session", "sessions");
                let turns = render::count(report.turns, "turn", "turns");
                writeln!(
                    out,
                    "ok: {sessions}, {turns}: every digest recomputed (digest version {}), \
                     lineage and provenance checked",
                    report.digest_version
                )?;
            }
            return Ok(());
        }
        let sessions: BTreeSet<&str> = report.problems.iter().map(|p| p.session.as_str()).collect();
        Err(format!(
            "verify found {} in {} (digest version {})",
            render::count(report.problems.len() as u64, "problem", "problems"),
            render::count(sessions.len() as u64, "session", "sessions"),
            report.digest_version
        )
        .into())
    }
}
