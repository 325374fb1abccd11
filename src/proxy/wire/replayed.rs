//! An answer given from a stored turn instead of a model: the assistant message a turn's
//! payload holds, in the shape its API answers (one JSON body, or the stream of events a
//! streamed call expects), so that a harness replaying a recording receives what it
//! received then, block for block.

use super::Usage;
use crate::model::Api;
use serde_json::{json, Value};

/// A stored answer to give again.
pub(crate) struct Replayed<'a> {
    /// The turn's payload: the assistant message as the API carried it (for the
    /// Responses API, `{"items": […]}`).
    pub(crate) payload: &'a Value,
    pub(crate) model: &'a str,
    /// The stop reason the call reported, when it was recorded.
    pub(crate) stop_reason: Option<&'a str>,
    pub(crate) usage: &'a Usage,
    /// A name for the answer (`msg_…`, `chatcmpl-…`, `resp_…`).
    pub(crate) id: &'a str,
}

impl Replayed<'_> {
    /// The answer's content type and body, streamed or not.
    pub(crate) fn body(&self, api: Api, stream: bool) -> (&'static str, Vec<u8>) {
        let events = match api {
            Api::AnthropicMessages => self.anthropic(stream),
            Api::OpenaiChat => self.chat(stream),
            Api::OpenaiResponses => self.responses(stream),
        };
        match events {
            Events::Whole(value) => ("application/json", value.to_string().into_bytes()),
            Events::Stream(list) => {
                let mut out = String::new();
                for (name, data) in list {
                    if let Some(name) = name {
                        out.push_str(&format!("event: {name}\n"));
                    }
                    // A string is sent as it is (`[DONE]`), anything else as JSON.
                    match data {
                        Value::String(text) => out.push_str(&format!("data: {text}\n\n")),
                        data => out.push_str(&format!("data: {data}\n\n")),
                    }
                }
                ("text/event-stream", out.into_bytes())
            }
        }
    }

    fn anthropic(&self, stream: bool) -> Events {
        let content: Vec<Value> = match self.payload.get("content") {
            Some(Value::Array(blocks)) => blocks.clone(),
            Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
            _ => Vec::new(),
        };
        let tools = content
            .iter()
            .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"));
        let stop = self
            .stop_reason
            .unwrap_or(if tools { "tool_use" } else { "end_turn" });
        let usage = json!({
            "input_tokens": self.usage.input.unwrap_or(0),
            "output_tokens": self.usage.output.unwrap_or(0),
        });
        let message = |content: Vec<Value>, stop: Value| {
            json!({
                "id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage,
            })
        };
        if !stream {
            return Events::Whole(message(content, json!(stop)));
        }
        let mut list = vec![(
            Some("message_start"),
            json!({"type": "message_start", "message": message(Vec::new(), Value::Null)}),
        )];
        for (index, block) in content.iter().enumerate() {
            let (start, delta) = anthropic_block(block);
            list.push((
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            ));
            for delta in delta {
                list.push((
                    Some("content_block_delta"),
                    json!({"type": "content_block_delta", "index": index, "delta": delta}),
                ));
            }
            list.push((
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        list.push((
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                   "usage": {"output_tokens": self.usage.output.unwrap_or(0)}}),
        ));
        list.push((Some("message_stop"), json!({"type": "message_stop"})));
        Events::Stream(list)
    }

    fn chat(&self, stream: bool) -> Events {
        let mut message = self.payload.clone();
        let calls = message
            .get("tool_calls")
            .and_then(Value::as_array)
            .is_some_and(|c| !c.is_empty());
        let finish = self
            .stop_reason
            .unwrap_or(if calls { "tool_calls" } else { "stop" });
        let usage = json!({
            "prompt_tokens": self.usage.input.unwrap_or(0),
            "completion_tokens": self.usage.output.unwrap_or(0),
            "total_tokens": self.usage.input.unwrap_or(0) + self.usage.output.unwrap_or(0),
        });
        let head = |choices: Value| {
            json!({"id": self.id, "object": if stream { "chat.completion.chunk" } else { "chat.completion" },
                   "created": chrono::Utc::now().timestamp(), "model": self.model, "choices": choices})
        };
        if !stream {
            if let Some(m) = message.as_object_mut() {
                m.entry("content").or_insert(Value::Null);
            }
            let mut whole =
                head(json!([{"index": 0, "message": message, "finish_reason": finish}]));
            whole["usage"] = usage;
            return Events::Whole(whole);
        }
        let mut delta = json!({"role": "assistant"});
        if let Some(content) = message.get("content").filter(|c| !c.is_null()) {
            delta["content"] = content.clone();
        }
        let mut list = vec![(
            None,
            head(json!([{"index": 0, "delta": delta, "finish_reason": null}])),
        )];
        if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let mut c = c.clone();
                    c["index"] = json!(i);
                    c
                })
                .collect();
            list.push((
                None,
                head(json!([{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": null}])),
            ));
        }
        list.push((
            None,
            head(json!([{"index": 0, "delta": {}, "finish_reason": finish}])),
        ));
        let mut last = head(json!([]));
        last["usage"] = usage;
        list.push((None, last));
        list.push((None, Value::String("[DONE]".into())));
        Events::Stream(list)
    }

    fn responses(&self, stream: bool) -> Events {
        let items = self
            .payload
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let response = json!({
            "id": self.id, "object": "response", "status": "completed", "model": self.model,
            "output": items,
            "usage": {"input_tokens": self.usage.input.unwrap_or(0),
                      "output_tokens": self.usage.output.unwrap_or(0),
                      "total_tokens": self.usage.input.unwrap_or(0) + self.usage.output.unwrap_or(0)},
        });
        if !stream {
            return Events::Whole(response);
        }
        let mut created = response.clone();
        created["status"] = json!("in_progress");
        created["output"] = json!([]);
        let mut list = vec![(
            Some("response.created"),
            json!({"type": "response.created", "response": created}),
        )];
        for (i, item) in items.iter().enumerate() {
            list.push((
                Some("response.output_item.done"),
                json!({"type": "response.output_item.done", "output_index": i, "item": item}),
            ));
        }
        list.push((
            Some("response.completed"),
            json!({"type": "response.completed", "response": response}),
        ));
        Events::Stream(list)
    }
}

/// An answer's body: one JSON value, or events (`event:` name, `data:` value).
enum Events {
    Whole(Value),
    Stream(Vec<(Option<&'static str>, Value)>),
}

/// A content block as a stream opens it, and the deltas that complete it.
fn anthropic_block(block: &Value) -> (Value, Vec<Value>) {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => (
            json!({"type": "text", "text": ""}),
            vec![json!({"type": "text_delta", "text": text("text")})],
        ),
        "tool_use" => {
            let mut start = block.clone();
            start["input"] = json!({});
            let input = block.get("input").cloned().unwrap_or(json!({}));
            (
                start,
                vec![json!({"type": "input_json_delta", "partial_json": input.to_string()})],
            )
        }
        "thinking" => {
            let mut deltas = vec![json!({"type": "thinking_delta", "thinking": text("thinking")})];
            if let Some(signature) = block.get("signature") {
                deltas.push(json!({"type": "signature_delta", "signature": signature}));
            }
            (json!({"type": "thinking", "thinking": ""}), deltas)
        }
        _ => (block.clone(), Vec::new()),
    }
}

#[cfg(all(test, feature = "server"))]
mod tests {
    use super::*;

    fn replayed(payload: &Value) -> Replayed<'_> {
        Replayed {
            payload,
            model: "m",
            stop_reason: None,
            usage: &Usage {
                input: Some(10),
                output: Some(3),
                cached: None,
            },
            id: "msg_1",
        }
    }

    /// Each API's answer, streamed and not, reads back through the proxy's own readers
    /// as the very turn it was given from.
    #[test]
    fn a_replayed_answer_reads_back_as_the_turn_it_came_from() {
        let cases = [
            (
                Api::AnthropicMessages,
                json!({"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "sig"},
                    {"type": "text", "text": "I will look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls -a"}}]}),
            ),
            (
                Api::OpenaiChat,
                json!({"role": "assistant", "content": "Looking.", "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{\"d\":\".\"}"}}]}),
            ),
            (
                Api::OpenaiResponses,
                json!({"items": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}]}),
            ),
        ];
        for (api, payload) in cases {
            let mut turns = Vec::new();
            for stream in [false, true] {
                let (kind, body) = replayed(&payload).body(api, stream);
                let head = crate::proxy::forward::Head {
                    status: 200,
                    headers: Vec::new(),
                    content_type: Some(kind.into()),
                    length: (!stream).then_some(body.len()),
                };
                let mut tee = crate::proxy::forward::Tee::new(api, &head);
                tee.feed(&body);
                assert!(tee.complete(), "{api} stream={stream}: not whole");
                let reply = tee.finish();
                assert_eq!(reply.usage.output, Some(3), "{api} stream={stream}");
                turns.push(reply.turn.expect("a turn").payload);
            }
            assert_eq!(turns[0], turns[1], "{api}: streamed and whole differ");
            let read: Value = serde_json::from_str(turns[0].as_deref().unwrap()).unwrap();
            assert_eq!(read, payload, "{api}: not the turn given");
        }
    }
}
