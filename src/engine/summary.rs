//! The deterministic summary `fork --summarize` stores: what happened in the inherited
//! prefix, from the turns alone (no model).

use crate::model::{Kind, Role, Turn};
use std::collections::BTreeSet;

/// The longest summary, in characters.
pub(crate) const MAX_CHARS: usize = 500;

/// `1 turn` or `2 turns`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `N turns (a system, b user, …); K tool calls (names); models: …; last user request: "…"`,
/// cut to [`MAX_CHARS`] characters.
pub(crate) fn summarize(turns: &[Turn]) -> String {
    if turns.is_empty() {
        return "no inherited turns".into();
    }
    let roles = [Role::System, Role::User, Role::Assistant, Role::Tool];
    let counts: Vec<String> = roles
        .iter()
        .map(|role| (role, turns.iter().filter(|t| t.role == *role).count()))
        .filter(|(_, n)| *n > 0)
        .map(|(role, n)| format!("{n} {role}"))
        .collect();
    let mut out = format!(
        "{} ({})",
        count(turns.len(), "turn", "turns"),
        counts.join(", ")
    );
    let mut calls = 0;
    let mut tools = BTreeSet::new();
    for t in turns {
        match t
            .tool_calls
            .as_deref()
            .map(serde_json::from_str::<serde_json::Value>)
        {
            Some(Ok(serde_json::Value::Array(list))) => {
                calls += list.len();
                for call in &list {
                    if let Some(name) = call.pointer("/function/name").and_then(|n| n.as_str()) {
                        tools.insert(name.to_string());
                    }
                }
            }
            _ if t.kind == Kind::ToolCall => calls += 1,
            _ => {}
        }
        if t.role == Role::Tool {
            if let Some(name) = &t.name {
                tools.insert(name.clone());
            }
        }
    }
    if calls > 0 || !tools.is_empty() {
        out += &format!("; {}", count(calls, "tool call", "tool calls"));
        if !tools.is_empty() {
            out += &format!(" ({})", tools.into_iter().collect::<Vec<_>>().join(", "));
        }
    }
    let models: BTreeSet<&str> = turns.iter().filter_map(|t| t.model.as_deref()).collect();
    if !models.is_empty() {
        out += &format!(
            "; models: {}",
            models.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    if let Some(last) = turns.iter().rev().find(|t| t.role == Role::User) {
        let request: String = last
            .content
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        out += &format!("; last user request: {request:?}");
    }
    if out.chars().count() > MAX_CHARS {
        out = out.chars().take(MAX_CHARS - 1).collect::<String>() + "…";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(role: Role, content: &str) -> Turn {
        Turn {
            index: 0,
            role,
            kind: Kind::Message,
            content: content.into(),
            name: None,
            tool_call_id: None,
            tool_calls: None,
            model: None,
            payload: None,
            session: crate::model::SessionId::new("s").unwrap(),
            branch: "main".into(),
            created_at: None,
            digest: String::new(),
        }
    }

    #[test]
    fn counts_roles_tools_models_and_quotes_the_last_user_request() {
        let mut call = turn(Role::Assistant, "");
        call.tool_calls = Some(
            r#"[{"id":"c1","type":"function","function":{"name":"search_trains","arguments":"{}"}},
                {"id":"c2","type":"function","function":{"name":"weather","arguments":"{}"}}]"#
                .into(),
        );
        call.model = Some("model-a".into());
        let mut result = turn(Role::Tool, "3h20");
        result.name = Some("search_trains".into());
        let mut answer = turn(Role::Assistant, "Take the train.");
        answer.model = Some("model-b".into());
        let turns = [
            turn(Role::System, "Be brief."),
            turn(Role::User, "Train or plane?"),
            call,
            result,
            answer,
            turn(Role::User, "And  the\nprice?"),
        ];
        assert_eq!(
            summarize(&turns),
            "6 turns (1 system, 2 user, 2 assistant, 1 tool); 2 tool calls (search_trains, \
             weather); models: model-a, model-b; last user request: \"And the price?\""
        );
    }

    #[test]
    fn one_of_a_thing_is_singular() {
        let mut call = turn(Role::Assistant, "");
        call.tool_calls = Some(
            r#"[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}}]"#
                .into(),
        );
        assert_eq!(
            summarize(&[call]),
            "1 turn (1 assistant); 1 tool call (lookup)"
        );
    }

    #[test]
    fn is_capped_and_says_when_nothing_is_inherited() {
        assert_eq!(summarize(&[]), "no inherited turns");
        let long = summarize(&[turn(Role::User, &"word ".repeat(400))]);
        assert_eq!(long.chars().count(), MAX_CHARS);
        assert!(long.ends_with('…'));
    }
}
