//! The web UI's writing: the composer at the end of a session (add a turn, and have a
//! model answer it), and Edit on a user turn, which sends the edited text as the first
//! turn of a new branch forked just before it, as chat UIs do with edit-and-resend.
//!
//! An answer runs as a what-if job with reason `continue`: it is appended to the
//! session itself (to a fork, should the session have grown meanwhile). The form lands
//! back on the session's playback at the turn the answer will be, which shows the job
//! there while it runs (with script it follows it and shows the answer in place).
//!
//! A tool call the last turn makes is answered by hand (a `tool` turn naming the call)
//! or from the recording the branch was forked from (`Store::answer_from_recording`).

use super::shell::{
    self, endpoints, error_page, given, may_write, session_id, token_field, write, Page,
};
use crate::model::{ForkOptions, NewTurn, Role, SessionId, SessionInfo, Turn};
use crate::server::{ApiError, AppState, Shared};
use crate::RegenerateOptions;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use serde::Deserialize;
use std::sync::Arc;

/// The fields of the model that answers, when asked to (the second button).
fn answer_fields(prefix: &str, state: &AppState) -> Markup {
    html! {
        details.answer {
            summary { "Model" }
            label for=(format!("{prefix}-model")) { "Model" }
            input id=(format!("{prefix}-model")) name="model"
                placeholder="the last assistant turn's model";
            label for=(format!("{prefix}-max")) { "Max tokens" }
            input id=(format!("{prefix}-max")) name="max_tokens" type="number" min="1"
                placeholder="the endpoint's";
            label for=(format!("{prefix}-endpoint")) { "Endpoint" }
            select id=(format!("{prefix}-endpoint")) name="endpoint" {
                @for e in endpoints(state) { option value=(e) { (e) } }
            }
        }
    }
}

/// The two ways to send: as it is, or with a model's answer to follow.
fn send_buttons(send: &str) -> Markup {
    html! {
        div.buttons {
            button.send type="submit" { (send) }
            button.send-answer type="submit" name="answer" value="1" { (send) " and have the model answer" }
        }
    }
}

/// The composer at the end of a session: a turn to add (a user's, by default; a tool's
/// when the last turn calls tools, which can also be answered from the recording), and
/// whether a model answers it.
pub(super) fn composer(info: &SessionInfo, turns: &[Turn], state: &AppState) -> Markup {
    let id = &info.session;
    let (last, calls) = crate::whatif::open_calls(turns).unwrap_or((None, Vec::new()));
    let role = |r: &str| (calls.is_empty() && r == "user") || (!calls.is_empty() && r == "tool");
    html! {
        section #composer.composer aria-labelledby="composer-title" {
            h2 #composer-title { "Continue " (info.branch) }
            @if info.length == info.forked_at_index.unwrap_or(0) && info.parent.is_some() {
                p.meta { "This branch has no turns of its own yet: write its first." }
            }
            @if let (Some(last), false) = (last, calls.is_empty()) {
                p.open-calls { "Turn " (last.index) " calls "
                    @for (n, c) in calls.iter().enumerate() {
                        @if n > 0 { ", " }
                        code { (c.name) "(" (c.arguments) ")" }
                    }
                    ": answer " @if info.parent.is_some() { "from the recording, or " } "by hand." }
                @if info.parent.is_some() {
                    form.write.recorded method="post" action=(format!("/ui/sessions/{id}/recorded")) {
                        (answer_fields("recorded", state))
                        (token_field("recorded-token"))
                        div.buttons {
                            button.recorded type="submit" { "Answer from the recording" }
                            button.recorded-answer type="submit" name="answer" value="1" {
                                "Answer from the recording and have the model go on"
                            }
                        }
                    }
                }
            }
            form.write method="post" action=(format!("/ui/sessions/{id}/append")) {
                label for="composer-role" { "As" }
                select #composer-role name="role" {
                    @for r in ["user", "assistant", "system", "tool"] {
                        option value=(r) selected[role(r)] { (r) }
                    }
                }
                @if !calls.is_empty() {
                    label for="composer-call" { "Answering" }
                    select #composer-call name="tool_call_id" {
                        @for c in &calls { option value=(c.id) { (c.name) "(" (c.arguments) ")" } }
                    }
                }
                label for="composer-content" { "Turn " (info.length) }
                textarea #composer-content name="content" rows="4" required {}
                (answer_fields("composer", state))
                (token_field("composer-token"))
                (send_buttons(&format!("Add turn {}", info.length)))
            }
        }
    }
}

