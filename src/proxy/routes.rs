//! The proxy's HTTP side: `/proxy/anthropic/…` and `/proxy/openai/…`, mounted by
//! `forktrail serve` when it has upstreams. A call to a recorded endpoint
//! (`/v1/messages`, `/v1/chat/completions`, `/v1/responses`) is forwarded and recorded;
//! anything else under a prefix (`count_tokens`, `/v1/models`) is forwarded only.

use super::forward::{self, Head, Tee};
use super::wire::Reply;
use super::{Capture, Hint, ProxyConfig, Recorder, UpstreamKind};
use crate::model::{Api, CallOutcome, ModelCallInfo, SessionId};
use crate::store::Store;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::json;
use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the proxy's handlers share.
pub(crate) struct ProxyState {
    config: ProxyConfig,
    agent: ureq::Agent,
    pub(crate) recorder: Recorder,
}

/// The proxy's routes (to nest under `/proxy`), and its state (to settle the recorder
/// when the server stops).
pub(crate) fn routes(store: Arc<Store>, config: ProxyConfig) -> (Router, Arc<ProxyState>) {
    let timeout = config.timeout.unwrap_or(Duration::from_secs(600));
    let state = Arc::new(ProxyState {
        agent: forward::agent(timeout),
        config,
        recorder: Recorder::start(store),
    });
    let router = Router::new()
        .route("/{upstream}/{*rest}", axum::routing::any(handle))
        .with_state(Arc::clone(&state));
    (router, state)
}

/// An error in the shape of the API the client speaks.
fn refusal(kind: UpstreamKind, status: StatusCode, message: &str) -> Response {
    let body = match kind {
        UpstreamKind::Anthropic => json!({
            "type": "error",
            "error": {"type": if status.is_server_error() { "api_error" } else { "invalid_request_error" }, "message": message},
        }),
        UpstreamKind::Openai => json!({
            "error": {"message": message, "type": if status.is_server_error() { "server_error" } else { "invalid_request_error" }, "code": null},
        }),
    };
    (status, axum::Json(body)).into_response()
}

/// Which API a request speaks, if it is one the proxy records.
fn recorded(kind: UpstreamKind, method: &Method, rest: &str) -> Option<Api> {
    if method != Method::POST {
        return None;
    }
    match kind {
        UpstreamKind::Anthropic if rest == "/v1/messages" => Some(Api::AnthropicMessages),
        UpstreamKind::Openai if rest.ends_with("/chat/completions") => Some(Api::OpenaiChat),
        UpstreamKind::Openai if rest.ends_with("/responses") => Some(Api::OpenaiResponses),
        _ => None,
    }
}

/// A call being recorded: what is known before the answer.
struct Pending {
    /// The request's body, read when the call is recorded.
    body: Bytes,
    info: ModelCallInfo,
    hint: Hint,
    started: Instant,
}

impl Pending {
    /// Queues the call, ended, for the recorder.
    fn record(
        self,
        worker: &ProxyState,
        reply: Reply,
        outcome: CallOutcome,
        status: Option<u16>,
        error: Option<String>,
        first_byte: Option<Duration>,
    ) {
        let capture = self.ended(reply, outcome, status, error, first_byte, &worker.config);
        worker.recorder.push(capture);
    }

    /// The call as recorded, once it ended.
    fn ended(
        self,
        reply: Reply,
        outcome: CallOutcome,
        status: Option<u16>,
        error: Option<String>,
        first_byte: Option<Duration>,
        config: &ProxyConfig,
    ) -> Capture {
        let mut info = self.info;
        let model = reply
            .model
            .clone()
            .filter(|m| crate::model::Agent::model(m.clone()).is_ok());
        info.outcome = outcome;
        info.upstream_status = status;
        info.error = error;
        info.input_tokens = reply.usage.input;
        info.output_tokens = reply.usage.output;
        info.cached_tokens = reply.usage.cached;
        info.stop_reason = reply.stop_reason;
        info.latency_ms = self.started.elapsed().as_millis() as u64;
        info.first_byte_ms = first_byte.map(|d| d.as_millis() as u64);
        info.cost_usd = match (
            model.as_ref().and_then(|m| config.prices.get(m)),
            reply.usage.input,
            reply.usage.output,
        ) {
            (Some(price), Some(input), Some(output)) => {
                Some(price.cost(input, output, reply.usage.cached.unwrap_or(0)))
            }
            _ => None,
        };
        info.model = model.clone();
        let reply_turn = reply.turn.map(|t| match &model {
            Some(m) => t.model(m.clone()),
            None => t,
        });
        Capture {
            request: self.body.to_vec(),
            reply_turn,
            info,
            hint: self.hint,
        }
    }
}

