//! The drawn fork tree of a 300-branch family in Chromium, at 390 and 1400 px, light
//! and dark: a search draws a branch nine levels down and last at every level (where
//! the boxes drawn breadth first never reach), with the path to it, marks it and
//! brings it on screen; a "+N more" box unfolds the branches it counts and the badge
//! of the unfolded branch folds them again. No page is wider than its window, and
//! axe-core finds nothing serious.

use super::{
    axe_source, browser_with, chromedriver, click, past_the_edge, screenshot, serious_violations,
    SCHEMES, WIDTHS,
};
use crate::common::{self, runtime};
use fantoccini::{Client, Locator};
use forktrail::{ForkOptions, NewSession, NewTurn, Role, SessionId, Store};
use serde_json::Value;
use std::sync::Arc;

/// The family: its root, and the path from it to the branch searched for (the last).
struct Family {
    store: Arc<Store>,
    root: SessionId,
    path: Vec<SessionId>,
}

/// Forks `parent` at `at` as `id` (labelled `label`) with two turns of its own.
fn fork(store: &Store, parent: &SessionId, at: u64, id: &str, label: &str) -> SessionId {
    let fork = store
        .fork(
            parent,
            ForkOptions {
                at: Some(at),
                id: Some(id.into()),
                label: Some(label.into()),
                ..Default::default()
            },
        )
        .unwrap()
        .session;
    for role in [Role::User, Role::Assistant] {
        store
            .append(&fork, NewTurn::new(role, format!("a turn of {label}")))
            .unwrap();
    }
    fork
}

/// A root of 20 turns and 300 forks. The spine: nine forks, each of the one before at
/// its last turn, so each stands last (rightmost) among its siblings; the ninth is
/// labelled `needle`. The others fork sessions made before them, at a turn before the
/// last: the root gets 13 at once, then every session is as likely a parent as another
/// (wide fan-outs near the root, some branches eight deep).
fn family() -> Family {
    let store = Arc::new(Store::in_memory().unwrap());
    let root = store
        .create_session(NewSession {
            id: Some("root".into()),
            title: Some("a 300-branch family".into()),
            ..Default::default()
        })
        .unwrap();
    for i in 0..20 {
        let role = [Role::User, Role::Assistant][i % 2];
        store
            .append(&root, NewTurn::new(role, format!("turn {i} of the root")))
            .unwrap();
    }
    // (id, length, depth)
    let mut sessions = vec![(root.clone(), 20u64, 0usize)];
    let mut path = vec![root.clone()];
    for depth in 1..=9 {
        let (parent, length) = (path[depth - 1].clone(), 20 + 2 * (depth as u64 - 1));
        let label = match depth {
            9 => "needle".to_string(),
            d => format!("spine-{d}"),
        };
        let made = fork(&store, &parent, length, &format!("spine-{depth}"), &label);
        sessions.push((made.clone(), length + 2, depth));
        path.push(made);
    }
    for k in 0..13u64 {
        // Fork points scrambled against the order they are made in.
        let at = 1 + (k * 7) % 13;
        let made = fork(&store, &root, at, &format!("top-{k}"), &format!("top-{k}"));
        sessions.push((made, at + 2, 1));
    }
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for b in 0..(300 - 9 - 13) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let (parent, length, depth) = loop {
            let pick = &sessions[(seed as usize) % sessions.len()];
            if pick.2 < 8 {
                break pick.clone();
            }
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        };
        let at = 1 + seed % (length - 1);
        let made = fork(
            &store,
            &parent,
            at,
            &format!("b-{b}"),
            &format!("branch-{b}"),
        );
        sessions.push((made, at + 2, depth + 1));
    }
    assert_eq!(sessions.len(), 301);
    Family { store, root, path }
}

/// What the page shows of the drawing: boxes drawn, which of `ids` have a box, whether
/// `marked`'s box is marked as a hit, and where its box is against the window and the
/// drawing's frame (`[left, top, right, bottom]` of each, in CSS pixels).
async fn drawn(c: &Client, ids: &[String], marked: &str) -> Value {
    c.execute(
        "const [ids, marked] = arguments;
         const box = id => document.getElementById('drawn-' + id);
         const edges = r => [r.left, r.top, r.right, r.bottom];
         const svg = document.querySelector('div.drawing svg');
         const m = box(marked);
         return {
           boxes: svg.querySelectorAll('rect.node, rect.more').length,
           present: ids.filter(id => box(id) !== null),
           hit: m !== null && m.classList.contains('hit'),
           rect: m === null ? null : edges(m.querySelector('rect.node').getBoundingClientRect()),
           frame: edges(document.querySelector('div.drawing').getBoundingClientRect()),
           window: [0, 0, document.documentElement.clientWidth, document.documentElement.clientHeight],
         };",
        vec![serde_json::json!(ids), serde_json::json!(marked)],
    )
    .await
    .unwrap()
}

