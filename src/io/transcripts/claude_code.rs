//! Claude Code transcripts in: a session log (JSONL), its sub-agents' logs, a whole
//! project folder, and logs that grew since they were last imported.
//!
//! Claude Code writes one JSONL file per session (the *trunk*) and one per sub-agent
//! (`<session>/subagents/agent-<id>.jsonl`, or `agent-<id>.jsonl` beside the trunk in
//! older versions), each line a message with a `uuid` and a `parentUuid`. The main chain
//! becomes a session named by the log's `sessionId`, an answer Claude Code wrote as a
//! line per content block being one turn followed by its calls' results (see
//! `family/steps.rs`); where a message has several children, each alternative
//! after the first becomes a fork (`alt-N`); sidechains in the trunk become forks at 0
//! (`sidechain-N`); a sub-agent's transcript becomes a fork at 0 (`agent-<id>`, id
//! `<session>:agent-<id>`) of the session whose turn launched it, linked to that turn by
//! `ft:spawnedBy`, or, when that turn is not in the import, a root session whose link
//! stays unresolved (`ft:spawnedInSession` and `ft:spawnToolCallId` without
//! `ft:spawnedBy`).
//!
//! Every imported turn keeps the `uuid` of its line (of each of its lines, for an
//! answer's) as `ft:sourceId`. Importing a log again appends the lines that are new (by
//! uuid) to the sessions that hold their parents, or forks where they branch (also at
//! a turn the same import appends); lines already imported are left as they are.
//! Branches are numbered in the order the log holds them, so a log imported again as it
//! grows ends as an import of it whole (but for an answer caught between its lines,
//! whose later lines make a second turn).
//!
//! Everything is built in a scratch in-memory store with the ordinary write path, then
//! committed in one transaction: all or nothing.

use super::family::{agent_in_text, invalid, place, skip, Family, Forks, Node, SourceFile};
use crate::error::{Error, Result};
use crate::io::lines::{self, LogLine};
use crate::io::report::{Skipped, TranscriptOptions, TranscriptReport};
use crate::model::{Agent, Kind, NewTurn, Role, SessionId};
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What a line is.
enum Line {
    Message(Node),
    /// A line forktrail does not import; `uuid`/`parent` keep the chain through it.
    Other {
        kind: String,
        uuid: Option<String>,
        parent: Option<String>,
        log_session: Option<String>,
    },
}

impl Store {
    /// Imports a Claude Code session log (JSONL) given as text: the main chain, its
    /// alternatives and sidechains, or a lone sub-agent transcript (a root session with
    /// its launch recorded as unresolved). A log imported before gets its new lines
    /// appended. Lines of other types are skipped and counted. All or nothing.
    pub fn import_claude_code(
        &self,
        text: &str,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        self.import_claude_lines(lines::lines_of(text.as_bytes(), options), options)
    }

    /// Imports a Claude Code log given as its lines.
    pub(in crate::io) fn import_claude_lines(
        &self,
        lines: Vec<LogLine>,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let file = SourceFile {
            name: None,
            lines,
            agent: None,
            spawned_by: None,
        };
        self.import_claude_files(vec![file], options, Vec::new())
    }

    /// Imports Claude Code logs from disk: a project folder (every session log in it,
    /// each with its sub-agents' transcripts linked to the turns that launched them), or
    /// one log file (with its own `<session>/subagents/` folder when there is one). All
    /// or nothing, in one transaction.
    pub fn import_claude_code_path(
        &self,
        path: &Path,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let (files, left_out) = discover(path, options)?;
        if files.is_empty() {
            return Err(Error::InvalidInput(format!(
                "{} holds no Claude Code log (*.jsonl); nothing was imported",
                path.display()
            )));
        }
        self.import_claude_files(files, options, left_out)
    }

