//! The catalog (pages, counts and search on a store this process owns) against a listing
//! computed from the RDF by SPARQL, after every kind of write: what is listed is what is
//! stored, field for field, whatever wrote it. One check, [`catalog_equals_rdf`], runs
//! after creates, appends, forks, pops, merges, anchors, detaches, deletes, SPARQL
//! updates, RDF imports, every transcript importer (whole and line by line), what-if
//! regenerations, and under concurrent appends and reads.

use crate::common;

use common::*;
use forktrail::{
    Error, ExportFormat, ImportFormat, MergeOptions, NewSession, NewTurn, RegenerateOptions, Role,
    SearchQuery, SessionId, SessionOrder, SessionQuery, SessionSummary, Store, TranscriptOptions,
};
use oxigraph::model::Term;
use oxigraph::sparql::QueryResults;
use std::collections::{BTreeMap, BTreeSet};

/// A session as the RDF says a list must show it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Listed {
    branch: String,
    title: Option<String>,
    principal: Option<String>,
    parent: Option<String>,
    forked_at_index: Option<u64>,
    fork_root: String,
    depth: u64,
    length: u64,
    own_turns: u64,
    created_at: Option<String>,
    last_activity: Option<String>,
    forks: u64,
    family: Option<u64>,
    family_activity: Option<String>,
    models: BTreeSet<String>,
}

impl Listed {
    fn of(s: &SessionSummary) -> Self {
        Self {
            branch: s.branch.clone(),
            title: s.title.clone(),
            principal: s.principal.clone(),
            parent: s.parent.as_ref().map(|p| p.to_string()),
            forked_at_index: s.forked_at_index,
            fork_root: s.fork_root.to_string(),
            depth: s.depth,
            length: s.length,
            own_turns: s.own_turns,
            created_at: s.created_at.clone(),
            last_activity: s.last_activity.clone(),
            forks: s.forks,
            family: s.family,
            family_activity: s.family_activity.clone(),
            models: s.models.iter().cloned().collect(),
        }
    }
}

const PREFIXES: &str = "PREFIX ft: <https://w3id.org/forktrail/ns#>
PREFIX prov: <http://www.w3.org/ns/prov#>
PREFIX dcterms: <http://purl.org/dc/terms/>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
";

/// The rows of SPARQL query `body` (prefixes added), each a map of variable to text.
fn rows(s: &Store, body: &str) -> Vec<BTreeMap<String, String>> {
    let QueryResults::Solutions(solutions) = s.query(&format!("{PREFIXES}{body}"), &[]).unwrap()
    else {
        panic!("a SELECT gives rows")
    };
    solutions
        .map(|row| {
            row.unwrap()
                .iter()
                .map(|(var, term)| {
                    let text = match term {
                        Term::Literal(l) => l.value().to_string(),
                        Term::NamedNode(n) => n.as_str().to_string(),
                        other => other.to_string(),
                    };
                    (var.as_str().to_string(), text)
                })
                .collect()
        })
        .collect()
}

