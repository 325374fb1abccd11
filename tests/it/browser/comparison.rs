//! A comparison names its winner, in a real browser at a phone's and a desktop's width,
//! light and dark. The travel agent's conversation is recorded through the model proxy
//! (so the recording has its own tokens, cost and time), then compared from its first
//! answer with three scripted models: one replaying it, one rewording it around the very
//! calls it made (and using fewer tokens), one booking a flight it was never asked to.
//! The page says each arm's figures against the recording's, computed from the stub's
//! usage and the prices given, names the winner in one line, marks the words an arm
//! changed, and tells where the words part from where the tool calls do. The compare
//! form offers the recording's own tools, and no heading or error names a session by
//! its UUID.

use super::{
    axe_source, browser_with, chromedriver, click, divergences, figure, past_the_edge, screenshot,
    serious_violations, type_into, wait_for_text, SCHEMES, TOKEN, WIDTHS,
};
use crate::common::{self, runtime, stub, travel};
use fantoccini::{Client, Locator};
use forktrail::{Price, ProxyConfig, SessionId, Store, UpstreamKind};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A UUID anywhere in a text, as the page's script finds it.
const UUID: &str = "/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i";

/// `model-c`: the recording in other words around the same calls: "Let me check the
/// weather." beside get_weather(Paris), "It is 18C and very sunny.", then get_price as
/// recorded and the recorded last answer; usage 90/10, 100/8, 120/12, 130/6 (440 in,
/// 36 out).
fn rewords(model: &str, request: &Value) -> stub::Reply {
    let paris = json!({"city": "Paris"});
    stub::Reply::ok(match travel::answered(request) {
        0 => stub::completion(
            model,
            Some("Let me check the weather."),
            &[("z1", "get_weather", paris)],
            (90, 10, 0),
            "tool_calls",
        ),
        1 => stub::completion(
            model,
            Some("It is 18C and very sunny."),
            &[],
            (100, 8, 0),
            "stop",
        ),
        2 => stub::completion(
            model,
            None,
            &[("z2", "get_price", json!({"mode": "train", "to": "Paris"}))],
            (120, 12, 0),
            "tool_calls",
        ),
        _ => stub::completion(model, Some("49 EUR by train."), &[], (130, 6, 0), "stop"),
    })
}

