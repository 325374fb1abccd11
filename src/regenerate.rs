//! What-if regeneration: fork at turn K, rebuild the exact context the model saw, swap
//! the model, system prompt or tools, call an OpenAI-compatible endpoint, and keep the
//! answer as a branch with its provenance. Tool calls in the answer are recorded, never
//! executed.
//!
//! Each regeneration is a job, stored as an `ft:Regeneration` activity in the parent's
//! graph: created `running`, it ends `complete` (the fork and its turn are written in
//! the same transaction as the status), `failed` or `cancelled` (nothing but the
//! status is written).

use crate::error::{Error, Result};
use crate::model::{Agent, ForkOptions, Kind, NewTurn, Role, SessionId};
use crate::prov::{self, GraphWriter};
use crate::store::Store;
use crate::transcript::openai_messages;
use crate::vocab::{ft, prov as p, rdf};
use oxigraph::model::{GraphName, Literal, NamedNode, NamedOrBlankNode, Quad, QuadRef, Term};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The endpoint when neither `endpoint` nor `$OPENAI_BASE_URL` is set (Ollama's).
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:11434/v1";
/// The largest estimated context sent unless `max_context_tokens` says otherwise.
pub const DEFAULT_MAX_CONTEXT_TOKENS: u64 = 32_768;
/// How the context size is estimated before a call.
pub const ESTIMATE_METHOD: &str = "characters of the request body / 4, rounded up";

/// Options of a regeneration. Deserializes from the JSON body of
/// `POST /sessions/{id}/regenerate`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegenerateOptions {
    /// The fork point K: the model sees turns `0..K` and answers turn K.
    pub at: u64,
    /// The model to ask; default: the model of the last assistant turn before K.
    pub model: Option<String>,
    /// Replaces the system message (or adds one first).
    pub system_prompt: Option<String>,
    /// Replaces the tool list: an array of OpenAI tool definitions.
    pub tools: Option<Value>,
    /// The OpenAI-compatible base URL (`…/v1`); default `$OPENAI_BASE_URL`, else
    /// [`DEFAULT_ENDPOINT`].
    pub endpoint: Option<String>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    /// `what-if` (default), `benchmark` or `manual`.
    pub reason: Option<String>,
    /// A caller's key: a retry with the same key and the same request returns the job
    /// made the first time (running or complete) instead of calling the model again.
    pub request_id: Option<String>,
    /// Ask the model again even if an identical request (same session, fork point,
    /// model, system prompt, tools, sampling parameters and endpoint) already completed;
    /// without it, that job and its fork are returned. Not with `request_id`.
    pub again: bool,
    /// Refuse above this estimated context size ([`DEFAULT_MAX_CONTEXT_TOKENS`]).
    pub max_context_tokens: Option<u64>,
    /// Allow an endpoint that is not on loopback.
    pub allow_remote: bool,
    /// The longest wait for the model's answer, in seconds (default 300).
    pub timeout_secs: Option<u64>,
    /// Only plan: [`Store::plan_regeneration`] (the CLI's and REST's `dry_run`).
    pub dry_run: bool,
}

/// What a regeneration would send, where, and how big it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegeneratePlan {
    pub session: String,
    pub at: u64,
    pub model: String,
    pub endpoint: String,
    pub messages: usize,
    pub estimated_tokens: u64,
    pub estimate_method: &'static str,
    /// The parts that differ from the parent's own context (`model`, `system_prompt`,
    /// `tools`).
    pub swapped: Vec<&'static str>,
    /// The exact request body.
    pub request: Value,
}

/// A regeneration job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub job: String,
    /// `running`, `complete`, `failed` or `cancelled`.
    pub status: String,
    pub session: String,
    pub at: u64,
    pub model: String,
    pub endpoint: String,
    pub reason: String,
    /// The fork holding the answer, once complete.
    pub fork: Option<String>,
    pub created_at: Option<String>,
    pub completed_at: Option<String>,
    pub error: Option<String>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub latency_ms: Option<u64>,
    /// SHA-256 of the exact request body (stored whole as `ft:requestBody`).
    pub request_digest: String,
    /// True when an identical earlier request's job is returned instead of a new call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

