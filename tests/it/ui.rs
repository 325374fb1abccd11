//! The web UI, in process: every view and form, their errors (unknown session, bad
//! index, no token), stored text shown and never run, and the headers that keep it so.
//! `tests/browser.rs` drives the same pages in Chromium.
#![cfg(feature = "server")]

use crate::common;

use common::travel;

use forktrail::server::ServerConfig;
use forktrail::{demo, NewTurn, Role, SessionId, Store};
use reqwest::blocking::get;
use reqwest::header::HeaderMap;
use std::sync::Arc;

const TOKEN: &str = "ui-token";

/// The web UI's server, of a store holding the demo tree.
type Ui = common::server::Demo;

fn start(store: Arc<Store>) -> Ui {
    start_with(store, ServerConfig::default())
}

fn start_with(store: Arc<Store>, config: ServerConfig) -> Ui {
    common::server::Server::demo(store, config)
}

/// A server that takes writes with [`TOKEN`].
fn writable(store: &Arc<Store>) -> Ui {
    start_with(
        Arc::clone(store),
        ServerConfig {
            token: Some(TOKEN.into()),
            ..ServerConfig::default()
        },
    )
}

/// A form POST, redirects not followed: status, Location, page text.
fn post(ui: &Ui, path: &str, form: &[(&str, &str)], bearer: Option<&str>) -> (u16, String, String) {
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut request = client.post(format!("{}{path}", ui.base)).form(form);
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    let r = request.send().unwrap();
    let status = r.status().as_u16();
    let location = r
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, location, r.text().unwrap())
}

/// The status, headers and text of a page.
fn page(ui: &Ui, path: &str) -> (u16, HeaderMap, String) {
    let r = get(format!("{}{path}", ui.base)).unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, headers, r.text().unwrap())
}

/// The session and index of the best hit for `text`, as the library finds it.
fn store_hit(ui: &Ui, text: &str) -> (String, u64) {
    let hit = ui
        .store
        .search(&forktrail::SearchQuery {
            text: text.into(),
            ..Default::default()
        })
        .unwrap()
        .hits
        .remove(0);
    (hit.session.to_string(), hit.index.unwrap())
}

#[test]
fn the_sessions_page_pages_trees_newest_first() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = start(Arc::clone(&store));
    // 30 more trees: 31 in all, 25 a page.
    let mut made = Vec::new();
    for n in 0..30 {
        let id = store
            .create_session(forktrail::NewSession {
                title: Some(format!("tree number {n}")),
                ..Default::default()
            })
            .unwrap();
        made.push(id);
    }
    let (_, _, first) = page(&ui, "/");
    assert!(first.contains("34 sessions in 31 trees"), "{first}");
    assert_eq!(first.matches("<tr class=\"root\">").count(), 25);
    let next = first
        .split("rel=\"next\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a link to the next page")
        .replace("&amp;", "&");
    let (_, _, second) = page(&ui, &next);
    assert_eq!(second.matches("<tr class=\"root\">").count(), 6);
    assert!(!second.contains("rel=\"next\""), "the last page");
    for id in &made {
        let on = |page: &str| page.contains(&format!("href=\"/ui/sessions/{id}\"")) as u8;
        assert_eq!(on(&first) + on(&second), 1, "{id} on exactly one page");
    }
}

#[test]
fn the_sessions_page_lists_every_session_and_searches_them() {
    let ui = start(Arc::new(Store::in_memory().unwrap()));
    let (status, headers, html) = page(&ui, "/");
    assert_eq!(status, 200);
    assert_eq!(
        headers["content-security-policy"],
        "default-src 'self'; frame-ancestors 'none'"
    );
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    for id in [
        &ui.tree.root,
        &ui.tree.budget,
        &ui.tree.model_swap,
        &ui.tree.booking,
    ] {
        assert!(
            html.contains(&format!("href=\"/ui/sessions/{id}\"")),
            "{id}"
        );
    }
    assert!(html.contains("4 sessions in 1 tree,"), "{html}");
    // The root row counts the forks of its tree.
    let root_row = html.split("<tr class=\"root\">").nth(1).unwrap();
    assert!(
        root_row.contains("<td class=\"number\" data-label=\"Forks\">3</td>"),
        "{root_row}"
    );
    // Search: every word must occur, case aside, across contents, titles, branch
    // labels and models; each hit links to its turn.
    let (_, _, found) = page(&ui, "/?q=BUDGET");
    assert!(found.contains(ui.tree.budget.as_str()), "{found}");
    let (_, _, found) = page(&ui, &format!("/?q={}", demo::MODEL_B.to_uppercase()));
    assert!(
        found.contains(ui.tree.model_swap.as_str()) && found.contains(ui.tree.booking.as_str()),
        "{found}"
    );
    let (_, _, found) = page(&ui, "/?q=cheaper");
    assert!(found.contains(ui.tree.budget.as_str()), "{found}");
    assert!(found.contains("<mark>cheaper</mark>"), "{found}");
    let hit = store_hit(&ui, "cheaper");
    assert!(
        found.contains(&format!(
            "href=\"/ui/sessions/{}?from=0#turn-{}\"",
            hit.0, hit.1
        )),
        "{found}"
    );
    let (_, _, none) = page(&ui, "/?q=nobody-here");
    assert!(none.contains("0 hits"), "{none}");
    let (status, _, css) = page(&ui, "/ui/style.css");
    assert_eq!(status, 200);
    assert!(css.contains("li.turn"));
}

#[test]
fn playback_shows_every_turn_in_order_and_marks_the_inherited_ones() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = start(Arc::clone(&store));
    let id = &ui.tree.booking;
    let (status, _, html) = page(&ui, &format!("/ui/sessions/{id}"));
    assert_eq!(status, 200);
    let records = store.replay(id, None).unwrap();
    let mut at = 0;
    for record in &records {
        let marker = format!("id=\"turn-{}\"", record.index);
        let found = html[at..]
            .find(&marker)
            .unwrap_or_else(|| panic!("{marker}"));
        at += found;
    }
    let own = store.info(id).unwrap().own_turns as usize;
    assert_eq!(
        html.matches("class=\"turn inherited\"").count(),
        records.len() - own
    );
    assert!(
        html.contains("from main"),
        "inherited turns name their branch"
    );
}

#[test]
fn stored_markup_is_shown_never_run_and_errors_are_pages() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = start(Arc::clone(&store));
    let id = common::session_with(&store, "xss", 0);
    let attack = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&";
    store.append(&id, NewTurn::new(Role::User, attack)).unwrap();
    let (_, _, html) = page(&ui, "/ui/sessions/xss");
    assert!(!html.contains("<script>alert"), "{html}");
    assert!(!html.contains("<img src=x"), "{html}");
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{html}"
    );
    let (status, _, html) = page(&ui, "/ui/sessions/nope");
    assert_eq!(status, 404);
    assert!(
        html.contains("nope") && html.contains("All sessions"),
        "{html}"
    );
    let (status, _, _) = page(&ui, "/ui/sessions/a%20b");
    assert_eq!(status, 400);
}

#[test]
fn the_tree_page_nests_the_whole_family_and_marks_the_session_it_was_opened_from() {
    let ui = start(Arc::new(Store::in_memory().unwrap()));
    let t = &ui.tree;
    let (status, _, page_html) = page(&ui, &format!("/ui/sessions/{}/tree", t.booking));
    assert_eq!(status, 200);
    // The outline, after the drawing (which marks the session too).
    let (drawn, html) = page_html.split_at(page_html.find("id=\"outline\"").unwrap());
    assert_eq!(drawn.matches("aria-current=\"page\"").count(), 1);
    let at = |id: &forktrail::SessionId| {
        html.find(&format!("href=\"/ui/sessions/{id}"))
            .unwrap_or_else(|| panic!("{id} missing"))
    };
    // Root first; model-swap before booking, which it holds.
    assert!(at(&t.root) < at(&t.budget) && at(&t.root) < at(&t.model_swap));
    assert!(at(&t.model_swap) < at(&t.booking));
    // A fork's link opens it at its fork point.
    let booking = ui.store.info(&t.booking).unwrap().forked_at_index.unwrap();
    assert!(html.contains(&format!(
        "href=\"/ui/sessions/{}?from=0#turn-{booking}\"",
        t.booking
    )));
    assert_eq!(html.matches("aria-current=\"page\"").count(), 1);
    assert!(html[at(&t.booking) - 60..at(&t.booking) + 140].contains("aria-current"));
    assert_eq!(
        html.matches("<details open>").count(),
        2,
        "main and model-swap fold"
    );
    // The playback page links to it.
    let (_, _, playback) = page(&ui, &format!("/ui/sessions/{}", t.budget));
    assert!(playback.contains(&format!("/ui/sessions/{}/tree", t.budget)));
}