/// An `xsd:dateTime` as lists print it (to the millisecond, UTC).
fn time_text(lexical: &str) -> Option<String> {
    let t = chrono::DateTime::parse_from_rfc3339(lexical).ok()?;
    let micros = t.timestamp_micros();
    (micros > 0)
        .then(|| chrono::DateTime::from_timestamp_micros(micros))
        .flatten()
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

fn micros(lexical: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(lexical).map_or(0, |t| t.timestamp_micros())
}

/// Every session of the store as its graph says, by id: its node, its own turns (the
/// turns its graph holds), its children and its family, read by SPARQL alone.
fn rdf_listing(s: &Store) -> BTreeMap<String, Listed> {
    let nodes = rows(
        s,
        "SELECT ?s ?id ?branch ?parent ?root ?depth ?at ?principal ?title ?created WHERE {
           GRAPH ?s {
             ?s a ft:Session ; ft:sessionId ?id ; ft:branch ?branch .
             OPTIONAL { ?s ft:parentSession ?parent }
             OPTIONAL { ?s ft:forkRoot ?root }
             OPTIONAL { ?s ft:forkDepth ?depth }
             OPTIONAL { ?s ft:forkedAtIndex ?at }
             OPTIONAL { ?s prov:wasAttributedTo ?agent }
             OPTIONAL { ?s dcterms:title ?title }
             OPTIONAL { ?s dcterms:created ?created }
           }
           OPTIONAL { ?agent rdfs:label ?principal }
         }",
    );
    let turns = rows(
        s,
        "SELECT ?s ?index ?at ?model WHERE {
           GRAPH ?s { ?s a ft:Session . ?t a ft:Turn ; ft:index ?index .
                      OPTIONAL { ?t prov:generatedAtTime ?at }
                      OPTIONAL { ?t prov:wasAttributedTo ?agent } }
           OPTIONAL { ?agent a ft:Model ; rdfs:label ?model }
         }",
    );
    let id_of: BTreeMap<String, String> = nodes
        .iter()
        .map(|n| (n["s"].clone(), n["id"].clone()))
        .collect();
    assert_eq!(id_of.len(), nodes.len(), "one node per session graph");
    // Own turns per session IRI.
    let mut own: BTreeMap<&str, OwnTurns> = BTreeMap::new();
    for t in &turns {
        let slot = own.entry(t["s"].as_str()).or_default();
        let index: u64 = t["index"].parse().unwrap();
        slot.count += 1;
        slot.last = slot.last.max(Some(index));
        slot.newest = slot.newest.max(t.get("at").map_or(0, |a| micros(a)));
        slot.models.extend(t.get("model").cloned());
    }
    let mut out = BTreeMap::new();
    for n in &nodes {
        let iri = n["s"].as_str();
        let parent = n.get("parent").map(|p| id_of[p].clone());
        let at: Option<u64> = n.get("at").map(|a| a.parse().unwrap());
        let OwnTurns {
            count,
            last,
            newest,
            models,
        } = own.get(iri).cloned().unwrap_or_default();
        // A detached session keeps its fork point as history, and owns every turn.
        let own_start = if parent.is_some() { at.unwrap_or(0) } else { 0 };
        let length = last.map_or(own_start, |l| l + 1);
        assert_eq!(
            length - own_start,
            count,
            "session {}: its own turns are contiguous",
            n["id"]
        );
        let created = n.get("created").map_or(0, |c| micros(c));
        let activity = created.max(newest);
        let members: Vec<&BTreeMap<String, String>> = nodes
            .iter()
            .filter(|m| m.get("root").map(String::as_str) == Some(iri) && m["s"] != iri)
            .collect();
        let family_activity = members
            .iter()
            .map(|m| {
                let c = m.get("created").map_or(0, |c| micros(c));
                c.max(own.get(m["s"].as_str()).map_or(0, |o| o.newest))
            })
            .fold(activity, i64::max);
        let micros_text = |m: i64| {
            chrono::DateTime::from_timestamp_micros(m)
                .filter(|_| m > 0)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        };
        out.insert(
            n["id"].clone(),
            Listed {
                branch: n["branch"].clone(),
                title: n.get("title").cloned(),
                principal: n.get("principal").cloned(),
                forked_at_index: parent.as_ref().map(|_| own_start),
                parent,
                fork_root: n.get("root").map_or(n["id"].clone(), |r| id_of[r].clone()),
                depth: n.get("depth").map_or(0, |d| d.parse().unwrap()),
                length,
                own_turns: count,
                created_at: n.get("created").and_then(|c| time_text(c)),
                last_activity: micros_text(activity),
                forks: nodes
                    .iter()
                    .filter(|m| m.get("parent").map(String::as_str) == Some(iri))
                    .count() as u64,
                family: n.get("parent").is_none().then_some(members.len() as u64),
                family_activity: n
                    .get("parent")
                    .is_none()
                    .then(|| micros_text(family_activity))
                    .flatten(),
                models,
            },
        );
    }
    out
}

/// Every session of every page of `query` (following `next`, 3 a page), and each
/// page's total.
fn paged(s: &Store, query: &SessionQuery, what: &str) -> (Vec<SessionSummary>, Vec<u64>) {
    let mut out = Vec::new();
    let mut totals = Vec::new();
    let mut cursor = None;
    loop {
        let page = s
            .sessions(&SessionQuery {
                limit: Some(3),
                cursor,
                ..query.clone()
            })
            .unwrap_or_else(|e| panic!("{what}: a page of {query:?}: {e}"));
        out.extend(page.sessions);
        totals.push(page.total);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return (out, totals),
        }
    }
}

/// The words of `text` as the catalog's search splits them: runs of letters and digits,
/// lower-cased.
fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && w.len() <= 40)
        .map(str::to_lowercase)
        .collect()
}

