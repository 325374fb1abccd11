//! The Anthropic Messages API (`POST /v1/messages`): a request's messages as turns, an
//! answer (a message, or its stream of events) as one assistant turn.
//!
//! A user message that carries tool results becomes one `tool` turn per result (and a
//! `user` turn for each run of other blocks), the later ones marked as continuing the
//! message, so that parallel tool calls stay one assistant step followed by their
//! results, as forktrail models them, and the message is rebuilt whole.

use super::{kept, normalized, payload, text_of, Conversation, Reply, Usage, CONTINUES};
use crate::model::{Kind, NewTurn, Role};
use serde_json::{json, Map, Value};

/// The conversation of a request body.
pub(crate) fn read_request(body: &Value) -> Result<Conversation, String> {
    let object = body.as_object().ok_or("the request is not a JSON object")?;
    let messages = object
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("the request has no \"messages\" array")?;
    let mut out = Conversation::default();
    let (mut instructions, mut whole) = (Vec::new(), 0);
    for (i, message) in messages.iter().enumerate() {
        let mut raw = kept(message);
        let reminders = reminders(&mut raw);
        let emptied = !reminders.is_empty()
            && raw
                .get("content")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty);
        if raw.get("role").and_then(Value::as_str) == Some("system") || emptied {
            instructions.push(json!([i, kept(message)]));
            whole += 1;
            continue;
        }
        instructions.extend(reminders.into_iter().map(|(b, block)| json!([i, b, block])));
        let turns = message_turns(&raw).map_err(|e| format!("message {i}: {e}"))?;
        let payloads: Vec<Option<&str>> = turns.iter().map(|t| t.payload.as_deref()).collect();
        let rebuilt = super::messages_of(&payloads)?;
        if rebuilt.first() != Some(&raw) {
            out.overrides.push((i - whole, raw));
        }
        out.turns.extend(turns);
    }
    out.context = super::context_of(object, "messages", instructions);
    Ok(out)
}

/// Takes out of a user message the blocks a harness adds to tell the model about its
/// environment (Claude Code's `<system-reminder>` text blocks: the working directory,
/// the date, what changed): they are the call's instructions, like the system prompt,
/// and differ between calls of one conversation (a resumed session carries others).
/// Returns them with their places.
fn reminders(message: &mut Value) -> Vec<(usize, Value)> {
    if message.get("role").and_then(Value::as_str) != Some("user") {
        return Vec::new();
    }
    let Some(Value::Array(blocks)) = message.get_mut("content") else {
        return Vec::new();
    };
    let is_reminder = |b: &Value| {
        b.get("type").and_then(Value::as_str) == Some("text")
            && b.get("text")
                .and_then(Value::as_str)
                .is_some_and(|t| t.trim_start().starts_with("<system-reminder>"))
    };
    let mut out = Vec::new();
    let mut kept_blocks = Vec::new();
    for (i, block) in blocks.drain(..).enumerate() {
        if is_reminder(&block) {
            out.push((i, block));
        } else {
            kept_blocks.push(block);
        }
    }
    *blocks = kept_blocks;
    out
}

/// The turns of one message (already [`kept`]).
pub(crate) fn message_turns(message: &Value) -> Result<Vec<NewTurn>, String> {
    let norm = normalized(message);
    let role = norm.get("role").and_then(Value::as_str);
    let content = norm.get("content");
    match role {
        Some("assistant") => Ok(vec![assistant_turn(&norm)]),
        Some("user") => {
            let Some(Value::Array(blocks)) = content else {
                let turn = NewTurn::new(Role::User, text_of(content)).payload(payload(&norm));
                return Ok(vec![turn]);
            };
            // Runs of blocks: each tool result alone, other blocks together.
            let mut groups: Vec<Vec<Value>> = Vec::new();
            for block in blocks {
                let is_result = block.get("type").and_then(Value::as_str) == Some("tool_result");
                let joins = !is_result
                    && groups.last().is_some_and(|g| {
                        g.last().and_then(|b| b.get("type")).and_then(Value::as_str)
                            != Some("tool_result")
                    });
                match groups.last_mut() {
                    Some(group) if joins => group.push(block.clone()),
                    _ => groups.push(vec![block.clone()]),
                }
            }
            if groups.is_empty() {
                return Ok(vec![NewTurn::new(Role::User, "").payload(payload(&norm))]);
            }
            let whole = groups.len() == 1;
            Ok(groups
                .into_iter()
                .enumerate()
                .map(|(n, group)| {
                    let mut part = if whole {
                        norm.as_object().cloned().unwrap_or_default()
                    } else {
                        let mut m = Map::new();
                        m.insert("role".into(), json!("user"));
                        m.insert("content".into(), Value::Array(group.clone()));
                        m
                    };
                    if n > 0 {
                        part.insert(CONTINUES.into(), Value::Bool(true));
                    }
                    let text = payload(&Value::Object(part));
                    match group.first() {
                        Some(result)
                            if result.get("type").and_then(Value::as_str)
                                == Some("tool_result") =>
                        {
                            NewTurn::new(Role::Tool, text_of(result.get("content")))
                                .tool_call_id(
                                    result
                                        .get("tool_use_id")
                                        .and_then(Value::as_str)
                                        .unwrap_or_default(),
                                )
                                .payload(text)
                        }
                        _ => NewTurn::new(Role::User, text_of(Some(&Value::Array(group))))
                            .payload(text),
                    }
                })
                .collect())
        }
        Some(other) => Err(format!("unknown role {other:?}")),
        None => Err("a message needs a \"role\"".into()),
    }
}

