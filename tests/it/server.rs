//! `forktrail serve` over real HTTP on 127.0.0.1: every route, status code and content
//! type, the token rules, the time limit, the concurrency cap, injection through REST
//! fields, and a third-party SPARQL client.
#![cfg(feature = "server")]

use crate::common;

use common::server::{Demo, Server};
use forktrail::server::ServerConfig;
use forktrail::{demo, Limits, SessionId, Store};
use reqwest::blocking::{Client, Response};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const TOKEN: &str = "s3cret-token";

fn start(config: ServerConfig) -> Demo {
    start_limited(config, Limits::default())
}

/// A server of the demo tree in a store that holds writes to `limits`.
fn start_limited(config: ServerConfig, limits: Limits) -> Demo {
    Server::demo(
        Arc::new(Store::in_memory().unwrap().with_limits(limits)),
        config,
    )
}

fn with_token() -> ServerConfig {
    ServerConfig {
        token: Some(TOKEN.into()),
        ..ServerConfig::default()
    }
}

/// Sends `request` as written over TCP and returns the whole reply.
fn raw_request(s: &Server, request: &str) -> String {
    use std::io::{Read, Write};
    let addr = s.base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
}

fn content_type(r: &Response) -> String {
    r.headers()["content-type"].to_str().unwrap().to_string()
}

const CHAIN: &str = "PREFIX ft: <https://w3id.org/forktrail/ns#>
SELECT ?levelId ?depth WHERE { ?s ft:sessionId ?id ; ft:parentSession* ?level . ?level ft:sessionId ?levelId ; ft:forkDepth ?depth } ORDER BY ?depth";

#[test]
fn sparql_answers_in_every_result_format_by_accept() {
    let s = start(ServerConfig::default());
    // Over HTTP nothing binds values: the id goes in as an oxrdf term (escaped).
    let id = oxigraph::model::Literal::new_simple_literal(s.tree.booking.as_str());
    let q = CHAIN.replace("?id ;", &format!("{id} ;"));
    for (accept, expected_type, marker) in [
        (
            "application/sparql-results+json",
            "application/sparql-results+json",
            "\"bindings\"",
        ),
        (
            "application/sparql-results+xml",
            "application/sparql-results+xml",
            "<sparql",
        ),
        ("text/csv", "text/csv", "levelId,depth"),
        (
            "text/tab-separated-values",
            "text/tab-separated-values",
            "?levelId\t?depth",
        ),
        (
            "text/html;q=0.9, text/csv;q=0.2, application/sparql-results+xml;q=0.5",
            "application/sparql-results+xml",
            "<sparql",
        ),
        ("*/*", "application/sparql-results+json", "\"bindings\""),
        ("", "application/sparql-results+json", "\"bindings\""),
    ] {
        let r = s.sparql(&q, accept);
        assert_eq!(r.status(), StatusCode::OK, "{accept}");
        assert!(
            content_type(&r).starts_with(expected_type),
            "{accept}: {}",
            content_type(&r)
        );
        let body = r.text().unwrap();
        assert!(body.contains(marker), "{accept}: {body}");
        assert!(
            body.contains(s.tree.root.as_str()),
            "the chain reaches the root: {body}"
        );
    }
    let r = s.sparql(&q, "image/png");
    assert_eq!(r.status(), StatusCode::NOT_ACCEPTABLE);
    // GET and form POST give the same rows as a direct POST.
    let csv = s.sparql(&q, "text/csv").text().unwrap();
    let get = s
        .http
        .get(s.url("/sparql"))
        .query(&[("query", q.as_str())])
        .header("Accept", "text/csv")
        .send()
        .unwrap();
    assert_eq!(get.text().unwrap(), csv);
    let form = s
        .http
        .post(s.url("/query"))
        .form(&[("query", q.as_str())])
        .header("Accept", "text/csv")
        .send()
        .unwrap();
    assert_eq!(form.text().unwrap(), csv);
    assert_eq!(csv.lines().count(), 4, "root, model-swap, booking:\n{csv}");
}

#[test]
fn graphs_come_back_in_every_rdf_format_and_ask_as_a_boolean() {
    let s = start(ServerConfig::default());
    let construct = "CONSTRUCT { ?f a <https://w3id.org/forktrail/ns#Fork> } WHERE { ?f a <https://w3id.org/forktrail/ns#Fork> }";
    for accept in [
        "text/turtle",
        "application/n-triples",
        "application/n-quads",
        "application/trig",
        "application/ld+json",
    ] {
        let r = s.sparql(construct, accept);
        assert_eq!(r.status(), StatusCode::OK, "{accept}");
        assert!(content_type(&r).starts_with(accept), "{accept}");
        assert!(r.text().unwrap().contains("/fork"), "{accept}");
    }
    assert_eq!(
        s.sparql(construct, "text/csv").status(),
        StatusCode::NOT_ACCEPTABLE
    );
    let ask = s.sparql(
        "ASK { ?s <https://w3id.org/forktrail/ns#branch> \"booking\" }",
        "application/sparql-results+json",
    );
    assert_eq!(ask.json::<Value>().unwrap()["boolean"], true);
}

#[test]
fn protocol_edges_service_description_service_refusal_and_datasets() {
    let s = start(ServerConfig::default());
    let sd = s.get("/sparql", "text/turtle");
    assert_eq!(sd.status(), StatusCode::OK);
    assert!(sd.text().unwrap().contains("sd:UnionDefaultGraph"));
    let r = s.sparql(
        "SELECT * WHERE { SERVICE <http://example.com/sparql> { ?s ?p ?o } }",
        "",
    );
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().unwrap().contains("SERVICE is not allowed"));
    assert_eq!(
        s.sparql("SELECT WHERE {", "").status(),
        StatusCode::BAD_REQUEST
    );
    let wrong_type = s
        .http
        .post(s.url("/sparql"))
        .header("Content-Type", "text/plain")
        .body("x")
        .send()
        .unwrap();
    assert_eq!(wrong_type.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // default-graph-uri restricts the default graph to the named sessions.
    let count =
        "SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE { ?s a <https://w3id.org/forktrail/ns#Session> }";
    let one = s.store.session_iri(&s.tree.booking);
    let r = s
        .http
        .get(s.url("/sparql"))
        .query(&[("query", count), ("default-graph-uri", one.as_str())])
        .header("Accept", "text/csv")
        .send()
        .unwrap();
    assert_eq!(r.text().unwrap().lines().nth(1), Some("1"));
    let all = s
        .http
        .get(s.url("/sparql"))
        .query(&[("query", count)])
        .header("Accept", "text/csv")
        .send()
        .unwrap();
    assert_eq!(all.text().unwrap().lines().nth(1), Some("4"));
    // Graph Store Protocol, read.
    let g = s
        .http
        .get(s.url("/store"))
        .query(&[("graph", one.as_str())])
        .header("Accept", "application/n-triples")
        .send()
        .unwrap();
    assert_eq!(g.status(), StatusCode::OK);
    assert!(g.text().unwrap().contains("\"booking\""));
    let missing = s
        .http
        .get(s.url("/store"))
        .query(&[("graph", "urn:forktrail:session:nope")])
        .send()
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(s.get("/health", "").text().unwrap(), "ok\n");
    let metrics = s.get("/metrics", "").text().unwrap();
    assert!(
        metrics.contains("forktrail_requests_total{route=\"/sparql\",status=\"200\"}"),
        "{metrics}"
    );
}

