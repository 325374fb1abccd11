//! The ontology and the PROV-O links: every term written is declared, the ontology
//! parses the same under two parsers, and audits find who made what.

use crate::common;

use common::*;
use forktrail::vocab::{ft, prov};
use forktrail::{demo, JobStatus, NewTurn, Role, Store, ONTOLOGY};
use oxigraph::io::{RdfFormat, RdfParser};
use oxigraph::model::{NamedNode, Term, Triple};
use oxigraph::sparql::QueryResults;
use std::collections::BTreeSet;

/// Terms of other vocabularies forktrail may write, spelled as their specifications do
/// (PROV-O starting point and expanded terms, Dublin Core terms, RDF, RDFS).
const EXTERNAL_TERMS: &[&str] = &[
    "http://www.w3.org/ns/prov#Entity",
    "http://www.w3.org/ns/prov#Activity",
    "http://www.w3.org/ns/prov#Agent",
    "http://www.w3.org/ns/prov#SoftwareAgent",
    "http://www.w3.org/ns/prov#Person",
    "http://www.w3.org/ns/prov#wasDerivedFrom",
    "http://www.w3.org/ns/prov#wasGeneratedBy",
    "http://www.w3.org/ns/prov#wasAttributedTo",
    "http://www.w3.org/ns/prov#wasAssociatedWith",
    "http://www.w3.org/ns/prov#wasInfluencedBy",
    "http://www.w3.org/ns/prov#used",
    "http://purl.org/dc/terms/isPartOf",
    "http://www.w3.org/ns/prov#startedAtTime",
    "http://www.w3.org/ns/prov#endedAtTime",
    "http://www.w3.org/ns/prov#generatedAtTime",
    "http://purl.org/dc/terms/created",
    "http://purl.org/dc/terms/title",
    "http://www.w3.org/1999/02/22-rdf-syntax-ns#type",
    "http://www.w3.org/2000/01/rdf-schema#label",
];

fn ontology() -> Vec<Triple> {
    RdfParser::from_format(RdfFormat::Turtle)
        .for_slice(ONTOLOGY.as_bytes())
        .map(|q| q.unwrap().into())
        .collect()
}

#[test]
fn the_ontology_parses_to_the_same_triples_with_oxttl_and_rio_turtle() {
    use rio_api::parser::TriplesParser;
    let ox: BTreeSet<String> = ontology().iter().map(|t| t.to_string()).collect();
    let mut rio = BTreeSet::new();
    rio_turtle::TurtleParser::new(ONTOLOGY.as_bytes(), None)
        .parse_all(&mut |t| -> Result<(), rio_turtle::TurtleError> {
            rio.insert(t.to_string());
            Ok(())
        })
        .unwrap();
    assert!(ox.len() > 100, "the ontology has {} triples", ox.len());
    assert_eq!(ox, rio);
}

