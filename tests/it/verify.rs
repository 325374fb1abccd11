//! `verify`: clean on sound stores, and each kind of tampering, done with raw SPARQL as
//! another tool would, named with its session, index and check.

use crate::common;

use common::*;
use forktrail::{Check, ImportFormat, NewTurn, Role, SessionId, Store};

const FT: &str = "https://w3id.org/forktrail/ns#";
const PROV: &str = "http://www.w3.org/ns/prov#";

fn turn_iri(s: &Store, id: &SessionId, index: u64) -> String {
    format!("<{}/turn/{index}>", s.session_iri(id).as_str())
}

fn graph(s: &Store, id: &SessionId) -> String {
    s.session_iri(id).to_string()
}

fn update(s: &Store, text: &str) {
    s.update(text, None).unwrap();
}

/// `(session, index, check)` of every problem.
fn found(s: &Store) -> Vec<(String, Option<u64>, Check)> {
    let report = s.verify(None).unwrap();
    report
        .problems
        .into_iter()
        .map(|p| (p.session, p.index, p.check))
        .collect()
}

/// A root of 4 turns and a fork of it at 2 with 2 turns of its own.
fn tree(s: &Store) -> (SessionId, SessionId) {
    let root = session_with(s, "root", 4);
    let fork = fork_at(s, &root, 2, "fork", "alt");
    append_n(s, &fork, 2);
    (root, fork)
}

#[test]
fn sound_stores_verify_clean() {
    for s in stores() {
        forktrail::demo::build(&s).unwrap();
        let (root, fork) = tree(&s);
        let deep = fork_at(&s, &fork, 3, "deep", "deeper");
        append_n(&s, &deep, 1);
        let alone = fork_at(&s, &root, 1, "alone", "alone");
        append_n(&s, &alone, 1);
        s.detach(&alone).unwrap();
        let report = s.verify(None).unwrap();
        assert!(report.is_clean(), "{}: {:?}", s.kind, report.problems);
        assert_eq!(report.sessions, s.list().unwrap().len());
        // Every own turn recomputed: the store's turns, counted per owner.
        let own: u64 = s.list().unwrap().iter().map(|i| i.own_turns).sum();
        assert_eq!(report.turns, own, "{}", s.kind);
        let one = s.verify(Some(&deep)).unwrap();
        assert!(one.is_clean(), "{:?}", one.problems);
        assert_eq!(one.sessions, 3, "deep, its parent and the root");
    }
}

#[test]
fn the_query_fixture_and_an_import_of_it_verify_clean() {
    let s = Store::in_memory().unwrap();
    let file = std::fs::File::open(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixture.trig"),
    )
    .unwrap();
    s.import(file, ImportFormat::TriG).unwrap();
    let report = s.verify(None).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert!(report.sessions >= 5);
}

#[test]
fn an_edited_content_is_a_digest_problem_at_its_index() {
    for s in stores() {
        let (root, _) = tree(&s);
        let t = turn_iri(&s, &root, 1);
        let g = graph(&s, &root);
        update(
            &s,
            &format!(
                "DELETE {{ GRAPH {g} {{ {t} <{FT}content> ?c }} }} \
                 INSERT {{ GRAPH {g} {{ {t} <{FT}content> \"forged\" }} }} \
                 WHERE {{ GRAPH {g} {{ {t} <{FT}content> ?c }} }}"
            ),
        );
        assert_eq!(
            found(&s),
            [("root".into(), Some(1), Check::Digest)],
            "{}",
            s.kind
        );
        let one = s.verify(Some(&root)).unwrap();
        assert!(one.problems[0]
            .to_string()
            .starts_with("root [1] digest: stored "));
    }
}

