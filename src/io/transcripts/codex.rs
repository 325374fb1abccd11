//! OpenAI Codex CLI rollouts in: the JSONL transcript Codex writes for each session
//! (`~/.codex/sessions/YYYY/MM/DD/rollout-….jsonl`).
//!
//! Each line is `{"timestamp", "type", "payload"}`, the type one of `session_meta` (the
//! session's id, cwd, CLI version, …), `response_item` (what the model saw or said: a
//! message, a reasoning item, a tool call or its output, …), `turn_context` (the model
//! and policies of the turns that follow), `compacted` (the summary that replaced the
//! history before it) and `event_msg` (what the UI was shown). Rollouts of the first
//! Codex CLI releases have no envelope: a bare session meta object on the first line,
//! then bare response items and `{"record_type": "state"}` lines; both are read.
//!
//! A rollout becomes one new root session named by its `session_meta` id. Messages,
//! reasoning summaries, tool calls and their outputs become turns in file order;
//! `turn_context` gives the model assistant turns are attributed to. Lines of other
//! types are counted by type in the report, never dropped unsaid. Importing a rollout
//! again appends what it gained since (nothing if nothing); one that does not start
//! with the stored turns is refused.
//!
//! Every turn is checked as `append` checks it before anything is written; the session
//! then goes in whole through the bulk loader (see `io::root`), or not at all.

use crate::error::{Error, Result};
use crate::io::lines::{self, LogLine};
use crate::io::report::{Skipped, TranscriptOptions, TranscriptReport};
use crate::io::root::RootBuilder;
use crate::model::{Kind, NewSession, NewTurn, Role, SessionId};
use crate::store::Store;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// The line types of a rollout (the `type` beside `payload`).
pub(in crate::io) const LINE_TYPES: [&str; 5] = [
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
];

/// Whether a JSON object is a rollout line: a `type` Codex writes, and a `payload`.
pub(in crate::io) fn is_rollout_line(object: &Map<String, Value>) -> bool {
    object.contains_key("payload")
        && object
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| LINE_TYPES.contains(&t))
}

/// Whether a JSON object is the first line of an early rollout: a bare session meta
/// (`id`, `timestamp`), with neither the `type` of a line nor the `role` of a message.
pub(in crate::io) fn is_early_rollout_meta(object: &Map<String, Value>) -> bool {
    object.get("id").is_some_and(Value::is_string)
        && object.get("timestamp").is_some_and(Value::is_string)
        && !object.contains_key("type")
        && !object.contains_key("role")
}

impl Store {
    /// Imports an OpenAI Codex CLI rollout (JSONL) as one new root session, all or
    /// nothing. The session is named by the rollout's `session_meta` id (if it has none
    /// that is a valid session id, `codex-` and a digest of its first line, the same on
    /// every import) and titled `codex <id>`; a rollout whose session is already in the
    /// store gets the turns it gained since appended (see `extend_rollout`).
    ///
    /// - `message` items become turns of their role (`developer` is read as `system`),
    ///   their text parts joined by blank lines; images are left out.
    /// - `reasoning` items become `note` turns of the assistant holding their summary
    ///   (or their reasoning text when they have no summary): what the model noted on
    ///   its way to an answer, not something it said to anyone, which is what a `note`
    ///   is; encrypted reasoning has no text and is not kept.
    /// - `function_call`, `custom_tool_call` and `local_shell_call` items become
    ///   assistant `tool_call` turns with empty content and `tool_calls` in the OpenAI
    ///   chat shape (a local shell call is the function `local_shell`, its action JSON
    ///   the arguments); their outputs become `tool` turns carrying the call's id and
    ///   the name of the tool it called.
    /// - `compacted` lines become assistant `compaction` turns holding the summary.
    /// - `turn_context` lines set the model later assistant turns are attributed to.
    /// - `event_msg` user and agent messages become turns when no `response_item`
    ///   message of the same role and text is in the rollout (some versions wrote only
    ///   events).
    ///
    /// Everything else (other events, `turn_context` itself, later `session_meta` lines,
    /// response items of other types such as `web_search_call`, items with no text) is
    /// counted by type in [`TranscriptReport::skipped_types`]. A malformed line, or an
    /// output for a call no earlier line makes, refuses the import naming the line,
    /// unless `skip_invalid`.
    pub fn import_codex(
        &self,
        text: &str,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        self.import_codex_lines(lines::lines_of(text.as_bytes(), options), options)
    }

