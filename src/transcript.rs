//! Transcripts users have on disk: OpenAI chat messages (JSON array or JSONL) and Claude
//! Code session logs (JSONL), in; OpenAI messages, out.
//!
//! An import is built in a scratch in-memory store with the ordinary API, then added
//! with [`Store::import`]: validated, and all of it in one transaction or nothing.

use crate::error::{Error, Result};
use crate::io::ImportFormat;
use crate::model::{Agent, ForkOptions, Kind, NewSession, NewTurn, Role, SessionId};
use crate::store::Store;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};

/// How a transcript import went.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TranscriptReport {
    /// The sessions created, the main one first (`imported` in JSON, as for every
    /// `import`).
    #[serde(rename = "imported")]
    pub sessions: Vec<String>,
    /// Turns written, over all sessions.
    pub turns: u64,
    /// Lines of a type forktrail does not import (by type), skipped.
    pub skipped_types: BTreeMap<String, u64>,
    /// Malformed lines skipped under `skip_invalid`, by line number.
    pub skipped_invalid: Vec<u64>,
}

/// Options of a transcript import.
#[derive(Default)]
pub struct TranscriptOptions<'a> {
    /// Skip malformed lines (and report them) instead of refusing the whole file.
    pub skip_invalid: bool,
    /// Called with `(lines read, lines in all)` as the file is read.
    pub progress: Option<&'a dyn Fn(u64, u64)>,
}

/// One message of an OpenAI chat transcript, as forktrail keeps it.
fn openai_turn(message: &Value) -> std::result::Result<NewTurn, String> {
    let object = message
        .as_object()
        .ok_or("a message must be a JSON object")?;
    let role = match object.get("role").and_then(Value::as_str) {
        Some("system") | Some("developer") => Role::System,
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("tool") | Some("function") => Role::Tool,
        Some(other) => return Err(format!("unknown role {other:?}")),
        None => return Err("a message needs a \"role\"".into()),
    };
    let (content, kind) = match object.get("content") {
        None | Some(Value::Null) => (String::new(), Kind::ToolCall),
        Some(Value::String(text)) => (text.clone(), Kind::Message),
        Some(Value::Array(parts)) => (text_of_parts(parts)?, Kind::Message),
        Some(_) => return Err("\"content\" must be a string, an array of parts or null".into()),
    };
    let mut turn = NewTurn::new(role, content);
    // A null content marks an assistant turn that only calls tools: kept as the kind,
    // so that export writes null back.
    if kind == Kind::ToolCall && role == Role::Assistant {
        turn = turn.kind(Kind::ToolCall);
    }
    if let Some(name) = object.get("name").and_then(Value::as_str) {
        if role == Role::Tool {
            Agent::tool(name).map_err(|e| e.to_string())?;
        }
        turn = turn.name(name);
    }
    if let Some(id) = object.get("tool_call_id").and_then(Value::as_str) {
        turn = turn.tool_call_id(id);
    }
    match object.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(calls @ Value::Array(_)) => turn = turn.tool_calls(calls.to_string()),
        Some(_) => return Err("\"tool_calls\" must be an array".into()),
    }
    Ok(turn)
}

/// The text of content parts (`{"type": "text", "text": …}`), joined by blank lines.
fn text_of_parts(parts: &[Value]) -> std::result::Result<String, String> {
    let mut texts = Vec::new();
    for part in parts {
        match (
            part.get("type").and_then(Value::as_str),
            part.get("text").and_then(Value::as_str),
        ) {
            (Some("text"), Some(text)) => texts.push(text),
            (kind, _) => {
                return Err(format!(
                    "content part of type {} is not text; forktrail imports text parts only",
                    kind.unwrap_or("(none)")
                ))
            }
        }
    }
    Ok(texts.join("\n\n"))
}

/// Splits `text` into `(line number, line)` of its non-blank lines.
fn lines(text: &str) -> Vec<(u64, &str)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i as u64 + 1, l))
        .collect()
}

fn invalid(line: u64, why: impl std::fmt::Display) -> Error {
    Error::InvalidInput(format!("line {line}: {why}; nothing was imported"))
}