/// Whether `endpoint` connects to this machine. Parsed as ureq parses it, and refused
/// with credentials in it (`http://localhost@elsewhere/` connects elsewhere).
fn is_loopback(endpoint: &str) -> Result<bool> {
    let bad = |why: &str| Error::InvalidInput(format!("endpoint {endpoint:?} {why}"));
    let parsed = url::Url::parse(endpoint).map_err(|e| bad(&format!("is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("must be an http:// or https:// URL"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad(
            "must not carry credentials; the API key comes from $OPENAI_API_KEY",
        ));
    }
    Ok(match parsed.host() {
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    })
}

fn text(s: &str) -> Literal {
    Literal::new_simple_literal(s)
}

/// When a job started, for ordering (the stored text does not sort by time), then its
/// id (UUID v7, time-ordered).
fn started(job: &Job) -> (Option<chrono::DateTime<chrono::FixedOffset>>, String) {
    (
        crate::replay::instant(job.created_at.as_deref()),
        job.job.clone(),
    )
}

impl Store {
    /// Builds the request a regeneration of `session` at `options.at` would send, and
    /// checks it (fork point, endpoint, size) without writing or calling anything.
    pub fn plan_regeneration(
        &self,
        session: &SessionId,
        options: &RegenerateOptions,
    ) -> Result<RegeneratePlan> {
        let length = self.require(session)?.length;
        let at = options.at;
        if at == 0 || at > length {
            return Err(Error::IndexOutOfRange {
                session: session.to_string(),
                index: at.into(),
                valid: format!("1..={length} (the model needs at least one turn of context)"),
            });
        }
        let reason = options.reason.as_deref().unwrap_or("what-if");
        if !["what-if", "benchmark", "manual"].contains(&reason) {
            return Err(Error::InvalidInput(format!(
                "unknown reason {reason:?} (expected what-if, benchmark or manual)"
            )));
        }
        let turns = self.load(session, Some(at - 1))?;
        let last_model = turns.iter().rev().find_map(|t| t.model.clone());
        let model = match (&options.model, &last_model) {
            (Some(m), _) | (None, Some(m)) => m.clone(),
            (None, None) => {
                return Err(Error::InvalidInput(format!(
                    "no turn of session {session} before index {at} names a model: give one \
                     (--model)"
                )))
            }
        };
        Agent::model(model.clone())?;
        let mut messages = openai_messages(&turns)?;
        let mut swapped = Vec::new();
        if options.model.is_some() && options.model != last_model {
            swapped.push("model");
        }
        if let Some(prompt) = &options.system_prompt {
            swapped.push("system_prompt");
            let system = json!({"role": "system", "content": prompt});
            match messages.first_mut() {
                Some(first) if first["role"] == "system" => *first = system,
                _ => messages.insert(0, system),
            }
        }
        let mut request = json!({ "model": model, "messages": messages });
        if let Some(tools) = &options.tools {
            if !tools.is_array() {
                return Err(Error::InvalidInput(
                    "tools must be a JSON array of OpenAI tool definitions".into(),
                ));
            }
            swapped.push("tools");
            request["tools"] = tools.clone();
        }
        if let Some(n) = options.max_tokens {
            request["max_tokens"] = json!(n);
        }
        if let Some(t) = options.temperature {
            if !(0.0..=2.0).contains(&t) {
                return Err(Error::InvalidInput(format!(
                    "temperature {t} is outside 0..=2"
                )));
            }
            request["temperature"] = json!(t);
        }
        let endpoint = options
            .endpoint
            .clone()
            .or_else(|| {
                std::env::var("OPENAI_BASE_URL")
                    .ok()
                    .filter(|e| !e.is_empty())
            })
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let endpoint = endpoint.trim_end_matches('/').to_string();
        if !is_loopback(&endpoint)? && !options.allow_remote {
            return Err(Error::InvalidInput(format!(
                "endpoint {endpoint} is not on this machine: pass --allow-remote to send \
                 session {session} there"
            )));
        }
        let estimated_tokens = (request.to_string().chars().count() as u64).div_ceil(4);
        let max = options
            .max_context_tokens
            .unwrap_or(DEFAULT_MAX_CONTEXT_TOKENS);
        if estimated_tokens > max {
            return Err(Error::InvalidInput(format!(
                "the context of session {session} up to index {at} is about {estimated_tokens} \
                 tokens ({ESTIMATE_METHOD}), above the limit of {max}: raise \
                 --max-context-tokens or fork earlier"
            )));
        }
        Ok(RegeneratePlan {
            session: session.to_string(),
            at,
            model,
            endpoint,
            messages: request["messages"].as_array().map_or(0, Vec::len),
            estimated_tokens,
            estimate_method: ESTIMATE_METHOD,
            swapped,
            request,
        })
    }

