//! REST resources under `/sessions`, `/jobs` and `/comparisons`: the CLI's operations
//! as JSON, with the same semantics and errors. Reads are open; writes need the token.
//! Every handler returns `Result<_, ApiError>`; the extractors below reject bad input
//! with the same JSON errors as the handlers.

use super::{authorize, blocking, writing, ApiError, AppState, Shared};
use crate::model::{
    DeleteOptions, DetachOptions, ForkOptions, JobStatus, MergeOptions, NewSession, NewTurn,
    SessionId,
};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;

pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/sessions", get(list).post(create))
        .route("/search", get(search))
        .route("/sessions/{id}", get(show).delete(delete))
        .route("/sessions/{id}/turns", get(turns).post(append))
        .route("/sessions/{id}/pop", post(pop))
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
        .route("/v1/traces", post(traces))
        .route("/sessions/{id}/regenerate", post(regenerate))
        .route("/jobs", get(jobs))
        .route("/jobs/{job}", get(job))
        .route("/jobs/{job}/cancel", post(cancel_job))
        .route("/sessions/{id}/compare", post(compare))
        .route("/comparisons", get(comparisons))
        .route("/comparisons/{id}", get(comparison))
        .route("/comparisons/{id}/cancel", post(cancel_comparison))
        .route("/comparisons/{id}/resume", post(resume_comparison))
}

type Reply = Result<Response, ApiError>;

/// A write: the request carries the server's token (checked before anything else).
struct Authorized;

impl FromRequestParts<Arc<AppState>> for Authorized {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, ApiError> {
        authorize(state, &parts.headers).map(|()| Authorized)
    }
}

/// The session id of a `/sessions/{id}/…` path, checked.
struct Session(SessionId);

impl<S: Send + Sync> FromRequestParts<S> for Session {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(text) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request(e.body_text()))?;
        Ok(Session(SessionId::new(text)?))
    }
}

/// Query-string parameters, with a JSON error when they do not parse.
struct Params<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| Params(v))
            .map_err(|e: QueryRejection| ApiError::bad_request(e.body_text()))
    }
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        "the request body is larger than the server accepts",
    )
}

/// A JSON body, with a JSON error (not axum's plain text) when it does not parse.
struct Body<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        Json::<T>::from_request(request, state)
            .await
            .map(|Json(v)| Body(v))
            .map_err(|e| match e {
                JsonRejection::BytesRejection(_) => too_large(),
                JsonRejection::MissingJsonContentType(_) => ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "unsupported_media_type",
                    "the body must be JSON, sent with Content-Type: application/json",
                ),
                other => ApiError::bad_request(format!("invalid JSON body: {}", other.body_text())),
            })
    }
}

/// The JSON options of a write. An empty body means every default; anything else must
/// be the JSON options, whatever its content type says (a dry run must never write).
struct Options<T>(T);

impl<T: DeserializeOwned + Default, S: Send + Sync> FromRequest<S> for Options<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let payload = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(|_| too_large())?;
        if payload.iter().all(u8::is_ascii_whitespace) {
            return Ok(Options(T::default()));
        }
        let value: serde_json::Value = serde_json::from_slice(&payload)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
        if !value.is_object() {
            return Err(ApiError::bad_request(
                "the body must be a JSON object of options (or empty for the defaults)",
            ));
        }
        serde_json::from_value(value)
            .map(Options)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
    }
}

/// 201 for a write that made something; 200 for a dry run or a replayed request.
fn created_unless(nothing_new: bool) -> StatusCode {
    if nothing_new {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    }
}

/// What `f` reads, in the read lane, as the JSON answer.
async fn read_json<T: Serialize + Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&crate::Store) -> crate::Result<T> + Send + 'static,
) -> Reply {
    Ok(Json(blocking(state, f).await?).into_response())
}

/// What `f` writes, in the write lane, as the JSON answer.
async fn write_json<T: Serialize + Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&crate::Store) -> crate::Result<T> + Send + 'static,
) -> Reply {
    Ok(Json(writing(state, f).await?).into_response())
}

/// `GET /sessions?limit=&cursor=&order=&principal=&model=&roots=&parent=&family=&since=`:
/// a page of sessions, newest activity first, with the `next` cursor.
async fn list(state: Shared, Params(query): Params<crate::SessionQuery>) -> Reply {
    read_json(&state, move |s| s.sessions(&query)).await
}