/// A store exercising every write path: demo tree, tool calls, kinds, titles, reasons,
/// a detach, anchors, merges, regenerations, a comparison, a Claude Code project with sub-agents, a
/// turn with a payload.
fn rich_store() -> Store {
    let s = Store::in_memory().unwrap();
    let tree = demo::build(&s).unwrap();
    let x = fork_at(&s, &tree.budget, 6, "x", "archived");
    s.append(
        &x,
        NewTurn::new(Role::User, "note").kind(forktrail::Kind::Note),
    )
    .unwrap();
    // A runtime's own record of a turn (an OpenAI Agents SDK item).
    s.append(
        &x,
        NewTurn::new(Role::User, "hi").payload(r#"{"role": "user", "content": "hi"}"#),
    )
    .unwrap();
    s.detach(&x).unwrap();
    // The store's statement of its digest version (a store in memory makes it only
    // when asked: it is born at the current version).
    let upgrade = s.upgrade_digests().unwrap();
    assert!(!upgrade.upgraded(), "{upgrade:?}");
    // Anchors, a summarized idempotent fork from an anchor, a merge, an abandoned fork.
    s.anchor(&tree.root, "checkpoint", Some(r#"{"step": 1}"#))
        .unwrap();
    let plan = s
        .fork(
            &tree.root,
            forktrail::ForkOptions {
                anchor: Some("checkpoint".into()),
                summarize: true,
                request_id: Some("req-1".into()),
                ..Default::default()
            },
        )
        .unwrap();
    let y: forktrail::SessionId = plan.session.parse().unwrap();
    s.append(&y, NewTurn::new(Role::Assistant, "done")).unwrap();
    s.merge(&y, forktrail::MergeOptions::default()).unwrap();
    let failed: Result<forktrail::MergePlan, forktrail::Error> =
        s.with_fork(&tree.root, None, |_| {
            Err(forktrail::Error::InvalidInput("no luck".into()))
        });
    assert!(failed.is_err());
    // A regeneration that completes and one that fails.
    let ok = stub::start(stub::Mode::Echo);
    let options = forktrail::RegenerateOptions {
        at: 2,
        model: Some("model-z".into()),
        endpoint: Some(ok.url.clone()),
        request_id: Some("what-if-1".into()),
        timeout_secs: Some(30),
        ..Default::default()
    };
    assert_eq!(
        s.regenerate(&tree.root, &options).unwrap().status,
        JobStatus::Complete
    );
    let failing = stub::start(stub::Mode::Status(503));
    let options = forktrail::RegenerateOptions {
        endpoint: Some(failing.url.clone()),
        request_id: None,
        ..options
    };
    assert_eq!(
        s.regenerate(&tree.root, &options).unwrap().status,
        JobStatus::Failed
    );
    // A comparison with one priced arm under a budget.
    let scripted = stub::scripted(|_, _| {
        stub::Reply::ok(stub::completion(
            "model-w",
            Some("Another way."),
            &[],
            (12, 3, 2),
            "stop",
        ))
    });
    let comparison = forktrail::CompareOptions {
        at: 2,
        arms: vec![forktrail::Arm {
            model: "model-w".into(),
            endpoint: Some(scripted.url.clone()),
            ..Default::default()
        }],
        max_steps: Some(1),
        prices: [(
            "model-w".to_string(),
            forktrail::Price {
                input: 1.0,
                output: 2.0,
                cached: None,
            },
        )]
        .into(),
        budget_usd: Some(1.0),
        ..Default::default()
    };
    let c = s.compare(&tree.root, &comparison).unwrap();
    assert_eq!(c.arms[1].figures.steps, 1);
    // A budgeted call whose answer does not read: its reservation is charged as a lost
    // call.
    let garbage = stub::start(stub::Mode::Garbage);
    let lost = forktrail::CompareOptions {
        arms: vec![forktrail::Arm {
            endpoint: Some(garbage.url.clone()),
            ..comparison.arms[0].clone()
        }],
        ..comparison
    };
    let c = s.compare(&tree.root, &lost).unwrap();
    assert!(c.charged_usd > 0.0 && c.arms[1].calls.is_empty(), "{c:?}");
    // A Claude Code project: imported turns keep their source ids, sub-agents their
    // launch.
    let project =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-project");
    s.import_claude_code_path(&project, &forktrail::TranscriptOptions::default())
        .unwrap();
    // A Codex fork rollout whose parent is not here: it waits for it.
    let rollout = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/codex/rollout.jsonl"),
    )
    .unwrap()
    .replacen(
        r#""id":"0199449a-3c2e-7d41-9f6b-5e2c8a1d7b30","#,
        r#""id":"0199449a-3c2e-7d41-9f6b-5e2c8a1d7b31","forked_from_id":"0199449a-3c2e-7d41-9f6b-5e2c8a1d7b30","#,
        1,
    );
    let waiting = s
        .import_with(
            rollout.as_bytes(),
            Some(forktrail::ImportFormat::Codex),
            &forktrail::TranscriptOptions::default(),
        )
        .unwrap();
    assert_eq!(waiting.sessions.len(), 1);
    s
}

#[test]
fn every_term_written_is_declared_in_the_ontology_and_every_declared_term_is_used() {
    let onto = ontology();
    let declared = |term: &NamedNode, what: &str| {
        onto.iter().any(|t| {
            t.subject.to_string() == term.to_string() && t.predicate.as_str().ends_with(what)
        })
    };
    let s = rich_store();
    // The proxy's recording, with an experiment on it.
    let (proxied, _) = crate::experiment::experimented_store();
    let mut used = BTreeSet::new();
    for q in s.oxigraph().iter().chain(proxied.oxigraph().iter()) {
        let q = q.unwrap();
        used.insert(q.predicate.clone());
        if q.predicate.as_str() == "http://www.w3.org/1999/02/22-rdf-syntax-ns#type" {
            if let Term::NamedNode(class) = &q.object {
                used.insert(class.clone());
            }
        }
    }
    for term in &used {
        let iri = term.as_str();
        if iri.starts_with(ft::NS) {
            for what in ["#type", "#label", "#comment"] {
                assert!(declared(term, what), "{term} lacks {what} in the ontology");
            }
        } else {
            assert!(
                EXTERNAL_TERMS.contains(&iri),
                "{term} is not a known PROV-O/RDF/DC term"
            );
        }
    }
    let declared_ft: BTreeSet<String> = onto
        .iter()
        .filter(|t| {
            t.predicate.as_str().ends_with("#label") && t.subject.to_string().contains(ft::NS)
        })
        .map(|t| t.subject.to_string())
        .collect();
    let code_ft: BTreeSet<String> = ft::ALL.iter().map(|t| t.to_string()).collect();
    assert_eq!(declared_ft, code_ft, "vocab.rs and the ontology disagree");
    // Leases live only while a write to a shared store is under way (tests/remote.rs
    // reads them back); an in-process store never writes them. A reservation lives
    // only while a budgeted call is in flight (tests/compare_cli.rs kills a process
    // holding some).
    // The change feed is written only to a shared store (tests/catalog.rs follows it).
    let leases = [
        ft::LEASE,
        ft::LEASE_OF,
        ft::LEASE_EXPIRES,
        ft::RESERVED_USD,
        ft::CHANGE,
        ft::CHANGE_BY,
        ft::CHANGE_SEQ,
        ft::CHANGE_AT,
        ft::CHANGED,
    ]
    .map(|t| t.to_string());
    let used_ft: BTreeSet<String> = used
        .iter()
        .filter(|t| t.as_str().starts_with(ft::NS))
        .map(|t| t.to_string())
        .chain(leases)
        .collect();
    assert_eq!(
        used_ft, code_ft,
        "a declared term is never written (or the scenario misses it)"
    );
}

#[test]
fn properties_are_aligned_with_prov() {
    let onto: BTreeSet<String> = ontology().iter().map(|t| t.to_string()).collect();
    for line in [
        format!(
            "<{}> <http://www.w3.org/2000/01/rdf-schema#subPropertyOf> <{}>",
            ft::PARENT_SESSION.as_str(),
            prov::WAS_DERIVED_FROM.as_str()
        ),
        format!(
            "<{}> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <{}>",
            ft::TURN.as_str(),
            prov::ENTITY.as_str()
        ),
        format!(
            "<{}> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <{}>",
            ft::FORK.as_str(),
            prov::ACTIVITY.as_str()
        ),
    ] {
        assert!(onto.contains(&line), "missing: {line}");
    }
}

fn count(s: &Store, sparql: &str) -> usize {
    match s.query(sparql, &[]).unwrap() {
        QueryResults::Solutions(rows) => rows.count(),
        _ => panic!("not a SELECT"),
    }
}

#[test]
fn every_turn_is_attributed_and_timed_and_every_fork_is_a_prov_activity_that_used_its_parent() {
    let s = rich_store();
    let prefixes =
        "PREFIX ft: <https://w3id.org/forktrail/ns#> PREFIX prov: <http://www.w3.org/ns/prov#>";
    let turns = count(
        &s,
        &format!("{prefixes} SELECT ?t WHERE {{ ?t a ft:Turn }}"),
    );
    assert!(turns > 10);
    let attributed = count(&s, &format!(
        "{prefixes} SELECT DISTINCT ?t WHERE {{ GRAPH ?g {{ ?t a ft:Turn ; prov:wasAttributedTo ?a ; prov:generatedAtTime ?when }} ?a a ?agentClass }}"
    ));
    assert_eq!(
        turns, attributed,
        "every turn names a declared agent and a time"
    );
    let forks = count(
        &s,
        &format!("{prefixes} SELECT ?s WHERE {{ ?s ft:forkedAtIndex ?k }}"),
    );
    let proper = count(&s, &format!(
        "{prefixes} SELECT ?s WHERE {{ ?s ft:forkedAtIndex ?k ; prov:wasDerivedFrom ?p ; prov:wasGeneratedBy ?f .
           ?f a ft:Fork, prov:Activity ; prov:used ?p ; prov:startedAtTime ?t ; prov:wasAssociatedWith ?who }}"
    ));
    assert_eq!(
        (forks, proper),
        (12, 12),
        "three demo forks, the detached one, one from an anchor, one abandoned, one \
         regenerated, two comparisons' arms, three Claude Code sub-agents"
    );
}

