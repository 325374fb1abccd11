//! What-if comparisons through every surface but the CLI: `POST /sessions/{id}/compare`
//! and `GET /comparisons/{id}` over real HTTP, the MCP tools `compare_models` and
//! `comparison` in process, and the shipped `queries/comparison-arms.rq`. Each must give
//! the figures `Store::comparison` gives (steps, tokens, latency, cost, status), write
//! nothing for a dry run, and refuse writes without the token or `--allow-writes`.

use crate::common;

use common::stub::{self, completion, Reply};
use common::*;
use forktrail::mcp::{McpConfig, McpServer};
use forktrail::{queries, CompareOptions, Comparison, Store};
use oxigraph::model::{Literal, Term};
use oxigraph::sparql::{QueryResults, QuerySolution};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Two models behind one stub. `model-a` replays the recording (both tool calls, then
/// the answers), reporting usage; `model-b` answers in words at once, reporting usage
/// on its first call only, so its token totals are not measured.
fn two_models(request: &Value, _: usize) -> Reply {
    let model = request["model"].as_str().unwrap_or_default();
    if model != "model-b" {
        return travel::replay(model, request);
    }
    let body = if travel::answered(request) == 0 {
        completion(model, Some("Probably mild."), &[], (90, 4, 0), "stop")
    } else {
        let mut body = completion(model, Some("About 50 EUR."), &[], (0, 0, 0), "stop");
        body.as_object_mut().unwrap().remove("usage");
        body
    };
    Reply::ok(body)
}

/// The JSON options of a two-arm comparison from index 2, `model-a` priced.
fn two_arms(endpoint: &str) -> Value {
    json!({
        "at": 2,
        "arms": [
            {"name": "replay", "model": "model-a", "endpoint": endpoint},
            {"name": "terse", "model": "model-b", "endpoint": endpoint}
        ],
        "prices": {"model-a": {"input": 3.0, "output": 15.0, "cached": 0.3}}
    })
}

fn options(body: &Value) -> CompareOptions {
    serde_json::from_value(body.clone()).unwrap()
}

/// The rows of `comparison-arms.rq` for comparison `id`.
fn arm_rows(s: &Store, id: &str) -> Vec<QuerySolution> {
    let bound: Term = Literal::from(id).into();
    match s
        .query_named(&queries::COMPARISON_ARMS, &[("comparison", bound)])
        .unwrap()
    {
        QueryResults::Solutions(rows) => rows.map(Result::unwrap).collect(),
        _ => panic!("comparison-arms is a SELECT"),
    }
}

fn cell(row: &QuerySolution, var: &str) -> Option<String> {
    match row.get(var) {
        Some(Term::Literal(l)) => Some(l.value().to_string()),
        Some(other) => Some(other.to_string()),
        None => None,
    }
}

fn number(row: &QuerySolution, var: &str) -> Option<u64> {
    cell(row, var).map(|v| v.parse().unwrap())
}

fn dollars(row: &QuerySolution, var: &str) -> Option<f64> {
    cell(row, var).map(|v| v.parse().unwrap())
}

fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() < 1e-9,
        (None, None) => true,
        _ => false,
    }
}

/// The query's rows say what `Store::comparison` says, arm by arm (the baseline is no
/// run, so no row).
fn query_agrees(s: &Store, c: &Comparison) {
    let rows = arm_rows(s, &c.comparison);
    let runs: Vec<_> = c.arms.iter().filter(|a| !a.baseline).collect();
    assert_eq!(rows.len(), runs.len(), "one row per run");
    for (n, (row, arm)) in rows.iter().zip(&runs).enumerate() {
        let f = &arm.figures;
        let which = &arm.name;
        assert_eq!(cell(row, "comparison").as_deref(), Some(&*c.comparison));
        assert_eq!(number(row, "armIndex"), Some(n as u64 + 1), "{which}");
        assert_eq!(cell(row, "armName").as_deref(), Some(&**which));
        assert_eq!(cell(row, "model"), arm.model, "{which}");
        assert_eq!(
            cell(row, "status").as_deref(),
            Some(arm.status.as_str()),
            "{which}"
        );
        assert_eq!(number(row, "steps"), Some(f.steps), "{which}");
        assert_eq!(number(row, "inputTokens"), f.input_tokens, "{which}");
        assert_eq!(number(row, "outputTokens"), f.output_tokens, "{which}");
        assert_eq!(number(row, "cachedTokens"), f.cached_tokens, "{which}");
        assert_eq!(number(row, "latencyMs"), f.latency_ms, "{which}");
        // An arm that made no call cost nothing, which the query says even where the
        // library calls the cost unpriced (the prices are not stored as RDF).
        let cost = match f.steps {
            0 => Some(f.cost_usd.unwrap_or(0.0)),
            _ => f.cost_usd,
        };
        assert!(
            close(dollars(row, "costUsd"), cost),
            "{which}: {:?} vs {:?}",
            cell(row, "costUsd"),
            f.cost_usd
        );
        let charged: f64 = arm.calls.iter().map(|c| c.figures.charged_usd).sum();
        assert!(close(dollars(row, "chargedUsd"), Some(charged)), "{which}");
        assert_eq!(cell(row, "runId"), arm.run, "{which}");
        assert_eq!(
            cell(row, "forkId"),
            arm.session.as_ref().map(ToString::to_string),
            "{which}"
        );
    }
}

