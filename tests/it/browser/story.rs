//! The web UI tells the story, in Chromium at 390 and 1,400 px, light and dark: a
//! model's answer appears in the thread at its turn (followed in place while it is
//! written), a branch goes on past a tool call answered from the recording, every table
//! cell and heading holds its longest word, headings and errors name sessions (no
//! UUIDs), turn 4's Fork and Compare are a few keys away, and a refused token is
//! worded for people and asked for again.

use super::*;
use common::stub::{self, Reply};

/// The travel session served in-process, its model (`model-a`, as recorded, each
/// answer after `delay`) the one endpoint offered.
struct Travel {
    base: String,
    root: String,
    store: Arc<forktrail::Store>,
    _model: stub::Stub,
}

fn travel_served(delay: Duration) -> Travel {
    let model = stub::scripted(move |request, _| Reply {
        delay: Some(delay),
        ..travel::replay("model-a", request)
    });
    let store = Arc::new(forktrail::Store::in_memory().unwrap());
    let root = travel::session(&store, "trip");
    let addr = common::serve_in_process(
        Arc::clone(&store),
        forktrail::server::ServerConfig {
            token: Some(TOKEN.into()),
            model_endpoints: vec![model.url.clone()],
            ..Default::default()
        },
    );
    Travel {
        base: format!("http://{addr}"),
        root: root.to_string(),
        store,
        _model: model,
    }
}

/// Types the token into the header's box, and waits until it is kept.
async fn keep_token(c: &Client, token: &str) {
    type_into(c, "#token-input", token).await;
    click(c, Locator::Css("#token-form button[type=submit]")).await;
    wait_for_text(c, "kept for this tab", 5).await;
}

/// Types `text` into the field `css` finds, brought into view first, as a person would.
async fn fill(c: &Client, css: &str, text: &str) {
    let field = c.find(Locator::Css(css)).await.unwrap();
    c.execute(
        "arguments[0].scrollIntoView({block: 'center'})",
        vec![serde_json::to_value(&field).unwrap()],
    )
    .await
    .unwrap();
    field.send_keys(text).await.unwrap();
}

/// Whether the element `css` finds is shown.
async fn shown(c: &Client, css: &str) -> bool {
    match c.find(Locator::Css(css)).await {
        Ok(e) => e.is_displayed().await.unwrap_or(false),
        Err(_) => false,
    }
}