#[test]
fn turns_are_attributed_to_their_model_or_tool_else_the_principal() {
    let s = Store::in_memory().unwrap();
    let tree = demo::build(&s).unwrap();
    let turns = s.load(&tree.booking, None).unwrap();
    let q = "PREFIX prov: <http://www.w3.org/ns/prov#> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
             SELECT ?t ?name WHERE { ?t prov:wasAttributedTo ?a . ?a rdfs:label ?name }";
    let QueryResults::Solutions(rows) = s.query(q, &[]).unwrap() else {
        panic!()
    };
    let mut by_turn = std::collections::HashMap::new();
    for row in rows {
        let row = row.unwrap();
        by_turn.insert(
            row.get("t").unwrap().to_string(),
            row.get("name").unwrap().to_string(),
        );
    }
    let agent = |session: &str, index: u64| {
        by_turn[&format!("<urn:forktrail:session:{session}/turn/{index}>")].clone()
    };
    assert_eq!(agent(&turns[1].session, 1), "\"alice\"");
    assert_eq!(
        agent(&turns[2].session, 2),
        format!("\"{}\"", demo::MODEL_A)
    );
    assert_eq!(agent(&turns[3].session, 3), "\"search_trains\"");
    assert_eq!(
        agent(&turns[8].session, 8),
        format!("\"{}\"", demo::MODEL_B)
    );
}