    /// `left_out`: the files found but not read (see [`TranscriptOptions::within`]).
    fn import_claude_files(
        &self,
        files: Vec<SourceFile>,
        options: &TranscriptOptions<'_>,
        left_out: Vec<Skipped>,
    ) -> Result<TranscriptReport> {
        let mut report = TranscriptReport {
            skipped: left_out,
            ..TranscriptReport::default()
        };
        let families = read_families(self, &files, options, &mut report)?;
        self.import_families(&files, families, "claude-code", options, report)
    }
}

/// Reads every line of every file into the families of session logs they belong to
/// (by `sessionId`), counting what is skipped; a bad line fails the import unless
/// `skip_invalid`.
fn read_families(
    store: &Store,
    files: &[SourceFile],
    options: &TranscriptOptions<'_>,
    report: &mut TranscriptReport,
) -> Result<BTreeMap<Option<String>, Family>> {
    let total: u64 = files.iter().map(|f| f.lines.len() as u64).sum();
    let mut done = 0u64;
    let mut families: BTreeMap<Option<String>, Family> = BTreeMap::new();
    let mut forks = Forks::default();
    for (index, file) in files.iter().enumerate() {
        // Lines that name no log (snapshots, summaries) belong to the file's log.
        let file_key = file.lines.iter().find_map(|(_, line)| {
            let value: Value = serde_json::from_str(line.as_ref().ok()?).ok()?;
            value.get("sessionId")?.as_str().map(str::to_string)
        });
        for (n, line) in &file.lines {
            let n = *n;
            done += 1;
            if let Some(progress) = options.progress {
                progress(done, total);
            }
            let value = line
                .as_deref()
                .map_err(ToString::to_string)
                .and_then(|line| serde_json::from_str::<Value>(line).map_err(|e| e.to_string()));
            let forked = value.as_ref().ok().and_then(forked_from);
            let parsed = value.and_then(|v| claude_line(&v));
            let key = match &parsed {
                Ok(Line::Message(node)) => node.log_session.clone(),
                Ok(Line::Other { log_session, .. }) => log_session.clone(),
                Err(_) => None,
            };
            let family = families
                .entry(key.or_else(|| file_key.clone()))
                .or_default();
            match parsed {
                Ok(Line::Message(node)) if node.turns.is_empty() => {
                    // Thinking or images only: nothing to keep, but children hang on.
                    let kind = format!("{} (no text or tool use)", node.kind);
                    *report.skipped_types.entry(kind).or_default() += 1;
                    family.passthrough.insert(node.uuid, node.parent);
                }
                Ok(Line::Message(node)) => {
                    let mut node = Node {
                        file: index,
                        line: n,
                        agent: node.agent.or_else(|| file.agent.clone()),
                        ..node
                    };
                    if let Some((parent_log, original)) = forked {
                        if let Err(e) = SessionId::new(parent_log.clone()) {
                            let why = format!("forkedFrom.sessionId: {e}");
                            if options.skip_invalid {
                                skip(report, files, index, n, why);
                                continue;
                            }
                            return Err(invalid(files, index, n, why));
                        }
                        if let Some(log) = &node.log_session {
                            forks.fork_of.insert(log.clone(), parent_log);
                        }
                        forks.alias.insert(node.uuid.clone(), original);
                        node.copy = true;
                    }
                    if let Some(&first) = family.by_uuid.get(&node.uuid) {
                        let first: &Node = &family.nodes[first];
                        let why = format!(
                            "uuid {} was already used on {}",
                            node.uuid,
                            place(files, first.file, first.line)
                        );
                        if options.skip_invalid {
                            skip(report, files, index, n, why);
                            continue;
                        }
                        return Err(invalid(files, index, n, why));
                    }
                    family.by_uuid.insert(node.uuid.clone(), family.nodes.len());
                    family.nodes.push(node);
                }
                Ok(Line::Other {
                    kind, uuid, parent, ..
                }) => {
                    *report.skipped_types.entry(kind).or_default() += 1;
                    if let Some(uuid) = uuid {
                        family.passthrough.insert(uuid, parent);
                    }
                }
                Err(why) if options.skip_invalid => skip(report, files, index, n, why),
                Err(why) => return Err(invalid(files, index, n, why)),
            }
        }
    }
    forks.resolve_stored(store, &families)?;
    let mut families = forks.merge(families);
    for family in families.values_mut() {
        family.split_answers = true;
    }
    Ok(families)
}

