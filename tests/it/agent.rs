//! Agent-runtime features: anchors, merge-back, diff, summaries, idempotent forks,
//! exclusive writers and scoped forks.

use crate::common;

use common::*;
use forktrail::{
    Error, ForkOptions, FoundBy, Kind, MergeOptions, NewTurn, ReplayRecord, Role, SessionId, Store,
};
use oxigraph::sparql::QueryResults;

fn fork_with(store: &Store, parent: &SessionId, options: ForkOptions) -> SessionId {
    sid(&store.fork(parent, options).unwrap().session)
}

fn say(store: &Store, id: &SessionId, role: Role, text: &str) {
    store.append(id, NewTurn::new(role, text)).unwrap();
}

fn rows(store: &Store, sparql: &str) -> usize {
    match store.query(sparql, &[]).unwrap() {
        QueryResults::Solutions(s) => s.count(),
        _ => panic!("a SELECT"),
    }
}

#[test]
fn anchor_fork_work_merge_appends_one_result_turn_and_refuses_a_second_merge() {
    for s in stores() {
        let root = session_with(&s, "root", 4);
        let anchor = s.anchor(&root, "plan", Some(r#"{"step":2}"#)).unwrap();
        assert_eq!((anchor.at_index, anchor.session.as_str()), (4, "root"));
        say(&s, &root, Role::User, "root moves on");
        let child = fork_with(
            &s,
            &root,
            ForkOptions {
                anchor: Some("plan".into()),
                id: Some("child".into()),
                ..Default::default()
            },
        );
        assert_eq!(s.info(&child).unwrap().forked_at_index, Some(4));
        say(&s, &child, Role::User, "try the train");
        say(&s, &child, Role::Assistant, "the train takes 3h20");
        let plan = s.merge(&child, MergeOptions::default()).unwrap();
        assert_eq!(plan.reference, "child@4:turns:4-5");
        assert_eq!((plan.into.as_str(), plan.index), ("root", 5));
        let replay = s.replay(&root, None).unwrap();
        assert_eq!(replay.len(), 6, "{}", s.kind);
        assert_eq!(
            replay[5].content,
            "[fork_result child@4:turns:4-5]\nthe train takes 3h20\n[/fork_result]"
        );
        let turns = s.load(&root, None).unwrap();
        assert_eq!(turns[5].kind, Kind::ForkResult);
        assert_eq!(
            turns.iter().filter(|t| t.kind == Kind::ForkResult).count(),
            1
        );
        let err = fails_unchanged(&s, || s.merge(&child, MergeOptions::default()));
        assert!(
            matches!(&err, Error::Conflict(m) if m.contains("up to index 5")),
            "{err}"
        );
        // A later merge covers only the new turns, and lands at the parent's end.
        say(&s, &child, Role::Assistant, "booked");
        let again = s
            .merge(
                &child,
                MergeOptions {
                    summary: Some("booked it".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(
            (again.reference.as_str(), again.index),
            ("child@4:turns:6-6", 6)
        );
        let prefixes = "PREFIX ft: <https://w3id.org/forktrail/ns#>
                        PREFIX prov: <http://www.w3.org/ns/prov#>";
        let merges = rows(
            &s,
            &format!(
                "{prefixes} SELECT ?m WHERE {{ ?m a ft:Merge, prov:Activity ; prov:used ?c ;
                 ft:rangeStart ?a ; ft:rangeEnd ?b ; ft:mergedAtIndex ?i .
                 ?t prov:wasGeneratedBy ?m ; prov:wasDerivedFrom ?c ; ft:kind \"fork_result\" .
                 ?c ft:sessionId \"child\" }}"
            ),
        );
        assert_eq!(merges, 2, "{}", s.kind);
    }
}

#[test]
fn merge_errors_name_the_problem_and_change_nothing() {
    for s in stores() {
        let root = session_with(&s, "root", 2);
        let err = fails_unchanged(&s, || s.merge(&root, MergeOptions::default()));
        assert!(err.to_string().contains("not a fork"), "{err}");
        let child = fork_at(&s, &root, 2, "child", "x");
        let err = fails_unchanged(&s, || s.merge(&child, MergeOptions::default()));
        assert!(err.to_string().contains("no own turns"), "{err}");
        say(&s, &child, Role::User, "only a question");
        let err = fails_unchanged(&s, || s.merge(&child, MergeOptions::default()));
        assert!(err.to_string().contains("--summary"), "{err}");
        let dry = MergeOptions {
            summary: Some("s".into()),
            dry_run: true,
            ..Default::default()
        };
        let before = quads(&s);
        assert_eq!(s.merge(&child, dry).unwrap().reference, "child@2:turns:2-2");
        assert_eq!(quads(&s), before, "a dry run writes nothing");
    }
}

#[test]
fn anchors_are_unique_and_ancestors_anchors_show_only_within_the_prefix() {
    for s in stores() {
        let root = session_with(&s, "root", 2);
        s.anchor(&root, "early", None).unwrap();
        say(&s, &root, Role::User, "more");
        say(&s, &root, Role::Assistant, "more");
        s.anchor(&root, "late", None).unwrap();
        let err = fails_unchanged(&s, || s.anchor(&root, "early", None));
        assert!(
            matches!(&err, Error::Conflict(m) if m.contains("at index 2")),
            "{err}"
        );
        let err = fails_unchanged(&s, || s.anchor(&root, "x", Some("{not json")));
        assert!(err.to_string().contains("not valid JSON"), "{err}");
        assert!(matches!(
            fails_unchanged(&s, || s.anchor(&root, "a b", None)),
            Error::InvalidName { .. }
        ));
        let mid = fork_at(&s, &root, 3, "mid", "mid");
        s.anchor(&mid, "own", None).unwrap();
        let seen: Vec<(String, u64)> = s
            .anchors(&mid)
            .unwrap()
            .into_iter()
            .map(|a| (a.name, a.at_index))
            .collect();
        assert_eq!(seen, [("early".to_string(), 2), ("own".to_string(), 3)]);
        let err = fails_unchanged(&s, || {
            s.fork(
                &mid,
                ForkOptions {
                    anchor: Some("late".into()),
                    ..Default::default()
                },
            )
        });
        assert!(
            err.to_string().contains("visible anchors: early, own"),
            "{err}"
        );
        let from_ancestor = fork_with(
            &s,
            &mid,
            ForkOptions {
                anchor: Some("early".into()),
                ..Default::default()
            },
        );
        assert_eq!(s.replay(&from_ancestor, None).unwrap().len(), 2);
    }
}

fn tail(records: &[ReplayRecord]) -> Vec<&str> {
    records.iter().map(|r| r.content.as_str()).collect()
}

#[test]
fn diff_finds_the_common_prefix_of_siblings_ancestors_detached_and_unrelated_sessions() {
    for s in stores() {
        // root: "root 0".."root 3"; a and b fork at 2 and 3; c is a fork of a.
        let root = session_with(&s, "root", 4);
        let a = fork_at(&s, &root, 2, "a", "a");
        let b = fork_at(&s, &root, 3, "b", "b");
        say(&s, &a, Role::Assistant, "a says");
        say(&s, &b, Role::User, "b asks");
        let c = fork_at(&s, &a, 3, "c", "c");
        say(&s, &c, Role::User, "c asks");

        let d = s.diff(&a, &b).unwrap();
        assert_eq!((d.common_prefix, d.found_by), (2, FoundBy::Lineage));
        assert_eq!(d.common_ancestor.as_deref(), Some("root"));
        assert_eq!(tail(&d.a_tail), ["a says"]);
        assert_eq!(tail(&d.b_tail), ["root 2", "b asks"]);
        assert_eq!(d.b_tail[0].index, 2);

        let d = s.diff(&a, &c).unwrap();
        assert_eq!(d.common_ancestor.as_deref(), Some("a"));
        assert_eq!(d.common_prefix, 3);
        assert!(d.a_tail.is_empty());
        assert_eq!(tail(&d.b_tail), ["c asks"]);

        // A detached copy keeps its digests: the prefix shows although lineage is cut.
        s.detach(&c).unwrap();
        let d = s.diff(&c, &b).unwrap();
        assert_eq!((d.common_prefix, d.found_by), (2, FoundBy::Digest));
        assert_eq!(d.common_ancestor, None);
        assert_eq!(tail(&d.a_tail), ["a says", "c asks"]);

        let other = session_with(&s, "other", 1);
        let d = s.diff(&root, &other).unwrap();
        assert_eq!((d.common_prefix, d.found_by), (0, FoundBy::None));
        assert_eq!(d.a_tail.len(), 4);
        assert!(s.diff(&root, &sid("nope")).is_err());
    }
}

#[test]
fn a_summarized_fork_stores_a_short_summary_shown_by_show_branches_and_tree() {
    for s in stores() {
        let root = session_with(&s, "root", 0);
        say(&s, &root, Role::System, "Be brief.");
        say(&s, &root, Role::User, "Train or plane to Amsterdam?");
        s.append(
            &root,
            NewTurn::new(Role::Assistant, "The train.").model("model-a"),
        )
        .unwrap();
        let child = fork_with(
            &s,
            &root,
            ForkOptions {
                summarize: true,
                ..Default::default()
            },
        );
        let expected = "3 turns (1 system, 1 user, 1 assistant); models: model-a; \
                        last user request: \"Train or plane to Amsterdam?\"";
        assert_eq!(s.info(&child).unwrap().summary.as_deref(), Some(expected));
        assert_eq!(
            s.branches(&root).unwrap()[0].summary.as_deref(),
            Some(expected)
        );
        assert_eq!(
            s.tree(&root).unwrap().children[0].summary.as_deref(),
            Some(expected)
        );
    }
}

#[test]
fn show_reports_lineage_counts_and_content_bytes() {
    for s in stores() {
        let root = session_with(&s, "root", 3); // "root 0" .. "root 2": 6 bytes each
        let a = fork_at(&s, &root, 2, "a", "a");
        let b = fork_at(&s, &a, 2, "b", "b");
        say(&s, &b, Role::User, "hello");
        let info = s.info(&b).unwrap();
        assert_eq!(info.fork_root, "root");
        assert_eq!(info.depth, 2);
        assert_eq!((info.own_turns, info.inherited_turns), (1, 2));
        assert_eq!(info.own_content_bytes, Some(5));
        assert_eq!(info.inherited_content_bytes, Some(12));
        assert!(info.head_digest.is_some());
    }
}

#[test]
fn a_retried_request_returns_the_same_fork_and_other_options_conflict() {
    for s in stores() {
        let root = session_with(&s, "root", 2);
        let ask = |label: &str| ForkOptions {
            label: Some(label.into()),
            request_id: Some("req-7".into()),
            ..Default::default()
        };
        let first = s.fork(&root, ask("try")).unwrap();
        assert!(!first.reused);
        say(&s, &root, Role::User, "the parent grows");
        let again = s.fork(&root, ask("try")).unwrap();
        assert!(again.reused);
        assert_eq!(
            (again.session.as_str(), again.forked_at_index),
            (first.session.as_str(), 2)
        );
        assert_eq!(s.branches(&root).unwrap().len(), 1);
        let err = fails_unchanged(&s, || s.fork(&root, ask("other")));
        assert!(
            matches!(&err, Error::Conflict(m) if m.contains("req-7") && m.contains(first.session.as_str())),
            "{err}"
        );
        assert!(matches!(
            fails_unchanged(&s, || s.fork(
                &root,
                ForkOptions {
                    request_id: Some("no spaces".into()),
                    ..Default::default()
                }
            )),
            Error::InvalidName { .. }
        ));
    }
}

#[test]
fn a_concurrent_double_submit_creates_one_fork() {
    for s in stores() {
        let root = session_with(&s, "root", 3);
        let plans: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        s.fork(
                            &root,
                            ForkOptions {
                                at: Some(1),
                                request_id: Some("double".into()),
                                ..Default::default()
                            },
                        )
                        .unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(s.branches(&root).unwrap().len(), 1, "{}", s.kind);
        assert!(plans.iter().all(|p| p.session == plans[0].session));
        assert_eq!(plans.iter().filter(|p| !p.reused).count(), 1);
    }
}

#[test]
fn a_second_writer_is_busy_until_the_first_is_dropped() {
    let s = Store::in_memory().unwrap();
    let root = session_with(&s, "root", 1);
    let w = s.writer(&root).unwrap();
    assert_eq!(w.append(NewTurn::new(Role::User, "mine")).unwrap(), 1);
    let err = s.writer(&root).err().expect("busy");
    assert!(
        matches!(&err, Error::Busy { session } if session == "root"),
        "{err}"
    );
    drop(w);
    let again = s.writer(&root).unwrap();
    assert_eq!(again.session().as_str(), "root");
    // While held, the store's own writes to the session are refused too.
    let err = fails_unchanged(&s, || s.append(&root, NewTurn::new(Role::User, "not mine")));
    assert!(matches!(err, Error::Busy { .. }), "{err}");
    assert!(matches!(
        fails_unchanged(&s, || s.delete(&root, true)),
        Error::Busy { .. }
    ));
    assert_eq!(again.append(NewTurn::new(Role::User, "mine")).unwrap(), 2);
    drop(again);
    s.append(&root, NewTurn::new(Role::User, "free again"))
        .unwrap();
    assert!(matches!(
        s.writer(&sid("missing")).err(),
        Some(Error::SessionNotFound { .. })
    ));
}

#[test]
fn with_fork_merges_on_success_and_records_an_abandon_on_failure() {
    let s = Store::in_memory().unwrap();
    let root = session_with(&s, "root", 2);
    let plan = s
        .with_fork(&root, Some(1), |child| {
            child.append(NewTurn::new(Role::Assistant, "found it"))?;
            Ok::<_, Error>(None)
        })
        .unwrap();
    assert_eq!(plan.into, "root");
    assert!(plan.content.contains("found it"));
    assert_eq!(s.replay(&root, None).unwrap().len(), 3);

    let before = s.replay(&root, None).unwrap();
    let err = s
        .with_fork(&root, None, |child| {
            child.append(NewTurn::new(Role::Assistant, "half done"))?;
            Err::<Option<String>, _>(Error::InvalidInput("the tool failed".into()))
        })
        .unwrap_err();
    assert!(err.to_string().contains("the tool failed"));
    assert_eq!(s.replay(&root, None).unwrap(), before, "nothing merged");
    let abandoned = rows(
        &s,
        "PREFIX ft: <https://w3id.org/forktrail/ns#> PREFIX prov: <http://www.w3.org/ns/prov#>
         SELECT ?a WHERE { ?a a ft:Abandon ; prov:used ?c ; ft:reason ?why . ?c ft:branch ?b }",
    );
    assert_eq!(abandoned, 1);
    assert_eq!(s.branches(&root).unwrap().len(), 2, "the failed fork stays");
    // Work that succeeds but leaves nothing to merge: the merge error, and an abandon.
    let err = s
        .with_fork(&root, None, |_| Ok::<_, Error>(None))
        .unwrap_err();
    assert!(err.to_string().contains("no own turns"), "{err}");
    let abandoned = rows(
        &s,
        "PREFIX ft: <https://w3id.org/forktrail/ns#> SELECT ?a WHERE { ?a a ft:Abandon }",
    );
    assert_eq!(abandoned, 2);
}
