//! Comparisons: arms from one fork point, their runs, a shared money cap, and figures
//! measured from what the runs committed.

use super::budget::Budget;
use super::divergence;
use super::provider::{self, is_loopback, tool_calls};
use super::run::{InFlight, Recording};
use super::{
    stats, Arm, ArmPlan, ArmReport, CallFigures, CallReport, CompareOptions, ComparePlan,
    Comparison, CostStatus, Figures, Settings, BASELINE, DEFAULT_MAX_CONTEXT_TOKENS,
    DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MAX_STEPS, PLAN_METHOD, RECORDING_MODEL,
};
use crate::engine::listing::{keyset, Page};
use crate::error::{Error, Result};
use crate::model::{
    Agent, ArmStatus, ComparisonStatus, ForkOptions, ModelCallInfo, Role, RunStatus, SessionId,
    SizeClass, Turn,
};
use crate::rdf::{self, instant, ComparisonRecord, RunRecord, StoredRun, WhatIfNode};
use crate::store::{micros, Store};
use serde_json::json;
use std::collections::HashSet;
use std::sync::Mutex;

/// The longest a step limit may be.
const MAX_STEPS_LIMIT: u64 = 10_000;
/// The most samples per arm.
const MAX_SAMPLES: u64 = 1_000;
/// The default wait for one answer, in seconds.
const DEFAULT_TIMEOUT_SECS: u64 = 300;