/// `(sessionId, messageUuid)` of a line's `forkedFrom`: the line is a copy, in a fork's
/// log (`/branch`, `--fork-session`, the Agent SDK's `forkSession`), of that message of
/// that session.
fn forked_from(v: &Value) -> Option<(String, String)> {
    let from = v.get("forkedFrom")?;
    let text = |key: &str| from.get(key).and_then(Value::as_str).map(str::to_string);
    Some((text("sessionId")?, text("messageUuid")?))
}

/// The files of a Claude Code project folder, or of one log and its sub-agents, and
/// those found but left out because they lead outside the folders the import may read
/// ([`TranscriptOptions::within`]).
fn discover(
    path: &Path,
    options: &TranscriptOptions<'_>,
) -> Result<(Vec<SourceFile>, Vec<Skipped>)> {
    let jsonl = |dir: &Path| -> Result<Vec<PathBuf>> {
        let mut out: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "jsonl"))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::io(format!("cannot read {}", dir.display()), e)),
        };
        out.sort();
        Ok(out)
    };
    let mut paths: Vec<PathBuf> = Vec::new();
    let trunks: Vec<PathBuf> = if path.is_dir() {
        let all = jsonl(path)?;
        paths.extend(all.iter().filter(|p| agent_of(p).is_some()).cloned());
        all.into_iter().filter(|p| agent_of(p).is_none()).collect()
    } else {
        vec![path.to_path_buf()]
    };
    for trunk in &trunks {
        paths.push(trunk.clone());
        if let (Some(dir), Some(stem)) = (trunk.parent(), trunk.file_stem()) {
            paths.extend(jsonl(&dir.join(stem).join("subagents"))?);
        }
    }
    // A log given alone, read now: its lines name its legacy sub-agent files beside it.
    let mut alone: Option<Vec<LogLine>> = None;
    if !path.is_dir() && agent_of(path).is_none() {
        let lines = lines::read_log(path, options)?;
        if let Some(dir) = path.parent() {
            for agent in named_agents(&lines) {
                let file = dir.join(format!("agent-{agent}.jsonl"));
                if file.is_file() && !paths.contains(&file) {
                    paths.push(file);
                }
            }
        }
        alone = Some(lines);
    }
    paths.sort_by_key(|p| agent_of(p).is_some());
    paths.dedup();
    let mut files = Vec::new();
    let mut left_out = Vec::new();
    for found in paths {
        // The file named is read (or refused) as it is; what was found beside it only
        // where the import may read.
        if found != path && lines::confined(&found, options)?.is_none() {
            left_out.push(Skipped {
                file: Some(found.display().to_string()),
                line: None,
                why: "it leads outside the folders being read (a link to somewhere else); \
                      not read"
                    .into(),
            });
            continue;
        }
        let agent = agent_of(&found);
        let spawned_by = agent.as_ref().and_then(|a| {
            let meta = found.with_file_name(format!("agent-{a}.meta.json"));
            let text = lines::read_small(&meta, 1 << 20, options)?;
            let value: Value = serde_json::from_str(&text).ok()?;
            value.get("toolUseId")?.as_str().map(str::to_string)
        });
        let lines = match alone.take() {
            Some(lines) if found == path => lines,
            other => {
                alone = other;
                lines::read_log(&found, options)?
            }
        };
        files.push(SourceFile {
            name: Some(found.display().to_string()),
            lines,
            agent,
            spawned_by,
        });
    }
    Ok((files, left_out))
}