    /// Imports a Codex CLI rollout given as its lines (see [`Store::import_codex`]).
    pub(in crate::io) fn import_codex_lines(
        &self,
        lines: Vec<LogLine>,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let mut report = TranscriptReport::default();
        let items = read_items(&lines);

        let mut root = self.rollout_root(&lines, &items)?;
        let declared_parent = forked_from(&items);

        // The messages response items carry: an event showing one of them repeats it;
        // an event with no such item is the only record of its message.
        let itemized: std::collections::HashSet<(Role, String)> = items
            .iter()
            .filter_map(|(_, item)| match item {
                Ok(Item::Turn(turn, Call::None)) if turn.kind == Kind::Message => {
                    Some((turn.role, turn.content.trim().to_string()))
                }
                _ => None,
            })
            .collect();
        let mut model: Option<String> = None;
        // Tool call id -> the name of the tool it calls, for the outputs that answer it.
        let mut calls: HashMap<String, String> = HashMap::new();
        let mut seen_meta = false;
        for (n, item) in items {
            let step = item.and_then(|item| match item {
                Item::Meta { .. } if !seen_meta => {
                    seen_meta = true;
                    Ok(Step::Nothing)
                }
                Item::Meta { .. } => Ok(Step::Skip("session_meta".into())),
                Item::Context { model: m } => {
                    if m.is_some() {
                        model = m;
                    }
                    Ok(Step::Skip("turn_context".into()))
                }
                Item::Skipped(kind) => Ok(Step::Skip(kind)),
                Item::Event(turn)
                    if itemized.contains(&(turn.role, turn.content.trim().to_string())) =>
                {
                    Ok(Step::Skip("event_msg".into()))
                }
                Item::Event(mut turn) => {
                    if let (Role::Assistant, Some(model)) = (turn.role, &model) {
                        turn.model = Some(model.clone());
                    }
                    Ok(Step::Append(*turn, None))
                }
                Item::Turn(turn, call) => {
                    let mut turn = *turn;
                    let mut makes = None;
                    match call {
                        Call::None => {}
                        Call::Makes { id, name } => makes = Some((id, name)),
                        Call::Answers(id) => {
                            let Some(name) = calls.get(&id) else {
                                return Err(format!(
                                    "an output for call {id:?}, which no earlier line makes"
                                ));
                            };
                            turn = turn.name(name.clone()).tool_call_id(id);
                        }
                    }
                    if let (Role::Assistant, Some(model)) = (turn.role, &model) {
                        turn = turn.model(model.clone());
                    }
                    Ok(Step::Append(turn, makes))
                }
            });
            match step {
                Ok(Step::Nothing) => {}
                Ok(Step::Skip(kind)) => *report.skipped_types.entry(kind).or_default() += 1,
                // A turn the write path refuses (a tool name with a space, say) is a
                // malformed line like any other; a refused append leaves no trace.
                Ok(Step::Append(turn, makes)) => match root.append(turn) {
                    Ok(_) => {
                        report.turns += 1;
                        // Only a call that was written can be answered.
                        if let Some((id, name)) = makes {
                            calls.insert(id, name);
                        }
                    }
                    Err(e) if options.skip_invalid => skip(&mut report, n, e),
                    Err(e) => return Err(invalid(n, e)),
                },
                Err(why) if options.skip_invalid => skip(&mut report, n, why),
                Err(why) => return Err(invalid(n, why)),
            }
        }
        if report.turns == 0 {
            return Err(Error::InvalidInput(
                "the rollout holds no message, reasoning summary, tool call or compaction; \
                 nothing was imported"
                    .into(),
            ));
        }
        let id = root.id().clone();
        let mut report = if self.exists(&id)? {
            self.extend_rollout(root, report)?
        } else {
            // A fork rollout whose parent is not here yet waits for it (see `adopt`).
            if let Some(parent) = declared_parent.filter(|p| *p != id) {
                if !self.exists(&parent)? {
                    root.awaits(parent);
                }
            }
            report.added(self.add_root(root, options)?);
            report
        };
        // Fork rollouts imported before this one, waiting for it, become its forks
        // (again on a later import, should that once have failed).
        report.shared.extend(self.adopt_awaiting(&id)?);
        Ok(report)
    }