#[test]
fn an_edited_tool_call_or_tool_result_link_is_a_digest_problem_at_its_index() {
    for s in stores() {
        let root = session_with(&s, "agent", 1);
        let call = r#"[{"id":"call_1","type":"function","function":{"name":"search_trains","arguments":"{\"day\":\"friday\"}"}}]"#;
        s.append(&root, NewTurn::new(Role::Assistant, "").tool_calls(call))
            .unwrap();
        s.append(&root, NewTurn::new(Role::Tool, "[]").tool_call_id("call_1"))
            .unwrap();
        let report = s.verify(None).unwrap();
        assert!(report.is_clean(), "{}: {:?}", s.kind, report.problems);
        assert_eq!(report.digest_version, forktrail::DigestVersion::V2);
        let g = graph(&s, &root);
        let edit = |index: u64, property: &str, value: &str| {
            let t = turn_iri(&s, &root, index);
            format!(
                "DELETE {{ GRAPH {g} {{ {t} <{FT}{property}> ?v }} }} \
                 INSERT {{ GRAPH {g} {{ {t} <{FT}{property}> {value} }} }} \
                 WHERE {{ GRAPH {g} {{ {t} <{FT}{property}> ?v }} }}"
            )
        };
        // Friday becomes Sunday in the stored call: turn 1 is named, and turn 2, which
        // chains onto turn 1's digest, is still sound.
        let sunday = serde_json::to_string(&call.replace("friday", "sunday")).unwrap();
        update(&s, &edit(1, "toolCalls", &sunday));
        assert_eq!(
            found(&s),
            [("agent".into(), Some(1), Check::Digest)],
            "{}",
            s.kind
        );
        update(
            &s,
            &edit(1, "toolCalls", &serde_json::to_string(call).unwrap()),
        );
        assert!(found(&s).is_empty(), "{}", s.kind);
        // The result made to answer another call.
        update(&s, &edit(2, "toolCallId", "\"call_9\""));
        assert_eq!(
            found(&s),
            [("agent".into(), Some(2), Check::Digest)],
            "{}",
            s.kind
        );
    }
}

#[test]
fn a_removed_turn_is_named_and_so_is_the_turn_that_chained_onto_it() {
    for s in stores() {
        let (root, _) = tree(&s);
        let t = turn_iri(&s, &root, 2);
        let g = graph(&s, &root);
        update(&s, &format!("DELETE WHERE {{ GRAPH {g} {{ {t} ?p ?o }} }}"));
        let problems = found(&s);
        assert!(
            problems.contains(&("root".into(), Some(2), Check::MissingTurn)),
            "{}: {problems:?}",
            s.kind
        );
        // The fork at 2 chained onto turn 1, which is still there: it stays clean.
        assert!(problems.iter().all(|p| p.0 == "root"), "{problems:?}");
    }
}

#[test]
fn swapped_turns_are_digest_problems_at_both_indices() {
    for s in stores() {
        let (root, _) = tree(&s);
        let (a, b, g) = (
            turn_iri(&s, &root, 0),
            turn_iri(&s, &root, 1),
            graph(&s, &root),
        );
        update(
            &s,
            &format!(
                "DELETE DATA {{ GRAPH {g} {{ {a} <{FT}index> 0 . {b} <{FT}index> 1 }} }} ; \
                 INSERT DATA {{ GRAPH {g} {{ {a} <{FT}index> 1 . {b} <{FT}index> 0 }} }}"
            ),
        );
        let problems = found(&s);
        for index in [0, 1] {
            assert!(
                problems.contains(&("root".into(), Some(index), Check::Digest)),
                "{}: {problems:?}",
                s.kind
            );
        }
    }
}

