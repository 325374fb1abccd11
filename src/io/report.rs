//! What every transcript import takes and reports.

use super::root::{Added, SharedCopy};
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
    /// Takes in what the bulk path added: its sessions, and the turns a shared prefix
    /// saved writing.
    pub(crate) fn added(&mut self, added: Added) {
        self.sessions = added.ids;
        let saved: u64 = added.shared.iter().map(|c| c.shared_turns).sum();
        self.turns = self.turns.saturating_sub(saved);
        self.shared = added.shared;
    }
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
}

/// The text of `path` (UTF-8, or an error naming the file and the offset); with
/// `complete_lines`, up to its last newline.
pub(crate) fn read_text(path: &std::path::Path, complete_lines: bool) -> crate::Result<String> {
    String::from_utf8(read_file(path, complete_lines)?).map_err(|e| {
        crate::Error::InvalidInput(format!(
            "{} is not valid UTF-8 (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

/// The bytes of `path`; with `complete_lines`, up to its last newline.
pub(crate) fn read_file(path: &std::path::Path, complete_lines: bool) -> crate::Result<Vec<u8>> {
    let mut bytes = std::fs::read(path)
        .map_err(|e| crate::Error::io(format!("cannot read {}", path.display()), e))?;
    if complete_lines {
        let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(end);
    }
    Ok(bytes)
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