#[test]
fn fork_from_here_needs_the_token_checks_the_index_and_lands_on_the_new_branch() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = writable(&store);
    let budget = ui.tree.budget.clone();
    let path = format!("/ui/sessions/{budget}/fork");
    let before = common::quads(&store);
    // No token, a wrong one, a bad index, an index past the end, an unknown session:
    // each an error page naming the problem, and nothing written.
    let (status, _, html) = post(&ui, &path, &[("at", "2"), ("label", "x")], None);
    assert_eq!(status, 401);
    assert!(html.contains("Token needed") && html.contains("Nothing was changed"));
    let (status, _, _) = post(&ui, &path, &[("at", "2"), ("token", "wrong")], None);
    assert_eq!(status, 401);
    let (status, _, html) = post(&ui, &path, &[("at", "two"), ("token", TOKEN)], None);
    assert_eq!(status, 400);
    assert!(
        html.contains("turn index &quot;two&quot; is not a whole number"),
        "{html}"
    );
    let (status, _, html) = post(&ui, &path, &[("at", "99"), ("token", TOKEN)], None);
    assert_eq!(status, 400);
    assert!(
        html.contains("99") && html.contains(budget.as_str()),
        "{html}"
    );
    let (status, _, html) = post(&ui, "/ui/sessions/nope/fork", &[("at", "1")], Some(TOKEN));
    assert_eq!(status, 404);
    assert!(html.contains("nope"));
    assert_eq!(common::quads(&store), before, "nothing written");
    // The token typed into the form (no script), then sent as a header (the script).
    let (status, location, _) = post(
        &ui,
        &path,
        &[
            ("at", "3"),
            ("label", "typed"),
            ("reason", "why not"),
            ("token", TOKEN),
        ],
        None,
    );
    assert_eq!(status, 303);
    let typed: SessionId = location
        .trim_start_matches("/ui/sessions/")
        .split('?')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(location.ends_with("#composer"), "{location}");
    let info = store.info(&typed).unwrap();
    assert_eq!(
        (
            info.parent.as_ref(),
            info.forked_at_index,
            info.branch.as_str()
        ),
        (Some(&budget), Some(3), "typed")
    );
    let (status, location, _) = post(&ui, &path, &[("at", "1"), ("label", "header")], Some(TOKEN));
    assert_eq!(status, 303);
    assert!(location.starts_with("/ui/sessions/"));
    // A taken label is refused with the label named.
    let (status, _, html) = post(&ui, &path, &[("at", "1"), ("label", "header")], Some(TOKEN));
    assert_eq!(status, 409);
    assert!(html.contains("header"), "{html}");
    // The new branch shows in the tree; the playback offers the forms.
    let (_, _, tree) = page(&ui, &format!("/ui/sessions/{typed}/tree"));
    assert!(tree.contains(">typed<") && tree.contains(">header<"));
    let (_, _, playback) = page(&ui, &format!("/ui/sessions/{budget}"));
    assert_eq!(
        playback.matches("class=\"action fork\"").count() as u64,
        store.info(&budget).unwrap().length
    );
}

#[test]
fn a_read_only_server_offers_no_forms_and_refuses_their_posts() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = start(Arc::clone(&store));
    let (_, _, html) = page(&ui, &format!("/ui/sessions/{}", ui.tree.root));
    assert!(!html.contains("Fork from here") && html.contains("read-only server"));
    assert!(!html.contains("Compare models from here"));
    let (status, _, html) = post(
        &ui,
        &format!("/ui/sessions/{}/fork", ui.tree.root),
        &[("at", "1")],
        Some("any"),
    );
    assert_eq!(status, 403);
    assert!(html.contains("read-only"), "{html}");
}

#[test]
fn the_tree_search_unfolds_only_matching_branches_and_lists_user_turns() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = start(Arc::clone(&store));
    let t = &ui.tree;
    // `booking` matches by label: its ancestors unfold to it; `budget` stays folded.
    let (status, _, html) = page(&ui, &format!("/ui/sessions/{}/tree?q=BOOKING", t.root));
    assert_eq!(status, 200);
    assert!(html.contains("<mark>booking</mark>"), "{html}");
    assert!(html.contains("1 matching"), "{html}");
    assert_eq!(
        html.matches("<details open>").count(),
        2,
        "main and model-swap"
    );
    // By content: the budget branch's own user turn mentions something cheaper.
    let (_, _, html) = page(&ui, &format!("/ui/sessions/{}/tree?q=cheaper", t.root));
    assert!(html.contains("<mark>budget</mark>"), "{html}");
    assert_eq!(
        html.matches("<details open>").count(),
        1,
        "only main unfolds"
    );
    // User turns only: every user turn of the family, nothing else.
    let (_, _, html) = page(&ui, &format!("/ui/sessions/{}/tree?turns=user", t.root));
    let mut users = 0;
    for id in [&t.root, &t.budget, &t.model_swap, &t.booking] {
        let info = store.info(id).unwrap();
        for turn in store.load(id, None).unwrap() {
            if turn.session == *id && turn.role == Role::User {
                users += 1;
                assert!(html.contains(&format!("#{} user", turn.index)));
            }
        }
        assert!(info.length > 0);
    }
    assert_eq!(html.matches("<ul class=\"own\">").count() > 0, users > 0);
    assert!(!html.contains(" assistant</a>"));
    let (status, _, html) = page(&ui, &format!("/ui/sessions/{}/tree?turns=some", t.root));
    assert_eq!(status, 400);
    assert!(html.contains("none, user or all"));
}

#[test]
fn playback_pages_long_sessions_and_pages_between_sibling_branches() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = start(Arc::clone(&store));
    let long = common::session_with(&store, "long", 450);
    let (_, _, first) = page(&ui, "/ui/sessions/long");
    assert_eq!(first.matches("<li class=\"turn").count(), 200);
    assert!(first.contains("later turns") && !first.contains("earlier turns"));
    let (_, _, last) = page(&ui, "/ui/sessions/long?from=400");
    assert_eq!(last.matches("<li class=\"turn").count(), 50);
    assert!(last.contains("id=\"turn-449\"") && last.contains("turns 400–449 of 450"));
    let (status, _, html) = page(&ui, "/ui/sessions/long?from=450");
    assert_eq!(status, 400);
    assert!(html.contains("450") && html.contains(long.as_str()));
    // model-swap and budget are both children of main: at the fork point each shows
    // the pager over the branches that share the prefix.
    let t = &ui.tree;
    let swap = store.info(&t.model_swap).unwrap();
    let budget = store.info(&t.budget).unwrap();
    let (_, _, html) = page(&ui, &format!("/ui/sessions/{}", t.model_swap));
    let at = swap.forked_at_index.unwrap();
    let marker = format!("aria-label=\"branches at turn {at}\"");
    assert!(html.contains(&marker), "{html}");
    let same_point = budget.forked_at_index == Some(at);
    let options = if same_point { 3 } else { 2 };
    assert!(
        html.contains(&format!("/{options}</span>")),
        "{options} ways at {at}"
    );
}

#[test]
fn the_web_diff_marks_the_argument_that_differs_between_two_tool_calls() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = start(Arc::clone(&store));
    let call = |day: &str| {
        format!(
            r#"[{{"id":"call_1","type":"function","function":{{"name":"search_trains","arguments":"{{\"day\":\"{day}\"}}"}}}}]"#
        )
    };
    for (id, day) in [("fri", "friday"), ("sun", "sunday")] {
        let id = store
            .create_session(forktrail::NewSession {
                id: Some(id.into()),
                ..Default::default()
            })
            .unwrap();
        store
            .append(&id, NewTurn::new(Role::User, "Trains to Amsterdam?"))
            .unwrap();
        store
            .append(
                &id,
                NewTurn::new(Role::Assistant, "")
                    .kind(forktrail::Kind::ToolCall)
                    .tool_calls(call(day)),
            )
            .unwrap();
    }
    let (status, _, html) = page(&ui, "/ui/diff?a=fri&b=sun");
    assert_eq!(status, 200);
    assert!(html.contains("The shared history (1 turns)"), "{html}");
    assert_eq!(html.matches("<tr class=\"modified\"").count(), 1, "{html}");
    // The changed words are the days, each marked on its own side.
    assert!(html.contains("<span class=\"removed\">"), "{html}");
    let removed = html.split("<span class=\"removed\">").nth(1).unwrap();
    assert!(
        removed.split("</span>").next().unwrap().contains("friday"),
        "{html}"
    );
    let added = html.split("<span class=\"added\">").nth(1).unwrap();
    assert!(
        added.split("</span>").next().unwrap().contains("sunday"),
        "{html}"
    );
}

