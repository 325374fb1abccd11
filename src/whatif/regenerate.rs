//! What-if regeneration: fork at turn K, rebuild the exact context the model saw, swap
//! the model, system prompt or tools, call an OpenAI-compatible endpoint, and keep the
//! answer as a branch with its provenance. Tool calls in the answer are recorded, never
//! executed.
//!
//! Each regeneration is a job, stored as an `ft:Regeneration` activity in the parent's
//! graph: created `running`, it ends `complete` (the fork and its turn are written in
//! the same transaction as the status), `failed` or `cancelled` (nothing but the
//! status is written).

use super::call::Call;
use super::provider::{is_loopback, Answer, Provider, DEFAULT_ENDPOINT, DEFAULT_MAX_OUTPUT_TOKENS};
use crate::error::{Error, Result};
use crate::io::openai_messages;
use crate::model::{Agent, ForkOptions, Job, JobStatus, SessionId};
use crate::rdf::{self, instant, JobNode, JobRecord};
use crate::store::{Store, WriteTx};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::atomic::AtomicBool;

/// The largest estimated context sent unless `max_context_tokens` says otherwise.
pub const DEFAULT_MAX_CONTEXT_TOKENS: u64 = 32_768;
/// How the context size is estimated before a call.
pub const ESTIMATE_METHOD: &str = "characters of the request body / 4, rounded up";

/// Options of a regeneration: the CLI's `regenerate` flags (the system prompt and the
/// tools come from files there) and the JSON body of `POST /sessions/{id}/regenerate`.
#[derive(Clone, Debug, Default, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct RegenerateOptions {
    /// The fork point K: the model sees turns 0..K-1 and answers turn K.
    #[arg(long)]
    pub at: u64,
    /// The model (default: the model of the last assistant turn before K).
    #[arg(long)]
    pub model: Option<String>,
    /// Replaces the system message (or adds one first).
    #[arg(skip)]
    pub system_prompt: Option<String>,
    /// Replaces the tool list: an array of OpenAI tool definitions.
    #[arg(skip)]
    pub tools: Option<Value>,
    /// The OpenAI-compatible base URL (default: $OPENAI_BASE_URL, else
    /// http://127.0.0.1:11434/v1). An API key is read from $OPENAI_API_KEY only, and
    /// never stored.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// The most tokens the model may answer with (sent as max_tokens).
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// The sampling temperature, 0 to 2 (sent as temperature; default: the endpoint's).
    #[arg(long)]
    pub temperature: Option<f64>,
    /// what-if (default), benchmark or manual; or continue, which answers at the
    /// session's end (K its length) and appends the answer to the session itself
    /// rather than to a new fork (to a fork at K after all if the session has grown
    /// by then).
    #[arg(long)]
    pub reason: Option<String>,
    /// A caller's key: a retry with the same request id and request returns the first
    /// job (running or complete) instead of calling the model again.
    #[arg(long, conflicts_with = "again")]
    pub request_id: Option<String>,
    /// Ask the model again even if an identical request (same session, fork point,
    /// model, system prompt, tools, sampling parameters and endpoint) already completed;
    /// by default that job and its fork are returned and the model is not called.
    #[arg(long)]
    pub again: bool,
    /// Refuse contexts estimated above this many tokens (characters / 4; default
    /// 32768).
    #[arg(long)]
    pub max_context_tokens: Option<u64>,
    /// Allow an endpoint that is not on this machine (it then needs --budget-usd and
    /// --price).
    #[arg(long)]
    pub allow_remote: bool,
    /// The money cap of the call, in US dollars: the call is made only if its upper
    /// bound (the request's bytes as input tokens, plus max_tokens, at --price) fits.
    /// Required with an endpoint off this machine.
    #[arg(long, value_name = "USD")]
    pub budget_usd: Option<f64>,
    /// The model's price, in US dollars per million tokens (input, output, and cached
    /// input, which defaults to the input price): required with --budget-usd.
    #[arg(long, value_name = "IN/OUT[/CACHED]")]
    pub price: Option<super::Price>,
    /// The longest wait for the answer, in seconds (default 300).
    #[arg(long = "timeout", value_name = "SECONDS")]
    pub timeout_secs: Option<u64>,
    /// Print the plan (fork point, messages, estimated tokens, endpoint, model) and
    /// write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// What a regeneration would send, where, and how big it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegeneratePlan {
    pub session: SessionId,
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
    /// The most the call can cost ([`super::Price::upper_bound`]), with a price.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
}