impl Store {
    /// Checks a comparison's options against `session` and resolves them.
    fn settings(&self, session: &SessionId, options: &CompareOptions) -> Result<Settings> {
        let at = options.at;
        self.answer_point(session, at)?;
        if options.arms.is_empty() {
            return Err(Error::InvalidInput(format!(
                "a comparison of session {session} needs at least one arm (--arm model=NAME)"
            )));
        }
        let max_steps = options.max_steps.unwrap_or(DEFAULT_MAX_STEPS);
        if !(1..=MAX_STEPS_LIMIT).contains(&max_steps) {
            return Err(Error::InvalidInput(format!(
                "max_steps {max_steps} is outside 1..={MAX_STEPS_LIMIT}"
            )));
        }
        if let Some(budget) = options.budget_usd {
            if !budget.is_finite() || budget < 0.0 {
                return Err(Error::InvalidInput(format!(
                    "budget_usd {budget} is not a positive amount of dollars"
                )));
            }
        }
        if options.parallel == Some(0) {
            return Err(Error::InvalidInput("parallel must be at least 1".into()));
        }
        let samples = options.samples.unwrap_or(1);
        if !(1..=MAX_SAMPLES).contains(&samples) {
            return Err(Error::InvalidInput(format!(
                "samples {samples} is outside 1..={MAX_SAMPLES}"
            )));
        }
        let context = self.load(session, Some(at - 1))?;
        let max_context_tokens = options
            .max_context_tokens
            .unwrap_or(DEFAULT_MAX_CONTEXT_TOKENS);
        let mut names = HashSet::new();
        let mut arms = Vec::new();
        for (n, arm) in options.arms.iter().enumerate() {
            arms.push(self.check_arm(session, options, &context, &mut names, n, arm)?);
        }
        let prices = options
            .prices
            .iter()
            .filter(|(model, _)| arms.iter().any(|a| &a.model == *model))
            .map(|(m, p)| (m.clone(), *p))
            .collect();
        Ok(Settings {
            at,
            arms,
            max_steps,
            prices,
            budget_usd: options.budget_usd,
            timeout_secs: options.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS),
            max_context_tokens,
            samples,
            experiment: options.experiment.clone(),
        })
    }

    /// Checks arm `n` of a comparison of `session` (whose context at K is `context`):
    /// its model, a unique name, where its endpoint is and what that requires, and the
    /// request it would send. Returns it named, its endpoint resolved.
    fn check_arm(
        &self,
        session: &SessionId,
        options: &CompareOptions,
        context: &[Turn],
        names: &mut HashSet<String>,
        n: usize,
        arm: &Arm,
    ) -> Result<Arm> {
        let at = options.at;
        let max_context_tokens = options
            .max_context_tokens
            .unwrap_or(DEFAULT_MAX_CONTEXT_TOKENS);
        let which = format!(
            "arm {} ({})",
            n + 1,
            arm.name.as_deref().unwrap_or(&arm.model)
        );
        let bad = |why: String| Error::InvalidInput(format!("{which}: {why}"));
        Agent::model(arm.model.clone()).map_err(|e| bad(e.to_string()))?;
        let mut arm = arm.clone();
        let endpoint = arm.resolved_endpoint();
        let name = match arm.name.take() {
            Some(name) => name,
            None => {
                let mut name = arm.model.clone();
                let mut k = 2;
                while names.contains(&name) || name == BASELINE {
                    name = format!("{}#{k}", arm.model);
                    k += 1;
                }
                name
            }
        };
        self.limits
            .check(session.as_str(), "arm name", SizeClass::Field, Some(&name))?;
        if name.trim().is_empty() || name == BASELINE || !names.insert(name.clone()) {
            return Err(bad(format!(
                "the name {name:?} is taken (arm names are unique, and {BASELINE:?} is the \
                 recording's)"
            )));
        }
        // A dry run sends nothing: it may show what an off-machine arm would cost
        // before a budget is chosen.
        if !is_loopback(&endpoint)? && !options.dry_run {
            if !options.allow_remote {
                return Err(bad(format!(
                    "endpoint {endpoint} is not on this machine: pass --allow-remote (and \
                     --budget-usd) to send session {session} there"
                )));
            }
            if options.budget_usd.is_none() {
                return Err(bad(format!(
                    "endpoint {endpoint} is off this machine: a money cap is required \
                     (--budget-usd)"
                )));
            }
            if !options.prices.contains_key(&arm.model) {
                return Err(bad(format!(
                    "endpoint {endpoint} is off this machine and model {} has no price: the \
                     budget cannot be kept without one (--price {}=IN/OUT)",
                    arm.model, arm.model
                )));
            }
        }
        let sampling = arm.sampling();
        let body =
            provider::request(arm.provider, context, &sampling).map_err(|e| bad(e.to_string()))?;
        let estimated = provider::estimate_tokens(&body);
        // An experiment's requests are its agent's own, not built from this context.
        if estimated > max_context_tokens && options.experiment.is_none() {
            return Err(bad(format!(
                "the context of session {session} up to index {at} is about {estimated} \
                 tokens, above the limit of {max_context_tokens}: raise \
                 --max-context-tokens or fork earlier"
            )));
        }
        arm.name = Some(name);
        arm.endpoint = Some(endpoint);
        Ok(arm)
    }

    /// What a comparison would cost, arm by arm, before anything is called or written.
    /// With `options.dry_run` (the CLI's `--dry-run`), off-machine arms are planned
    /// without `allow_remote`, a budget or a price (the plan sends nothing) and shown
    /// `remote`; without it, the plan is the step before running (the web UI's
    /// estimate), and is refused as the run would be.
    pub fn plan_comparison(
        &self,
        session: &SessionId,
        options: &CompareOptions,
    ) -> Result<ComparePlan> {
        let settings = self.settings(session, options)?;
        let at = settings.at;
        let turns = self.load(session, None)?;
        let after: Vec<&Turn> = turns.iter().filter(|t| t.index >= at).collect();
        let answers: Vec<&&Turn> = after.iter().filter(|t| t.role == Role::Assistant).collect();
        let steps = (answers.len() as u64).clamp(1, settings.max_steps);
        let mean_output = if answers.is_empty() {
            u64::from(DEFAULT_MAX_OUTPUT_TOKENS)
        } else {
            let chars: u64 = answers
                .iter()
                .map(|t| {
                    (t.content.chars().count() + t.tool_calls.as_deref().map_or(0, str::len)) as u64
                })
                .sum();
            (chars / answers.len() as u64).div_ceil(4).max(1)
        };
        let context = &turns[..at as usize];
        let mut arms = Vec::new();
        let mut total = 0.0;
        for arm in &settings.arms {
            let sampling = arm.sampling();
            let input =
                provider::estimate_tokens(&provider::request(arm.provider, context, &sampling)?);
            let output = arm
                .max_tokens
                .map_or(mean_output, |m| mean_output.min(u64::from(m)));
            let cost = settings
                .prices
                .get(&arm.model)
                .map(|p| p.cost(input * steps, output * steps, 0));
            total += cost.unwrap_or(0.0);
            let endpoint = arm.resolved_endpoint();
            arms.push(ArmPlan {
                name: arm.name.clone().unwrap_or_default(),
                provider: arm.provider,
                model: arm.model.clone(),
                remote: !is_loopback(&endpoint)?,
                endpoint,
                estimated_steps: steps,
                estimated_input_tokens_per_call: input,
                estimated_output_tokens_per_call: output,
                estimated_usd: cost,
            });
        }
        Ok(ComparePlan {
            session: session.clone(),
            at,
            max_steps: settings.max_steps,
            arms,
            estimated_usd: total,
            budget_usd: settings.budget_usd,
            estimate_method: PLAN_METHOD,
        })
    }

    /// Records a comparison (its forks and `running` runs) and returns it, or returns
    /// an identical earlier one (`reused: true`: same session, fork point, arms with
    /// their sampling and endpoints, and step limit) unless `options.again`. Run it with
    /// [`Store::run_comparison`].
    pub fn begin_comparison(
        &self,
        session: &SessionId,
        options: &CompareOptions,
    ) -> Result<Comparison> {
        let (id, reused) = self.begin(session, options)?;
        Ok(Comparison {
            reused,
            ..self.comparison(&id)?
        })
    }

    /// [`Store::begin_comparison`] without reading the comparison back: its id, and
    /// whether it is an earlier one reused.
    fn begin(&self, session: &SessionId, options: &CompareOptions) -> Result<(String, bool)> {
        if options.dry_run {
            return Err(Error::InvalidInput(
                "a dry run writes nothing: plan it with plan_comparison".into(),
            ));
        }
        let settings = self.settings(session, options)?;
        let mut key = json!([
            session.as_str(),
            settings.at,
            settings.arms,
            settings.max_steps
        ]);
        if settings.samples > 1 || settings.experiment.is_some() {
            key = json!([key, settings.samples, settings.experiment]);
        }
        let key = rdf::sha256_hex(&[key.to_string().as_bytes()]);
        let mut tx = self.write()?;
        if !options.again {
            if let Some(id) = self.comparison_of_key(&key)? {
                return Ok((id, true));
            }
        }
        let facts = self.require(session)?;
        let id = uuid::Uuid::now_v7().to_string();
        let request =
            serde_json::to_string(&settings).map_err(|e| Error::InvalidInput(e.to_string()))?;
        let (node, quads) = ComparisonRecord {
            id: &id,
            session: &facts,
            at: settings.at,
            key: &key,
            request: &request,
            max_steps: settings.max_steps,
            budget_usd: settings.budget_usd,
        }
        .quads(&self.iris);
        tx.insert(quads);
        // An experiment's baseline samples replay the whole recording: arm 0, forked
        // at its end.
        let baseline = settings
            .experiment
            .as_ref()
            .filter(|e| e.verify_baseline)
            .map(|_| Arm {
                name: Some(BASELINE.into()),
                model: RECORDING_MODEL.into(),
                ..Arm::default()
            });
        let arms = baseline
            .iter()
            .map(|a| (0, a, facts.length))
            .chain((settings.arms.iter().enumerate()).map(|(n, a)| (n as u64 + 1, a, settings.at)));
        for (arm_index, arm, at) in arms {
            for sample in 1..=settings.samples {
                let fork_options = ForkOptions {
                    at: Some(at),
                    reason: Some("what-if".into()),
                    ..Default::default()
                };
                let (_, fork) = self.fork_in(&mut tx, session, fork_options)?;
                let fork = fork.expect("a fork that is not a dry run has facts");
                let spec =
                    serde_json::to_string(arm).map_err(|e| Error::InvalidInput(e.to_string()))?;
                let (_, quads) = RunRecord {
                    id: &uuid::Uuid::now_v7().to_string(),
                    comparison: &node.iri,
                    session: &facts.iri,
                    fork: &fork,
                    arm_index,
                    sample,
                    name: arm.name.as_deref().unwrap_or(&arm.model),
                    spec: &spec,
                    model: &Agent::model(arm.model.clone())?,
                    provider: arm.provider.as_str(),
                    endpoint: &arm.resolved_endpoint(),
                }
                .quads(&self.iris);
                tx.insert(quads);
            }
        }
        tx.commit()?;
        Ok((id, false))
    }

    /// The latest comparison with request key `key` whose arms are all still there.
    fn comparison_of_key(&self, key: &str) -> Result<Option<String>> {
        let rdf = self.rdf();
        let mut found: Option<(Option<chrono::DateTime<chrono::FixedOffset>>, String)> = None;
        for node in rdf.comparisons_with_key(key)? {
            let stored = rdf.comparison(&node)?;
            let settings: Settings = match serde_json::from_str(&stored.request) {
                Ok(s) => s,
                Err(_) => continue,
            };
            if rdf.runs(&node)?.len() as u64 != settings.run_count() {
                continue; // An arm's fork was deleted since.
            }
            let when = instant(stored.created_at.as_deref());
            if found.as_ref().is_none_or(|(w, _)| when > *w) {
                found = Some((when, stored.id));
            }
        }
        Ok(found.map(|(_, id)| id))
    }

    /// Begins a comparison and runs it in this thread (`options.parallel` arms at once);
    /// returns it with its figures.
    pub fn compare(&self, session: &SessionId, options: &CompareOptions) -> Result<Comparison> {
        match self.begin(session, options)? {
            (id, true) => Ok(Comparison {
                reused: true,
                ..self.comparison(&id)?
            }),
            (id, false) => self.run_comparison(&id, options.parallel.unwrap_or(1)),
        }
    }

    /// Runs every `running` run of comparison `id` (or of the comparison run `id` is part
    /// of) to its end, `parallel` at a time, from what each committed: this is how a
    /// comparison whose process died resumes.
    pub fn run_comparison(&self, id: &str, parallel: usize) -> Result<Comparison> {
        let node = self.comparison_node(id)?;
        let rdf = self.rdf();
        let stored = rdf.comparison(&node)?;
        let settings = self.stored_settings(&node, &stored.request)?;
        if settings.experiment.is_some() {
            return Err(Error::InvalidInput(format!(
                "comparison {} is an experiment: run it with `forktrail jobs resume {}` (or \
                 Store::run_experiment)",
                stored.id, stored.id
            )));
        }
        let session = self.compared_session(&node)?;
        let runs = rdf.runs(&node)?;
        // Running it is asked for now: a cancel file an earlier canceller left behind
        // (one that gave up waiting) must not stop it at its first step.
        if let Some(path) = self.path() {
            let ids = std::iter::once(&stored.id).chain(runs.iter().map(|r| &r.id));
            for id in ids {
                let _ = std::fs::remove_file(Store::cancel_file(path, id));
            }
        }
        // Counted when no arm of it runs in this process: a reservation left on a run is
        // then a call a stopped process made, and is charged (the run charges it in the
        // store when it is taken).
        let budget = Budget::shared(&stored.id, settings.budget_usd, || {
            let mut charged = 0.0;
            for run in &runs {
                charged += run.lost_usd + run.reserved_usd.unwrap_or(0.0);
                charged += rdf
                    .calls(&run.node)?
                    .iter()
                    .map(|c| c.figures.charged_usd)
                    .sum::<f64>();
            }
            Ok(charged)
        })?;
        let recording = match Recording::new(self, &session, settings.at) {
            Ok(recording) => recording,
            Err(e) => {
                // Nothing can run without the recording: end the runs rather than leave
                // them running with no one taking them.
                let why = format!("the recording of session {session} cannot be read: {e}");
                for run in runs.iter().filter(|r| r.status == RunStatus::Running) {
                    self.end_run(&run.node, RunStatus::Failed, Some(&why), InFlight::Charged)?;
                }
                return Err(e);
            }
        };
        let todo: Mutex<Vec<&StoredRun>> = Mutex::new(
            runs.iter()
                .rev()
                .filter(|r| r.status == RunStatus::Running)
                .collect(),
        );
        let failure: Mutex<Option<Error>> = Mutex::new(None);
        std::thread::scope(|scope| {
            // No more threads than runs to take, whatever is asked.
            let workers = parallel.clamp(1, runs.len().max(1));
            for _ in 0..workers {
                scope.spawn(|| loop {
                    let Some(run) = todo.lock().unwrap_or_else(|e| e.into_inner()).pop() else {
                        break;
                    };
                    let Some(fork) = self.iris.session_id(run.node.graph.as_ref()) else {
                        continue;
                    };
                    if let Err(e) =
                        self.run_arm(&stored.id, run, &fork, &settings, &budget, &recording)
                    {
                        failure
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
                    }
                });
            }
        });
        if let Some(path) = self.path() {
            let _ = std::fs::remove_file(Store::cancel_file(path, &stored.id));
        }
        if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        self.comparison(&stored.id)
    }

    /// Stops a comparison's running runs (or one run): each ends `cancelled`, keeping
    /// the steps it committed. A run this process takes stops within 50 ms.
    pub fn cancel_comparison(&self, id: &str) -> Result<Comparison> {
        let (node, is_run) = self
            .rdf()
            .whatif_node(id)?
            .ok_or_else(|| Error::JobNotFound {
                job: id.to_string(),
            })?;
        let runs = if is_run {
            vec![self.rdf().run(&node)?]
        } else {
            self.rdf().runs(&node)?
        };
        for run in runs.iter().filter(|r| r.status == RunStatus::Running) {
            self.signal_cancel(&run.id);
            self.end_run(&run.node, RunStatus::Cancelled, None, InFlight::Charged)?;
        }
        self.comparison(id)
    }

    /// Whether `id` names a comparison or one of its runs.
    pub fn is_comparison(&self, id: &str) -> Result<bool> {
        Ok(self.rdf().whatif_node(id)?.is_some())
    }

    /// The settings comparison `id` (or the comparison run `id` is part of) was
    /// stored with.
    pub(crate) fn comparison_settings(&self, id: &str) -> Result<Settings> {
        let node = self.comparison_node(id)?;
        let stored = self.rdf().comparison(&node)?;
        self.stored_settings(&node, &stored.request)
    }

    /// The comparison node `id` names, directly or through one of its runs.
    pub(crate) fn comparison_node(&self, id: &str) -> Result<WhatIfNode> {
        let missing = || Error::JobNotFound {
            job: id.to_string(),
        };
        match self.rdf().whatif_node(id)? {
            Some((node, false)) => Ok(node),
            Some((run, true)) => self.rdf().comparison_of(&run)?.ok_or_else(missing),
            None => Err(missing()),
        }
    }

    fn stored_settings(&self, node: &WhatIfNode, request: &str) -> Result<Settings> {
        serde_json::from_str(request).map_err(|e| Error::Corrupt {
            session: node.graph.to_string(),
            detail: format!("comparison {} has settings that do not read: {e}", node.iri),
        })
    }

    fn compared_session(&self, node: &WhatIfNode) -> Result<SessionId> {
        self.iris
            .session_id(node.graph.as_ref())
            .ok_or_else(|| Error::Corrupt {
                session: node.graph.to_string(),
                detail: format!("comparison {} is not in a session graph", node.iri),
            })
    }

    /// Every comparison in the store, oldest first, with its figures.
    pub fn comparisons(&self) -> Result<Vec<Comparison>> {
        let mut out = Vec::new();
        for node in self.rdf().comparisons()? {
            let id = self.rdf().comparison(&node)?.id;
            out.push(self.comparison(&id)?);
        }
        out.sort_by_cached_key(|c| (instant(c.created_at.as_deref()), c.comparison.clone()));
        Ok(out)
    }

    /// Comparison `id` (or the one run `id` is part of): the baseline and every arm with
    /// its figures, measured from what is stored.
    pub fn comparison(&self, id: &str) -> Result<Comparison> {
        let node = self.comparison_node(id)?;
        let rdf = self.rdf();
        let stored = rdf.comparison(&node)?;
        let settings = self.stored_settings(&node, &stored.request)?;
        let session = self.compared_session(&node)?;
        let at = settings.at;
        let original = self.load(&session, None)?;
        let baseline = &original[(at as usize).min(original.len())..];
        let mut recorded = self.recorded_figures(baseline, &settings)?;
        self.add_recorded_calls(&session, at, &mut recorded)?;
        let mut arms = vec![ArmReport {
            name: BASELINE.into(),
            baseline: true,
            sample: None,
            outcome: None,
            run: None,
            session: Some(session.clone()),
            provider: None,
            model: None,
            endpoint: None,
            status: ArmStatus::Recorded,
            detail: None,
            figures: recorded.clone(),
            calls: Vec::new(),
            diff: Vec::new(),
        }];
        let mut charged = 0.0;
        let mut running = false;
        for run in rdf.runs(&node)? {
            running |= run.status == RunStatus::Running;
            charged += run.lost_usd;
            let report = if run.arm_index == 0 {
                // A baseline sample: the recording replayed, judged.
                ArmReport {
                    sample: Some(run.sample),
                    outcome: run.outcome.clone(),
                    run: Some(run.id.clone()),
                    status: ArmStatus::Run(run.status),
                    detail: run.detail.clone(),
                    ..arms[0].clone()
                }
            } else {
                self.arm_report(&run, &settings, baseline)?
            };
            charged += report
                .calls
                .iter()
                .map(|c| c.figures.charged_usd)
                .sum::<f64>();
            arms.push(report);
        }
        let stats = stats::of_arms(&arms);
        Ok(Comparison {
            comparison: stored.id,
            session,
            at,
            status: if running {
                ComparisonStatus::Running
            } else {
                ComparisonStatus::Ended
            },
            created_at: stored.created_at,
            max_steps: settings.max_steps,
            budget_usd: settings.budget_usd,
            charged_usd: charged,
            samples: settings.samples.max(1),
            experiment: settings.experiment.clone(),
            arms,
            stats,
            reused: false,
        })
    }

    /// Run `run` of a comparison as an arm: its fork's turns from the fork point, its
    /// calls and figures, and its turns against the recording's (`baseline`).
    fn arm_report(
        &self,
        run: &StoredRun,
        settings: &Settings,
        baseline: &[Turn],
    ) -> Result<ArmReport> {
        let at = settings.at;
        let arm: Arm = serde_json::from_str(&run.spec).unwrap_or_default();
        let fork = self.iris.session_id(run.node.graph.as_ref());
        let turns = match &fork {
            Some(fork) => self.load(fork, None)?,
            None => Vec::new(),
        };
        let own = &turns[(at as usize).min(turns.len())..];
        let calls: Vec<CallReport> = match (&settings.experiment, &fork) {
            // An experiment's calls are the agent's, recorded by the proxy in the fork.
            (Some(_), Some(fork)) => self.proxied_reports(fork)?,
            (Some(_), None) => Vec::new(),
            (None, _) => self
                .rdf()
                .calls(&run.node)?
                .into_iter()
                .map(|c| CallReport {
                    index: c.index,
                    figures: c.figures,
                })
                .collect(),
        };
        let mut figures = self.recorded_figures(own, settings)?;
        let sum = |f: fn(&CallReport) -> Option<u64>| calls.iter().map(f).sum::<Option<u64>>();
        figures.steps = calls.len() as u64;
        if settings.experiment.is_none() {
            figures.answered_from_recording =
                Some(own.iter().filter(|t| t.role == Role::Tool).count() as u64);
            figures.unanswered_tool_calls =
                Some(u64::from(run.status == RunStatus::UnansweredToolCall));
        }
        figures.input_tokens = sum(|c| c.figures.input_tokens);
        figures.output_tokens = sum(|c| c.figures.output_tokens);
        figures.cached_tokens = sum(|c| c.figures.cached_tokens);
        figures.latency_ms = Some(calls.iter().map(|c| c.figures.latency_ms).sum());
        figures.finish_reasons = calls
            .iter()
            .map(|c| {
                c.figures
                    .finish_reason
                    .clone()
                    .unwrap_or_else(|| "not reported".into())
            })
            .collect();
        (figures.cost, figures.cost_usd) = if !settings.prices.contains_key(&arm.model) {
            (CostStatus::Unpriced, None)
        } else {
            match calls
                .iter()
                .map(|c| c.figures.cost_usd)
                .sum::<Option<f64>>()
            {
                Some(cost) => (CostStatus::Priced, Some(cost)),
                None => (CostStatus::NotMeasured, None),
            }
        };
        figures.reached_end = matches!(run.status, RunStatus::Complete | RunStatus::Exited);
        let diff = divergence::diff(baseline, own, at)?;
        let parted = divergence::divergence(baseline, own, at)?;
        figures.first_divergence = parted.first;
        figures.first_text_divergence = parted.text;
        figures.first_tool_call_divergence = parted.tool_call;
        Ok(ArmReport {
            name: run.name.clone(),
            baseline: false,
            sample: (settings.samples > 1 || settings.experiment.is_some()).then_some(run.sample),
            outcome: run.outcome.clone(),
            run: Some(run.id.clone()),
            session: fork,
            provider: Some(arm.provider),
            endpoint: arm.endpoint.clone(),
            model: Some(arm.model),
            status: ArmStatus::Run(run.status),
            detail: run.detail.clone(),
            figures,
            calls,
            diff,
        })
    }

    /// The calls an experiment sample's agent made to its arm's model, as the proxy
    /// recorded them in the sample's fork.
    fn proxied_reports(&self, fork: &SessionId) -> Result<Vec<CallReport>> {
        Ok(self
            .model_calls(fork)?
            .into_iter()
            .map(|c| CallReport {
                index: c.answer_index.unwrap_or(c.request_turns),
                figures: CallFigures {
                    input_tokens: c.input_tokens,
                    output_tokens: c.output_tokens,
                    cached_tokens: c.cached_tokens,
                    latency_ms: c.latency_ms,
                    finish_reason: c.stop_reason,
                    charged_usd: c.cost_usd.unwrap_or(0.0),
                    cost_usd: c.cost_usd,
                },
            })
            .collect())
    }

    /// Adds to the recording's figures from `at` on what the model proxy recorded of
    /// their calls (tokens, latency, cost), when it recorded them.
    fn add_recorded_calls(
        &self,
        session: &SessionId,
        at: u64,
        figures: &mut Figures,
    ) -> Result<()> {
        let calls: Vec<ModelCallInfo> = self
            .chain_calls(session)?
            .into_iter()
            .filter(|c| c.answer_index.is_some_and(|i| i >= at))
            .collect();
        if calls.is_empty() {
            return Ok(());
        }
        let sum = |f: fn(&ModelCallInfo) -> Option<u64>| calls.iter().map(f).sum::<Option<u64>>();
        figures.input_tokens = sum(|c| c.input_tokens);
        figures.output_tokens = sum(|c| c.output_tokens);
        figures.cached_tokens = sum(|c| c.cached_tokens);
        figures.latency_ms = Some(calls.iter().map(|c| c.latency_ms).sum());
        if let Some(cost) = calls.iter().map(|c| c.cost_usd).sum::<Option<f64>>() {
            (figures.cost, figures.cost_usd) = (CostStatus::Priced, Some(cost));
        }
        Ok(())
    }

    /// The figures that read off turns alone (the baseline's whole figures).
    fn recorded_figures(&self, turns: &[Turn], settings: &Settings) -> Result<Figures> {
        let mut tool_names = Vec::new();
        let mut assistant_turns = 0;
        for turn in turns {
            if turn.role == Role::Assistant {
                assistant_turns += 1;
            }
            tool_names.extend(tool_calls(turn)?.into_iter().map(|c| c.name));
        }
        let priced = turns
            .iter()
            .filter_map(|t| t.model.as_ref())
            .any(|m| settings.prices.contains_key(m));
        Ok(Figures {
            turns: turns.len() as u64,
            steps: assistant_turns,
            assistant_turns,
            tool_calls: tool_names.len() as u64,
            tool_names,
            answered_from_recording: None,
            unanswered_tool_calls: None,
            input_tokens: None,
            output_tokens: None,
            cached_tokens: None,
            latency_ms: None,
            cost_usd: None,
            cost: if priced {
                CostStatus::NotMeasured
            } else {
                CostStatus::Unpriced
            },
            finish_reasons: Vec::new(),
            first_divergence: None,
            first_text_divergence: None,
            first_tool_call_divergence: None,
            reached_end: true,
        })
    }
}

impl Store {
    /// A page of comparisons with their figures, newest first (`limit` default 50, at
    /// most 1,000): only the comparisons on the page are measured.
    pub fn comparisons_page(
        &self,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<Page<Comparison>> {
        let rdf = self.rdf();
        let keyed = rdf
            .comparisons()?
            .iter()
            .map(|node| {
                let stored = rdf.comparison(node)?;
                Ok((
                    micros(stored.created_at.as_deref()),
                    stored.id.clone(),
                    stored.id,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let page = keyset(keyed, limit, cursor)?;
        Ok(Page {
            items: page
                .items
                .iter()
                .map(|id| self.comparison(id))
                .collect::<Result<_>>()?,
            total: page.total,
            next: page.next,
        })
    }
}