#[test]
fn a_moved_fork_point_is_named_on_the_fork() {
    for s in stores() {
        let (_, fork) = tree(&s);
        let g = graph(&s, &fork);
        update(
            &s,
            &format!(
                "DELETE DATA {{ GRAPH {g} {{ {g} <{FT}forkedAtIndex> 2 }} }} ; \
                 INSERT DATA {{ GRAPH {g} {{ {g} <{FT}forkedAtIndex> 1 }} }}"
            ),
        );
        let problems = found(&s);
        // Its base digest is the parent's at 1, not at 0; and index 1 has no own turn.
        assert!(
            problems.contains(&("fork".into(), None, Check::BaseDigest)),
            "{}: {problems:?}",
            s.kind
        );
        assert!(problems.contains(&("fork".into(), Some(1), Check::MissingTurn)));
        // Past the parent's length.
        update(
            &s,
            &format!(
                "DELETE DATA {{ GRAPH {g} {{ {g} <{FT}forkedAtIndex> 1 }} }} ; \
                 INSERT DATA {{ GRAPH {g} {{ {g} <{FT}forkedAtIndex> 9 }} }}"
            ),
        );
        assert!(found(&s).contains(&("fork".into(), None, Check::ForkPoint)));
    }
}

#[test]
fn a_turn_spliced_in_from_another_session_is_named() {
    for s in stores() {
        let (root, _) = tree(&s);
        let other = session_with(&s, "other", 3);
        // Another session's turn 1, copied over this one's turn 1.
        let (mine, theirs) = (turn_iri(&s, &root, 1), turn_iri(&s, &other, 1));
        let (g, h) = (graph(&s, &root), graph(&s, &other));
        update(
            &s,
            &format!("DELETE WHERE {{ GRAPH {g} {{ {mine} ?p ?o }} }}"),
        );
        update(
            &s,
            &format!(
                "INSERT {{ GRAPH {g} {{ {theirs} ?p ?o }} }} WHERE {{ GRAPH {h} {{ {theirs} ?p ?o }} }}"
            ),
        );
        let problems = found(&s);
        assert!(
            problems.contains(&("root".into(), Some(1), Check::TurnIri)),
            "{}: {problems:?}",
            s.kind
        );
        assert!(
            problems.contains(&("root".into(), Some(1), Check::Digest)),
            "{problems:?}"
        );
    }
}

#[test]
fn a_second_value_of_a_single_valued_property_is_named() {
    for s in stores() {
        let (root, fork) = tree(&s);
        let (t, g) = (turn_iri(&s, &root, 1), graph(&s, &root));
        // A second content beside the first: replay shows one of them, and the digest
        // may well match the one it is checked against.
        update(
            &s,
            &format!("INSERT DATA {{ GRAPH {g} {{ {t} <{FT}content> \"a second content\" }} }}"),
        );
        let problems = s.verify(None).unwrap().problems;
        let doubled: Vec<_> = problems
            .iter()
            .filter(|p| p.check == Check::SingleValue)
            .collect();
        assert_eq!(doubled.len(), 1, "{}: {problems:?}", s.kind);
        assert_eq!(doubled[0].session, "root");
        assert_eq!(doubled[0].index, Some(1));
        assert_eq!(doubled[0].detail, "turn 1 has 2 values of ft:content");
        // A second branch label on a session node is named too.
        // (A session's node is named by its graph's IRI.)
        let f = graph(&s, &fork);
        update(
            &s,
            &format!("INSERT DATA {{ GRAPH {f} {{ {f} <{FT}branch> \"other\" }} }}"),
        );
        let problems = s.verify(Some(&fork)).unwrap().problems;
        assert!(
            problems.iter().any(|p| p.session == "fork"
                && p.index.is_none()
                && p.check == Check::SingleValue
                && p.detail == "the session node has 2 values of ft:branch"),
            "{}: {problems:?}",
            s.kind
        );
    }
}

#[test]
fn a_dropped_attribution_is_named() {
    for s in stores() {
        let (_, fork) = tree(&s);
        let (t, g) = (turn_iri(&s, &fork, 3), graph(&s, &fork));
        update(
            &s,
            &format!("DELETE WHERE {{ GRAPH {g} {{ {t} <{PROV}wasAttributedTo> ?a }} }}"),
        );
        assert_eq!(
            found(&s),
            [("fork".into(), Some(3), Check::Attribution)],
            "{}",
            s.kind
        );
    }
}