    /// Records a `running` job for a regeneration, or returns the job an identical
    /// earlier request made (`reused: true`): with a request id, that request's
    /// `running` or `complete` job; without one, the latest `complete` job of the same
    /// session, fork point, model, system prompt, tools, sampling parameters and
    /// endpoint, unless `options.again`. Run a new job with [`Store::run_job`].
    pub fn begin_regeneration(
        &self,
        session: &SessionId,
        options: &RegenerateOptions,
    ) -> Result<Job> {
        if options.dry_run {
            return Err(Error::InvalidInput(
                "a dry run writes nothing: plan it with plan_regeneration".into(),
            ));
        }
        if options.again && options.request_id.is_some() {
            return Err(Error::InvalidInput(
                "again asks for a new sample and a request id for the same one: give one \
                 or the other"
                    .into(),
            ));
        }
        if let Some(id) = &options.request_id {
            crate::model::check_key("request id", id)?;
        }
        let plan = self.plan_regeneration(session, options)?;
        let parts = json!([
            session.as_str(),
            plan.at,
            plan.model,
            options.system_prompt,
            options.tools,
            options.max_tokens,
            options.temperature,
            plan.endpoint,
            options.request_id
        ]);
        let key = prov::sha256_hex(&[parts.to_string().as_bytes()]);
        let _guard = self.write_guard();
        if !options.again {
            if let Some(job) = self.job_of_request(&key, options.request_id.is_some())? {
                return Ok(job);
            }
        }
        let facts = self.require(session)?;
        let id = uuid::Uuid::now_v7().to_string();
        let body = plan.request.to_string();
        let iri = self
            .iris
            .activity(session.as_str(), &format!("regeneration/{id}"));
        let model = Agent::model(plan.model.clone())?;
        let mut w = GraphWriter::new(facts.iri.clone());
        let model_iri = w.agent(&self.iris, &model);
        w.add(&iri, rdf::TYPE, ft::REGENERATION);
        w.add(&iri, rdf::TYPE, p::ACTIVITY);
        w.add(&iri, ft::JOB_ID, text(&id));
        w.add(&iri, ft::STATUS, text("running"));
        w.add(&iri, p::USED, facts.iri.clone());
        w.add(&iri, ft::AT_INDEX, Literal::from(plan.at));
        w.add(&iri, p::WAS_ASSOCIATED_WITH, model_iri);
        w.add(&iri, ft::ENDPOINT, text(&plan.endpoint));
        w.add(
            &iri,
            ft::REASON,
            text(options.reason.as_deref().unwrap_or("what-if")),
        );
        w.add(&iri, ft::REQUEST_BODY, text(&body));
        w.add(
            &iri,
            ft::REQUEST_DIGEST,
            text(&prov::sha256_hex(&[body.as_bytes()])),
        );
        w.add(&iri, ft::REQUEST_KEY, text(&key));
        if let Some(secs) = options.timeout_secs {
            w.add(&iri, ft::TIMEOUT_SECS, Literal::from(secs));
        }
        w.add(&iri, p::STARTED_AT_TIME, prov::now());
        self.commit(&w.quads, &[])?;
        self.job(&id)
    }

    /// The job an earlier identical request made: found by its request key, `running`
    /// or `complete` when a request id made it, else the latest `complete` one.
    fn job_of_request(&self, key: &str, by_request_id: bool) -> Result<Option<Job>> {
        let mut found: Option<Job> = None;
        for (iri, graph) in self.subjects_with(ft::REQUEST_KEY, key)? {
            let job = self.read_job(&iri, &graph)?;
            // A complete job whose fork was deleted since has nothing to give back.
            let fork_there = match &job.fork {
                Some(fork) => self.exists(&SessionId::new(fork.clone())?)?,
                None => false,
            };
            let usable = (job.status == "complete" && fork_there)
                || (by_request_id && job.status == "running");
            let newer = found.as_ref().is_none_or(|f| started(&job) > started(f));
            if usable && newer {
                found = Some(job);
            }
        }
        Ok(found.map(|job| Job {
            reused: true,
            ..job
        }))
    }