#[test]
fn writes_need_the_token_403_without_one_401_when_wrong() {
    let read_only = start(ServerConfig::default());
    let before = read_only.quads();
    let root = read_only.tree.root.to_string();
    let writes: Vec<(&str, String, Value)> = vec![
        ("POST", "/sessions".into(), json!({})),
        (
            "POST",
            format!("/sessions/{root}/turns"),
            json!({"role": "user", "content": "x"}),
        ),
        ("POST", format!("/sessions/{root}/fork"), json!({})),
        (
            "POST",
            format!("/sessions/{}/detach", read_only.tree.budget),
            json!({}),
        ),
        (
            "DELETE",
            format!("/sessions/{root}?cascade=true"),
            json!({}),
        ),
    ];
    let send = |s: &Server, method: &str, path: &str, body: &Value, token: Option<&str>| {
        let mut r = if method == "POST" {
            s.http.post(s.url(path)).json(body)
        } else {
            s.http.delete(s.url(path))
        };
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send().unwrap()
    };
    for (method, path, body) in &writes {
        let r = send(&read_only, method, path, body, Some(TOKEN));
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{method} {path}");
        assert_eq!(r.json::<Value>().unwrap()["error"], "read_only");
    }
    let update = "INSERT DATA { GRAPH <urn:x> { <urn:a> <urn:b> <urn:c> } }";
    let r = read_only.update(update, Some(TOKEN));
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(before, read_only.quads());

    let s = start(with_token());
    let before = s.quads();
    for token in [None, Some("wrong"), Some("s3cret-token-but-longer")] {
        for (method, path, body) in &writes {
            let r = send(&s, method, path, body, token);
            assert_eq!(
                r.status(),
                StatusCode::UNAUTHORIZED,
                "{method} {path} {token:?}"
            );
        }
        assert_eq!(s.update(update, token).status(), StatusCode::UNAUTHORIZED);
    }
    assert_eq!(before, s.quads());
    assert_eq!(
        s.update(update, Some(TOKEN)).status(),
        StatusCode::NO_CONTENT
    );
    assert_eq!(s.quads().len(), before.len() + 1);
}

