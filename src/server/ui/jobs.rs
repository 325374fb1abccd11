//! What-if jobs: the form that starts one from a turn (an estimate first), its page,
//! and its cancel.

use super::shell::{
    endpoints, error_page, form, given, label_of, may_write, name_of, named_error_page,
    offered_endpoint, page, read, session_id, token_field, turn_index, write, Page, TokenForm,
};
use crate::html::{self};
use crate::model::{Job, JobStatus};
use crate::server::{ApiError, AppState, Shared};
use crate::RegenerateOptions;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect};
use maud::{html, Markup};
use serde::Deserialize;

#[derive(Deserialize)]
struct WhatIfForm {
    at: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    system_prompt: String,
    #[serde(default)]
    tools: String,
    #[serde(default)]
    endpoint: String,
    #[serde(default)]
    max_tokens: String,
    #[serde(default)]
    budget: String,
    #[serde(default)]
    price: String,
    /// Empty: show the estimate; set: start the job.
    #[serde(default)]
    confirm: String,
    #[serde(default)]
    token: String,
}

/// `POST /ui/sessions/{id}/whatif`: first the dry run's estimate, then (confirmed) the
/// job, followed on its own page until it ends.
pub(super) async fn what_if(
    state: Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Page {
    let state = state.0;
    let f: WhatIfForm = form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = session_id(&state, &id)?;
    let at = turn_index(&state, &f.at)?;
    let endpoint = offered_endpoint(&state, &f.endpoint)?;
    let tools = match given(&f.tools) {
        None => None,
        Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
            error_page(
                &state,
                ApiError::bad_request(format!("the tools are not JSON: {e}")),
            )
        })?),
    };
    let max_tokens = match given(&f.max_tokens) {
        None => None,
        Some(text) => Some(text.parse::<u32>().map_err(|_| {
            error_page(
                &state,
                ApiError::bad_request(format!("max tokens {text:?} is not a whole number")),
            )
        })?),
    };
    let bad = |why: String| error_page(&state, ApiError::bad_request(why));
    let budget_usd = match given(&f.budget) {
        None => None,
        Some(text) => Some(
            text.trim_start_matches('$')
                .parse::<f64>()
                .map_err(|_| bad(format!("budget {text:?} is not an amount of dollars")))?,
        ),
    };
    let price = match given(&f.price) {
        None => None,
        Some(text) => Some(
            text.parse::<crate::Price>()
                .map_err(|e| bad(e.to_string()))?,
        ),
    };
    let options = RegenerateOptions {
        at,
        max_tokens,
        budget_usd,
        price,
        model: given(&f.model),
        system_prompt: given(&f.system_prompt),
        tools,
        endpoint: Some(endpoint.clone()),
        allow_remote: state.config.allow_remote_models,
        dry_run: f.confirm.is_empty(),
        ..Default::default()
    };
    if options.dry_run {
        let plan_id = id.clone();
        let plan = write(&state, move |store| {
            store.plan_regeneration(&plan_id, &options)
        })
        .await?;
        let unreachable = unreachable(&plan.endpoint).await;
        return Ok(page(
            &state,
            StatusCode::OK,
            "what-if estimate",
            html! {
                h1 { "What-if on " (label_of(&state, &id).await) ": turn " (plan.at) " anew" }
                p.meta { "Session " span.id { (id) } }
                @if let Some(why) = &unreachable {
                    p.error.unreachable role="alert" { "Nothing answers at " (plan.endpoint) " now ("
                        (why) "): the job would fail. Start the model server there, or choose another endpoint." }
                }
                dl.facts.estimate {
                    dt { "Model" } dd { (plan.model) }
                    dt { "Endpoint" } dd { (plan.endpoint) }
                    dt { "Messages sent" } dd { (plan.messages) }
                    dt { "Estimated tokens" } dd.tokens { (plan.estimated_tokens) " (" (plan.estimate_method) ")" }
                    dt { "Swapped" } dd { @if plan.swapped.is_empty() { "nothing" } @else { (plan.swapped.join(", ")) } }
                    @if let Some(upper) = plan.upper_usd {
                        dt { "Costs at most" } dd.cost { (format!("${upper:.6}")) }
                    }
                    @if let Some(budget) = plan.budget_usd {
                        dt { "Budget" } dd { (format!("${budget:.6}")) }
                    }
                }
                details { summary { "The exact request" } pre { (serde_json::to_string_pretty(&plan.request).unwrap_or_default()) } }
                form.write method="post" action=(format!("/ui/sessions/{id}/whatif")) {
                    input type="hidden" name="at" value=(f.at);
                    input type="hidden" name="model" value=(f.model);
                    input type="hidden" name="system_prompt" value=(f.system_prompt);
                    input type="hidden" name="tools" value=(f.tools);
                    input type="hidden" name="endpoint" value=(endpoint);
                    input type="hidden" name="max_tokens" value=(f.max_tokens);
                    input type="hidden" name="budget" value=(f.budget);
                    input type="hidden" name="price" value=(f.price);
                    (token_field("confirm-token"))
                    button type="submit" name="confirm" value="1" { "Run it" }
                }
            },
        ));
    }
    let job = match crate::server::rest::start_regeneration(&state, id, options).await {
        Ok(job) => job,
        Err(e) => return Err(named_error_page(&state, e).await),
    };
    Ok(Redirect::to(&format!("/ui/jobs/{}", job.job)).into_response())
}