#[test]
fn diff_provenance_and_sparql_pages() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = start(Arc::clone(&store));
    let t = &ui.tree;
    let d = store.diff(&t.budget, &t.booking).unwrap();
    let (status, _, html) = page(&ui, &format!("/ui/diff?a={}&b={}", t.budget, t.booking));
    assert_eq!(status, 200);
    let rows = d.a_tail.len().max(d.b_tail.len());
    let kinds = [
        "\"same\"",
        "\"modified\"",
        "\"left-only\"",
        "\"right-only\"",
    ];
    let counted: usize = kinds
        .iter()
        .map(|k| html.matches(&format!("<tr class={k}")).count())
        .sum();
    assert_eq!(counted, rows);
    assert!(html.contains(&format!("The shared history ({} turns)", d.common_prefix)));
    let (status, _, _) = page(&ui, &format!("/ui/diff?a={}&b=nope", t.budget));
    assert_eq!(status, 404);
    // Provenance: the audit query's row and an intact digest chain.
    let (status, _, html) = page(&ui, &format!("/ui/sessions/{}/turns/2", t.booking));
    assert_eq!(status, 200);
    assert!(
        html.contains("audit-turn-origin") && html.contains("Intact"),
        "{html}"
    );
    assert!(html.contains(demo::MODEL_A) || html.contains("ownerBranch"));
    let (status, _, html) = page(&ui, &format!("/ui/sessions/{}/turns/999", t.booking));
    assert_eq!(status, 400);
    assert!(html.contains("999"));
    // SPARQL: a shipped query prefilled; a query run; an update refused.
    let (_, _, html) = page(&ui, "/ui/sparql?name=fork-chain");
    assert!(html.contains("ft:parentSession"), "prefilled");
    // Its input asked for, and run bound as a term (hostile text stays a value).
    assert!(html.contains("name=\"in_id\""), "{html}");
    let (status, _, html) = page(
        &ui,
        &format!("/ui/sparql?name=fork-chain&run=1&in_id={}", t.booking),
    );
    assert_eq!(status, 200);
    assert!(
        html.contains("3 results") && html.contains("<td>model-swap</td>"),
        "{html}"
    );
    assert!(
        html.contains(&format!("value=\"{}\"", t.booking)),
        "the input kept"
    );
    let (status, _, html) = page(
        &ui,
        "/ui/sparql?name=fork-chain&run=1&in_id=x%22%20%7D%20DROP%20ALL%20%23",
    );
    assert_eq!(status, 200);
    assert!(html.contains("0 results"), "{html}");
    let (status, _, html) = page(
        &ui,
        "/ui/sparql?query=SELECT%20%3Fb%20WHERE%20%7B%20%3Fs%20%3Chttps%3A%2F%2Fw3id.org%2Fforktrail%2Fns%23branch%3E%20%3Fb%20%7D",
    );
    assert_eq!(status, 200);
    assert!(
        html.contains("4 results") && html.contains("<td>booking</td>"),
        "{html}"
    );
    let (status, _, _) = page(&ui, "/ui/sparql?query=DROP%20ALL");
    assert_eq!(status, 400);
    assert_eq!(store.list().unwrap().len(), 4);
}

#[test]
fn anchors_merge_and_delete_preview_first() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = writable(&store);
    let t = ui.tree.clone();
    let (status, location, _) = post(
        &ui,
        &format!("/ui/sessions/{}/anchors", t.budget),
        &[("name", "checkpoint")],
        Some(TOKEN),
    );
    assert_eq!(
        (status, location.as_str()),
        (303, format!("/ui/sessions/{}", t.budget).as_str())
    );
    assert_eq!(store.anchors(&t.budget).unwrap()[0].name, "checkpoint");
    // Merge: the preview writes nothing; confirmed, the parent gets one turn.
    let parent_len = store.info(&t.root).unwrap().length;
    let before = common::quads(&store);
    let (status, _, html) = post(
        &ui,
        &format!("/ui/sessions/{}/merge", t.budget),
        &[],
        Some(TOKEN),
    );
    assert_eq!(status, 200);
    assert!(
        html.contains(&format!("Appends turn {parent_len}")),
        "{html}"
    );
    assert_eq!(common::quads(&store), before);
    let (status, location, _) = post(
        &ui,
        &format!("/ui/sessions/{}/merge", t.budget),
        &[("confirm", "1")],
        Some(TOKEN),
    );
    assert_eq!(status, 303);
    assert!(location.contains(&format!("#turn-{parent_len}")));
    assert_eq!(store.info(&t.root).unwrap().length, parent_len + 1);
    // Delete: refused on children (listed), the cascade previewed, then done.
    let before = common::quads(&store);
    let (status, _, html) = post(
        &ui,
        &format!("/ui/sessions/{}/delete", t.model_swap),
        &[],
        Some(TOKEN),
    );
    assert_eq!(status, 200);
    assert!(
        html.contains("Refused") && html.contains(t.booking.as_str()),
        "{html}"
    );
    assert_eq!(html.matches("Refused").count(), 1, "said once: {html}");
    assert!(
        html.contains("<h1>Delete model-swap?</h1>"),
        "named: {html}"
    );
    let (_, _, html) = post(
        &ui,
        &format!("/ui/sessions/{}/delete", t.model_swap),
        &[("cascade", "1")],
        Some(TOKEN),
    );
    assert!(html.contains("This deletes 2 sessions"), "{html}");
    assert_eq!(common::quads(&store), before, "previews write nothing");
    let (status, location, _) = post(
        &ui,
        &format!("/ui/sessions/{}/delete", t.model_swap),
        &[("cascade", "1"), ("confirm", "1")],
        Some(TOKEN),
    );
    assert_eq!((status, location.as_str()), (303, "/"));
    assert!(!store.exists(&t.model_swap).unwrap() && !store.exists(&t.booking).unwrap());
}

#[test]
fn what_if_shows_the_estimate_then_follows_the_job_to_its_end() {
    let stub = common::stub::start(common::stub::Mode::Echo);
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = with_endpoint(&store, &stub.url);
    let root = ui.tree.root.clone();
    let path = format!("/ui/sessions/{root}/whatif");
    let (_, _, playback) = page(&ui, &format!("/ui/sessions/{root}"));
    assert!(playback.contains(&format!("<option value=\"{}\">", stub.url)));
    // An endpoint the server does not offer is refused.
    let (status, _, html) = post(
        &ui,
        &path,
        &[("at", "2"), ("endpoint", "http://127.0.0.1:1/v1")],
        Some(TOKEN),
    );
    assert_eq!(status, 403);
    assert!(html.contains("--model-endpoint"));
    let (status, _, html) = post(
        &ui,
        &path,
        &[("at", "2"), ("tools", "[not json")],
        Some(TOKEN),
    );
    assert_eq!(status, 400);
    assert!(html.contains("the tools are not JSON"));
    // The estimate: nothing sent, nothing written.
    let before = common::quads(&store);
    let (status, _, html) = post(
        &ui,
        &path,
        &[
            ("at", "2"),
            ("model", "stub-model"),
            ("endpoint", &stub.url),
        ],
        Some(TOKEN),
    );
    assert_eq!(status, 200);
    assert!(
        html.contains("Estimated tokens") && html.contains("stub-model"),
        "{html}"
    );
    assert!(stub.requests().is_empty());
    assert_eq!(common::quads(&store), before);
    // Confirmed: the job page, reloading while it runs, then complete with its fork.
    let (status, location, _) = post(
        &ui,
        &path,
        &[
            ("at", "2"),
            ("model", "stub-model"),
            ("endpoint", &stub.url),
            ("confirm", "1"),
        ],
        Some(TOKEN),
    );
    assert_eq!(status, 303);
    assert!(location.starts_with("/ui/jobs/"));
    let html = followed_until(&ui, &location, "complete");
    let job = store.jobs().unwrap().pop().unwrap();
    let fork = job.fork.unwrap();
    assert!(html.contains(&format!("/ui/sessions/{fork}")));
    assert_eq!(stub.requests().len(), 1);
    let answer = store.load(&fork, None).unwrap().pop().unwrap();
    assert_eq!(answer.model.as_deref(), Some("stub-model"));
    // The answer's figures, as the job measured them, on its turn.
    let job = store.jobs().unwrap().pop().unwrap();
    let (_, _, playback) = page(&ui, &format!("/ui/sessions/{fork}"));
    let shown = format!(
        "{} in · {} out tokens · {} ms",
        job.input_tokens.unwrap(),
        job.output_tokens.unwrap(),
        job.latency_ms.unwrap()
    );
    let turn = &playback[playback
        .find(&format!("id=\"turn-{}\"", answer.index))
        .unwrap()..];
    assert!(turn.contains(&shown), "{shown} in {turn}");
}