    /// Begins and runs a regeneration in this thread; returns the finished job.
    pub fn regenerate(&self, session: &SessionId, options: &RegenerateOptions) -> Result<Job> {
        let job = self.begin_regeneration(session, options)?;
        if job.status != "running" {
            return Ok(job);
        }
        self.run_job(&job.job)
    }

    /// Runs a `running` job: calls the model and records the outcome. Returns at once
    /// (with the job) if it is not running. Cancellation ([`Store::cancel_job`], or a
    /// cancel file for a job run by another process) is noticed within 50 ms.
    pub fn run_job(&self, id: &str) -> Result<Job> {
        let job = self.job(id)?;
        if job.status != "running" {
            return Ok(job);
        }
        let (iri, graph) = self.job_node(id)?.ok_or_else(|| Error::JobNotFound {
            job: id.to_string(),
        })?;
        let body = self
            .job_literal(&iri, &graph, ft::REQUEST_BODY)?
            .unwrap_or_default();
        let timeout = self
            .job_literal(&iri, &graph, ft::TIMEOUT_SECS)?
            .and_then(|t| t.parse().ok())
            .unwrap_or(300);
        // One runner per job in this process: a second caller gets the job as it is.
        let flag = Arc::new(AtomicBool::new(false));
        {
            let mut running = self.running_jobs();
            if running.contains_key(id) {
                return Ok(job);
            }
            running.insert(id.to_string(), Arc::clone(&flag));
        }
        let outcome = self.call_model(&job.endpoint, body, timeout, id, &flag);
        let result = match outcome {
            Call::Cancelled => self.finish(id, "cancelled", None, None),
            Call::Failed(message) => self.finish(id, "failed", Some(message), None),
            Call::Answered(answer, latency) => {
                match self.record_answer(&job, &iri, &graph, &answer, latency, &flag) {
                    Ok(job) => Ok(job),
                    Err(e) => self.finish(id, "failed", Some(e.to_string()), None),
                }
            }
        };
        self.running_jobs().remove(id);
        if let Some(path) = self.path() {
            let _ = std::fs::remove_file(Store::cancel_file(path, id));
        }
        result
    }

    /// Whether job `id` was asked to stop, in this process or through its cancel file.
    fn cancel_requested(&self, id: &str, flag: &AtomicBool) -> bool {
        flag.load(Ordering::SeqCst)
            || self
                .path()
                .is_some_and(|path| Store::cancel_file(path, id).exists())
    }

    /// Asks a running job to stop. A job this process runs stops within 50 ms; a job
    /// whose runner is gone is marked `cancelled`. Either way nothing but the status is
    /// written. Finished jobs are left as they are.
    pub fn cancel_job(&self, id: &str) -> Result<Job> {
        let job = self.job(id)?;
        if job.status != "running" {
            return Ok(job);
        }
        let flag = self.running_jobs().get(id).cloned();
        if let Some(flag) = flag {
            flag.store(true, Ordering::SeqCst);
        }
        // Recorded here, under the write lock: a runner that gets its answer later finds
        // the job no longer running and writes nothing.
        self.finish(id, "cancelled", None, None)
    }

    /// Every regeneration job in the store, oldest first.
    pub fn jobs(&self) -> Result<Vec<Job>> {
        let mut out = Vec::new();
        for quad in
            self.inner
                .quads_for_pattern(None, Some(rdf::TYPE), Some(ft::REGENERATION.into()), None)
        {
            let quad = quad?;
            if let (NamedOrBlankNode::NamedNode(iri), GraphName::NamedNode(graph)) =
                (&quad.subject, &quad.graph_name)
            {
                out.push(self.read_job(iri, graph)?);
            }
        }
        out.sort_by_cached_key(started);
        Ok(out)
    }