#[test]
fn an_answer_appears_at_its_turn_and_a_branch_goes_on_past_a_tool_call() {
    let Some(driver) = chromedriver() else { return };
    let axe = axe_source();
    let t = travel_served(Duration::from_millis(2500));
    let mut problems = Vec::new();
    runtime().block_on(async {
        for (scheme, switches) in SCHEMES {
            let c = browser_with(&driver, switches).await;
            for (w, h) in WIDTHS {
                c.set_window_size(w, h).await.unwrap();
                let view = format!("{w} px, {scheme}");
                c.goto(&format!("{}/ui/sessions/{}", t.base, t.root))
                    .await
                    .unwrap();
                if w == WIDTHS[0].0 {
                    keep_token(&c, TOKEN).await;
                }
                // Edit turn 1 and have the model answer it.
                click(&c, Locator::Css("#turn-1 details.edit summary")).await;
                let edit = c
                    .find(Locator::Css("#turn-1 details.edit textarea"))
                    .await
                    .unwrap();
                edit.clear().await.unwrap();
                edit.send_keys("Weather in Paris tomorrow?").await.unwrap();
                // No assistant turn precedes the edited one: the model is named.
                click(
                    &c,
                    Locator::Css("#turn-1 details.edit details.answer summary"),
                )
                .await;
                fill(&c, "#turn-1 details.edit input[name=model]", "model-a").await;
                click(&c, Locator::Css("#turn-1 details.edit button.send-answer")).await;
                // Back in the thread, the new branch's, at turn 2 where the answer will be.
                let path =
                    wait_for_path(&c, "/ui/sessions/", &format!("/ui/sessions/{}", t.root), 10)
                        .await;
                let fork = path.trim_start_matches("/ui/sessions/").to_string();
                let url = c.current_url().await.unwrap();
                assert_eq!(url.fragment(), Some("turn-2"), "{view}: {url}");
                // While the model writes: its place in the thread, and how long it has run.
                let waiting = text_at(&c, "li.pending#turn-2").await;
                assert!(
                    waiting.contains("The model is answering"),
                    "{view}: {waiting}"
                );
                c.execute("window.stayed = true", vec![]).await.unwrap();
                wait_for_css(&c, "li.turn:not(.pending)#turn-2 ul.calls", 20).await;
                let answer = text_at(&c, "#turn-2").await;
                assert!(answer.contains("get_weather"), "{view}: {answer}");
                let stayed = c.execute("return window.stayed === true", vec![]).await;
                assert_eq!(
                    stayed.unwrap(),
                    json!(true),
                    "{view}: shown in place, not reloaded"
                );
                assert!(!shown(&c, "li.pending").await, "{view}");
                if let Some(out) = past_the_edge(&c).await {
                    problems.push(format!("{view}, the answer: {out}"));
                }
                // The model called a tool: the composer offers the recording's answer.
                c.refresh().await.unwrap();
                let offer = text_at(&c, "#composer p.open-calls").await;
                assert!(offer.contains("get_weather"), "{view}: {offer}");
                if let Some(axe) = &axe {
                    for v in serious_violations(&c, axe).await {
                        problems.push(format!("{view}, the open calls: {v}"));
                    }
                }
                click(&c, Locator::Css("#composer button.recorded-answer")).await;
                wait_for_css(&c, "li.turn:not(.pending)#turn-4 .model", 20).await;
                let turns = rest(&t.base, &format!("/sessions/{fork}/replay")).await;
                let said: Vec<(&str, &str)> = turns
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| (t["role"].as_str().unwrap(), t["content"].as_str().unwrap()))
                    .collect();
                assert_eq!(
                    &said[1..],
                    &[
                        ("user", "Weather in Paris tomorrow?"),
                        ("assistant", ""),
                        ("tool", "18C, sunny"),
                        ("assistant", "It is 18C and sunny."),
                    ],
                    "{view}"
                );
                assert!(text_at(&c, "#turn-3").await.contains("18C, sunny"));
                if let Some(out) = past_the_edge(&c).await {
                    problems.push(format!("{view}, past the tool call: {out}"));
                }
                screenshot(&c, &format!("answer-in-thread-{w}-{scheme}.png")).await;
            }
            c.close().await.unwrap();
        }
    });
    let sessions = t.store.count_sessions(&Default::default()).unwrap();
    assert_eq!(sessions, 5, "the recording and a branch per view");
    none_of(&problems);
}

/// Every `td`, `th`, `h1` and `h2` of the page narrower than a word it holds (code,
/// data such as a tool's JSON, and URLs, which wrap as code does, aside):
/// `tag "word" word-width > cell-width`.
async fn squeezed(c: &Client) -> Vec<String> {
    strings(
        c,
        "const ctx = document.createElement('canvas').getContext('2d'), out = [];
             for (const box of document.querySelectorAll('td, th, h1, h2')) {
               const s = getComputedStyle(box);
               const room = box.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
               if (box.clientWidth === 0) continue;
               const walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
               for (let n = walk.nextNode(); n; n = walk.nextNode()) {
                 const p = n.parentElement;
                 if (p.closest('pre, code, .code, .data') || p.offsetParent === null) continue;
                 ctx.font = getComputedStyle(p).font;
                 for (const word of n.textContent.split(/\\s+/)) {
                   const wide = ctx.measureText(word).width;
                   if (word && !word.includes('://') && wide > room + 1)
                     out.push(box.tagName.toLowerCase() + ' \"' + word + '\" ' + Math.round(wide) + ' > ' + Math.round(room));
                 }
               }
             }
             return out.slice(0, 8);",
    )
    .await
}