/// The edges of a page's drawn tree: `(x1, y1, x2, y2)` of each `line.edge`.
fn edges(html: &str) -> Vec<(f64, f64, f64, f64)> {
    html.split("<line class=\"edge\" ")
        .skip(1)
        .map(|rest| {
            let attr = |name: &str| -> f64 {
                let from = rest.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                rest[from..][..rest[from..].find('"').unwrap()]
                    .parse()
                    .unwrap()
            };
            (attr("x1"), attr("y1"), attr("x2"), attr("y2"))
        })
        .collect()
}

/// Whether segments `a` and `b` cross (touching at an end, as edges from one parent
/// do, is not crossing).
fn cross(a: (f64, f64, f64, f64), b: (f64, f64, f64, f64)) -> bool {
    let turn = |(px, py): (f64, f64), (qx, qy): (f64, f64), (rx, ry): (f64, f64)| {
        ((qx - px) * (ry - py) - (qy - py) * (rx - px)).signum()
    };
    let (p1, p2, q1, q2) = ((a.0, a.1), (a.2, a.3), (b.0, b.1), (b.2, b.3));
    let (d1, d2, d3, d4) = (
        turn(q1, q2, p1),
        turn(q1, q2, p2),
        turn(p1, p2, q1),
        turn(p1, p2, q2),
    );
    d1 * d2 < 0.0 && d3 * d4 < 0.0
}

#[test]
fn a_300_branch_family_is_drawn_with_no_crossing_edges_and_children_centred() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = start(Arc::clone(&store));
    // 300 forks, each of a session made before it (wide and deep at once).
    let root = ui.tree.root.clone();
    let mut sessions = vec![root.clone()];
    let mut rng = common::Rng(0x9e37_79b9_7f4a_7c15);
    for b in 0..300 {
        let parent = sessions[rng.below(sessions.len())].clone();
        let depth = store.info(&parent).unwrap().depth;
        if depth >= 20 {
            continue;
        }
        let at = store.info(&parent).unwrap().length;
        let fork = common::fork_at(
            &store,
            &parent,
            at,
            &format!("b{b}"),
            &format!("branch-{b}"),
        );
        store
            .append(&fork, NewTurn::new(Role::User, format!("turn of {b}")))
            .unwrap();
        sessions.push(fork);
    }
    let (status, _, html) = page(&ui, &format!("/ui/sessions/{root}/tree"));
    assert_eq!(status, 200);
    let svg = &html[html.find("<svg").unwrap()..html.find("</svg>").unwrap()];
    let lines = edges(svg);
    // A readable picture: not 300 boxes, and what is left out is counted.
    let boxes = svg.matches("<rect class=").count();
    assert!((10..=120).contains(&boxes), "{boxes} boxes");
    assert_eq!(
        lines.len(),
        boxes - 1,
        "one edge into every box but the root's"
    );
    assert!(svg.contains("more</text>"), "the rest is counted");
    for (i, a) in lines.iter().enumerate() {
        for b in &lines[i + 1..] {
            assert!(!cross(*a, *b), "edges {a:?} and {b:?} cross");
        }
    }
    // Each parent sits centred over its first and last child.
    let mut children: std::collections::BTreeMap<(i64, i64), Vec<f64>> = Default::default();
    for (x1, y1, x2, _) in &lines {
        children
            .entry(((x1 * 10.0) as i64, (y1 * 10.0) as i64))
            .or_default()
            .push(*x2);
    }
    for ((x, _), xs) in children {
        let (lo, hi) = xs
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
        assert!(
            ((lo + hi) / 2.0 * 10.0 - x as f64).abs() <= 1.0,
            "{x} over {xs:?}"
        );
    }
    // Every branch box links to the branch at its fork point.
    let fork = &sessions[1];
    let at = store.info(fork).unwrap().forked_at_index.unwrap();
    assert!(
        svg.contains(&format!("href=\"/ui/sessions/{fork}?from=0#turn-{at}\"")),
        "{svg}"
    );
}

/// A server that takes writes with [`TOKEN`] and offers model endpoint `endpoint`.
fn with_endpoint(store: &Arc<Store>, endpoint: &str) -> Ui {
    start_with(
        Arc::clone(store),
        ServerConfig {
            token: Some(TOKEN.into()),
            model_endpoints: vec![endpoint.to_string()],
            ..ServerConfig::default()
        },
    )
}