    /// One job by id, or [`Error::JobNotFound`].
    pub fn job(&self, id: &str) -> Result<Job> {
        let (iri, graph) = self.job_node(id)?.ok_or_else(|| Error::JobNotFound {
            job: id.to_string(),
        })?;
        self.read_job(&iri, &graph)
    }

    /// The file whose existence asks the runner of job `id` in another process to stop
    /// (for a store on disk).
    pub fn cancel_file(store_path: &std::path::Path, id: &str) -> PathBuf {
        let mut dir = store_path.as_os_str().to_owned();
        dir.push(".jobs");
        PathBuf::from(dir).join(format!("{id}.cancel"))
    }

    fn job_node(&self, id: &str) -> Result<Option<(NamedNode, NamedNode)>> {
        Ok(self.subjects_with(ft::JOB_ID, id)?.into_iter().next())
    }

    fn job_literal(
        &self,
        iri: &NamedNode,
        graph: &NamedNode,
        predicate: oxigraph::model::NamedNodeRef<'_>,
    ) -> Result<Option<String>> {
        for quad in self.inner.quads_for_pattern(
            Some(iri.as_ref().into()),
            Some(predicate),
            None,
            Some(graph.as_ref().into()),
        ) {
            if let Term::Literal(l) = quad?.object {
                return Ok(Some(l.value().to_string()));
            }
        }
        Ok(None)
    }

    fn read_job(&self, iri: &NamedNode, graph: &NamedNode) -> Result<Job> {
        let mut job = Job {
            job: String::new(),
            status: String::new(),
            session: self
                .iris
                .session_id(graph.as_ref())
                .unwrap_or_else(|| graph.as_str().to_string()),
            at: 0,
            model: String::new(),
            endpoint: String::new(),
            reason: String::new(),
            fork: None,
            created_at: None,
            completed_at: None,
            error: None,
            input_tokens: None,
            output_tokens: None,
            latency_ms: None,
            request_digest: String::new(),
            reused: false,
        };
        for quad in self.inner.quads_for_pattern(
            Some(iri.as_ref().into()),
            None,
            None,
            Some(graph.as_ref().into()),
        ) {
            let quad = quad?;
            let pr = quad.predicate.as_ref();
            match &quad.object {
                Term::NamedNode(n) if pr == p::WAS_ASSOCIATED_WITH => {
                    if let Some(Agent::Model(m)) = self.iris.parse_agent(n.as_ref()) {
                        job.model = m;
                    }
                }
                Term::NamedNode(n) if pr == ft::RESULT_SESSION => {
                    job.fork = self.iris.session_id(n.as_ref());
                }
                Term::Literal(l) => {
                    let v = l.value().to_string();
                    let n = || v.parse::<u64>().ok();
                    if pr == ft::JOB_ID {
                        job.job = v;
                    } else if pr == ft::STATUS {
                        job.status = v;
                    } else if pr == ft::AT_INDEX {
                        job.at = n().unwrap_or(0);
                    } else if pr == ft::ENDPOINT {
                        job.endpoint = v;
                    } else if pr == ft::REASON {
                        job.reason = v;
                    } else if pr == ft::ERROR_MESSAGE {
                        job.error = Some(v);
                    } else if pr == ft::INPUT_TOKENS {
                        job.input_tokens = n();
                    } else if pr == ft::OUTPUT_TOKENS {
                        job.output_tokens = n();
                    } else if pr == ft::LATENCY_MS {
                        job.latency_ms = n();
                    } else if pr == ft::REQUEST_DIGEST {
                        job.request_digest = v;
                    } else if pr == p::STARTED_AT_TIME {
                        job.created_at = Some(v);
                    } else if pr == p::ENDED_AT_TIME {
                        job.completed_at = Some(v);
                    }
                }
                _ => {}
            }
        }
        Ok(job)
    }

    /// Sets a running job's final status (with an error message, and extra quads such
    /// as the fork and its turn) in one transaction; a job already ended is left alone.
    fn finish(
        &self,
        id: &str,
        status: &str,
        error: Option<String>,
        extra: Option<Vec<Quad>>,
    ) -> Result<Job> {
        let _guard = self.write_guard();
        self.finish_locked(id, status, error, extra.unwrap_or_default())
    }

