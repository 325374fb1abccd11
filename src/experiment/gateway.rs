//! The experiment's model endpoint: an HTTP server on an ephemeral loopback port whose
//! `/{sample}/anthropic/…` and `/{sample}/openai/…` each sample's agent takes as its
//! base URL. It only carries calls: each is handed, with the means to answer it, to the
//! thread running its sample, which decides (answer from the recording, or call the
//! arm's model) with the store at hand.

use crate::proxy::forward::{Head, Unanswered};
use crate::proxy::routes::{answer, refusal, ChunkSender, HeadSender};
use crate::proxy::UpstreamKind;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};

/// One call of an agent, to be answered by its sample's thread.
pub(super) struct Incoming {
    pub(super) kind: UpstreamKind,
    pub(super) method: Method,
    /// The path after the API's prefix (`/v1/messages`).
    pub(super) rest: String,
    pub(super) query: Option<String>,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
    pub(super) head: HeadSender,
    pub(super) chunks: ChunkSender,
}

impl Incoming {
    /// Answers the call with an error of its API: `status` and `message`.
    pub(super) fn refuse(self, status: u16, message: &str) {
        let _ = self.head.send(Err(Unanswered {
            message: crate::secrets::scrub(message),
            status,
        }));
    }

    /// Answers the call with one body.
    pub(super) fn give(self, content_type: &str, body: Vec<u8>) {
        let head = Head {
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
            content_type: Some(content_type.into()),
            length: Some(body.len()),
        };
        if self.head.send(Ok(head)).is_ok() {
            let _ = self.chunks.blocking_send(body);
        }
    }
}

type Samples = Arc<Mutex<HashMap<String, mpsc::Sender<Incoming>>>>;

/// The running endpoint: its address and the samples it carries calls for.
pub(super) struct Gateway {
    pub(super) base: String,
    samples: Samples,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Gateway {
    /// Starts the endpoint on `127.0.0.1`, on a port the system picks.
    pub(super) fn start() -> crate::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("forktrail-experiment")
            .enable_all()
            .build()
            .map_err(|e| io("starting the experiment's model endpoint", e))?;
        let samples: Samples = Arc::default();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .map_err(|e| io("binding the experiment's model endpoint to 127.0.0.1", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| io("the experiment's model endpoint", e))?
            .port();
        let router = Router::new()
            .route("/{sample}/{upstream}/{*rest}", axum::routing::any(carry))
            .with_state(Arc::clone(&samples));
        // Answers go out as they are written: without TCP_NODELAY a head, then a body,
        // can wait 40 ms for the agent's delayed ACK.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        runtime.spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Self {
            base: format!("http://127.0.0.1:{port}"),
            samples,
            stop: Some(stop),
            runtime: Some(runtime),
        })
    }

    /// A new sample's base URL (`http://127.0.0.1:PORT/TOKEN`) and the calls its agent
    /// makes.
    pub(super) fn open(&self) -> (String, mpsc::Receiver<Incoming>) {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let (tx, rx) = mpsc::channel();
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.clone(), tx);
        (format!("{}/{token}", self.base), rx)
    }

    /// Stops carrying calls for the sample whose base URL is `base`.
    pub(super) fn close(&self, base: &str) {
        let token = base.rsplit('/').next().unwrap_or_default();
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(token);
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
        }
    }
}

async fn carry(
    State(samples): State<Samples>,
    Path((sample, upstream, rest)): Path<(String, String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let kind = match UpstreamKind::named(&upstream) {
        Some(kind) => kind,
        None => {
            let why = format!("no API {upstream:?}: the experiment serves anthropic and openai");
            return refusal(UpstreamKind::Openai, StatusCode::NOT_FOUND, &why);
        }
    };
    let sender = samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&sample)
        .cloned();
    let Some(sender) = sender else {
        let why = "this experiment sample has ended: its agent's calls are no longer answered";
        return refusal(kind, StatusCode::GONE, why);
    };
    let (head, head_rx) = tokio::sync::oneshot::channel();
    let (chunks, chunk_rx) = tokio::sync::mpsc::channel(64);
    let call = Incoming {
        kind,
        method,
        rest: format!("/{rest}"),
        query: uri.query().map(str::to_string),
        headers,
        body,
        head,
        chunks,
    };
    if sender.send(call).is_err() {
        let why = "this experiment sample has ended: its agent's calls are no longer answered";
        return refusal(kind, StatusCode::GONE, why);
    }
    answer(kind, head_rx, chunk_rx).await
}

fn io(context: &str, source: std::io::Error) -> crate::Error {
    crate::Error::Io {
        context: context.into(),
        source,
    }
}
