//! Forks: share-don't-copy, stitching, labels, depth, cycles, missing parents, delete,
//! detach, branches and tree.

use crate::common;

use common::*;
use forktrail::{
    Error, ForkOptions, NewTurn, ReplayRecord, Role, SessionId, Store, MAX_FORK_DEPTH,
};
use oxigraph::model::{GraphName, Literal, NamedNode, Quad};

fn rec(index: u64, role: Role, content: &str, branch: &str) -> ReplayRecord {
    ReplayRecord::new(index, role, content, branch)
}

#[test]
fn replay_of_a_depth_3_chain_equals_the_hand_computed_records() {
    for s in stores() {
        let a = session_with(&s, "a", 4); // a 0..3
        let b = fork_at(&s, &a, 2, "b", "left"); // inherits a0 a1
        s.append(&b, NewTurn::new(Role::User, "b2")).unwrap();
        s.append(&b, NewTurn::new(Role::Assistant, "b3")).unwrap();
        s.append(&b, NewTurn::new(Role::User, "b4")).unwrap();
        let c = fork_at(&s, &b, 3, "c", "deeper"); // inherits a0 a1 b2
        s.append(&c, NewTurn::new(Role::Assistant, "c3")).unwrap();
        let d = fork_at(&s, &c, 4, "d", "deepest"); // inherits a0 a1 b2 c3
        s.append(&d, NewTurn::new(Role::User, "d4")).unwrap();
        s.append(&a, NewTurn::new(Role::User, "a grows after the forks"))
            .unwrap();
        let expected = vec![
            rec(0, Role::User, "a 0", "main"),
            rec(1, Role::Assistant, "a 1", "main"),
            rec(2, Role::User, "b2", "left"),
            rec(3, Role::Assistant, "c3", "deeper"),
            rec(4, Role::User, "d4", "deepest"),
        ];
        assert_eq!(s.replay(&d, None).unwrap(), expected, "{}", s.kind);
        assert_eq!(s.replay(&d, Some(2)).unwrap(), expected[..3].to_vec());
        assert_eq!(s.replay(&d, Some(0)).unwrap(), expected[..1].to_vec());
        let sparql = s.replay_sparql(&d, None);
        assert_eq!(
            sparql.map_err(|e| format!("{}: {e}", s.kind)),
            Ok(expected.clone())
        );
        assert_eq!(
            s.replay_sparql(&d, Some(2)).unwrap(),
            expected[..3].to_vec()
        );
        assert_eq!(s.info(&d).unwrap().depth, 3);
        assert_eq!(s.info(&d).unwrap().fork_root, "a");
    }
}

#[test]
fn a_fork_of_a_fork_may_cut_inside_the_inherited_prefix() {
    for s in stores() {
        let a = session_with(&s, "a", 6); // a 0..5
        let b = fork_at(&s, &a, 4, "b", "mid"); // inherits a0..a3
        s.append(&b, NewTurn::new(Role::User, "b4")).unwrap();
        // c forks b at 2, inside what b inherited from a: c must not see a2 or a3.
        let c = fork_at(&s, &b, 2, "c", "early");
        s.append(&c, NewTurn::new(Role::Assistant, "c2")).unwrap();
        let expected = vec![
            rec(0, Role::User, "a 0", "main"),
            rec(1, Role::Assistant, "a 1", "main"),
            rec(2, Role::Assistant, "c2", "early"),
        ];
        assert_eq!(s.replay(&c, None).unwrap(), expected, "{}", s.kind);
        let sparql = s.replay_sparql(&c, None);
        assert_eq!(
            sparql.map_err(|e| format!("{}: {e}", s.kind)),
            Ok(expected.clone())
        );
        let turns = s.load(&c, None).unwrap();
        assert_eq!(
            s.info(&c).unwrap().head_digest.as_deref(),
            Some(turns[2].digest.as_str())
        );
        assert_eq!(turns[1].digest, s.load(&a, None).unwrap()[1].digest);
    }
}