/// An assistant message (normalized) as one turn: its text, and its `tool_use` blocks
/// as tool calls (in OpenAI's shape, as forktrail stores them).
fn assistant_turn(norm: &Value) -> NewTurn {
    let content = norm.get("content");
    let blocks = content
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let texts: Vec<Value> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .cloned()
        .collect();
    let text = match content {
        Some(Value::String(s)) => s.clone(),
        _ => text_of(Some(&Value::Array(texts))),
    };
    let calls: Vec<Value> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
        .map(|b| {
            json!({
                "id": b.get("id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {
                    "name": b.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": b.get("input").cloned().unwrap_or(json!({})).to_string(),
                }
            })
        })
        .collect();
    let mut turn = NewTurn::new(Role::Assistant, text).payload(payload(norm));
    if !calls.is_empty() {
        turn = turn
            .tool_calls(Value::Array(calls).to_string())
            .kind(Kind::ToolCall);
    }
    turn
}

/// Usage as Anthropic reports it: every prompt token is `input_tokens` plus the cache's
/// writes and reads.
fn usage(u: &Map<String, Value>) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64);
    Usage {
        input: n("input_tokens").map(|i| {
            i + n("cache_creation_input_tokens").unwrap_or(0)
                + n("cache_read_input_tokens").unwrap_or(0)
        }),
        output: n("output_tokens"),
        cached: n("cache_read_input_tokens"),
    }
}

/// A whole message (a non-streamed answer).
pub(crate) fn read_answer(value: &Value) -> Reply {
    let message =
        json!({"role": "assistant", "content": value.get("content").cloned().unwrap_or(json!([]))});
    let turn = value
        .get("content")
        .is_some()
        .then(|| assistant_turn(&normalized(&kept(&message))));
    Reply {
        turn,
        usage: value
            .get("usage")
            .and_then(Value::as_object)
            .map(usage)
            .unwrap_or_default(),
        stop_reason: super::text_field(value, "stop_reason"),
        model: super::text_field(value, "model"),
        complete: value.get("type").and_then(Value::as_str) == Some("message"),
    }
}

/// A message assembled from its stream of events.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    blocks: Vec<Value>,
    partial: Vec<String>,
    usage: Map<String, Value>,
    stop_reason: Option<String>,
    model: Option<String>,
    started: bool,
    done: bool,
}

