//! The OpenAI Chat Completions API (`POST /v1/chat/completions`): a request's messages
//! as turns (its system and developer messages are the call's instructions, like
//! Anthropic's `system`), an answer (a completion, or its stream of chunks) as one assistant turn.

use super::{kept, normalized, payload, text_of, Conversation, Reply, Usage};
use crate::model::{Kind, NewTurn, Role};
use serde_json::{json, Map, Value};

/// Whether a message belongs to the call's instructions rather than the conversation.
fn is_instruction(message: &Value) -> bool {
    matches!(
        message.get("role").and_then(Value::as_str),
        Some("system" | "developer")
    )
}

/// The conversation of a request body.
pub(crate) fn read_request(body: &Value) -> Result<Conversation, String> {
    let object = body.as_object().ok_or("the request is not a JSON object")?;
    let messages = object
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("the request has no \"messages\" array")?;
    let mut out = Conversation::default();
    let mut instructions = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let raw = kept(message);
        if is_instruction(&raw) {
            instructions.push(json!([i, raw]));
            continue;
        }
        let turn = message_turn(&raw).map_err(|e| format!("message {i}: {e}"))?;
        if turn.payload.as_deref() != Some(payload(&raw).as_str()) {
            out.overrides.push((i - instructions.len(), raw));
        }
        out.turns.push(turn);
    }
    out.context = super::context_of(object, "messages", instructions);
    Ok(out)
}

/// One message (already [`kept`]) as a turn.
pub(crate) fn message_turn(message: &Value) -> Result<NewTurn, String> {
    let norm = normalized(message);
    let role = match norm.get("role").and_then(Value::as_str) {
        Some("system" | "developer") => Role::System,
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("tool" | "function") => Role::Tool,
        Some(other) => return Err(format!("unknown role {other:?}")),
        None => return Err("a message needs a \"role\"".into()),
    };
    let mut turn = NewTurn::new(role, text_of(norm.get("content"))).payload(payload(&norm));
    if let Some(name) = norm.get("name").and_then(Value::as_str) {
        turn = turn.name(name);
    }
    if let Some(id) = norm.get("tool_call_id").and_then(Value::as_str) {
        turn = turn.tool_call_id(id);
    }
    if let Some(calls @ Value::Array(_)) = norm.get("tool_calls") {
        turn = turn.tool_calls(calls.to_string()).kind(Kind::ToolCall);
    }
    Ok(turn)
}

fn usage(u: Option<&Value>) -> Usage {
    let n = |p: &str| u.and_then(|u| u.pointer(p)).and_then(Value::as_u64);
    Usage {
        input: n("/prompt_tokens"),
        output: n("/completion_tokens"),
        cached: n("/prompt_tokens_details/cached_tokens"),
    }
}

/// A whole completion (a non-streamed answer).
pub(crate) fn read_answer(value: &Value) -> Reply {
    let message = value.pointer("/choices/0/message");
    Reply {
        turn: message.and_then(|m| message_turn(&kept(m)).ok()),
        usage: usage(value.get("usage")),
        stop_reason: value
            .pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        model: super::text_field(value, "model"),
        complete: message.is_some(),
    }
}

/// A completion assembled from its stream of chunks.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    content: Option<String>,
    calls: Vec<Map<String, Value>>,
    usage: Option<Value>,
    stop_reason: Option<String>,
    model: Option<String>,
    done: bool,
}

impl Stream {
    /// Takes one chunk (`data: {…}`, or `[DONE]`).
    pub(crate) fn event(&mut self, data: &str) {
        if data.trim() == "[DONE]" {
            self.done = true;
            return;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            return;
        };
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            self.model = Some(model.to_string());
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(u.clone());
        }
        let Some(choice) = chunk.pointer("/choices/0") else {
            return;
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.stop_reason = Some(reason.to_string());
        }
        let Some(delta) = choice.get("delta") else {
            return;
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.content.get_or_insert_with(String::new).push_str(text);
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let at = call.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
            while self.calls.len() <= at {
                self.calls.push(Map::new());
            }
            let slot = &mut self.calls[at];
            for key in ["id", "type"] {
                if let Some(v) = call.get(key).filter(|v| !v.is_null()) {
                    slot.insert(key.into(), v.clone());
                }
            }
            if let Some(f) = call.get("function") {
                let function = slot
                    .entry("function")
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .expect("a function object");
                for key in ["name", "arguments"] {
                    if let Some(more) = f.get(key).and_then(Value::as_str) {
                        let now = function
                            .get(key)
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        let joined = format!("{now}{more}");
                        function.insert(key.into(), Value::String(joined));
                    }
                }
            }
        }
    }

    /// Whether the stream ended with `[DONE]`.
    pub(crate) fn complete(&self) -> bool {
        self.done
    }

    /// The answer as far as it came.
    pub(crate) fn finish(self) -> Reply {
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        message.insert(
            "content".into(),
            self.content.map(Value::String).unwrap_or(Value::Null),
        );
        if !self.calls.is_empty() {
            let calls = self.calls.into_iter().map(Value::Object).collect();
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        let message = Value::Object(message);
        let said = message.get("content").is_some_and(|c| !c.is_null())
            || message.get("tool_calls").is_some();
        Reply {
            turn: said.then(|| message_turn(&message).ok()).flatten(),
            usage: usage(self.usage.as_ref()),
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
    fn a_streamed_completion_and_the_completion_sent_back_without_nulls_are_one_turn() {
        let mut stream = Stream::default();
        for chunk in [
            json!({"model": "gpt-x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "add", "arguments": ""}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\":1}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "c2", "type": "function", "function": {"name": "add", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}),
        ] {
            stream.event(&chunk.to_string());
        }
        stream.event("[DONE]");
        let reply = stream.finish();
        assert!(reply.complete);
        assert_eq!(reply.usage.input, Some(9));
        let turn = reply.turn.unwrap();
        let echoed = message_turn(&json!({"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1}"}},
            {"id": "c2", "type": "function", "function": {"name": "add", "arguments": "{}"}},
        ], "refusal": null}))
        .unwrap();
        assert_eq!(turn, echoed);
        assert_eq!(turn.kind, Kind::ToolCall);
    }

    #[test]
    fn system_messages_are_the_calls_and_rebuild_in_their_places() {
        let request = json!({"model": "m", "messages": [
            {"role": "system", "content": "today is friday"},
            {"role": "user", "content": "hi", "name": null},
            {"role": "developer", "content": "it is 10:02"},
        ]});
        let read = read_request(&request).unwrap();
        assert_eq!(read.turns.len(), 1);
        assert_eq!(read.overrides.len(), 1, "the null name is the call's");
        let mut messages =
            vec![serde_json::from_str(read.turns[0].payload.as_deref().unwrap()).unwrap()];
        for (i, raw) in &read.overrides {
            messages[*i] = raw.clone();
        }
        assert_eq!(rebuild(&read.context, messages), request);
    }
}