/// Follows page `location`, which must reload (a `Refresh` header) while it says
/// `running`, until it says `done`, and then no longer reloads; its page then.
fn followed_until(ui: &Ui, location: &str, done: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let r = get(format!("{}{location}", ui.base)).unwrap();
        let refresh = r.headers().contains_key("refresh");
        let html = r.text().unwrap();
        if html.contains(&format!("data-status=\"{done}\"")) {
            assert!(!refresh, "{location} stops reloading once {done}");
            return html;
        }
        assert!(
            html.contains("data-status=\"running\"") && refresh,
            "{html}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "still running: {html}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Follows `location` (a job's page, or the playback an answer lands on, which shows
/// the job at its turn while it runs) until the job ends; the page then.
fn finished_job(ui: &Ui, location: &str) -> String {
    assert!(
        location.starts_with("/ui/jobs/") || location.contains("&job="),
        "{location}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let html = get(format!("{}{location}", ui.base))
            .unwrap()
            .text()
            .unwrap();
        if !html.contains("data-status=\"running\"") {
            return html;
        }
        assert!(std::time::Instant::now() < deadline, "{html}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn the_composer_continues_a_session_and_edit_sends_a_new_branch_a_model_answers() {
    let stub = common::stub::start(common::stub::Mode::Echo);
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = with_endpoint(&store, &stub.url);
    let root = ui.tree.root.clone();
    let turns = store.load(&root, None).unwrap();
    let (_, _, playback) = page(&ui, &format!("/ui/sessions/{root}"));
    // Edit on every user turn of the page, and on nothing else; the composer at the end.
    let users = turns.iter().filter(|t| t.role == Role::User).count();
    assert_eq!(
        playback
            .matches(&format!("action=\"/ui/sessions/{root}/edit\""))
            .count(),
        users
    );
    assert!(playback.contains(&format!("action=\"/ui/sessions/{root}/append\"")));
    let append = format!("/ui/sessions/{root}/append");
    // Without the token nothing is written.
    let before = common::quads(&store);
    let (status, _, _) = post(&ui, &append, &[("content", "Also Tuesday?")], None);
    assert_eq!(status, 401);
    assert_eq!(common::quads(&store), before);
    // A turn added: back at the session's end, at that turn.
    let n = turns.len() as u64;
    let (status, location, _) = post(&ui, &append, &[("content", "Also Tuesday?")], Some(TOKEN));
    assert_eq!(status, 303);
    assert!(location.ends_with(&format!("#turn-{n}")), "{location}");
    let added = store.load(&root, None).unwrap().pop().unwrap();
    assert_eq!(
        (added.index, added.role, added.content.as_str()),
        (n, Role::User, "Also Tuesday?")
    );
    // And one a model answers: the answer goes to the session itself.
    let (status, location, _) = post(
        &ui,
        &append,
        &[
            ("content", "And Wednesday?"),
            ("answer", "1"),
            ("model", "stub-model"),
            ("endpoint", &stub.url),
        ],
        Some(TOKEN),
    );
    assert_eq!(status, 303);
    // Back in the thread, at the answer's turn, which shows once written.
    assert!(
        location.starts_with(&format!("/ui/sessions/{root}?"))
            && location.ends_with(&format!("#turn-{}", n + 2)),
        "{location}"
    );
    let html = finished_job(&ui, &location);
    assert!(
        html.contains(&format!("id=\"turn-{}\"", n + 2))
            && !html.contains("class=\"turn pending")
            && html.contains("stub-model answers: And Wednesday?"),
        "{html}"
    );
    let now = store.load(&root, None).unwrap();
    assert_eq!(now.len() as u64, n + 3);
    let answer = &now[now.len() - 1];
    assert_eq!(
        (
            answer.role,
            answer.content.as_str(),
            answer.model.as_deref()
        ),
        (
            Role::Assistant,
            common::stub::echo("stub-model", "And Wednesday?").as_str(),
            Some("stub-model")
        )
    );
    assert_eq!(
        store.jobs().unwrap().pop().unwrap().fork.as_ref(),
        Some(&root)
    );

    // Edit a user turn: a branch forked just before it, the edited text its first turn,
    // then the model's answer to it.
    let first_user = turns.iter().find(|t| t.role == Role::User).unwrap().index;
    let edit = format!("/ui/sessions/{root}/edit");
    let (status, location, _) = post(
        &ui,
        &edit,
        &[
            ("at", &first_user.to_string()),
            ("content", "Book it for two."),
            ("label", "for-two"),
            ("answer", "1"),
            ("model", "stub-model"),
            ("endpoint", &stub.url),
        ],
        Some(TOKEN),
    );
    assert_eq!(status, 303);
    finished_job(&ui, &location);
    let fork = store.jobs().unwrap().pop().unwrap().fork.unwrap();
    let info = store.info(&fork).unwrap();
    assert_eq!(
        (
            info.parent.as_ref(),
            info.forked_at_index,
            info.branch.as_str()
        ),
        (Some(&root), Some(first_user), "for-two")
    );
    let branch = store.load(&fork, None).unwrap();
    assert_eq!(branch.len() as u64, first_user + 2);
    assert_eq!(branch[first_user as usize].content, "Book it for two.");
    assert_eq!(
        branch[first_user as usize + 1].content,
        common::stub::echo("stub-model", "Book it for two.")
    );
    // Without an answer, on to the new branch at its turn; a bad index changes nothing.
    let (status, location, _) = post(
        &ui,
        &edit,
        &[("at", &first_user.to_string()), ("content", "Just one.")],
        Some(TOKEN),
    );
    assert_eq!(status, 303);
    assert!(
        location.ends_with(&format!("#turn-{first_user}")),
        "{location}"
    );
    let before = common::quads(&store);
    let (status, _, html) = post(&ui, &edit, &[("at", "999"), ("content", "x")], Some(TOKEN));
    assert_eq!(status, 400, "{html}");
    assert!(html.contains("999"), "{html}");
    assert_eq!(common::quads(&store), before);
}

#[test]
fn export_html_is_one_file_with_no_script_and_every_turn() {
    let store = Store::in_memory().unwrap();
    let t = demo::build(&store).unwrap();
    store
        .append(
            &t.booking,
            NewTurn::new(Role::User, "</style><script>alert(1)</script>"),
        )
        .unwrap();
    let mut out = Vec::new();
    store
        .export(Some(&t.booking), forktrail::ExportFormat::Html, &mut out)
        .unwrap();
    let html = String::from_utf8(out).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script") && !html.contains("<link") && !html.contains("src="));
    assert!(html.contains("&lt;/style&gt;&lt;script&gt;"));
    let length = store.info(&t.booking).unwrap().length as usize;
    assert_eq!(html.matches("<li class=\"turn").count(), length);
    assert_eq!(
        html.matches("<li class=\"node").count(),
        4,
        "the family's tree"
    );
    // Links stay inside the file: only the exported branch is a link.
    assert!(!html.contains("/ui/sessions/"));
    let err = store
        .export(None, forktrail::ExportFormat::Html, Vec::new())
        .unwrap_err();
    assert!(err.to_string().contains("needs a SESSION"), "{err}");
}

fn arm(name: &str, model: &str, endpoint: &str) -> forktrail::Arm {
    forktrail::Arm {
        name: Some(name.into()),
        model: model.into(),
        endpoint: Some(endpoint.into()),
        ..Default::default()
    }
}

/// The text from `from` to the end of the element it starts (`</tag>` of its tag).
fn element<'h>(html: &'h str, from: &str) -> &'h str {
    let at = html
        .find(from)
        .unwrap_or_else(|| panic!("no {from} in {html}"));
    let tag: String = from[1..]
        .chars()
        .take_while(|c| c.is_alphanumeric())
        .collect();
    let end = html[at..]
        .find(&format!("</{tag}>"))
        .unwrap_or_else(|| panic!("{from} is not closed"));
    &html[at..at + end + tag.len() + 3]
}

#[test]
fn a_comparison_page_puts_the_arms_side_by_side_with_measured_figures_and_marks_the_divergence() {
    let store = Arc::new(Store::in_memory().unwrap());
    let root = travel::session(&store, "trip");
    let stub = travel::two_models("unused");
    let mut options = forktrail::CompareOptions {
        at: 2,
        arms: vec![
            arm("same", "model-a", &stub.url),
            arm("other", "model-b", &stub.url),
        ],
        ..Default::default()
    };
    options.prices.insert(
        "model-a".into(),
        forktrail::Price {
            input: 3.0,
            output: 15.0,
            cached: Some(0.3),
        },
    );
    let c = store.compare(&root, &options).unwrap();
    let ui = start(Arc::clone(&store));
    let (status, headers, html) = page(&ui, &format!("/ui/comparisons/{}", c.comparison));
    assert_eq!(status, 200);
    assert!(
        !headers.contains_key("refresh"),
        "an ended comparison stays"
    );
    assert!(html.contains("data-status=\"ended\""), "{html}");

    // The figures: one column per arm, the baseline first, the stub's exact usage.
    let figures = element(&html, "<table class=\"compare figures\"");
    let column = |name: &str| {
        figures
            .find(&format!("<th scope=\"col\" data-arm=\"{name}\""))
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    assert!(column("baseline") < column("same") && column("same") < column("other"));
    let figure = |arm: &str, key: &str| {
        let cell = element(
            figures,
            &format!("<td class=\"number\" data-arm=\"{arm}\" data-figure=\"{key}\""),
        );
        cell[cell.find('>').unwrap() + 1..cell.len() - "</td>".len()].to_string()
    };
    for (key, same, other) in [
        ("input_tokens", "520", "180"),
        ("output_tokens", "36", "15"),
        ("cached_tokens", "100", "0"),
        ("steps", "4", "3"),
        ("answered_from_recording", "2", "1"),
        ("unanswered_tool_calls", "0", "1"),
    ] {
        assert_eq!(figure("same", key), same, "{key}");
        assert_eq!(figure("other", key), other, "{key}");
    }
    let unmeasured = "<span class=\"unmeasured\">not measured</span>";
    assert_eq!(figure("baseline", "input_tokens"), unmeasured);
    let cost = ((520.0 - 100.0) * 3.0 + 100.0 * 0.3 + 36.0 * 15.0) / 1e6;
    assert_eq!(figure("same", "cost"), format!("${cost:.6}"));
    assert_eq!(figure("other", "cost"), "unpriced");
    assert!(
        figures.contains("2: get_weather → book_flight"),
        "{figures}"
    );
    assert!(
        figures.contains("tool_calls, stop, tool_calls"),
        "{figures}"
    );
    // The stopped arm says why.
    let stopped = element(figures, "<td data-arm=\"other\" data-figure=\"status\"");
    assert!(
        stopped.contains("unanswered_tool_call") && stopped.contains("book_flight"),
        "{stopped}"
    );

    // The turns: one row per index from the fork point, every arm's turn in it.
    let turns = element(&html, "<table class=\"compare turns\"");
    assert_eq!(turns.matches("<tr data-index=").count(), 7, "turns 2 to 8");
    let row = |i: u64| element(turns, &format!("<tr data-index=\"{i}\""));
    for i in 2..=6 {
        for arm in ["baseline", "same", "other"] {
            let row = row(i);
            let at = row.find(&format!(" data-arm=\"{arm}\"")).unwrap();
            let cell = &row[at..at + row[at..].find("</td>").unwrap()];
            assert!(cell.contains("class=\"role\""), "turn {i} of {arm}: {cell}");
        }
    }
    assert!(row(4).contains("It is 18C and sunny.") && row(4).contains("Sunny, 18C."));
    assert!(
        row(8).contains("<td class=\"cell\" data-arm=\"other\"></td>"),
        "the stopped arm has no turn 8: {}",
        row(8)
    );
    // The divergence: marked on the diverging arm only, at its first differing turn.
    assert_eq!(turns.matches("diverges here").count(), 1, "{turns}");
    assert!(row(4).contains("<td class=\"cell diverges\" data-arm=\"other\"><p class=\"marker\">"));
    assert!(turns.contains("diverges at 4") && turns.contains("as recorded throughout"));
    // The shared prefix, folded.
    let prefix = element(&html, "<details class=\"prefix\">");
    assert!(prefix.contains("2 shared turns"), "{prefix}");
    assert!(prefix.contains("id=\"turn-0\"") && prefix.contains("id=\"turn-1\""));
    // Each arm's fork links to its session page.
    for a in &c.arms {
        let session = a.session.as_ref().unwrap();
        assert!(
            html.contains(&format!("href=\"/ui/sessions/{session}\"")),
            "{}",
            a.name
        );
    }

    // And each fork's page links back to the comparison.
    let fork = c.arms[2].session.as_ref().unwrap();
    let (_, _, playback) = page(&ui, &format!("/ui/sessions/{fork}"));
    assert!(
        playback.contains(&format!("href=\"/ui/comparisons/{}\"", c.comparison)),
        "{playback}"
    );
    assert!(
        playback.contains("arm <strong>other</strong>"),
        "{playback}"
    );

    let (status, _, html) = page(&ui, "/ui/comparisons/no-such-comparison");
    assert_eq!(status, 404);
    assert!(html.contains("no-such-comparison") && html.contains("All sessions"));
}

#[test]
fn hostile_arm_names_and_answers_on_a_comparison_page_are_text() {
    let store = Arc::new(Store::in_memory().unwrap());
    let root = travel::session(&store, "hostile");
    let stub = travel::two_models("<img src=x onerror=alert(2)>\"'&");
    let options = forktrail::CompareOptions {
        at: 2,
        arms: vec![arm("<script>alert(1)</script>\"", "model-x", &stub.url)],
        ..Default::default()
    };
    let c = store.compare(&root, &options).unwrap();
    let ui = start(Arc::clone(&store));
    let (status, _, html) = page(&ui, &format!("/ui/comparisons/{}", c.comparison));
    assert_eq!(status, 200);
    assert!(
        !html.contains("<script>alert") && !html.contains("<img src=x"),
        "{html}"
    );
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{html}"
    );
    assert!(
        html.contains("&lt;img src=x onerror=alert(2)&gt;"),
        "{html}"
    );
    assert!(
        html.contains("data-arm=\"&lt;script&gt;alert(1)&lt;/script&gt;&quot;\""),
        "{html}"
    );
}

/// A form POST of the compare form's fields.
fn compare_post(
    ui: &Ui,
    session: &SessionId,
    fields: &[(&str, &str)],
    bearer: Option<&str>,
) -> (u16, String, String) {
    post(
        ui,
        &format!("/ui/sessions/{session}/compare"),
        fields,
        bearer,
    )
}

#[test]
fn compare_models_from_here_estimates_then_begins_and_follows_the_comparison_to_its_figures() {
    let stub = travel::two_models("unused");
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = with_endpoint(&store, &stub.url);
    let root = travel::session(&store, "trip");
    // Each turn offers it: a user turn is answered after, a model's turn anew.
    let (_, _, playback) = page(&ui, &format!("/ui/sessions/{root}"));
    let user = element(&playback, "<li class=\"turn\" id=\"turn-1\"");
    assert!(user.contains(&format!("href=\"/ui/sessions/{root}/compare?at=2\"")));
    assert!(user.contains(">Compare models from here</a>"));
    let answer = element(&playback, "<li class=\"turn\" id=\"turn-4\"");
    assert!(answer.contains(&format!("href=\"/ui/sessions/{root}/compare?at=4\"")));

    // The form: the session's model ticked, on the server's endpoint.
    let (status, _, form) = page(&ui, &format!("/ui/sessions/{root}/compare?at=2"));
    assert_eq!(status, 200);
    assert!(
        form.contains(&format!("<option value=\"{}\" selected>", stub.url)),
        "{form}"
    );
    assert!(
        form.contains("name=\"arm-1\" type=\"checkbox\" value=\"1\" checked"),
        "{form}"
    );
    assert!(
        form.contains("name=\"model-1\" value=\"model-a\""),
        "{form}"
    );
    assert!(form.contains("The context ends with turn 1 (user): Weather in Paris?"));
    for (at, says) in [
        ("0", "1..=9"),
        ("10", "1..=9"),
        ("two", "not a whole number"),
    ] {
        let (status, _, html) = page(&ui, &format!("/ui/sessions/{root}/compare?at={at}"));
        assert_eq!(status, 400, "at={at}");
        assert!(html.contains(says), "{html}");
    }
    let (status, _, _) = page(&ui, "/ui/sessions/nope/compare?at=2");
    assert_eq!(status, 404);

    let url = stub.url.clone();
    let chosen = |extra: &[(&'static str, &'static str)]| {
        let mut f: Vec<(&str, &str)> = vec![
            ("at", "2"),
            ("arm-1", "1"),
            ("model-1", "model-a"),
            ("endpoint-1", url.as_str()),
            ("arm-2", "1"),
            ("model-2", "model-b"),
            ("endpoint-2", url.as_str()),
            ("max_steps", "10"),
        ];
        f.extend_from_slice(extra);
        f
    };
    // Errors show on the form with what was typed, and nothing is written or sent.
    let before = common::quads(&store);
    let (status, _, html) = compare_post(&ui, &root, &chosen(&[]), None);
    assert_eq!(status, 401);
    assert!(
        html.contains("this server's token") && html.contains("name=\"model-2\" value=\"model-b\"")
    );
    let (status, _, html) = compare_post(&ui, &root, &[("at", "2"), ("model-1", "m")], Some(TOKEN));
    assert_eq!(status, 400);
    assert!(html.contains("no model is ticked"), "{html}");
    let (status, _, html) = compare_post(
        &ui,
        &root,
        &[
            ("at", "2"),
            ("arm-1", "1"),
            ("model-1", "m"),
            ("endpoint-1", "http://127.0.0.1:1/v1"),
        ],
        Some(TOKEN),
    );
    assert_eq!(status, 403);
    assert!(html.contains("--model-endpoint"), "{html}");
    let (status, _, html) = compare_post(&ui, &root, &chosen(&[("price-2", "cheap")]), Some(TOKEN));
    assert_eq!(status, 400);
    assert!(
        html.contains("arm 2: price &quot;cheap&quot;") && html.contains("value=\"cheap\""),
        "{html}"
    );
    let mut late = chosen(&[("confirm", "1")]);
    late[0] = ("at", "99");
    let (status, _, html) = compare_post(&ui, &root, &late, Some(TOKEN));
    assert_eq!(status, 400);
    assert!(
        html.contains("99") && html.contains(root.as_str()),
        "{html}"
    );
    // The estimate: per arm, nothing sent, nothing written; then the choices again.
    let (status, _, html) = compare_post(&ui, &root, &chosen(&[("price-1", "3/15")]), Some(TOKEN));
    assert_eq!(status, 200);
    assert!(
        html.contains("Nothing has been sent or written yet"),
        "{html}"
    );
    assert!(
        html.contains("<th scope=\"row\">model-a</th>")
            && html.contains("<th scope=\"row\">model-b</th>")
    );
    assert!(html.contains("unpriced"), "model-b has no price: {html}");
    let (status, _, html) = compare_post(&ui, &root, &chosen(&[("edit", "1")]), None);
    assert_eq!(status, 200);
    assert!(
        html.contains("name=\"model-2\" value=\"model-b\""),
        "{html}"
    );
    assert!(stub.requests().is_empty());
    assert_eq!(common::quads(&store), before, "nothing written");

    // Confirmed: on to the comparison's page, which reloads until every arm has ended.
    let (status, location, _) = compare_post(&ui, &root, &chosen(&[("confirm", "1")]), Some(TOKEN));
    assert_eq!(status, 303);
    assert!(location.starts_with("/ui/comparisons/"), "{location}");
    let html = followed_until(&ui, &location, "ended");
    let figure = |arm: &str, key: &str, value: &str| {
        format!("<td class=\"number\" data-arm=\"{arm}\" data-figure=\"{key}\">{value}</td>")
    };
    assert!(
        html.contains(&figure("model-a", "input_tokens", "520")),
        "{html}"
    );
    assert!(
        html.contains(&figure("model-b", "input_tokens", "180")),
        "{html}"
    );
    assert!(html.contains("diverges at 4"));
    let made = store.comparisons().unwrap();
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].max_steps, 10);
    assert_eq!(made[0].arms[1].figures.input_tokens, Some(520));
    // The same again shows the comparison already made.
    let (status, again, _) = compare_post(&ui, &root, &chosen(&[("confirm", "1")]), Some(TOKEN));
    assert_eq!(status, 303);
    assert_eq!(again, format!("{location}?reused=1"));
    let (_, _, html) = page(&ui, &again);
    assert!(html.contains("asked before"), "{html}");
    assert_eq!(store.comparisons().unwrap().len(), 1);
}

#[test]
fn a_running_comparison_can_be_cancelled_from_its_page() {
    use common::stub::{completion, Reply};
    // The stub holds its first answer until the test lets it go.
    let gate = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let held = Arc::clone(&gate);
    let stub = common::stub::scripted(move |_, _| {
        let (open, opened) = &*held;
        let mut open = open.lock().unwrap();
        while !*open {
            open = opened.wait(open).unwrap();
        }
        Reply::ok(completion("slow", Some("late"), &[], (1, 1, 0), "stop"))
    });
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = with_endpoint(&store, &stub.url);
    let root = travel::session(&store, "trip");
    let (status, location, _) = compare_post(
        &ui,
        &root,
        &[
            ("at", "2"),
            ("arm-1", "1"),
            ("model-1", "slow"),
            ("confirm", "1"),
        ],
        Some(TOKEN),
    );
    assert_eq!(status, 303);
    let (_, headers, html) = page(&ui, &location);
    assert!(headers.contains_key("refresh") && html.contains("data-status=\"running\""));
    assert!(html.contains("Cancel the running arms"), "{html}");
    let (status, _, _) = post(&ui, &format!("{location}/cancel"), &[], None);
    assert_eq!(status, 401, "cancelling needs the token");
    let (status, back, _) = post(&ui, &format!("{location}/cancel"), &[], Some(TOKEN));
    assert_eq!((status, back.as_str()), (303, location.as_str()));
    let (_, headers, html) = page(&ui, &location);
    assert!(!headers.contains_key("refresh") && html.contains("data-status=\"ended\""));
    assert!(html.contains("<strong>cancelled</strong>"), "{html}");
    let (open, opened) = &*gate;
    *open.lock().unwrap() = true;
    opened.notify_all();
}

#[test]
fn an_endpoint_off_this_machine_needs_the_server_to_allow_it_and_a_budget_with_prices() {
    let remote = "https://models.example.com/v1";
    let fields = |extra: &[(&'static str, &'static str)]| {
        let mut f = vec![
            ("at", "2"),
            ("arm-1", "1"),
            ("model-1", "far-model"),
            ("endpoint-1", remote),
        ];
        f.extend_from_slice(extra);
        f
    };
    for allow_remote_models in [false, true] {
        let store = Arc::new(Store::in_memory().unwrap());
        let ui = start_with(
            Arc::clone(&store),
            ServerConfig {
                token: Some(TOKEN.into()),
                model_endpoints: vec![remote.into()],
                allow_remote_models,
                ..ServerConfig::default()
            },
        );
        let root = travel::session(&store, "trip");
        let before = common::quads(&store);
        let (status, _, html) = compare_post(&ui, &root, &fields(&[]), Some(TOKEN));
        assert_eq!(status, 400);
        let refusal = if allow_remote_models {
            "a money cap is required"
        } else {
            "is not on this machine"
        };
        assert!(html.contains(refusal), "{html}");
        assert!(
            html.contains("value=\"far-model\""),
            "the form keeps what was typed"
        );
        if allow_remote_models {
            let (status, _, html) =
                compare_post(&ui, &root, &fields(&[("budget", "0.5")]), Some(TOKEN));
            assert_eq!(status, 400);
            assert!(html.contains("has no price"), "{html}");
            let priced = fields(&[("budget", "0.5"), ("price-1", "1/2")]);
            let (status, _, html) = compare_post(&ui, &root, &priced, Some(TOKEN));
            assert_eq!(status, 200, "{html}");
            assert!(html.contains("(off this machine)") && html.contains("$0.500000"));
        }
        assert_eq!(common::quads(&store), before, "nothing written");
    }
}

#[test]
fn a_wide_familys_tree_page_shows_500_sessions_and_says_how_many_more() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = start(Arc::clone(&store));
    let root = ui.tree.root.clone();
    let before = store.tree(&root).unwrap();
    fn count(n: &forktrail::TreeNode) -> usize {
        1 + n.children.iter().map(count).sum::<usize>()
    }
    let family = count(&before);
    let extra = 520 - family;
    for _ in 0..extra {
        store
            .fork(&root, forktrail::ForkOptions::default())
            .unwrap();
    }
    let (status, _, html) = page(&ui, &format!("/ui/sessions/{root}/tree"));
    assert_eq!(status, 200);
    // 520 sessions: 500 shown, the 20 the root's list had no room for said so.
    assert_eq!(html.matches("<li class=\"node").count(), 500, "nodes shown");
    assert!(
        html.contains("500 of 520 sessions, breadth first"),
        "the count"
    );
    let parts: Vec<&str> = html.split(" more fork").collect();
    let left_out: usize = parts[..parts.len() - 1]
        .iter()
        .map(|before| {
            let digits: String = before
                .chars()
                .rev()
                .take_while(char::is_ascii_digit)
                .collect();
            digits
                .chars()
                .rev()
                .collect::<String>()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert_eq!(left_out, 20, "the notes of the rest");
    // The library's tree has them all.
    assert_eq!(count(&store.tree(&root).unwrap()), 520);
}

#[test]
fn go_to_turn_opens_the_page_that_holds_it_at_it() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = start(Arc::clone(&store));
    let long = common::session_with(&store, "long", 450);
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let go = |turn: &str| {
        let r = client
            .get(format!("{}/ui/sessions/{long}?turn={turn}", ui.base))
            .send()
            .unwrap();
        let location = r
            .headers()
            .get("location")
            .map(|l| l.to_str().unwrap().to_string());
        (r.status().as_u16(), location)
    };
    assert_eq!(
        go("250"),
        (303, Some(format!("/ui/sessions/{long}?from=200#turn-250")))
    );
    assert_eq!(
        go("3"),
        (303, Some(format!("/ui/sessions/{long}?from=0#turn-3")))
    );
    assert_eq!(go("two").0, 400);
    let (_, _, html) = page(&ui, &format!("/ui/sessions/{long}"));
    assert!(
        html.contains("name=\"turn\"") && html.contains("max=\"449\""),
        "the form"
    );
}

#[test]
fn a_failed_what_if_says_what_failed_and_offers_a_retry_and_the_way_back() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = with_endpoint(&store, &endpoint);
    let root = ui.tree.root.clone();
    let (status, location, _) = post(
        &ui,
        &format!("/ui/sessions/{root}/whatif"),
        &[
            ("at", "2"),
            ("model", "m"),
            ("endpoint", &endpoint),
            ("confirm", "1"),
        ],
        Some(TOKEN),
    );
    assert_eq!(status, 303);
    let html = finished_job(&ui, &location);
    assert!(html.contains("data-status=\"failed\""), "{html}");
    assert!(
        html.contains(&format!("Nothing answered at {endpoint}"))
            && html.contains("No turn was written."),
        "{html}"
    );
    assert!(
        html.contains(&format!("action=\"/ui/sessions/{root}/whatif\""))
            && html.contains("Try again")
    );
    assert!(
        html.contains(&format!("href=\"/ui/sessions/{root}?from=0#turn-1\"")),
        "{html}"
    );
}