async fn handle(
    State(proxy): State<Arc<ProxyState>>,
    Path((upstream, rest)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let kind = match upstream.as_str() {
        "anthropic" => UpstreamKind::Anthropic,
        "openai" => UpstreamKind::Openai,
        _ => {
            return refusal(
                UpstreamKind::Openai,
                StatusCode::NOT_FOUND,
                &format!(
                    "no proxy /proxy/{upstream}: the proxy has /proxy/anthropic and /proxy/openai"
                ),
            )
        }
    };
    let Some(base) = proxy.config.upstreams.get(&kind) else {
        return refusal(
            kind,
            StatusCode::NOT_FOUND,
            &format!(
                "this server forwards no {} calls: start it with --upstream {}=URL",
                kind.as_str(),
                kind.as_str()
            ),
        );
    };
    let rest = format!("/{rest}");
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let key = header("x-api-key").or_else(|| {
        header("authorization")
            .and_then(|a| a.strip_prefix("Bearer ").or(a.strip_prefix("bearer ")))
    });
    // The client's key goes on to the upstream and nowhere else: any outside text this
    // process keeps or shows from now on has it taken out.
    if let Some(key) = key {
        crate::secrets::hold(key);
    }
    let mut forwarded = Vec::new();
    for (name, value) in &headers {
        if let (true, Ok(v)) = (forward::passes(name.as_str()), value.to_str()) {
            forwarded.push((name.as_str().to_string(), v.to_string()));
        }
    }
    let url = forward::target(base, &rest, uri.query());
    let pending = match recorded(kind, &method, &rest) {
        Some(api) => match pending(api, &headers, key, &body) {
            Ok(p) => Some(p),
            Err(message) => return refusal(kind, StatusCode::BAD_REQUEST, &message),
        },
        None => None,
    };
    let (head_tx, head_rx) = tokio::sync::oneshot::channel::<Result<Head, forward::Unanswered>>();
    let (chunks, chunk_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    let worker = Arc::clone(&proxy);
    let call = Outgoing {
        method: method.as_str().to_string(),
        url,
        headers: forwarded,
        body,
    };
    tokio::task::spawn_blocking(move || relay(&worker, call, pending, head_tx, chunks));
    let head = match head_rx.await {
        Ok(Ok(head)) => head,
        Ok(Err(unanswered)) => {
            let status = StatusCode::from_u16(unanswered.status).unwrap_or(StatusCode::BAD_GATEWAY);
            return refusal(kind, status, &unanswered.message);
        }
        Err(_) => {
            return refusal(
                kind,
                StatusCode::BAD_GATEWAY,
                "the proxy's upstream call stopped",
            )
        }
    };
    let mut response = Response::builder()
        .status(StatusCode::from_u16(head.status).unwrap_or(StatusCode::BAD_GATEWAY));
    for (name, value) in &head.headers {
        response = response.header(name, value);
    }
    let stream = futures_util::stream::unfold(chunk_rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, std::io::Error>(chunk), rx))
    });
    response
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| {
            refusal(
                kind,
                StatusCode::BAD_GATEWAY,
                "the upstream's headers could not be passed on",
            )
        })
}

/// How an answer that ended ended: whole, begun and not finished, or not an answer of
/// its API at all.
fn judged(reply: &Reply, api: Api) -> (CallOutcome, Option<String>) {
    if reply.complete {
        (CallOutcome::Complete, None)
    } else if reply.turn.is_some() {
        let why = "the upstream's answer ended before it was whole";
        (CallOutcome::Incomplete, Some(why.into()))
    } else {
        let why = format!(
            "the upstream's answer is not one of the {} API",
            api.as_str()
        );
        (CallOutcome::Failed, Some(why))
    }
}

/// An upstream's error answer, read whole (it is short) with every secret taken out, to
/// be passed on; the call recorded as failed with it.
fn failed(
    worker: &ProxyState,
    pending: Option<Pending>,
    status: u16,
    reader: &mut (dyn Read + Send),
) -> String {
    let mut text = Vec::new();
    let _ = reader.take(1024 * 1024).read_to_end(&mut text);
    let text = crate::secrets::scrub(&String::from_utf8_lossy(&text));
    if let Some(p) = pending {
        let error = format!(
            "the upstream answered {status}: {}",
            crate::secrets::excerpt(&text)
        );
        p.record(
            worker,
            Reply::default(),
            CallOutcome::Failed,
            Some(status),
            Some(error),
            None,
        );
    }
    text
}