/// The query string of `GET /search`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchParams {
    q: String,
    limit: Option<usize>,
    cursor: Option<String>,
}

/// `GET /search?q=&limit=&cursor=`: hits over turn contents, titles, branch labels and
/// models, best first.
async fn search(state: Shared, Params(p): Params<SearchParams>) -> Reply {
    let query = crate::SearchQuery {
        text: p.q,
        limit: p.limit,
        cursor: p.cursor,
    };
    read_json(&state, move |s| s.search(&query)).await
}

/// `?limit=&cursor=` of a paged list.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PageParams {
    limit: Option<usize>,
    cursor: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    id: Option<String>,
    title: Option<String>,
    principal: Option<String>,
    /// The session's turns, written with it in one bulk load, all or none.
    turns: Option<Vec<serde_json::Value>>,
    /// With turns: store it whole even when its start repeats a stored session's.
    #[serde(default)]
    no_dedup: bool,
}

/// `POST /sessions`: `{"session"}`; with `turns`, the session goes in with them (a copy
/// of a stored session's start as a fork of it) → `{"session", "turns", "shared"}`.
async fn create(state: Shared, _: Authorized, Body(b): Body<CreateBody>) -> Reply {
    let session = NewSession {
        id: b.id,
        title: b.title,
        principal: b.principal,
    };
    let Some(turns) = b.turns else {
        let session = writing(&state, move |s| s.create_session(session)).await?;
        let body = Json(json!({ "session": session }));
        return Ok((StatusCode::CREATED, body).into_response());
    };
    let turns = turns
        .into_iter()
        .enumerate()
        .map(|(n, v)| turn_body(v, &format!("turn {n}: ")))
        .collect::<Result<Vec<_>, _>>()?;
    let no_dedup = b.no_dedup;
    let report = writing(&state, move |s| {
        let options = crate::TranscriptOptions {
            no_dedup,
            ..Default::default()
        };
        s.import_sessions_with([(session, turns)], &options)
    })
    .await?;
    let mut body = json!({ "session": report.sessions[0], "turns": report.turns });
    if let Some(shared) = report.shared.first() {
        body["shared"] = json!(shared);
    }
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

async fn show(state: Shared, Session(session): Session) -> Reply {
    read_json(&state, move |s| s.info(&session)).await
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
    /// JSON: the runtime's own record of the turn, returned as given.
    payload: Option<serde_json::Value>,
}

impl TurnBody {
    fn into_turn(self) -> Result<NewTurn, ApiError> {
        let kind = self.kind.as_deref().unwrap_or("message");
        Ok(NewTurn {
            model: self.model,
            name: self.name,
            tool_call_id: self.tool_call_id,
            tool_calls: self.tool_calls.map(|v| v.to_string()),
            payload: self.payload.map(|v| v.to_string()),
            ..NewTurn::parse(&self.role, kind, self.content)?
        })
    }
}

/// One turn of a request body; `what` says which in an error ("turn 2: ").
fn turn_body(value: serde_json::Value, what: &str) -> Result<NewTurn, ApiError> {
    serde_json::from_value::<TurnBody>(value)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {what}{e}")))?
        .into_turn()
        .map_err(|e| ApiError {
            message: format!("{what}{}", e.message),
            ..e
        })
}

/// `POST /sessions/{id}/turns`: one turn (a JSON object) → `{"session", "index"}`, or
/// several (an array of them, appended all or none) → `{"session", "indices"}`.
async fn append(
    state: Shared,
    _: Authorized,
    Session(session): Session,
    Body(body): Body<serde_json::Value>,
) -> Reply {
    let parse = turn_body;
    let id = session.clone();
    let reply = match body {
        serde_json::Value::Array(values) if values.is_empty() => {
            return Err(ApiError::bad_request(
                "the body is an empty array: send one turn, or an array of at least one",
            ))
        }
        serde_json::Value::Array(values) => {
            let turns = values
                .into_iter()
                .enumerate()
                .map(|(n, v)| parse(v, &format!("turn {n}: ")))
                .collect::<Result<Vec<_>, _>>()?;
            let indices = writing(&state, move |s| s.append_many(&session, turns)).await?;
            json!({ "session": id, "indices": indices })
        }
        value => {
            let turn = parse(value, "")?;
            let index = writing(&state, move |s| s.append(&session, turn)).await?;
            json!({ "session": id, "index": index })
        }
    };
    Ok((StatusCode::CREATED, Json(reply)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnsParams {
    /// The first index (default 0).
    from: Option<u64>,
    /// The last index, inclusive (default the last turn).
    up_to: Option<u64>,
    /// Only the last `last` turns of that range.
    last: Option<u64>,
}

/// `GET /sessions/{id}/turns?from=&up_to=&last=`: the turns in full (kind, name, tool
/// calls, model, payload, owner, digest, time), inherited ones stitched in.
async fn turns(state: Shared, Session(session): Session, Params(p): Params<TurnsParams>) -> Reply {
    let turns = blocking(&state, move |s| {
        let length = s.info(&session)?.length;
        let from = p.from.unwrap_or(0);
        let mut turns = match p.up_to {
            Some(up_to) => s.load_range(&session, from, up_to)?,
            None if from >= length => Vec::new(),
            None => s.load_range(&session, from, length - 1)?,
        };
        if let Some(last) = p.last {
            let keep = (last as usize).min(turns.len());
            turns.drain(..turns.len() - keep);
        }
        Ok(turns)
    })
    .await?;
    Ok(Json(turns).into_response())
}

/// `POST /sessions/{id}/pop`: removes the session's last turn, `{"session", "popped"}`
/// with the turn removed (`null` when there was none).
async fn pop(state: Shared, _: Authorized, Session(session): Session) -> Reply {
    let id = session.clone();
    let popped = writing(&state, move |s| s.pop(&session)).await?;
    Ok(Json(json!({ "session": id, "popped": popped })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayParams {
    up_to: Option<u64>,
}

async fn replay(
    state: Shared,
    Session(session): Session,
    Params(p): Params<ReplayParams>,
) -> Reply {
    let records = blocking(&state, move |s| s.replay(&session, p.up_to)).await?;
    Ok(Json(records).into_response())
}

async fn fork(
    state: Shared,
    _: Authorized,
    Session(parent): Session,
    Options(options): Options<ForkOptions>,
) -> Reply {
    let dry_run = options.dry_run;
    let plan = writing(&state, move |s| s.fork(&parent, options)).await?;
    Ok((created_unless(dry_run || plan.reused), Json(plan)).into_response())
}

/// `GET /sessions/{id}/branches?limit=&cursor=`: a page of the session's forks, newest
/// first.
async fn branches(
    state: Shared,
    Session(session): Session,
    Params(p): Params<PageParams>,
) -> Reply {
    let page = blocking(&state, move |s| {
        s.branches_page(&session, p.limit, p.cursor.as_deref())
    })
    .await?;
    Ok(
        Json(json!({"branches": page.items, "total": page.total, "next": page.next}))
            .into_response(),
    )
}

/// `?limit=` of a tree: how many sessions it shows at most.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TreeParams {
    limit: Option<usize>,
}

/// The sessions a tree shows unless asked for fewer or more, and the most it shows.
const TREE_SHOWN: usize = 1_000;
const TREE_MOST: usize = 10_000;

/// `GET /sessions/{id}/tree?limit=`: the session and its descendants, breadth first, up
/// to `limit` sessions (default 1,000, at most 10,000); a session whose children did
/// not all fit says how many are left out (`more_children`).
async fn tree(state: Shared, Session(session): Session, Params(p): Params<TreeParams>) -> Reply {
    let limit = match p.limit.unwrap_or(TREE_SHOWN) {
        0 => {
            return Err(ApiError::bad_request(
                "limit 0: ask for at least one session",
            ))
        }
        n if n > TREE_MOST => {
            return Err(ApiError::bad_request(format!(
                "limit {n} is above the most a tree shows ({TREE_MOST})"
            )))
        }
        n => n,
    };
    read_json(&state, move |s| s.tree_within(&session, limit)).await
}

/// `DELETE /sessions/{id}?cascade=&dry_run=`: what was (or would be) deleted.
async fn delete(
    state: Shared,
    _: Authorized,
    Session(session): Session,
    Params(options): Params<DeleteOptions>,
) -> Reply {
    let plan = writing(&state, move |s| s.delete_with(&session, options)).await?;
    Ok(Json(plan).into_response())
}

/// `POST /sessions/{id}/detach` (`{"dry_run": true}` for the plan alone).
async fn detach(
    state: Shared,
    _: Authorized,
    Session(session): Session,
    Options(options): Options<DetachOptions>,
) -> Reply {
    let reply = session.clone();
    let plan = writing(&state, move |s| s.detach_with(&session, options)).await?;
    let mut body = serde_json::to_value(&plan).map_err(|e| ApiError::internal(e.to_string()))?;
    if !options.dry_run {
        body["detached"] = json!(reply);
    }
    Ok(Json(body).into_response())
}

async fn anchors(state: Shared, Session(session): Session) -> Reply {
    read_json(&state, move |s| s.anchors(&session)).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnchorBody {
    name: String,
    state: Option<serde_json::Value>,
}

async fn anchor(
    state: Shared,
    _: Authorized,
    Session(session): Session,
    Body(b): Body<AnchorBody>,
) -> Reply {
    let state_text = b.state.map(|v| v.to_string());
    let made = writing(&state, move |s| {
        s.anchor(&session, &b.name, state_text.as_deref())
    })
    .await?;
    Ok((StatusCode::CREATED, Json(made)).into_response())
}

async fn merge(
    state: Shared,
    _: Authorized,
    Session(child): Session,
    Options(options): Options<MergeOptions>,
) -> Reply {
    let dry_run = options.dry_run;
    let plan = writing(&state, move |s| s.merge(&child, options)).await?;
    Ok((created_unless(dry_run), Json(plan)).into_response())
}

async fn diff(state: Shared, Path((a, b)): Path<(String, String)>) -> Reply {
    let (a, b) = (SessionId::new(a)?, SessionId::new(b)?);
    read_json(&state, move |s| s.diff(&a, &b)).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportParams {
    format: String,
}

async fn export(
    state: Shared,
    Session(session): Session,
    Params(p): Params<ExportParams>,
) -> Reply {
    let format: crate::ExportFormat = p.format.parse()?;
    let body = blocking(&state, move |s| {
        let mut out = Vec::new();
        s.export(Some(&session), format, &mut out).map(|()| out)
    })
    .await?;
    let content_type = format.media_type();
    Ok(([(axum::http::header::CONTENT_TYPE, content_type)], body).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportParams {
    format: Option<String>,
    #[serde(default)]
    skip_invalid: bool,
    #[serde(default)]
    no_dedup: bool,
}

/// `POST /v1/traces`: OTLP/HTTP trace export (protobuf, or JSON by `Content-Type`,
/// gzip by `Content-Encoding`), the server's token needed. GenAI chat spans become
/// sessions and turns (see `io::transcripts::otlp`), by batches of conversations, so
/// that a request's memory stays bounded. The answer is an `ExportTraceServiceResponse`
/// in the request's encoding: empty when the request's GenAI spans went in, else (spans
/// refused, or nothing to import) with `partial_success` saying what was imported, how
/// many spans were refused (`rejected_spans`) and why.
async fn traces(
    state: Shared,
    _: Authorized,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Reply {
    let header = |name: axum::http::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    let json = header(axum::http::header::CONTENT_TYPE).starts_with("application/json");
    let gzip = match header(axum::http::header::CONTENT_ENCODING).as_str() {
        "" | "identity" => false,
        "gzip" => true,
        other => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_encoding",
                format!("Content-Encoding {other} is not read (gzip or none)"),
            ))
        }
    };
    let limit = state.config.max_body_bytes;
    // Decoded in the write lane, not on the async threads: as many requests are held
    // decoded at once as the lane runs.
    let outcome = writing(&state, move |s| {
        let unzipped;
        let bytes: &[u8] = if gzip {
            match gunzip(&body, limit) {
                Ok(bytes) => unzipped = bytes,
                Err(refused) => return Ok(Err(refused)),
            }
            &unzipped
        } else {
            &body
        };
        let request = crate::io::decode_otlp_request(bytes, json)?;
        drop(body);
        s.import_trace_request(request, &Default::default()).map(Ok)
    })
    .await??;
    let message = outcome.message();
    Ok(if json {
        let body = match message {
            Some(message) => json!({"partialSuccess": {
                // int64 as the protocol's JSON mapping writes it: a decimal string.
                "rejectedSpans": outcome.rejected_spans.to_string(),
                "errorMessage": message,
            }})
            .to_string(),
            None => "{}".into(),
        };
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    } else {
        use opentelemetry_proto::tonic::collector::trace::v1::{
            ExportTracePartialSuccess, ExportTraceServiceResponse,
        };
        let response = ExportTraceServiceResponse {
            partial_success: message.map(|error_message| ExportTracePartialSuccess {
                rejected_spans: outcome.rejected_spans,
                error_message,
            }),
        };
        (
            [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")],
            prost::Message::encode_to_vec(&response),
        )
            .into_response()
    })
}

/// A gzipped body, refused past `limit` bytes unzipped (nothing more is unzipped).
fn gunzip(body: &[u8], limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    let mut reader = std::io::Read::take(flate2::read::GzDecoder::new(body), limit as u64 + 1);
    std::io::Read::read_to_end(&mut reader, &mut out)
        .map_err(|e| ApiError::bad_request(format!("cannot gunzip the body: {e}")))?;
    if out.len() > limit {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "the unzipped body is over --max-body-bytes",
        ));
    }
    Ok(out)
}

/// `POST /import[?format=trig|nquads|openai|claude-code|codex|pi|otlp][&no_dedup=true]`: the file
/// as the body; without a format, the body's content tells it.
async fn import(
    state: Shared,
    _: Authorized,
    Params(p): Params<ImportParams>,
    payload: axum::body::Bytes,
) -> Reply {
    let format = match &p.format {
        Some(f) => f.parse::<crate::ImportFormat>()?,
        None => crate::ImportFormat::sniff(&payload).ok_or_else(|| {
            ApiError::bad_request(format!(
                "cannot tell the format of the request body; pass ?format= one of {}",
                crate::ImportFormat::NAMES.join(", ")
            ))
        })?,
    };
    let report = writing(&state, move |s| {
        let options = crate::TranscriptOptions {
            skip_invalid: p.skip_invalid,
            no_dedup: p.no_dedup,
            ..Default::default()
        };
        s.import_with(&payload, Some(format), &options)
    })
    .await?;
    // A transcript imported before and unchanged creates nothing.
    let made = !report.sessions.is_empty() || !report.extended.is_empty();
    Ok((created_unless(!made), Json(report)).into_response())
}

/// `POST /sessions/{id}/regenerate`: 202 with the job, run in the background; 200 with
/// the plan for a dry run, or with the earlier job for a retried request id.
async fn regenerate(
    state: Shared,
    _: Authorized,
    Session(session): Session,
    Options(options): Options<crate::RegenerateOptions>,
) -> Reply {
    refuse_remote_unless_allowed(&state, options.allow_remote)?;
    refuse_unless_offered(&state, &[options.resolved_endpoint()])?;
    if options.dry_run {
        let plan = writing(&state, move |s| s.plan_regeneration(&session, &options)).await?;
        return Ok(Json(plan).into_response());
    }
    let job = start_regeneration(&state, session, options).await?;
    let status = if job.status == JobStatus::Running {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(job)).into_response())
}

/// A request asking for model endpoints off this machine, refused (403) unless the
/// server was started allowing them.
fn refuse_remote_unless_allowed(state: &AppState, allow_remote: bool) -> Result<(), ApiError> {
    if allow_remote && !state.config.allow_remote_models {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "remote_models_disabled",
            "this server does not send sessions to endpoints off its machine \
             (start it with --allow-remote-models)",
        ));
    }
    Ok(())
}

/// A request naming a model endpoint the server does not offer (its `--model-endpoint`s,
/// or the providers' defaults), refused (403): the web UI offers only those, and a REST
/// caller may not send the session, or have a key sent, anywhere else.
fn refuse_unless_offered(state: &AppState, endpoints: &[String]) -> Result<(), ApiError> {
    let offered = crate::offered_endpoints(&state.config.model_endpoints);
    Ok(crate::check_offered(endpoints, &offered)?)
}

/// Records a regeneration job and, unless an earlier identical one is returned, runs
/// the model call in the background (outside the query slots: it may take minutes).
pub(super) async fn start_regeneration(
    state: &Arc<AppState>,
    session: SessionId,
    options: crate::RegenerateOptions,
) -> Result<crate::Job, ApiError> {
    let job = writing(state, move |s| s.begin_regeneration(&session, &options)).await?;
    if job.status == JobStatus::Running {
        let store = Arc::clone(&state.store);
        let id = job.job.clone();
        tokio::task::spawn_blocking(move || store.run_job(&id));
    }
    Ok(job)
}

/// `GET /jobs?limit=&cursor=`: regeneration jobs, newest first, `{"jobs", "total",
/// "next"}`.
async fn jobs(state: Shared, Params(p): Params<PageParams>) -> Reply {
    let page = blocking(&state, move |s| s.jobs_page(p.limit, p.cursor.as_deref())).await?;
    Ok(Json(json!({"jobs": page.items, "total": page.total, "next": page.next})).into_response())
}

async fn job(state: Shared, Path(job): Path<String>) -> Reply {
    read_json(&state, move |s| s.job(&job)).await
}

async fn cancel_job(state: Shared, _: Authorized, Path(job): Path<String>) -> Reply {
    write_json(&state, move |s| s.cancel_job(&job)).await
}

/// `POST /sessions/{id}/compare` (the body: [`crate::CompareOptions`]): 202 with the
/// comparison, its runs going on in the background; 200 with the plan for a dry run,
/// or with the earlier identical comparison (`"reused": true`).
async fn compare(
    state: Shared,
    _: Authorized,
    Session(session): Session,
    Options(options): Options<crate::CompareOptions>,
) -> Reply {
    refuse_remote_unless_allowed(&state, options.allow_remote)?;
    refuse_unless_offered(&state, &options.endpoints())?;
    if options.dry_run {
        let plan = writing(&state, move |s| s.plan_comparison(&session, &options)).await?;
        return Ok(Json(plan).into_response());
    }
    let comparison = start_comparison(&state, session, options).await?;
    let status = if comparison.reused {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((status, Json(comparison)).into_response())
}

/// Records a comparison (its forks and runs) and, unless an earlier identical one is
/// returned, runs its arms in the background, outside the lanes' slots: a run may take
/// minutes. At most one thread per run is asked for, however large `parallel` is.
pub(super) async fn start_comparison(
    state: &Arc<AppState>,
    session: SessionId,
    options: crate::CompareOptions,
) -> Result<crate::Comparison, ApiError> {
    let parallel = options.parallel.unwrap_or(1);
    let comparison = writing(state, move |s| s.begin_comparison(&session, &options)).await?;
    if !comparison.reused {
        let runs = comparison.arms.iter().filter(|a| !a.baseline).count();
        let parallel = parallel.clamp(1, runs.max(1));
        let store = Arc::clone(&state.store);
        let id = comparison.comparison.clone();
        tokio::task::spawn_blocking(move || store.run_comparison(&id, parallel));
    }
    Ok(comparison)
}

/// `GET /comparisons`: every comparison, oldest first, with its figures.
/// `GET /comparisons?limit=&cursor=`: comparisons with their figures, newest first,
/// `{"comparisons", "total", "next"}`.
async fn comparisons(state: Shared, Params(p): Params<PageParams>) -> Reply {
    let page = blocking(&state, move |s| {
        s.comparisons_page(p.limit, p.cursor.as_deref())
    })
    .await?;
    Ok(Json(json!({
        "comparisons": page.items, "total": page.total, "next": page.next
    }))
    .into_response())
}

/// `GET /comparisons/{id}`: a comparison (or the one a run id is part of) with the
/// figures of every arm; 404 `job_not_found` for an id that is neither.
async fn comparison(state: Shared, Path(id): Path<String>) -> Reply {
    read_json(&state, move |s| s.comparison(&id)).await
}

/// `POST /comparisons/{id}/resume`: goes on with the runs of a comparison that are
/// still `running` but taken by no one (their server stopped mid-way), each from its
/// last committed step: 202 with the comparison. Runs this server is taking are left
/// to it.
async fn resume_comparison(state: Shared, _: Authorized, Path(id): Path<String>) -> Reply {
    let id2 = id.clone();
    let comparison = blocking(&state, move |s| s.comparison(&id2)).await?;
    if comparison.status == crate::model::ComparisonStatus::Running {
        let store = Arc::clone(&state.store);
        tokio::task::spawn_blocking(move || store.run_comparison(&id, 1));
    }
    Ok((StatusCode::ACCEPTED, Json(comparison)).into_response())
}

/// `POST /comparisons/{id}/cancel`: ends a comparison's running runs (or one run)
/// `cancelled`, keeping the steps they committed; the comparison as it now stands.
async fn cancel_comparison(state: Shared, _: Authorized, Path(id): Path<String>) -> Reply {
    write_json(&state, move |s| s.cancel_comparison(&id)).await
}
