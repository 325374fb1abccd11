//! What agent runtimes' session stores need from the engine, on every kind of store:
//! several turns appended all or none, the last turn popped (and refused where
//! something shares or points at it), and a runtime's own record of a turn (its
//! payload) returned as given.

use crate::common;

use common::*;
use forktrail::{Error, Kind, NewTurn, Role};

#[test]
fn append_many_writes_every_turn_or_none() {
    for s in stores() {
        let id = session_with(&s, "batch", 1);
        let turns = vec![
            NewTurn::new(Role::User, "two"),
            NewTurn::new(Role::Assistant, "three").model("m-1"),
            NewTurn::new(Role::User, "four"),
        ];
        assert_eq!(s.append_many(&id, turns).unwrap(), [1, 2, 3], "{}", s.kind);
        let loaded = s.load(&id, None).unwrap();
        assert_eq!(
            loaded
                .iter()
                .map(|t| t.content.as_str())
                .collect::<Vec<_>>(),
            ["batch 0", "two", "three", "four"],
            "{}",
            s.kind
        );
        assert_eq!(loaded[2].model.as_deref(), Some("m-1"));
        // The digests chain through the batch as through single appends.
        assert!(s.verify(Some(&id)).unwrap().is_clean(), "{}", s.kind);
        let err = fails_unchanged(&s, || {
            s.append_many(
                &id,
                vec![
                    NewTurn::new(Role::User, "fine"),
                    NewTurn::new(Role::Assistant, "bad").tool_calls("{not json"),
                ],
            )
        });
        let text = err.to_string();
        assert!(
            text.contains("turn 1 of the 2 to append") && text.contains("nothing was appended"),
            "{}: {text}",
            s.kind
        );
        assert_eq!(s.append_many(&id, Vec::new()).unwrap(), Vec::<u64>::new());
        assert_eq!(s.info(&id).unwrap().length, 4, "{}", s.kind);
    }
}

#[test]
fn pop_removes_the_last_turn_and_appends_continue_after_it() {
    for s in stores() {
        let id = session_with(&s, "pop", 3);
        let popped = s.pop(&id).unwrap().expect("a turn");
        assert_eq!((popped.index, popped.content.as_str()), (2, "pop 2"));
        assert_eq!(s.info(&id).unwrap().length, 2, "{}", s.kind);
        assert_eq!(s.replay(&id, None).unwrap().len(), 2, "{}", s.kind);
        s.append(&id, NewTurn::new(Role::Assistant, "again"))
            .unwrap();
        let replay = s.replay(&id, None).unwrap();
        assert_eq!(
            (replay[2].index, replay[2].content.as_str()),
            (2, "again"),
            "{}",
            s.kind
        );
        assert!(s.verify(Some(&id)).unwrap().is_clean(), "{}", s.kind);
        s.pop(&id).unwrap();
        s.pop(&id).unwrap();
        s.pop(&id).unwrap();
        assert_eq!(s.pop(&id).unwrap(), None, "{}", s.kind);
        assert_eq!(s.info(&id).unwrap().length, 0);
        // Nothing of the popped turns is left behind.
        let leftover = quads(&s)
            .into_iter()
            .filter(|q| q.contains("session:pop/turn/"))
            .count();
        assert_eq!(leftover, 0, "{}", s.kind);
    }
}

#[test]
fn pop_refuses_inherited_shared_and_anchored_turns_and_changes_nothing() {
    for s in stores() {
        let root = session_with(&s, "root", 3);
        let fork = fork_at(&s, &root, 3, "child", "all");
        // The fork shares turn 2: the root may not remove it.
        let err = fails_unchanged(&s, || s.pop(&root));
        assert!(matches!(err, Error::Conflict(_)), "{}: {err}", s.kind);
        assert_eq!(
            err.to_string(),
            "cannot remove turn 2 of session root: fork child shares it"
        );
        // The fork inherits all three: it may not remove any.
        let err = fails_unchanged(&s, || s.pop(&fork));
        assert!(
            err.to_string().contains("it is inherited from root"),
            "{}: {err}",
            s.kind
        );
        // A fork at 2 does not share turn 2.
        let other = session_with(&s, "other", 3);
        fork_at(&s, &other, 2, "other-child", "two");
        assert_eq!(s.pop(&other).unwrap().unwrap().index, 2, "{}", s.kind);
        // An anchor holds its turn.
        s.append(&other, NewTurn::new(Role::Assistant, "anchored"))
            .unwrap();
        s.anchor(&other, "checkpoint", None).unwrap();
        let err = fails_unchanged(&s, || s.pop(&other));
        assert!(
            err.to_string().contains("anchor \"checkpoint\" is on it"),
            "{}: {err}",
            s.kind
        );
        let missing = fails_unchanged(&s, || s.pop(&sid("nope")));
        assert!(matches!(missing, Error::SessionNotFound { .. }));
    }
}

#[test]
fn payloads_come_back_as_given_and_must_be_json() {
    for s in stores() {
        let id = session_with(&s, "items", 0);
        let item =
            r#"{"type":"function_call","call_id":"c1","name":"f","arguments":"{}","id":"fc_1"}"#;
        let turn = NewTurn::new(Role::Assistant, "")
            .kind(Kind::ToolCall)
            .tool_calls(
                r#"[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]"#,
            )
            .payload(item);
        s.append(&id, turn).unwrap();
        let loaded = s.load(&id, None).unwrap();
        assert_eq!(loaded[0].payload.as_deref(), Some(item), "{}", s.kind);
        // Serialized, the payload and the tool calls are the JSON they hold.
        let json = serde_json::to_value(&loaded[0]).unwrap();
        assert_eq!(json["payload"]["call_id"], "c1");
        assert_eq!(json["tool_calls"][0]["function"]["name"], "f");
        assert_eq!(json["kind"], "tool_call");
        let err = fails_unchanged(&s, || {
            s.append(&id, NewTurn::new(Role::User, "x").payload("{oops"))
        });
        assert!(
            err.to_string()
                .starts_with("payload for session items is not valid JSON"),
            "{}: {err}",
            s.kind
        );
        // The digest covers the tool calls and the payload: the same turn written again
        // digests alike; with another payload, or without its call, apart.
        let calls = r#"[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]"#;
        let head = |payload: &str, calls: &str| {
            let other = s.create_session(forktrail::NewSession::default()).unwrap();
            let turn = NewTurn::new(Role::Assistant, "")
                .kind(Kind::ToolCall)
                .tool_calls(calls)
                .payload(payload);
            s.append(&other, turn).unwrap();
            s.info(&other).unwrap().head_digest
        };
        let ours = s.info(&id).unwrap().head_digest;
        assert_eq!(head(item, calls), ours, "{}", s.kind);
        assert_ne!(head(r#"{"id":"fc_2"}"#, calls), ours, "{}", s.kind);
        assert_ne!(head(item, "[]"), ours, "{}", s.kind);
    }
}