/// Why nothing answers at `endpoint` (a TCP connection to its host and port, given
/// two seconds), or `None` when something does: checked before an estimate, so a job
/// is not started against a server that is not there.
async fn unreachable(endpoint: &str) -> Option<String> {
    let url = url::Url::parse(endpoint).ok()?;
    let host = url
        .host_str()?
        .trim_matches(|c| c == '[' || c == ']')
        .to_string();
    let port = url.port_or_known_default()?;
    let connect = tokio::net::TcpStream::connect((host.as_str(), port));
    match tokio::time::timeout(std::time::Duration::from_secs(2), connect).await {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some("no answer in 2 s".into()),
    }
}

/// `GET /ui/jobs/{job}`: a what-if job, reloading itself each second while it runs.
pub(super) async fn job(state: Shared, Path(job): Path<String>) -> Page {
    let state = state.0;
    let id = job.clone();
    let (job, answer): (Job, Option<crate::model::Turn>) = read(&state, move |store| {
        let job = store.job(&id)?;
        // The answer itself, once written: what the page is for.
        let answer = match &job.fork {
            // Best effort: an answer since deleted or popped leaves the job's page.
            Some(fork) => store
                .load_range(fork, job.at, job.at)
                .ok()
                .and_then(|mut t| t.pop()),
            None => None,
        };
        Ok((job, answer))
    })
    .await?;
    let running = job.status == JobStatus::Running;
    let mut response = page(
        &state,
        StatusCode::OK,
        &format!("what-if: turn {} anew", job.at),
        html! {
            h1 { "What-if on " (label_of(&state, &job.session).await) ": turn " (job.at) " anew" }
            p.meta { "Job " span.id { (job.job) } }
            p { "Status: " strong #job-status data-status=(job.status.as_str()) { (job.status.as_str()) }
                @if let (true, Some(s)) = (running, job.created_at.as_deref().and_then(html::seconds_since)) {
                    " for " (s) " s" }
                @if running { span.meta { " (this page reloads each second)" } } }
            @if let Some(answer) = &answer {
                section.answer aria-labelledby="answer-heading" {
                    h2 #answer-heading { "The answer" }
                    (html::content(&answer.content))
                    @if let Some(calls) = &answer.tool_calls { (html::tool_calls(calls)) }
                }
            }
            dl.facts {
                dt { "Session" } dd { (name_of(&state, &job.session).await) " at turn " (job.at) }
                dt { "Model" } dd { (job.model) }
                dt { "Endpoint" } dd { (job.endpoint) }
                @if let Some(fork) = &job.fork {
                    dt { "Answer" } dd { a #job-fork href=(format!("/ui/sessions/{fork}?from={}#turn-{}", job.at / html::PAGE * html::PAGE, job.at)) { "turn " (job.at) " of " (label_of(&state, fork).await) }
                        " " span.id { (fork) }
                        " · " a href=(format!("/ui/diff?a={}&b={fork}", job.session)) { "diff" } }
                }
                @if let (Some(i), Some(o)) = (job.input_tokens, job.output_tokens) {
                    dt { "Tokens" } dd { (i) " in, " (o) " out" }
                }
                @if let Some(ms) = job.latency_ms { dt { "Latency" } dd { (ms) " ms" } }
                @if let Some(e) = &job.error { dt { "Error" } dd.error { (e) } }
            }
            @if job.status == JobStatus::Failed {
                (job_failed(&state, &job))
            }
            @if running && state.config.token.is_some() {
                form.write method="post" action=(format!("/ui/jobs/{}/cancel", job.job)) {
                    (token_field("cancel-token"))
                    button type="submit" { "Cancel" }
                }
            }
        },
    );
    if running {
        response
            .headers_mut()
            .insert(header::REFRESH, HeaderValue::from_static("1"));
    }
    Ok(response)
}

/// What a failed job's error means, in words, and the ways on: the same what-if
/// again (its estimate first), or back to the turn it started from.
fn job_failed(state: &AppState, job: &Job) -> Markup {
    let error = job.error.as_deref().unwrap_or("");
    let lower = error.to_lowercase();
    let why = if lower.contains("connection refused") || lower.contains("error trying to connect") {
        format!(
            "Nothing answered at {}: the model server is not running there, or listens \
             elsewhere.",
            job.endpoint
        )
    } else if lower.contains("timed out") || lower.contains("timeout") {
        "The model did not answer in time.".to_string()
    } else if lower.contains("status") || lower.contains("http") {
        format!("The endpoint {} refused the request.", job.endpoint)
    } else {
        "The model call failed.".to_string()
    };
    let back = job.at.saturating_sub(1);
    let back_page = back / html::PAGE * html::PAGE;
    html! {
        section.failed {
            h2 { "What failed" }
            p { (why) " No turn was written." }
            @if state.config.token.is_some() {
                form.write method="post" action=(format!("/ui/sessions/{}/whatif", job.session)) {
                    input type="hidden" name="at" value=(job.at);
                    input type="hidden" name="model" value=(job.model);
                    label for="retry-endpoint" { "Endpoint" }
                    select #retry-endpoint name="endpoint" {
                        @for e in endpoints(state) { option value=(e) selected[e == job.endpoint] { (e) } }
                    }
                    (token_field("retry-token"))
                    button type="submit" { "Try again" }
                }
            }
            p { a href=(format!("/ui/sessions/{}?from={back_page}#turn-{back}", job.session)) { "Back to turn " (back) } }
        }
    }
}

/// `POST /ui/jobs/{job}/cancel`.
pub(super) async fn cancel(
    state: Shared,
    Path(job): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Page {
    let state = state.0;
    let f: TokenForm = form(&state, &body)?;
    may_write(&state, &headers, &f.token)?;
    let id = job.clone();
    write(&state, move |store| store.cancel_job(&id)).await?;
    Ok(Redirect::to(&format!("/ui/jobs/{job}")).into_response())
}
