//! The recording model proxy: forktrail as an agent's model endpoint.
//!
//! An agent is recorded by pointing its base URL (`ANTHROPIC_BASE_URL`,
//! `OPENAI_BASE_URL`) at `/proxy/anthropic` or `/proxy/openai/v1` of `forktrail serve
//! --upstream …` (or `forktrail proxy`). Each call goes on to the upstream the operator
//! configured, with the client's own key (which goes nowhere else and is never stored);
//! the answer comes back as it arrives, teed into the record. When the answer is whole
//! (or the call ends otherwise), the call is queued for the one recorder thread, which
//! records calls in the order they ended: the session is found by the digest chain of
//! the request's turns (`record.rs`), the new turns and the answer are appended and the
//! call is written beside them, all in one transaction.
//!
//! `wire/` reads the three APIs (Anthropic Messages, OpenAI Chat Completions, OpenAI
//! Responses); `forward.rs` is the upstream call and the tee; `routes.rs` the HTTP side.

#[cfg(feature = "server")]
pub(crate) mod forward;
mod record;
#[cfg(feature = "server")]
pub(crate) mod routes;
pub(crate) mod wire;

pub use record::Captured;
#[cfg(feature = "server")]
pub(crate) use routes::{routes, ProxyState};

use crate::error::{Error, Result};
use crate::model::{ModelCallInfo, NewTurn};
use crate::store::Store;
use crate::whatif::Price;
use std::collections::BTreeMap;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

/// The upstream APIs the proxy forwards to, by the name of their prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum UpstreamKind {
    /// `/proxy/anthropic`: the Anthropic Messages API.
    Anthropic,
    /// `/proxy/openai`: the OpenAI Chat Completions and Responses APIs (and any
    /// server that speaks them).
    Openai,
}

impl UpstreamKind {
    /// The prefix's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::Openai => "openai",
        }
    }

    /// The API a route's prefix names (`anthropic`, `openai`).
    pub(crate) fn named(prefix: &str) -> Option<Self> {
        match prefix {
            "anthropic" => Some(Self::Anthropic),
            "openai" => Some(Self::Openai),
            _ => None,
        }
    }

    /// The provider's own API, the default upstream.
    pub fn default_url(self) -> &'static str {
        match self {
            Self::Anthropic => "https://api.anthropic.com",
            Self::Openai => "https://api.openai.com",
        }
    }
}

/// Where the proxy forwards each API.
#[derive(Clone, Debug, Default)]
pub struct ProxyConfig {
    /// The upstream of each prefix: `/proxy/NAME/REST` goes to `URL/REST`. Empty: no
    /// proxy.
    pub upstreams: BTreeMap<UpstreamKind, String>,
    /// Prices per model, for each call's cost.
    pub prices: BTreeMap<String, Price>,
    /// How long an upstream may stay silent before the call fails (default 600 s).
    pub timeout: Option<Duration>,
}

impl ProxyConfig {
    /// Parses `NAME=URL` (`anthropic=https://api.anthropic.com`), as `--upstream` takes
    /// it.
    ///
    /// ```
    /// use forktrail::{ProxyConfig, UpstreamKind};
    /// let (kind, url) = ProxyConfig::parse_upstream("openai=http://127.0.0.1:8080/")?;
    /// assert_eq!((kind, url.as_str()), (UpstreamKind::Openai, "http://127.0.0.1:8080"));
    /// assert!(ProxyConfig::parse_upstream("gemini=https://x").is_err());
    /// # Ok::<(), forktrail::Error>(())
    /// ```
    pub fn parse_upstream(text: &str) -> Result<(UpstreamKind, String)> {
        let bad = |why: &str| {
            Error::InvalidInput(format!(
                "--upstream {text:?}: {why}; expected anthropic=URL or openai=URL \
                 (http:// or https://)"
            ))
        };
        let (name, url) = text.split_once('=').ok_or_else(|| bad("no '='"))?;
        let kind = match name.trim() {
            "anthropic" => UpstreamKind::Anthropic,
            "openai" => UpstreamKind::Openai,
            other => return Err(bad(&format!("unknown API {other:?}"))),
        };
        let url = url.trim().trim_end_matches('/');
        let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(bad("not an http(s) URL with a host"));
        }
        Ok((kind, url.to_string()))
    }

    /// Both APIs to their providers' own endpoints (what `forktrail proxy` starts with).
    pub fn providers() -> Self {
        let upstreams = [UpstreamKind::Anthropic, UpstreamKind::Openai]
            .into_iter()
            .map(|k| (k, k.default_url().to_string()))
            .collect();
        Self {
            upstreams,
            ..Self::default()
        }
    }
}

