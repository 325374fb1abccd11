//! What every transcript import takes and reports.

use crate::model::SessionId;
use serde::Serialize;
use std::collections::BTreeMap;

/// How a transcript import went.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TranscriptReport {
    /// The sessions created, the main one first (`imported` in JSON, as for every
    /// `import`).
    #[serde(rename = "imported")]
    pub sessions: Vec<SessionId>,
    /// Sessions already in the store that gained turns: a transcript imported again
    /// after it grew.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extended: Vec<SessionId>,
    /// Turns written, over all sessions.
    pub turns: u64,
    /// Lines of a type forktrail does not import (by type), skipped.
    pub skipped_types: BTreeMap<String, u64>,
    /// Malformed lines skipped under `skip_invalid`, by line number.
    pub skipped_invalid: Vec<u64>,
    /// The same lines by file, for an import of several files (a Claude Code folder).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub skipped_invalid_in: BTreeMap<String, Vec<u64>>,
    /// What was left out and why: each line skipped under `skip_invalid`, and each file
    /// not read because it leads outside [`TranscriptOptions::within`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// Sessions holding a sub-agent's transcript whose launching turn is not in the
    /// store (imported as roots, the launch recorded but unresolved).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unresolved_subagents: Vec<SessionId>,
    /// Sessions whose start repeated a stored session's: stored as forks of it, the
    /// shared turns not written again (`turns` counts only what was written).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<SharedCopy>,
}

impl TranscriptReport {
    /// Takes in the report of another part of the same import (a batch of a request):
    /// what it wrote and what it skipped.
    pub(crate) fn absorb(&mut self, part: TranscriptReport) {
        self.sessions.extend(part.sessions);
        self.extended.extend(part.extended);
        self.turns += part.turns;
        for (kind, n) in part.skipped_types {
            *self.skipped_types.entry(kind).or_default() += n;
        }
        self.skipped_invalid.extend(part.skipped_invalid);
        for (file, lines) in part.skipped_invalid_in {
            self.skipped_invalid_in
                .entry(file)
                .or_default()
                .extend(lines);
        }
        self.skipped.extend(part.skipped);
        self.unresolved_subagents.extend(part.unresolved_subagents);
        self.shared.extend(part.shared);
    }

    /// Takes in what the bulk path added: its sessions, and the turns a shared prefix
    /// saved writing.
    pub(crate) fn added(&mut self, added: Added) {
        self.sessions = added.ids;
        let saved: u64 = added.shared.iter().map(|c| c.shared_turns).sum();
        self.turns = self.turns.saturating_sub(saved);
        self.shared = added.shared;
    }
}

/// A new session stored as a fork of the stored session whose start it repeats: only
/// its turns past the shared prefix were written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SharedCopy {
    /// The new session.
    pub session: SessionId,
    /// The session it is a fork of.
    pub parent: SessionId,
    /// Its fork point: the turns shared with `parent` (not stored again).
    pub shared_turns: u64,
    /// Its branch label (`copy`, `copy-2`, …).
    pub branch: String,
}

/// What [`Store::add_roots`](crate::Store::add_roots) added: the sessions, in the order given, and those of
/// them stored as forks of a session they copy.
#[derive(Debug, Default)]
pub(crate) struct Added {
    pub(crate) ids: Vec<SessionId>,
    pub(crate) shared: Vec<SharedCopy>,
}

/// A line or a file an import left out, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The file, for an import read from files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The line (from 1); `None` when the whole file was left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    pub why: String,
}

/// Options of a transcript import.
#[derive(Default)]
pub struct TranscriptOptions<'a> {
    /// Skip malformed lines (and report them) instead of refusing the whole file.
    pub skip_invalid: bool,
    /// Called with `(done, in all)` as the import goes: turns written (OpenAI, Codex) or
    /// lines read (Claude Code).
    pub progress: Option<&'a dyn Fn(u64, u64)>,
    /// Store a session whose start repeats a stored session's as a new root, whole,
    /// instead of as a fork of it holding only what follows.
    pub no_dedup: bool,
    /// Files read from disk: only the lines ended by a newline, a last line still
    /// being written being left for the next import (`watch` imports logs as they grow).
    pub complete_lines: bool,
    /// The longest line read, in bytes ([`MAX_LINE_BYTES`](crate::MAX_LINE_BYTES) when
    /// `None`): a longer line is refused as a malformed one is (skipped under
    /// `skip_invalid`), without ever being held in memory.
    pub max_line_bytes: Option<usize>,
    /// Folders to read files from: when given, a file that does not resolve (through
    /// its links) inside one of them is not opened: a sub-agent's transcript is left out
    /// and reported in [`TranscriptReport::skipped`], the file named itself is refused.
    /// `watch` passes the folders it watches, so that a link in them brings in nothing
    /// from elsewhere.
    pub within: &'a [std::path::PathBuf],
}

/// `text` without the UTF-8 byte-order mark some editors and Windows tools put first.
pub(crate) fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Splits `text` into `(line number, line)` of its non-blank lines (a byte-order mark
/// first is not part of the first line).
pub(crate) fn lines(text: &str) -> Vec<(u64, &str)> {
    without_bom(text)
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i as u64 + 1, l))
        .collect()
}
