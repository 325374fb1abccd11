//! The web UI, in process: the sessions page and its search, playback with inherited
//! turns marked, stored text shown and never run, and the headers that keep it so.
#![cfg(feature = "server")]

mod common;

use forktrail::server::ServerConfig;
use forktrail::{demo, NewTurn, Role, Store};
use reqwest::blocking::get;
use reqwest::header::HeaderMap;
use std::sync::Arc;

struct Ui {
    base: String,
    tree: demo::DemoTree,
}

fn start(store: Arc<Store>) -> Ui {
    let tree = demo::build(&store).unwrap();
    let addr = common::serve_in_process(store, ServerConfig::default());
    Ui {
        base: format!("http://{addr}"),
        tree,
    }
}

/// The status, headers and text of a page.
fn page(ui: &Ui, path: &str) -> (u16, HeaderMap, String) {
    let r = get(format!("{}{path}", ui.base)).unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, headers, r.text().unwrap())
}

#[test]
fn the_sessions_page_lists_every_session_and_searches_them() {
    let ui = start(Arc::new(Store::in_memory().unwrap()));
    let (status, headers, html) = page(&ui, "/");
    assert_eq!(status, 200);
    assert_eq!(headers["content-security-policy"], "default-src 'self'");
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
    assert!(html.contains("4 of 4 sessions"), "{html}");
    // Search by branch and by principal, case ignored; no match is an empty list.
    let (_, _, found) = page(&ui, "/?q=BUDGET");
    assert!(found.contains("1 of 4 sessions") && found.contains(ui.tree.budget.as_str()));
    let (_, _, found) = page(&ui, "/?q=alice+booking");
    assert!(found.contains("1 of 4 sessions") && found.contains(ui.tree.booking.as_str()));
    let (_, _, none) = page(&ui, "/?q=nobody-here");
    assert!(none.contains("0 of 4 sessions"));
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
    let (status, _, html) = page(&ui, &format!("/ui/sessions/{}/tree", t.booking));
    assert_eq!(status, 200);
    let at = |id: &forktrail::SessionId| {
        html.find(&format!("href=\"/ui/sessions/{id}\""))
            .unwrap_or_else(|| panic!("{id} missing"))
    };
    // Root first; model-swap before booking, which it holds.
    assert!(at(&t.root) < at(&t.budget) && at(&t.root) < at(&t.model_swap));
    assert!(at(&t.model_swap) < at(&t.booking));
    assert_eq!(html.matches("aria-current=\"page\"").count(), 1);
    assert!(html[at(&t.booking) - 60..at(&t.booking) + 80].contains("aria-current"));
    assert_eq!(
        html.matches("<details open>").count(),
        2,
        "main and model-swap fold"
    );
    // The playback page links to it.
    let (_, _, playback) = page(&ui, &format!("/ui/sessions/{}", t.budget));
    assert!(playback.contains(&format!("/ui/sessions/{}/tree", t.budget)));
}