    /// A rollout whose session is stored already: imported before, and perhaps grown
    /// since (Codex appends to a rollout as the session goes on). If the stored turns
    /// are where the rollout starts (the digest of the last equals the rollout's at that
    /// index), the turns past them are appended, all or none; if there are none, nothing
    /// is written. A rollout that does not start with the stored turns is refused.
    fn extend_rollout(
        &self,
        root: RootBuilder,
        mut report: TranscriptReport,
    ) -> Result<TranscriptReport> {
        let id = root.id().clone();
        let turns = root.into_turns();
        let stored = self.info(&id)?.length;
        let mut prev = String::new();
        let mut at_end = None;
        for (index, turn) in turns.iter().enumerate().take(stored as usize) {
            prev = crate::rdf::turn_digest(&prev, index as u64, turn);
            at_end = Some(prev.clone());
        }
        let held = match stored {
            0 => None,
            k => Some(self.digest_in_chain(&self.chain(&id)?, k - 1)?),
        };
        if (turns.len() as u64) < stored || held != at_end {
            return Err(Error::Conflict(format!(
                "session {id} already exists and does not hold the start of this Codex \
                 rollout (another session has its id, or the rollout was edited); delete \
                 it first or import into another store"
            )));
        }
        let new: Vec<NewTurn> = turns.into_iter().skip(stored as usize).collect();
        report.turns = new.len() as u64;
        if !new.is_empty() {
            self.append_many(&id, new)?;
            report.extended = vec![id];
        }
        Ok(report)
    }

    /// The new root session a rollout goes into: named by its `session_meta` id (or,
    /// without a usable one, by a digest of its first line).
    fn rollout_root(
        &self,
        lines: &[LogLine],
        items: &[(u64, std::result::Result<Item, String>)],
    ) -> Result<RootBuilder> {
        let meta_id = items.iter().find_map(|(_, item)| match item {
            Ok(Item::Meta { id, .. }) => Some(id.clone()),
            _ => None,
        });
        // A rollout without a usable id is named by its first line (its session meta,
        // with the start time, or its first item), so importing it again is refused
        // like any other re-import, and the same rollout grown longer keeps its name.
        let id = match meta_id.clone().flatten().map(SessionId::new) {
            Some(Ok(id)) => id,
            _ => {
                let first = lines
                    .iter()
                    .find_map(|(_, line)| line.as_deref().ok())
                    .unwrap_or("");
                let digest = crate::rdf::sha256_hex(&[first.trim().as_bytes()]);
                SessionId::new(format!("codex-{}", &digest[..32]))?
            }
        };
        let title = match meta_id.flatten() {
            Some(raw) => format!("codex {raw}"),
            None => "codex rollout".into(),
        };
        RootBuilder::new(
            self.limits,
            NewSession {
                id: Some(id.to_string()),
                title: Some(title),
                principal: None,
            },
        )
    }
}

/// The session a rollout's first `session_meta` says it was forked from, if a valid id.
fn forked_from(items: &[(u64, std::result::Result<Item, String>)]) -> Option<SessionId> {
    items.iter().find_map(|(_, item)| match item {
        Ok(Item::Meta { forked_from, .. }) => {
            Some(forked_from.as_deref().and_then(|f| SessionId::new(f).ok()))
        }
        _ => None,
    })?
}

/// Each non-blank line of a rollout, numbered, read as what it holds (or why not). An
/// early rollout (a bare session meta first, bare items after) is read as such.
fn read_items(all: &[LogLine]) -> Vec<(u64, std::result::Result<Item, String>)> {
    let early = all.first().is_some_and(|(_, first)| {
        first
            .as_deref()
            .ok()
            .and_then(|first| serde_json::from_str::<Value>(first).ok())
            .and_then(|v| v.as_object().map(is_early_rollout_meta))
            .unwrap_or(false)
    });
    all.iter()
        .enumerate()
        .map(|(i, (n, line))| {
            let item = line
                .as_deref()
                .map_err(ToString::to_string)
                .and_then(|line| {
                    serde_json::from_str::<Value>(line).map_err(|e| format!("not JSON: {e}"))
                })
                .and_then(|v| match (early, i) {
                    (true, 0) => early_meta(&v),
                    (true, _) => early_line(v, *n),
                    (false, _) => rollout_line(v, *n),
                });
            (*n, item)
        })
        .collect()
}

/// What one line of a rollout holds.
enum Item {
    /// A `session_meta`: the first names the session, and the session it was forked
    /// from (`forked_from_id`, written by `codex fork`).
    Meta {
        id: Option<String>,
        forked_from: Option<String>,
    },
    /// A `turn_context`, with the model of the turns that follow.
    Context { model: Option<String> },
    /// A turn, and the tool call it makes or answers.
    Turn(Box<NewTurn>, Call),
    /// A user or agent message the UI was shown (`event_msg`): a turn only when no
    /// `response_item` carries the same message (early versions wrote only these).
    Event(Box<NewTurn>),
    /// A line forktrail does not import, by type.
    Skipped(String),
}

