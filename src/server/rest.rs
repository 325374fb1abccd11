//! REST resources under `/sessions`: the CLI's operations as JSON, with the same
//! semantics and errors. Reads are open; writes need the token.

use super::{authorize, blocking, ApiError, AppState, Shared};
use crate::model::{
    DeleteOptions, DetachOptions, ForkOptions, Kind, MergeOptions, NewSession, NewTurn, Role,
    SessionId,
};
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/sessions", get(list).post(create))
        .route("/sessions/{id}", get(show).delete(delete))
        .route("/sessions/{id}/turns", post(append))
        .route("/sessions/{id}/replay", get(replay))
        .route("/sessions/{id}/fork", post(fork))
        .route("/sessions/{id}/branches", get(branches))
        .route("/sessions/{id}/tree", get(tree))
        .route("/sessions/{id}/detach", post(detach))
        .route("/sessions/{id}/anchors", get(anchors).post(anchor))
        .route("/sessions/{id}/merge", post(merge))
        .route("/sessions/{id}/diff/{other}", get(diff))
        .route("/sessions/{id}/export", get(export))
        .route("/import", post(import))
        .route("/sessions/{id}/regenerate", post(regenerate))
        .route("/jobs", get(jobs))
        .route("/jobs/{job}", get(job))
        .route("/jobs/{job}/cancel", post(cancel_job))
}

/// `POST /sessions/{id}/regenerate`: 202 with the job, run in the background; 200 with
/// the plan for a dry run, or with the earlier job for a retried request id.
async fn regenerate(
    state: Shared,
    headers: HeaderMap,
    Path(session): Path<String>,
    payload: axum::body::Bytes,
) -> Response {
    done(
        async {
            let (session, options): (_, crate::RegenerateOptions) =
                write_request(&state, &headers, &session, &payload)?;
            if options.allow_remote && !state.config.allow_remote_models {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "remote_models_disabled",
                    "this server does not send sessions to endpoints off its machine \
                     (start it with --allow-remote-models)",
                ));
            }
            if options.dry_run {
                let plan =
                    blocking(&state, move |s| s.plan_regeneration(&session, &options)).await?;
                return Ok(Json(plan).into_response());
            }
            let job = blocking(&state, move |s| s.begin_regeneration(&session, &options)).await?;
            if job.status != "running" {
                return Ok(Json(job).into_response());
            }
            let store = Arc::clone(&state.store);
            let id = job.job.clone();
            // The model call runs outside the query slots: it may take minutes.
            tokio::task::spawn_blocking(move || store.run_job(&id));
            Ok((StatusCode::ACCEPTED, Json(job)).into_response())
        }
        .await,
    )
}

async fn jobs(state: Shared) -> Response {
    done(async { Ok(Json(blocking(&state, |s| s.jobs()).await?).into_response()) }.await)
}

async fn job(state: Shared, Path(job): Path<String>) -> Response {
    done(async { Ok(Json(blocking(&state, move |s| s.job(&job)).await?).into_response()) }.await)
}

async fn cancel_job(state: Shared, headers: HeaderMap, Path(job): Path<String>) -> Response {
    done(
        async {
            authorize(&state, &headers)?;
            Ok(Json(blocking(&state, move |s| s.cancel_job(&job)).await?).into_response())
        }
        .await,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportParams {
    format: String,
}

async fn export(
    state: Shared,
    Path(session): Path<String>,
    params: Result<Query<ExportParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    done(
        async {
            let session = id(&session)?;
            let Query(p) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
            let format: crate::ExportFormat = p.format.parse()?;
            let content_type = match format {
                crate::ExportFormat::TriG => "application/trig",
                crate::ExportFormat::NQuads => "application/n-quads",
                crate::ExportFormat::Turtle => "text/turtle",
                crate::ExportFormat::Jsonl => "application/jsonl",
                crate::ExportFormat::OpenAi => "application/json",
                crate::ExportFormat::Prov => "text/turtle",
            };
            let body = blocking(&state, move |s| {
                let mut out = Vec::new();
                s.export(Some(&session), format, &mut out).map(|()| out)
            })
            .await?;
            Ok(([(axum::http::header::CONTENT_TYPE, content_type)], body).into_response())
        }
        .await,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportParams {
    format: Option<String>,
    #[serde(default)]
    skip_invalid: bool,
}

/// `POST /import[?format=trig|nquads|openai|claude-code]`: the file as the body; without
/// a format, the body's content tells it.
async fn import(
    state: Shared,
    headers: HeaderMap,
    params: Result<Query<ImportParams>, axum::extract::rejection::QueryRejection>,
    payload: axum::body::Bytes,
) -> Response {
    done(
        async {
            authorize(&state, &headers)?;
            let Query(p) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
            let format = match &p.format {
                Some(f) => f.parse::<crate::ImportFormat>()?,
                None => crate::ImportFormat::sniff(&payload).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "cannot tell the format of the request body; pass ?format= one of {}",
                        crate::ImportFormat::NAMES.join(", ")
                    ))
                })?,
            };
            let report = blocking(&state, move |s| {
                let options = crate::TranscriptOptions {
                    skip_invalid: p.skip_invalid,
                    progress: None,
                };
                s.import_with(&payload, Some(format), &options)
            })
            .await?;
            // A transcript imported before and unchanged creates nothing.
            let made = !report.sessions.is_empty() || !report.extended.is_empty();
            Ok((created_unless(!made), Json(report)).into_response())
        }
        .await,
    )
}

