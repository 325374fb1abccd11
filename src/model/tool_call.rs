//! Tool calls as an assistant turn stores them (`ft:toolCalls`, a JSON text), read in one
//! place: the digest covers them in canonical form, what-if runs match and send them.

use serde_json::{Map, Value};

/// One tool call of an assistant turn, as OpenAI shapes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ToolCall {
    pub(crate) id: String,
    pub(crate) name: String,
    /// The arguments as the model wrote them (a JSON text).
    pub(crate) arguments: String,
}

impl ToolCall {
    /// The arguments in canonical form: parsed and written back with sorted keys, so that
    /// two calls with equal JSON arguments compare equal whatever their spacing or order.
    pub(crate) fn canonical_arguments(&self) -> String {
        match serde_json::from_str::<Value>(&self.arguments) {
            Ok(value) => canonical(&value),
            Err(_) => self.arguments.clone(),
        }
    }

    /// `name(arguments)`, for messages.
    pub(crate) fn signature(&self) -> String {
        let args: String = self.canonical_arguments().chars().take(200).collect();
        format!("{}({args})", self.name)
    }

    /// `name(arguments)` with the whole canonical arguments, for diffs.
    pub(crate) fn full_signature(&self) -> String {
        format!("{}({})", self.name, self.canonical_arguments())
    }
}

/// Tool calls from their stored JSON text: an array of `{id, function: {name,
/// arguments}}` (OpenAI's shape), or of `{id, name, arguments | input}`.
pub(crate) fn parse_tool_calls(text: Option<&str>) -> std::result::Result<Vec<ToolCall>, String> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let list = value.as_array().ok_or("not a JSON array")?;
    list.iter()
        .map(|call| {
            let function = call.get("function").unwrap_or(call);
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .ok_or("a call without a function name")?;
            let arguments = match function.get("arguments").or_else(|| function.get("input")) {
                Some(Value::String(s)) => s.clone(),
                None | Some(Value::Null) => "{}".into(),
                Some(other) => other.to_string(),
            };
            Ok(ToolCall {
                id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                name: name.to_string(),
                arguments,
            })
        })
        .collect()
}

/// The canonical text of stored tool calls, what the digest covers: a JSON array of
/// `{"arguments", "id", "name"}` in call order, each call's arguments parsed and written
/// with sorted keys (`"arguments_text"`, the text as written, when they are not JSON).
/// Anything else a call object holds (`"type": "function"`) is left out: it is how a
/// format spells a call, not what was called. `None` when `text` is not a list of calls;
/// the digest then covers the text as stored.
///
/// Two spellings of one call (OpenAI's `function.arguments` text, Anthropic's `input`
/// object) have one canonical text, so one history recorded from two sources digests
/// alike.
pub(crate) fn canonical_calls(text: &str) -> Option<String> {
    let calls = parse_tool_calls(Some(text)).ok()?;
    let list: Vec<Value> = calls
        .into_iter()
        .map(|call| {
            let mut out = Map::new();
            match serde_json::from_str::<Value>(&call.arguments) {
                Ok(arguments) => out.insert("arguments".into(), arguments),
                Err(_) => out.insert("arguments_text".into(), Value::String(call.arguments)),
            };
            out.insert("id".into(), Value::String(call.id));
            out.insert("name".into(), Value::String(call.name));
            Value::Object(out)
        })
        .collect();
    Some(canonical(&Value::Array(list)))
}

/// `value` as JSON text with object keys sorted (serde_json's maps keep insertion order
/// only with a feature this crate does not use; sorting here does not depend on it).
pub(crate) fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&map[k]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_spellings_of_one_call_have_one_canonical_text() {
        let openai = r#"[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"b\": 1, \"a\": 2}"}}]"#;
        let input = r#"[{"id":"c1","name":"f","input":{"a":2,"b":1}}]"#;
        assert_eq!(canonical_calls(openai), canonical_calls(input));
        assert_eq!(
            canonical_calls(input).as_deref(),
            Some(r#"[{"arguments":{"a":2,"b":1},"id":"c1","name":"f"}]"#)
        );
    }

    #[test]
    fn calls_differing_in_arguments_ids_names_or_order_differ() {
        let call = |id: &str, name: &str, day: &str| {
            format!(
                r#"{{"id":"{id}","function":{{"name":"{name}","arguments":"{{\"day\":\"{day}\"}}"}}}}"#
            )
        };
        let one = format!("[{}]", call("a", "search_trains", "friday"));
        let others = [
            format!("[{}]", call("a", "search_trains", "sunday")),
            format!("[{}]", call("b", "search_trains", "friday")),
            format!("[{}]", call("a", "search_buses", "friday")),
            format!("[{},{}]", call("a", "f", "x"), call("b", "g", "y")),
            format!("[{},{}]", call("b", "g", "y"), call("a", "f", "x")),
        ];
        let mut seen = vec![canonical_calls(&one).unwrap()];
        for other in &others {
            let c = canonical_calls(other).unwrap();
            assert!(!seen.contains(&c), "{other} collides");
            seen.push(c);
        }
    }

    #[test]
    fn arguments_that_are_not_json_are_kept_apart_from_a_json_string() {
        let raw = r#"[{"id":"a","function":{"name":"f","arguments":"abc"}}]"#;
        let string = r#"[{"id":"a","function":{"name":"f","arguments":"\"abc\""}}]"#;
        assert_ne!(canonical_calls(raw), canonical_calls(string));
        assert_eq!(canonical_calls("not json"), None);
        assert_eq!(canonical_calls(r#"[{"id":"a"}]"#), None);
    }
}