/// Distinct rows of a SELECT over the store.
fn distinct(s: &Store, sparql: &str) -> u64 {
    count(s, sparql) as u64
}

#[test]
fn a_prov_tool_reads_turns_as_entities_models_as_agents_and_every_relation() {
    let s = rich_store();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("all.prov.ttl");
    let mut out = Vec::new();
    s.export(None, forktrail::ExportFormat::Prov, &mut out)
        .unwrap();
    std::fs::write(&file, &out).unwrap();
    let run = std::process::Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/prov_check.py"))
        .arg(&file)
        .output()
        .expect("python3 runs (make deps installs prov)");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let found: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let p = "PREFIX ft: <https://w3id.org/forktrail/ns#> PREFIX prov: <http://www.w3.org/ns/prov#>";
    let turns = distinct(
        &s,
        &format!("{p} SELECT DISTINCT ?t WHERE {{ ?t a ft:Turn }}"),
    );
    let models = distinct(
        &s,
        &format!("{p} SELECT DISTINCT ?m WHERE {{ ?m a ft:Model }}"),
    );
    let attributions = distinct(
        &s,
        &format!("{p} SELECT DISTINCT ?x ?a WHERE {{ ?x prov:wasAttributedTo ?a }}"),
    );
    let derivations = distinct(
        &s,
        &format!(
            "{p} SELECT DISTINCT ?x ?y WHERE {{ {{ ?x prov:wasDerivedFrom ?y }} UNION \
             {{ ?x ft:parentSession ?y }} UNION {{ ?x ft:spawnedBy ?y }} }}"
        ),
    );
    assert!(turns >= 40 && models >= 4, "{turns} turns, {models} models");
    assert_eq!(found["turns"], turns, "{found}");
    assert_eq!(found["models"], models, "{found}");
    assert_eq!(found["attributions"], attributions, "{found}");
    assert_eq!(found["derivations"], derivations, "{found}");
    let pairs = |pattern: &str| {
        distinct(
            &s,
            &format!("{p} SELECT DISTINCT ?x ?y WHERE {{ {pattern} }}"),
        )
    };
    let generations = pairs("?x prov:wasGeneratedBy ?y");
    assert_eq!(found["generations"], generations, "{found}");
    assert_eq!(found["usages"], pairs("?x prov:used ?y"), "{found}");
    assert_eq!(
        found["associations"],
        pairs("?x prov:wasAssociatedWith ?y"),
        "{found}"
    );
    let activities = distinct(
        &s,
        &format!("{p} SELECT DISTINCT ?a WHERE {{ ?a a prov:Activity }}"),
    );
    assert_eq!(found["activities"], activities, "{found}");
}

#[test]
fn a_hand_written_audit_over_the_default_graph_meets_each_turns_agent_once_on_every_store() {
    // Agents are declared once, with one class: a join through the declaration over
    // the union of graphs (a bag on Oxigraph and Virtuoso) counts each turn once.
    let audit = "PREFIX ft: <https://w3id.org/forktrail/ns#> \
                 PREFIX prov: <http://www.w3.org/ns/prov#> \
                 SELECT (COUNT(?t) AS ?n) WHERE { ?t a ft:Turn ; prov:wasAttributedTo ?a . ?a a ?c }";
    let turns = "PREFIX ft: <https://w3id.org/forktrail/ns#> \
                 SELECT (COUNT(?t) AS ?n) WHERE { ?t a ft:Turn }";
    let number = |s: &Store, q: &str| -> u64 {
        let QueryResults::Solutions(mut rows) = s.query(q, &[]).unwrap() else {
            panic!("not a SELECT")
        };
        let row = rows.next().unwrap().unwrap();
        match row.get("n") {
            Some(oxigraph::model::Term::Literal(l)) => l.value().parse().unwrap(),
            other => panic!("{other:?}"),
        }
    };
    for s in stores() {
        let tree = forktrail::demo::build(&s).unwrap();
        // Turns by principals, models and tools, in several sessions and a detached
        // fork's copies.
        let alone = fork_at(&s, &tree.budget, 3, "alone", "alone");
        s.append(
            &alone,
            NewTurn::new(Role::Assistant, "mine").model("model-a"),
        )
        .unwrap();
        s.detach(&alone).unwrap();
        let n = number(&s, turns);
        assert!(n > 14, "{}: {n}", s.kind);
        assert_eq!(number(&s, audit), n, "{}", s.kind);
    }
}