/// Checks that the catalog lists exactly what the RDF holds: every page of every order
/// (each session once, in order), every filter's sessions and counts, and the search
/// hits of a word of each session's last own turn.
fn catalog_equals_rdf(s: &Store, what: &str) {
    let want = rdf_listing(s);
    let ids: BTreeSet<&String> = want.keys().collect();
    let (all, totals) = paged(s, &SessionQuery::default(), what);
    assert!(
        totals.iter().all(|t| *t == want.len() as u64),
        "{what}: the pages' totals {totals:?}"
    );
    let mut got = BTreeMap::new();
    for summary in &all {
        let id = summary.session.to_string();
        assert!(
            got.insert(id.clone(), Listed::of(summary)).is_none(),
            "{what}: session {id} is listed twice"
        );
    }
    let listed: BTreeSet<&String> = got.keys().collect();
    assert_eq!(listed, ids, "{what}: the sessions listed and stored");
    for (id, want) in &want {
        assert_eq!(&got[id], want, "{what}: session {id} as listed");
    }
    let count = s.count_sessions(&SessionQuery::default()).unwrap();
    assert_eq!(count, want.len() as u64, "{what}: the count");

    // Each order lists every session (or root) once, newest first.
    for order in [SessionOrder::Activity, SessionOrder::Created] {
        for roots in [false, true] {
            let query = SessionQuery {
                order,
                roots,
                ..Default::default()
            };
            let (page, _) = paged(s, &query, what);
            let keys: Vec<(String, Option<String>)> = page
                .iter()
                .map(|x| {
                    let key = match (order, roots) {
                        (SessionOrder::Created, _) => x.created_at.clone(),
                        (SessionOrder::Activity, true) => x.family_activity.clone(),
                        (SessionOrder::Activity, false) => x.last_activity.clone(),
                    };
                    (x.session.to_string(), key)
                })
                .collect();
            let expected: BTreeSet<&String> = want
                .iter()
                .filter(|(_, l)| !roots || l.parent.is_none())
                .map(|(id, _)| id)
                .collect();
            let seen: BTreeSet<&String> = keys.iter().map(|(id, _)| id).collect();
            assert_eq!(seen.len(), keys.len(), "{what}: {query:?}: none twice");
            assert_eq!(seen, expected, "{what}: {query:?}");
            assert!(
                keys.windows(2).all(|w| w[0].1 >= w[1].1),
                "{what}: {query:?}: newest first: {keys:?}"
            );
        }
    }

    // Each filter lists what the RDF says it should, and counts as many.
    let mut filters: Vec<(SessionQuery, BTreeSet<&String>)> = Vec::new();
    let principals: BTreeSet<&String> =
        want.values().filter_map(|l| l.principal.as_ref()).collect();
    for p in principals {
        filters.push((
            SessionQuery {
                principal: Some(p.clone()),
                ..Default::default()
            },
            want.iter()
                .filter(|(_, l)| l.principal.as_ref() == Some(p))
                .map(|(id, _)| id)
                .collect(),
        ));
    }
    let models: BTreeSet<&String> = want.values().flat_map(|l| &l.models).collect();
    for m in models {
        filters.push((
            SessionQuery {
                model: Some(m.clone()),
                ..Default::default()
            },
            want.iter()
                .filter(|(_, l)| l.models.contains(m))
                .map(|(id, _)| id)
                .collect(),
        ));
    }
    for id in want.keys() {
        filters.push((
            SessionQuery {
                parent: Some(id.clone()),
                ..Default::default()
            },
            want.iter()
                .filter(|(_, l)| l.parent.as_ref() == Some(id))
                .map(|(c, _)| c)
                .collect(),
        ));
        let root = &want[id].fork_root;
        filters.push((
            SessionQuery {
                family: Some(id.clone()),
                ..Default::default()
            },
            want.iter()
                .filter(|(_, l)| &l.fork_root == root)
                .map(|(c, _)| c)
                .collect(),
        ));
    }
    let mut times: Vec<&String> = want
        .values()
        .filter_map(|l| l.last_activity.as_ref())
        .collect();
    times.sort();
    if let Some(since) = times.get(times.len() / 2) {
        filters.push((
            SessionQuery {
                since: Some((*since).clone()),
                ..Default::default()
            },
            want.iter()
                .filter(|(_, l)| l.last_activity.as_ref() >= Some(since))
                .map(|(id, _)| id)
                .collect(),
        ));
    }
    for (query, expected) in filters {
        let (page, totals) = paged(s, &query, what);
        let seen: BTreeSet<String> = page.iter().map(|x| x.session.to_string()).collect();
        let expected: BTreeSet<String> = expected.into_iter().cloned().collect();
        assert_eq!(seen, expected, "{what}: {query:?}");
        assert!(
            totals.iter().all(|t| *t == expected.len() as u64),
            "{what}: {query:?}: the pages' totals {totals:?}"
        );
        assert_eq!(
            s.count_sessions(&query).unwrap(),
            expected.len() as u64,
            "{what}: count of {query:?}"
        );
    }

    // Search finds, for a word of each session's last own turn, every stored turn (and
    // session title, branch or model) holding it, and nothing else.
    let contents = rows(
        s,
        "SELECT ?id ?index ?content WHERE {
           GRAPH ?s { ?s a ft:Session ; ft:sessionId ?id .
                      ?t a ft:Turn ; ft:index ?index ; ft:content ?content } }",
    );
    let mut probes = BTreeSet::new();
    for (id, l) in &want {
        if l.own_turns == 0 {
            continue;
        }
        let last = (l.length - 1).to_string();
        let text = contents
            .iter()
            .find(|c| c["id"] == *id && c["index"] == last)
            .map(|c| c["content"].clone())
            .unwrap_or_default();
        // The longest word: the likeliest to be its own.
        if let Some(word) = words(&text)
            .into_iter()
            .max_by_key(|w| (w.len(), w.clone()))
        {
            probes.insert(word);
        }
    }
    for word in probes {
        let mut expected: BTreeSet<(String, Option<u64>)> = contents
            .iter()
            .filter(|c| words(&c["content"]).contains(&word))
            .map(|c| (c["id"].clone(), Some(c["index"].parse().unwrap())))
            .collect();
        for (id, l) in &want {
            let named = l.title.iter().chain([&l.branch]).chain(&l.models);
            if named.flat_map(|t| words(t)).any(|w| w == word) {
                expected.insert((id.clone(), None));
            }
        }
        let mut found = BTreeSet::new();
        let mut cursor = None;
        loop {
            let page = s
                .search(&SearchQuery {
                    text: word.clone(),
                    limit: Some(50),
                    cursor,
                })
                .unwrap();
            assert_eq!(
                page.total as usize,
                expected.len(),
                "{what}: hits of {word:?}"
            );
            found.extend(page.hits.iter().map(|h| (h.session.to_string(), h.index)));
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(found, expected, "{what}: hits of {word:?}");
    }
}