/// What a request's headers say of where its calls belong.
#[derive(Clone, Debug, Default)]
pub(crate) struct Hint {
    /// `x-forktrail-session`: the id a conversation that starts with this call gets.
    pub(crate) session: Option<String>,
    /// `x-forktrail-parent`: the session that spawned this one (a sub-agent's).
    pub(crate) parent: Option<String>,
}

/// One call to record.
pub(crate) struct Capture {
    /// The request's body as the client sent it: read by the recorder, off the path of
    /// the answer.
    pub(crate) request: Vec<u8>,
    /// The answer's turn (with its model), when there is one.
    pub(crate) reply_turn: Option<NewTurn>,
    /// What is known of the call (its session, turns and answer index are filled in
    /// when it is recorded).
    pub(crate) info: ModelCallInfo,
    pub(crate) hint: Hint,
}

/// The recorder: one thread that records queued calls in order, and the count of those
/// not yet recorded.
pub(crate) struct Recorder {
    queue: Mutex<mpsc::Sender<Capture>>,
    pending: Arc<(Mutex<usize>, Condvar)>,
}

impl Recorder {
    pub(crate) fn start(store: Arc<Store>) -> Self {
        let (tx, rx) = mpsc::channel::<Capture>();
        let pending = Arc::new((Mutex::new(0usize), Condvar::new()));
        let left = Arc::clone(&pending);
        std::thread::Builder::new()
            .name("forktrail-proxy-recorder".into())
            .spawn(move || {
                for capture in rx {
                    let call = capture.info.id.clone();
                    if let Err(e) = store.capture(capture) {
                        eprintln!(
                            "forktrail: model call {call} could not be recorded: {}",
                            crate::secrets::message(&e.to_string())
                        );
                    }
                    let (count, done) = &*left;
                    let mut n = count.lock().unwrap_or_else(|e| e.into_inner());
                    *n = n.saturating_sub(1);
                    done.notify_all();
                }
            })
            .expect("a thread for the proxy's recorder");
        Self {
            queue: Mutex::new(tx),
            pending,
        }
    }

    /// Queues `capture`.
    pub(crate) fn push(&self, capture: Capture) {
        let (count, _) = &*self.pending;
        *count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        let sent = self
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(capture);
        if sent.is_err() {
            *count.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        }
    }

    /// Waits until every queued call is recorded (at most `limit`); whether it is.
    pub(crate) fn settle(&self, limit: Duration) -> bool {
        let (count, done) = &*self.pending;
        let guard = count.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = done
            .wait_timeout_while(guard, limit, |n| *n > 0)
            .unwrap_or_else(|e| e.into_inner());
        *guard == 0
    }
}

/// The principal of a call: the one a header names, else the key's fingerprint
/// (`key-` and 8 hex digits of its SHA-256: the same key, the same principal; the key
/// itself is never kept), else `anonymous`.
pub(crate) fn principal(named: Option<&str>, key: Option<&str>) -> Result<Option<String>> {
    if let Some(name) = named {
        crate::model::Agent::principal(name)?;
        return Ok(Some(name.to_string()));
    }
    Ok(key
        .filter(|k| !k.is_empty())
        .map(|k| format!("key-{}", &crate::rdf::sha256_hex(&[k.as_bytes()])[..8])))
}