/// The sub-agent id of a file named `agent-<id>.jsonl`.
fn agent_of(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    stem.strip_prefix("agent-")
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

/// The sub-agent ids a log's tool results name.
fn named_agents(lines: &[LogLine]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in lines.iter().filter_map(|(_, line)| line.as_ref().ok()) {
        if let Ok(Line::Message(node)) = serde_json::from_str::<Value>(line)
            .map_err(|e| e.to_string())
            .and_then(|v| claude_line(&v))
        {
            out.extend(node.spawned.into_iter().map(|(_, agent, _)| agent));
        }
    }
    out
}

/// A `tool_result` block's content: its text, or its text parts joined by a blank line.
fn result_text(block: &Value) -> String {
    match block.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

fn claude_line(v: &Value) -> std::result::Result<Line, String> {
    let text = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let kind = text("type").ok_or("a line needs a \"type\"")?;
    if kind != "user" && kind != "assistant" {
        // A compaction boundary starts a fresh chain (no parentUuid) but names the
        // message it continues: the conversation goes on through it.
        return Ok(Line::Other {
            kind,
            uuid: text("uuid"),
            parent: text("parentUuid").or_else(|| text("logicalParentUuid")),
            log_session: text("sessionId"),
        });
    }
    let uuid = text("uuid").ok_or("a message line needs a \"uuid\"")?;
    let message = v
        .get("message")
        .and_then(Value::as_object)
        .ok_or("a message line needs a \"message\" object")?;
    let role = if kind == "user" {
        Role::User
    } else {
        Role::Assistant
    };
    let model = message.get("model").and_then(Value::as_str);
    if let Some(model) = model {
        Agent::model(model).map_err(|e| e.to_string())?;
    }
    let mut turns = Vec::new();
    let mut spawned = Vec::new();
    match message.get("content") {
        Some(Value::String(s)) => turns.push(NewTurn::new(role, s.clone())),
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::new();
            let mut calls = Vec::new();
            let mut results = Vec::new();
            for block in blocks {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        texts.push(block.get("text").and_then(Value::as_str).unwrap_or(""))
                    }
                    Some("tool_use") => calls.push(json!({
                        "id": block.get("id").cloned().unwrap_or(Value::Null),
                        "type": "function",
                        "function": {
                            "name": block.get("name").cloned().unwrap_or(Value::Null),
                            "arguments": block.get("input").map(Value::to_string)
                                .unwrap_or_else(|| "{}".into()),
                        }
                    })),
                    Some("tool_result") => {
                        let content = result_text(block);
                        let mut t = NewTurn::new(Role::Tool, content.clone());
                        if let Some(id) = block.get("tool_use_id").and_then(Value::as_str) {
                            t = t.tool_call_id(id);
                            let structured = v
                                .pointer("/toolUseResult/agentId")
                                .and_then(Value::as_str)
                                .map(|a| (a.to_string(), true));
                            let agent =
                                structured.or_else(|| agent_in_text(&content).map(|a| (a, false)));
                            if let Some((agent, structured)) = agent {
                                spawned.push((id.to_string(), agent, structured));
                            }
                        }
                        results.push(t);
                    }
                    // Thinking and images are not conversation text.
                    _ => {}
                }
            }
            if !texts.is_empty() || !calls.is_empty() {
                let mut t = NewTurn::new(role, texts.join("\n\n"));
                if !calls.is_empty() {
                    t = t.tool_calls(Value::Array(calls).to_string());
                    if texts.is_empty() {
                        t = t.kind(Kind::ToolCall);
                    }
                }
                turns.push(t);
            }
            turns.extend(results);
        }
        _ => return Err("\"message.content\" must be a string or an array of blocks".into()),
    }
    if let Some(model) = model {
        turns = turns
            .into_iter()
            .map(|t| {
                if t.role == Role::Assistant {
                    t.model(model)
                } else {
                    t
                }
            })
            .collect();
    }
    Ok(Line::Message(Node {
        uuid,
        kind,
        parent: text("parentUuid"),
        sidechain: v
            .get("isSidechain")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        agent: text("agentId"),
        log_session: text("sessionId"),
        turns,
        spawned,
        message: message
            .get("id")
            .and_then(Value::as_str)
            .filter(|_| role == Role::Assistant)
            .map(str::to_string),
        block: v.get("apiBlockIndex").and_then(Value::as_u64),
        ..Default::default()
    }))
}