/// Whether two JSON values are the same, numbers within a rounding error (a parser may
/// read a float's shortest text one unit in the last place off).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-12 * x.abs().max(y.abs()).max(1.0)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// `shown` (a surface's JSON) is the library's comparison.
fn shows(shown: &Value, library: &Comparison) {
    let library = serde_json::to_value(library).unwrap();
    assert!(
        same_json(shown, &library),
        "shown:\n{shown:#}\nlibrary:\n{library:#}"
    );
}

/// What the stub's script makes of the two arms: the figures every surface must show.
fn expected_figures(c: &Comparison) {
    assert_eq!(c.status, "ended");
    let (replay, terse) = (&c.arms[1], &c.arms[2]);
    assert_eq!(replay.status, "complete", "{:?}", replay.detail);
    assert_eq!(replay.figures.steps, 4);
    assert_eq!(replay.figures.input_tokens, Some(100 + 120 + 140 + 160));
    assert_eq!(replay.figures.output_tokens, Some(10 + 8 + 12 + 6));
    assert_eq!(replay.figures.cached_tokens, Some(100));
    let cost = ((520.0 - 100.0) * 3.0 + 100.0 * 0.3 + 36.0 * 15.0) / 1e6;
    assert!(close(replay.figures.cost_usd, Some(cost)));
    assert_eq!(terse.status, "complete", "{:?}", terse.detail);
    assert_eq!(terse.figures.steps, 2);
    assert_eq!(
        terse.figures.input_tokens, None,
        "one call reported no usage"
    );
    assert_eq!(terse.figures.cost_usd, None, "model-b has no price");
}

// ---------------------------------------------------------------------------------
// The shipped query

#[test]
fn the_query_gives_each_arms_figures_as_the_library_does_counting_each_call_once() {
    for s in stores() {
        let root = travel::session(&s, "trip");
        let stub = stub::scripted(two_models);
        let c = s.compare(&root, &options(&two_arms(&stub.url))).unwrap();
        expected_figures(&c);
        query_agrees(&s, &c);
        // Unbound, it lists every comparison's arms; a second comparison adds its own.
        let mut again = options(&two_arms(&stub.url));
        again.again = true;
        let second = s.compare(&root, &again).unwrap();
        query_agrees(&s, &second);
        let QueryResults::Solutions(all) = s.query_named(&queries::COMPARISON_ARMS, &[]).unwrap()
        else {
            panic!("a SELECT")
        };
        assert_eq!(all.count(), 4, "{}", s.kind);
    }
}

#[test]
fn a_comparison_id_that_is_sparql_is_only_a_value() {
    let s = Store::in_memory().unwrap();
    let root = travel::session(&s, "trip");
    let stub = stub::scripted(two_models);
    s.compare(&root, &options(&two_arms(&stub.url))).unwrap();
    let before = quads(&s);
    for hostile in ["x\" } ; DROP ALL ; #", "x> } ; DROP ALL ; #", "' OR '1'='1"] {
        assert!(arm_rows(&s, hostile).is_empty());
    }
    assert_eq!(quads(&s), before);
}

// ---------------------------------------------------------------------------------
// MCP

fn mcp(store: &Arc<Store>, allow_writes: bool) -> McpServer {
    let config = McpConfig {
        allow_writes,
        allow_remote_models: false,
        ..McpConfig::default()
    };
    McpServer::new(Arc::clone(store), config)
}

