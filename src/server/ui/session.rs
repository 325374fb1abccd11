//! A session's playback: a page of its turns with their figures and actions, the
//! session's own actions, and the turns that came since, for a page that follows it.
//! With `?job=` (where the composer and Edit land) the answer that job writes at the
//! session's end stands at its turn while it runs, or says why it did not come.

use super::compose::{composer, edit_form};
use super::shell::{
    endpoints, given, page, read, session_id, token_field, turn_index, valid_range, Page,
};
use crate::html::{self, Links};
use crate::model::{Job, JobStatus, SessionId, SessionInfo, TreeNode, Turn};
use crate::server::{AppState, Shared};
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use serde::Deserialize;

#[derive(Deserialize, Default)]
pub(super) struct PageQuery {
    #[serde(default)]
    from: u64,
    /// Go to this turn: the page that holds it, at it.
    #[serde(default)]
    turn: String,
    /// The job answering at the session's end (the composer's and Edit's answer).
    #[serde(default)]
    job: String,
}

/// `GET /ui/sessions/{id}?from=`: a page of the session's turns, inherited ones marked
/// with the branch that owns them, a sibling pager at each fork point, and the actions.
pub(super) async fn playback(
    state: Shared,
    Path(id): Path<String>,
    Query(at): Query<PageQuery>,
) -> Page {
    let state = state.0;
    let id = session_id(&state, &id)?;
    if let Some(turn) = given(&at.turn) {
        let index = turn_index(&state, &turn)?;
        let page = index / html::PAGE * html::PAGE;
        return Ok(
            Redirect::to(&format!("/ui/sessions/{id}?from={page}#turn-{index}")).into_response(),
        );
    }
    let from = at.from;
    let job = at.job;
    let read_id = id.clone();
    let (info, turns, root, anchors) = read(&state, move |store| {
        // The job before the session: an answer it has written is then among the turns
        // read (a job read after them could be complete with its turn not shown). A job
        // that is not (or no longer) known is no reason to refuse the page.
        let job = given(&job).and_then(|j| store.job(&j).ok());
        let info = store.info(&read_id)?;
        if from > 0 && from >= info.length {
            return Err(crate::Error::IndexOutOfRange {
                session: read_id.to_string(),
                index: from.into(),
                valid: valid_range(info.length),
            });
        }
        let last = (from + html::PAGE).min(info.length).saturating_sub(1);
        let turns = if info.length == 0 {
            Vec::new()
        } else {
            store.load_range(&read_id, from, last)?
        };
        let figures = store.turn_figures(&turns)?;
        let root = store.tree(&info.fork_root)?;
        let anchors = store.anchors(&read_id)?;
        let calls = store.model_calls(&read_id)?;
        Ok((info, (turns, figures, calls, job), root, anchors))
    })
    .await?;
    let (turns, figures, calls, job) = turns;
    // Only a job asked at this session's end has its place here.
    let job = job.filter(|j| j.session == id);
    if let Some(to) = job.as_ref().and_then(|j| written_elsewhere(j, &info, from)) {
        return Ok(Redirect::to(&to).into_response());
    }
    let points = html::sibling_points(&root, &id);
    let writable = state.config.token.is_some();
    let links = Links::Server;
    let base = format!("/ui/sessions/{id}");
    let pages = pager(&base, from, turns.len() as u64, info.length);
    let family = family_ids(&root);
    let body = html! {
        h1 { (info.title.as_deref().unwrap_or(&info.branch)) }
        p.meta { @if info.title.is_some() { "branch " (info.branch) " · " } span.id { (info.session) } }
        p {
            a href=(format!("{base}/tree")) { "Fork tree" }
            @if let Some(parent) = &info.parent {
                " · " a href=(format!("/ui/diff?a={parent}&b={id}")) { "Diff against parent" }
            }
            " · " a href=(format!("/sessions/{id}/export?format=html")) download=(format!("{id}.html")) { "Export as HTML" }
        }
        (html::facts(&info, html::parent_branch(&root, &info).as_deref(), links))
        @if family.len() > 1 {
            form.inline method="get" action="/ui/diff" {
                input type="hidden" name="a" value=(id);
                label for="diff-b" { "Diff with " }
                select #diff-b name="b" {
                    @for (other, branch) in family.iter().filter(|(s, _)| *s != id) {
                        // A label two branches share is told apart by the id's start.
                        @let twice = family.iter().filter(|(_, b)| b == branch).count() > 1;
                        option value=(other) { (branch)
                            @if twice { " · " (other.as_str().get(..8).unwrap_or(other.as_str())) } }
                    }
                }
                " " button type="submit" { "Diff" }
            }
        }
        @if info.length > 1 {
            form.inline.goto method="get" action=(base) {
                label for="goto-turn" { "Go to turn" }
                input #goto-turn name="turn" type="number" min="0" max=(info.length - 1) required;
                button type="submit" { "Go" }
            }
        }
        (pages)
        // The last page follows the session as it grows (the script asks for turns
        // past `data-next`); without script, a reload shows them.
        @let last_page = from + html::PAGE >= info.length;
        ol.turns start=(from)
            data-follow=[last_page.then(|| format!("{base}/after/"))]
            data-next=[last_page.then_some(info.length)] {
            (turn_items(&state, &info, &turns, &figures, &points, writable))
            @if let (Some(job), true) = (&job, last_page) { (answering(&info, job, &at_page(&base, from))) }
        }
        (pages)
        (model_calls(&base, &calls))
        @if writable && last_page {
            (composer(&info, &turns, &state))
        }
        (session_actions(&info, &anchors, writable))
    };
    Ok(page(
        &state,
        StatusCode::OK,
        info.title.as_deref().unwrap_or(&info.branch),
        body,
    ))
}