/// What a line does to the session being built.
enum Step {
    Nothing,
    /// Counted in the report under this type.
    Skip(String),
    /// A turn, and the call `(id, tool name)` it makes.
    Append(NewTurn, Option<(String, String)>),
}

/// The tool call a turn makes or answers.
enum Call {
    None,
    Makes {
        id: String,
        name: String,
    },
    /// An output: the call's id (its tool's name is filled in from the call).
    Answers(String),
}

/// Notes a line skipped under `skip_invalid`, and why.
fn skip(report: &mut TranscriptReport, line: u64, why: impl std::fmt::Display) {
    report.skipped_invalid.push(line);
    report.skipped.push(Skipped {
        file: None,
        line: Some(line),
        why: why.to_string(),
    });
}

fn invalid(line: u64, why: impl std::fmt::Display) -> Error {
    Error::InvalidInput(format!("line {line}: {why}; nothing was imported"))
}

/// A line `{"timestamp", "type", "payload"}`.
fn rollout_line(value: Value, n: u64) -> std::result::Result<Item, String> {
    let Value::Object(mut line) = value else {
        return Err("a rollout line must be a JSON object".into());
    };
    let kind = match line.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        _ => return Err("a rollout line needs a \"type\" (a string)".into()),
    };
    if !LINE_TYPES.contains(&kind.as_str()) {
        return Ok(Item::Skipped(kind));
    }
    let payload = match line.remove("payload") {
        Some(Value::Object(payload)) => payload,
        Some(_) => return Err(format!("the payload of a {kind} line must be an object")),
        None => return Err(format!("a {kind} line needs a \"payload\"")),
    };
    match kind.as_str() {
        "session_meta" => Ok(Item::Meta {
            id: string(&payload, "id"),
            forked_from: string(&payload, "forked_from_id"),
        }),
        "turn_context" => Ok(Item::Context {
            model: string(&payload, "model"),
        }),
        "compacted" => {
            let message = payload
                .get("message")
                .and_then(Value::as_str)
                .ok_or("a compacted line needs a \"message\" (a string)")?;
            if message.trim().is_empty() {
                return Ok(Item::Skipped("compacted (no message)".into()));
            }
            let turn = NewTurn::new(Role::Assistant, message).kind(Kind::Compaction);
            Ok(Item::Turn(Box::new(turn), Call::None))
        }
        "response_item" => response_item(payload, n),
        "event_msg" => {
            let role = match payload.get("type").and_then(Value::as_str) {
                Some("user_message") => Role::User,
                Some("agent_message") => Role::Assistant,
                _ => return Ok(Item::Skipped(kind)),
            };
            match payload.get("message").and_then(Value::as_str) {
                Some(text) if !text.trim().is_empty() => {
                    Ok(Item::Event(Box::new(NewTurn::new(role, text))))
                }
                _ => Ok(Item::Skipped(kind)),
            }
        }
        _ => Ok(Item::Skipped(kind)),
    }
}

/// The first line of an early rollout: a bare session meta.
fn early_meta(value: &Value) -> std::result::Result<Item, String> {
    let object = value
        .as_object()
        .ok_or("the session meta must be an object")?;
    Ok(Item::Meta {
        id: string(object, "id"),
        forked_from: None,
    })
}

/// A later line of an early rollout: a bare response item or a `record_type` line.
fn early_line(value: Value, n: u64) -> std::result::Result<Item, String> {
    let Value::Object(object) = value else {
        return Err("a rollout line must be a JSON object".into());
    };
    if let Some(record) = object.get("record_type") {
        let record = record.as_str().ok_or("\"record_type\" must be a string")?;
        return Ok(Item::Skipped(record.to_string()));
    }
    response_item(object, n)
}

