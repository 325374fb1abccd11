//! The wire formats the proxy speaks, one file each: a request's messages as turns (and
//! back), an answer (one JSON body or a stream of server-sent events) as one assistant
//! turn with its usage.
//!
//! A turn's `payload` holds its message as the API carried it, *normalized*: the
//! per-call marks a harness moves from call to call (`cache_control`), null fields and
//! empty lists at the message and block level are left out, and the bytes of an image or
//! a file are replaced by their SHA-256. The digest covers the payload, so two calls
//! that carry the same message the same way share its turn, whichever of them wrote it;
//! what a call sent beyond the normalized form (its `cache_control` marks, a null field)
//! is kept with the call as an *override* of that message, so that the request rebuilt
//! from the stored session equals what was sent, field by field.

pub(crate) mod anthropic;
pub(crate) mod openai;
pub(crate) mod replayed;
pub(crate) mod responses;
mod sse;

use crate::model::NewTurn;
use serde_json::{Map, Value};

pub(crate) use sse::Events;

/// A request's conversation, read.
#[derive(Debug, Default)]
pub(crate) struct Conversation {
    /// Its messages as turns, in order.
    pub(crate) turns: Vec<NewTurn>,
    /// The request without the messages that became turns: model, system prompt, tool
    /// definitions and sampling settings, recorded with the call.
    pub(crate) context: Value,
    /// `(message index, the message as sent)` where it differs from what its turns
    /// rebuild.
    pub(crate) overrides: Vec<(usize, Value)>,
}

/// The conversation of a request's body in `api`, and the model it asks for.
pub(crate) fn read_request(
    api: crate::model::Api,
    body: &[u8],
) -> Result<(Conversation, Option<String>), String> {
    use crate::model::Api;
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("its body is not JSON ({e})"))?;
    let conversation = match api {
        Api::AnthropicMessages => anthropic::read_request(&value),
        Api::OpenaiChat => openai::read_request(&value),
        Api::OpenaiResponses => responses::read_request(&value),
    }?;
    Ok((conversation, text_field(&value, "model")))
}

/// What the API reported about a call's usage.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Usage {
    /// Every prompt token, cached ones included.
    pub(crate) input: Option<u64>,
    pub(crate) output: Option<u64>,
    /// Prompt tokens read from a cache.
    pub(crate) cached: Option<u64>,
}

/// An answer, read from the body the upstream sent.
#[derive(Debug, Default)]
pub(crate) struct Reply {
    /// The assistant turn, when the answer carried any of it.
    pub(crate) turn: Option<NewTurn>,
    pub(crate) usage: Usage,
    pub(crate) stop_reason: Option<String>,
    /// The model that answered, as the answer names it.
    pub(crate) model: Option<String>,
    /// Whether the answer arrived whole (a stream that was cut is not).
    pub(crate) complete: bool,
}

/// A value with its bytes kept out: an image's or a file's base64 `data` (Anthropic's
/// `source`, OpenAI's `data:` URLs and `file_data`) replaced by its SHA-256.
pub(crate) fn kept(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("data" | "file_data", Value::String(s))
                        if map.get("type").and_then(Value::as_str) == Some("base64")
                            || key == "file_data" =>
                    {
                        out.insert(format!("{key}_sha256"), sha(s));
                    }
                    ("url" | "image_url", Value::String(s)) if s.starts_with("data:") => {
                        let (head, _) = s.split_once(',').unwrap_or((s, ""));
                        let hash = sha(s);
                        out.insert(
                            key.clone(),
                            Value::String(format!("{head},sha256:{}", hash.as_str().unwrap_or(""))),
                        );
                    }
                    _ => {
                        out.insert(key.clone(), kept(v));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(list) => Value::Array(list.iter().map(kept).collect()),
        other => other.clone(),
    }
}

fn sha(text: &str) -> Value {
    Value::String(crate::rdf::sha256_hex(&[text.as_bytes()]))
}

