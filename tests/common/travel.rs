//! The travel-agent recording that what-if tests compare models against, and the
//! scripted model replies that replay it or go their own way.

use super::session_with;
use super::stub::{self, completion, Reply};
use forktrail::{Kind, NewTurn, Role, SessionId, Store};
use serde_json::{json, Value};

/// Records root session `id`, an agent session with tool calls:
/// 0 system, 1 user, 2 assistant calls get_weather(Paris), 3 tool result,
/// 4 assistant answers, 5 user, 6 assistant calls get_price(train), 7 tool result,
/// 8 assistant answers. Every assistant turn is `model-a`'s; none records usage.
pub fn session(store: &Store, id: &str) -> SessionId {
    let root = session_with(store, id, 0);
    let call = |id: &str, name: &str, args: Value| {
        json!([{"id": id, "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}])
        .to_string()
    };
    let turns = vec![
        NewTurn::new(Role::System, "You are a travel agent."),
        NewTurn::new(Role::User, "Weather in Paris?"),
        NewTurn::new(Role::Assistant, "")
            .kind(Kind::ToolCall)
            .tool_calls(call("c1", "get_weather", json!({"city": "Paris"})))
            .model("model-a"),
        NewTurn::new(Role::Tool, "18C, sunny")
            .tool_call_id("c1")
            .name("get_weather"),
        NewTurn::new(Role::Assistant, "It is 18C and sunny.").model("model-a"),
        NewTurn::new(Role::User, "And the train price?"),
        NewTurn::new(Role::Assistant, "")
            .kind(Kind::ToolCall)
            .tool_calls(call(
                "c2",
                "get_price",
                json!({"mode": "train", "to": "Paris"}),
            ))
            .model("model-a"),
        NewTurn::new(Role::Tool, "49 EUR")
            .tool_call_id("c2")
            .name("get_price"),
        NewTurn::new(Role::Assistant, "49 EUR by train.").model("model-a"),
    ];
    store.append_many(&root, turns).unwrap();
    root
}

/// How many assistant messages a chat request holds: how far from the fork point it is.
pub fn answered(request: &Value) -> usize {
    request["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count())
}

/// `model` replaying the recorded assistant turns after index 1, picked by how many
/// assistant messages the request holds, with usage 100/10/0, 120/8/100, 140/12/0 and
/// 160/6/0 (input/output/cached: 520 in, 36 out, 100 cached in all).
pub fn replay(model: &str, request: &Value) -> Reply {
    Reply::ok(match answered(request) {
        0 => completion(
            model,
            None,
            &[("x1", "get_weather", json!({"city": "Paris"}))],
            (100, 10, 0),
            "tool_calls",
        ),
        1 => completion(
            model,
            Some("It is 18C and sunny."),
            &[],
            (120, 8, 100),
            "stop",
        ),
        2 => completion(
            model,
            None,
            &[("x2", "get_price", json!({"to": "Paris", "mode": "train"}))],
            (140, 12, 0),
            "tool_calls",
        ),
        _ => completion(model, Some("49 EUR by train."), &[], (160, 6, 0), "stop"),
    })
}

/// `model` going its own way from turn 2: it calls get_weather as recorded, answers
/// turn 4 in other words ("Sunny, 18C."), then calls book_flight, a tool the recording
/// never answered; usage 50/5, 60/5, 70/5 (180 in, 15 out).
pub fn books_a_flight(model: &str, request: &Value) -> Reply {
    Reply::ok(match answered(request) {
        0 => completion(
            model,
            None,
            &[("y1", "get_weather", json!({"city": "Paris"}))],
            (50, 5, 0),
            "tool_calls",
        ),
        1 => completion(model, Some("Sunny, 18C."), &[], (60, 5, 0), "stop"),
        _ => completion(
            model,
            None,
            &[("y2", "book_flight", json!({"to": "Paris"}))],
            (70, 5, 0),
            "tool_calls",
        ),
    })
}

/// A stub serving two models from turn 2 of [`session`]: `model-a` [`replay`]s the
/// recording, `model-b` [`books_a_flight`]; any other model answers `other_text`
/// (usage 1/1).
pub fn two_models(other_text: &'static str) -> stub::Stub {
    stub::scripted(move |request, _| {
        let model = request["model"].as_str().unwrap_or("");
        match model {
            "model-a" => replay(model, request),
            "model-b" => books_a_flight(model, request),
            _ => Reply::ok(completion(model, Some(other_text), &[], (1, 1, 0), "stop")),
        }
    })
}
