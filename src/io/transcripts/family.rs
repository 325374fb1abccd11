//! The transcript builder the Claude Code, Pi and OTLP imports share: the lines of a
//! log and of its sub-agents' logs, chained by uuid (a *family*), become the main
//! session, its forks where a message has several children, its sidechains and its
//! sub-agents' sessions, or turns appended to the sessions an earlier import of the same
//! log made.
//!
//! Everything is built in a scratch in-memory store with the ordinary write path, then
//! committed in one transaction: all or nothing.
//!
//! | file | what |
//! | --- | --- |
//! | `build.rs` | a family followed, chain by chain, into the scratch store |
//! | `commit.rs` | the scratch store's sessions written in one transaction |
//! | `forks.rs` | forks' logs merged into the log they were forked from |
//! | `steps.rs` | an answer written as a line per content block put back together |

use crate::error::Error;
use crate::io::lines::LogLine;
use crate::io::report::{Skipped, TranscriptReport};
use crate::model::{Label, NewTurn};
use std::collections::HashMap;

mod build;
mod commit;
mod forks;
mod steps;

pub(super) use forks::Forks;

/// One JSONL file of a Claude Code project (or a Pi session file).
#[derive(Clone, Debug)]
pub(super) struct SourceFile {
    /// How errors name it: a path, or nothing for a single log given as text.
    pub(super) name: Option<String>,
    pub(super) lines: Vec<LogLine>,
    /// The sub-agent this file is the transcript of (from its name `agent-<id>`).
    pub(super) agent: Option<String>,
    /// The tool call that launched that sub-agent, from its `agent-<id>.meta.json`.
    pub(super) spawned_by: Option<String>,
}

/// A message line and the turns it becomes.
#[derive(Clone, Debug, Default)]
pub(super) struct Node {
    pub(super) file: usize,
    pub(super) line: u64,
    pub(super) uuid: String,
    /// The line's `type`: `user` or `assistant`.
    pub(super) kind: String,
    pub(super) parent: Option<String>,
    pub(super) sidechain: bool,
    /// The sub-agent whose transcript holds this line (`agentId`, or the file's).
    pub(super) agent: Option<String>,
    pub(super) log_session: Option<String>,
    pub(super) turns: Vec<NewTurn>,
    /// `(tool call id, sub-agent id, structured)` of sub-agents this line reports on: a
    /// tool result with `toolUseResult.agentId` (structured), or an `agentId: <id>` line
    /// in its text.
    pub(super) spawned: Vec<(String, String, bool)>,
    /// A line a fork's log copied from its parent's (`forkedFrom`): its `uuid` is the
    /// original's.
    pub(super) copy: bool,
    /// The `message.id` of an assistant line: the lines of one answer share it.
    pub(super) message: Option<String>,
    /// The line's `apiBlockIndex`: which content block of its answer it holds.
    pub(super) block: Option<u64>,
    /// The uuids of the other lines of the same answer this node stands for.
    pub(super) merged: Vec<String>,
}

/// The lines of one session log and its sub-agents.
#[derive(Clone, Default)]
pub(super) struct Family {
    /// The main session's title, when the log names one (else `<tool> <log>`).
    pub(super) title: Option<String>,
    pub(super) nodes: Vec<Node>,
    pub(super) by_uuid: HashMap<String, usize>,
    /// Lines not imported (other types, thinking only): uuid → parent, so children
    /// hang on to the nearest imported ancestor.
    pub(super) passthrough: HashMap<String, Option<String>>,
    /// Whether the log writes an answer as a line per content block (Claude Code's do),
    /// so that its lines are put back together before they are followed.
    pub(super) split_answers: bool,
}

/// The nearest imported ancestor of a line, through lines that are not imported.
fn resolve(family: &Family, mut parent: Option<String>) -> Option<usize> {
    for _ in 0..=family.passthrough.len() {
        let uuid = parent?;
        if let Some(&i) = family.by_uuid.get(&uuid) {
            return Some(i);
        }
        parent = family.passthrough.get(&uuid).cloned().flatten();
    }
    None
}

/// The session id of a sub-agent's transcript: the log's id, `:agent-`, the agent's id.
fn agent_session_id(log: &str, agent: &str) -> String {
    let agent: String = agent
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if log.is_empty() {
        format!("agent-{agent}")
    } else {
        format!("{log}:agent-{agent}")
    }
}

/// A branch label for a sub-agent: `agent-<id>`, within the label rules.
fn agent_label(agent: &str) -> String {
    let text: String = format!("agent-{agent}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(54)
        .collect();
    if Label::new(text.clone()).is_ok() {
        text
    } else {
        "agent".into()
    }
}

/// Notes a malformed line skipped under `skip_invalid`: its number, and for an import
/// of several files, under its file's name too; and why.
pub(super) fn skip(
    report: &mut TranscriptReport,
    files: &[SourceFile],
    file: usize,
    line: u64,
    why: impl std::fmt::Display,
) {
    report.skipped.push(Skipped {
        file: files[file].name.clone(),
        line: Some(line),
        why: why.to_string(),
    });
    report.skipped_invalid.push(line);
    if let (true, Some(name)) = (files.len() > 1, &files[file].name) {
        report
            .skipped_invalid_in
            .entry(name.clone())
            .or_default()
            .push(line);
    }
}

/// `line N` for a single log, `FILE line N` for files of a folder.
pub(super) fn place(files: &[SourceFile], file: usize, line: u64) -> String {
    match files.get(file).and_then(|f| f.name.as_deref()) {
        Some(name) if files.len() > 1 || files[file].agent.is_some() => {
            format!("{name} line {line}")
        }
        _ => format!("line {line}"),
    }
}

pub(super) fn invalid(
    files: &[SourceFile],
    file: usize,
    line: u64,
    why: impl std::fmt::Display,
) -> Error {
    Error::InvalidInput(format!(
        "{}: {why}; nothing was imported",
        place(files, file, line)
    ))
}

/// `agentId: <id>` in a sub-agent's answer text, as Claude Code appends it.
pub(super) fn agent_in_text(text: &str) -> Option<String> {
    let rest = text.split("agentId: ").nth(1)?;
    let id: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .collect();
    (!id.is_empty()).then_some(id)
}