#[test]
fn rest_routes_follow_the_cli_semantics() {
    let s = start(with_token());
    let r = s.post_json(
        "/sessions",
        Some(TOKEN),
        json!({"id": "r1", "title": "t", "principal": "bob"}),
    );
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(r.json::<Value>().unwrap(), json!({"session": "r1"}));
    let r = s.post_json(
        "/sessions/r1/turns",
        Some(TOKEN),
        json!({"role": "user", "content": "hi"}),
    );
    assert_eq!(
        r.json::<Value>().unwrap(),
        json!({"session": "r1", "index": 0})
    );
    s.post_json("/sessions/r1/turns", Some(TOKEN), json!({"role": "assistant", "content": "calling", "kind": "tool_call", "model": "m", "tool_calls": [{"id": "c1"}]}));
    let dry = s.post_json(
        "/sessions/r1/fork",
        Some(TOKEN),
        json!({"at": 1, "label": "alt", "dry_run": true}),
    );
    assert_eq!(dry.status(), StatusCode::OK);
    let none = s.get("/sessions/r1/branches", "").json::<Value>().unwrap();
    assert_eq!(none, json!({"branches": [], "total": 0, "next": null}));
    let plan: Value = s
        .post_json(
            "/sessions/r1/fork",
            Some(TOKEN),
            json!({"at": 1, "label": "alt", "id": "r2"}),
        )
        .json()
        .unwrap();
    assert_eq!(
        plan,
        json!({"session": "r2", "parent": "r1", "forked_at_index": 1, "branch": "alt", "fork_root": "r1", "depth": 1})
    );
    let replay: Value = s.get("/sessions/r2/replay", "").json().unwrap();
    assert_eq!(
        replay,
        json!([{"index": 0, "role": "user", "content": "hi", "branch": "main"}])
    );
    let replay: Value = s.get("/sessions/r1/replay?up_to=0", "").json().unwrap();
    assert_eq!(replay.as_array().unwrap().len(), 1);
    assert_eq!(
        s.get("/sessions/r1", "").json::<Value>().unwrap()["length"],
        2
    );
    assert_eq!(
        s.get("/sessions/r1/branches", "").json::<Value>().unwrap()["branches"][0]["branch"],
        "alt"
    );
    assert_eq!(
        s.get("/sessions/r1/tree", "").json::<Value>().unwrap()["children"][0]["session"],
        "r2"
    );
    let page = s.get("/sessions", "").json::<Value>().unwrap();
    assert!(page["sessions"].as_array().unwrap().len() >= 6, "{page}");
    assert!(page["total"].as_u64().unwrap() >= 6);
    // A page at a time, with the cursor of the next; filters as the CLI's.
    let first = s
        .get("/sessions?limit=2&order=created", "")
        .json::<Value>()
        .unwrap();
    assert_eq!(first["sessions"].as_array().unwrap().len(), 2);
    let next = first["next"].as_str().unwrap();
    let second = s
        .get(
            &format!("/sessions?limit=2&order=created&cursor={next}"),
            "",
        )
        .json::<Value>()
        .unwrap();
    assert_ne!(
        first["sessions"][0]["session"],
        second["sessions"][0]["session"]
    );
    let bobs = s
        .get("/sessions?principal=bob", "")
        .json::<Value>()
        .unwrap();
    assert!(bobs["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x["principal"] == "bob"));
    let children = s.get("/sessions?parent=r1", "").json::<Value>().unwrap();
    assert_eq!(children["sessions"][0]["session"], "r2");
    let refused = s.get("/sessions?limit=0", "");
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let refused = s.get("/sessions?colour=red", "");
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let found = s.get("/search?q=hi", "").json::<Value>().unwrap();
    assert_eq!(found["hits"][0]["session"], "r1", "{found}");
    assert_eq!(found["hits"][0]["index"], 0);
    // Errors: JSON with the CLI's message and a fitting status.
    for (r, status, code) in [
        (
            s.get("/sessions/ghost", ""),
            StatusCode::NOT_FOUND,
            "session_not_found",
        ),
        (
            s.get("/sessions/r1/replay?up_to=9", ""),
            StatusCode::BAD_REQUEST,
            "index_out_of_range",
        ),
        (
            s.post_json(
                "/sessions/r1/turns",
                Some(TOKEN),
                json!({"role": "robot", "content": "x"}),
            ),
            StatusCode::BAD_REQUEST,
            "invalid_role",
        ),
        (
            s.post_json("/sessions/r1/fork", Some(TOKEN), json!({"label": "alt"})),
            StatusCode::CONFLICT,
            "duplicate_label",
        ),
        (
            s.post_json("/sessions/r1/fork", Some(TOKEN), json!({"at": 99})),
            StatusCode::BAD_REQUEST,
            "index_out_of_range",
        ),
        // A turn index is never negative: the body does not parse.
        (
            s.post_json("/sessions/r1/fork", Some(TOKEN), json!({"at": -1})),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            s.post_json("/sessions", Some(TOKEN), json!({"id": "r1"})),
            StatusCode::CONFLICT,
            "conflict",
        ),
        (
            s.post_json("/sessions", Some(TOKEN), json!({"unknown": 1})),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            s.http
                .delete(s.url("/sessions/r1"))
                .bearer_auth(TOKEN)
                .send()
                .unwrap(),
            StatusCode::CONFLICT,
            "has_children",
        ),
    ] {
        assert_eq!(r.status(), status);
        assert_eq!(r.json::<Value>().unwrap()["error"], code);
    }
    let r = s
        .http
        .post(s.url("/sessions/r2/detach"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = s
        .http
        .delete(s.url("/sessions/r1?cascade=true"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    let deleted = r.json::<Value>().unwrap();
    assert_eq!(deleted["deleted"], json!(["r1"]));
    assert_eq!(deleted["sessions"][0]["branch"], "main");
    assert_eq!(
        s.get("/sessions/r2/replay", "").json::<Value>().unwrap()[0]["content"],
        "hi"
    );
}

#[test]
fn a_wide_familys_branches_come_in_pages_and_its_tree_within_a_limit() {
    let s = start(with_token());
    s.post_json("/sessions", Some(TOKEN), json!({"id": "wide"}));
    s.post_json(
        "/sessions/wide/turns",
        Some(TOKEN),
        json!({"role": "user", "content": "hi"}),
    );
    for n in 0..5 {
        let r = s.post_json(
            "/sessions/wide/fork",
            Some(TOKEN),
            json!({"id": format!("f{n}"), "label": format!("l{n}")}),
        );
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    s.post_json("/sessions/f0/fork", Some(TOKEN), json!({"id": "g0"}));
    // Pages of two: every fork once, the total on each page, no next on the last.
    let (mut seen, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
    loop {
        let url = match &cursor {
            Some(c) => format!("/sessions/wide/branches?limit=2&cursor={c}"),
            None => "/sessions/wide/branches?limit=2".to_string(),
        };
        let page: Value = s.get(&url, "").json().unwrap();
        assert_eq!(page["total"], 5, "{page}");
        assert!(page["branches"].as_array().unwrap().len() <= 2, "{page}");
        for b in page["branches"].as_array().unwrap() {
            seen.push(b["session"].as_str().unwrap().to_string());
        }
        pages += 1;
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(
        (seen, pages),
        (
            vec!["f0", "f1", "f2", "f3", "f4"]
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>(),
            3
        )
    );
    // The tree, breadth first: the root and two forks fit in three; the root says how
    // many children it leaves out.
    let tree: Value = s.get("/sessions/wide/tree?limit=3", "").json().unwrap();
    assert_eq!(tree["children"].as_array().unwrap().len(), 2, "{tree}");
    assert_eq!(tree["more_children"], 3, "{tree}");
    for child in tree["children"].as_array().unwrap() {
        assert!(child["children"].as_array().unwrap().is_empty(), "{tree}");
    }
    // Room for all: seven sessions, g0 under f0, nothing left out.
    let tree: Value = s.get("/sessions/wide/tree", "").json().unwrap();
    assert!(tree.get("more_children").is_none(), "{tree}");
    let f0 = tree["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["session"] == "f0")
        .unwrap();
    assert_eq!(f0["children"][0]["session"], "g0", "{tree}");
    for bad in ["limit=0", "limit=10001"] {
        let r = s.get(&format!("/sessions/wide/tree?{bad}"), "");
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad}");
        assert!(r.text().unwrap().contains("limit"), "{bad}");
    }
}

#[test]
fn rest_turns_in_full_batches_all_or_none_and_pop() {
    let s = start(with_token());
    s.post_json("/sessions", Some(TOKEN), json!({"id": "rt"}));
    let item = json!({"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"});
    let r = s.post_json(
        "/sessions/rt/turns",
        Some(TOKEN),
        json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "kind": "tool_call", "model": "m",
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
             "payload": item},
            {"role": "tool", "content": "42", "tool_call_id": "c1", "name": "f"}
        ]),
    );
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(
        r.json::<Value>().unwrap(),
        json!({"session": "rt", "indices": [0, 1, 2]})
    );
    let turns: Value = s.get("/sessions/rt/turns", "").json().unwrap();
    let turns = turns.as_array().unwrap();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[1]["payload"], item);
    assert_eq!(turns[1]["tool_calls"][0]["id"], "c1");
    assert_eq!(
        (turns[1]["kind"].as_str(), turns[1]["model"].as_str()),
        (Some("tool_call"), Some("m"))
    );
    assert_eq!(
        (turns[2]["session"].as_str(), turns[2]["branch"].as_str()),
        (Some("rt"), Some("main"))
    );
    assert_eq!(turns[2]["digest"].as_str().unwrap().len(), 64);
    let pick = |query: &str| -> Vec<u64> {
        let page: Value = s
            .get(&format!("/sessions/rt/turns?{query}"), "")
            .json()
            .unwrap();
        page.as_array()
            .unwrap()
            .iter()
            .map(|t| t["index"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(pick("last=2"), [1, 2]);
    assert_eq!(pick("from=1"), [1, 2]);
    assert_eq!(pick("from=0&up_to=1"), [0, 1]);
    assert_eq!(pick("from=0&up_to=1&last=1"), [1]);
    assert_eq!(pick("from=7"), Vec::<u64>::new());
    assert_eq!(pick("last=0"), Vec::<u64>::new());
    assert_eq!(
        s.get("/sessions/rt/turns?up_to=3", "").status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        s.get("/sessions/nope/turns", "").status(),
        StatusCode::NOT_FOUND
    );

    // A batch with one bad turn writes none of them, and says which one.
    let before = s.quads();
    let r = s.post_json(
        "/sessions/rt/turns",
        Some(TOKEN),
        json!([{"role": "user", "content": "ok"}, {"role": "user", "content": "x", "payload": 3, "colour": "red"}]),
    );
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("turn 1: unknown field `colour`"),
        "{body}"
    );
    let r = s.post_json(
        "/sessions/rt/turns",
        Some(TOKEN),
        json!([{"role": "user", "content": "ok"}, {"role": "robot", "content": "x"}]),
    );
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(s.quads(), before);

    // Pop: the token is needed, the last turn comes back, a shared one stays.
    assert_eq!(
        s.post_json("/sessions/rt/pop", None, json!({})).status(),
        StatusCode::UNAUTHORIZED
    );
    let popped: Value = s
        .post_json("/sessions/rt/pop", Some(TOKEN), json!({}))
        .json()
        .unwrap();
    assert_eq!(
        (
            popped["popped"]["index"].as_u64(),
            popped["popped"]["content"].as_str()
        ),
        (Some(2), Some("42"))
    );
    s.post_json("/sessions/rt/fork", Some(TOKEN), json!({"label": "all"}));
    let before = s.quads();
    let r = s.post_json("/sessions/rt/pop", Some(TOKEN), json!({}));
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(r.json::<Value>().unwrap()["message"]
        .as_str()
        .unwrap()
        .starts_with("cannot remove turn 1 of session rt: fork "));
    assert_eq!(s.quads(), before);
    s.post_json("/sessions", Some(TOKEN), json!({"id": "empty"}));
    let none: Value = s
        .post_json("/sessions/empty/pop", Some(TOKEN), json!({}))
        .json()
        .unwrap();
    assert_eq!(none, json!({"session": "empty", "popped": null}));
}

#[test]
fn a_session_posted_with_turns_that_repeat_a_stored_one_is_stored_as_a_fork_of_it() {
    let s = start(with_token());
    let turns = json!([
        {"role": "user", "content": "Plan a trip to Lima."},
        {"role": "assistant", "content": "Three days.", "model": "m1"},
        {"role": "user", "content": "Make it four."}
    ]);
    let r = s.post_json(
        "/sessions",
        Some(TOKEN),
        json!({"id": "trip", "turns": turns}),
    );
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(
        r.json::<Value>().unwrap(),
        json!({"session": "trip", "turns": 3})
    );
    // The same first two turns, then another request: a fork of "trip" at 2.
    let mut retry = turns.clone();
    retry[2]["content"] = json!("Make it two.");
    let r = s.post_json(
        "/sessions",
        Some(TOKEN),
        json!({"id": "trip-2", "title": "shorter", "turns": retry}),
    );
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(
        r.json::<Value>().unwrap(),
        json!({"session": "trip-2", "turns": 1, "shared": {
            "session": "trip-2", "parent": "trip", "shared_turns": 2, "branch": "copy"}})
    );
    let info: Value = s.get("/sessions/trip-2", "").json().unwrap();
    assert_eq!(
        (&info["parent"], &info["forked_at_index"], &info["title"]),
        (&json!("trip"), &json!(2), &json!("shorter"))
    );
    let replay: Value = s.get("/sessions/trip-2/replay", "").json().unwrap();
    assert_eq!(replay[2]["content"], "Make it two.");
    // no_dedup: a root of its own.
    let r = s.post_json(
        "/sessions",
        Some(TOKEN),
        json!({"id": "trip-3", "turns": retry, "no_dedup": true}),
    );
    assert_eq!(
        r.json::<Value>().unwrap(),
        json!({"session": "trip-3", "turns": 3})
    );
    // A bad turn names its place and writes nothing; so does no token.
    let before = s.quads();
    let r = s.post_json(
        "/sessions",
        Some(TOKEN),
        json!({"id": "bad", "turns": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]}),
    );
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let message = r.json::<Value>().unwrap()["message"].to_string();
    assert!(message.contains("turn 1"), "{message}");
    let r = s.post_json("/sessions", None, json!({"id": "bad", "turns": retry}));
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(s.quads(), before);
}

#[test]
fn bodies_and_contents_over_the_limits_get_413_and_change_nothing() {
    let limits = Limits {
        content_bytes: 1024,
        ..Limits::default()
    };
    let s = start_limited(
        ServerConfig {
            max_body_bytes: 64 * 1024,
            ..with_token()
        },
        limits,
    );
    let root = s.tree.root.to_string();
    let before = s.quads();
    let r = s.post_json(
        &format!("/sessions/{root}/turns"),
        Some(TOKEN),
        json!({"role": "user", "content": "x".repeat(2048)}),
    );
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.json::<Value>().unwrap()["error"], "too_large");
    let r = s.post_json(
        &format!("/sessions/{root}/turns"),
        Some(TOKEN),
        json!({"role": "user", "content": "x".repeat(100_000)}),
    );
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(before, s.quads());
}

#[test]
fn hostile_values_through_rest_and_update_stay_values() {
    let s = start(with_token());
    let hostile = "x\" } ; DROP ALL ; #";
    let before = s.store.replay(&s.tree.booking, None).unwrap();
    let root = s.tree.root.to_string();
    let r = s.post_json("/sessions", Some(TOKEN), json!({"id": hostile}));
    assert_eq!(r.json::<Value>().unwrap()["error"], "invalid_id");
    let r = s.post_json(
        &format!("/sessions/{root}/fork"),
        Some(TOKEN),
        json!({"label": hostile}),
    );
    assert_eq!(r.json::<Value>().unwrap()["error"], "invalid_name");
    let r = s.post_json("/sessions", Some(TOKEN), json!({"principal": hostile}));
    assert_eq!(r.json::<Value>().unwrap()["error"], "invalid_name");
    let fork = format!("/sessions/{root}/fork");
    let r = s.post_json(&fork, Some(TOKEN), json!({"id": hostile}));
    assert_eq!(r.json::<Value>().unwrap()["error"], "invalid_id");
    let r = s.post_json(
        &fork,
        Some(TOKEN),
        json!({"reason": hostile, "label": "why"}),
    );
    assert_eq!(r.status(), StatusCode::CREATED);
    let reasons = "SELECT ?r WHERE { ?f <https://w3id.org/forktrail/ns#reason> ?r }";
    let tsv = s
        .sparql(reasons, "text/tab-separated-values")
        .text()
        .unwrap();
    assert!(tsv.contains("DROP ALL"), "{tsv}");
    let r = s.post_json(
        "/sessions",
        Some(TOKEN),
        json!({"title": hostile, "principal": "p"}),
    );
    let id = r.json::<Value>().unwrap()["session"]
        .as_str()
        .unwrap()
        .to_string();
    for field in ["content", "model", "name", "tool_call_id"] {
        let mut body = json!({"role": "tool", "content": "c"});
        body[field] = json!(hostile.replace(' ', "_"));
        if field == "content" {
            body[field] = json!(hostile);
        }
        let r = s.post_json(&format!("/sessions/{id}/turns"), Some(TOKEN), body);
        assert_eq!(r.status(), StatusCode::CREATED, "{field}");
    }
    let replay: Value = s.get(&format!("/sessions/{id}/replay"), "").json().unwrap();
    assert_eq!(replay[0]["content"], hostile);
    assert_eq!(
        s.get(&format!("/sessions/{id}"), "")
            .json::<Value>()
            .unwrap()["title"],
        hostile
    );
    let bad_replay = s.get(&format!("/sessions/{}/replay", urlencode(hostile)), "");
    assert_eq!(bad_replay.status(), StatusCode::BAD_REQUEST);
    // An update whose literal holds the same text inserts one triple and drops nothing.
    let update = format!(
        "INSERT DATA {{ GRAPH <urn:notes> {{ <urn:a> <urn:b> {} }} }}",
        oxigraph::model::Literal::new_simple_literal(hostile)
    );
    assert_eq!(
        s.update(&update, Some(TOKEN)).status(),
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        s.store.replay(&s.tree.booking, None).unwrap(),
        before,
        "other sessions intact"
    );
    let ids: Vec<SessionId> = s
        .store
        .list()
        .unwrap()
        .into_iter()
        .map(|i| i.session)
        .collect();
    assert_eq!(
        ids.len(),
        6,
        "the demo's 4, the fork, the new session: {ids:?}"
    );
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Every pair of quads, a hundred times: slow (seconds in a debug build), yet under the
/// cost the server refuses up front on the demo store.
const EXPENSIVE: &str =
    "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . VALUES ?x { %VALUES% } }";

fn expensive() -> String {
    let values: Vec<String> = (1..=100).map(|i| i.to_string()).collect();
    EXPENSIVE.replace("%VALUES%", &values.join(" "))
}

/// A four-way cross product of every quad: refused before it runs.
const ATTACK: &str = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?a {?s1 ?p1 ?o1} GRAPH ?b {?s2 ?p2 ?o2} GRAPH ?c {?s3 ?p3 ?o3} GRAPH ?d {?s4 ?p4 ?o4} }";

/// This process's resident memory, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

#[test]
fn the_cross_product_attack_is_refused_and_rest_and_writes_keep_answering() {
    let s = Arc::new(start(ServerConfig {
        query_timeout: Duration::from_millis(300),
        ..with_token()
    }));
    let before = rss();
    let started = std::time::Instant::now();
    // Eight at once, unauthenticated, by GET; the SELECT * form; a written update.
    let attacks: Vec<_> = (0..8)
        .map(|i| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                let query = if i % 2 == 0 {
                    ATTACK.to_string()
                } else {
                    ATTACK.replace("(COUNT(*) AS ?n)", "*")
                };
                let r = s.get(&format!("/sparql?query={}", urlencode(&query)), "");
                (r.status(), r.text().unwrap())
            })
        })
        .collect();
    for attack in attacks {
        let (status, body) = attack.join().unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.contains("cross product"), "{body}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let before_update = s.quads();
    let insert = ATTACK.replace(
        "SELECT (COUNT(*) AS ?n) WHERE",
        "INSERT { GRAPH <urn:x> { ?s1 ?p1 ?s2 } } WHERE",
    );
    let r = s.update(&insert, Some(TOKEN));
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(s.quads(), before_update, "nothing written");

    // Slow queries that pass the check fill every query slot; REST and writes have
    // slots of their own and answer within a second.
    let slow: Vec<_> = (0..8)
        .map(|_| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || s.sparql(&expensive(), "").status())
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    for i in 0..3 {
        let t = std::time::Instant::now();
        let r = s.get("/sessions", "");
        assert_eq!(r.status(), StatusCode::OK);
        let created = s.post_json(
            "/sessions",
            Some(TOKEN),
            json!({ "id": format!("during-{i}") }),
        );
        assert_eq!(created.status(), StatusCode::CREATED);
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "REST took {:?}",
            t.elapsed()
        );
    }
    for q in slow {
        let status = q.join().unwrap();
        assert!(
            [StatusCode::SERVICE_UNAVAILABLE, StatusCode::OK].contains(&status),
            "{status}"
        );
    }
    let grown = rss().saturating_sub(before);
    assert!(grown < 200 << 20, "memory grew by {grown} bytes");
    eprintln!("the attack: memory grew by {} MB", grown >> 20);
}

#[test]
fn a_query_past_the_limit_gets_an_error_status_and_the_server_keeps_answering() {
    let s = start(ServerConfig {
        query_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    });
    let started = std::time::Instant::now();
    let r = s.sparql(&expensive(), "application/sparql-results+json");
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = r
        .json()
        .expect("a whole JSON error, not a truncated result");
    assert_eq!(body["error"], "timeout");
    assert!(started.elapsed() < Duration::from_secs(30));
    let r = s.sparql("ASK { ?s ?p ?o }", "");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().unwrap()["boolean"], true);
}

#[test]
fn queries_over_the_cap_wait_in_line_and_past_the_line_get_503_with_retry_after() {
    let s = Arc::new(start(ServerConfig {
        max_concurrent_queries: 1,
        max_queued: 1,
        queue_wait: Duration::from_secs(60),
        query_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    }));
    let slow = {
        let s = Arc::clone(&s);
        std::thread::spawn(move || s.sparql(&expensive(), "").status())
    };
    // Wait (through /metrics, which takes no slot) until the slow query holds the slot.
    let metrics_show = |needle: &str| {
        (0..500).any(|_| {
            let seen = s.get("/metrics", "").text().unwrap().contains(needle);
            if !seen {
                std::thread::sleep(Duration::from_millis(5));
            }
            seen
        })
    };
    assert!(
        metrics_show("forktrail_queries_running 1"),
        "the slow query started"
    );
    // The next one waits in line for the slot...
    let waiting = {
        let s = Arc::clone(&s);
        std::thread::spawn(move || s.sparql("ASK { ?s ?p ?o }", "").status())
    };
    assert!(
        metrics_show("forktrail_lane_waiting{lane=\"query\"} 1"),
        "the second query waits in line"
    );
    // ...and one more finds the line full: refused at once.
    let refused = s.sparql("ASK { ?s ?p ?o }", "");
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(refused.json::<Value>().unwrap()["error"], "busy");
    assert_eq!(
        slow.join().unwrap(),
        StatusCode::SERVICE_UNAVAILABLE,
        "the slow one timed out"
    );
    assert_eq!(
        waiting.join().unwrap(),
        StatusCode::OK,
        "then the waiting one ran"
    );
}

#[test]
fn a_third_party_sparql_client_selects_asks_and_constructs() {
    let s = start(ServerConfig::default());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sparql_client.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(s.url("/sparql"))
        .arg(s.tree.booking.as_str())
        .arg(s.tree.root.as_str())
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("select: 3 levels, root first"), "{stdout}");
    assert!(stdout.contains("ask: True"), "{stdout}");
    assert!(stdout.contains("construct: 3 forks"), "{stdout}");
    assert!(stdout.contains("default construct: 3 forks"), "{stdout}");
    assert!(stdout.contains("default describe: 2 triples"), "{stdout}");
    assert!(
        stdout.contains("sparqlstore construct: 3 forks"),
        "{stdout}"
    );
    assert!(stdout.contains("sparqlstore ask: True"), "{stdout}");
    assert!(stdout.contains("csv ask refused: 406"), "{stdout}");
}

