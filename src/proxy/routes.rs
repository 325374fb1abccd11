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
pub(crate) fn refusal(kind: UpstreamKind, status: StatusCode, message: &str) -> Response {
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
pub(crate) fn recorded(kind: UpstreamKind, method: &Method, rest: &str) -> Option<Api> {
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
    fn record(self, worker: &ProxyState, ended: Ended) {
        let capture = Capture {
            request: self.body.to_vec(),
            hint: self.hint,
            ..ended.capture(self.info, self.started, &worker.config.prices)
        };
        worker.recorder.push(capture);
    }
}

/// How a relayed call ended.
pub(crate) struct Ended {
    pub(crate) reply: Reply,
    pub(crate) outcome: CallOutcome,
    pub(crate) status: Option<u16>,
    pub(crate) error: Option<String>,
    pub(crate) first_byte: Option<Duration>,
}

impl Ended {
    /// A call that failed before any answer: `error` says why.
    fn failed(status: Option<u16>, error: String) -> Self {
        Self {
            outcome: CallOutcome::Failed,
            status,
            error: Some(error),
            reply: Reply::default(),
            first_byte: None,
        }
    }

    /// The call as recorded (its request left empty): `info` filled in with what the
    /// answer reported, its cost at `prices`.
    pub(crate) fn capture(
        self,
        mut info: ModelCallInfo,
        started: Instant,
        prices: &std::collections::BTreeMap<String, crate::whatif::Price>,
    ) -> Capture {
        let Ended {
            reply,
            outcome,
            status,
            error,
            first_byte,
        } = self;
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
        info.latency_ms = started.elapsed().as_millis() as u64;
        info.first_byte_ms = first_byte.map(|d| d.as_millis() as u64);
        info.cost_usd = match (
            model.as_ref().and_then(|m| prices.get(m)),
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
            request: Vec::new(),
            reply_turn,
            info,
            hint: Hint::default(),
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
    let kind = match UpstreamKind::named(&upstream) {
        Some(kind) => kind,
        None => {
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
    let worker = Arc::clone(&proxy);
    let call = Outgoing {
        method: method.as_str().to_string(),
        url,
        headers: forwarded,
        body,
    };
    relayed(kind, move |head_tx, chunks| {
        let api = pending.as_ref().map(|p| p.info.api);
        let started = pending.as_ref().map(|p| p.started);
        let state = &worker;
        let on_end = pending.map(|p| move |ended: Ended| p.record(state, ended));
        relay(&state.agent, &call, api, started, on_end, head_tx, chunks);
    })
    .await
}

/// The head of an answer, and its body's chunks, as a blocking relay sends them.
pub(crate) type HeadSender = tokio::sync::oneshot::Sender<Result<Head, forward::Unanswered>>;
pub(crate) type ChunkSender = tokio::sync::mpsc::Sender<Vec<u8>>;

/// The answer `work` gives on a blocking thread (its head, then its body's chunks as
/// they come), passed on to the client as it arrives.
pub(crate) async fn relayed(
    kind: UpstreamKind,
    work: impl FnOnce(HeadSender, ChunkSender) + Send + 'static,
) -> Response {
    let (head_tx, head_rx) = tokio::sync::oneshot::channel();
    let (chunks, chunk_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    tokio::task::spawn_blocking(move || work(head_tx, chunks));
    answer(kind, head_rx, chunk_rx).await
}

/// The response whose head and body chunks arrive through `head_rx` and `chunk_rx`.
pub(crate) async fn answer(
    kind: UpstreamKind,
    head_rx: tokio::sync::oneshot::Receiver<Result<Head, forward::Unanswered>>,
    chunk_rx: tokio::sync::mpsc::Receiver<Vec<u8>>,
) -> Response {
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
fn judged(reply: Reply, api: Api, status: u16, first_byte: Option<Duration>) -> Ended {
    let (outcome, error) = if reply.complete {
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
    };
    Ended {
        reply,
        outcome,
        status: Some(status),
        error,
        first_byte,
    }
}

/// An upstream's error answer, read whole (it is short) with every secret taken out, to
/// be passed on; `on_end` told the call failed with it.
fn failed(
    on_end: Option<impl FnOnce(Ended)>,
    status: u16,
    reader: &mut (dyn Read + Send),
) -> String {
    let mut text = Vec::new();
    let _ = reader.take(1024 * 1024).read_to_end(&mut text);
    let text = crate::secrets::scrub(&String::from_utf8_lossy(&text));
    if let Some(end) = on_end {
        let error = format!(
            "the upstream answered {status}: {}",
            crate::secrets::excerpt(&text)
        );
        end(Ended::failed(Some(status), error));
    }
    text
}

/// A request to send on.
pub(crate) struct Outgoing {
    pub(crate) method: String,
    pub(crate) url: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Bytes,
}

/// Sends `call` upstream with `agent` and passes its answer on as it arrives (the head
/// through `head_tx`, the body through `chunks`), teeing an answer of `api` (a call
/// begun at `started`) and telling `on_end` how it ended: before the answer's last bytes
/// go out when it is whole (the client may send its next call as soon as it has them),
/// else when it stops. On a blocking thread.
pub(crate) fn relay(
    agent: &ureq::Agent,
    call: &Outgoing,
    api: Option<Api>,
    started: Option<Instant>,
    on_end: Option<impl FnOnce(Ended)>,
    head_tx: HeadSender,
    chunks: ChunkSender,
) {
    let sent = forward::send(agent, &call.method, &call.url, &call.headers, &call.body);
    let (head, mut reader) = match sent {
        Ok(answer) => answer,
        Err(unanswered) => {
            if let Some(end) = on_end {
                end(Ended::failed(None, unanswered.message.clone()));
            }
            let _ = head_tx.send(Err(unanswered));
            return;
        }
    };
    let status = head.status;
    let mut tee = match (api.filter(|_| on_end.is_some()), status < 400) {
        (Some(api), true) => Some(Tee::new(api, &head)),
        _ => None,
    };
    if status >= 400 {
        let text = failed(on_end, status, reader.as_mut());
        let _ = head_tx.send(Ok(head));
        let _ = chunks.blocking_send(text.into_bytes());
        return;
    }
    let _ = head_tx.send(Ok(head));
    let mut on_end = on_end;
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
        first_byte = first_byte.or(started.map(|s| s.elapsed()));
        if let Some(t) = tee.as_mut() {
            t.feed(&buf[..n]);
            if t.complete() {
                let reply = tee.take().map(Tee::finish).unwrap_or_default();
                if let (Some(end), Some(api)) = (on_end.take(), api) {
                    end(judged(reply, api, status, first_byte));
                }
            }
        }
        if chunks.blocking_send(buf[..n].to_vec()).is_err() {
            gone = true;
            break;
        }
    }
    if let (Some(end), Some(api)) = (on_end, api) {
        let reply = tee.map(Tee::finish).unwrap_or_default();
        let why = if gone {
            Some("the client went away before the answer was whole")
        } else if cut {
            Some("the upstream's answer was cut off")
        } else {
            None
        };
        end(match why {
            Some(why) => Ended {
                reply,
                outcome: CallOutcome::Incomplete,
                status: Some(status),
                error: Some(why.to_string()),
                first_byte,
            },
            None => judged(reply, api, status, first_byte),
        });
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