/// The links to a session's earlier and later pages of turns, when it has more than one.
fn pager(base: &str, from: u64, shown: u64, length: u64) -> Markup {
    html! {
        @if length > html::PAGE {
            nav.pages aria-label="pages" {
                @if from > 0 {
                    a href=(format!("{base}?from={}", from.saturating_sub(html::PAGE))) { "‹ earlier turns" }
                }
                span { "turns " (from) "–" ((from + shown).saturating_sub(1)) " of " (length) }
                @if from + html::PAGE < length {
                    a href=(format!("{base}?from={}", from + html::PAGE)) { "later turns ›" }
                }
            }
        }
    }
}

/// Where the answer `job` wrote is shown, when that is on another page than the one
/// from `from` (the last page grew past its end once it was written).
fn written_elsewhere(job: &Job, info: &SessionInfo, from: u64) -> Option<String> {
    let on_page = (from..from + html::PAGE).contains(&job.at);
    (job.at < info.length && !on_page).then(|| {
        let page = job.at / html::PAGE * html::PAGE;
        format!("/ui/sessions/{}?from={page}#turn-{}", info.session, job.at)
    })
}

fn at_page(base: &str, from: u64) -> String {
    format!("{base}?from={from}")
}

/// Where the answer of `job` (asked for at the session's end) stands, in the thread at
/// the turn it will be: running (for how long; the script follows it), failed, or gone
/// to a fork because the session grew meanwhile. Nothing once it is the turn shown.
fn answering(info: &SessionInfo, job: &Job, here: &str) -> Markup {
    let ran = job.created_at.as_deref().and_then(html::seconds_since);
    let link = format!("/ui/jobs/{}", job.job);
    let show = |text: Markup| {
        html! {
            li.turn.pending id=(format!("turn-{}", job.at)) data-job=(job.job)
                data-status=(job.status.as_str()) data-since=[job.created_at.as_deref()] {
                div.meta { span.index { "#" (job.at) } " " span.role.role-assistant { "assistant" }
                    " " span.model { (job.model) } }
                (text)
            }
        }
    };
    // Running or failed, the answer's place is the session's end; gone to a fork, the
    // session grew past it.
    let at_end = job.at == info.length;
    match (job.status, &job.fork) {
        (JobStatus::Running, _) if at_end => show(html! {
            p role="status" { "The model is answering" span.elapsed {
                @if let Some(s) = ran { " (" (s) " s so far)" } } ". "
                a href=(format!("{here}&job={}#turn-{}", job.job, job.at)) { "Refresh" } " · "
                a href=(link) { "the job" } }
        }),
        (JobStatus::Complete, Some(fork)) if *fork != info.session => show(html! {
            p { "The session grew while the model answered, so its answer went to a branch of its own: "
                a href=(format!("/ui/sessions/{fork}?turn={}", job.at)) { "the answer" } "." }
        }),
        (JobStatus::Failed | JobStatus::Cancelled, _) if at_end => show(html! {
            p.error { "No answer: the job " (job.status.as_str())
                @if let Some(e) = &job.error { " — " (e) } ". "
                a href=(link) { "What failed, and try again" } }
        }),
        _ => html! {},
    }
}