impl RegenerateOptions {
    /// The endpoint the regeneration calls: `endpoint`, else `$OPENAI_BASE_URL`, else
    /// [`DEFAULT_ENDPOINT`]; without a trailing slash.
    pub fn resolved_endpoint(&self) -> String {
        self.endpoint
            .clone()
            .or_else(|| {
                std::env::var("OPENAI_BASE_URL")
                    .ok()
                    .filter(|e| !e.is_empty())
            })
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
            .trim_end_matches('/')
            .to_string()
    }
}

/// When a job started, for ordering (the stored text does not sort by time), then its
/// id (UUID v7, time-ordered).
fn started(job: &Job) -> (Option<chrono::DateTime<chrono::FixedOffset>>, String) {
    (instant(job.created_at.as_deref()), job.job.clone())
}

/// The reason of a regeneration that continues its session rather than forking it.
const CONTINUE: &str = "continue";

impl Store {
    /// Builds the request a regeneration of `session` at `options.at` would send, and
    /// checks it (fork point, endpoint, size) without writing or calling anything.
    pub fn plan_regeneration(
        &self,
        session: &SessionId,
        options: &RegenerateOptions,
    ) -> Result<RegeneratePlan> {
        let at = options.at;
        let length = self.answer_point(session, at)?;
        let reason = options.reason.as_deref().unwrap_or("what-if");
        if !["what-if", "benchmark", "manual", CONTINUE].contains(&reason) {
            return Err(Error::InvalidInput(format!(
                "unknown reason {reason:?} (expected what-if, benchmark, manual or continue)"
            )));
        }
        if reason == CONTINUE && at != length {
            return Err(Error::InvalidInput(format!(
                "a continue answers at the end of session {session}: at {length}, not {at}"
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
        let endpoint = options.resolved_endpoint();
        let remote = !is_loopback(&endpoint)?;
        if remote && !options.allow_remote {
            return Err(Error::InvalidInput(format!(
                "endpoint {endpoint} is not on this machine: pass --allow-remote (and \
                 --budget-usd) to send session {session} there"
            )));
        }
        let upper_usd =
            self.regeneration_cost(session, options, &endpoint, remote, &mut request)?;
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
            session: session.clone(),
            at,
            model,
            endpoint,
            messages: request["messages"].as_array().map_or(0, Vec::len),
            estimated_tokens,
            estimate_method: ESTIMATE_METHOD,
            swapped,
            request,
            upper_usd,
            budget_usd: options.budget_usd,
        })
    }

    /// Checks a regeneration's money cap: required off this machine, with a price; the
    /// call's upper bound must fit (`max_tokens` is then always sent, so that the bound
    /// holds). Returns the bound, with a price.
    fn regeneration_cost(
        &self,
        session: &SessionId,
        options: &RegenerateOptions,
        endpoint: &str,
        remote: bool,
        request: &mut Value,
    ) -> Result<Option<f64>> {
        if let Some(budget) = options.budget_usd {
            if !budget.is_finite() || budget < 0.0 {
                return Err(Error::InvalidInput(format!(
                    "budget_usd {budget} is not a positive amount of dollars"
                )));
            }
        }
        if remote && options.budget_usd.is_none() {
            return Err(Error::InvalidInput(format!(
                "endpoint {endpoint} is off this machine: a money cap is required \
                 (--budget-usd, with --price)"
            )));
        }
        let Some(price) = options.price else {
            if options.budget_usd.is_some() {
                return Err(Error::InvalidInput(format!(
                    "a budget needs the price of model {}: the cost of the call cannot be \
                     bounded without one (--price IN/OUT)",
                    request["model"].as_str().unwrap_or_default()
                )));
            }
            return Ok(None);
        };
        let max_output = options.max_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
        request["max_tokens"] = json!(max_output);
        let upper = price.upper_bound(request.to_string().len() as u64, max_output);
        if let Some(budget) = options.budget_usd.filter(|b| upper > *b) {
            return Err(Error::InvalidInput(format!(
                "the regeneration of session {session} at index {} could cost up to \
                 ${upper:.6}, above the budget of ${budget} (--budget-usd): lower \
                 --max-tokens or fork earlier",
                options.at
            )));
        }
        Ok(Some(upper))
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
        let key = rdf::sha256_hex(&[parts.to_string().as_bytes()]);
        let mut tx = self.write()?;
        if !options.again {
            if let Some(job) = self.job_of_request(&key, options.request_id.is_some())? {
                return Ok(job);
            }
        }
        let facts = self.require(session)?;
        let id = uuid::Uuid::now_v7().to_string();
        let model = Agent::model(plan.model.clone())?;
        let record = JobRecord {
            id: &id,
            session: &facts,
            at: plan.at,
            model: &model,
            endpoint: &plan.endpoint,
            reason: options.reason.as_deref().unwrap_or("what-if"),
            body: &plan.request.to_string(),
            key: &key,
            timeout_secs: options.timeout_secs,
            budget_usd: options.budget_usd,
        };
        let (_, quads) = record.quads(&self.iris);
        tx.insert(quads);
        tx.commit()?;
        self.job(&id)
    }

    /// The job an earlier identical request made: found by its request key, `running`
    /// or `complete` when a request id made it, else the latest `complete` one whose
    /// fork is still there.
    fn job_of_request(&self, key: &str, by_request_id: bool) -> Result<Option<Job>> {
        let mut found: Option<Job> = None;
        for node in self.rdf().jobs_with_key(key)? {
            let job = self.rdf().job(&node)?;
            // A complete job whose fork was deleted since has nothing to give back.
            let fork_there = match &job.fork {
                Some(fork) => self.exists(fork)?,
                None => false,
            };
            let usable = (job.status == JobStatus::Complete && fork_there)
                || (by_request_id && job.status == JobStatus::Running);
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
        if job.status != JobStatus::Running {
            return Ok(job);
        }
        self.run_job(&job.job)
    }

    /// Runs a `running` job: calls the model and records the outcome. Returns at once
    /// (with the job) if it is not running. Cancellation ([`Store::cancel_job`], or a
    /// cancel file for a job run by another process) is noticed within 50 ms.
    pub fn run_job(&self, id: &str) -> Result<Job> {
        let node = self.job_node(id)?;
        let job = self.rdf().job(&node)?;
        if job.status != JobStatus::Running {
            return Ok(job);
        }
        let (body, timeout) = self.rdf().job_request(&node)?;
        // One runner per job in this process: a second caller gets the job as it is.
        let Some(flag) = self.claim_job(id) else {
            return Ok(job);
        };
        let outcome = self.call_model(
            Provider::Openai,
            &job.endpoint,
            body,
            timeout.unwrap_or(300),
            &[id],
            &flag,
        );
        let result = match outcome {
            Call::Cancelled => self.finish(&node, JobStatus::Cancelled, None),
            Call::Failed(failure) => self.finish(&node, JobStatus::Failed, Some(&failure.message)),
            Call::Answered(answer, latency) => {
                match self.record_answer(&job, &node, &answer, latency, &flag) {
                    Ok(job) => Ok(job),
                    Err(e) => self.finish(&node, JobStatus::Failed, Some(&e.to_string())),
                }
            }
        };
        self.release_job(id);
        result
    }

    /// Asks a running job to stop. A job this process runs stops within 50 ms; a job
    /// whose runner is gone is marked `cancelled`. Either way nothing but the status is
    /// written. Finished jobs are left as they are.
    pub fn cancel_job(&self, id: &str) -> Result<Job> {
        let node = self.job_node(id)?;
        let job = self.rdf().job(&node)?;
        if job.status != JobStatus::Running {
            return Ok(job);
        }
        self.signal_cancel(id);
        // Recorded here, under the write lock: a runner that gets its answer later finds
        // the job no longer running and writes nothing.
        self.finish(&node, JobStatus::Cancelled, None)
    }

    /// Every regeneration job in the store, oldest first.
    pub fn jobs(&self) -> Result<Vec<Job>> {
        let rdf = self.rdf();
        let mut out = rdf
            .jobs()?
            .iter()
            .map(|node| rdf.job(node))
            .collect::<Result<Vec<_>>>()?;
        out.sort_by_cached_key(started);
        Ok(out)
    }

    /// One job by id, or [`Error::JobNotFound`].
    pub fn job(&self, id: &str) -> Result<Job> {
        self.rdf().job(&self.job_node(id)?)
    }

    fn job_node(&self, id: &str) -> Result<JobNode> {
        self.rdf().job_node(id)?.ok_or_else(|| Error::JobNotFound {
            job: id.to_string(),
        })
    }

    /// Sets a running job's final status in one transaction; a job already ended is
    /// left alone.
    fn finish(&self, node: &JobNode, status: JobStatus, error: Option<&str>) -> Result<Job> {
        let mut tx = self.write()?;
        self.finish_in(&mut tx, node, status, error)?;
        tx.commit()?;
        self.rdf().job(node)
    }

    /// Adds the end of a running job to `tx`; nothing if it already ended.
    fn finish_in(
        &self,
        tx: &mut WriteTx<'_>,
        node: &JobNode,
        status: JobStatus,
        error: Option<&str>,
    ) -> Result<()> {
        if self.rdf().is_running(node)? {
            let (inserts, removes) = node.finish(status, error);
            tx.insert(inserts);
            tx.remove(removes);
        }
        Ok(())
    }

    /// Writes the fork, its generated turn and the job's completion in one transaction
    /// (unless the job was cancelled meanwhile).
    fn record_answer(
        &self,
        job: &Job,
        node: &JobNode,
        answer: &str,
        latency_ms: u64,
        flag: &AtomicBool,
    ) -> Result<Job> {
        let answer = Answer::read(Provider::Openai, answer, &job.model)?;
        let mut tx = self.write()?;
        if self.cancel_requested(&[&job.job], flag) {
            self.finish_in(&mut tx, node, JobStatus::Cancelled, None)?;
            tx.commit()?;
            return self.rdf().job(node);
        }
        // A continue whose session is still where the model answered it takes the
        // answer itself; anything else gets a fork at the job's point.
        let current = self.require(&job.session)?;
        let facts = if job.reason == CONTINUE && current.length == job.at {
            current
        } else {
            let options = ForkOptions {
                at: Some(job.at),
                reason: Some(job.reason.clone()),
                ..Default::default()
            };
            let (_, facts) = self.fork_in(&mut tx, &job.session, options)?;
            facts.expect("a fork that is not a dry run has facts")
        };
        self.append_in(&mut tx, &facts, answer.turn, |w, turn, _| {
            node.generated(w, turn)
        })?;
        tx.insert(node.answered(
            &facts.iri,
            latency_ms,
            answer.input_tokens,
            answer.output_tokens,
        ));
        self.finish_in(&mut tx, node, JobStatus::Complete, None)?;
        tx.commit()?;
        self.rdf().job(node)
    }
}