/// Edit on user turn `turn`: its text to change and send as a new branch forked just
/// before it.
pub(super) fn edit_form(info: &SessionInfo, turn: &Turn, state: &AppState) -> Markup {
    let (id, i) = (&info.session, turn.index);
    html! {
        details.action.edit {
            summary { "Edit" }
            form.write method="post" action=(format!("/ui/sessions/{id}/edit")) {
                input type="hidden" name="at" value=(i);
                label for=(format!("edit-content-{i}")) { "Turn " (i) ", edited" }
                textarea id=(format!("edit-content-{i}")) name="content" rows="4" required {
                    (turn.content)
                }
                label for=(format!("edit-label-{i}")) { "Branch label" }
                input id=(format!("edit-label-{i}")) name="label" placeholder="fork-…";
                (answer_fields(&format!("edit-{i}"), state))
                (token_field(&format!("edit-token-{i}")))
                (send_buttons("Send as a new branch"))
            }
        }
    }
}

/// The fields of a form that may ask a model to answer (see [`answer_fields`]).
#[derive(Deserialize)]
struct AnswerForm {
    /// Set by the second button.
    #[serde(default)]
    answer: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    max_tokens: String,
    #[serde(default)]
    endpoint: String,
    #[serde(default)]
    token: String,
}

#[derive(Deserialize)]
struct AppendForm {
    #[serde(default)]
    role: String,
    /// The call a tool turn answers.
    #[serde(default)]
    tool_call_id: String,
    content: String,
    #[serde(flatten)]
    ask: AnswerForm,
}