/// Whether rectangle `inner` lies within `outer` (half a pixel of rounding allowed).
fn within(inner: &Value, outer: &Value) -> bool {
    let at = |v: &Value, i: usize| v[i].as_f64().unwrap();
    at(inner, 0) >= at(outer, 0) - 0.5
        && at(inner, 1) >= at(outer, 1) - 0.5
        && at(inner, 2) <= at(outer, 2) + 0.5
        && at(inner, 3) <= at(outer, 3) + 0.5
}

/// The page's fit and axe-core's serious findings, each named by `what`.
async fn problems(c: &Client, axe: &str, what: &str) -> Vec<String> {
    let mut out: Vec<String> = past_the_edge(c)
        .await
        .into_iter()
        .map(|p| format!("{what}: {p}"))
        .collect();
    for v in serious_violations(c, axe).await {
        out.push(format!("{what}: {v}"));
    }
    out
}

#[test]
fn a_search_in_300_branches_draws_marks_and_shows_the_branch_and_more_boxes_unfold_and_fold() {
    let Some(driver) = chromedriver() else { return };
    let Some(axe) = axe_source() else { return };
    let Family { store, root, path } = family();
    let needle = path.last().unwrap().to_string();
    let top = store.tree(&root).unwrap();
    let children: Vec<String> = top.children.iter().map(|c| c.session.to_string()).collect();
    assert!(children.len() >= 14, "{children:?}");
    let ids: Vec<String> = path.iter().map(SessionId::to_string).collect();
    let addr = common::serve_in_process(Arc::clone(&store), Default::default());
    let base = format!("http://{addr}/ui/sessions/{root}/tree");
    let (mut measured, mut found) = (Vec::new(), Vec::new());
    runtime().block_on(async {
        for (scheme, switches) in SCHEMES {
            let c = browser_with(&driver, switches).await;
            for (w, h) in WIDTHS {
                let at = format!("{w} px, {scheme}");
                c.set_window_size(w, h).await.unwrap();
                // Unsearched, the boxes drawn breadth first leave the needle out.
                c.goto(&base).await.unwrap();
                let plain = drawn(&c, &ids, &needle).await;
                assert_eq!(
                    plain["present"],
                    serde_json::json!(ids[..1]),
                    "{at}: {plain}"
                );

                // Searched: the path from the root is drawn, the needle marked and shown.
                c.goto(&format!("{base}?q=needle")).await.unwrap();
                let searched = drawn(&c, &ids, &needle).await;
                assert_eq!(
                    searched["present"],
                    serde_json::json!(ids),
                    "{at}: {searched}"
                );
                assert_eq!(searched["hit"], Value::Bool(true), "{at}");
                let rect = &searched["rect"];
                assert!(within(rect, &searched["window"]), "{at}: {searched}");
                assert!(within(rect, &searched["frame"]), "{at}: {searched}");
                let boxes = searched["boxes"].as_u64().unwrap();
                assert!((20..=140).contains(&boxes), "{at}: {boxes} boxes");
                measured.push(format!(
                    "{at}: {} boxes unsearched, {boxes} searched, the needle's box at {rect}",
                    plain["boxes"]
                ));
                found.extend(problems(&c, &axe, &format!("search at {at}")).await);
                screenshot(&c, &format!("tree-300-search-{w}-{scheme}.png")).await;

                // The root's "+N more" box unfolds every child of the root ...
                click(&c, Locator::Css(&format!("a.more[data-under='{root}']"))).await;
                let unfolded = drawn(&c, &children, &needle).await;
                assert_eq!(unfolded["present"], serde_json::json!(children), "{at}");
                assert_eq!(unfolded["hit"], Value::Bool(true), "still searched, {at}");
                assert!(c
                    .current_url()
                    .await
                    .unwrap()
                    .as_str()
                    .contains("open=root"));
                found.extend(problems(&c, &axe, &format!("unfolded at {at}")).await);
                screenshot(&c, &format!("tree-300-unfolded-{w}-{scheme}.png")).await;
                // ... and its badge folds them again.
                click(&c, Locator::Css(&format!("a.fold[data-fold='{root}']"))).await;
                let folded = drawn(&c, &children, &needle).await;
                let back = folded["present"].as_array().unwrap().len();
                assert!(back < children.len(), "{at}: {folded}");
                assert!(!c.current_url().await.unwrap().as_str().contains("open="));
            }
            c.close().await.unwrap();
        }
    });
    eprintln!("{}", measured.join("\n"));
    assert!(
        found.is_empty(),
        "{} problems:\n{}",
        found.len(),
        found.join("\n")
    );
}