impl Store {
    /// Imports an OpenAI chat transcript (a JSON array of messages, or JSONL with one
    /// message per line) as one new root session, all or nothing.
    pub fn import_openai(
        &self,
        text: &str,
        session: NewSession,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let mut report = TranscriptReport::default();
        let mut messages: Vec<(u64, std::result::Result<Value, String>)> = Vec::new();
        if text.trim_start().starts_with('[') {
            let all: Vec<Value> = serde_json::from_str(text).map_err(|e| {
                invalid(
                    e.line() as u64,
                    format!("not a JSON array of messages: {e}"),
                )
            })?;
            messages.extend(
                all.into_iter()
                    .enumerate()
                    .map(|(i, m)| (i as u64 + 1, Ok(m))),
            );
        } else {
            for (n, line) in lines(text) {
                messages.push((n, serde_json::from_str(line).map_err(|e| e.to_string())));
            }
        }
        let where_ = if text.trim_start().starts_with('[') {
            "message"
        } else {
            "line"
        };
        let scratch = Store::in_memory()?.with_base_iri(&self.iris.base)?;
        let id = scratch.create_session(session)?;
        let total = messages.len() as u64;
        for (done, (n, message)) in messages.into_iter().enumerate() {
            let turn = message.and_then(|m| openai_turn(&m));
            match turn {
                Ok(turn) => {
                    scratch.append(&id, turn).map_err(|e| {
                        Error::InvalidInput(format!("{where_} {n}: {e}; nothing was imported"))
                    })?;
                    report.turns += 1;
                }
                Err(_) if options.skip_invalid => report.skipped_invalid.push(n),
                Err(why) => {
                    return Err(Error::InvalidInput(format!(
                        "{where_} {n}: {why}; nothing was imported"
                    )))
                }
            }
            if let Some(progress) = options.progress {
                progress(done as u64 + 1, total);
            }
        }
        report.sessions = self.take_from(&scratch)?;
        Ok(report)
    }