/// An object without the fields a call may add or leave out without saying anything
/// else: nulls, empty lists, and the `cache_control` marks harnesses move each call.
pub(crate) fn trimmed(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .filter(|(key, v)| {
            !(v.is_null()
                || key.as_str() == "cache_control"
                || v.as_array().is_some_and(Vec::is_empty))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A message normalized: trimmed at its level and at its content blocks' level (what
/// is inside a block, a tool's input or result, stays as it is).
pub(crate) fn normalized(message: &Value) -> Value {
    let Some(map) = message.as_object() else {
        return message.clone();
    };
    let mut out = trimmed(map);
    if let Some(Value::Array(blocks)) = out.get_mut("content") {
        for block in blocks.iter_mut() {
            if let Some(b) = block.as_object() {
                *block = Value::Object(trimmed(b));
            }
        }
    }
    Value::Object(out)
}

/// The string field `key` of `value`, if it has one.
pub(crate) fn text_field(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The text of `value`: a string as itself, a list of blocks as their `text` fields
/// joined by blank lines.
pub(crate) fn text_of(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

/// The messages of `turns` (in order, as their payloads hold them): a turn whose payload
/// continues the message before it adds its blocks to that message.
pub(crate) fn messages_of(payloads: &[Option<&str>]) -> Result<Vec<Value>, String> {
    let mut out: Vec<Value> = Vec::new();
    for (i, payload) in payloads.iter().enumerate() {
        let payload = payload.ok_or_else(|| format!("turn {i} has no payload to rebuild"))?;
        let mut message: Value = serde_json::from_str(payload)
            .map_err(|e| format!("turn {i}'s payload is not JSON: {e}"))?;
        let continues = message
            .as_object_mut()
            .and_then(|m| m.remove(CONTINUES))
            .is_some();
        match (continues, out.last_mut()) {
            (true, Some(last)) => {
                let more = message.get("content").and_then(Value::as_array).cloned();
                match (last.get_mut("content"), more) {
                    (Some(Value::Array(blocks)), Some(more)) => blocks.extend(more),
                    _ => return Err(format!("turn {i} continues a message it cannot join")),
                }
            }
            _ => out.push(message),
        }
    }
    Ok(out)
}

/// The payload field of a turn that continues its predecessor's message (the second
/// and later tool results of one message, say).
pub(crate) const CONTINUES: &str = "forktrail:continues";

/// The field of a call's context that holds its instructions: the system and
/// developer messages a request carried among its messages, with their places (`[[index,
/// message], …]`). They are the call's, not turns: harnesses put the date, the working
/// directory and what changed into them, which differ from call to call of one
/// conversation.
pub(crate) const INSTRUCTIONS: &str = "forktrail:instructions";

/// A request's context: the body without its `key` list, which `instructions` (with
/// their places in it: `[index, message]`, or `[index, block index, block]` for a block
/// of a message) are kept in.
pub(crate) fn context_of(body: &Map<String, Value>, key: &str, instructions: Vec<Value>) -> Value {
    let mut context = body.clone();
    context.remove(key);
    if !instructions.is_empty() {
        context.insert(INSTRUCTIONS.into(), Value::Array(instructions));
    }
    Value::Object(context)
}

/// A request rebuilt: `context` with its `key` list made of `list` (the turns'
/// messages) and the instructions put back in their places.
pub(crate) fn rebuild(context: &Value, key: &str, mut list: Vec<Value>) -> Value {
    let mut out = context.as_object().cloned().unwrap_or_default();
    if let Some(Value::Array(places)) = out.remove(INSTRUCTIONS) {
        let at = |n: &Value| n.as_u64().unwrap_or(0) as usize;
        // Whole messages first, then blocks, each in the order of their places.
        for place in &places {
            if let Some([i, message]) = place.as_array().map(Vec::as_slice) {
                list.insert(at(i).min(list.len()), message.clone());
            }
        }
        for place in &places {
            if let Some([i, b, block]) = place.as_array().map(Vec::as_slice) {
                if let Some(Value::Array(blocks)) =
                    list.get_mut(at(i)).and_then(|m| m.get_mut("content"))
                {
                    blocks.insert(at(b).min(blocks.len()), block.clone());
                }
            }
        }
    }
    out.insert(key.into(), Value::Array(list));
    Value::Object(out)
}

/// A payload's text: canonical JSON (keys sorted), so that equal messages digest alike.
pub(crate) fn payload(message: &Value) -> String {
    message.to_string()
}
