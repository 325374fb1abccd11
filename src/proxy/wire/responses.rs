//! The OpenAI Responses API (`POST /v1/responses`, what Codex CLI speaks): a request's
//! input items as turns (its system and developer messages are the call's instructions),
//! an answer (a response, or its stream of events) as one
//! assistant turn.
//!
//! Items are grouped the way forktrail models a conversation: what the model said in one
//! step (its reasoning, its message, its tool calls, however many) is one assistant
//! turn; each tool output is a `tool` turn; each user message a `user` turn. A turn's
//! payload is `{"items": [...]}`, its items normalized (their `id` and `status`, which
//! a client may or may not send back, left out; an override keeps them for the call).

use super::{kept, payload, text_of, trimmed, Conversation, Reply, Usage};
use crate::model::{Kind, NewTurn, Role};
use serde_json::{json, Value};

/// What one item is, for grouping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    /// The model's: reasoning, its message, a tool call.
    Model,
    /// A tool's output.
    Tool,
    /// Anyone else's message.
    Message(Role),
}

fn side(item: &Value) -> Side {
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    if kind.ends_with("_output") {
        return Side::Tool;
    }
    if kind != "message" {
        return Side::Model;
    }
    match item.get("role").and_then(Value::as_str) {
        Some("assistant") => Side::Model,
        Some("system" | "developer") => Side::Message(Role::System),
        _ => Side::Message(Role::User),
    }
}

/// An item as its turn keeps it.
fn normalized(item: &Value) -> Value {
    let Some(map) = item.as_object() else {
        return item.clone();
    };
    let mut out = trimmed(map);
    out.remove("id");
    out.remove("status");
    if let Some(Value::Array(parts)) = out.get_mut("content") {
        for part in parts.iter_mut() {
            if let Some(p) = part.as_object() {
                *part = Value::Object(trimmed(p));
            }
        }
    }
    Value::Object(out)
}

/// The turns of a list of items (already [`kept`]), grouped.
pub(crate) fn item_turns(items: &[Value]) -> Vec<NewTurn> {
    let mut groups: Vec<(Side, Vec<Value>)> = Vec::new();
    for item in items {
        let s = side(item);
        match groups.last_mut() {
            Some((Side::Model, group)) if s == Side::Model => group.push(normalized(item)),
            _ => groups.push((s, vec![normalized(item)])),
        }
    }
    groups
        .into_iter()
        .map(|(s, items)| turn(s, items))
        .collect()
}

fn turn(side: Side, items: Vec<Value>) -> NewTurn {
    let text = |items: &[Value]| {
        items
            .iter()
            .map(|i| text_of(i.get("content").or_else(|| i.get("output"))))
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    let content = text(&items);
    let first = items.first().cloned().unwrap_or(Value::Null);
    let body = payload(&json!({ "items": items }));
    match side {
        Side::Message(role) => NewTurn::new(role, content).payload(body),
        Side::Tool => NewTurn::new(Role::Tool, content)
            .tool_call_id(
                first
                    .get("call_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            )
            .payload(body),
        Side::Model => {
            let calls: Vec<Value> = items
                .iter()
                .filter(|i| i.get("call_id").is_some())
                .map(|i| {
                    let name = i
                        .get("name")
                        .and_then(Value::as_str)
                        .or_else(|| i.get("type").and_then(Value::as_str))
                        .unwrap_or("tool");
                    let arguments = match i.get("arguments").or_else(|| i.get("input")).or_else(|| i.get("action")) {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => "{}".into(),
                    };
                    json!({"id": i["call_id"], "type": "function", "function": {"name": name, "arguments": arguments}})
                })
                .collect();
            let mut turn = NewTurn::new(Role::Assistant, content).payload(body);
            if !calls.is_empty() {
                turn = turn
                    .tool_calls(Value::Array(calls).to_string())
                    .kind(Kind::ToolCall);
            }
            turn
        }
    }
}

/// The conversation of a request body: `input` (a string, or items); its system and
/// developer messages are the call's instructions, with `instructions`.
pub(crate) fn read_request(body: &Value) -> Result<Conversation, String> {
    let object = body.as_object().ok_or("the request is not a JSON object")?;
    let mut context = object.clone();
    let items = match object.get("input") {
        Some(Value::String(text)) => {
            // One user message, rebuilt as the string it was.
            let turn = NewTurn::new(Role::User, text.clone()).payload(payload(
                &json!({"items": [{"role": "user", "content": text}]}),
            ));
            return Ok(Conversation {
                turns: vec![turn],
                context: Value::Object(context),
                overrides: Vec::new(),
            });
        }
        Some(Value::Array(items)) => items,
        _ => return Err("the request has no \"input\"".into()),
    };
    let mut instructions = Vec::new();
    let mut rest = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match side(item) {
            Side::Message(Role::System) => instructions.push(json!([i, kept(item)])),
            _ => rest.push(kept(item)),
        }
    }
    context = match super::context_of(&context, "input", instructions) {
        Value::Object(map) => map,
        _ => context,
    };
    let overrides = rest
        .iter()
        .enumerate()
        .filter(|(_, raw)| normalized(raw) != **raw)
        .map(|(i, raw)| (i, raw.clone()))
        .collect();
    Ok(Conversation {
        turns: item_turns(&rest),
        context: Value::Object(context),
        overrides,
    })
}

/// The items of turns' payloads, in order.
pub(crate) fn items_of(payloads: &[Option<&str>]) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        let p = p.ok_or_else(|| format!("turn {i} has no payload to rebuild"))?;
        let value: Value =
            serde_json::from_str(p).map_err(|e| format!("turn {i}'s payload is not JSON: {e}"))?;
        match value.get("items") {
            Some(Value::Array(items)) => out.extend(items.iter().cloned()),
            _ => return Err(format!("turn {i}'s payload holds no items")),
        }
    }
    Ok(out)
}