#[test]
fn a_dry_run_sent_as_a_form_still_forks_nothing_and_an_empty_token_protects_nothing() {
    let s = start(with_token());
    let root = s.tree.root.to_string();
    let before = s.quads();
    // A client that forgets the JSON content type still gets its options read.
    let r = s
        .http
        .post(s.url(&format!("/sessions/{root}/fork")))
        .bearer_auth(TOKEN)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(r#"{"dry_run": true}"#)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(before, s.quads(), "a dry run wrote nothing");
    let r = s
        .http
        .post(s.url(&format!("/sessions/{root}/fork")))
        .bearer_auth(TOKEN)
        .body("dry_run=true")
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(before, s.quads());
    // An empty configured token means read-only, not "no header needed".
    let open = start(ServerConfig {
        token: Some(String::new()),
        ..ServerConfig::default()
    });
    let r = open
        .http
        .post(open.url("/sessions"))
        .json(&json!({}))
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = open
        .http
        .post(open.url("/sparql"))
        .form(&[(
            "update",
            "INSERT DATA { GRAPH <urn:g> { <urn:a> <urn:b> <urn:c> } }",
        )])
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
}

#[test]
fn accept_q0_refuses_a_type_and_requests_without_an_operation_are_told_so() {
    let s = start(ServerConfig::default());
    let q = "ASK { ?s ?p ?o }";
    let r = s.sparql(
        q,
        "application/sparql-results+json;q=0, application/json;q=0, */*",
    );
    assert_eq!(r.status(), StatusCode::OK);
    assert!(!content_type(&r).contains("json"), "{}", content_type(&r));
    assert_eq!(s.sparql(q, "*/*;q=0").status(), StatusCode::NOT_ACCEPTABLE);
    let r = s
        .http
        .post(s.url("/sparql"))
        .form(&[("default-graph-uri", "urn:x")])
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // A Host that is no name of this server is refused before any page is made from
    // it (DNS rebinding), and the service description never echoes the Host.
    let sd = s
        .http
        .get(s.url("/sparql"))
        .header("Host", "evil> <x")
        .send()
        .unwrap();
    assert_eq!(sd.status(), StatusCode::FORBIDDEN);
    assert_eq!(sd.json::<Value>().unwrap()["error"], "host_not_allowed");
    let sd = s.http.get(s.url("/sparql")).send().unwrap();
    let text = sd.text().unwrap();
    assert!(!text.contains("evil"), "{text}");
    assert!(
        !text.contains("SPARQL11Update"),
        "read-only servers do not advertise updates"
    );
}

#[test]
fn the_body_cap_applies_before_the_content_cap() {
    let s = start(ServerConfig {
        max_body_bytes: 16 * 1024,
        ..with_token()
    });
    let root = s.tree.root.to_string();
    let before = s.quads();
    let r = s.post_json(
        &format!("/sessions/{root}/turns"),
        Some(TOKEN),
        json!({"role": "user", "content": "x".repeat(32 * 1024)}),
    );
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(before, s.quads());
    let r = s.post_json(
        &format!("/sessions/{root}/turns"),
        Some(TOKEN),
        json!({"role": "user", "content": "x".repeat(8 * 1024)}),
    );
    assert_eq!(r.status(), StatusCode::CREATED);
}

#[test]
fn anchors_merge_diff_and_idempotent_forks_over_rest() {
    let server = start(with_token());
    let root = server.tree.root.to_string();
    let made = server.post_json(
        &format!("/sessions/{root}/anchors"),
        Some(TOKEN),
        json!({"name": "start", "state": {"step": 1}}),
    );
    assert_eq!(made.status(), 201);
    let at = made.json::<Value>().unwrap()["at_index"].as_u64().unwrap();
    let listed: Value = server
        .get(&format!("/sessions/{root}/anchors"), "application/json")
        .json()
        .unwrap();
    assert_eq!(listed[0]["name"], "start");
    assert_eq!(listed[0]["state"]["step"], 1);
    let duplicate = server.post_json(
        &format!("/sessions/{root}/anchors"),
        Some(TOKEN),
        json!({"name": "start"}),
    );
    assert_eq!(duplicate.status(), 409);

    let ask = json!({"anchor": "start", "request_id": "r-1", "summarize": true});
    let first = server.post_json(&format!("/sessions/{root}/fork"), Some(TOKEN), ask.clone());
    assert_eq!(first.status(), 201);
    let first: Value = first.json().unwrap();
    assert_eq!(first["forked_at_index"].as_u64(), Some(at));
    assert!(first["summary"].as_str().unwrap().contains("turns"));
    let retry = server.post_json(&format!("/sessions/{root}/fork"), Some(TOKEN), ask);
    assert_eq!(retry.status(), 200);
    let retry: Value = retry.json().unwrap();
    assert_eq!(
        (retry["session"].clone(), retry["reused"].clone()),
        (first["session"].clone(), json!(true))
    );
    let other = server.post_json(
        &format!("/sessions/{root}/fork"),
        Some(TOKEN),
        json!({"at": 1, "request_id": "r-1"}),
    );
    assert_eq!(other.status(), 409);

    let child = first["session"].as_str().unwrap().to_string();
    server.post_json(
        &format!("/sessions/{child}/turns"),
        Some(TOKEN),
        json!({"role": "assistant", "content": "done"}),
    );
    let before = server.quads();
    let unauthorized = server.post_json(&format!("/sessions/{child}/merge"), None, json!({}));
    assert_eq!(unauthorized.status(), 401);
    assert_eq!(server.quads(), before);
    let merged = server.post_json(&format!("/sessions/{child}/merge"), Some(TOKEN), json!({}));
    assert_eq!(merged.status(), 201);
    let merged: Value = merged.json().unwrap();
    assert_eq!(merged["reference"], format!("{child}@{at}:turns:{at}-{at}"));
    let again = server.post_json(&format!("/sessions/{child}/merge"), Some(TOKEN), json!({}));
    assert_eq!(again.status(), 409);

    let diff: Value = server
        .get(
            &format!("/sessions/{child}/diff/{root}"),
            "application/json",
        )
        .json()
        .unwrap();
    assert_eq!(diff["common_prefix"].as_u64(), Some(at));
    assert_eq!(diff["common_ancestor"], root.as_str());
    assert_eq!(diff["a_tail"][0]["content"], "done");
    let missing = server.get(&format!("/sessions/{child}/diff/nope"), "application/json");
    assert_eq!(missing.status(), 404);
}

#[test]
fn transcripts_import_and_export_over_rest() {
    let server = start(with_token());
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/openai-tools.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let post = |format: &str, token: Option<&str>, body: &str| {
        let mut r = server
            .http
            .post(server.url(&format!("/import?format={format}")))
            .body(body.to_string());
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send().unwrap()
    };
    let before = server.quads();
    assert_eq!(post("openai", None, &text).status(), 401);
    let bad = post("openai", Some(TOKEN), "{\"role\":\"user\"}\n{oops\n");
    assert_eq!(bad.status(), 400);
    assert!(bad.text().unwrap().contains("line 2"));
    assert_eq!(server.quads(), before, "refused imports write nothing");
    let made = post("openai", Some(TOKEN), &text);
    assert_eq!(made.status(), 201);
    let report: Value = made.json().unwrap();
    assert_eq!(report["turns"], 9);
    let session = report["imported"][0].as_str().unwrap();
    let exported = server.get(
        &format!("/sessions/{session}/export?format=openai"),
        "application/json",
    );
    assert_eq!(content_type(&exported), "application/json");
    let original: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(exported.json::<Value>().unwrap(), original);
    let jsonl = server.get(&format!("/sessions/{session}/export?format=jsonl"), "*/*");
    assert_eq!(jsonl.text().unwrap().lines().count(), 9);
    assert_eq!(
        server
            .get(&format!("/sessions/{session}/export?format=xml"), "*/*")
            .status(),
        400
    );
}

#[test]
fn regenerate_over_rest_answers_202_with_a_job_that_completes() {
    let stub = common::stub::start(common::stub::Mode::Echo);
    let server = start(ServerConfig {
        model_endpoints: vec![stub.url.clone()],
        ..with_token()
    });
    let root = server.tree.root.to_string();
    let body = json!({"at": 2, "model": "model-b", "endpoint": stub.url});
    let plan = server.post_json(
        &format!("/sessions/{root}/regenerate"),
        Some(TOKEN),
        json!({"at": 2, "model": "model-b", "endpoint": stub.url, "dry_run": true}),
    );
    assert_eq!(plan.status(), 200);
    assert_eq!(plan.json::<Value>().unwrap()["messages"], 2);
    assert!(stub.requests().is_empty());
    let remote = server.post_json(
        &format!("/sessions/{root}/regenerate"),
        Some(TOKEN),
        json!({"at": 2, "model": "m", "endpoint": "http://192.0.2.1/v1", "allow_remote": true}),
    );
    assert_eq!(remote.status(), 403);
    let accepted = server.post_json(&format!("/sessions/{root}/regenerate"), Some(TOKEN), body);
    assert_eq!(accepted.status(), 202);
    let job: Value = accepted.json().unwrap();
    assert_eq!(job["status"], "running");
    let id = job["job"].as_str().unwrap().to_string();
    let mut done = Value::Null;
    for _ in 0..200 {
        done = server
            .get(&format!("/jobs/{id}"), "application/json")
            .json()
            .unwrap();
        if done["status"] != "running" {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(done["status"], "complete", "{done}");
    let fork = done["fork"].as_str().unwrap();
    let replay: Value = server
        .get(&format!("/sessions/{fork}/replay"), "application/json")
        .json()
        .unwrap();
    assert_eq!(replay.as_array().unwrap().len(), 3);
    let listed: Value = server.get("/jobs", "application/json").json().unwrap();
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(
        (listed["total"].as_u64(), listed["next"].is_null()),
        (Some(1), true)
    );
    let cancel = server.post_json(&format!("/jobs/{id}/cancel"), Some(TOKEN), json!({}));
    assert_eq!(
        cancel.json::<Value>().unwrap()["status"],
        "complete",
        "a finished job stays"
    );
    assert_eq!(server.get("/jobs/nope", "application/json").status(), 404);
}

#[test]
fn service_and_load_are_refused_silent_or_not() {
    let s = start(with_token());
    for query in [
        "SELECT * WHERE { SERVICE SILENT <http://127.0.0.1:9/sparql> { ?s ?p ?o } }",
        "ASK { ?s ?p ?o FILTER NOT EXISTS { SERVICE SILENT <http://127.0.0.1:9/> { ?s ?p ?o } } }",
    ] {
        let r = s.sparql(query, "application/sparql-results+json");
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{query}");
        assert!(
            r.text().unwrap().contains("SERVICE is not allowed"),
            "{query}"
        );
    }
    let before = s.quads();
    for update in [
        "LOAD SILENT <http://127.0.0.1:9/data.ttl>",
        "LOAD <http://127.0.0.1:9/data.ttl> INTO GRAPH <urn:g>",
        "INSERT { GRAPH <urn:g> { ?s ?p ?o } } WHERE { SERVICE SILENT <http://127.0.0.1:9/> { ?s ?p ?o } }",
    ] {
        let r = s.update(update, Some(TOKEN));
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{update}");
        let body: Value = r.json().unwrap();
        assert!(
            body["message"].as_str().unwrap().contains("not allowed"),
            "{update}: {body}"
        );
    }
    assert_eq!(before, s.quads());
}

#[test]
fn construct_and_describe_come_as_rdf_xml_and_ask_refuses_csv() {
    let s = start(ServerConfig::default());
    let construct = "CONSTRUCT { ?f a <https://w3id.org/forktrail/ns#Fork> } WHERE { ?f a <https://w3id.org/forktrail/ns#Fork> }";
    for query in [construct, "DESCRIBE <urn:forktrail:agent:alice>"] {
        // What SPARQLWrapper and rdflib's SPARQLStore send by default.
        let r = s.sparql(query, "application/rdf+xml");
        assert_eq!(r.status(), StatusCode::OK, "{query}");
        assert_eq!(content_type(&r), "application/rdf+xml");
        let text = r.text().unwrap();
        assert!(text.contains("<rdf:RDF"), "{text}");
    }
    let forks = s.sparql(construct, "application/rdf+xml").text().unwrap();
    assert_eq!(forks.matches("rdf:about=").count(), 3, "{forks}");
    let ask = "ASK { ?s a <https://w3id.org/forktrail/ns#Fork> }";
    for accept in ["text/csv", "text/tab-separated-values"] {
        let r = s.sparql(ask, accept);
        assert_eq!(r.status(), StatusCode::NOT_ACCEPTABLE, "{accept}");
        let body: Value = r.json().unwrap();
        assert!(
            body["message"].as_str().unwrap().contains("SELECT only"),
            "{body}"
        );
    }
    let r = s.sparql(ask, "text/csv, application/sparql-results+json;q=0.5");
    assert_eq!(r.json::<Value>().unwrap()["boolean"], true);
    // SELECT keeps CSV.
    assert_eq!(
        content_type(&s.sparql("SELECT * WHERE { ?s ?p ?o } LIMIT 1", "text/csv")),
        "text/csv; charset=utf-8"
    );
}

#[test]
fn every_error_from_every_layer_is_json() {
    let s = start(ServerConfig {
        max_body_bytes: 1024,
        ..with_token()
    });
    let json_error = |r: Response, status: StatusCode, code: &str| {
        assert_eq!(r.status(), status);
        assert!(
            content_type(&r).starts_with("application/json"),
            "{}",
            content_type(&r)
        );
        let body: Value = r.json().unwrap();
        assert_eq!(body["error"], code, "{body}");
        assert!(!body["message"].as_str().unwrap().is_empty(), "{body}");
        body
    };
    let body = json_error(
        s.get("/no/such/route", ""),
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert!(body["message"].as_str().unwrap().contains("/no/such/route"));
    json_error(
        s.http.put(s.url("/sessions")).send().unwrap(),
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    );
    let big = "x".repeat(4096);
    let body = json_error(
        s.http
            .post(s.url("/sparql"))
            .header("Content-Type", "application/sparql-query")
            .body(big.clone())
            .send()
            .unwrap(),
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
    );
    assert!(body["message"].as_str().unwrap().contains("1024"), "{body}");
    json_error(
        s.http
            .post(s.url(&format!("/sessions/{}/fork", s.tree.root)))
            .bearer_auth(TOKEN)
            .header("Content-Type", "application/json")
            .body(big)
            .send()
            .unwrap(),
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
    );
}

#[test]
fn a_body_that_is_not_a_json_object_is_refused_and_forks_nothing() {
    let s = start(with_token());
    let before = s.quads();
    for body in ["[]", "null", "3", "\"at\""] {
        let r = s
            .http
            .post(s.url(&format!("/sessions/{}/fork", s.tree.root)))
            .bearer_auth(TOKEN)
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{body}");
        assert!(
            r.text().unwrap().contains("must be a JSON object"),
            "{body}"
        );
    }
    assert_eq!(before, s.quads());
}

#[test]
fn dot_ids_and_huge_indices_are_refused_by_name_not_by_accident() {
    let s = start(with_token());
    let r = s.post_json("/sessions", Some(TOKEN), json!({"id": ".."}));
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().unwrap().contains("only of dots"));
    // Percent-encoded dots reach the route (sent as written: URL parsers would rewrite
    // them), and are not an id either.
    let before = s.quads();
    let reply = raw_request(
        &s,
        &format!(
            "DELETE /sessions/%2e%2e?cascade=true HTTP/1.1\r\nHost: localhost\r\n\
             Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
        ),
    );
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert!(reply.contains("\"invalid_id\""), "{reply}");
    assert_eq!(before, s.quads());
    let r = s.get(
        &format!(
            "/sessions/{}/replay?up_to=18446744073709551615",
            s.tree.root
        ),
        "",
    );
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let message = r.json::<Value>().unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("index 18446744073709551615"), "{message}");
}

#[test]
fn shipped_queries_are_listed_and_run_by_name_with_bound_inputs() {
    let s = start(ServerConfig::default());
    let list: Value = s.get("/queries", "").json().unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"audit-turn-origin"), "{names:?}");
    assert!(
        !names.contains(&"turn-records"),
        "the read path's own: {names:?}"
    );
    let origin = list
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "audit-turn-origin")
        .unwrap();
    assert_eq!(origin["inputs"], json!(["id", "at"]));
    assert!(origin["help"]
        .as_str()
        .unwrap()
        .starts_with("Audit: which agent"));
    let r = s.get(
        &format!("/queries/audit-turn-origin?id={}&at=3", s.tree.booking),
        "text/csv",
    );
    assert_eq!(r.status(), StatusCode::OK);
    let csv = r.text().unwrap();
    assert_eq!(csv.lines().count(), 2, "one owner for one turn: {csv}");
    assert!(csv.contains("search_trains"), "{csv}");
    let r = s.get("/queries/audit-turn-origin?model=x", "");
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().unwrap().contains("takes id, at"));
    let r = s.get("/queries/no-such-query", "");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // A hostile value is a value.
    let r = s.get(
        "/queries/fork-chain?id=x%22%20%7D%20DROP%20ALL%20%23",
        "application/sparql-results+json",
    );
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().unwrap()["results"]["bindings"], json!([]));
}