/// `POST /ui/sessions/{id}/append`: adds the turn; with an answer asked for, on to the
/// job that gets it, else back to the session's end.
pub(super) async fn append(
    state: Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Page {
    let state = state.0;
    let f: AppendForm = shell::form(&state, &body)?;
    may_write(&state, &headers, &f.ask.token)?;
    let id = session_id(&state, &id)?;
    let role = match f.role.as_str() {
        "" | "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" => Role::System,
        "tool" => Role::Tool,
        other => {
            return Err(error_page(
                &state,
                ApiError::bad_request(format!(
                    "role {other:?}: expected user, assistant, system or tool"
                )),
            ))
        }
    };
    let (endpoint, ask) = Ask::read(&state, &f.ask)?;
    let session = id.clone();
    let mut turn = NewTurn::new(role, f.content);
    match (role, given(&f.tool_call_id)) {
        (Role::Tool, Some(call)) => turn = turn.tool_call_id(&call),
        (Role::Tool, None) => {
            return Err(error_page(
                &state,
                ApiError::bad_request(
                    "a tool turn answers a tool call, and none was chosen: the last turn \
                     makes no call to answer"
                        .to_string(),
                ),
            ))
        }
        _ => {}
    }
    let index = write(&state, move |store| store.append(&session, turn)).await?;
    match endpoint {
        Some(endpoint) => answer(&state, id, index + 1, ask, endpoint).await,
        None => Ok(Redirect::to(&at_turn(&id, index)).into_response()),
    }
}

#[derive(Deserialize)]
struct EditForm {
    at: String,
    content: String,
    #[serde(default)]
    label: String,
    #[serde(flatten)]
    ask: AnswerForm,
}

/// `POST /ui/sessions/{id}/edit`: forks just before the edited turn, the edited text
/// its first turn (one write); with an answer asked for, on to the job, else to the
/// new branch.
pub(super) async fn edit(
    state: Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Page {
    let state = state.0;
    let f: EditForm = shell::form(&state, &body)?;
    may_write(&state, &headers, &f.ask.token)?;
    let id = session_id(&state, &id)?;
    let at = shell::turn_index(&state, &f.at)?;
    let (endpoint, ask) = Ask::read(&state, &f.ask)?;
    let options = ForkOptions {
        at: Some(at),
        label: given(&f.label),
        reason: Some(format!("turn {at} edited")),
        ..Default::default()
    };
    let turn = NewTurn::new(Role::User, f.content);
    let parent = id.clone();
    let plan = write(&state, move |store| {
        store.fork_with(&parent, options, vec![turn])
    })
    .await?;
    match endpoint {
        Some(endpoint) => answer(&state, plan.session, at + 1, ask, endpoint).await,
        None => Ok(Redirect::to(&at_turn(&plan.session, at)).into_response()),
    }
}

/// `POST /ui/sessions/{id}/recorded`: answers the last turn's tool calls from the
/// recording the branch was forked from (one write); with an answer asked for, on to
/// the model that goes on from them, else back to the session's end.
pub(super) async fn recorded(
    state: Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Page {
    let state = state.0;
    let f: AnswerForm = shell::form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = session_id(&state, &id)?;
    let (endpoint, ask) = Ask::read(&state, &f)?;
    let session = id.clone();
    let appended = write(&state, move |store| store.answer_from_recording(&session)).await?;
    let last = appended.last().copied().unwrap_or_default();
    match endpoint {
        Some(endpoint) => answer(&state, id, last + 1, ask, endpoint).await,
        None => Ok(Redirect::to(&at_turn(&id, last)).into_response()),
    }
}

/// The model and answer size a form asks for.
struct Ask {
    model: Option<String>,
    max_tokens: Option<u32>,
}

impl Ask {
    /// The endpoint to answer with (one the server offers) when the form asks for an
    /// answer, `None` when it does not; and the model and size asked for.
    fn read(state: &AppState, f: &AnswerForm) -> Result<(Option<String>, Self), Response> {
        let endpoint = match f.answer.is_empty() {
            true => None,
            false => Some(shell::offered_endpoint(state, &f.endpoint)?),
        };
        let max_tokens = match given(&f.max_tokens) {
            None => None,
            Some(text) => Some(text.parse::<u32>().map_err(|_| {
                error_page(
                    state,
                    ApiError::bad_request(format!("max tokens {text:?} is not a whole number")),
                )
            })?),
        };
        let ask = Ask {
            model: given(&f.model),
            max_tokens,
        };
        Ok((endpoint, ask))
    }
}

/// Starts the job that has a model answer session `id` at its end, `at`; on to its page.
async fn answer(
    state: &Arc<AppState>,
    id: SessionId,
    at: u64,
    ask: Ask,
    endpoint: String,
) -> shell::Page {
    let options = RegenerateOptions {
        at,
        model: ask.model,
        max_tokens: ask.max_tokens,
        endpoint: Some(endpoint),
        allow_remote: state.config.allow_remote_models,
        reason: Some("continue".into()),
        ..Default::default()
    };
    let back = at_turn(&id, at - 1);
    match crate::server::rest::start_regeneration(state, id.clone(), options).await {
        // Back to the thread, at the turn the answer will be: the page shows it once
        // written (with script, in place; without, on a reload).
        Ok(job) => {
            let page = at.saturating_sub(1) / crate::html::PAGE * crate::html::PAGE;
            let job = url::form_urlencoded::byte_serialize(job.job.as_bytes()).collect::<String>();
            Ok(Redirect::to(&format!(
                "/ui/sessions/{id}?from={page}&job={job}#turn-{at}"
            ))
            .into_response())
        }
        // The turn is in: say so, and what kept the model from answering it.
        Err(mut e) => {
            e.message = shell::with_names(state, &e.message).await.0;
            Err(shell::page(
                state,
                e.status,
                "No answer",
                html! {
                    h1 { "No answer" }
                    p.error data-code=(e.code) { (e.message) }
                    p.outcome { "Turn " (at - 1) " was written; no model answered it." }
                    p { a href=(back) { "Back to it" } }
                },
            ))
        }
    }
}

/// The playback page of session `id` that shows turn `index`, at that turn.
fn at_turn(id: &SessionId, index: u64) -> String {
    let page = crate::html::PAGE;
    format!(
        "/ui/sessions/{id}?from={}#turn-{index}",
        index / page * page
    )
}