/// The stores that keep a catalog: every kind (a shared store's is the process's own,
/// following the store's change feed).
fn catalog_stores() -> Vec<TestStore> {
    stores()
}

/// A store on disk that each step opens anew and closes, as a process of its own
/// (`forktrail import`, `forktrail append`) would. It is checked on a copy, so that
/// the store itself sees no read between its writes: a read settles the catalog, and
/// would hide what a write left wrong in it for the next process.
#[cfg(feature = "rocksdb")]
struct Disk {
    dir: tempfile::TempDir,
}

#[cfg(feature = "rocksdb")]
impl Disk {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("store")
    }

    /// Runs `step` on the store, opened for it alone.
    fn run<T>(&self, step: impl FnOnce(&Store) -> T) -> T {
        step(&Store::open(self.path()).unwrap())
    }

    /// Checks a copy of the store as it is now (see [`catalog_equals_rdf`]).
    fn check(&self, what: &str) {
        fn copy(from: &std::path::Path, to: &std::path::Path) {
            std::fs::create_dir_all(to).unwrap();
            for entry in std::fs::read_dir(from).unwrap() {
                let entry = entry.unwrap();
                let target = to.join(entry.file_name());
                if entry.file_type().unwrap().is_dir() {
                    copy(&entry.path(), &target);
                } else {
                    std::fs::copy(entry.path(), target).unwrap();
                }
            }
        }
        let copied = tempfile::tempdir().unwrap();
        copy(&self.path(), copied.path());
        catalog_equals_rdf(&Store::open(copied.path()).unwrap(), what);
    }
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn data(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The first `n` lines of `text`.
fn lines_upto(text: &str, n: usize) -> String {
    text.lines().take(n).map(|l| format!("{l}\n")).collect()
}

/// A Claude Code line of log `log`.
fn cc_line(log: &str, uuid: &str, parent: &str, role: &str, text: &str) -> String {
    let v = serde_json::json!({
        "type": role, "uuid": uuid, "parentUuid": parent, "sessionId": log,
        "isSidechain": false, "message": {"role": role, "content": text}
    });
    format!("{v}\n")
}

/// A log whose assistant makes parallel tool calls twice, as Claude Code writes them:
/// each call a line of its own (one message id, each line a child of the one before),
/// each result hung off the call it answers.
fn parallel_calls_log() -> String {
    use serde_json::json;
    let log = "p1";
    let line = |v: serde_json::Value| format!("{v}\n");
    let user = |uuid: &str, parent: Option<&str>, content: serde_json::Value| {
        line(
            json!({"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": log,
            "isSidechain": false, "message": {"role": "user", "content": content}}),
        )
    };
    let assistant = |uuid: &str, parent: &str, message: &str, content: serde_json::Value| {
        line(
            json!({"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": log,
            "isSidechain": false, "message": {"id": message, "role": "assistant",
            "model": "claude-sonnet-4-5", "content": content}}),
        )
    };
    let call = |uuid: &str, parent: &str, message: &str, id: &str, command: &str| {
        assistant(
            uuid,
            parent,
            message,
            json!([{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}}]),
        )
    };
    let result = |uuid: &str, parent: &str, id: &str, out: &str| {
        user(
            uuid,
            Some(parent),
            json!([{"type": "tool_result", "tool_use_id": id, "content": out}]),
        )
    };
    let say = |uuid: &str, parent: &str, message: &str, text: &str| {
        assistant(
            uuid,
            parent,
            message,
            json!([{"type": "text", "text": text}]),
        )
    };
    [
        user("u0", None, json!("List the files and the date.")),
        call("a1", "u0", "m1", "t1", "ls"),
        call("a2", "a1", "m1", "t2", "date"),
        result("r1", "a1", "t1", "alpha beta"),
        result("r2", "a2", "t2", "tuesday"),
        say("a3", "r2", "m2", "Two files, and it is tuesday."),
        user("u1", Some("a3"), json!("Now their sizes and owners.")),
        call("b1", "u1", "m3", "t3", "du"),
        call("b2", "b1", "m3", "t4", "stat"),
        result("s1", "b1", "t3", "small large"),
        result("s2", "b2", "t4", "root"),
        say("b3", "s2", "m4", "Small and large, owned by root."),
    ]
    .concat()
}