/// A rebuilt request: the context, the turns' items and the instructions among them.
pub(crate) fn rebuild(context: &Value, items: Vec<Value>) -> Value {
    super::rebuild(context, "input", items)
}

/// A whole response (a non-streamed answer, or the one a stream's last event carries).
pub(crate) fn read_answer(value: &Value) -> Reply {
    let output: Vec<Value> = value
        .get("output")
        .and_then(Value::as_array)
        .map(|l| l.iter().map(kept).collect())
        .unwrap_or_default();
    let n = |p: &str| value.pointer(p).and_then(Value::as_u64);
    Reply {
        turn: item_turns(&output).into_iter().next(),
        usage: Usage {
            input: n("/usage/input_tokens"),
            output: n("/usage/output_tokens"),
            cached: n("/usage/input_tokens_details/cached_tokens"),
        },
        stop_reason: super::text_field(value, "status"),
        model: super::text_field(value, "model"),
        complete: value.get("status").and_then(Value::as_str) == Some("completed"),
    }
}

/// A response assembled from its stream of events: the whole response its last event
/// carries, or the items that were done before the stream was cut.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    done_items: Vec<Value>,
    last: Option<Value>,
    model: Option<String>,
}

impl Stream {
    /// Takes one event's data.
    pub(crate) fn event(&mut self, data: &str) {
        let Ok(value) = serde_json::from_str::<Value>(data) else {
            return;
        };
        match value.get("type").and_then(Value::as_str) {
            Some("response.created") => {
                self.model = value
                    .pointer("/response/model")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            Some("response.output_item.done") => {
                if let Some(item) = value.get("item") {
                    self.done_items.push(item.clone());
                }
            }
            Some("response.completed" | "response.incomplete" | "response.failed") => {
                self.last = value.get("response").cloned();
            }
            _ => {}
        }
    }

    /// Whether the response is whole.
    pub(crate) fn complete(&self) -> bool {
        self.last.is_some()
    }

    /// The answer as far as it came.
    pub(crate) fn finish(self) -> Reply {
        match self.last {
            Some(mut response) => {
                // A stream's last event may leave the output out; the items came before.
                if response
                    .get("output")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty)
                {
                    response["output"] = Value::Array(self.done_items);
                }
                let mut reply = read_answer(&response);
                reply.complete = true;
                reply
            }
            None => Reply {
                turn: item_turns(&self.done_items.iter().map(kept).collect::<Vec<_>>())
                    .into_iter()
                    .next(),
                model: self.model,
                ..Reply::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_of_reasoning_and_two_calls_is_one_turn_and_each_output_its_own() {
        let request = json!({"model": "m", "instructions": "be brief", "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"},
            {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\":\"ls\"}", "status": "completed"},
            {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
            {"type": "function_call_output", "call_id": "c2", "output": "b.txt"},
        ]});
        let read = read_request(&request).unwrap();
        let shape: Vec<_> = read.turns.iter().map(|t| (t.role, t.kind)).collect();
        assert_eq!(
            shape,
            [
                (Role::User, Kind::Message),
                (Role::Assistant, Kind::ToolCall),
                (Role::Tool, Kind::Message),
                (Role::Tool, Kind::Message)
            ]
        );
        let payloads: Vec<_> = read.turns.iter().map(|t| t.payload.as_deref()).collect();
        let mut items = items_of(&payloads).unwrap();
        for (i, raw) in &read.overrides {
            items[*i] = raw.clone();
        }
        assert_eq!(rebuild(&read.context, items), request);
    }
}
