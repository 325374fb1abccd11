//! What-if comparisons against scripted model stubs on 127.0.0.1: runs that replay the
//! recording, runs that diverge, tool calls answered from the recording, measured
//! figures, prices and money caps, idempotence, resume, and the Anthropic Messages API.

mod common;

use common::stub::{self, anthropic_message, completion, Reply};
use common::*;
use forktrail::{
    Arm, CompareOptions, CostStatus, Error, NewTurn, Price, Provider, Role, RunStatus, SessionId,
    Store,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn arm(name: &str, model: &str, endpoint: &str) -> Arm {
    Arm {
        name: Some(name.into()),
        model: model.into(),
        endpoint: Some(endpoint.into()),
        ..Default::default()
    }
}

fn options(at: u64, arms: Vec<Arm>) -> CompareOptions {
    CompareOptions {
        at,
        arms,
        ..Default::default()
    }
}

#[test]
fn a_replaying_arm_completes_with_no_divergence_and_every_call_answered_from_the_recording() {
    for s in stores() {
        let root = travel::session(&s, "trip");
        let stub = stub::scripted(|request, _| travel::replay("model-a", request));
        let mut o = options(2, vec![arm("same", "model-a", &stub.url)]);
        o.prices.insert(
            "model-a".into(),
            Price {
                input: 3.0,
                output: 15.0,
                cached: Some(0.3),
            },
        );
        let c = s.compare(&root, &o).unwrap();
        assert_eq!(c.status, "ended", "{}", s.kind);
        assert_eq!(c.arms.len(), 2);
        let (base, a) = (&c.arms[0], &c.arms[1]);
        assert!(base.baseline && base.name == "baseline" && base.status == "recorded");
        assert_eq!(base.figures.steps, 4);
        assert_eq!(base.figures.tool_names, ["get_weather", "get_price"]);
        assert_eq!(
            base.figures.input_tokens, None,
            "the recording reports no usage"
        );
        assert_eq!(a.status, "complete", "{}: {:?}", s.kind, a.detail);
        assert_eq!(a.figures.first_divergence, None, "{:?}", a.diff);
        assert!(a.figures.reached_end);
        assert_eq!(a.figures.steps, 4);
        assert_eq!(a.figures.tool_names, ["get_weather", "get_price"]);
        assert_eq!(a.figures.answered_from_recording, Some(2));
        assert_eq!(a.figures.unanswered_tool_calls, Some(0));
        // Exactly the stub's usage.
        assert_eq!(a.figures.input_tokens, Some(100 + 120 + 140 + 160));
        assert_eq!(a.figures.output_tokens, Some(10 + 8 + 12 + 6));
        assert_eq!(a.figures.cached_tokens, Some(100));
        assert_eq!(
            a.figures.finish_reasons,
            ["tool_calls", "stop", "tool_calls", "stop"]
        );
        let expected = ((520.0 - 100.0) * 3.0 + 100.0 * 0.3 + 36.0 * 15.0) / 1e6;
        assert_eq!(a.figures.cost, CostStatus::Priced);
        assert!((a.figures.cost_usd.unwrap() - expected).abs() < 1e-12);
        assert_eq!(stub.requests().len(), 4);
        // The fork stores only its own turns, and the tool answers derive from the
        // recorded results; the first request saw exactly turns 0 and 1.
        let fork = a.session.clone().unwrap();
        let turns = s.load(&fork, None).unwrap();
        assert_eq!(turns.len(), 9);
        assert_eq!(turns[3].content, "18C, sunny");
        assert_eq!(
            turns[3].tool_call_id.as_deref(),
            Some("x1"),
            "answers the new call's id"
        );
        assert_eq!(turns[7].tool_call_id.as_deref(), Some("x2"));
        assert_eq!(stub.requests()[0]["messages"].as_array().unwrap().len(), 2);
        // Each step's turn carries its call's figures and its comparison; the tool
        // answers (from the recording) and the inherited turns carry none.
        let figures = s.turn_figures(&turns).unwrap();
        let indices: Vec<u64> = figures.iter().map(|f| f.index).collect();
        assert_eq!(indices, [2, 4, 6, 8], "{}", s.kind);
        assert_eq!(figures[0].input_tokens, Some(100));
        assert_eq!(figures[0].output_tokens, Some(10));
        assert!(figures[0].latency_ms.is_some() && figures[0].cost_usd.unwrap() > 0.0);
        assert!(figures
            .iter()
            .all(|f| f.comparison.as_deref() == Some(c.comparison.as_str())));
        let derived = ask(
            &s,
            &format!(
                "PREFIX prov: <http://www.w3.org/ns/prov#> ASK {{ GRAPH ?g {{ <{}> prov:wasDerivedFrom <{}> }} }}",
                turn_iri(&s, &fork, 3),
                turn_iri(&s, &root, 3)
            ),
        );
        assert!(
            derived,
            "{}: the tool answer derives from the recorded result",
            s.kind
        );
        // What a run writes passes verify: digests chained, turns attributed, forks whole.
        let report = s.verify(None).unwrap();
        assert!(
            report.problems.is_empty(),
            "{}: {:?}",
            s.kind,
            report.problems
        );
    }
}

fn turn_iri(s: &Store, session: &SessionId, index: u64) -> String {
    format!("{}/turn/{index}", s.session_iri(session).as_str())
}

fn ask(s: &Store, sparql: &str) -> bool {
    match s.query(sparql, &[]).unwrap() {
        oxigraph::sparql::QueryResults::Boolean(b) => b,
        _ => panic!("an ASK"),
    }
}

#[test]
fn an_arm_that_calls_an_unrecorded_tool_stops_naming_it_and_diverges_there() {
    let s = Store::in_memory().unwrap();
    let root = travel::session(&s, "trip");
    let stub = stub::scripted(|request, _| {
        let answered = request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        Reply::ok(match answered {
            0 => completion(
                "model-b",
                None,
                &[("y1", "get_weather", json!({"city": "Paris"}))],
                (50, 5, 0),
                "tool_calls",
            ),
            1 => completion("model-b", Some("Sunny, 18C."), &[], (60, 5, 0), "stop"),
            _ => completion(
                "model-b",
                None,
                &[("y2", "book_flight", json!({"to": "Paris"}))],
                (70, 5, 0),
                "tool_calls",
            ),
        })
    });
    let c = s
        .compare(&root, &options(2, vec![arm("b", "model-b", &stub.url)]))
        .unwrap();
    let a = &c.arms[1];
    assert_eq!(a.status, RunStatus::UnansweredToolCall.as_str());
    let detail = a.detail.as_deref().unwrap();
    assert!(
        detail.contains(r#"book_flight({"to":"Paris"})"#),
        "{detail}"
    );
    assert!(detail.contains("never executed"), "{detail}");
    // Index 2 and 3 are as recorded; 4 says "Sunny, 18C." where the recording said
    // otherwise.
    assert_eq!(a.figures.first_divergence, Some(4), "{:?}", a.diff);
    assert!(!a.figures.reached_end);
    assert_eq!(a.figures.answered_from_recording, Some(1));
    assert_eq!(a.figures.unanswered_tool_calls, Some(1));
    assert_eq!(a.figures.tool_names, ["get_weather", "book_flight"]);
    assert_eq!(a.figures.cost, CostStatus::Unpriced);
    assert_eq!(a.figures.cost_usd, None);
    // The fork says its run stopped short, and why.
    let info = s.info(a.session.as_ref().unwrap()).unwrap();
    let what_if = info.what_if.unwrap();
    assert_eq!(what_if.status, RunStatus::UnansweredToolCall);
    assert_eq!(
        (what_if.comparison.as_str(), what_if.arm.as_str()),
        (c.comparison.as_str(), "b")
    );
    assert_eq!(what_if.detail.as_deref(), Some(detail));
    assert!(s.info(&root).unwrap().what_if.is_none());
    // The turn that made the call is kept; nothing answers it.
    let turns = s.load(a.session.as_ref().unwrap(), None).unwrap();
    assert_eq!(turns.len(), 7);
    assert_eq!(turns[6].role, Role::Assistant);
    assert_eq!(stub.requests().len(), 3);
}

#[test]
fn a_different_first_tool_call_diverges_at_the_fork_point_even_with_equal_text() {
    let s = Store::in_memory().unwrap();
    let root = travel::session(&s, "trip");
    let stub = stub::scripted(|_, _| {
        Reply::ok(completion(
            "m",
            None,
            &[("z", "get_weather", json!({"city": "Rome"}))],
            (1, 1, 0),
            "tool_calls",
        ))
    });
    let c = s
        .compare(&root, &options(2, vec![arm("m", "m", &stub.url)]))
        .unwrap();
    assert_eq!(c.arms[1].figures.first_divergence, Some(2));
    assert_eq!(c.arms[1].status, "unanswered_tool_call");
}

#[test]
fn an_off_machine_arm_needs_allow_remote_a_budget_and_a_price_and_writes_nothing_without() {
    let s = Store::in_memory().unwrap();
    let root = travel::session(&s, "trip");
    let before = quads(&s);
    let remote = arm("hosted", "claude-x", "https://models.example.com");
    let mut o = options(2, vec![remote]);
    let refused = |o: &CompareOptions, needle: &str| {
        let e = s.compare(&root, o).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
        assert!(e.to_string().contains(needle), "{e}");
        assert_eq!(quads(&s), before);
    };
    // A dry run sends nothing: it shows the arm off this machine, unpriced, before any
    // budget is chosen.
    let dry = |o: &CompareOptions| CompareOptions {
        dry_run: true,
        ..o.clone()
    };
    let plan = s.plan_comparison(&root, &dry(&o)).unwrap();
    assert!(plan.arms[0].remote);
    assert_eq!(plan.arms[0].estimated_usd, None);
    // A plan made as the step before running (the web UI's estimate) is refused as the
    // run would be.
    let e = s.plan_comparison(&root, &o).unwrap_err();
    assert!(e.to_string().contains("--allow-remote"), "{e}");
    refused(&o, "--allow-remote");
    o.allow_remote = true;
    refused(&o, "--budget-usd");
    o.budget_usd = Some(1.0);
    refused(&o, "no price");
    // A plan (dry run) with everything given writes nothing and names the total.
    o.prices.insert(
        "claude-x".into(),
        Price {
            input: 3.0,
            output: 15.0,
            cached: None,
        },
    );
    let plan = s.plan_comparison(&root, &dry(&o)).unwrap();
    assert!(plan.arms[0].remote);
    assert_eq!(plan.arms[0].estimated_steps, 4);
    assert_eq!(
        s.plan_comparison(&root, &o).unwrap().estimated_usd,
        plan.estimated_usd,
        "with everything given, the estimate before running is the dry run's"
    );
    assert!(plan.estimated_usd > 0.0);
    assert_eq!(quads(&s), before);
}

#[test]
fn a_run_stops_at_the_budget_before_a_call_that_could_pass_it() {
    let s = Store::in_memory().unwrap();
    let root = travel::session(&s, "trip");
    let stub = stub::scripted(|request, _| travel::replay("model-a", request));
    let mut o = options(2, vec![arm("a", "model-a", &stub.url)]);
    // $1 per million input and output tokens: a call's upper bound is its request's
    // bytes plus the 1000 tokens it may answer with, about $0.0013 for the first. It
    // fits under $0.0014 and is charged its usage ($0.00011); the second, its request
    // longer, would pass the cap.
    o.prices.insert(
        "model-a".into(),
        Price {
            input: 1.0,
            output: 1.0,
            cached: None,
        },
    );
    o.arms[0].max_tokens = Some(1000);
    o.budget_usd = Some(0.0014);
    let c = s.compare(&root, &o).unwrap();
    let a = &c.arms[1];
    assert_eq!(a.status, "budget_exhausted", "{:?}", a.detail);
    assert_eq!(stub.requests().len(), 1, "no call past the cap");
    assert_eq!(stub.requests()[0]["max_tokens"], 1000);
    let detail = a.detail.as_deref().unwrap();
    assert!(
        detail.contains("--budget-usd") && detail.contains("$0.000000 reserved"),
        "{detail}"
    );
    assert!(
        (c.charged_usd - 110.0 / 1e6).abs() < 1e-12,
        "{}",
        c.charged_usd
    );
    assert_eq!(a.figures.steps, 1);
}

/// What `stub` billed for the requests it received, at `price`: the usage a dense
/// stub reports (its request's bytes / 2 in, `OUT` out), the truth the cap is held to.
fn billed(stub: &stub::Stub, price: &Price) -> f64 {
    stub.requests()
        .iter()
        .map(|r| price.cost(dense_input(r.to_string().len()), OUT, 0))
        .sum()
}

/// The output tokens a dense stub reports for each answer.
const OUT: u64 = 80;

/// Two bytes a token: denser than the four characters a token that estimates assume.
fn dense_input(bytes: usize) -> u64 {
    bytes as u64 / 2
}

/// The recording replayed, each answer after a short wait (so that parallel arms have
/// calls in flight at once) and reporting dense usage.
fn dense_replay(request: &Value, bytes: usize) -> Reply {
    let mut reply = travel::replay("model-a", request);
    let mut body: Value = serde_json::from_str(&reply.body).unwrap();
    body["usage"] = json!({"prompt_tokens": dense_input(bytes), "completion_tokens": OUT});
    reply.body = body.to_string();
    reply.delay = Some(Duration::from_millis(30));
    reply
}

/// The amounts in a `budget_exhausted` detail: the call's bound, then what was charged
/// and what reserved when the arm stopped.
fn stopped_at(detail: &str) -> (f64, f64, f64) {
    let amounts: Vec<f64> = detail
        .split('$')
        .skip(1)
        .map(|part| {
            part.chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect::<String>()
                .trim_end_matches('.')
                .parse()
                .unwrap()
        })
        .collect();
    (amounts[0], amounts[1], amounts[2])
}

/// Guards against a cap that parallel arms passed (4 arms, $0.50, charged $0.60: each
/// reserved from a characters / 4 estimate before any call had reported its usage), and
/// against an arm that stopped `budget_exhausted` at once, most of the budget unspent,
/// because its siblings held reservations.
#[test]
fn parallel_arms_never_pass_the_cap_against_usage_denser_than_four_characters_a_token() {
    for (arms, cap) in [(4, 0.5), (3, 0.35), (6, 0.8)] {
        let s = Store::in_memory().unwrap();
        let root = travel::session(&s, "trip");
        let stub = stub::scripted(dense_replay);
        let price = Price {
            input: 200.0,
            output: 200.0,
            cached: None,
        };
        let mut o = options(
            2,
            (0..arms)
                .map(|n| {
                    let mut a = arm(&format!("a{n}"), "model-a", &stub.url);
                    a.max_tokens = Some(OUT as u32 * 2);
                    a
                })
                .collect(),
        );
        o.prices.insert("model-a".into(), price);
        o.budget_usd = Some(cap);
        o.parallel = Some(arms);
        let c = s.compare(&root, &o).unwrap();
        let billed = billed(&stub, &price);
        assert!(
            c.charged_usd <= cap + 1e-9 && billed <= cap + 1e-9,
            "{arms} arms: charged ${}, billed ${billed}, over the ${cap} cap",
            c.charged_usd
        );
        assert!(
            (c.charged_usd - billed).abs() < 1e-9,
            "every call charged as billed"
        );
        let mut exhausted = 0;
        for a in c.arms.iter().filter(|a| !a.baseline) {
            match a.status.as_str() {
                "complete" => {}
                "budget_exhausted" => {
                    exhausted += 1;
                    // It stopped when nothing was held that could free enough, and its
                    // call truly did not fit.
                    let (bound, charged, reserved) = stopped_at(a.detail.as_deref().unwrap());
                    assert_eq!(reserved, 0.0, "{:?}", a.detail);
                    assert!(charged + bound > cap, "{:?}", a.detail);
                }
                other => panic!("arm {} ended {other}: {:?}", a.name, a.detail),
            }
        }
        assert!(exhausted > 0, "{arms} arms: the cap was reached ({c:?})");
        println!(
            "{arms} parallel arms, cap ${cap}: {} calls, billed ${billed:.4}, charged ${:.4}, \
             {exhausted} arms stopped budget_exhausted",
            stub.requests().len(),
            c.charged_usd
        );
    }
}

#[test]
fn the_same_comparison_twice_is_one_comparison_and_again_asks_anew() {
    let s = Store::in_memory().unwrap();
    let root = travel::session(&s, "trip");
    let stub = stub::scripted(|request, _| travel::replay("model-a", request));
    let o = options(2, vec![arm("a", "model-a", &stub.url)]);
    let first = s.compare(&root, &o).unwrap();
    assert!(!first.reused);
    let second = s.compare(&root, &o).unwrap();
    assert!(second.reused);
    assert_eq!(second.comparison, first.comparison);
    assert_eq!(stub.requests().len(), 4, "no second call");
    let third = s
        .compare(
            &root,
            &CompareOptions {
                again: true,
                ..o.clone()
            },
        )
        .unwrap();
    assert_ne!(third.comparison, first.comparison);
    assert_eq!(stub.requests().len(), 8);
}

#[test]
fn a_run_interrupted_after_its_first_steps_resumes_from_its_last_committed_step() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let stub = stub::scripted(move |request, _| {
        seen.fetch_add(1, Ordering::SeqCst);
        travel::replay("model-a", request)
    });
    let (root, id) = {
        let s = Store::open(&path).unwrap();
        let root = travel::session(&s, "trip");
        let o = CompareOptions {
            max_steps: Some(2),
            ..options(2, vec![arm("a", "model-a", &stub.url)])
        };
        // Two steps, then the run stops; rewriting its status to running is what a
        // process that died after two committed steps leaves.
        let c = s.compare(&root, &o).unwrap();
        assert_eq!(c.arms[1].status, "max_steps");
        (root, c.comparison)
    };
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let s = Store::open(&path).unwrap();
    mark_running(&s, &id);
    raise_max_steps(&s, &id, 50);
    let c = s.run_comparison(&id, 1).unwrap();
    assert_eq!(c.arms[1].status, "complete", "{:?}", c.arms[1].detail);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "only the two steps left were asked"
    );
    assert_eq!(c.arms[1].figures.first_divergence, None);
    assert_eq!(c.arms[1].figures.steps, 4);
    let _ = root;
}

