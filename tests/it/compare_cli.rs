//! `forktrail compare`, `comparisons` and the comparison side of `jobs`, driven through
//! the binary against scripted model stubs on 127.0.0.1: the side-by-side table, JSON,
//! plans that write nothing, refusals, reuse, resume after `kill -9`, and cancel.
#![cfg(feature = "rocksdb")]

use crate::common;

use common::cli::Cli;
use common::stub::{self, completion, Reply};
use common::travel;
use serde_json::{json, Value};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A store directory holding the recorded travel-agent session `trip`
/// ([`travel::session`]).
fn trip() -> Cli {
    let cli = Cli::new();
    travel::session(&cli.open(), "trip");
    cli
}

/// A model that answers the first question in its own words, then calls a tool the
/// recording never called.
fn speaks_then_books_a_flight(request: &Value) -> Reply {
    Reply::ok(match travel::answered(request) {
        0 => completion("model-b", Some("Sunny, 18C."), &[], (50, 5, 0), "stop"),
        _ => completion(
            "model-b",
            None,
            &[("y1", "book_flight", json!({"to": "Paris"}))],
            (70, 9, 0),
            "tool_calls",
        ),
    })
}

/// The cells of the table row labelled `label` (cells are two or more spaces apart).
fn row(table: &str, label: &str) -> Vec<String> {
    let line = table
        .lines()
        .find(|l| {
            l.strip_prefix(label)
                .is_some_and(|rest| rest.starts_with("  ") || rest.is_empty())
        })
        .unwrap_or_else(|| panic!("no row {label:?} in:\n{table}"));
    line[label.len()..]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(String::from)
        .collect()
}

/// Waits, polling, until `done` holds; panics after a minute.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn arm(name: &str, model: &str, stub: &stub::Stub) -> String {
    format!("name={name},model={model},endpoint={}", stub.url)
}

/// A model that replays the recording, each answer 30 s late.
fn slow_replay() -> stub::Stub {
    stub::scripted(|request, _| Reply {
        delay: Some(Duration::from_secs(30)),
        ..travel::replay("model-a", request)
    })
}

/// `compare trip --at 2` with these `--arm`s, begun in a background worker: the
/// comparison as its `--json` says it began.
fn in_background(cli: &Cli, arms: &[String]) -> Value {
    let mut args = vec!["compare", "trip", "--at", "2"];
    for arm in arms {
        args.extend(["--arm", arm]);
    }
    args.extend(["--background", "--json"]);
    cli.json(&args)
}

#[test]
fn a_two_arm_comparison_prints_the_arms_side_by_side_with_the_stubs_figures() {
    let cli = trip();
    let a = stub::scripted(|request, _| travel::replay("model-a", request));
    let b = stub::scripted(|request, _| speaks_then_books_a_flight(request));
    let (same, flyer) = (arm("same", "model-a", &a), arm("flyer", "model-b", &b));
    let price = "model-a=3/15/0.3";
    let (table, stderr) = cli.ok_with_stderr(&[
        "compare", "trip", "--at", "2", "--arm", &same, "--arm", &flyer, "--price", price,
    ]);
    // The id and the warning come first, on stderr.
    let id = stderr
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("comparison "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("no comparison id first: {stderr}"))
        .to_string();
    assert!(
        stderr.contains(&format!("forktrail jobs resume {id}")),
        "{stderr}"
    );
    assert!(stderr.contains("TOOLS ARE NEVER EXECUTED"), "{stderr}");
    assert!(
        table.starts_with(&format!("comparison  {id} (ended)")),
        "{table}"
    );
    let header = table.lines().find(|l| l.contains("baseline")).unwrap();
    let (base, same, flyer) = (
        header.find("baseline").unwrap(),
        header.find("same").unwrap(),
        header.find("flyer").unwrap(),
    );
    assert!(base < same && same < flyer, "{header}");
    // Cost: ((520 - 100) * $3 + 100 * $0.3 + 36 * $15) per million tokens; the
    // recording's model is priced, but the recording reports no usage. The flyer's
    // index 2 says "Sunny, 18C." where the recording called get_weather.
    for (label, cells) in [
        ("status", ["recorded", "complete", "unanswered_tool_call"]),
        ("steps", ["4", "4", "2"]),
        ("input tokens", ["not measured", "520", "120"]),
        ("output tokens", ["not measured", "36", "14"]),
        ("cached tokens", ["not measured", "100", "0"]),
        (
            "tool sequence",
            [
                "get_weather, get_price",
                "get_weather, get_price",
                "book_flight",
            ],
        ),
        ("from recording", ["-", "2", "0"]),
        ("unanswered", ["-", "0", "1"]),
        ("cost", ["not measured", "$0.001830", "unpriced"]),
        (
            "finish reasons",
            [
                "not measured",
                "tool_calls, stop, tool_calls, stop",
                "stop, tool_calls",
            ],
        ),
        ("first divergence", ["none", "none", "2"]),
        ("first other words", ["none", "none", "2"]),
        // Its first call (book_flight) comes at 4, after the recorded user turn fed at 3,
        // where the recording called get_weather first.
        ("first other tool call", ["none", "none", "4"]),
        ("reached end", ["yes", "yes", "no"]),
    ] {
        assert_eq!(row(&table, label), cells, "{label}:\n{table}");
    }
    let stopped = table
        .lines()
        .find(|l| l.starts_with("arm flyer stopped unanswered_tool_call: "))
        .unwrap_or_else(|| panic!("the stopped arm's detail is missing:\n{table}"));
    assert!(stopped.contains("book_flight"), "{stopped}");
    assert!(
        !table.contains("arm same stopped"),
        "a complete arm did not stop: {table}"
    );
    assert_eq!((a.requests().len(), b.requests().len()), (4, 2));
}