/// The calls an agent made through the model proxy that extended this session, newest
/// last: a recording in progress shows each call as it is recorded.
fn model_calls(base: &str, calls: &[crate::ModelCallInfo]) -> Markup {
    let number = |n: Option<u64>| n.map_or_else(|| "–".to_string(), |n| n.to_string());
    html! {
        @if !calls.is_empty() {
            section aria-labelledby="calls-heading" {
                h2 #calls-heading { "Model calls (" (calls.len()) ")" }
                div.scroll {
                    table {
                        thead { tr {
                            th scope="col" { "Started" } th scope="col" { "Model" }
                            th scope="col" { "Outcome" } th scope="col" { "Sent" }
                            th scope="col" { "Answer" } th scope="col" { "Tokens in / out" }
                            th scope="col" { "Latency" } th scope="col" { "Cost" }
                        } }
                        tbody {
                            @for c in calls {
                                tr {
                                    td { @match c.started_at.as_deref() { Some(at) => (html::when(at)), None => "–" } }
                                    td { (c.model.as_deref().unwrap_or("–")) }
                                    td { (c.outcome.as_str()) @if let Some(e) = &c.error { " — " (e) } }
                                    td { (c.request_turns) " turns" }
                                    td {
                                        @match c.answer_index {
                                            Some(i) => a href=(format!("{base}?turn={i}")) { "turn " (i) },
                                            None => "–",
                                        }
                                    }
                                    td.number { (number(c.input_tokens)) " / " (number(c.output_tokens)) }
                                    td.number { (c.latency_ms) " ms" }
                                    td.number { (c.cost_usd.map_or_else(|| "–".to_string(), |d| format!("${d:.4}"))) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The list items of `turns` of session `info`, as playback shows them.
fn turn_items(
    state: &AppState,
    info: &SessionInfo,
    turns: &[Turn],
    figures: &[crate::TurnFigures],
    points: &html::SiblingPoints,
    writable: bool,
) -> Markup {
    let links = Links::Server;
    html! {
        @for turn in turns {
            @let before = match points.get(&turn.index) {
                Some((options, position)) => html::sibling_pager(turn.index, options, *position, links),
                None => html! {},
            };
            @let after = html! {
                @if let Some(f) = figures.iter().find(|f| f.index == turn.index) { (turn_figures(f)) }
                (turn_actions(info, turn, writable, state))
            };
            (html::turn_item(info, turn, links, before, after))
        }
    }
}

/// What the store measured of a turn a model wrote: tokens, latency, cost, and the
/// comparison it was a step of.
fn turn_figures(f: &crate::TurnFigures) -> Markup {
    let mut parts: Vec<String> = Vec::new();
    match (f.input_tokens, f.output_tokens) {
        (Some(i), Some(o)) => parts.push(format!("{i} in · {o} out tokens")),
        (Some(i), None) => parts.push(format!("{i} tokens in")),
        (None, Some(o)) => parts.push(format!("{o} tokens out")),
        (None, None) => {}
    }
    if let Some(ms) = f.latency_ms {
        parts.push(format!("{ms} ms"));
    }
    if let Some(usd) = f.cost_usd {
        parts.push(format!("${usd:.4}"));
    }
    html! {
        p.figures {
            (parts.join(" · "))
            @if let Some(c) = &f.comparison {
                @if !parts.is_empty() { " · " }
                a href=(format!("/ui/comparisons/{c}")) { "the model comparison" }
            }
        }
    }
}

/// `GET /ui/sessions/{id}/after/{index}`: the list items of the session's turns from
/// `index` on (a page at most), for an open playback page that follows the session as
/// it grows; 204 when there are none yet. `X-Forktrail-Next` says where to ask next.
pub(super) async fn turns_after(
    state: Shared,
    Path((id, index)): Path<(String, u64)>,
) -> Result<Response, Response> {
    let state = state.0;
    let id = session_id(&state, &id)?;
    let read_id = id.clone();
    let (info, turns, root) = read(&state, move |store| {
        let info = store.info(&read_id)?;
        if index >= info.length {
            return Ok((info, (Vec::new(), Vec::new()), None));
        }
        let last = (index + html::PAGE).min(info.length) - 1;
        let turns = store.load_range(&read_id, index, last)?;
        let figures = store.turn_figures(&turns)?;
        let root = store.tree(&info.fork_root)?;
        Ok((info, (turns, figures), Some(root)))
    })
    .await?;
    let (turns, figures) = turns;
    let next = index + turns.len() as u64;
    let header = [("x-forktrail-next", next.to_string())];
    let Some(root) = root else {
        return Ok((StatusCode::NO_CONTENT, header).into_response());
    };
    let points = html::sibling_points(&root, &id);
    let writable = state.config.token.is_some();
    let items = turn_items(&state, &info, &turns, &figures, &points, writable);
    let content_type = [(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")];
    Ok((header, content_type, items.into_string()).into_response())
}

/// Every session of a family, in tree order, with its branch label.
fn family_ids(root: &TreeNode) -> Vec<(SessionId, String)> {
    let mut out = vec![(root.session.clone(), root.branch.clone())];
    for child in &root.children {
        out.extend(family_ids(child));
    }
    out
}

/// A turn's actions: its provenance, and (on a server that takes writes) Fork from
/// here, What-if from here and Compare models from here (`compare.rs`).
fn turn_actions(info: &SessionInfo, turn: &Turn, writable: bool, state: &AppState) -> Markup {
    let i = turn.index;
    let id = &info.session;
    // A what-if answers this turn again when it is the model's, else answers after it.
    let what_if_at = if turn.role == crate::Role::Assistant {
        i
    } else {
        i + 1
    };
    html! {
        div.actions {
            a.action href=(format!("/ui/sessions/{id}/turns/{i}")) { "Provenance" }
            @if writable {
                @if turn.role == crate::Role::User {
                    " " (edit_form(info, turn, state))
                }
                " "
                details.action.fork {
                    summary { "Fork from here" }
                    form.write method="post" action=(format!("/ui/sessions/{id}/fork")) {
                        input type="hidden" name="at" value=(i + 1);
                        label for=(format!("fork-label-{i}")) { "Label" }
                        input id=(format!("fork-label-{i}")) name="label" placeholder="fork-…";
                        label for=(format!("fork-reason-{i}")) { "Reason" }
                        input id=(format!("fork-reason-{i}")) name="reason";
                        (token_field(&format!("fork-token-{i}")))
                        button type="submit" { "Fork after turn " (i) }
                    }
                }
                details.action.what-if {
                    summary { "What-if from here" }
                    form.write method="post" action=(format!("/ui/sessions/{id}/whatif")) {
                        input type="hidden" name="at" value=(what_if_at);
                        label for=(format!("wi-model-{i}")) { "Model" }
                        input id=(format!("wi-model-{i}")) name="model"
                            placeholder="the last assistant turn's model";
                        label for=(format!("wi-system-{i}")) { "System prompt" }
                        textarea id=(format!("wi-system-{i}")) name="system_prompt"
                            placeholder="keep the session's" {}
                        label for=(format!("wi-tools-{i}")) { "Tools (JSON)" }
                        textarea id=(format!("wi-tools-{i}")) name="tools"
                            placeholder="keep the session's" {}
                        label for=(format!("wi-max-{i}")) { "Max tokens" }
                        input id=(format!("wi-max-{i}")) name="max_tokens" type="number" min="1"
                            placeholder="the endpoint's";
                        label for=(format!("wi-endpoint-{i}")) { "Endpoint" }
                        select id=(format!("wi-endpoint-{i}")) name="endpoint" {
                            @for e in endpoints(state) { option value=(e) { (e) } }
                        }
                        label for=(format!("wi-budget-{i}")) { "Budget (USD)" }
                        input id=(format!("wi-budget-{i}")) name="budget"
                            placeholder="required off this machine";
                        label for=(format!("wi-price-{i}")) { "Price (USD per million tokens, IN/OUT)" }
                        input id=(format!("wi-price-{i}")) name="price" placeholder="3/15";
                        (token_field(&format!("wi-token-{i}")))
                        // Named by the turn it writes, as the estimate and the job are.
                        button type="submit" {
                            @if what_if_at == i { "Estimate turn " (i) " anew" }
                            @else { "Estimate turn " (what_if_at) " (an answer after turn " (i) ")" }
                        }
                    }
                }
                // A comparison needs at least one turn of context.
                @if what_if_at > 0 {
                    a.action.compare href=(format!("/ui/sessions/{id}/compare?at={what_if_at}")) {
                        "Compare models from here"
                    }
                }
            }
        }
    }
}

/// The session's own actions: anchors, merge-back, delete.
fn session_actions(info: &SessionInfo, anchors: &[crate::AnchorInfo], writable: bool) -> Markup {
    let id = &info.session;
    html! {
        section.session-actions {
            h2 { "Anchors" }
            @if anchors.is_empty() { p.meta { "No anchors." } } @else {
                ul { @for a in anchors {
                    li { strong { (a.name) } " at turn " (a.at_index)
                        @if a.session != *id { " (set on " span.id { (a.session) } ")" } }
                } }
            }
            @if writable {
                form.write method="post" action=(format!("/ui/sessions/{id}/anchors")) {
                    label for="anchor-name" { "Name" }
                    input #anchor-name name="name" required;
                    (token_field("anchor-token"))
                    button type="submit" { "Anchor at turn " (info.length) }
                }
                @if info.parent.is_some() {
                    h2 { "Merge back" }
                    form.write method="post" action=(format!("/ui/sessions/{id}/merge")) {
                        label for="merge-summary" { "Summary" }
                        textarea #merge-summary name="summary" placeholder="the last assistant turn" {}
                        (token_field("merge-token"))
                        button type="submit" { "Preview the merge" }
                    }
                }
                h2 { "Delete" }
                form.write method="post" action=(format!("/ui/sessions/{id}/delete")) {
                    (token_field("delete-token"))
                    button type="submit" { "Preview the delete" }
                }
            }
        }
    }
}
