//! The tools a recording's agent had, read back from the calls it made: each tool's
//! name, and its arguments typed from the values recorded. Offered to a comparison's
//! arms, they let a model call what the agent called (a model offered no tools can only
//! answer in text), and the calls it makes can be answered from the recording.

use crate::model::tool_call::parse_tool_calls;
use crate::model::Turn;
use serde_json::{json, Map, Value};

/// OpenAI tool definitions for every tool `turns` call, in the order first called, each
/// argument typed from its recorded values (`required` when every call gave it); `None`
/// when no turn calls a tool. Calls whose JSON does not read are passed over.
pub(crate) fn recorded_tools(turns: &[Turn]) -> Option<Value> {
    let mut tools: Vec<Tool> = Vec::new();
    for turn in turns {
        let Ok(calls) = parse_tool_calls(turn.tool_calls.as_deref()) else {
            continue;
        };
        for call in calls {
            let arguments = serde_json::from_str::<Value>(&call.arguments).ok();
            let at = match tools.iter().position(|t| t.name == call.name) {
                Some(at) => at,
                None => {
                    tools.push(Tool::new(call.name));
                    tools.len() - 1
                }
            };
            tools[at].add(arguments.as_ref().and_then(Value::as_object));
        }
    }
    (!tools.is_empty()).then(|| Value::Array(tools.iter().map(Tool::definition).collect()))
}

/// One tool as its calls shaped it.
struct Tool {
    name: String,
    calls: u64,
    /// Each argument (in the order first seen), its JSON types, and how many calls gave it.
    arguments: Vec<(String, Vec<&'static str>, u64)>,
}

impl Tool {
    fn new(name: String) -> Self {
        Tool {
            name,
            calls: 0,
            arguments: Vec::new(),
        }
    }

    fn add(&mut self, arguments: Option<&Map<String, Value>>) {
        self.calls += 1;
        for (key, value) in arguments.into_iter().flatten() {
            let kind = json_type(value);
            let at = match self.arguments.iter().position(|a| &a.0 == key) {
                Some(at) => at,
                None => {
                    self.arguments.push((key.clone(), Vec::new(), 0));
                    self.arguments.len() - 1
                }
            };
            let (_, kinds, seen) = &mut self.arguments[at];
            *seen += 1;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
    }

    fn definition(&self) -> Value {
        let mut properties = Map::new();
        for (key, kinds, _) in &self.arguments {
            let kinds: Vec<&str> = kinds.iter().copied().filter(|k| *k != "null").collect();
            let schema = match kinds.as_slice() {
                [] => json!({}),
                [one] => json!({ "type": one }),
                many => json!({ "type": many }),
            };
            properties.insert(key.clone(), schema);
        }
        let mut required: Vec<&str> = self
            .arguments
            .iter()
            .filter(|(_, _, seen)| *seen == self.calls)
            .map(|(key, _, _)| key.as_str())
            .collect();
        required.sort_unstable();
        let description = match self.calls {
            1 => "As the recorded agent called it (once)".to_string(),
            n => format!("As the recorded agent called it ({n} times)"),
        };
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                },
            },
        })
    }
}

/// A value's JSON Schema type (`integer` for a whole number).
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Kind, Role, SessionId};

    fn calling(calls: Value) -> Turn {
        Turn {
            index: 0,
            role: Role::Assistant,
            kind: Kind::ToolCall,
            content: String::new(),
            name: None,
            tool_call_id: None,
            tool_calls: Some(calls.to_string()),
            model: None,
            payload: None,
            session: SessionId::new("s").unwrap(),
            branch: "main".into(),
            created_at: None,
            digest: String::new(),
        }
    }

    #[test]
    fn tools_are_read_back_from_the_recorded_calls_with_typed_arguments() {
        let turns = [
            calling(json!([{"id": "c1", "function": {"name": "get_weather",
                "arguments": r#"{"city": "Paris", "days": 2}"#}}])),
            calling(json!([{"id": "c2", "name": "get_price",
                "input": {"mode": "train", "to": "Paris", "return": false}}])),
            calling(json!([{"id": "c3", "function": {"name": "get_weather",
                "arguments": r#"{"city": "Lyon", "days": 1.5, "units": null}"#}}])),
        ];
        let tools = recorded_tools(&turns).unwrap();
        assert_eq!(
            tools[0],
            json!({"type": "function", "function": {
                "name": "get_weather",
                "description": "As the recorded agent called it (2 times)",
                "parameters": {"type": "object",
                    "properties": {"city": {"type": "string"},
                                   "days": {"type": ["integer", "number"]},
                                   "units": {}},
                    "required": ["city", "days"]}}})
        );
        assert_eq!(tools[1]["function"]["name"], "get_price");
        assert_eq!(
            tools[1]["function"]["parameters"]["properties"]["return"],
            json!({"type": "boolean"})
        );
        assert_eq!(tools.as_array().unwrap().len(), 2);
        assert_eq!(recorded_tools(&[]), None);
    }
}