fn claude_logs() -> Vec<(&'static str, String)> {
    vec![
        (
            "claude-code-branches",
            fixture("claude-code-branches.jsonl"),
        ),
        (
            "claude-code-regenerated",
            fixture("claude-code-regenerated.jsonl"),
        ),
        ("parallel tool calls", parallel_calls_log()),
    ]
}

/// Imports a Claude Code log, tolerating a part too short to hold a message.
fn import_part(s: &Store, part: &str, what: &str) -> bool {
    match s.import_claude_code(part, &TranscriptOptions::default()) {
        Ok(_) => true,
        Err(Error::InvalidInput(m)) if m.contains("no user or assistant message") => false,
        Err(e) => panic!("{what}: {e}"),
    }
}

#[test]
fn a_log_grown_past_a_second_branch_point_lists_every_session_whoever_imported_it() {
    // The first part branches at a2 (a prompt edited: u3 and u3b); the grown log goes on
    // past a3 and branches there too (a retried prompt: u4 and u4b).
    let main = "7f3c2a10-5b1e-4c8e-9a61-2d4f0e8b9c01";
    let first = lines_upto(&fixture("claude-code-branches.jsonl"), 10);
    let grown = first.clone()
        + &cc_line(main, "u4", "a3", "user", "Run the whole suite.")
        + &cc_line(main, "a4", "u4", "assistant", "All 214 tests pass.")
        + &cc_line(main, "u4b", "a3", "user", "Run only the date tests.")
        + &cc_line(main, "a4b", "u4b", "assistant", "The 12 date tests pass.");
    // The same shape made by parallel tool calls, cut after the first pair of calls.
    let parallel = parallel_calls_log();
    let cases = [
        ("branches", first, grown),
        ("parallel calls", lines_upto(&parallel, 6), parallel),
    ];
    for (name, first, grown) in &cases {
        for s in catalog_stores() {
            let what = format!("{name}, {}", s.kind);
            s.import_claude_code(first, &TranscriptOptions::default())
                .unwrap();
            s.import_claude_code(grown, &TranscriptOptions::default())
                .unwrap();
            catalog_equals_rdf(&s, &what);
        }
        // Each import by a process of its own, as `forktrail import` runs, then a third
        // that lists.
        #[cfg(feature = "rocksdb")]
        {
            let disk = Disk::new();
            disk.run(|s| s.import_claude_code(first, &TranscriptOptions::default()))
                .unwrap();
            disk.run(|s| s.import_claude_code(grown, &TranscriptOptions::default()))
                .unwrap();
            disk.check(&format!("{name}, a process per import"));
        }
    }
}

#[test]
fn claude_code_logs_imported_a_line_at_a_time_list_what_they_store() {
    for (name, log) in claude_logs() {
        let s = Store::in_memory().unwrap();
        for n in 1..=log.lines().count() {
            let what = format!("{name} up to line {n}");
            if import_part(&s, &lines_upto(&log, n), &what) {
                catalog_equals_rdf(&s, &what);
            }
        }
    }
}

#[cfg(feature = "rocksdb")]
#[test]
fn claude_code_logs_imported_half_then_a_line_at_a_time_by_a_process_each_list_what_they_store() {
    // The first half holds branches already, as a log imported once while its
    // conversation went on does.
    for (name, log) in claude_logs() {
        let disk = Disk::new();
        let lines = log.lines().count();
        for n in lines / 2..=lines {
            let what = format!("{name} up to line {n}, a process per import");
            if disk.run(|s| import_part(s, &lines_upto(&log, n), &what)) {
                disk.check(&what);
            }
        }
    }
}