/// Counts the quads a fork adds to the store.
fn quads_added_by_fork(store: &Store, history: usize) -> usize {
    let parent = session_with(store, &format!("p{history}"), 0);
    for i in 0..history {
        store
            .append(&parent, NewTurn::new(Role::User, format!("turn {i}")))
            .unwrap();
    }
    let before = store.len().unwrap();
    store
        .fork(
            &parent,
            ForkOptions {
                label: Some("same".into()),
                reason: Some("measure".into()),
                ..Default::default()
            },
        )
        .unwrap();
    store.len().unwrap() - before
}

#[test]
fn a_fork_of_50000_turns_writes_as_many_quads_as_a_fork_of_5() {
    let store = Store::in_memory().unwrap();
    let small = quads_added_by_fork(&store, 5);
    let large = quads_added_by_fork(&store, 50_000);
    assert_eq!(small, large);
    assert!(small < 30, "a fork writes a handful of quads, not {small}");
}

#[test]
fn a_fork_stays_pinned_while_its_parent_grows() {
    for s in stores() {
        let a = session_with(&s, "a", 3);
        let b = s.fork(&a, ForkOptions::default()).unwrap();
        assert_eq!(
            b.forked_at_index, 3,
            "default fork point is the parent's length"
        );
        append_n(&s, &a, 2);
        let b = sid(&b.session);
        assert_eq!(s.replay(&b, None).unwrap().len(), 3);
        assert_eq!(s.append(&b, NewTurn::new(Role::User, "own")).unwrap(), 3);
    }
}

#[test]
fn a_forks_first_turn_chains_onto_the_parents_digest_at_k_minus_1() {
    for s in stores() {
        let a = session_with(&s, "a", 4);
        let b = fork_at(&s, &a, 2, "b", "x");
        s.append(&b, NewTurn::new(Role::User, "a 2")).unwrap();
        let a_turns = s.load(&a, None).unwrap();
        let b_turns = s.load(&b, None).unwrap();
        assert_eq!(
            b_turns[1].digest, a_turns[1].digest,
            "shared prefix, same digest"
        );
        // Same index, role and content as a's turn 2, on the same prefix: same digest.
        assert_eq!(b_turns[2].digest, a_turns[2].digest);
    }
}