impl Stream {
    /// Takes one event's data.
    pub(crate) fn event(&mut self, data: &str) {
        let Ok(value) = serde_json::from_str::<Value>(data) else {
            return;
        };
        let index = value.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        match value.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                self.started = true;
                let message = value.get("message");
                self.model = message
                    .and_then(|m| m.get("model"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if let Some(u) = message
                    .and_then(|m| m.get("usage"))
                    .and_then(Value::as_object)
                {
                    self.usage.extend(u.clone());
                }
            }
            Some("content_block_start") => {
                while self.blocks.len() <= index {
                    self.blocks.push(Value::Null);
                    self.partial.push(String::new());
                }
                self.blocks[index] = value.get("content_block").cloned().unwrap_or(json!({}));
            }
            Some("content_block_delta") => {
                let (Some(block), Some(delta)) = (
                    self.blocks.get_mut(index).and_then(Value::as_object_mut),
                    value.get("delta"),
                ) else {
                    return;
                };
                let text = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or_default();
                let mut append = |field: &str, more: &str| {
                    let now = block.get(field).and_then(Value::as_str).unwrap_or_default();
                    let joined = format!("{now}{more}");
                    block.insert(field.into(), Value::String(joined));
                };
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => append("text", text("text")),
                    Some("thinking_delta") => append("thinking", text("thinking")),
                    Some("signature_delta") => {
                        block.insert("signature".into(), json!(text("signature")));
                    }
                    Some("input_json_delta") => self.partial[index].push_str(text("partial_json")),
                    Some("citations_delta") => {
                        if let Some(c) = delta.get("citation") {
                            match block.get_mut("citations") {
                                Some(Value::Array(list)) => list.push(c.clone()),
                                _ => {
                                    block.insert("citations".into(), json!([c]));
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
            Some("content_block_stop") => {
                let partial = self.partial.get(index).cloned().unwrap_or_default();
                if let (false, Some(block)) = (
                    partial.is_empty(),
                    self.blocks.get_mut(index).and_then(Value::as_object_mut),
                ) {
                    let input = serde_json::from_str(&partial).unwrap_or(Value::String(partial));
                    block.insert("input".into(), input);
                }
            }
            Some("message_delta") => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(u) = value.get("usage").and_then(Value::as_object) {
                    for (k, v) in u {
                        if !v.is_null() {
                            self.usage.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            Some("message_stop") => self.done = true,
            _ => {}
        }
    }

    /// Whether the message is whole.
    pub(crate) fn complete(&self) -> bool {
        self.done
    }

    /// The answer as far as it came.
    pub(crate) fn finish(self) -> Reply {
        let blocks: Vec<Value> = self.blocks.into_iter().filter(|b| !b.is_null()).collect();
        let turn = (self.started && !blocks.is_empty()).then(|| {
            let message = json!({"role": "assistant", "content": blocks});
            assistant_turn(&normalized(&kept(&message)))
        });
        Reply {
            turn,
            usage: usage(&self.usage),
            stop_reason: self.stop_reason,
            model: self.model,
            complete: self.done,
        }
    }
}

/// A rebuilt request: the context, the turns' messages and the instructions among them.
pub(crate) fn rebuild(context: &Value, messages: Vec<Value>) -> Value {
    super::rebuild(context, "messages", messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_of_two_tool_results_and_text_is_three_turns_rebuilt_as_one_message() {
        let message = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "1"},
            {"type": "tool_result", "tool_use_id": "b", "content": [{"type": "text", "text": "2"}], "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "go on"},
        ]});
        let turns = message_turns(&message).unwrap();
        let shape: Vec<_> = turns
            .iter()
            .map(|t| (t.role, t.content.as_str(), t.tool_call_id.as_deref()))
            .collect();
        assert_eq!(
            shape,
            [
                (Role::Tool, "1", Some("a")),
                (Role::Tool, "2", Some("b")),
                (Role::User, "go on", None)
            ]
        );
        let request = json!({"model": "m", "messages": [message.clone()]});
        let read = read_request(&request).unwrap();
        // The cache mark is the call's, not the turn's: kept as an override.
        assert_eq!(read.overrides, vec![(0, message)]);
        let payloads: Vec<_> = read.turns.iter().map(|t| t.payload.as_deref()).collect();
        let rebuilt = super::super::messages_of(&payloads).unwrap();
        assert_eq!(rebuilt[0]["content"].as_array().unwrap().len(), 3);
        assert!(rebuilt[0]["content"][1].get("cache_control").is_none());
    }

    #[test]
    fn a_streamed_answer_and_the_same_message_sent_back_are_the_same_turn() {
        let mut stream = Stream::default();
        for event in [
            json!({"type": "message_start", "message": {"model": "m1", "usage": {"input_tokens": 10, "cache_read_input_tokens": 4}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Look"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ing."}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"b\": 1, "}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "\"a\": 2}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}}),
        ] {
            stream.event(&event.to_string());
        }
        assert!(!stream.complete());
        stream.event(r#"{"type":"message_stop"}"#);
        assert!(stream.complete());
        let reply = stream.finish();
        assert_eq!(
            reply.usage,
            Usage {
                input: Some(14),
                output: Some(7),
                cached: Some(4)
            }
        );
        assert_eq!(reply.stop_reason.as_deref(), Some("tool_use"));
        let turn = reply.turn.unwrap();
        assert_eq!(
            (turn.kind, turn.content.as_str()),
            (Kind::ToolCall, "Looking.")
        );
        let sent_back = json!({"role": "assistant", "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"a": 2, "b": 1}, "cache_control": {"type": "ephemeral"}},
        ]});
        let echoed = &message_turns(&kept(&sent_back)).unwrap()[0];
        assert_eq!(echoed.payload, turn.payload);
        assert_eq!(echoed.tool_calls, turn.tool_calls);
    }
}