/// The strings the page's `script` returns.
async fn strings(c: &Client, script: &str) -> Vec<String> {
    let found = c.execute(script, vec![]).await.unwrap();
    found
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The texts of the page's headings and error sentences that hold a UUID.
async fn uuids_shown(c: &Client) -> Vec<String> {
    strings(
        c,
        "const id = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
             return [...document.querySelectorAll('h1, h2, p.error, .error[role=alert]')]
               .map(e => e.innerText).filter(t => id.test(t));",
    )
    .await
}

/// Presses Tab from the page's top until `css` has the focus, by way of the skip link
/// and `j` to turn 4; the Tabs it took (Enter and `j` are not Tabs).
async fn tabs_to_turn_4(c: &Client, css: &str) -> usize {
    let to_skip = tab_to(c, "a.skip", 5).await;
    keys(c, ENTER).await;
    keys(c, "jjjj").await;
    let focused = c
        .execute("return document.activeElement.id", vec![])
        .await
        .unwrap();
    assert_eq!(focused, json!("turn-4"), "j moves turn by turn");
    to_skip + tab_to(c, css, 20).await
}

#[test]
fn cells_hold_their_words_headings_name_sessions_and_turn_4_is_a_few_keys_away() {
    let Some(driver) = chromedriver() else { return };
    let (server, endpoint) = serve_offering_nothing();
    let base = server.base.clone();
    let (root, fork, pages) = runtime().block_on(async {
        let sessions = rest(&base, "/sessions").await;
        let root = session_on(&sessions, "main");
        let fork = session_on(&sessions, "booking");
        let job = post_json(
            &base,
            &format!("/sessions/{root}/regenerate"),
            json!({"at": 2, "model": "m", "endpoint": endpoint}),
        )
        .await;
        let comparison = post_json(
            &base,
            &format!("/sessions/{root}/compare"),
            json!({"at": 2, "arms": [{"model": "m", "endpoint": endpoint}, {"model": "n", "endpoint": endpoint}]}),
        )
        .await;
        let pages = vec![
            format!("/ui/comparisons/{}", comparison["comparison"].as_str().unwrap()),
            format!("/ui/sessions/{root}/compare?at=2"),
            "/".to_string(),
            "/?q=train".into(),
            format!("/ui/sessions/{root}"),
            format!("/ui/sessions/{fork}"),
            format!("/ui/sessions/{root}/tree"),
            format!("/ui/diff?a={root}&b={fork}"),
            format!("/ui/sessions/{root}/turns/1"),
            "/ui/sparql?name=audit-turn-origin".into(),
            format!("/ui/jobs/{}", job["job"].as_str().unwrap()),
        ];
        (root, fork, pages)
    });
    let mut problems = Vec::new();
    let mut tabs = Vec::new();
    runtime().block_on(async {
        for (scheme, switches) in SCHEMES {
            let c = browser_with(&driver, switches).await;
            for (w, h) in WIDTHS {
                c.set_window_size(w, h).await.unwrap();
                let view = format!("{w} px, {scheme}");
                for path in &pages {
                    c.goto(&format!("{base}{path}")).await.unwrap();
                    for s in squeezed(&c).await {
                        problems.push(format!("{path} at {view}: {s}"));
                    }
                    for s in uuids_shown(&c).await {
                        problems.push(format!("{path} at {view}: an id in {s:?}"));
                    }
                    if let Some(out) = past_the_edge(&c).await {
                        problems.push(format!("{path} at {view}: {out}"));
                    }
                }
                // A phone shows the first turn without scrolling.
                c.goto(&format!("{base}/ui/sessions/{fork}")).await.unwrap();
                let top = c
                    .execute(
                        "return [document.getElementById('turn-0').getBoundingClientRect().top, innerHeight]",
                        vec![],
                    )
                    .await
                    .unwrap();
                if top[0].as_f64() >= top[1].as_f64() {
                    problems.push(format!("{view}: the first turn starts at {top}"));
                }

                // The keyboard: turn 4's Fork and Compare, counted in Tabs.
                c.goto(&format!("{base}/ui/sessions/{root}")).await.unwrap();
                // Each scheme's browser keeps the token in its tab from its first view on.
                if w == WIDTHS[0].0 {
                    keep_token(&c, TOKEN).await;
                }
                // Kept: no empty token box beside "kept for this tab".
                assert!(!shown(&c, "#token-input").await, "{view}");
                assert!(shown(&c, "#token-forget").await, "{view}");
                c.refresh().await.unwrap();
                let fork_tabs = tabs_to_turn_4(&c, "#turn-4 details.fork summary").await;
                c.refresh().await.unwrap();
                let compare_tabs = tabs_to_turn_4(&c, "#turn-4 a.compare").await;
                tabs.push((view.clone(), fork_tabs, compare_tabs));

                // A label the parent's child has: refused, the sessions named, no id.
                click(&c, Locator::Css("#turn-4 details.fork summary")).await;
                fill(&c, "#fork-label-4", "budget").await;
                click(&c, Locator::Css("#turn-4 details.fork button[type=submit]")).await;
                let refusal = wait_for_css_text(&c, "#turn-4 p.error[role=alert]").await;
                assert!(
                    refusal.contains("“Paris to Amsterdam by train” already has a child")
                        && refusal.contains("(“budget”)"),
                    "{view}: {refusal}"
                );
                for s in uuids_shown(&c).await {
                    problems.push(format!("the refused fork at {view}: an id in {s:?}"));
                }
                // A wrong token: refused in words, forgotten, and asked for again in
                // the open; the right one kept again.
                c.goto(&format!("{base}/ui/sessions/{root}")).await.unwrap();
                click(&c, Locator::Css("#token-forget")).await;
                keep_token(&c, "not-the-token").await;
                click(&c, Locator::Css("#turn-2 details.fork summary")).await;
                click(&c, Locator::Css("#turn-2 details.fork button[type=submit]")).await;
                let refusal = wait_for_css_text(&c, "#turn-2 p.error[role=alert]").await;
                assert!(refusal.contains("not this server's"), "{view}: {refusal}");
                assert!(
                    !refusal.contains("Authorization") && !refusal.contains("header"),
                    "{view}: {refusal}"
                );
                assert!(shown(&c, "#fork-token-2").await, "{view}: the form asks again");
                assert!(shown(&c, "#token-input").await, "{view}: and so does the header");
                // The estimate says nothing answers at the endpoint, and has the focus.
                c.refresh().await.unwrap();
                keep_token(&c, TOKEN).await;
                click(&c, Locator::Css("#turn-2 details.what-if summary")).await;
                fill(&c, "#wi-model-2", "m").await;
                click(&c, Locator::Css("#turn-2 details.what-if button[type=submit]")).await;
                let warned = wait_for_css_text(&c, "p.unreachable").await;
                assert!(
                    warned.contains(&format!("Nothing answers at {endpoint}")),
                    "{view}: {warned}"
                );
                let focus = c
                    .execute("return document.activeElement.tagName", vec![])
                    .await
                    .unwrap();
                assert_eq!(focus, json!("MAIN"), "{view}: the estimate has the focus");
            }
            c.close().await.unwrap();
        }

    });
    eprintln!("Tabs to turn 4's Fork and Compare: {tabs:?}");
    for (view, fork, compare) in &tabs {
        assert!(
            *fork <= 10 && *compare <= 10,
            "{view}: {fork} and {compare} Tabs"
        );
    }
    none_of(&problems);
}

/// Waits (up to ten seconds) for the element `css` finds; its text.
async fn wait_for_css_text(c: &Client, css: &str) -> String {
    wait_for_css(c, css, 10).await;
    text_at(c, css).await
}