#[test]
fn lineage_damage_is_named() {
    for s in stores() {
        let (root, fork) = tree(&s);
        let (g, r) = (graph(&s, &fork), graph(&s, &root));
        // The fork activity removed, the depth and root misstated.
        update(
            &s,
            &format!("DELETE WHERE {{ GRAPH {g} {{ {g} <{PROV}wasGeneratedBy> ?a }} }}"),
        );
        update(
            &s,
            &format!(
                "DELETE DATA {{ GRAPH {g} {{ {g} <{FT}forkDepth> 1 }} }} ; \
                 INSERT DATA {{ GRAPH {g} {{ {g} <{FT}forkDepth> 4 }} }}"
            ),
        );
        let problems = found(&s);
        assert!(
            problems.contains(&("fork".into(), None, Check::ForkActivity)),
            "{}: {problems:?}",
            s.kind
        );
        assert!(
            problems.contains(&("fork".into(), None, Check::Depth)),
            "{problems:?}"
        );
        // A second child with the same label, made behind forktrail's back.
        let twin = fork_at(&s, &root, 1, "twin", "twin");
        let t = graph(&s, &twin);
        update(
            &s,
            &format!(
                "DELETE DATA {{ GRAPH {t} {{ {t} <{FT}branch> \"twin\" }} }} ; \
                 INSERT DATA {{ GRAPH {t} {{ {t} <{FT}branch> \"alt\" }} }}"
            ),
        );
        let problems = found(&s);
        assert!(
            problems.contains(&("twin".into(), None, Check::Label)),
            "{problems:?}"
        );
        assert!(
            problems.contains(&("fork".into(), None, Check::Label)),
            "{problems:?}"
        );
        // The root deleted behind its children's back.
        update(&s, &format!("DROP SILENT GRAPH {r}"));
        let problems = found(&s);
        assert!(
            problems.contains(&("fork".into(), None, Check::Lineage)),
            "{problems:?}"
        );
        let report = s.verify(None).unwrap();
        let line = report
            .problems
            .iter()
            .find(|p| p.check == Check::Lineage)
            .unwrap();
        assert!(line.detail.contains("missing"), "{line}");
    }
}

#[test]
fn verify_writes_nothing() {
    for s in stores() {
        let (root, _) = tree(&s);
        s.append(&root, NewTurn::new(Role::User, "x\" } ; DROP ALL ; #"))
            .unwrap();
        let before = quads(&s);
        assert!(s.verify(None).unwrap().is_clean());
        assert_eq!(quads(&s), before, "{}", s.kind);
    }
}