/// An assistant turn calling `name(args)` (call id `z1`), as a branch of `root` from
/// turn 2 labelled `label`.
fn branch_calling(
    store: &Store,
    root: &SessionId,
    label: &str,
    args: serde_json::Value,
) -> SessionId {
    let calls = serde_json::json!([{"id": "z1", "type": "function",
        "function": {"name": "get_weather", "arguments": args.to_string()}}]);
    let options = forktrail::ForkOptions {
        at: Some(2),
        label: Some(label.into()),
        ..Default::default()
    };
    let turn = NewTurn::new(Role::Assistant, "")
        .tool_calls(calls.to_string())
        .model("model-a");
    store.fork_with(root, options, vec![turn]).unwrap().session
}

#[test]
fn a_branch_answers_its_tool_calls_from_the_recording_or_by_hand_and_a_refusal_writes_nothing() {
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = writable(&store);
    let root = travel::session(&store, "trip");
    let same = branch_calling(
        &store,
        &root,
        "same-call",
        serde_json::json!({"city": "Paris"}),
    );
    let other = branch_calling(
        &store,
        &root,
        "new-call",
        serde_json::json!({"city": "Rome"}),
    );
    // The composer names the open call and offers the recording's answer.
    let (_, _, html) = page(&ui, &format!("/ui/sessions/{same}"));
    assert!(
        html.contains("get_weather({&quot;city&quot;:&quot;Paris&quot;})"),
        "{html}"
    );
    assert!(html.contains(&format!("action=\"/ui/sessions/{same}/recorded\"")));
    assert!(html.contains("<option value=\"tool\" selected>"), "{html}");

    // From the recording: the recorded result, answering the branch's own call, derived
    // from the recorded turn.
    let (status, location, _) = post(
        &ui,
        &format!("/ui/sessions/{same}/recorded"),
        &[],
        Some(TOKEN),
    );
    assert_eq!(status, 303);
    assert!(location.ends_with("#turn-3"), "{location}");
    let answer = store.load(&same, None).unwrap().pop().unwrap();
    assert_eq!(
        (answer.index, answer.role, answer.content.as_str()),
        (3, Role::Tool, "18C, sunny")
    );
    assert_eq!(
        (answer.tool_call_id.as_deref(), answer.name.as_deref()),
        (Some("z1"), Some("get_weather"))
    );
    let ft = forktrail::vocab::ft::NS;
    let q = format!(
        "SELECT ?x ?id ?recorded WHERE {{ GRAPH ?g {{ ?x <http://www.w3.org/ns/prov#wasDerivedFrom> ?y ; <{ft}toolCallId> ?id }}
           GRAPH ?h {{ ?y <{ft}toolCallId> ?recorded }} }}"
    );
    let bound = [
        ("id", oxigraph::model::Literal::from("z1").into()),
        ("recorded", oxigraph::model::Literal::from("c1").into()),
    ];
    match store.query(&q, &bound).unwrap() {
        oxigraph::sparql::QueryResults::Solutions(rows) => assert_eq!(rows.count(), 1),
        _ => panic!("not rows"),
    }

    // Nothing to answer now, and a call the recording never made: refused, named,
    // nothing written.
    let before = common::quads(&store);
    for (session, why) in [
        (&same, "makes no tool call"),
        (
            &other,
            "no recorded result answers get_weather({\"city\":\"Rome\"}) of turn 2",
        ),
        (&root, "is not a fork"),
    ] {
        let (status, _, html) = post(
            &ui,
            &format!("/ui/sessions/{session}/recorded"),
            &[],
            Some(TOKEN),
        );
        assert_eq!(status, 400, "{html}");
        let html = html.replace("&quot;", "\"");
        assert!(html.contains(why), "{why}: {html}");
    }
    assert_eq!(common::quads(&store), before);

    // Two calls, one answered by hand: the other stays open, and the recording answers it.
    let calls = serde_json::json!([
        {"id": "z1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
        {"id": "z2", "type": "function", "function": {"name": "get_price", "arguments": "{\"to\":\"Paris\",\"mode\":\"train\"}"}},
    ]);
    let options = forktrail::ForkOptions {
        at: Some(2),
        label: Some("two-calls".into()),
        ..Default::default()
    };
    let both = NewTurn::new(Role::Assistant, "").tool_calls(calls.to_string());
    let two = store.fork_with(&root, options, vec![both]).unwrap().session;
    let form = [("role", "tool"), ("tool_call_id", "z1"), ("content", "9C")];
    post(
        &ui,
        &format!("/ui/sessions/{two}/append"),
        &form,
        Some(TOKEN),
    );
    let (_, _, html) = page(&ui, &format!("/ui/sessions/{two}"));
    assert!(
        html.contains("<option value=\"z2\">get_price") && !html.contains("<option value=\"z1\">"),
        "{html}"
    );
    let (status, _, _) = post(
        &ui,
        &format!("/ui/sessions/{two}/recorded"),
        &[],
        Some(TOKEN),
    );
    assert_eq!(status, 303);
    let said: Vec<(Option<String>, String)> = store.load(&two, None).unwrap()[3..]
        .iter()
        .map(|t| (t.tool_call_id.clone(), t.content.clone()))
        .collect();
    assert_eq!(
        said,
        [
            (Some("z1".into()), "9C".into()),
            (Some("z2".into()), "49 EUR".into())
        ]
    );
    let before = common::quads(&store);

    // By hand: a tool turn naming the call it answers; a tool turn naming none is refused.
    let append = format!("/ui/sessions/{other}/append");
    let (status, _, html) = post(
        &ui,
        &append,
        &[("role", "tool"), ("content", "9C, rain")],
        Some(TOKEN),
    );
    assert_eq!(status, 400, "{html}");
    assert!(html.contains("answers a tool call"), "{html}");
    assert_eq!(common::quads(&store), before);
    let form = [
        ("role", "tool"),
        ("tool_call_id", "z1"),
        ("content", "9C, rain"),
    ];
    let (status, location, _) = post(&ui, &append, &form, Some(TOKEN));
    assert_eq!(status, 303);
    assert!(location.ends_with("#turn-3"), "{location}");
    let by_hand = store.load(&other, None).unwrap().pop().unwrap();
    assert_eq!(
        (
            by_hand.role,
            by_hand.content.as_str(),
            by_hand.tool_call_id.as_deref()
        ),
        (Role::Tool, "9C, rain", Some("z1"))
    );
}