/// Sets every run of comparison `id` back to running, as a process that died leaves it.
fn mark_running(s: &Store, id: &str) {
    let update = format!(
        "PREFIX ft: <https://w3id.org/forktrail/ns#>
         PREFIX dcterms: <http://purl.org/dc/terms/>
         DELETE {{ GRAPH ?g {{ ?run ft:status ?s }} }}
         INSERT {{ GRAPH ?g {{ ?run ft:status \"running\" }} }}
         WHERE {{ GRAPH ?c {{ ?cmp ft:jobId \"{id}\" }} GRAPH ?g {{ ?run dcterms:isPartOf ?cmp ; ft:status ?s }} }}"
    );
    s.oxigraph().update(update.as_str()).unwrap();
}

fn raise_max_steps(s: &Store, id: &str, steps: u64) {
    let update = format!(
        "PREFIX ft: <https://w3id.org/forktrail/ns#>
         DELETE {{ GRAPH ?g {{ ?c ft:requestBody ?b }} }}
         INSERT {{ GRAPH ?g {{ ?c ft:requestBody ?nb }} }}
         WHERE {{ GRAPH ?g {{ ?c ft:jobId \"{id}\" ; ft:requestBody ?b }}
                 BIND(REPLACE(?b, '\"max_steps\":[0-9]+', '\"max_steps\":{steps}') AS ?nb) }}"
    );
    s.oxigraph().update(update.as_str()).unwrap();
}

#[test]
fn anthropic_arms_send_messages_with_tool_use_and_read_usage_with_cache_reads() {
    // The key goes to the endpoint its owner configured beside it. No other test of
    // this file reads these variables.
    std::env::set_var("ANTHROPIC_API_KEY", "test-key-not-stored");
    let s = Store::in_memory().unwrap();
    let root = travel::session(&s, "trip");
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    let stub = stub::scripted(move |request: &Value, _| {
        seen.lock().unwrap().push(request.clone());
        let messages = request["messages"].as_array().unwrap();
        let answered = messages.iter().filter(|m| m["role"] == "assistant").count();
        Reply::ok(match answered {
            0 => anthropic_message(
                "claude-x",
                Some("Checking."),
                &[("tu1", "get_weather", json!({"city": "Paris"}))],
                (30, 7, 20),
                "tool_use",
            ),
            _ => anthropic_message("claude-x", Some("Sunny."), &[], (40, 3, 0), "end_turn"),
        })
    });
    let endpoint = stub.url.trim_end_matches("/v1").to_string();
    std::env::set_var("ANTHROPIC_BASE_URL", &endpoint);
    let mut a = arm("claude", "claude-x", &endpoint);
    a.provider = Provider::Anthropic;
    let o = CompareOptions {
        max_steps: Some(2),
        ..options(2, vec![a])
    };
    let c = s.compare(&root, &o).unwrap();
    let arm = &c.arms[1];
    assert_eq!(arm.status, "max_steps", "{:?}", arm.detail);
    // input = input_tokens + cache reads; cached = cache reads.
    assert_eq!(arm.figures.input_tokens, Some(30 + 20 + 40));
    assert_eq!(arm.figures.cached_tokens, Some(20));
    assert_eq!(arm.figures.output_tokens, Some(10));
    assert_eq!(arm.figures.finish_reasons, ["tool_use", "end_turn"]);
    let heads = stub.heads.lock().unwrap().clone();
    assert_eq!(heads[0].0, "/v1/messages");
    let header = |name: &str| {
        heads[0]
            .1
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(header("x-api-key").as_deref(), Some("test-key-not-stored"));
    assert!(header("anthropic-version").is_some());
    let sent = requests.lock().unwrap().clone();
    assert_eq!(sent[0]["system"], "You are a travel agent.");
    assert_eq!(sent[0]["max_tokens"], 4096, "Anthropic requires max_tokens");
    // The second request carries the tool_use and its recorded tool_result.
    let second = sent[1]["messages"].as_array().unwrap();
    let assistant = &second[1]["content"];
    assert_eq!(assistant[1]["type"], "tool_use");
    assert_eq!(assistant[1]["input"], json!({"city": "Paris"}));
    assert_eq!(second[2]["content"][0]["type"], "tool_result");
    assert_eq!(second[2]["content"][0]["tool_use_id"], "tu1");
    assert_eq!(second[2]["content"][0]["content"], "18C, sunny");
    // The key is never stored.
    assert!(!quads(&s).iter().any(|q| q.contains("test-key-not-stored")));
}

#[test]
fn each_step_sends_the_forks_stored_context_with_turns_another_writer_added_meanwhile() {
    for s in stores() {
        let s = Arc::new(s);
        let root = travel::session(&s, "trip");
        let note = "Also: I travel on Friday.";
        // Per call: the messages sent, and the fork's stored length when they arrived.
        let seen: Arc<Mutex<Vec<(usize, u64)>>> = Arc::default();
        let (store, log, trunk) = (Arc::clone(&s), Arc::clone(&seen), root.clone());
        let stub = stub::scripted(move |request, _| {
            let fork = store.branches(&trunk).unwrap()[0].session.clone();
            let sent = request["messages"].as_array().map_or(0, Vec::len);
            log.lock()
                .unwrap()
                .push((sent, store.info(&fork).unwrap().length));
            if log.lock().unwrap().len() == 1 {
                // A person adds a turn to the fork while the model thinks.
                store.append(&fork, NewTurn::new(Role::User, note)).unwrap();
            }
            travel::replay("model-a", request)
        });
        let c = s
            .compare(&root, &options(2, vec![arm("a", "model-a", &stub.url)]))
            .unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 4, "{}", s.kind);
        for (n, (sent, stored)) in seen.iter().enumerate() {
            assert_eq!(*sent as u64, *stored, "{}: call {n}", s.kind);
        }
        let requests = stub.requests();
        assert!(
            !requests[0].to_string().contains(note),
            "{}: not yet written",
            s.kind
        );
        assert!(
            requests[1..].iter().all(|r| r.to_string().contains(note)),
            "{}: every later step's context holds the added turn",
            s.kind
        );
        let fork = c.arms[1].session.clone().unwrap();
        let turns = s.replay(&fork, None).unwrap();
        assert_eq!(turns[2].content, note, "{}", s.kind);
    }
}