#[test]
fn default_labels_are_fork_and_8_hex_and_unique() {
    for s in stores() {
        let a = session_with(&s, "a", 1);
        let mut labels = std::collections::HashSet::new();
        for _ in 0..20 {
            let plan = s.fork(&a, ForkOptions::default()).unwrap();
            let hex = plan.branch.strip_prefix("fork-").unwrap();
            assert_eq!(hex.len(), 8);
            assert!(hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
            assert!(labels.insert(plan.branch));
        }
    }
}

#[test]
fn fork_index_out_of_range_is_refused_naming_parent_and_range() {
    for s in stores() {
        let a = session_with(&s, "a", 3);
        for at in [4, 5, u64::MAX] {
            let err = fails_unchanged(&s, || {
                s.fork(
                    &a,
                    ForkOptions {
                        at: Some(at),
                        ..Default::default()
                    },
                )
            });
            assert!(
                matches!(err, Error::IndexOutOfRange { index, .. } if index == i128::from(at)),
                "{err}"
            );
            assert!(err.to_string().contains("session a") && err.to_string().contains("0..=3"));
        }
        for at in [0, 3] {
            s.fork(
                &a,
                ForkOptions {
                    at: Some(at),
                    ..Default::default()
                },
            )
            .unwrap();
        }
    }
}

#[test]
fn duplicate_sibling_labels_and_invalid_labels_are_refused() {
    for s in stores() {
        let a = session_with(&s, "a", 2);
        let other = session_with(&s, "other", 2);
        fork_at(&s, &a, 1, "b", "retry");
        let err = fails_unchanged(&s, || {
            s.fork(
                &a,
                ForkOptions {
                    label: Some("retry".into()),
                    ..Default::default()
                },
            )
        });
        assert!(
            matches!(&err, Error::DuplicateLabel { existing, .. } if existing == "b"),
            "{err}"
        );
        // The same label under another parent is fine.
        fork_at(&s, &other, 1, "c", "retry");
        for bad in ["x\" } ; DROP ALL ; #", "", &"l".repeat(65)] {
            let err = fails_unchanged(&s, || {
                s.fork(
                    &a,
                    ForkOptions {
                        label: Some(bad.into()),
                        ..Default::default()
                    },
                )
            });
            assert!(
                matches!(
                    err,
                    Error::InvalidName {
                        what: "branch label",
                        ..
                    }
                ),
                "{err}"
            );
        }
    }
}

#[test]
fn dry_run_returns_the_plan_and_writes_nothing() {
    for s in stores() {
        let a = session_with(&s, "a", 3);
        let before = quads(&s);
        let plan = s
            .fork(
                &a,
                ForkOptions {
                    at: Some(1),
                    label: Some("x".into()),
                    dry_run: true,
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(before, quads(&s));
        assert_eq!(
            (plan.forked_at_index, plan.branch.as_str(), plan.depth),
            (1, "x", 1)
        );
        assert_eq!((plan.parent.as_str(), plan.fork_root.as_str()), ("a", "a"));
    }
}

#[test]
fn a_fork_at_depth_33_is_refused() {
    for s in stores() {
        let mut leaf = session_with(&s, "d0", 1);
        for depth in 1..=MAX_FORK_DEPTH {
            leaf = fork_at(&s, &leaf, 1, &format!("d{depth}"), "next");
        }
        assert_eq!(s.info(&leaf).unwrap().depth, 32);
        assert_eq!(s.replay(&leaf, None).unwrap().len(), 1);
        let err = fails_unchanged(&s, || s.fork(&leaf, ForkOptions::default()));
        assert!(matches!(err, Error::ForkTooDeep { depth: 33, .. }), "{err}");
    }
}

fn set_parent(store: &Store, child: &str, parent: &str) {
    let c = store.session_iri(&sid(child));
    let p = store.session_iri(&sid(parent));
    let pred = NamedNode::new("https://w3id.org/forktrail/ns#parentSession").unwrap();
    let at = NamedNode::new("https://w3id.org/forktrail/ns#forkedAtIndex").unwrap();
    let g = GraphName::NamedNode(c.clone());
    insert_behind(
        store,
        &[
            Quad::new(c.clone(), pred, p, g.clone()),
            Quad::new(c, at, Literal::from(0u64), g),
        ],
    );
}

#[test]
fn a_hand_made_cycle_is_detected_and_named() {
    for s in stores() {
        let a = session_with(&s, "a", 1);
        fork_at(&s, &a, 1, "b", "x");
        fork_at(&s, &sid("b"), 1, "c", "y");
        set_parent(&s, "a", "c"); // a -> c -> b -> a
        for op in [
            Box::new(|| s.replay(&sid("c"), None).map(|_| ()))
                as Box<dyn Fn() -> Result<(), Error>>,
            Box::new(|| s.fork(&sid("c"), ForkOptions::default()).map(|_| ())),
        ] {
            let err = fails_unchanged(&s, op);
            let Error::CycleDetected { cycle, .. } = &err else {
                panic!("{err}")
            };
            assert_eq!(cycle, &["c", "b", "a", "c"], "{err}");
            assert!(err.to_string().contains("c -> b -> a -> c"));
        }
    }
}

#[test]
fn a_long_hand_made_cycle_is_reported_as_a_cycle_not_as_depth() {
    let s = Store::in_memory().unwrap();
    let mut leaf = session_with(&s, "n0", 1);
    for i in 1..=MAX_FORK_DEPTH {
        leaf = fork_at(&s, &leaf, 1, &format!("n{i}"), "x");
    }
    // n0 -> x0 -> ... -> x7 -> n32 -> ... -> n0: 41 sessions, longer than the guard.
    for i in 0..8 {
        session_with(&s, &format!("x{i}"), 1);
    }
    set_parent(&s, "n0", "x0");
    for i in 0..7 {
        set_parent(&s, &format!("x{i}"), &format!("x{}", i + 1));
    }
    set_parent(&s, "x7", "n32");
    let err = s.replay(&leaf, None).unwrap_err();
    assert!(
        matches!(err, Error::CycleDetected { ref cycle, .. } if cycle.len() == 42),
        "{err}"
    );
}

#[test]
fn a_chain_deeper_than_32_made_by_hand_is_refused_on_load() {
    let s = Store::in_memory().unwrap();
    let mut leaf = session_with(&s, "n0", 1);
    for i in 1..=MAX_FORK_DEPTH {
        leaf = fork_at(&s, &leaf, 1, &format!("n{i}"), "x");
    }
    session_with(&s, "extra", 1);
    set_parent(&s, "n0", "extra");
    let err = fails_unchanged(&s, || s.replay(&leaf, None));
    assert!(matches!(err, Error::ChainTooDeep { max: 32, .. }), "{err}");
}

#[test]
fn a_parent_removed_by_other_means_is_named_with_the_remedy() {
    for s in stores() {
        let a = session_with(&s, "a", 2);
        let b = fork_at(&s, &a, 1, "b", "x");
        drop_behind(&s, &a);
        let err = fails_unchanged(&s, || s.replay(&b, None));
        assert!(
            matches!(&err, Error::ParentMissing { session, parent } if session == "b" && parent == "a")
        );
        assert!(err.to_string().contains("detach"), "{err}");
        let err = fails_unchanged(&s, || s.fork(&b, ForkOptions::default()));
        assert!(matches!(err, Error::ParentMissing { .. }));
    }
}

#[test]
fn delete_with_children_is_refused_listing_them_and_cascade_removes_the_subtree() {
    for s in stores() {
        let a = session_with(&s, "a", 2);
        let b = fork_at(&s, &a, 1, "b", "x");
        fork_at(&s, &b, 1, "c", "y");
        fork_at(&s, &a, 2, "d", "z");
        let keep = session_with(&s, "keep", 1);
        let err = fails_unchanged(&s, || s.delete(&a, false));
        let Error::HasChildren { children, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(children, &["b", "d"]);
        assert!(err.to_string().contains("b, d"));
        let mut deleted = s.delete(&a, true).unwrap();
        deleted.sort();
        assert_eq!(deleted, ["a", "b", "c", "d"]);
        let left: Vec<SessionId> = s.list().unwrap().into_iter().map(|i| i.session).collect();
        assert_eq!(left, ["keep"]);
        assert_eq!(s.replay(&keep, None).unwrap().len(), 1);
        // Nothing of the subtree is left in any graph (but a shared store's change
        // feed, which names the deleted sessions, no more, so that other processes
        // learn of the delete, until it is compacted).
        assert!(quads(&s)
            .iter()
            .filter(|q| !q.ends_with("<urn:forktrail:feed> ."))
            .all(|q| !q.contains("session:a") && !q.contains("session:b")));
    }
}

#[test]
fn delete_of_a_leaf_leaves_its_parent_intact() {
    for s in stores() {
        let a = session_with(&s, "a", 2);
        let b = fork_at(&s, &a, 1, "b", "x");
        assert_eq!(s.delete(&b, false).unwrap(), ["b"]);
        assert_eq!(s.replay(&a, None).unwrap().len(), 2);
        assert!(s.branches(&a).unwrap().is_empty());
    }
}

/// Whether `x prov:wasDerivedFrom y` is stored (both bound as terms).
fn derived_from(s: &Store, x: NamedNode, y: NamedNode) -> bool {
    let q = "SELECT ?x ?y WHERE { ?x <http://www.w3.org/ns/prov#wasDerivedFrom> ?y }";
    match s.query(q, &[("x", x.into()), ("y", y.into())]).unwrap() {
        oxigraph::sparql::QueryResults::Solutions(rows) => rows.count() == 1,
        _ => false,
    }
}

#[test]
fn detach_materialises_the_prefix_so_the_parent_can_be_deleted() {
    for s in stores() {
        let a = session_with(&s, "a", 3);
        let b = fork_at(&s, &a, 2, "b", "x");
        s.append(&b, NewTurn::new(Role::User, "own")).unwrap();
        let c = fork_at(&s, &b, 3, "c", "y");
        let before_b = s.load(&b, None).unwrap();
        let before_c = s.replay(&c, None).unwrap();
        s.detach(&b).unwrap();
        let after = s.load(&b, None).unwrap();
        assert_eq!(
            before_b
                .iter()
                .map(|t| (t.index, t.role, &t.content, &t.digest, &t.branch))
                .collect::<Vec<_>>(),
            after
                .iter()
                .map(|t| (t.index, t.role, &t.content, &t.digest, &t.branch))
                .collect::<Vec<_>>()
        );
        let info = s.info(&b).unwrap();
        assert_eq!(
            (info.parent, info.depth, info.fork_root.as_str()),
            (None, 0, "b")
        );
        assert_eq!(s.info(&c).unwrap().depth, 1, "descendants move up");
        assert_eq!(s.info(&c).unwrap().fork_root, "b", "and take the new root");
        let turn1 = |id: &str| {
            NamedNode::new(format!("{}/turn/1", s.session_iri(&sid(id)).as_str())).unwrap()
        };
        assert!(
            derived_from(&s, turn1("b"), turn1("a")),
            "copies derive from originals"
        );
        s.delete(&a, false).unwrap();
        assert_eq!(s.replay(&c, None).unwrap(), before_c);
        // PROV lineage stays.
        assert!(derived_from(&s, s.session_iri(&b), s.session_iri(&a)));
        // Appending continues the chain.
        assert_eq!(s.append(&b, NewTurn::new(Role::User, "more")).unwrap(), 3);
    }
}

#[test]
fn detach_of_a_root_is_refused() {
    for s in stores() {
        let a = session_with(&s, "a", 1);
        let err = fails_unchanged(&s, || s.detach(&a));
        assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    }
}

#[test]
fn branches_and_tree_show_children_with_fork_points_and_counts() {
    for s in stores() {
        let a = session_with(&s, "a", 4);
        let b = fork_at(&s, &a, 2, "b", "left");
        append_n(&s, &b, 3);
        fork_at(&s, &a, 4, "c", "right");
        fork_at(&s, &b, 5, "d", "deep");
        let branches = s.branches(&a).unwrap();
        let got: Vec<(&str, &str, u64, u64)> = branches
            .iter()
            .map(|b| {
                (
                    b.session.as_str(),
                    b.branch.as_str(),
                    b.forked_at_index,
                    b.own_turns,
                )
            })
            .collect();
        assert_eq!(got, [("b", "left", 2, 3), ("c", "right", 4, 0)]);
        let tree = s.tree(&a).unwrap();
        assert_eq!(tree.children.len(), 2);
        assert_eq!(tree.children[0].children[0].session, "d");
        assert_eq!(tree.children[0].children[0].forked_at_index, Some(5));
    }
}

#[test]
fn turn_indices_that_run_past_the_largest_index_are_reported_not_looped_over() {
    for s in stores() {
        let a = session_with(&s, "a", 1);
        let g = GraphName::NamedNode(s.session_iri(&a));
        let index = NamedNode::new("https://w3id.org/forktrail/ns#index").unwrap();
        let turns: Vec<Quad> = (0..64)
            .map(|shift| {
                let i = 1u64 << shift;
                let turn =
                    NamedNode::new(format!("{}/turn/{i}", s.session_iri(&a).as_str())).unwrap();
                Quad::new(turn, index.clone(), Literal::from(i), g.clone())
            })
            .collect();
        insert_behind(&s, &turns);
        let err = s.replay(&a, None).unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { session, .. } if session == "a"),
            "{err}"
        );
    }
}