#[test]
fn an_estimate_says_when_nothing_answers_and_a_running_job_says_how_long_it_has_run() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nobody = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let hung = common::stub::start(common::stub::Mode::Slow(std::time::Duration::from_secs(30)));
    let store = Arc::new(Store::in_memory().unwrap());
    let ui = start_with(
        Arc::clone(&store),
        ServerConfig {
            token: Some(TOKEN.into()),
            model_endpoints: vec![nobody.clone(), hung.url.clone()],
            ..ServerConfig::default()
        },
    );
    let root = ui.tree.root.clone();
    let whatif = format!("/ui/sessions/{root}/whatif");
    let ask = |endpoint: &str, confirm: &str| {
        post(
            &ui,
            &whatif,
            &[
                ("at", "2"),
                ("model", "m"),
                ("endpoint", endpoint),
                ("confirm", confirm),
            ],
            Some(TOKEN),
        )
    };
    let (status, _, html) = ask(&nobody, "");
    assert_eq!(status, 200);
    assert!(
        html.contains(&format!("Nothing answers at {nobody} now")),
        "{html}"
    );
    let (_, _, html) = ask(&hung.url, "");
    assert!(!html.contains("Nothing answers at"), "{html}");
    // The estimate, its job and its button name the same turn.
    assert!(html.contains(": turn 2 anew</h1>"), "{html}");
    let (status, location, _) = ask(&hung.url, "1");
    assert_eq!(status, 303);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (_, _, html) = page(&ui, &location);
    assert!(html.contains("data-status=\"running\""), "{html}");
    let since = html
        .split("</strong> for ")
        .nth(1)
        .expect("how long it has run");
    let seconds: u64 = since.split(" s").next().unwrap().parse().unwrap();
    assert!((1..30).contains(&seconds), "{seconds} s: {html}");
    assert!(html.contains(": turn 2 anew</h1>"), "{html}");
    // A job has its place in a thread only at its own session's end: this one answers
    // turn 2 anew (a fork's, once written), so no page of any session shows it waiting.
    let job = store.jobs().unwrap().pop().unwrap().job;
    for session in [&root, &ui.tree.budget] {
        let (status, _, html) = page(&ui, &format!("/ui/sessions/{session}?job={job}"));
        assert_eq!(status, 200);
        assert!(!html.contains("class=\"turn pending"), "{html}");
    }
    store.cancel_job(&job).unwrap();
}
