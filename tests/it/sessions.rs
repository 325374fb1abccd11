//! Sessions and turns: create, append, replay, digests, and bad input that changes nothing.

use crate::common;

use common::*;
use forktrail::{turn_digest, Error, Kind, NewSession, NewTurn, ReplayRecord, Role, SessionId};

#[test]
fn append_returns_contiguous_indices_and_replay_returns_them_in_order() {
    for s in stores() {
        let id = s.create_session(NewSession::default()).unwrap();
        assert_eq!(
            s.append(&id, NewTurn::new(Role::System, "be brief"))
                .unwrap(),
            0
        );
        assert_eq!(s.append(&id, NewTurn::new(Role::User, "hi")).unwrap(), 1);
        assert_eq!(
            s.append(&id, NewTurn::new(Role::Assistant, "hello"))
                .unwrap(),
            2
        );
        let records = s.replay(&id, None).unwrap();
        let expected: Vec<ReplayRecord> = [
            (Role::System, "be brief"),
            (Role::User, "hi"),
            (Role::Assistant, "hello"),
        ]
        .iter()
        .enumerate()
        .map(|(i, (role, content))| ReplayRecord::new(i as u64, *role, *content, "main"))
        .collect();
        assert_eq!(records, expected, "{}", s.kind);
    }
}

#[test]
fn generated_ids_are_lowercase_uuid_v7() {
    let s = &stores()[0];
    let id = s.create_session(NewSession::default()).unwrap();
    let uuid = uuid::Uuid::parse_str(id.as_str()).unwrap();
    assert_eq!(uuid.get_version_num(), 7);
    assert_eq!(id.as_str(), id.as_str().to_lowercase());
}