#[test]
fn import_tells_the_format_from_the_body_and_delete_and_detach_preview() {
    let s = start(with_token());
    let chat = r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]"#;
    let r = s
        .http
        .post(s.url("/import"))
        .bearer_auth(TOKEN)
        .body(chat)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(r.json::<Value>().unwrap()["turns"], 2);
    let r = s
        .http
        .post(s.url("/import"))
        .bearer_auth(TOKEN)
        .body("Dear diary,")
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().unwrap().contains("cannot tell the format"));

    let before = s.quads();
    let root = s.tree.root.to_string();
    let r = s
        .http
        .delete(s.url(&format!("/sessions/{root}?cascade=true&dry_run=true")))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let plan: Value = r.json().unwrap();
    assert_eq!(plan["would_delete"].as_array().unwrap().len(), 4);
    assert!(plan.get("deleted").is_none(), "a dry run deletes nothing");
    let r = s.post_json(
        &format!("/sessions/{}/detach", s.tree.booking),
        Some(TOKEN),
        json!({"dry_run": true}),
    );
    let plan: Value = r.json().unwrap();
    assert_eq!(plan["copied_turns"], 6, "{plan}");
    assert_eq!(before, s.quads(), "dry runs write nothing");
}

#[test]
fn stalled_and_vanishing_clients_neither_block_others_nor_half_apply_a_write() {
    use std::io::{Read, Write};
    let s = start(with_token());
    let addr = s.base.trim_start_matches("http://").to_string();
    let before = s.quads();
    let rss_before = rss();
    // Twenty clients that send half a write and stall.
    let stalled: Vec<std::net::TcpStream> = (0..20)
        .map(|i| {
            let mut c = std::net::TcpStream::connect(&addr).unwrap();
            let head = format!(
                "POST /sessions/{}/turns HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\
                 Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"role\": \"user\", \"content\": \"stalled {i}",
                s.tree.root
            );
            c.write_all(head.as_bytes()).unwrap();
            c
        })
        .collect();
    // Others are answered at once, reads and writes.
    let t = std::time::Instant::now();
    assert_eq!(s.get("/health", "").status(), StatusCode::OK);
    let r = s.post_json(
        &format!("/sessions/{}/turns", s.tree.budget),
        Some(TOKEN),
        json!({"role": "user", "content": "while others stall"}),
    );
    assert_eq!(r.status(), StatusCode::CREATED);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    // The stalled writers go away mid-body: none of their turns exists.
    drop(stalled);
    // Clients that read a few bytes of a large answer and hang up.
    for _ in 0..20 {
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        let request = format!(
            "GET /sessions/{}/export?format=trig HTTP/1.1\r\nHost: localhost\r\n\r\n",
            s.tree.booking
        );
        c.write_all(request.as_bytes()).unwrap();
        let mut first = [0u8; 16];
        c.read_exact(&mut first).unwrap();
        assert!(first.starts_with(b"HTTP/1.1 200"));
    }
    std::thread::sleep(Duration::from_millis(200));
    let mut after = s.quads();
    let added: Vec<&String> = after.iter().filter(|q| !before.contains(q)).collect();
    assert!(
        added.iter().all(|q| !q.contains("stalled")),
        "a stalled write was applied: {added:?}"
    );
    assert!(added.iter().any(|q| q.contains("while others stall")));
    after.retain(|q| before.contains(q));
    assert_eq!(after, before, "nothing else changed");
    assert_eq!(s.get("/sessions", "").status(), StatusCode::OK);
    let grown = rss().saturating_sub(rss_before);
    assert!(grown < 100 << 20, "memory grew by {grown} bytes");
}