/// The query fixture as N-Quads lines.
fn fixture_nquads() -> Vec<String> {
    let s = Store::in_memory().unwrap();
    let file = std::fs::File::open(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixture.trig"),
    )
    .unwrap();
    s.import(file, ImportFormat::TriG).unwrap();
    let mut out = Vec::new();
    s.export(None, forktrail::ExportFormat::NQuads, &mut out)
        .unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn an_import_that_could_not_be_replayed_or_does_not_chain_is_refused_whole() {
    let lines = fixture_nquads();
    for (what, needle) in [
        ("a role", "ns#role>"),
        ("a content", "ns#content>"),
        ("a digest", "ns#digest>"),
        ("an index", "ns#index>"),
    ] {
        let at = lines.iter().position(|l| l.contains(needle)).unwrap();
        let mut cut = lines.clone();
        cut.remove(at);
        let s = Store::in_memory().unwrap();
        let err = fails_unchanged(&s, || {
            s.import(cut.join("\n").as_bytes(), ImportFormat::NQuads)
        });
        assert!(
            err.to_string().contains("nothing imported"),
            "{what}: {err}"
        );
    }
    // An edited content: its digest no longer chains.
    let at = lines
        .iter()
        .position(|l| l.contains("ns#content>"))
        .unwrap();
    let mut edited = lines.clone();
    edited[at] = edited[at].replacen("ns#content> \"", "ns#content> \"EDITED ", 1);
    let s = Store::in_memory().unwrap();
    let err = fails_unchanged(&s, || {
        s.import(edited.join("\n").as_bytes(), ImportFormat::NQuads)
    });
    assert!(err.to_string().contains("digest: stored"), "{err}");
    assert!(s.list().unwrap().is_empty());
}

#[test]
fn no_mutated_export_imports_a_session_that_cannot_be_replayed() {
    let lines = fixture_nquads();
    let mut rng = Rng(0x5eed_f0c7);
    let (mut imported, mut refused) = (0, 0);
    for _ in 0..1_000 {
        let mut file = lines.clone();
        for _ in 0..=rng.below(3) {
            let at = rng.below(file.len());
            match rng.below(3) {
                0 => {
                    file.remove(at);
                }
                1 => {
                    // One byte changed, kept ASCII so the line may still parse.
                    let mut bytes = file[at].clone().into_bytes();
                    let i = rng.below(bytes.len());
                    bytes[i] = b' ' + rng.below(95) as u8;
                    file[at] = String::from_utf8(bytes).unwrap();
                }
                _ => {
                    let other = file[rng.below(file.len())].clone();
                    file[at] = other;
                }
            }
        }
        let s = Store::in_memory().unwrap();
        match s.import(file.join("\n").as_bytes(), ImportFormat::NQuads) {
            Err(_) => {
                refused += 1;
                assert!(s.is_empty().unwrap(), "a refused import left quads");
            }
            Ok(ids) => {
                imported += 1;
                for id in ids {
                    if let Err(e) = s.replay(&id, None) {
                        let kept = std::env::temp_dir().join("forktrail-mutated.nq");
                        std::fs::write(&kept, file.join("\n")).unwrap();
                        panic!("imported {id}, which cannot be replayed: {e} (file: {kept:?})");
                    }
                }
            }
        }
    }
    // Both outcomes occur: the corpus tests something.
    assert!(
        imported > 50 && refused > 50,
        "{imported} imported, {refused} refused"
    );
}

#[test]
fn an_export_made_before_digests_covered_tool_calls_verifies_as_version_1_and_imports_as_version_2()
{
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let old = std::fs::read(data.join("fixture-v1.trig")).unwrap();
    let new = std::fs::read(data.join("fixture.trig")).unwrap();
    // The same sessions, written by the two versions: the old one's digests of turns
    // with tool calls differ, and check out under version 1.
    let report = Store::verify_export(old.as_slice(), ImportFormat::TriG, None).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.digest_version, forktrail::DigestVersion::V1);
    let report = Store::verify_export(new.as_slice(), ImportFormat::TriG, None).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.digest_version, forktrail::DigestVersion::V2);
    // Imported, the old export holds what the new one holds, digests included.
    for s in stores() {
        s.import(old.as_slice(), ImportFormat::TriG).unwrap();
        let fresh = Store::in_memory().unwrap();
        fresh.import(new.as_slice(), ImportFormat::TriG).unwrap();
        assert!(s.verify(None).unwrap().is_clean(), "{}", s.kind);
        // Times compared as instants: a store may write `.740Z` for `.74Z`.
        let load = |store: &Store, id: &forktrail::SessionId| {
            let mut turns = store.load(id, None).unwrap();
            for t in &mut turns {
                t.created_at = t.created_at.as_deref().map(|at| {
                    chrono::DateTime::parse_from_rfc3339(at)
                        .unwrap()
                        .timestamp_micros()
                        .to_string()
                });
            }
            turns
        };
        for info in fresh.list().unwrap() {
            assert_eq!(
                load(&s.store, &info.session),
                load(&fresh, &info.session),
                "{}",
                s.kind
            );
        }
    }
}