#[test]
fn up_to_is_inclusive_and_past_the_end_is_an_error_naming_the_session() {
    for s in stores() {
        let id = session_with(&s, "s", 5);
        let records = s.replay(&id, Some(2)).unwrap();
        assert_eq!(
            records.iter().map(|r| r.index).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        let err = s.replay(&id, Some(5)).unwrap_err();
        assert!(
            matches!(err, Error::IndexOutOfRange { index: 5, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("session s"), "{err}");
    }
}

#[test]
fn turn_fields_round_trip_through_load() {
    for s in stores() {
        let id = session_with(&s, "t", 0);
        let turn = NewTurn::new(Role::Assistant, "calling")
            .kind(Kind::ToolCall)
            .model("meta-llama/Llama-3.1-8B@rev:2")
            .tool_calls(r#"[{"id":"c1"}]"#);
        s.append(&id, turn).unwrap();
        s.append(
            &id,
            NewTurn::new(Role::Tool, "42")
                .name("calc")
                .tool_call_id("c1"),
        )
        .unwrap();
        let turns = s.load(&id, None).unwrap();
        assert_eq!(turns[0].kind, Kind::ToolCall);
        assert_eq!(
            turns[0].model.as_deref(),
            Some("meta-llama/Llama-3.1-8B@rev:2")
        );
        assert_eq!(turns[0].tool_calls.as_deref(), Some(r#"[{"id":"c1"}]"#));
        assert_eq!(turns[1].name.as_deref(), Some("calc"));
        assert_eq!(turns[1].tool_call_id.as_deref(), Some("c1"));
        assert_eq!(turns[1].kind, Kind::Message);
        assert!(turns[1].created_at.is_some());
    }
}

#[test]
fn digests_chain_each_turn_onto_its_predecessor() {
    for s in stores() {
        let id = session_with(&s, "d", 3);
        let turns = s.load(&id, None).unwrap();
        let mut prev = String::new();
        for t in &turns {
            let expected = turn_digest(&prev, t.index, &NewTurn::from(t));
            assert_eq!(t.digest, expected, "turn {}", t.index);
            prev = expected;
        }
        assert_eq!(
            s.info(&id).unwrap().head_digest.as_deref(),
            Some(prev.as_str())
        );
    }
}

#[test]
fn empty_content_is_allowed() {
    for s in stores() {
        let id = session_with(&s, "e", 0);
        s.append(&id, NewTurn::new(Role::Assistant, "")).unwrap();
        assert_eq!(s.replay(&id, None).unwrap()[0].content, "");
    }
}

#[test]
fn a_20_mb_content_is_stored_and_replayed_intact_or_refused_whole() {
    for s in stores() {
        let id = session_with(&s, "big", 1);
        let big: String = (0..20 * 1024 * 1024)
            .map(|i| (b'a' + (i % 26) as u8) as char)
            .collect();
        if s.kind == "virtuoso" {
            // Virtuoso refuses a request string over 10 MB: the append fails whole.
            let err = fails_unchanged(&s, || s.append(&id, NewTurn::new(Role::Tool, big)));
            // Its reason reaches the user, clipped (Virtuoso echoes the whole request).
            assert!(err.to_string().contains("longer than 10Mb"), "{err}");
            assert!(err.to_string().len() < 2_000, "{}", err.to_string().len());
            assert_eq!(s.replay(&id, None).unwrap().len(), 1);
            continue;
        }
        s.append(&id, NewTurn::new(Role::Tool, big.clone()))
            .unwrap();
        let records = s.replay(&id, None).unwrap();
        assert_eq!(records[1].content.len(), big.len());
        assert!(records[1].content == big, "{}: content differs", s.kind);
    }
}

#[test]
fn hostile_content_and_title_are_stored_verbatim_and_nothing_else_happens() {
    let hostile = "x\" } ; DROP ALL ; # \n<urn:x> <urn:y> \"z\" .\n'''\"\"\" \\u0000 @prefix";
    for s in stores() {
        let keep = session_with(&s, "keep", 2);
        let before = quads(&s).len();
        let id = s
            .create_session(NewSession {
                id: Some("victim".into()),
                title: Some(hostile.into()),
                principal: None,
            })
            .unwrap();
        s.append(&id, NewTurn::new(Role::User, hostile)).unwrap();
        assert_eq!(s.replay(&id, None).unwrap()[0].content, hostile);
        assert_eq!(s.info(&id).unwrap().title.as_deref(), Some(hostile));
        assert_eq!(
            s.replay(&keep, None).unwrap().len(),
            2,
            "other data survived"
        );
        assert!(quads(&s).len() > before);
    }
}

#[test]
fn unknown_session_is_refused_naming_it_and_changes_nothing() {
    for s in stores() {
        session_with(&s, "a", 2);
        let ghost = sid("ghost");
        let err = fails_unchanged(&s, || s.append(&ghost, NewTurn::new(Role::User, "x")));
        assert!(matches!(&err, Error::SessionNotFound { session } if session == "ghost"));
        assert_eq!(err.to_string(), "session ghost not found");
        let err = fails_unchanged(&s, || s.replay(&ghost, None));
        assert!(matches!(err, Error::SessionNotFound { .. }));
        let err = fails_unchanged(&s, || s.delete(&ghost, true));
        assert!(matches!(err, Error::SessionNotFound { .. }));
    }
}

#[test]
fn invalid_ids_are_refused_with_the_reason_and_change_nothing() {
    for s in stores() {
        session_with(&s, "a", 1);
        for (bad, why) in [
            ("x> } ; DROP ALL ; #", "not allowed"),
            ("", "empty"),
            ("white space", "not allowed"),
            ("é", "not allowed"),
            (&"x".repeat(129), "longer than 128"),
        ] {
            let err = fails_unchanged(&s, || {
                s.create_session(NewSession {
                    id: Some(bad.to_string()),
                    ..Default::default()
                })
            });
            assert!(matches!(err, Error::InvalidId { .. }), "{bad:?}: {err}");
            assert!(err.to_string().contains(why), "{bad:?}: {err}");
        }
        assert!("x".repeat(128).parse::<SessionId>().is_ok());
    }
}

#[test]
fn a_taken_id_is_a_conflict() {
    for s in stores() {
        session_with(&s, "taken", 1);
        let err = fails_unchanged(&s, || {
            s.create_session(NewSession {
                id: Some("taken".into()),
                ..Default::default()
            })
        });
        assert!(matches!(err, Error::Conflict(_)), "{err}");
    }
}

#[test]
fn unknown_role_and_kind_are_refused() {
    let err = "robot".parse::<Role>().unwrap_err();
    assert!(matches!(err, Error::InvalidRole { .. }));
    assert!(err.to_string().contains("robot"));
    assert!(matches!(
        "chat".parse::<Kind>(),
        Err(Error::InvalidKind { .. })
    ));
    assert_eq!("tool_call".parse::<Kind>().unwrap(), Kind::ToolCall);
}

#[test]
fn invalid_tool_calls_json_and_model_names_change_nothing() {
    for s in stores() {
        let id = session_with(&s, "j", 1);
        let err = fails_unchanged(&s, || {
            s.append(&id, NewTurn::new(Role::Assistant, "x").tool_calls("[{oops"))
        });
        assert!(matches!(err, Error::InvalidInput(_)), "{err}");
        let err = fails_unchanged(&s, || {
            s.append(&id, NewTurn::new(Role::Assistant, "x").model("bad\nname"))
        });
        assert!(
            matches!(
                err,
                Error::InvalidName {
                    what: "model name",
                    ..
                }
            ),
            "{err}"
        );
        let err = fails_unchanged(&s, || {
            s.create_session(NewSession {
                principal: Some("alice smith".into()),
                ..Default::default()
            })
        });
        assert!(
            matches!(
                err,
                Error::InvalidName {
                    what: "principal",
                    ..
                }
            ),
            "{err}"
        );
    }
}

#[test]
fn list_returns_every_session_with_its_facts() {
    for s in stores() {
        let a = session_with(&s, "a", 2);
        fork_at(&s, &a, 1, "b", "alt");
        let list = s.list().unwrap();
        let ids: Vec<&str> = list.iter().map(|i| i.session.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(list[1].parent.as_deref(), Some("a"));
        assert_eq!((list[1].length, list[1].own_turns), (1, 0));
    }
}

#[test]
fn a_deleted_and_recreated_session_starts_again_at_index_0() {
    for s in stores() {
        let a = session_with(&s, "a", 3);
        assert_eq!(s.info(&a).unwrap().length, 3);
        s.delete(&a, false).unwrap();
        let a = session_with(&s, "a", 0);
        assert_eq!(s.append(&a, NewTurn::new(Role::User, "again")).unwrap(), 0);
        assert_eq!(s.replay(&a, None).unwrap().len(), 1);
    }
}

#[test]
fn lengths_follow_a_sparql_update_that_removes_the_last_turn() {
    for s in stores() {
        let a = session_with(&s, "a", 3);
        assert_eq!(s.info(&a).unwrap().length, 3);
        // An update cannot bind values: the IRI is an oxrdf term rendered by Display.
        let turn =
            oxigraph::model::NamedNode::new(format!("{}/turn/2", s.session_iri(&a).as_str()))
                .unwrap();
        s.update(
            &format!("DELETE WHERE {{ GRAPH ?g {{ {turn} ?p ?o }} }}"),
            None,
        )
        .unwrap();
        assert_eq!(s.info(&a).unwrap().length, 2);
        assert_eq!(s.append(&a, NewTurn::new(Role::User, "new 2")).unwrap(), 2);
        assert_eq!(s.replay(&a, None).unwrap()[2].content, "new 2");
    }
}
