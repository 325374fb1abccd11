//! What-if comparisons: `compare`, `comparisons`. `jobs show`, `jobs cancel` and
//! `jobs resume` take comparison and run ids too (see `jobs.rs`).

use super::{emit, figures, print_json, spawn_worker, CliResult, Out, Target};
use clap::Args;
use forktrail::{
    Arm, CompareOptions, Comparison, ExperimentSpec, Price, Sandbox, SessionId, Store,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub(super) struct CompareArgs {
    /// The session whose recording is replayed.
    session: SessionId,
    /// The fork point K: every arm sees turns 0..K-1 and answers turn K; the recorded
    /// turns from K on are the baseline.
    #[arg(long, value_name = "K")]
    at: u64,
    #[command(flatten)]
    arms: ArmFlags,
    /// The longest wait for one answer, in seconds (default 300).
    #[arg(long = "timeout", value_name = "SECONDS")]
    timeout_secs: Option<u64>,
    /// Refuse contexts estimated above this many tokens (characters / 4; default
    /// 32768).
    #[arg(long, value_name = "N")]
    max_context_tokens: Option<u64>,
    /// Print each arm's estimated steps, tokens and cost, the total and the budget;
    /// call nothing and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the comparison (or, with --dry-run, the plan) as JSON.
    #[arg(long)]
    json: bool,
    /// Print the comparison id at once; a worker process runs the arms (the store is
    /// in use until it ends). Follow it with `forktrail jobs show ID`, stop it with
    /// `forktrail jobs cancel ID`.
    #[arg(long, conflicts_with = "dry_run")]
    background: bool,
}

/// The flags a comparison and an experiment share: arms, prices, the money cap, steps,
/// samples.
#[derive(Args)]
pub(super) struct ArmFlags {
    /// One arm, as key=value pairs separated by commas: model (required), name,
    /// provider (openai or anthropic), endpoint, temperature, max-tokens, and
    /// system-prompt=FILE and tools=FILE (a JSON array of OpenAI tool definitions;
    /// without it no tools are offered). Repeat for more arms.
    #[arg(long = "arm", value_name = "SPEC", value_parser = parse_arm)]
    arms: Vec<Arm>,
    /// A JSON file holding an array of arms ({"model", "name", "provider", "endpoint",
    /// "system_prompt" (the text itself), "tools", "temperature", "max_tokens"}), run
    /// after the --arm ones.
    #[arg(long = "arms", value_name = "FILE")]
    arms_file: Option<PathBuf>,
    /// A model's price in US dollars per million tokens (input, output, and cached
    /// input, which defaults to the input price). Repeatable; wins over --prices.
    #[arg(long = "price", value_name = "MODEL=IN/OUT[/CACHED]", value_parser = parse_price)]
    prices: Vec<(String, Price)>,
    /// A JSON file of prices by model: {"MODEL": {"input": 3, "output": 15, "cached": 0.3}}
    /// (US dollars per million tokens).
    #[arg(long = "prices", value_name = "FILE")]
    prices_file: Option<PathBuf>,
    /// The money cap of the whole comparison, in US dollars, shared by its arms: a call
    /// is made only if its upper bound (its request's bytes as input tokens, plus
    /// max-tokens) fits beside what is charged and reserved; an arm waits while others
    /// hold reservations, and stops budget_exhausted when nothing held could free
    /// enough. Required with an endpoint off this machine.
    #[arg(long, value_name = "USD")]
    budget_usd: Option<f64>,
    /// Allow arms whose endpoint is off this machine (the session's context is sent
    /// there); each needs a --price and the comparison a --budget-usd.
    #[arg(long)]
    allow_remote: bool,
    /// The most model calls per arm, or per sample with --samples (default 50); a run
    /// that needs more stops max_steps.
    #[arg(long, value_name = "N")]
    max_steps: Option<u64>,
    /// How many arms (or samples: each sample of an arm is a run of its own) run at once
    /// (default 1).
    #[arg(long, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    parallel: Option<usize>,
    /// Runs per arm, each its own fork (default 1); the figures are then given per
    /// arm over its samples: mean, median and 95 % interval.
    #[arg(long, value_name = "N")]
    samples: Option<u64>,
    /// Run anew even if an identical comparison (same session, fork point, arms, step
    /// limit and samples) exists; without it that one is printed and no model is called.
    #[arg(long)]
    again: bool,
}

impl ArmFlags {
    /// The comparison's options these flags give.
    pub(super) fn options(&self, at: u64) -> Result<CompareOptions, Box<dyn std::error::Error>> {
        let mut arms = self.arms.clone();
        if let Some(file) = &self.arms_file {
            arms.extend(json_file::<Vec<Arm>>(file, "--arms")?);
        }
        let mut prices: BTreeMap<String, Price> = match &self.prices_file {
            Some(file) => json_file(file, "--prices")?,
            None => BTreeMap::new(),
        };
        prices.extend(self.prices.iter().cloned());
        Ok(CompareOptions {
            at,
            arms,
            max_steps: self.max_steps,
            prices,
            budget_usd: self.budget_usd,
            allow_remote: self.allow_remote,
            again: self.again,
            parallel: self.parallel,
            samples: self.samples,
            ..CompareOptions::default()
        })
    }

    pub(super) fn parallel(&self) -> usize {
        self.parallel.unwrap_or(1)
    }
}

fn parse_arm(text: &str) -> Result<Arm, String> {
    Arm::parse(text, |file| {
        std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))
    })
    .map_err(|e| e.to_string())
}