/// A write on one session with JSON options: the token is checked, then the session id
/// and the options. An empty body means every default; anything else must be the JSON
/// options, whatever its content type says (a dry run must never write).
fn write_request<T: serde::de::DeserializeOwned + Default>(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    session: &str,
    payload: &[u8],
) -> Result<(SessionId, T), ApiError> {
    authorize(state, headers)?;
    let session = id(session)?;
    if payload.iter().all(u8::is_ascii_whitespace) {
        return Ok((session, T::default()));
    }
    let value: serde_json::Value = serde_json::from_slice(payload)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the body must be a JSON object of options (or empty for the defaults)",
        ));
    }
    let options = serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    Ok((session, options))
}

/// 201 for a write that made something; 200 for a dry run or a replayed request.
fn created_unless(nothing_new: bool) -> StatusCode {
    if nothing_new {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    }
}

async fn anchors(state: Shared, Path(session): Path<String>) -> Response {
    done(
        async {
            let session = id(&session)?;
            Ok(Json(blocking(&state, move |s| s.anchors(&session)).await?).into_response())
        }
        .await,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnchorBody {
    name: String,
    state: Option<serde_json::Value>,
}

async fn anchor(
    state: Shared,
    headers: HeaderMap,
    Path(session): Path<String>,
    payload: Result<Json<AnchorBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    done(
        async {
            authorize(&state, &headers)?;
            let session = id(&session)?;
            let b = body(payload)?;
            let state_text = b.state.map(|v| v.to_string());
            let made = blocking(&state, move |s| {
                s.anchor(&session, &b.name, state_text.as_deref())
            })
            .await?;
            Ok((StatusCode::CREATED, Json(made)).into_response())
        }
        .await,
    )
}

async fn merge(
    state: Shared,
    headers: HeaderMap,
    Path(session): Path<String>,
    payload: axum::body::Bytes,
) -> Response {
    done(
        async {
            let (child, options): (_, MergeOptions) =
                write_request(&state, &headers, &session, &payload)?;
            let dry_run = options.dry_run;
            let plan = blocking(&state, move |s| s.merge(&child, options)).await?;
            Ok((created_unless(dry_run), Json(plan)).into_response())
        }
        .await,
    )
}

async fn diff(state: Shared, Path((a, b)): Path<(String, String)>) -> Response {
    done(
        async {
            let (a, b) = (id(&a)?, id(&b)?);
            Ok(Json(blocking(&state, move |s| s.diff(&a, &b)).await?).into_response())
        }
        .await,
    )
}

fn id(text: &str) -> Result<SessionId, ApiError> {
    SessionId::new(text).map_err(ApiError::from)
}

/// A JSON body, with a JSON error (not axum's plain text) when it does not parse.
fn body<T: serde::de::DeserializeOwned>(
    payload: Result<Json<T>, axum::extract::rejection::JsonRejection>,
) -> Result<T, ApiError> {
    payload.map(|Json(v)| v).map_err(|e| match e {
        axum::extract::rejection::JsonRejection::BytesRejection(_) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "the request body is larger than the server accepts",
        ),
        other => ApiError::bad_request(format!("invalid JSON body: {}", other.body_text())),
    })
}

fn done(result: Result<Response, ApiError>) -> Response {
    result.unwrap_or_else(IntoResponse::into_response)
}

async fn list(state: Shared) -> Response {
    done(
        blocking(&state, |s| s.list())
            .await
            .map(|v| Json(v).into_response()),
    )
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    id: Option<String>,
    title: Option<String>,
    principal: Option<String>,
}

async fn create(
    state: Shared,
    headers: HeaderMap,
    payload: Result<Json<CreateBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    done(
        async {
            authorize(&state, &headers)?;
            let b = body(payload)?;
            let session = blocking(&state, move |s| {
                s.create_session(NewSession {
                    id: b.id,
                    title: b.title,
                    principal: b.principal,
                })
            })
            .await?;
            Ok((
                StatusCode::CREATED,
                Json(json!({ "session": session.as_str() })),
            )
                .into_response())
        }
        .await,
    )
}

async fn show(state: Shared, Path(session): Path<String>) -> Response {
    done(
        async {
            let session = id(&session)?;
            let info = blocking(&state, move |s| s.info(&session)).await?;
            Ok(Json(info).into_response())
        }
        .await,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnBody {
    role: String,
    content: String,
    #[serde(default)]
    kind: Option<String>,
    model: Option<String>,
    name: Option<String>,
    tool_call_id: Option<String>,
    /// JSON: an array of tool calls, kept as JSON text.
    tool_calls: Option<serde_json::Value>,
}

async fn append(
    state: Shared,
    headers: HeaderMap,
    Path(session): Path<String>,
    payload: Result<Json<TurnBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    done(
        async {
            authorize(&state, &headers)?;
            let session = id(&session)?;
            let b = body(payload)?;
            if b.content.len() > state.config.max_content_bytes {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too_large",
                    format!(
                        "turn content of {} bytes is over the limit of {} bytes",
                        b.content.len(),
                        state.config.max_content_bytes
                    ),
                ));
            }
            let role: Role = b.role.parse()?;
            let kind: Kind = b.kind.as_deref().unwrap_or("message").parse()?;
            let mut turn = NewTurn::new(role, b.content).kind(kind);
            turn.model = b.model;
            turn.name = b.name;
            turn.tool_call_id = b.tool_call_id;
            turn.tool_calls = b.tool_calls.map(|v| v.to_string());
            let reply_id = session.to_string();
            let index = blocking(&state, move |s| s.append(&session, turn)).await?;
            Ok((
                StatusCode::CREATED,
                Json(json!({ "session": reply_id, "index": index })),
            )
                .into_response())
        }
        .await,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayParams {
    up_to: Option<u64>,
}

async fn replay(
    state: Shared,
    Path(session): Path<String>,
    params: Result<Query<ReplayParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    done(
        async {
            let session = id(&session)?;
            let Query(p) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
            let records = blocking(&state, move |s| s.replay(&session, p.up_to)).await?;
            Ok(Json(records).into_response())
        }
        .await,
    )
}

async fn fork(
    state: Shared,
    headers: HeaderMap,
    Path(session): Path<String>,
    payload: axum::body::Bytes,
) -> Response {
    done(
        async {
            let (parent, options): (_, ForkOptions) =
                write_request(&state, &headers, &session, &payload)?;
            let dry_run = options.dry_run;
            let plan = blocking(&state, move |s| s.fork(&parent, options)).await?;
            Ok((created_unless(dry_run || plan.reused), Json(plan)).into_response())
        }
        .await,
    )
}

async fn branches(state: Shared, Path(session): Path<String>) -> Response {
    done(
        async {
            let session = id(&session)?;
            Ok(Json(blocking(&state, move |s| s.branches(&session)).await?).into_response())
        }
        .await,
    )
}

async fn tree(state: Shared, Path(session): Path<String>) -> Response {
    done(
        async {
            let session = id(&session)?;
            Ok(Json(blocking(&state, move |s| s.tree(&session)).await?).into_response())
        }
        .await,
    )
}

/// `DELETE /sessions/{id}?cascade=&dry_run=`: what was (or would be) deleted.
async fn delete(
    state: Shared,
    headers: HeaderMap,
    Path(session): Path<String>,
    params: Result<Query<DeleteOptions>, axum::extract::rejection::QueryRejection>,
) -> Response {
    done(
        async {
            authorize(&state, &headers)?;
            let session = id(&session)?;
            let Query(options) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
            let plan = blocking(&state, move |s| s.delete_with(&session, options)).await?;
            Ok(Json(plan).into_response())
        }
        .await,
    )
}

/// `POST /sessions/{id}/detach` (`{"dry_run": true}` for the plan alone).
async fn detach(
    state: Shared,
    headers: HeaderMap,
    Path(session): Path<String>,
    payload: axum::body::Bytes,
) -> Response {
    done(
        async {
            let (session, options): (_, DetachOptions) =
                write_request(&state, &headers, &session, &payload)?;
            let reply = session.to_string();
            let plan = blocking(&state, move |s| s.detach_with(&session, options)).await?;
            let mut body =
                serde_json::to_value(&plan).map_err(|e| ApiError::internal(e.to_string()))?;
            if !options.dry_run {
                body["detached"] = json!(reply);
            }
            Ok(Json(body).into_response())
        }
        .await,
    )
}