#[test]
fn json_prints_the_comparison_that_jobs_show_and_comparisons_print() {
    let cli = trip();
    let a = stub::scripted(|request, _| travel::replay("model-a", request));
    let same = arm("same", "model-a", &a);
    let out = cli.run(&["compare", "trip", "--at", "2", "--arm", &same, "--json"]);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["status"], "ended");
    assert_eq!(
        (c["session"].as_str(), c["at"].as_u64()),
        (Some("trip"), Some(2))
    );
    let arms = c["arms"].as_array().unwrap();
    assert_eq!(
        (arms[0]["name"].as_str(), arms[1]["name"].as_str()),
        (Some("baseline"), Some("same"))
    );
    assert_eq!(arms[1]["status"], "complete");
    assert_eq!(arms[1]["figures"]["input_tokens"], 520);
    assert_eq!(arms[1]["figures"]["output_tokens"], 36);
    assert_eq!(arms[1]["figures"]["cost"], "unpriced");
    assert_eq!(arms[1]["calls"].as_array().unwrap().len(), 4);
    let id = c["comparison"].as_str().unwrap();
    assert_eq!(cli.json(&["jobs", "show", id, "--json"]), c);
    let run = arms[1]["run"].as_str().unwrap();
    assert_eq!(
        cli.json(&["jobs", "show", run, "--json"]),
        c,
        "a run id shows its comparison"
    );
    assert_eq!(cli.json(&["comparisons", "--json"]), json!([c]));
    let listed = cli.ok(&["comparisons"]);
    let line = listed.lines().find(|l| l.starts_with(id)).unwrap();
    assert!(
        line.contains("trip@2") && line.contains("ended") && line.contains("same complete"),
        "{line}"
    );
}

#[test]
fn a_dry_run_prints_the_estimated_cost_with_prices_and_unpriced_without_and_writes_nothing() {
    let cli = trip();
    let a = stub::scripted(|request, _| travel::replay("model-a", request));
    let before = cli.quads();
    let same = arm("same", "model-a", &a);
    let args = ["compare", "trip", "--at", "2", "--arm", &same, "--dry-run"];
    let plan = cli.ok(&args);
    let same = row(&plan, "same");
    assert_eq!(
        same[..5],
        ["openai", "model-a", &a.url, "no", "4"],
        "{plan}"
    );
    assert_eq!(same[6], "unpriced", "{plan}");
    assert!(plan.contains("budget      none"), "{plan}");
    let mut priced = args.to_vec();
    priced.extend(["--price", "model-a=3/15", "--budget-usd", "2", "--json"]);
    let json: Value = serde_json::from_str(&cli.ok(&priced)).unwrap();
    let estimate = json["arms"][0]["estimated_usd"].as_f64().unwrap();
    assert!(estimate > 0.0, "{json}");
    assert_eq!(json["arms"][0]["estimated_steps"], 4);
    assert_eq!(json["budget_usd"], 2.0);
    priced.pop();
    let plan = cli.ok(&priced);
    let cost = format!("${estimate:.6}");
    assert_eq!(row(&plan, "same")[6], cost, "{plan}");
    assert!(plan.contains(&format!("total       {cost}")), "{plan}");
    assert!(plan.contains("budget      $2.000000"), "{plan}");
    assert_eq!(cli.quads(), before, "a dry run writes nothing");
    assert!(a.requests().is_empty(), "a dry run calls nothing");
}