#[cfg(feature = "rocksdb")]
#[test]
fn a_project_folder_whose_log_grows_while_its_sub_agents_wait_lists_what_it_stores() {
    // The sub-agents' transcripts are there from the start; the log that launches them
    // grows a line at a time, each import by a process of its own: sub-agents imported
    // as roots are linked to their launch once it comes (re-linked, their forks with
    // them).
    let project =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-project");
    let log_name = "5b0c1e7a-2f4d-4c1a-9e8b-6a7d3c2b1f00.jsonl";
    let log = std::fs::read_to_string(project.join(log_name)).unwrap();
    let folder = tempfile::tempdir().unwrap();
    let subagents = "5b0c1e7a-2f4d-4c1a-9e8b-6a7d3c2b1f00/subagents";
    std::fs::create_dir_all(folder.path().join(subagents)).unwrap();
    for file in ["agent-a1b2c3d4.jsonl", "agent-e5f6a7b8.jsonl"] {
        let path = format!("{subagents}/{file}");
        std::fs::copy(project.join(&path), folder.path().join(&path)).unwrap();
    }
    std::fs::copy(
        project.join("agent-legacy77.jsonl"),
        folder.path().join("agent-legacy77.jsonl"),
    )
    .unwrap();
    let disk = Disk::new();
    let memory = Store::in_memory().unwrap();
    for n in 0..=log.lines().count() {
        std::fs::write(folder.path().join(log_name), lines_upto(&log, n)).unwrap();
        let what = format!("the project with its log up to line {n}");
        let import = |s: &Store| {
            s.import_claude_code_path(folder.path(), &TranscriptOptions::default())
                .unwrap_or_else(|e| panic!("{what}: {e}"))
        };
        import(&memory);
        catalog_equals_rdf(&memory, &what);
        disk.run(import);
        disk.check(&format!("{what}, a process per import"));
    }
}

/// OTLP JSON Lines: a chat, its next step, and a retry of the first answer, one span a
/// line.
fn otlp_lines() -> String {
    use serde_json::json;
    let text = |role: &str, content: &str| json!({"role": role, "parts": [{"type": "text", "content": content}]});
    let span = |id: u8, at_ms: u64, input: serde_json::Value, output: serde_json::Value| {
        let attrs = [
            ("gen_ai.operation.name", "chat".to_string()),
            ("gen_ai.request.model", "gpt-4o".to_string()),
            ("gen_ai.conversation.id", "otel-chat".to_string()),
            ("gen_ai.input.messages", input.to_string()),
            ("gen_ai.output.messages", output.to_string()),
        ];
        let start = at_ms * 1_000_000;
        let request = json!({"resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
            "scopeSpans": [{"scope": {"name": "test"}, "spans": [{
                "traceId": "5b8efff798038103d269b633813fc60c", "spanId": format!("{id:016x}"),
                "name": "chat gpt-4o", "kind": 3,
                "startTimeUnixNano": start.to_string(),
                "endTimeUnixNano": (start + 1_000_000_000).to_string(),
                "attributes": attrs.iter().map(|(k, v)| json!({"key": k, "value": {"stringValue": v}})).collect::<Vec<_>>(),
                "status": {}
            }]}]
        }]});
        format!("{request}\n")
    };
    let question = text("user", "Which planet is largest?");
    let answer = text("assistant", "Jupiter, by far.");
    [
        span(1, 1000, json!([question]), json!([answer])),
        span(
            2,
            3000,
            json!([question, answer, text("user", "And the smallest?")]),
            json!([text("assistant", "Mercury.")]),
        ),
        span(
            3,
            5000,
            json!([question]),
            json!([text("assistant", "Jupiter, eleven Earths wide.")]),
        ),
    ]
    .concat()
}

#[test]
fn codex_pi_openai_and_otlp_imports_whole_and_line_by_line_list_what_they_store() {
    let openai: Vec<serde_json::Value> =
        serde_json::from_str(&fixture("openai-tools.json")).unwrap();
    let openai: String = openai.iter().map(|m| format!("{m}\n")).collect();
    let sources = [
        (
            "codex rollout",
            data("codex/rollout.jsonl"),
            ImportFormat::Codex,
        ),
        (
            "codex early rollout",
            data("codex/early-rollout.jsonl"),
            ImportFormat::Codex,
        ),
        ("pi session", data("pi/session.jsonl"), ImportFormat::Pi),
        ("pi fork", data("pi/fork.jsonl"), ImportFormat::Pi),
        ("openai", openai, ImportFormat::OpenAi),
        ("otlp", otlp_lines(), ImportFormat::Otlp),
    ];
    for s in catalog_stores() {
        for (name, text, format) in &sources {
            let what = format!("{name} whole, {}", s.kind);
            let fresh = Store::in_memory().unwrap();
            for store in [&fresh, &*s] {
                store
                    .import_with(
                        text.as_bytes(),
                        Some(*format),
                        &TranscriptOptions::default(),
                    )
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
            }
            catalog_equals_rdf(&fresh, &what);
            catalog_equals_rdf(&s, &what);
        }
    }
    // Line by line: each part imported again, as its source grew.
    for (name, text, format) in &sources {
        let s = Store::in_memory().unwrap();
        for n in 1..=text.lines().count() {
            let what = format!("{name} up to line {n}");
            match s.import_with(
                lines_upto(text, n).as_bytes(),
                Some(*format),
                &TranscriptOptions::default(),
            ) {
                Ok(_) => catalog_equals_rdf(&s, &what),
                // A part that holds no conversation yet (a header alone), or one that
                // repeats what is stored.
                Err(Error::InvalidInput(_) | Error::Conflict(_)) => {}
                Err(e) => panic!("{what}: {e}"),
            }
        }
    }
}