    /// Imports a Claude Code session log (JSONL). The main chain becomes a session;
    /// where a message has several children, each alternative after the first becomes
    /// a fork at that point; sidechains become child sessions. Lines of other types are
    /// skipped and counted. All or nothing.
    pub fn import_claude_code(
        &self,
        text: &str,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let mut report = TranscriptReport::default();
        let mut nodes: Vec<Node> = Vec::new();
        let mut by_uuid: HashMap<String, usize> = HashMap::new();
        // Skipped lines that sit in the chain (system lines): their children hang on.
        let mut passthrough: HashMap<String, Option<String>> = HashMap::new();
        let mut log_id = None;
        let all = lines(text);
        let total = all.len() as u64;
        for (done, (n, line)) in all.into_iter().enumerate() {
            if let Some(progress) = options.progress {
                progress(done as u64 + 1, total);
            }
            let parsed = serde_json::from_str::<Value>(line)
                .map_err(|e| e.to_string())
                .and_then(|v| claude_line(&v));
            match parsed {
                Ok(Line::Message(node)) => {
                    if let Some(&first) = by_uuid.get(&node.uuid) {
                        let why = format!(
                            "uuid {} was already used on line {}",
                            node.uuid, nodes[first].line
                        );
                        if options.skip_invalid {
                            report.skipped_invalid.push(n);
                            continue;
                        }
                        return Err(invalid(n, why));
                    }
                    log_id = log_id.or(node.log_session.clone());
                    by_uuid.insert(node.uuid.clone(), nodes.len());
                    nodes.push(Node { line: n, ..node });
                }
                Ok(Line::Other { kind, uuid, parent }) => {
                    *report.skipped_types.entry(kind).or_default() += 1;
                    if let Some(uuid) = uuid {
                        passthrough.insert(uuid, parent);
                    }
                }
                Err(_) if options.skip_invalid => report.skipped_invalid.push(n),
                Err(why) => return Err(invalid(n, why)),
            }
        }
        // Resolve each parent through skipped lines to a message node.
        let resolve = |mut parent: Option<String>| -> Option<usize> {
            for _ in 0..=passthrough.len() {
                let uuid = parent?;
                if let Some(&i) = by_uuid.get(&uuid) {
                    return Some(i);
                }
                parent = passthrough.get(&uuid).cloned().flatten();
            }
            None
        };
        let parents: Vec<Option<usize>> = nodes.iter().map(|n| resolve(n.parent.clone())).collect();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        for (i, p) in parents.iter().enumerate() {
            if let Some(p) = p {
                children[*p].push(i);
            }
        }
        let scratch = Store::in_memory()?.with_base_iri(&self.iris.base)?;
        let mut sessions: Vec<SessionId> = Vec::new();
        let mut main: Option<SessionId> = None;
        // Work items: a chain to follow from `start`, in a session made by `origin`.
        let mut work: Vec<(usize, Origin)> = Vec::new();
        for (i, node) in nodes.iter().enumerate().rev() {
            if parents[i].is_none() {
                let origin = if node.sidechain {
                    Origin::Sidechain
                } else {
                    Origin::Root
                };
                work.push((i, origin));
            }
        }
        // Roots first (the first root is the main session), then what they branch into.
        work.sort_by_key(|(i, origin)| (matches!(origin, Origin::Sidechain), *i));
        work.reverse();
        let mut visited = vec![false; nodes.len()];
        let mut alternatives = 0;
        let mut sidechains = 0;
        while let Some((start, origin)) = work.pop() {
            let (session, mut length) = match origin {
                Origin::Root => {
                    let id = scratch.create_session(NewSession {
                        id: if main.is_none() { log_id.clone() } else { None },
                        title: log_id.as_ref().map(|l| format!("claude-code {l}")),
                        principal: None,
                    })?;
                    main.get_or_insert(id.clone());
                    (id, 0)
                }
                Origin::Fork {
                    ref from,
                    at,
                    sidechain,
                } => {
                    let label = if sidechain {
                        sidechains += 1;
                        format!("sidechain-{sidechains}")
                    } else {
                        alternatives += 1;
                        format!("alt-{alternatives}")
                    };
                    let plan = scratch
                        .fork(
                            from,
                            ForkOptions {
                                at: Some(at as i64),
                                label: Some(label),
                                reason: Some("imported from Claude Code".into()),
                                ..Default::default()
                            },
                        )
                        .map_err(|e| invalid(nodes[start].line, e))?;
                    (SessionId::new(plan.session)?, at)
                }
                Origin::Sidechain => {
                    let Some(main) = &main else {
                        return Err(invalid(
                            nodes[start].line,
                            "a sidechain with no main conversation to attach it to",
                        ));
                    };
                    work.push((
                        start,
                        Origin::Fork {
                            from: main.clone(),
                            at: 0,
                            sidechain: true,
                        },
                    ));
                    continue;
                }
            };
            sessions.push(session.clone());
            let mut at = start;
            loop {
                visited[at] = true;
                for turn in nodes[at].turns.clone() {
                    scratch
                        .append(&session, turn)
                        .map_err(|e| invalid(nodes[at].line, e))?;
                    report.turns += 1;
                    length += 1;
                }
                let (same, side): (Vec<usize>, Vec<usize>) = children[at]
                    .iter()
                    .partition(|&&c| nodes[c].sidechain == nodes[at].sidechain);
                for &c in side.iter().rev() {
                    work.push((
                        c,
                        Origin::Fork {
                            from: session.clone(),
                            at: length,
                            sidechain: true,
                        },
                    ));
                }
                for &c in same.iter().skip(1).rev() {
                    work.push((
                        c,
                        Origin::Fork {
                            from: session.clone(),
                            at: length,
                            sidechain: false,
                        },
                    ));
                }
                match same.first() {
                    Some(&next) => at = next,
                    None => break,
                }
            }
        }
        // Messages whose parentUuid chain loops never hang from a root.
        for (i, node) in nodes.iter().enumerate() {
            if !visited[i] {
                if options.skip_invalid {
                    report.skipped_invalid.push(node.line);
                } else {
                    return Err(invalid(
                        node.line,
                        format!(
                            "the parentUuid chain of message {} loops back on itself",
                            node.uuid
                        ),
                    ));
                }
            }
        }
        report.skipped_invalid.sort_unstable();
        if sessions.is_empty() {
            return Err(Error::InvalidInput(
                "the file holds no user or assistant message; nothing was imported".into(),
            ));
        }
        report.sessions = self.take_from(&scratch)?;
        // Keep the creation order: main first.
        let order: HashMap<&str, usize> = sessions
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), i))
            .collect();
        report
            .sessions
            .sort_by_key(|s| order.get(s.as_str()).copied().unwrap_or(usize::MAX));
        Ok(report)
    }

    /// Moves every session of `scratch` into this store in one validated transaction.
    fn take_from(&self, scratch: &Store) -> Result<Vec<String>> {
        let mut quads = Vec::new();
        scratch.export(None, crate::io::ExportFormat::NQuads, &mut quads)?;
        self.import(quads.as_slice(), ImportFormat::NQuads)
    }

    /// The assembled replay of `session` as OpenAI chat messages (`role`, `content`,
    /// and `name`, `tool_calls`, `tool_call_id` where the turn has them).
    pub fn export_openai(&self, session: &SessionId) -> Result<Vec<Value>> {
        openai_messages(&self.load(session, None)?)
    }
}