fn parse_price(text: &str) -> Result<(String, Price), String> {
    Price::parse(text).map_err(|e| e.to_string())
}

/// Reads a JSON file of the given shape, naming the file and the flag on failure.
fn json_file<T: serde::de::DeserializeOwned>(
    file: &Path,
    flag: &str,
) -> Result<T, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("{flag} {}: cannot read it: {e}", file.display()))?;
    Ok(serde_json::from_str(&text)
        .map_err(|e| format!("{flag} {}: not what {flag} takes: {e}", file.display()))?)
}

impl CompareArgs {
    fn options(&self) -> Result<CompareOptions, Box<dyn std::error::Error>> {
        Ok(CompareOptions {
            timeout_secs: self.timeout_secs,
            max_context_tokens: self.max_context_tokens,
            dry_run: self.dry_run,
            ..self.arms.options(self.at)?
        })
    }

    pub(super) fn run(self, out: Out, store: Store, path: &Target) -> CliResult {
        let options = self.options()?;
        if self.dry_run {
            let plan = store.plan_comparison(&self.session, &options)?;
            return emit(out, self.json, &plan, figures::compare_plan);
        }
        let begun = store.begin_comparison(&self.session, &options)?;
        if begun.reused {
            if begun.status == forktrail::ComparisonStatus::Running && !self.json {
                eprintln!(
                    "comparison {id} is still running, or the process running it stopped: \
                     resume it with `forktrail jobs resume {id}`",
                    id = begun.comparison
                );
            }
            return emit(out, self.json, &begun, figures::comparison);
        }
        let id = begun.comparison.clone();
        if !self.json {
            // Before any call, so that whoever stops this process can resume it.
            eprintln!(
                "comparison {id} begun (session {} from index {}); if this process stops, \
                 resume it with `forktrail jobs resume {id}`",
                begun.session, begun.at
            );
            eprintln!("{}", never_executed(&begun));
        }
        let parallel = self.arms.parallel();
        if self.background {
            let runs = super::render::count(begun.arms.len() as u64 - 1, "arm", "arms");
            return in_background(out, self.json, store, path, &begun, parallel, &runs);
        }
        let done = store.run_comparison(&id, parallel)?;
        emit(out, self.json, &done, figures::comparison)
    }
}

/// Hands comparison (or experiment) `begun` to a worker process (`jobs resume`, which
/// needs the store this process holds) and says how to follow it; `what` says what runs.
pub(super) fn in_background(
    out: Out,
    json: bool,
    store: Store,
    path: &Target,
    begun: &Comparison,
    parallel: usize,
    what: &str,
) -> CliResult {
    drop(store);
    let id = &begun.comparison;
    spawn_worker(
        path,
        &["jobs", "resume", id, "--parallel", &parallel.to_string()],
    )?;
    let kind = match begun.experiment {
        Some(_) => "experiment",
        None => "comparison",
    };
    emit(out, json, begun, |out, c| {
        writeln!(
            out,
            "{kind} {} running in the background ({what})",
            c.comparison
        )?;
        writeln!(
            out,
            "follow it with `forktrail jobs show {id}`, stop it with `forktrail jobs cancel \
             {id}`",
            id = c.comparison
        )
    })
}

/// The warning printed before a comparison runs: no tool is ever run on its behalf.
fn never_executed(c: &Comparison) -> String {
    format!(
        "TOOLS ARE NEVER EXECUTED: every tool call an arm makes is answered from the \
         recording of session {} (the same tool with the same arguments), or the arm stops \
         unanswered_tool_call",
        c.session
    )
}

#[derive(Args)]
pub(super) struct ComparisonsArgs {
    /// Print the comparisons, with every figure, as a JSON array.
    #[arg(long)]
    json: bool,
}

impl ComparisonsArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        emit(out, self.json, &store.comparisons()?, |out, c| {
            figures::comparisons(out, c)
        })
    }
}

/// `jobs resume` of a comparison or one of its runs: runs what is still running, from
/// what each run committed, and prints the comparison.
pub(super) fn resume(out: Out, store: &Store, id: &str, parallel: usize, json: bool) -> CliResult {
    let comparison = store.comparison(id)?;
    if comparison.status == forktrail::ComparisonStatus::Running
        && !json
        && comparison.experiment.is_none()
    {
        eprintln!(
            "resuming comparison {}: {}",
            comparison.comparison,
            never_executed(&comparison)
        );
    }
    let done = match &comparison.experiment {
        Some(spec) => {
            warn_unsandboxed(spec);
            store.run_experiment(id, parallel)?
        }
        None => store.run_comparison(id, parallel)?,
    };
    if json {
        print_json(out, &done)
    } else {
        Ok(figures::comparison(out, &done)?)
    }
}

/// The warning an experiment without a sandbox gets before its agent runs.
pub(super) fn warn_unsandboxed(spec: &ExperimentSpec) {
    if spec.sandbox == Sandbox::None {
        eprintln!(
            "WARNING: NO SANDBOX. The agent ({}) runs with YOUR rights: every tool it calls \
             (shell commands, file writes) can reach anything you can, not only its \
             workspace copy. Use --sandbox bwrap to confine it.",
            spec.agent
        );
    }
}