#[test]
fn a_flood_of_anonymous_list_pages_holds_no_authenticated_append_past_the_queue_wait() {
    // On disk, as served: the catalog's commits are real file writes there.
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path().join("store")).unwrap());
    let tree = demo::build(&store).unwrap();
    // A second's wait in line: a write is answered within it or refused with 503.
    let config = ServerConfig {
        queue_wait: Duration::from_secs(1),
        ..with_token()
    };
    let wait = config.queue_wait;
    let base = format!(
        "http://{}",
        common::serve_in_process(Arc::clone(&store), config)
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pages = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // Four times as many anonymous readers as the read lane has slots, each asking for
    // the session list again as soon as it has one.
    let flood: Vec<_> = (0..32)
        .map(|_| {
            let (stop, pages, base) = (Arc::clone(&stop), Arc::clone(&pages), base.clone());
            std::thread::spawn(move || {
                let http = Client::builder()
                    .timeout(Duration::from_secs(120))
                    .build()
                    .unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let r = http.get(format!("{base}/")).send().unwrap();
                    let status = r.status();
                    assert!(
                        [StatusCode::OK, StatusCode::SERVICE_UNAVAILABLE].contains(&status),
                        "{status}: {}",
                        r.text().unwrap()
                    );
                    pages.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        })
        .collect();
    let http = Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let served = || pages.load(std::sync::atomic::Ordering::Relaxed);
    while served() < 16 {
        std::thread::yield_now();
    }
    // Appends one after another, for as long as it takes the flood to be served 200
    // more pages (and 40 appends at least).
    let first = served();
    let mut took = Vec::new();
    for n in 0.. {
        if n >= 40 && served() >= first + 200 {
            break;
        }
        let started = std::time::Instant::now();
        let r = http
            .post(format!("{base}/sessions/{}/turns", tree.booking))
            .bearer_auth(TOKEN)
            .json(&json!({"role": "user", "content": format!("append {n} under the flood")}))
            .send()
            .unwrap();
        took.push(started.elapsed());
        assert_eq!(
            r.status(),
            StatusCode::CREATED,
            "append {n}: {}",
            r.text().unwrap()
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in flood {
        t.join().unwrap();
    }
    took.sort();
    let slowest = *took.last().unwrap();
    eprintln!(
        "{} appends under {} list pages: median {:?}, slowest {slowest:?}",
        took.len(),
        served() - first,
        took[took.len() / 2],
    );
    // The server's contract: a write is answered before its wait in line runs out.
    assert!(slowest < wait, "the slowest append took {slowest:?}");
}