/// Turns as OpenAI chat messages.
pub(crate) fn openai_messages(turns: &[crate::Turn]) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for turn in turns {
        let mut m = Map::new();
        m.insert("role".into(), json!(turn.role.as_str()));
        let null_content = turn.kind == Kind::ToolCall && turn.content.is_empty();
        m.insert(
            "content".into(),
            if null_content {
                Value::Null
            } else {
                json!(turn.content)
            },
        );
        if let Some(name) = &turn.name {
            m.insert("name".into(), json!(name));
        }
        if let Some(calls) = &turn.tool_calls {
            let calls: Value = serde_json::from_str(calls).map_err(|e| Error::Corrupt {
                session: turn.session.clone(),
                detail: format!("turn {} has tool_calls that are not JSON: {e}", turn.index),
            })?;
            m.insert("tool_calls".into(), calls);
        }
        if let Some(id) = &turn.tool_call_id {
            m.insert("tool_call_id".into(), json!(id));
        }
        out.push(Value::Object(m));
    }
    Ok(out)
}

/// A message line of a Claude Code log and the turns it becomes.
#[derive(Clone, Debug, Default)]
struct Node {
    line: u64,
    uuid: String,
    parent: Option<String>,
    sidechain: bool,
    log_session: Option<String>,
    turns: Vec<NewTurn>,
}

enum Line {
    Message(Node),
    Other {
        kind: String,
        uuid: Option<String>,
        parent: Option<String>,
    },
}

enum Origin {
    Root,
    Sidechain,
    Fork {
        from: SessionId,
        at: u64,
        sidechain: bool,
    },
}

fn claude_line(v: &Value) -> std::result::Result<Line, String> {
    let text = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let kind = text("type").ok_or("a line needs a \"type\"")?;
    if kind != "user" && kind != "assistant" {
        return Ok(Line::Other {
            kind,
            uuid: text("uuid"),
            parent: text("parentUuid"),
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
                        let content = match block.get("content") {
                            Some(Value::String(s)) => s.clone(),
                            Some(Value::Array(parts)) => parts
                                .iter()
                                .filter_map(|p| p.get("text").and_then(Value::as_str))
                                .collect::<Vec<_>>()
                                .join("\n\n"),
                            _ => String::new(),
                        };
                        let mut t = NewTurn::new(Role::Tool, content);
                        if let Some(id) = block.get("tool_use_id").and_then(Value::as_str) {
                            t = t.tool_call_id(id);
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
        line: 0,
        uuid,
        parent: text("parentUuid"),
        sidechain: v
            .get("isSidechain")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        log_session: text("sessionId"),
        turns,
    }))
}