#[test]
fn an_off_machine_endpoint_is_refused_naming_the_flag_it_needs_and_nothing_is_written() {
    let cli = trip();
    let remote = "model=claude-x,endpoint=https://models.example.com/v1";
    let err = cli.fails(&["compare", "trip", "--at", "2", "--arm", remote]);
    assert!(err.contains("--allow-remote"), "{err}");
    let err = cli.fails(&[
        "compare",
        "trip",
        "--at",
        "2",
        "--arm",
        remote,
        "--allow-remote",
    ]);
    assert!(
        err.contains("--budget-usd") && err.contains("models.example.com"),
        "{err}"
    );
    assert!(
        err.contains("arm 1 (claude-x)"),
        "the error names the arm: {err}"
    );
    let local = "model=m,endpoint=http://127.0.0.1:9/v1";
    let err = cli.fails(&["compare", "trip", "--at", "10", "--arm", local]);
    assert!(
        err.contains("index 10 is out of range for session trip"),
        "the error names session and index: {err}"
    );
    assert!(cli
        .json(&["comparisons", "--json"])
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn the_same_comparison_twice_prints_reused_without_calling_the_model_again() {
    let cli = trip();
    let a = stub::scripted(|request, _| travel::replay("model-a", request));
    let same = arm("same", "model-a", &a);
    let args = ["compare", "trip", "--at", "2", "--arm", &same];
    let first = cli.ok(&args);
    assert!(!first.contains("reused"), "{first}");
    assert_eq!(a.requests().len(), 4);
    let second = cli.ok(&args);
    assert!(second.contains("reused"), "{second}");
    assert_eq!(row(&second, "input tokens"), ["not measured", "520"]);
    assert_eq!(a.requests().len(), 4, "no second call");
    let mut again = args.to_vec();
    again.push("--again");
    let third = cli.ok(&again);
    assert!(!third.contains("reused"), "{third}");
    assert_eq!(a.requests().len(), 8);
    assert_eq!(
        cli.json(&["comparisons", "--json"])
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// Guards against a resume that asks the model again for steps a killed process had
/// already committed, or that cannot go on after the process died holding the store.
#[test]
fn a_comparison_killed_mid_run_is_resumed_from_its_last_committed_step() {
    let cli = trip();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&seen);
    // The third request waits 10 s for its answer: the process is killed while it
    // waits, with two steps committed. The others are answered at once.
    let a = stub::scripted(move |request, _| {
        let n = count.fetch_add(1, Ordering::SeqCst) + 1;
        let mut reply = travel::replay("model-a", request);
        if n == 3 {
            reply.delay = Some(Duration::from_secs(10));
        }
        reply
    });
    let only = arm("a", "model-a", &a);
    let mut child = cli
        .command(&["compare", "trip", "--at", "2", "--arm", &only])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the third request", || a.requests().len() >= 3);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let all = cli.json(&["comparisons", "--json"]);
    let c = &all[0];
    assert_eq!(c["status"], "running", "{c}");
    assert_eq!(c["arms"][1]["status"], "running");
    assert_eq!(
        c["arms"][1]["figures"]["steps"], 2,
        "two steps were committed"
    );
    let id = c["comparison"].as_str().unwrap();

    let table = cli.ok(&["jobs", "resume", id]);
    assert_eq!(row(&table, "status"), ["recorded", "complete"], "{table}");
    assert_eq!(row(&table, "steps"), ["4", "4"]);
    assert_eq!(row(&table, "input tokens"), ["not measured", "520"]);
    assert_eq!(row(&table, "first divergence"), ["none", "none"]);
    // The killed process asked three times; the resume asked only for the two steps
    // not committed (the third again, and the fourth).
    let answered: Vec<usize> = a
        .requests()
        .iter()
        .map(|r| {
            r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "assistant")
                .count()
        })
        .collect();
    assert_eq!(answered, [0, 1, 2, 2, 3]);
    let shown = cli.json(&["jobs", "show", id, "--json"]);
    assert_eq!(
        (
            shown["status"].as_str(),
            shown["arms"][1]["status"].as_str()
        ),
        (Some("ended"), Some("complete"))
    );
}

#[test]
fn jobs_cancel_ends_a_comparison_running_in_a_background_worker_cancelled() {
    let cli = trip();
    let slow = slow_replay();
    let begun = in_background(&cli, &[arm("slow", "model-a", &slow)]);
    assert_eq!(begun["status"], "running");
    assert_eq!(begun["arms"][1]["status"], "running");
    let id = begun["comparison"].as_str().unwrap();
    wait_until("the worker's first request", || !slow.requests().is_empty());
    let started = Instant::now();
    let cancelled = cli.ok(&["jobs", "cancel", id]);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the worker stopped without waiting for the answer"
    );
    assert_eq!(
        row(&cancelled, "status"),
        ["recorded", "cancelled"],
        "{cancelled}"
    );
    let shown = cli.json(&["jobs", "show", id, "--json"]);
    assert_eq!(shown["status"], "ended");
    assert_eq!(shown["arms"][1]["status"], "cancelled");
    assert_eq!(shown["arms"][1]["figures"]["steps"], 0);
    assert_eq!(slow.requests().len(), 1);
}

#[test]
fn arms_from_a_file_follow_the_arm_flags_and_price_flags_win_over_the_prices_file() {
    let cli = trip();
    let a = stub::scripted(|request, _| travel::replay("model-a", request));
    let dir = cli.dir();
    let arms = dir.join("arms.json");
    let arms_json = json!([{"name": "second", "model": "model-b", "endpoint": a.url}]);
    std::fs::write(&arms, arms_json.to_string()).unwrap();
    let prices = dir.join("prices.json");
    let prices_json = json!({"model-a": {"input": 100, "output": 100},
                             "model-b": {"input": 1, "output": 1}});
    std::fs::write(&prices, prices_json.to_string()).unwrap();
    let plan = cli.json(&[
        "compare",
        "trip",
        "--at",
        "2",
        "--arm",
        &arm("first", "model-a", &a),
        "--arms",
        arms.to_str().unwrap(),
        "--prices",
        prices.to_str().unwrap(),
        "--price",
        "model-a=1/1",
        "--dry-run",
        "--json",
    ]);
    let names: Vec<&str> = plan["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["first", "second"]);
    // At $1 per million tokens both ways, an arm costs its tokens over a million.
    for arm in plan["arms"].as_array().unwrap() {
        let tokens = arm["estimated_steps"].as_u64().unwrap()
            * (arm["estimated_input_tokens_per_call"].as_u64().unwrap()
                + arm["estimated_output_tokens_per_call"].as_u64().unwrap());
        let usd = arm["estimated_usd"].as_f64().unwrap();
        assert!((usd - tokens as f64 / 1e6).abs() < 1e-12, "{arm}");
    }
    std::fs::write(&arms, r#"[{"model": "m", "colour": "red"}]"#).unwrap();
    let arms = arms.to_str().unwrap();
    let err = cli.fails(&["compare", "trip", "--at", "2", "--arms", arms]);
    assert!(
        err.contains("--arms") && err.contains("arms.json") && err.contains("colour"),
        "{err}"
    );
}

#[test]
fn jobs_cancel_of_one_run_stops_that_arm_while_the_next_goes_on() {
    let cli = trip();
    let (first, second) = (slow_replay(), slow_replay());
    let begun = in_background(
        &cli,
        &[
            arm("first", "model-a", &first),
            arm("second", "model-a", &second),
        ],
    );
    let id = begun["comparison"].as_str().unwrap();
    let run = begun["arms"][1]["run"].as_str().unwrap();
    wait_until("the first arm's request", || !first.requests().is_empty());
    // The worker goes on holding the store for the second arm: the cancel returns once
    // the first has stopped.
    let said = cli.ok(&["jobs", "cancel", run]);
    assert!(said.starts_with(&format!("{run} has stopped")), "{said}");
    wait_until("the second arm's request", || !second.requests().is_empty());
    let cancelled = cli.ok(&["jobs", "cancel", id]);
    assert_eq!(
        row(&cancelled, "status"),
        ["recorded", "cancelled", "cancelled"],
        "{cancelled}"
    );
    assert_eq!((first.requests().len(), second.requests().len()), (1, 1));
}

/// Guards against a kill -9 that lost the charge of the calls in flight (18 calls made,
/// 16 charged), and against parallel arms passing the money cap across kills and
/// resumes: a call's reservation is written before the call, so the process that
/// resumes charges it.
#[test]
fn parallel_arms_killed_mid_call_and_resumed_charge_every_call_made_and_never_pass_the_cap() {
    let cli = trip();
    let (cap, out) = (0.7, 40);
    let price = forktrail::Price {
        input: 200.0,
        output: 200.0,
        cached: None,
    };
    // What the stub bills a request: two bytes a token in (denser than the four
    // characters a token estimates assume), `out` tokens out.
    let bill = move |bytes: usize| price.cost(bytes as u64 / 2, out, 0);
    let hang_at = Arc::new(AtomicUsize::new(3));
    let (count, hang) = (Arc::new(AtomicUsize::new(0)), Arc::clone(&hang_at));
    let seen = Arc::clone(&count);
    let stub = stub::scripted(move |request, bytes| {
        let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
        let mut reply = travel::replay("model-a", request);
        let mut body: Value = serde_json::from_str(&reply.body).unwrap();
        body["usage"] = json!({"prompt_tokens": bytes / 2, "completion_tokens": out});
        reply.body = body.to_string();
        // One request hangs until its process is killed; the others keep arms busy.
        reply.delay = Some(match n == hang.load(Ordering::SeqCst) {
            true => Duration::from_secs(30),
            false => Duration::from_millis(20),
        });
        reply
    });
    let arm = |n: usize| {
        format!(
            "name=a{n},model=model-a,endpoint={},max-tokens=80",
            stub.url
        )
    };
    let (a1, a2, a3) = (arm(1), arm(2), arm(3));
    let mut args = vec![
        "compare", "trip", "--at", "2", "--arm", &a1, "--arm", &a2, "--arm", &a3,
    ];
    args.extend([
        "--price",
        "model-a=200/200",
        "--budget-usd",
        "0.7",
        "--parallel",
        "3",
    ]);
    let spawn = |args: &[&str]| {
        cli.command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // The first process is killed with the hanging call (and maybe others) in flight.
    let mut child = spawn(&args);
    wait_until("five requests", || stub.requests().len() >= 5);
    child.kill().unwrap();
    child.wait().unwrap();
    let id = cli.json(&["comparisons", "--json"])[0]["comparison"]
        .as_str()
        .unwrap()
        .to_string();
    // A resume is killed the same way, if the budget lets it call that far.
    hang_at.store(stub.requests().len() + 2, Ordering::SeqCst);
    let mut child = spawn(&["jobs", "resume", &id, "--parallel", "3"]);
    wait_until("the resume's hanging request, or its end", || {
        stub.requests().len() >= hang_at.load(Ordering::SeqCst)
            || child.try_wait().unwrap().is_some()
    });
    let _ = child.kill();
    child.wait().unwrap();
    let kills = 1 + usize::from(stub.requests().len() >= hang_at.load(Ordering::SeqCst));
    hang_at.store(usize::MAX, Ordering::SeqCst);
    let table = cli.ok(&["jobs", "resume", &id, "--parallel", "3"]);
    let c = cli.json(&["jobs", "show", &id, "--json"]);
    assert_eq!(c["status"], "ended", "{table}");
    let charged = c["charged_usd"].as_f64().unwrap();
    let billed: f64 = stub
        .requests()
        .iter()
        .map(|r| bill(r.to_string().len()))
        .sum();
    let recorded: f64 = c["arms"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|a| a["calls"].as_array().cloned().unwrap_or_default())
        .map(|call| call["charged_usd"].as_f64().unwrap())
        .sum();
    assert!(
        charged <= cap + 1e-9,
        "charged ${charged} past the ${cap} cap:\n{table}"
    );
    assert!(
        billed <= charged + 1e-9,
        "the endpoint billed ${billed} for {} calls, the budget charged ${charged}",
        stub.requests().len()
    );
    assert!(
        charged > recorded + 1e-9,
        "the calls lost to the kill are charged beside the {} recorded: ${charged} vs ${recorded}",
        c["arms"].as_array().unwrap().len()
    );
    for arm in c["arms"].as_array().unwrap().iter().skip(1) {
        let status = arm["status"].as_str().unwrap();
        assert!(
            ["complete", "budget_exhausted"].contains(&status),
            "{status}: {}",
            arm["detail"]
        );
    }
    println!(
        "{kills} kills, {} calls made, {} recorded: billed ${billed:.4}, charged ${charged:.4} \
         (recorded ${recorded:.4}) of ${cap}",
        stub.requests().len(),
        c["arms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["calls"].as_array().map_or(0, Vec::len))
            .sum::<usize>()
    );
}

/// Guards against per-arm statistics that do not follow from the samples: three samples
/// of one arm on the recorded-tool path, the stub billing each request 100 tokens in
/// and 10 × its number out (samples of 500, 660 and 820 tokens), summarised by hand.
#[test]
fn compare_with_samples_gives_per_arm_statistics_a_hand_computation_matches() {
    let cli = trip();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    let a = stub::scripted(move |request, _| {
        let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
        let mut reply = travel::replay("model-a", request);
        let mut body: Value = serde_json::from_str(&reply.body).unwrap();
        body["usage"] = json!({"prompt_tokens": 100, "completion_tokens": 10 * n});
        reply.body = body.to_string();
        reply
    });
    let only = arm("a", "model-a", &a);
    let c = cli.json(&[
        "compare",
        "trip",
        "--at",
        "2",
        "--arm",
        &only,
        "--samples",
        "3",
        "--json",
    ]);
    let samples: Vec<&Value> = c["arms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["name"] == "a")
        .collect();
    assert_eq!(samples.len(), 3, "{c:#}");
    let tokens: Vec<f64> = samples
        .iter()
        .map(|s| {
            let f = &s["figures"];
            (f["input_tokens"].as_u64().unwrap() + f["output_tokens"].as_u64().unwrap()) as f64
        })
        .collect();
    assert_eq!(tokens, [500.0, 660.0, 820.0]);
    let numbers: Vec<u64> = samples
        .iter()
        .map(|s| s["sample"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
    // By hand: mean 660, median 660, s = 160, t(0.975, 2) = 4.303.
    let half = 4.303 * 160.0 / 3f64.sqrt();
    let stats = c["stats"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "a")
        .unwrap();
    let t = &stats["tokens"];
    assert_eq!(
        (t["n"].as_u64(), t["mean"].as_f64(), t["median"].as_f64()),
        (Some(3), Some(660.0), Some(660.0))
    );
    assert!(
        (t["low"].as_f64().unwrap() - (660.0 - half)).abs() < 1e-6,
        "{t}"
    );
    assert!(
        (t["high"].as_f64().unwrap() - (660.0 + half)).abs() < 1e-6,
        "{t}"
    );
    // Every sample took the recording's four steps: no spread.
    let s = &stats["steps"];
    assert_eq!(
        (s["mean"].as_f64(), s["low"].as_f64(), s["high"].as_f64()),
        (Some(4.0), Some(4.0), Some(4.0))
    );
    assert_eq!(stats["samples"], 3);
    // Nothing is judged on the recorded-tool path.
    assert!(stats["pass_rate"].is_null() && stats["judged"] == 0);
    // The table gives the same.
    let table = cli.ok(&["jobs", "show", c["comparison"].as_str().unwrap()]);
    assert!(table.contains("660 (median 660, 95% 263–1057)"), "{table}");
}