/// The travel agent's conversation, its model `model-a` behind the proxy of the server
/// at `base`: the user asks, the agent answers each tool call with the result the
/// recording holds, then asks about the train. Returns the session it was recorded in.
fn record_through_the_proxy(store: &Store, base: &str) -> SessionId {
    let http = reqwest::blocking::Client::new();
    let results = json!({"get_weather": "18C, sunny", "get_price": "49 EUR"});
    let mut messages = vec![json!({"role": "user", "content": "Weather in Paris?"})];
    for _ in 0..4 {
        let answer: Value = http
            .post(format!("{base}/proxy/openai/v1/chat/completions"))
            .bearer_auth("sk-travel-agent")
            .json(&json!({"model": "model-a", "messages": messages}))
            .send()
            .unwrap()
            .json()
            .unwrap();
        let message = answer["choices"][0]["message"].clone();
        messages.push(message.clone());
        match message["tool_calls"].as_array() {
            Some(calls) => messages.extend(calls.iter().map(|c| {
                json!({"role": "tool", "tool_call_id": c["id"],
                       "content": results[c["function"]["name"].as_str().unwrap()]})
            })),
            None => messages.push(json!({"role": "user", "content": "And the train price?"})),
        }
    }
    // Calls are recorded as they end, off the answer's path.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let sessions = store.list().unwrap();
        if let Some(s) = sessions
            .iter()
            .find(|s| store.model_calls(&s.session).unwrap().len() == 4)
        {
            let turns = store.load(&s.session, None).unwrap();
            assert_eq!(turns.len(), 8, "{turns:#?}");
            return s.session.clone();
        }
        assert!(Instant::now() < deadline, "calls recorded: {sessions:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Each arm's figures against the recording, as the page lists them.
async fn against(c: &Client, arm: &str) -> Vec<String> {
    let shown = c
        .execute(
            "return [...document.querySelectorAll(`#figures td[data-arm='${arguments[0]}'] \
             li[data-delta]`)].map(li => li.innerText);",
            vec![json!(arm)],
        )
        .await
        .unwrap();
    serde_json::from_value(shown).unwrap()
}

/// The texts of the page's h1 and h2 that name a UUID, and of its error sentences.
async fn uuids_in_headings(c: &Client) -> Value {
    c.execute(
        &format!(
            "return [...document.querySelectorAll('h1, h2, .error')].map(e => e.innerText)\
             .filter(t => {UUID}.test(t));"
        ),
        vec![],
    )
    .await
    .unwrap()
}

/// How the time of an arm measuring `arm` ms stands against a recording's `recorded`.
fn time_delta(arm: u64, recorded: u64) -> String {
    let d = arm as f64 - recorded as f64;
    if (d / 100.0).round() == 0.0 {
        "same time".into()
    } else {
        format!(
            "{}{:.1} s",
            if d < 0.0 { "−" } else { "+" },
            d.abs() / 1000.0
        )
    }
}

#[test]
fn a_comparison_names_its_winner_with_each_arm_against_the_recording() {
    let Some(driver) = chromedriver() else { return };
    let Some(axe) = axe_source() else { return };
    let models = stub::scripted(|request, _| {
        let model = request["model"].as_str().unwrap_or("");
        match model {
            "model-a" => travel::replay(model, request),
            "model-b" => travel::books_a_flight(model, request),
            _ => rewords(model, request),
        }
    });
    let price = |input, output| Price {
        input,
        output,
        cached: None,
    };
    let mut proxy = ProxyConfig::default();
    proxy
        .upstreams
        .insert(UpstreamKind::Openai, models.url.clone());
    proxy.prices.insert("model-a".into(), price(1.0, 2.0));
    let store = Arc::new(Store::in_memory().unwrap());
    let addr = common::serve_in_process(
        Arc::clone(&store),
        forktrail::server::ServerConfig {
            token: Some(TOKEN.into()),
            model_endpoints: vec![models.url.clone()],
            proxy,
            ..Default::default()
        },
    );
    let base = format!("http://{addr}");
    let root = record_through_the_proxy(&store, &base);
    let arm = |name: &str, model: &str| forktrail::Arm {
        name: Some(name.into()),
        model: model.into(),
        endpoint: Some(models.url.clone()),
        ..Default::default()
    };
    let mut options = forktrail::CompareOptions {
        at: 1,
        arms: vec![
            arm("same", "model-a"),
            arm("other", "model-b"),
            arm("reworded", "model-c"),
        ],
        ..Default::default()
    };
    options.prices.insert("model-a".into(), price(1.0, 2.0));
    options.prices.insert("model-b".into(), price(100.0, 200.0));
    options.prices.insert("model-c".into(), price(1.0, 2.0));
    let made = store.compare(&root, &options).unwrap();
    let page = format!("{base}/ui/comparisons/{}", made.comparison);

    // What the page must say, from the stub's usage and the prices: the recording and
    // `same` 520 in + 36 out = 556 tokens, $0.000592; `other` 180 + 15 = 195 tokens,
    // 180 × $100 + 15 × $200 per million = $0.021 (35× the recording's), one step
    // fewer; `reworded` 440 + 36 = 476 tokens, $0.000512 (0.86×).
    let latency = |n: usize| made.arms[n].figures.latency_ms.unwrap();
    let expected = [
        (
            "same",
            ["same steps", "same tokens", "same cost"],
            time_delta(latency(1), latency(0)),
        ),
        (
            "other",
            ["−1 step", "−361 tokens", "35× the cost"],
            time_delta(latency(2), latency(0)),
        ),
        (
            "reworded",
            ["same steps", "−80 tokens", "0.86× the cost"],
            time_delta(latency(3), latency(0)),
        ),
    ];
    runtime().block_on(async {
        for (scheme, switches) in SCHEMES {
            let c = browser_with(&driver, switches).await;
            for (w, h) in WIDTHS {
                c.set_window_size(w, h).await.unwrap();
                c.goto(&page).await.unwrap();
                for (name, figures, time) in &expected {
                    let mut want: Vec<String> = figures.iter().map(|f| f.to_string()).collect();
                    want.push(time.clone());
                    assert_eq!(against(&c, name).await, want, "{name} at {w}, {scheme}");
                }
                assert_eq!(
                    figure(&c, "baseline", "against_baseline").await,
                    "(the baseline)"
                );
                let verdict = c.find(Locator::Css("#verdict")).await.unwrap();
                assert_eq!(
                    verdict.attr("data-winner").await.unwrap().as_deref(),
                    Some("reworded")
                );
                assert_eq!(
                    verdict.attr("data-on").await.unwrap().as_deref(),
                    Some("cost")
                );
                let line = verdict.text().await.unwrap();
                assert!(
                    line.starts_with(
                        "Verdict: reworded wins on cost: $0.000512 against $0.000592 for same; \
                         against the recording: same steps, −80 tokens, 0.86× the cost, "
                    ),
                    "{line}"
                );
                assert_eq!(uuids_in_headings(&c).await, json!([]), "at {w}, {scheme}");
                if let Some(out) = past_the_edge(&c).await {
                    panic!("the comparison at {w} px, {scheme}: {out}");
                }
                let problems = serious_violations(&c, &axe).await;
                assert!(problems.is_empty(), "at {w} px, {scheme}: {problems:#?}");
                screenshot(&c, &format!("comparison-verdict-{scheme}-{w}.png")).await;
            }
            c.close().await.unwrap();
        }
        let c = browser_with(&driver, &[]).await;
        c.goto(&page).await.unwrap();
        the_words_and_the_calls_part_apart(&c).await;
        the_form_offers_the_recordings_tools(&c, &base, &root, &axe).await;
        c.close().await.unwrap();
    });
}

/// `reworded` parts from the recording in words at once (turn 1) but never in its tool
/// calls; `other` in words at 3, in tool calls at 5 (book_flight for get_price). The
/// words an arm changed are marked in its cell.
async fn the_words_and_the_calls_part_apart(c: &Client) {
    for (arm, words, calls) in [
        ("same", "none: as recorded", "none: the recorded calls"),
        ("other", "turn 3", "turn 5"),
        ("reworded", "turn 1", "none: the recorded calls"),
    ] {
        assert_eq!(
            figure(c, arm, "first_text_divergence").await,
            words,
            "{arm}"
        );
        assert_eq!(
            figure(c, arm, "first_tool_call_divergence").await,
            calls,
            "{arm}"
        );
    }
    // In the page's order: turn 1's row, then turn 3's.
    let marked: Vec<(Value, Value)> = divergences(c)
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m[0].clone(), m[1].clone()))
        .collect();
    assert_eq!(
        marked,
        [
            (json!("reworded"), json!("1")),
            (json!("other"), json!("3"))
        ]
    );
    let calls = c
        .execute(
            "return [...document.querySelectorAll('#turns td.calls-diverge')].map(td => \
             [td.dataset.arm, td.parentElement.dataset.index, td.querySelector('.marker.calls').innerText]);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(calls, json!([["other", "5", "◆ first other tool call"]]));
    let heading = c
        .find(Locator::Css(
            "#turns th[data-arm='reworded'] .calls-divergence",
        ))
        .await
        .unwrap();
    assert_eq!(heading.text().await.unwrap(), "the recorded tool calls");
    // The words changed, marked in the arm's cell against the recording's.
    let marks = c
        .execute(
            "return [...document.querySelectorAll('#turns td[data-arm=reworded] span.added')]\
             .map(s => [s.closest('tr').dataset.index, s.innerText]);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        marks,
        json!([["1", "Let me check the weather."], ["3", "very "]])
    );
    let same = c
        .find_all(Locator::Css("#turns td[data-arm=same] span.added"))
        .await
        .unwrap();
    assert!(same.is_empty(), "the replaying arm changed no word");
}

/// The compare form from the recording's first answer offers the tools it called, typed
/// from their recorded arguments; its estimate and its errors name the session by its
/// label.
async fn the_form_offers_the_recordings_tools(c: &Client, base: &str, root: &SessionId, axe: &str) {
    c.goto(&format!("{base}/ui/sessions/{root}/compare?at=1"))
        .await
        .unwrap();
    let tools = c
        .find(Locator::Css("#compare-tools"))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap()
        .unwrap();
    let tools: Value = serde_json::from_str(&tools).unwrap();
    let string = json!({"type": "string"});
    assert_eq!(
        tools,
        json!([
            {"type": "function", "function": {"name": "get_weather",
                "description": "As the recorded agent called it (once)",
                "parameters": {"type": "object", "properties": {"city": string},
                               "required": ["city"]}}},
            {"type": "function", "function": {"name": "get_price",
                "description": "As the recorded agent called it (once)",
                "parameters": {"type": "object", "properties": {"mode": string, "to": string},
                               "required": ["mode", "to"]}}},
        ])
    );
    assert_eq!(uuids_in_headings(c).await, json!([]));
    assert!(serious_violations(c, axe).await.is_empty());
    // The estimate, its heading naming the session by its label.
    type_into(c, "#token-input", TOKEN).await;
    click(c, Locator::Css("#token-form button")).await;
    wait_for_text(c, "kept for this tab", 5).await;
    click(c, Locator::Css("form.compare button[type=submit]")).await;
    wait_for_text(c, "Nothing has been sent or written yet", 10).await;
    let h1 = c
        .find(Locator::Css("h1"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(h1.starts_with("Estimate: compare models on "), "{h1}");
    assert_eq!(uuids_in_headings(c).await, json!([]));
    assert!(past_the_edge(c).await.is_none());
    // An error names the session by its label too.
    c.goto(&format!("{base}/ui/sessions/{root}/compare?at=99"))
        .await
        .unwrap();
    let error = c
        .find(Locator::Css("p.error"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        error.starts_with("index 99 is out of range for session “"),
        "{error}"
    );
    assert_eq!(uuids_in_headings(c).await, json!([]));
}