fn call(server: &McpServer, tool: &str, arguments: Value) -> (bool, Value, String) {
    let result = &mcp_result(server, tool, arguments);
    let text = result["content"][0]["text"].as_str().unwrap().to_string();
    let value = serde_json::from_str(&text).unwrap_or(Value::Null);
    (result["isError"].as_bool().unwrap(), value, text)
}

/// [`two_models`], each answer 20 s late.
fn slow_two_models() -> stub::Stub {
    stub::scripted(|request, n| Reply {
        delay: Some(Duration::from_secs(20)),
        ..two_models(request, n)
    })
}

/// The status of each arm but the baseline of a comparison as JSON.
fn run_statuses(comparison: &Value) -> Vec<&str> {
    comparison["arms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["baseline"] == false)
        .map(|a| a["status"].as_str().unwrap())
        .collect()
}

/// Polls the `comparison` tool until the comparison has ended.
fn mcp_settled(server: &McpServer, id: &str) -> Value {
    for _ in 0..600 {
        let (error, value, text) = call(server, "comparison", json!({ "id": id }));
        assert!(!error, "{text}");
        if value["status"] != "running" {
            return value;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("comparison {id} still running after 30 s");
}

fn with_session(arguments: &Value) -> Value {
    let mut arguments = arguments.clone();
    arguments["session"] = json!("trip");
    arguments
}

#[test]
fn compare_models_runs_on_its_own_thread_and_the_comparison_tool_shows_the_librarys_figures() {
    let store = Arc::new(Store::in_memory().unwrap());
    let root = travel::session(&store, "trip");
    let stub = stub::scripted(two_models);
    let server = mcp(&store, true);
    let arguments = with_session(&two_arms(&stub.url));
    // A dry run: the plan, and nothing written.
    let before = quads(&store);
    let mut dry = arguments.clone();
    dry["dry_run"] = json!(true);
    let (error, plan, text) = call(&server, "compare_models", dry);
    assert!(!error, "{text}");
    assert_eq!(plan["arms"].as_array().unwrap().len(), 2);
    assert_eq!(plan["at"], 2);
    assert_eq!(quads(&store), before);
    assert!(stub.requests().is_empty(), "a dry run calls no model");
    // The comparison comes back at once, running; its runs go on.
    let (error, begun, text) = call(&server, "compare_models", arguments.clone());
    assert!(!error, "{text}");
    assert_eq!(begun["status"], "running");
    let id = begun["comparison"].as_str().unwrap().to_string();
    let done = mcp_settled(&server, &id);
    let library = store.comparison(&id).unwrap();
    expected_figures(&library);
    shows(&done, &library);
    query_agrees(&store, &library);
    // A run's id names its comparison too.
    let run = library.arms[1].run.clone().unwrap();
    let (_, by_run, _) = call(&server, "comparison", json!({ "id": run }));
    assert_eq!(by_run["comparison"], json!(id));
    // The same request again is the same comparison, and calls no model.
    let calls = stub.requests().len();
    let (error, reused, _) = call(&server, "compare_models", arguments);
    assert!(!error);
    assert_eq!(
        (reused["comparison"].as_str(), reused["reused"].as_bool()),
        (Some(&*id), Some(true))
    );
    assert_eq!(stub.requests().len(), calls);
    assert_eq!(root.as_str(), library.session.as_str());
}

#[test]
fn compare_models_refusals_are_worded_as_the_engine_words_them() {
    let store = Arc::new(Store::in_memory().unwrap());
    let root = travel::session(&store, "trip");
    let stub = stub::scripted(two_models);
    let before = quads(&store);
    // Read-only unless started with --allow-writes; reading a comparison is not a write.
    let (error, _, text) = call(
        &mcp(&store, false),
        "compare_models",
        with_session(&two_arms(&stub.url)),
    );
    assert!(error);
    assert_eq!(
        text,
        "compare_models writes to the store, and this MCP server is read-only (start it \
         with `forktrail mcp --allow-writes`)"
    );
    let (error, _, text) = call(&mcp(&store, false), "comparison", json!({"id": "nope"}));
    assert!(error);
    assert_eq!(
        text,
        store.comparison("nope").unwrap_err().to_string(),
        "read tools run without --allow-writes"
    );
    let server = mcp(&store, true);
    // A fork point past the end, and an unknown argument of an arm.
    let mut late = with_session(&two_arms(&stub.url));
    late["at"] = json!(99);
    let (error, _, text) = call(&server, "compare_models", late);
    assert!(error);
    let mut direct = options(&two_arms(&stub.url));
    direct.at = 99;
    let direct = store.begin_comparison(&root, &direct).unwrap_err();
    assert_eq!(text, direct.to_string());
    let (error, _, text) = call(
        &server,
        "compare_models",
        json!({"session": "trip", "at": 2, "arms": [{"model": "m", "colour": 1}]}),
    );
    assert!(error && text.contains("unknown field `colour`"), "{text}");
    // An endpoint off this machine needs a server that allows it.
    let (error, _, text) = call(
        &server,
        "compare_models",
        json!({"session": "trip", "at": 2, "allow_remote": true, "budget_usd": 1,
               "arms": [{"model": "m", "endpoint": "http://example.com/v1"}]}),
    );
    assert!(error && text.contains("--allow-remote-models"), "{text}");
    assert_eq!(quads(&store), before, "nothing refused wrote anything");
}

#[test]
fn the_comparison_tools_are_listed_with_schemas_and_hints() {
    let store = Arc::new(Store::in_memory().unwrap());
    let tools = serde_json::to_value(mcp(&store, false).tools()).unwrap();
    let tools = tools.as_array().unwrap();
    let tool = |name: &str| tools.iter().find(|t| t["name"] == name).unwrap().clone();
    let compare = tool("compare_models");
    let schema = &compare["inputSchema"];
    assert_eq!(schema["required"], json!(["session", "at", "arms"]));
    for argument in [
        "session",
        "at",
        "arms",
        "max_steps",
        "prices",
        "budget_usd",
        "allow_remote",
        "again",
        "parallel",
        "dry_run",
    ] {
        assert!(schema["properties"].get(argument).is_some(), "{argument}");
    }
    assert_eq!(
        schema["properties"]["arms"]["items"]["required"],
        json!(["model"])
    );
    assert_eq!(compare["annotations"]["readOnlyHint"], false);
    assert_eq!(compare["annotations"]["openWorldHint"], true);
    let comparison = tool("comparison");
    assert_eq!(comparison["inputSchema"]["required"], json!(["id"]));
    assert_eq!(comparison["annotations"]["readOnlyHint"], true);
}

#[test]
fn cancel_job_stops_a_comparisons_running_runs() {
    let store = Arc::new(Store::in_memory().unwrap());
    travel::session(&store, "trip");
    let slow = slow_two_models();
    let server = mcp(&store, true);
    let (error, begun, text) = call(
        &server,
        "compare_models",
        with_session(&two_arms(&slow.url)),
    );
    assert!(!error, "{text}");
    let id = begun["comparison"].as_str().unwrap();
    let (error, cancelled, text) = call(&server, "cancel_job", json!({ "job": id }));
    assert!(!error, "{text}");
    assert_eq!(run_statuses(&cancelled), ["cancelled", "cancelled"]);
    let done = mcp_settled(&server, id);
    assert_eq!(done["status"], "ended");
    query_agrees(&store, &store.comparison(id).unwrap());
}

// ---------------------------------------------------------------------------------
// REST

#[cfg(feature = "server")]
mod rest {
    use super::*;
    use forktrail::server::ServerConfig;
    use reqwest::blocking::Response;
    use reqwest::StatusCode;

    const TOKEN: &str = "s3cret-token";

    use common::server::Server;

    /// A server of a store holding the travel-agent session `trip`.
    fn start(config: ServerConfig) -> Server {
        let store = Arc::new(Store::in_memory().unwrap());
        travel::session(&store, "trip");
        Server::start(store, config)
    }

    fn with_token() -> ServerConfig {
        ServerConfig {
            token: Some(TOKEN.into()),
            ..ServerConfig::default()
        }
    }

    /// A server with the token that offers `stub` as its model endpoint.
    fn offering(stub: &stub::Stub) -> ServerConfig {
        ServerConfig {
            model_endpoints: vec![stub.url.clone()],
            ..with_token()
        }
    }

    /// Polls `GET /comparisons/{id}` until the comparison has ended.
    fn settled(s: &Server, id: &str) -> Value {
        for _ in 0..600 {
            let r = s.get(&format!("/comparisons/{id}"), "*/*");
            assert_eq!(r.status(), StatusCode::OK);
            let body: Value = r.json().unwrap();
            if body["status"] != "running" {
                return body;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("comparison {id} still running after 30 s");
    }

    fn error_code(r: Response) -> (StatusCode, String) {
        let status = r.status();
        let body: Value = r.json().unwrap();
        assert!(body["message"].is_string(), "{body}");
        (status, body["error"].as_str().unwrap().to_string())
    }

    #[test]
    fn compare_answers_202_and_the_comparison_ends_with_the_librarys_figures() {
        let stub = stub::scripted(two_models);
        let s = start(offering(&stub));
        let body = two_arms(&stub.url);
        let r = s.post_json("/sessions/trip/compare", Some(TOKEN), &body);
        assert_eq!(r.status(), StatusCode::ACCEPTED);
        let begun: Value = r.json().unwrap();
        assert_eq!(begun["status"], "running");
        assert_eq!(
            begun["arms"].as_array().unwrap().len(),
            3,
            "the baseline and two"
        );
        let id = begun["comparison"].as_str().unwrap().to_string();
        let done = settled(&s, &id);
        let library = s.store.comparison(&id).unwrap();
        expected_figures(&library);
        shows(&done, &library);
        query_agrees(&s.store, &library);
        // The shipped query over HTTP, bound from the query string.
        let r = s
            .http
            .get(s.url(&format!("/queries/comparison-arms?comparison={id}")))
            .header("Accept", "application/sparql-results+json")
            .send()
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let rows: Value = r.json().unwrap();
        let rows = rows["results"]["bindings"].as_array().unwrap().clone();
        let steps: Vec<&str> = rows
            .iter()
            .map(|row| row["steps"]["value"].as_str().unwrap())
            .collect();
        assert_eq!(steps, ["4", "2"]);
        assert!(
            rows[1].get("inputTokens").is_none(),
            "not measured: unbound"
        );
        // Listed, and the same request again is the same comparison (200, no call).
        let listed: Value = s.get("/comparisons", "*/*").json().unwrap();
        assert!(listed["comparisons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["comparison"] == json!(id)));
        let calls = stub.requests().len();
        let r = s.post_json("/sessions/trip/compare", Some(TOKEN), &body);
        assert_eq!(r.status(), StatusCode::OK);
        let reused: Value = r.json().unwrap();
        assert_eq!(
            (reused["comparison"].as_str(), reused["reused"].as_bool()),
            (Some(&*id), Some(true))
        );
        assert_eq!(stub.requests().len(), calls);
        // Cancelling an ended comparison changes nothing.
        let before = quads(&s.store);
        let r = s.post_json(&format!("/comparisons/{id}/cancel"), Some(TOKEN), json!({}));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(quads(&s.store), before);
    }

    #[test]
    fn a_dry_run_answers_the_plan_and_writes_nothing() {
        let stub = stub::scripted(two_models);
        let s = start(offering(&stub));
        let mut body = two_arms(&stub.url);
        body["dry_run"] = json!(true);
        let before = quads(&s.store);
        let r = s.post_json("/sessions/trip/compare", Some(TOKEN), &body);
        assert_eq!(r.status(), StatusCode::OK);
        let plan: Value = r.json().unwrap();
        let library = s
            .store
            .plan_comparison(&sid("trip"), &options(&body))
            .unwrap();
        assert!(same_json(&plan, &serde_json::to_value(&library).unwrap()));
        assert_eq!(quads(&s.store), before);
        assert!(stub.requests().is_empty());
    }

    #[test]
    fn writes_need_the_token_and_refusals_change_nothing() {
        let stub = stub::scripted(two_models);
        let s = start(offering(&stub));
        let body = two_arms(&stub.url);
        let before = quads(&s.store);
        let r = s.post_json("/sessions/trip/compare", None, &body);
        assert_eq!(
            error_code(r),
            (StatusCode::UNAUTHORIZED, "unauthorized".into())
        );
        let r = s.post_json("/sessions/trip/compare", Some("wrong"), &body);
        assert_eq!(
            error_code(r),
            (StatusCode::UNAUTHORIZED, "unauthorized".into())
        );
        let r = s.post_json("/comparisons/anything/cancel", None, json!({}));
        assert_eq!(
            error_code(r),
            (StatusCode::UNAUTHORIZED, "unauthorized".into())
        );
        // Endpoints the server does not offer are refused, on this machine too (the
        // server's key could go there).
        let elsewhere = stub::scripted(two_models);
        let r = s.post_json(
            "/sessions/trip/compare",
            Some(TOKEN),
            two_arms(&elsewhere.url),
        );
        assert_eq!(
            error_code(r),
            (StatusCode::FORBIDDEN, "endpoint_not_allowed".into())
        );
        assert!(elsewhere.requests().is_empty());
        // Remote endpoints only on a server that allows them.
        let remote = json!({"at": 2, "allow_remote": true, "budget_usd": 1,
                            "arms": [{"model": "m", "endpoint": "http://example.com/v1"}]});
        let r = s.post_json("/sessions/trip/compare", Some(TOKEN), &remote);
        assert_eq!(
            error_code(r),
            (StatusCode::FORBIDDEN, "remote_models_disabled".into())
        );
        // Options it does not know, and a fork point past the end.
        let r = s.post_json(
            "/sessions/trip/compare",
            Some(TOKEN),
            json!({"at": 2, "arms": [{"model": "m"}], "colour": 1}),
        );
        assert_eq!(
            error_code(r),
            (StatusCode::BAD_REQUEST, "bad_request".into())
        );
        let mut late = body.clone();
        late["at"] = json!(99);
        let r = s.post_json("/sessions/trip/compare", Some(TOKEN), &late);
        assert_eq!(
            error_code(r),
            (StatusCode::BAD_REQUEST, "index_out_of_range".into())
        );
        let r = s.post_json("/sessions/nope/compare", Some(TOKEN), &body);
        assert_eq!(
            error_code(r),
            (StatusCode::NOT_FOUND, "session_not_found".into())
        );
        assert_eq!(quads(&s.store), before);
        assert!(stub.requests().is_empty());
        // A read-only server (no token) refuses every write.
        let read_only = start(ServerConfig::default());
        let r = read_only.post_json("/sessions/trip/compare", None, &body);
        assert_eq!(error_code(r), (StatusCode::FORBIDDEN, "read_only".into()));
    }

    #[test]
    fn an_unknown_comparison_is_a_404_job_not_found() {
        let s = start(with_token());
        for path in ["/comparisons/nope", "/comparisons/x%22%20%7D%20DROP%20ALL"] {
            let r = s.get(path, "*/*");
            assert_eq!(
                error_code(r),
                (StatusCode::NOT_FOUND, "job_not_found".into()),
                "{path}"
            );
        }
        let r = s.post_json("/comparisons/nope/cancel", Some(TOKEN), json!({}));
        assert_eq!(
            error_code(r),
            (StatusCode::NOT_FOUND, "job_not_found".into())
        );
    }

    #[test]
    fn cancel_stops_the_running_runs_of_a_comparison_begun_over_http() {
        let slow = slow_two_models();
        let s = start(offering(&slow));
        let r = s.post_json("/sessions/trip/compare", Some(TOKEN), two_arms(&slow.url));
        assert_eq!(r.status(), StatusCode::ACCEPTED);
        let id = r.json::<Value>().unwrap()["comparison"]
            .as_str()
            .unwrap()
            .to_string();
        let r = s.post_json(&format!("/comparisons/{id}/cancel"), Some(TOKEN), json!({}));
        assert_eq!(r.status(), StatusCode::OK);
        let done = settled(&s, &id);
        assert_eq!(run_statuses(&done), ["cancelled", "cancelled"]);
        query_agrees(&s.store, &s.store.comparison(&id).unwrap());
    }

    #[test]
    fn a_comparison_nobody_takes_resumes_from_its_last_step_over_http() {
        let stub = stub::scripted(two_models);
        let s = start(offering(&stub));
        // Begun but never run: what a server that stopped mid-way leaves behind.
        let begun = s
            .store
            .begin_comparison(&sid("trip"), &options(&two_arms(&stub.url)))
            .unwrap();
        let id = begun.comparison.clone();
        assert_eq!(begun.status, "running");
        let r = s.post_json(&format!("/comparisons/{id}/resume"), None, json!({}));
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert!(stub.requests().is_empty());
        let r = s.post_json(&format!("/comparisons/{id}/resume"), Some(TOKEN), json!({}));
        assert_eq!(r.status(), StatusCode::ACCEPTED);
        let done = settled(&s, &id);
        let library = s.store.comparison(&id).unwrap();
        expected_figures(&library);
        shows(&done, &library);
        let r = s.post_json("/comparisons/no-such-id/resume", Some(TOKEN), json!({}));
        assert_eq!(
            error_code(r),
            (StatusCode::NOT_FOUND, "job_not_found".into())
        );
    }
}
