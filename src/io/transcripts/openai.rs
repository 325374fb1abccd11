//! OpenAI chat messages: a transcript (JSON array or JSONL) in, a session's replay out.
//!
//! Every turn is checked as `append` checks it before anything is written; the session
//! then goes in whole through the bulk loader (see `io::root`), or not at all.

use crate::error::{Error, Result};
use crate::io::report::{lines, without_bom, TranscriptOptions, TranscriptReport};
use crate::io::root::RootBuilder;
use crate::model::{Agent, Kind, NewSession, NewTurn, Role, SessionId, Turn};
use crate::store::Store;
use serde_json::{json, Map, Value};

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
        let text = without_bom(text);
        let mut report = TranscriptReport::default();
        let mut messages: Vec<(u64, std::result::Result<Value, String>)> = Vec::new();
        if text.trim_start().starts_with('[') {
            let all: Vec<Value> = serde_json::from_str(text).map_err(|e| {
                invalid(
                    e.line() as u64,
                    match e.classify() {
                        // Broken JSON, not the wrong shape: say so first.
                        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                            format!(
                                "the file is not valid JSON ({e}), so not a JSON array of messages"
                            )
                        }
                        _ => format!("not a JSON array of messages: {e}"),
                    },
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
        let mut root = RootBuilder::new(self.limits, session)?;
        for (n, message) in messages {
            match message.and_then(|m| openai_turn(&m)) {
                Ok(turn) => {
                    root.append(turn).map_err(|e| {
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
        }
        report.added(self.add_root(root, options)?);
        Ok(report)
    }

    /// The assembled replay of `session` as OpenAI chat messages (`role`, `content`,
    /// and `name`, `tool_calls`, `tool_call_id` where the turn has them).
    pub fn export_openai(&self, session: &SessionId) -> Result<Vec<Value>> {
        openai_messages(&self.load(session, None)?)
    }
}

/// Turns as OpenAI chat messages.
pub(crate) fn openai_messages(turns: &[Turn]) -> Result<Vec<Value>> {
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
                session: turn.session.to_string(),
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