/// A session's own turns as the RDF has them.
#[derive(Clone, Default)]
struct OwnTurns {
    count: u64,
    last: Option<u64>,
    /// The newest turn's time, in microseconds.
    newest: i64,
    models: BTreeSet<String>,
}

/// A named step on a store.
type Step = (&'static str, Box<dyn Fn(&Store)>);

/// Every kind of write, in order, each a named step on a store (ids fixed, so that a
/// step can name what an earlier one made). The stub answers the regeneration.
fn writes(stub: &str) -> Vec<Step> {
    let endpoint = stub.to_string();
    let turn = |i: usize| {
        let (role, model) = if i.is_multiple_of(2) {
            (Role::User, None)
        } else {
            (
                Role::Assistant,
                Some(if i % 4 == 1 { "model-a" } else { "model-b" }),
            )
        };
        let t = NewTurn::new(role, format!("turn{i} of the written sessions"));
        match model {
            Some(m) => t.model(m),
            None => t,
        }
    };
    let session = |id: &str, principal: &str, title: Option<&str>| NewSession {
        id: Some(id.into()),
        principal: Some(principal.into()),
        title: title.map(str::to_string),
    };
    vec![
        (
            "create",
            Box::new(move |s: &Store| {
                s.create_session(session("w-root", "alice", Some("writes of every kind")))
                    .unwrap();
            }),
        ),
        (
            "append",
            Box::new(move |s: &Store| {
                for i in 0..4 {
                    s.append(&sid("w-root"), turn(i)).unwrap();
                }
            }),
        ),
        (
            "batch append",
            Box::new(move |s: &Store| {
                s.append_many(&sid("w-root"), (4..7).map(turn).collect())
                    .unwrap();
            }),
        ),
        (
            "fork",
            Box::new(move |s: &Store| {
                fork_at(s, &sid("w-root"), 3, "w-a", "a");
                s.append_many(&sid("w-a"), (7..9).map(turn).collect())
                    .unwrap();
                fork_at(s, &sid("w-a"), 4, "w-b", "b");
                s.append(&sid("w-b"), turn(9)).unwrap();
                fork_at(s, &sid("w-root"), 2, "w-p", "p");
                s.append_many(&sid("w-p"), (17..19).map(turn).collect())
                    .unwrap();
            }),
        ),
        (
            "pop",
            Box::new(move |s: &Store| {
                s.pop(&sid("w-root")).unwrap().unwrap();
            }),
        ),
        (
            "pop the newest turn of a family",
            Box::new(move |s: &Store| {
                s.pop(&sid("w-p")).unwrap().unwrap();
            }),
        ),
        (
            "anchor",
            Box::new(move |s: &Store| {
                s.anchor(&sid("w-root"), "checkpoint", Some("{\"step\": 1}"))
                    .unwrap();
            }),
        ),
        (
            "merge",
            Box::new(move |s: &Store| {
                s.merge(&sid("w-b"), MergeOptions::default()).unwrap();
            }),
        ),
        (
            "detach",
            Box::new(move |s: &Store| {
                s.detach(&sid("w-a")).unwrap();
            }),
        ),
        (
            "create and fork another tree",
            Box::new(move |s: &Store| {
                s.create_session(session("w-other", "bob", None)).unwrap();
                s.append_many(&sid("w-other"), (10..13).map(turn).collect())
                    .unwrap();
                fork_at(s, &sid("w-other"), 1, "w-c", "c");
                fork_at(s, &sid("w-other"), 2, "w-d", "d");
                fork_at(s, &sid("w-d"), 2, "w-e", "e");
            }),
        ),
        (
            "delete",
            Box::new(move |s: &Store| {
                s.delete(&sid("w-c"), false).unwrap();
            }),
        ),
        (
            "delete in cascade",
            Box::new(move |s: &Store| {
                s.delete(&sid("w-d"), true).unwrap();
            }),
        ),
        (
            "sparql update",
            Box::new(move |s: &Store| {
                s.update(
                    "PREFIX dcterms: <http://purl.org/dc/terms/>
                 PREFIX ft: <https://w3id.org/forktrail/ns#>
                 DELETE { GRAPH ?g { ?s dcterms:title ?old } }
                 INSERT { GRAPH ?g { ?s dcterms:title \"renamed by an update\" } }
                 WHERE { GRAPH ?g { ?s ft:sessionId \"w-root\" ; dcterms:title ?old } }",
                    None,
                )
                .unwrap();
            }),
        ),
        (
            "rdf import",
            Box::new(move |s: &Store| {
                let other = Store::in_memory().unwrap();
                other
                    .create_session(session("w-rdf", "carol", Some("from a file")))
                    .unwrap();
                other
                    .append_many(&sid("w-rdf"), (13..16).map(turn).collect())
                    .unwrap();
                fork_at(&other, &sid("w-rdf"), 2, "w-rdf-fork", "imported");
                other.append(&sid("w-rdf-fork"), turn(16)).unwrap();
                let mut trig = Vec::new();
                other.export(None, ExportFormat::TriG, &mut trig).unwrap();
                s.import_with(
                    &trig[..],
                    Some(ImportFormat::TriG),
                    &TranscriptOptions::default(),
                )
                .unwrap();
            }),
        ),
        (
            "openai import",
            Box::new(move |s: &Store| {
                // The second repeats the first's start: stored as a fork of it.
                let chat = |n: usize| {
                    let messages: Vec<serde_json::Value> = (0..n)
                        .map(|i| {
                            serde_json::json!({
                                "role": if i % 2 == 0 { "user" } else { "assistant" },
                                "content": format!("chatline{i} of the imported chat"),
                            })
                        })
                        .collect();
                    serde_json::to_string(&messages).unwrap()
                };
                for n in [3, 5] {
                    s.import_openai(
                        &chat(n),
                        NewSession::default(),
                        &TranscriptOptions::default(),
                    )
                    .unwrap();
                }
            }),
        ),
        (
            "regeneration",
            Box::new(move |s: &Store| {
                let job = s
                    .regenerate(
                        &sid("w-root"),
                        &RegenerateOptions {
                            at: 3,
                            model: Some("model-c".into()),
                            endpoint: Some(endpoint.clone()),
                            ..Default::default()
                        },
                    )
                    .unwrap();
                assert!(job.fork.is_some(), "{job:?}");
            }),
        ),
    ]
}

#[test]
fn every_kind_of_write_leaves_the_catalog_as_the_rdf_says() {
    let stub = common::stub::start(common::stub::Mode::Echo);
    for s in catalog_stores() {
        for (name, write) in writes(&stub.url) {
            write(&s);
            catalog_equals_rdf(&s, &format!("{}: after {name}", s.kind));
        }
    }
    // Each write by a process of its own, the catalog read by none of them.
    #[cfg(feature = "rocksdb")]
    {
        let disk = Disk::new();
        for (name, write) in writes(&stub.url) {
            disk.run(|s| write(s));
            disk.check(&format!("after {name}, a process per write"));
        }
    }
}

/// Each write through one handle of a shared store, the catalog read through another,
/// as two processes (two `forktrail serve`) would: what one wrote, the other lists and
/// finds at its next read, as the RDF says, having only followed the store's change
/// feed.
#[test]
fn every_kind_of_write_through_one_process_is_listed_by_another_as_the_rdf_says() {
    let stub = common::stub::start(common::stub::Mode::Echo);
    for (writer, reader) in shared_pairs() {
        // The reader has built its catalog before the writes begin.
        catalog_equals_rdf(&reader, &format!("{}: empty, read by another", writer.kind));
        for (name, write) in writes(&stub.url) {
            write(&writer);
            catalog_equals_rdf(
                &reader,
                &format!("{}: after {name} by another process", writer.kind),
            );
        }
    }
}

#[test]
fn concurrent_appends_forks_and_reads_never_fail_and_end_as_the_rdf_says() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    for s in catalog_stores() {
        let s = Arc::new(s);
        let roots: Vec<SessionId> = (0..3)
            .map(|i| session_with(&s, &format!("c-{i}"), 2))
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|r| {
                let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut reads = 0;
                    while !stop.load(Ordering::Relaxed) || reads == 0 {
                        let query = SessionQuery {
                            roots: r == 1,
                            order: if r == 2 {
                                SessionOrder::Created
                            } else {
                                SessionOrder::Activity
                            },
                            limit: Some(2),
                            ..Default::default()
                        };
                        paged(&s, &query, "a reader under writes");
                        s.search(&SearchQuery {
                            text: "appended".into(),
                            ..Default::default()
                        })
                        .unwrap_or_else(|e| panic!("a search under writes: {e}"));
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        let writers: Vec<_> = roots
            .iter()
            .enumerate()
            .map(|(w, root)| {
                let (s, root) = (Arc::clone(&s), root.clone());
                std::thread::spawn(move || {
                    for n in 0..40 {
                        s.append(
                            &root,
                            NewTurn::new(Role::User, format!("appended {n} by {w}")),
                        )
                        .unwrap();
                        if n % 10 == 9 {
                            fork_at(&s, &root, 2, &format!("{root}-fork-{n}"), &format!("f{n}"));
                        }
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        catalog_equals_rdf(
            &s,
            &format!("{}: after concurrent appends and reads", s.kind),
        );
    }
}