/// A response item (the payload of a `response_item` line).
fn response_item(item: Map<String, Value>, n: u64) -> std::result::Result<Item, String> {
    let kind = string(&item, "type").ok_or("a response item needs a \"type\" (a string)")?;
    let skipped = |what: &str| Ok(Item::Skipped(format!("response_item/{kind}{what}")));
    match kind.as_str() {
        "message" => {
            let role = match item.get("role").and_then(Value::as_str) {
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                Some("system") | Some("developer") => Role::System,
                Some(other) => return Err(format!("a message of unknown role {other:?}")),
                None => return Err("a message needs a \"role\" (a string)".into()),
            };
            let parts = item
                .get("content")
                .and_then(Value::as_array)
                .ok_or("a message needs \"content\" (an array of parts)")?;
            let text = text_of_parts(parts, &["input_text", "output_text", "text"])?;
            if text.is_empty() {
                return skipped(" (no text)");
            }
            Ok(Item::Turn(Box::new(NewTurn::new(role, text)), Call::None))
        }
        "reasoning" => {
            let mut text = match item.get("summary") {
                Some(Value::Array(parts)) => text_of_parts(parts, &["summary_text"])?,
                None | Some(Value::Null) => String::new(),
                Some(_) => return Err("a reasoning item's \"summary\" must be an array".into()),
            };
            if text.is_empty() {
                if let Some(Value::Array(parts)) = item.get("content") {
                    text = text_of_parts(parts, &["reasoning_text", "text"])?;
                }
            }
            if text.is_empty() {
                return skipped(" (no summary)");
            }
            let turn = NewTurn::new(Role::Assistant, text).kind(Kind::Note);
            Ok(Item::Turn(Box::new(turn), Call::None))
        }
        "function_call" => {
            let arguments = match item.get("arguments") {
                Some(Value::String(text)) => text.clone(),
                Some(other @ Value::Object(_)) => other.to_string(),
                _ => return Err("a function_call needs \"arguments\" (a string)".into()),
            };
            let name = required(&item, "function_call", "name")?;
            let id = required(&item, "function_call", "call_id")?;
            Ok(tool_call(id, name, arguments))
        }
        "custom_tool_call" => {
            let name = required(&item, "custom_tool_call", "name")?;
            let id = required(&item, "custom_tool_call", "call_id")?;
            let input = required(&item, "custom_tool_call", "input")?;
            Ok(tool_call(id, name, input))
        }
        "local_shell_call" => {
            let action = item
                .get("action")
                .filter(|a| a.is_object())
                .ok_or("a local_shell_call needs an \"action\" (an object)")?;
            // Chat-completions calls carry no call_id (and nothing can answer them):
            // the line number stands in, so that the call still reads as one.
            let id = string(&item, "call_id").unwrap_or_else(|| format!("line-{n}"));
            Ok(tool_call(id, "local_shell".into(), action.to_string()))
        }
        "function_call_output" | "custom_tool_call_output" => {
            let id = required(&item, &kind, "call_id")?;
            let output = match item.get("output") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) => text_of_parts(parts, &["input_text", "output_text"])?,
                // Not what Codex writes, but what some tools that rewrite rollouts do.
                Some(Value::Object(o)) if o.get("content").is_some_and(Value::is_string) => {
                    string(o, "content").unwrap_or_default()
                }
                _ => {
                    return Err(format!(
                        "a {kind} needs an \"output\" (a string or an array of parts)"
                    ))
                }
            };
            Ok(Item::Turn(
                Box::new(NewTurn::new(Role::Tool, output)),
                Call::Answers(id),
            ))
        }
        _ => skipped(""),
    }
}

/// An assistant turn that calls one tool, in the OpenAI chat shape.
fn tool_call(id: String, name: String, arguments: String) -> Item {
    let calls = json!([{
        "id": id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }]);
    let turn = NewTurn::new(Role::Assistant, "")
        .kind(Kind::ToolCall)
        .tool_calls(calls.to_string());
    Item::Turn(Box::new(turn), Call::Makes { id, name })
}

/// The text of the parts whose type is one of `text_types`, joined by blank lines;
/// other parts (images) are left out.
fn text_of_parts(parts: &[Value], text_types: &[&str]) -> std::result::Result<String, String> {
    let mut texts = Vec::new();
    for part in parts {
        let part = part.as_object().ok_or("a content part must be an object")?;
        let kind = part.get("type").and_then(Value::as_str);
        if kind.is_some_and(|k| text_types.contains(&k)) {
            let text = part
                .get("text")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("a {} part needs a \"text\"", kind.unwrap_or("")))?;
            if !text.is_empty() {
                texts.push(text);
            }
        }
    }
    Ok(texts.join("\n\n"))
}

fn string(object: &Map<String, Value>, key: &str) -> Option<String> {
    object.get(key).and_then(Value::as_str).map(str::to_string)
}

fn required(
    object: &Map<String, Value>,
    what: &str,
    key: &str,
) -> std::result::Result<String, String> {
    string(object, key).ok_or_else(|| format!("a {what} needs a \"{key}\" (a string)"))
}