/// A request to send on.
struct Outgoing {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Bytes,
}

/// Sends `call` upstream and passes its answer on as it arrives (the head through
/// `head_tx`, the body through `chunks`), teeing it into the record of `pending`; on a
/// blocking thread.
fn relay(
    worker: &ProxyState,
    call: Outgoing,
    pending: Option<Pending>,
    head_tx: tokio::sync::oneshot::Sender<Result<Head, forward::Unanswered>>,
    chunks: tokio::sync::mpsc::Sender<Vec<u8>>,
) {
    let sent = forward::send(
        &worker.agent,
        &call.method,
        &call.url,
        &call.headers,
        &call.body,
    );
    let (head, mut reader) = match sent {
        Ok(answer) => answer,
        Err(unanswered) => {
            if let Some(p) = pending {
                p.record(
                    worker,
                    Reply::default(),
                    CallOutcome::Failed,
                    None,
                    Some(unanswered.message.clone()),
                    None,
                );
            }
            let _ = head_tx.send(Err(unanswered));
            return;
        }
    };
    let status = head.status;
    let api = pending.as_ref().map(|p| p.info.api);
    let mut tee = match (api, status < 400) {
        (Some(api), true) => Some(Tee::new(api, &head)),
        _ => None,
    };
    if status >= 400 {
        let text = failed(worker, pending, status, reader.as_mut());
        let _ = head_tx.send(Ok(head));
        let _ = chunks.blocking_send(text.into_bytes());
        return;
    }
    let _ = head_tx.send(Ok(head));
    let mut pending = pending;
    let (mut first_byte, mut cut, mut gone) = (None, false, false);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(_) => {
                cut = true;
                break;
            }
        };
        let started = pending.as_ref().map(|p| p.started);
        first_byte = first_byte.or(started.map(|s| s.elapsed()));
        if let Some(t) = tee.as_mut() {
            t.feed(&buf[..n]);
            if t.complete() {
                // Queued before the answer's last bytes go out: the client may send
                // its next call as soon as it has them.
                let reply = tee.take().map(Tee::finish).unwrap_or_default();
                if let Some(p) = pending.take() {
                    let (outcome, error) = judged(&reply, p.info.api);
                    p.record(worker, reply, outcome, Some(status), error, first_byte);
                }
            }
        }
        if chunks.blocking_send(buf[..n].to_vec()).is_err() {
            gone = true;
            break;
        }
    }
    if let Some(p) = pending {
        let reply = tee.map(Tee::finish).unwrap_or_default();
        let (outcome, error) = if gone {
            let why = "the client went away before the answer was whole";
            (CallOutcome::Incomplete, Some(why.to_string()))
        } else if cut {
            let why = "the upstream's answer was cut off";
            (CallOutcome::Incomplete, Some(why.to_string()))
        } else {
            judged(&reply, p.info.api)
        };
        p.record(worker, reply, outcome, Some(status), error, first_byte);
    }
}

/// A call to record, as its headers describe it (its body is read when it is recorded:
/// one the proxy cannot read is forwarded all the same, the upstream judges it, and the
/// recorder says it was not recorded); an error names a header forktrail cannot take.
fn pending(
    api: Api,
    headers: &HeaderMap,
    key: Option<&str>,
    body: &Bytes,
) -> Result<Pending, String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let principal = super::principal(header("x-forktrail-principal"), key)
        .map_err(|e| format!("x-forktrail-principal: {e}"))?;
    let mut hint = Hint::default();
    for (name, slot) in [
        ("x-forktrail-session", &mut hint.session),
        ("x-forktrail-parent", &mut hint.parent),
    ] {
        if let Some(value) = header(name) {
            SessionId::new(value).map_err(|e| format!("{name}: {e}"))?;
            *slot = Some(value.to_string());
        }
    }
    let id = uuid::Uuid::now_v7().to_string();
    Ok(Pending {
        body: body.clone(),
        info: ModelCallInfo {
            principal,
            started_at: Some(
                chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            ),
            ..ModelCallInfo::blank(id, api, SessionId::generate())
        },
        hint,
        started: Instant::now(),
    })
}