    fn finish_locked(
        &self,
        id: &str,
        status: &str,
        error: Option<String>,
        mut inserts: Vec<Quad>,
    ) -> Result<Job> {
        let (iri, graph) = self.job_node(id)?.ok_or_else(|| Error::JobNotFound {
            job: id.to_string(),
        })?;
        let g = GraphName::NamedNode(graph.clone());
        let running = Quad::new(iri.clone(), ft::STATUS, text("running"), g.clone());
        if !self.inner.contains(QuadRef::from(&running))? {
            return self.read_job(&iri, &graph);
        }
        inserts.push(Quad::new(iri.clone(), ft::STATUS, text(status), g.clone()));
        inserts.push(Quad::new(
            iri.clone(),
            p::ENDED_AT_TIME,
            prov::now(),
            g.clone(),
        ));
        if let Some(message) = error {
            inserts.push(Quad::new(iri.clone(), ft::ERROR_MESSAGE, text(&message), g));
        }
        self.commit(&inserts, &[running])?;
        self.read_job(&iri, &graph)
    }

    fn running_jobs(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Arc<AtomicBool>>> {
        self.jobs_running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Calls the endpoint on a helper thread and waits, watching for cancellation.
    fn call_model(
        &self,
        endpoint: &str,
        body: String,
        timeout_secs: u64,
        id: &str,
        flag: &AtomicBool,
    ) -> Call {
        let url = format!("{endpoint}/chat/completions");
        let key = std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.is_empty());
        let (tx, rx) = std::sync::mpsc::channel();
        let started = Instant::now();
        std::thread::spawn(move || {
            let agent = ureq::AgentBuilder::new()
                .timeout_connect(Duration::from_secs(10))
                .timeout(Duration::from_secs(timeout_secs))
                .build();
            let mut request = agent.post(&url).set("Content-Type", "application/json");
            if let Some(key) = &key {
                request = request.set("Authorization", &format!("Bearer {key}"));
            }
            let outcome = match request.send_string(&body) {
                Ok(response) => response
                    .into_string()
                    .map_err(|e| format!("cannot read the answer of {url}: {e}")),
                Err(ureq::Error::Status(code, response)) => {
                    let detail = response.into_string().unwrap_or_default();
                    Err(format!(
                        "{url} answered HTTP {code}: {}",
                        detail.chars().take(300).collect::<String>()
                    ))
                }
                Err(e) if e.to_string().contains("timed out") => Err(format!(
                    "no answer from {url} within {timeout_secs} s (--timeout)"
                )),
                // ureq's own message starts with the URL: name it once.
                Err(ureq::Error::Transport(t)) => {
                    let mut why = t.kind().to_string();
                    for detail in [
                        t.message().map(str::to_string),
                        std::error::Error::source(&t).map(|s| s.to_string()),
                    ]
                    .into_iter()
                    .flatten()
                    {
                        why += &format!(": {detail}");
                    }
                    Err(format!("cannot reach {url}: {why}"))
                }
            };
            let _ = tx.send(outcome);
        });
        loop {
            if self.cancel_requested(id, flag) {
                return Call::Cancelled;
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Ok(text)) => return Call::Answered(text, started.elapsed().as_millis() as u64),
                Ok(Err(message)) => return Call::Failed(message),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Call::Failed("the model call ended without an answer".into())
                }
            }
        }
    }

    /// Writes the fork, its generated turn and the job's completion in one transaction
    /// (unless the job was cancelled meanwhile).
    fn record_answer(
        &self,
        job: &Job,
        iri: &NamedNode,
        graph: &NamedNode,
        answer: &str,
        latency_ms: u64,
        flag: &AtomicBool,
    ) -> Result<Job> {
        let malformed = |why: &str| {
            Error::InvalidInput(format!(
                "the endpoint's answer is not a chat completion ({why}): {}",
                answer.chars().take(200).collect::<String>()
            ))
        };
        let value: Value = serde_json::from_str(answer).map_err(|e| malformed(&e.to_string()))?;
        let message = value
            .pointer("/choices/0/message")
            .ok_or_else(|| malformed("no choices[0].message"))?;
        let content = match message.get("content") {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            Some(_) => return Err(malformed("content is not text")),
        };
        let calls = match message.get("tool_calls") {
            Some(calls @ Value::Array(list)) if !list.is_empty() => Some(calls.to_string()),
            None | Some(Value::Null) | Some(Value::Array(_)) => None,
            Some(_) => return Err(malformed("tool_calls is not an array")),
        };
        let model = value
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .unwrap_or(&job.model)
            .to_string();
        let mut turn = NewTurn::new(Role::Assistant, content).model(model.clone());
        if let Some(calls) = calls {
            // Recorded, never executed: the regeneration stops at the tool call.
            turn = turn.tool_calls(calls).kind(Kind::ToolCall);
        }
        let usage = |key: &str| {
            value
                .pointer(&format!("/usage/{key}"))
                .and_then(Value::as_u64)
        };
        let parent: SessionId = job.session.parse()?;
        let _guard = self.write_guard();
        if self.cancel_requested(&job.job, flag) {
            return self.finish_locked(&job.job, "cancelled", None, Vec::new());
        }
        let (plan, mut quads, facts) = self.fork_locked(
            &parent,
            ForkOptions {
                at: Some(job.at as i64),
                reason: Some(job.reason.clone()),
                ..Default::default()
            },
        )?;
        let facts = facts.expect("a fork that is not a dry run has facts");
        let activity = iri.clone();
        let (turn_quads, _, _) = self.turn_quads_locked(&facts, turn, |w, turn_iri, _| {
            w.add(turn_iri, p::WAS_GENERATED_BY, activity.clone());
        })?;
        quads.extend(turn_quads);
        let g = GraphName::NamedNode(graph.clone());
        let child = self.iris.session(&plan.session);
        quads.push(Quad::new(
            iri.clone(),
            ft::RESULT_SESSION,
            child.clone(),
            g.clone(),
        ));
        quads.push(Quad::new(
            iri.clone(),
            ft::LATENCY_MS,
            Literal::from(latency_ms),
            g.clone(),
        ));
        if let Some(n) = usage("prompt_tokens") {
            quads.push(Quad::new(
                iri.clone(),
                ft::INPUT_TOKENS,
                Literal::from(n),
                g.clone(),
            ));
        }
        if let Some(n) = usage("completion_tokens") {
            quads.push(Quad::new(
                iri.clone(),
                ft::OUTPUT_TOKENS,
                Literal::from(n),
                g.clone(),
            ));
        }
        let done = self.finish_locked(&job.job, "complete", None, quads)?;
        self.cache().forget(child.as_str());
        Ok(done)
    }

    /// Token totals of the regenerations whose answer is session `iri`.
    pub(crate) fn regeneration_usage(&self, iri: &NamedNode) -> Result<Option<(u64, u64)>> {
        let mut total: Option<(u64, u64)> = None;
        for quad in self.inner.quads_for_pattern(
            None,
            Some(ft::RESULT_SESSION),
            Some(iri.as_ref().into()),
            None,
        ) {
            let quad = quad?;
            if let (NamedOrBlankNode::NamedNode(job), GraphName::NamedNode(graph)) =
                (&quad.subject, &quad.graph_name)
            {
                let n = |pr| -> Result<u64> {
                    Ok(self
                        .job_literal(job, graph, pr)?
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0))
                };
                let (i, o) = total.unwrap_or((0, 0));
                total = Some((i + n(ft::INPUT_TOKENS)?, o + n(ft::OUTPUT_TOKENS)?));
            }
        }
        Ok(total)
    }

    /// The models the own turns of session `iri` are attributed to, sorted.
    pub(crate) fn models_of(&self, iri: &NamedNode) -> Result<Vec<String>> {
        let mut models = std::collections::BTreeSet::new();
        for quad in self.inner.quads_for_pattern(
            None,
            Some(p::WAS_ATTRIBUTED_TO),
            None,
            Some(iri.as_ref().into()),
        ) {
            if let Term::NamedNode(agent) = quad?.object {
                if let Some(Agent::Model(m)) = self.iris.parse_agent(agent.as_ref()) {
                    models.insert(m);
                }
            }
        }
        Ok(models.into_iter().collect())
    }
}

enum Call {
    Answered(String, u64),
    Failed(String),
    Cancelled,
}
