//! Pages of sessions and search (the catalog, on every kind of store): every session exactly once across pages while others come and go, a
//! cursor that outlives its session, filters, search that sees a turn appended a moment
//! ago and forgets a deleted one, and an index that is deleted, corrupted or left
//! behind by a killed process coming back the same from the RDF.

use crate::common;

use common::*;
use forktrail::{
    Error, ForkOptions, NewSession, NewTurn, Role, SearchQuery, SessionId, SessionOrder,
    SessionQuery, Store,
};
use std::collections::BTreeSet;

fn page(s: &Store, query: SessionQuery) -> forktrail::SessionPage {
    s.sessions(&query).unwrap()
}

/// Every session id of every page, following `next`, with `between` run after each
/// page (to add and delete sessions meanwhile).
fn walk(s: &Store, query: SessionQuery, mut between: impl FnMut(usize)) -> (Vec<SessionId>, usize) {
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let p = page(
            s,
            SessionQuery {
                cursor: cursor.clone(),
                ..query.clone()
            },
        );
        seen.extend(p.sessions.iter().map(|x| x.session.clone()));
        pages += 1;
        between(pages);
        match p.next {
            Some(next) => cursor = Some(next),
            None => return (seen, pages),
        }
    }
}

fn new_session(s: &Store, principal: &str) -> SessionId {
    s.create_session(NewSession {
        principal: Some(principal.into()),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn pages_list_every_session_once_while_sessions_are_added_and_deleted() {
    for s in stores() {
        let before: Vec<SessionId> = (0..23).map(|_| new_session(&s, "alice")).collect();
        for order in [SessionOrder::Created, SessionOrder::Activity] {
            let mut added = Vec::new();
            let mut deleted = Vec::new();
            let victims = [before[3].clone(), before[17].clone()];
            let (seen, pages) = walk(
                &s,
                SessionQuery {
                    limit: Some(5),
                    order,
                    ..Default::default()
                },
                |n| {
                    // Each page: a new session, and (twice) one deleted.
                    added.push(new_session(&s, "alice"));
                    if let Some(victim) = victims.get(n - 1) {
                        if !deleted.contains(victim) {
                            s.delete(victim, Default::default()).unwrap();
                            deleted.push(victim.clone());
                        }
                    }
                },
            );
            let unique: BTreeSet<_> = seen.iter().collect();
            assert_eq!(unique.len(), seen.len(), "{} {order:?}: none twice", s.kind);
            for id in &before {
                if !deleted.contains(id) {
                    assert!(seen.contains(id), "{} {order:?}: {id} missing", s.kind);
                }
            }
            assert!(pages >= 5, "{}", s.kind);
            // Clean up what this round added, so that the next starts from `before`.
            for id in added {
                s.delete(&id, Default::default()).unwrap();
            }
            for id in &deleted {
                s.create_session(NewSession {
                    id: Some(id.to_string()),
                    principal: Some("alice".into()),
                    ..Default::default()
                })
                .unwrap();
            }
        }
    }
}

#[test]
fn a_cursor_whose_session_was_deleted_still_goes_on() {
    for s in stores() {
        let ids: Vec<SessionId> = (0..6).map(|_| new_session(&s, "bob")).collect();
        let first = page(
            &s,
            SessionQuery {
                limit: Some(3),
                order: SessionOrder::Created,
                ..Default::default()
            },
        );
        // The last session of the first page, which the cursor points after, goes.
        let last = first.sessions.last().unwrap().session.clone();
        s.delete(&last, Default::default()).unwrap();
        let rest = page(
            &s,
            SessionQuery {
                cursor: first.next.clone(),
                limit: Some(10),
                order: SessionOrder::Created,
                ..Default::default()
            },
        );
        let mut all: Vec<SessionId> = first.sessions.iter().map(|x| x.session.clone()).collect();
        all.extend(rest.sessions.iter().map(|x| x.session.clone()));
        for id in &ids {
            assert!(all.contains(id), "{}: {id}", s.kind);
        }
        assert_eq!(all.len(), 6, "{}", s.kind);
        assert_eq!(rest.next, None);
        if s.kind == "remote" || s.kind == "virtuoso" {
            continue; // one order there: by creation
        }
        // A cursor of one order is refused by another, naming the remedy.
        let e = s
            .sessions(&SessionQuery {
                cursor: first.next,
                order: SessionOrder::Activity,
                ..Default::default()
            })
            .unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e}");
        assert!(e.to_string().contains("start again"), "{e}");
    }
}

#[test]
fn filters_pick_principal_model_roots_children_family_and_time() {
    for s in stores() {
        let root = new_session(&s, "alice");
        s.append(&root, NewTurn::new(Role::User, "hello")).unwrap();
        s.append(&root, NewTurn::new(Role::Assistant, "hi").model("model-a"))
            .unwrap();
        let other = new_session(&s, "bob");
        let fork = s.fork(&root, ForkOptions::default()).unwrap().session;
        s.append(
            &fork,
            NewTurn::new(Role::Assistant, "again").model("model-b"),
        )
        .unwrap();
        let deep = s.fork(&fork, ForkOptions::default()).unwrap().session;
        // Each filter's page holds all it matches, and its total (and the count alone)
        // says as many.
        let ids = |q: SessionQuery| -> BTreeSet<SessionId> {
            let listed = page(&s, q.clone());
            assert_eq!(listed.total, listed.sessions.len() as u64, "{}", s.kind);
            assert_eq!(s.count_sessions(&q).unwrap(), listed.total, "{}", s.kind);
            listed.sessions.into_iter().map(|x| x.session).collect()
        };
        let set =
            |v: &[&SessionId]| -> BTreeSet<SessionId> { v.iter().map(|&x| x.clone()).collect() };
        assert_eq!(
            ids(SessionQuery {
                principal: Some("bob".into()),
                ..Default::default()
            }),
            set(&[&other]),
            "{}",
            s.kind
        );
        assert_eq!(
            ids(SessionQuery {
                model: Some("model-b".into()),
                ..Default::default()
            }),
            set(&[&fork]),
            "{}",
            s.kind
        );
        assert_eq!(
            ids(SessionQuery {
                roots: true,
                ..Default::default()
            }),
            set(&[&root, &other]),
            "{}",
            s.kind
        );
        assert_eq!(
            ids(SessionQuery {
                parent: Some(fork.to_string()),
                ..Default::default()
            }),
            set(&[&deep]),
            "{}",
            s.kind
        );
        assert_eq!(
            ids(SessionQuery {
                family: Some(deep.to_string()),
                ..Default::default()
            }),
            set(&[&root, &fork, &deep]),
            "{}",
            s.kind
        );
        assert_eq!(
            ids(SessionQuery {
                since: Some("2000-01-01T00:00:00Z".into()),
                ..Default::default()
            }),
            set(&[&root, &other, &fork, &deep]),
            "{}",
            s.kind
        );
        let future = "2999-01-01T00:00:00Z";
        assert!(ids(SessionQuery {
            since: Some(future.into()),
            ..Default::default()
        })
        .is_empty());
        let e = s
            .sessions(&SessionQuery {
                since: Some("yesterday".into()),
                ..Default::default()
            })
            .unwrap_err();
        assert!(e.to_string().contains("RFC 3339"), "{e}");
        // The facts lists show: lengths, own turns, models, fork counts.
        let all = page(&s, SessionQuery::default()).sessions;
        let get = |id: &SessionId| all.iter().find(|x| &x.session == id).unwrap().clone();
        let r = get(&root);
        assert_eq!((r.length, r.own_turns, r.forks), (2, 2, 1), "{}", s.kind);
        assert_eq!(r.models, ["model-a"], "{}", s.kind);
        let f = get(&fork);
        assert_eq!(
            (f.length, f.own_turns, f.inherited_turns, f.forks),
            (3, 1, 2, 1),
            "{}",
            s.kind
        );
        assert_eq!(f.parent.as_ref(), Some(&root));
        if s.kind != "remote" && s.kind != "virtuoso" {
            // Roots come newest family activity first (times are in milliseconds, so
            // what happened in the same one ties, in a stable order).
            assert_eq!(r.family, Some(2));
            let roots = |s: &Store| {
                page(
                    s,
                    SessionQuery {
                        roots: true,
                        ..Default::default()
                    },
                )
                .sessions
            };
            let listed = roots(&s);
            let times: Vec<_> = listed.iter().map(|x| x.family_activity.clone()).collect();
            assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
            s.append(&deep, NewTurn::new(Role::User, "later")).unwrap();
            let deep_activity = page(&s, SessionQuery::default())
                .sessions
                .into_iter()
                .find(|x| x.session == deep)
                .unwrap()
                .last_activity;
            let listed = roots(&s);
            let alice = listed.iter().find(|x| x.session == root).unwrap();
            assert_eq!(
                alice.family_activity, deep_activity,
                "a turn deep in alice's family is her root's activity"
            );
            assert!(listed.iter().all(|x| x.family_activity <= deep_activity));
        }
        for bad in [0, 1001] {
            let e = s
                .sessions(&SessionQuery {
                    limit: Some(bad),
                    ..Default::default()
                })
                .unwrap_err();
            assert!(e.to_string().contains("limit"), "{e}");
        }
    }
}

fn hits(s: &Store, text: &str) -> Vec<(SessionId, Option<u64>)> {
    s.search(&SearchQuery {
        text: text.into(),
        ..Default::default()
    })
    .unwrap()
    .hits
    .into_iter()
    .map(|h| (h.session, h.index))
    .collect()
}

#[test]
fn search_finds_a_turn_appended_a_moment_ago_and_not_one_deleted() {
    for s in stores() {
        let id = new_session(&s, "alice");
        s.append(&id, NewTurn::new(Role::User, "book a train to Lisbon"))
            .unwrap();
        assert_eq!(hits(&s, "lisbon"), [(id.clone(), Some(0))], "{}", s.kind);
        let index = s
            .append(
                &id,
                NewTurn::new(Role::Assistant, "The Sud Expresso leaves at nine."),
            )
            .unwrap();
        let found = s
            .search(&SearchQuery {
                text: "\"sud expresso\"".into(),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(found.hits.len(), 1, "{}", s.kind);
        let hit = &found.hits[0];
        assert_eq!((hit.index, hit.role), (Some(index), Some(Role::Assistant)));
        let marked: Vec<&str> = hit
            .highlights
            .iter()
            .map(|&(a, b)| &hit.snippet[a..b])
            .collect();
        assert!(
            marked.iter().any(|m| m.to_lowercase().starts_with("sud")),
            "{}: {marked:?} in {:?}",
            s.kind,
            hit.snippet
        );
        // A fork shares the turn: it is found once, in the session that stores it.
        let fork = s.fork(&id, ForkOptions::default()).unwrap().session;
        assert_eq!(
            hits(&s, "expresso"),
            [(id.clone(), Some(index))],
            "{}",
            s.kind
        );
        // Words are all required; a phrase must stand in that order.
        assert!(hits(&s, "lisbon nowhere").is_empty(), "{}", s.kind);
        if s.kind != "remote" && s.kind != "virtuoso" {
            assert!(hits(&s, "\"expresso sud\"").is_empty(), "{}", s.kind);
        }
        s.delete(&fork, Default::default()).unwrap();
        s.delete(&id, Default::default()).unwrap();
        assert!(hits(&s, "lisbon").is_empty(), "{}", s.kind);
        let e = s
            .search(&SearchQuery {
                text: "  ".into(),
                ..Default::default()
            })
            .unwrap_err();
        assert!(e.to_string().contains("search for what"), "{e}");
    }
}

#[test]
fn titles_branch_labels_and_models_are_searched_too() {
    let s = Store::in_memory().unwrap();
    let id = s
        .create_session(NewSession {
            title: Some("Quarterly budget review".into()),
            ..Default::default()
        })
        .unwrap();
    s.append(&id, NewTurn::new(Role::Assistant, "ok").model("granite-7b"))
        .unwrap();
    let fork = s
        .fork(
            &id,
            ForkOptions {
                label: Some("cheaper-plan".into()),
                ..Default::default()
            },
        )
        .unwrap()
        .session;
    assert_eq!(hits(&s, "quarterly"), [(id.clone(), None)]);
    assert_eq!(hits(&s, "granite"), [(id.clone(), None)]);
    assert_eq!(hits(&s, "cheaper"), [(fork, None)]);
}

/// Every hit of a few searches, for comparing one index with another.
fn all_hits(s: &Store) -> Vec<Vec<(SessionId, Option<u64>)>> {
    ["lisbon", "train", "\"sud expresso\"", "nine", "model-a"]
        .iter()
        .map(|q| {
            let mut h = hits(s, q);
            h.sort();
            h
        })
        .collect()
}

fn travel(s: &Store) {
    for n in 0..4 {
        let id = new_session(s, "alice");
        s.append(
            &id,
            NewTurn::new(Role::User, format!("book train {n} to Lisbon")),
        )
        .unwrap();
        s.append(
            &id,
            NewTurn::new(Role::Assistant, "The Sud Expresso leaves at nine.").model("model-a"),
        )
        .unwrap();
        if n % 2 == 0 {
            let f = s.fork(&id, ForkOptions::default()).unwrap().session;
            s.append(&f, NewTurn::new(Role::User, "and a train back?"))
                .unwrap();
        }
    }
}

#[cfg(feature = "rocksdb")]
#[test]
fn a_deleted_or_corrupted_index_is_rebuilt_with_the_same_hits_and_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let (want_hits, want_page) = {
        let s = Store::open(&path).unwrap();
        travel(&s);
        (all_hits(&s), page(&s, SessionQuery::default()))
    };
    let index = path.join("forktrail-index");
    assert!(index.is_dir());
    // Deleted: `reindex` (or the first read) builds it again from the RDF.
    std::fs::remove_dir_all(&index).unwrap();
    {
        let s = Store::open(&path).unwrap();
        let report = s.reindex(None).unwrap();
        assert_eq!((report.sessions, report.turns), (6, 10));
        assert_eq!(all_hits(&s), want_hits);
        assert_eq!(page(&s, SessionQuery::default()), want_page);
    }
    // Corrupted: every file of the index garbled; the next open finds out and rebuilds.
    for entry in walkdir(&index.join("tantivy")) {
        if entry.extension().is_some_and(|e| e != "lock") {
            std::fs::write(&entry, b"not an index").unwrap();
        }
    }
    let s = Store::open(&path).unwrap();
    assert_eq!(all_hits(&s), want_hits);
    assert_eq!(page(&s, SessionQuery::default()), want_page);
}

#[cfg(feature = "rocksdb")]
fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walkdir(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn a_write_behind_forktrails_back_is_seen_after_clear_caches() {
    let s = Store::in_memory().unwrap();
    travel(&s);
    let before = page(&s, SessionQuery::default()).total;
    let victim = page(&s, SessionQuery::default()).sessions[0]
        .session
        .clone();
    let graph = s.session_iri(&victim);
    s.oxigraph()
        .remove_named_graph(oxigraph::model::NamedNodeRef::from(&graph))
        .unwrap();
    s.clear_caches();
    let after = page(&s, SessionQuery::default());
    assert_eq!(after.total, before - 1);
    assert!(after.sessions.iter().all(|x| x.session != victim));
}

#[test]
fn many_sessions_go_in_through_one_bulk_load_all_or_nothing() {
    for s in stores() {
        let batch = |ids: &[&str]| {
            ids.iter()
                .map(|id| {
                    (
                        NewSession {
                            id: Some(id.to_string()),
                            principal: Some("importer".into()),
                            ..Default::default()
                        },
                        vec![
                            NewTurn::new(Role::User, format!("question for {id}")),
                            NewTurn::new(Role::Assistant, "an answer about zanzibar")
                                .model("model-z"),
                        ],
                    )
                })
                .collect::<Vec<_>>()
        };
        let before = quads(&s);
        // A duplicate id, or one the store has, refuses the whole batch.
        let e = s.import_sessions(batch(&["b1", "b2", "b1"])).unwrap_err();
        assert!(e.to_string().contains("given twice"), "{e}");
        assert_eq!(quads(&s), before, "{}", s.kind);
        let ids = s.import_sessions(batch(&["b1", "b2", "b3"])).unwrap();
        assert_eq!(ids.len(), 3);
        let e = s.import_sessions(batch(&["b4", "b2"])).unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
        assert_eq!(s.replay(&ids[2], None).unwrap().len(), 2, "{}", s.kind);
        let page = page(
            &s,
            SessionQuery {
                model: Some("model-z".into()),
                ..Default::default()
            },
        );
        assert_eq!(page.total, 3, "{}", s.kind);
        assert_eq!(hits(&s, "zanzibar").len(), 3, "{}", s.kind);
        assert!(s.verify(None).unwrap().is_clean());
    }
}

/// The newest activity first means the same on every store and through any process: a
/// session that just gained a turn leads the first page, whoever appended it, and the
/// search finds the turn.
#[test]
fn a_session_that_just_gained_a_turn_is_listed_first_on_every_store_through_any_process() {
    let first = |s: &Store| page(s, SessionQuery::default()).sessions[0].session.clone();
    let round = std::sync::atomic::AtomicUsize::new(0);
    let check = |writer: &Store, reader: &Store, kind: &str| {
        let r = round.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Time stamps are in milliseconds: each write is later than the last.
        let later = || std::thread::sleep(std::time::Duration::from_millis(3));
        let ids: Vec<SessionId> = (0..4)
            .map(|_| {
                later();
                new_session(writer, "p")
            })
            .collect();
        assert_eq!(first(reader), ids[3], "{kind}: the newest session first");
        for (n, id) in [&ids[0], &ids[2], &ids[1]].into_iter().enumerate() {
            later();
            writer
                .append(
                    id,
                    NewTurn::new(Role::User, format!("went on kiwano{r}x{n}")),
                )
                .unwrap();
            assert_eq!(&first(reader), id, "{kind}: appended to, then first");
            let hits = reader
                .search(&SearchQuery {
                    text: format!("kiwano{r}x{n}"),
                    ..Default::default()
                })
                .unwrap();
            assert_eq!(hits.hits.len(), 1, "{kind}: the appended turn found");
            assert_eq!(&hits.hits[0].session, id, "{kind}: found in its session");
        }
    };
    for s in stores() {
        check(&s, &s, s.kind);
    }
    for (writer, reader) in shared_pairs() {
        check(
            &writer,
            &reader,
            &format!("{}, read by another process", writer.kind),
        );
        // And the other way round, on the same store.
        check(
            &reader,
            &writer,
            &format!("{}, written by the other", writer.kind),
        );
    }
}
