//! What-if runs: ask "what would have happened otherwise?" of a recorded session.
//!
//! | file | what |
//! | --- | --- |
//! | `provider.rs` | the wire formats (OpenAI chat completions, Anthropic Messages), the HTTP call |
//! | `call.rs` | the model call, watched for cancellation; the jobs and runs this process runs |
//! | `regenerate.rs` | one answer at a fork point: a regeneration job |
//! | `budget.rs` | a comparison's money cap, shared by its arms |
//! | `run.rs` | a run: a regeneration that keeps going, tool calls answered from the recording |
//! | `recorded.rs` | a branch's open tool calls answered from the recording it was forked from, by the runs' matching |
//! | `compare.rs` | arms, a comparison, its figures, resume |
//! | `verdict.rs` | each arm against the baseline, and the arm that wins |
//! | `tools.rs` | the tools a recording's agent had, read back from its calls |
//! | `divergence.rs` | where an arm parts from the baseline: in anything, in text, in tool calls |
//!
//! A **comparison** forks the session at K once per arm and runs each arm: the model
//! answers the exact context; its tool calls are answered from the recording (never
//! executed); when it answers without tools, the next recorded user turn is fed; the run
//! ends when those are exhausted (`complete`), at the step limit, at the money cap, on
//! an error or on cancel. The original's own continuation is the **baseline** arm. Every
//! quad is built in `crate::rdf`.

mod budget;
mod call;
mod compare;
mod divergence;
mod figures;
mod provider;
mod recorded;
mod regenerate;
mod run;
mod stats;
mod tools;
pub(crate) mod verdict;

pub(crate) use budget::{Budget, Refused};
pub use figures::TurnFigures;
pub use provider::{
    Provider, ANTHROPIC_ENDPOINT, DEFAULT_ENDPOINT, DEFAULT_MAX_OUTPUT_TOKENS, OPENAI_API,
};
pub(crate) use recorded::open_calls;
pub use regenerate::{
    RegenerateOptions, RegeneratePlan, DEFAULT_MAX_CONTEXT_TOKENS, ESTIMATE_METHOD,
};
pub(crate) use run::InFlight;
pub use stats::{wilson_interval, ArmStats, Summary};
pub(crate) use tools::recorded_tools;
pub(crate) use Settings as ComparisonSettings;

use crate::error::{Error, Result};
pub use crate::model::CallFigures;
use crate::model::{ArmStatus, ComparisonStatus, ExperimentSpec, SampleOutcome, SessionId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The most model calls one arm makes unless `max_steps` says otherwise.
pub const DEFAULT_MAX_STEPS: u64 = 50;
/// The name of the arm that is the original's own continuation.
pub const BASELINE: &str = "baseline";

/// A comparison's settings as stored (`ft:requestBody`): what its runs, a resume and its
/// figures read back.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Settings {
    pub(crate) at: u64,
    /// Named, with their endpoints resolved.
    pub(crate) arms: Vec<Arm>,
    pub(crate) max_steps: u64,
    pub(crate) prices: BTreeMap<String, Price>,
    pub(crate) budget_usd: Option<f64>,
    pub(crate) timeout_secs: u64,
    pub(crate) max_context_tokens: u64,
    /// Runs per arm (0 as 1: comparisons stored before samples were).
    #[serde(default, skip_serializing_if = "is_one")]
    pub(crate) samples: u64,
    /// An experiment's agent, workspace and judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) experiment: Option<ExperimentSpec>,
}

fn is_one(n: &u64) -> bool {
    *n <= 1
}

impl Settings {
    /// How many runs the comparison has: a sample of each arm (and of the replayed
    /// baseline, when an experiment verifies it).
    pub(crate) fn run_count(&self) -> u64 {
        let baseline = self.experiment.as_ref().is_some_and(|e| e.verify_baseline);
        (self.arms.len() as u64 + u64::from(baseline)) * self.samples.max(1)
    }
}

/// The model an experiment's replayed baseline is recorded as running: the recording.
pub(crate) const RECORDING_MODEL: &str = "recording";

/// One arm of a comparison: a model, where it is served, and what is swapped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Arm {
    /// The arm's name in figures and columns (default: the model, made unique).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub model: String,
    pub provider: Provider,
    /// The base URL (default: the provider's, see [`Provider::default_endpoint`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Replaces the system message (or adds one first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The tools offered: OpenAI tool definitions (default: none offered, so the model
    /// answers in text; give the recording's tools to let it call them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

impl Arm {
    /// What this arm asks of the model: its model, system prompt, tools and sampling.
    pub(crate) fn sampling(&self) -> provider::Sampling<'_> {
        provider::Sampling {
            model: &self.model,
            system_prompt: self.system_prompt.as_deref(),
            tools: self.tools.as_ref(),
            max_tokens: self.max_tokens,
            temperature: self.temperature,
        }
    }

    /// Parses the CLI's `--arm` text: `key=value` pairs separated by commas, keys
    /// `model` (required), `name`, `provider` (openai, anthropic), `endpoint`,
    /// `temperature`, `max-tokens`, and `system-prompt` and `tools`, whose values are
    /// files, read with `read`.
    ///
    /// ```
    /// use forktrail::{Arm, Provider};
    /// let arm = Arm::parse("model=claude-x,provider=anthropic,temperature=0", |_| unreachable!())?;
    /// assert_eq!((arm.model.as_str(), arm.provider, arm.temperature), ("claude-x", Provider::Anthropic, Some(0.0)));
    /// assert!(Arm::parse("temperature=0", |_| unreachable!()).is_err());
    /// # Ok::<(), forktrail::Error>(())
    /// ```
    pub fn parse(
        text: &str,
        read: impl Fn(&str) -> std::result::Result<String, String>,
    ) -> Result<Self> {
        let bad = |why: String| Error::InvalidInput(format!("--arm {text:?}: {why}"));
        let mut arm = Arm::default();
        for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("{pair:?} is not key=value")))?;
            let (key, value) = (key.trim(), value.trim());
            match key {
                "model" => arm.model = value.to_string(),
                "name" => arm.name = Some(value.to_string()),
                "provider" => arm.provider = value.parse().map_err(|e| bad(format!("{e}")))?,
                "endpoint" => arm.endpoint = Some(value.to_string()),
                "temperature" => {
                    arm.temperature = Some(
                        value
                            .parse()
                            .map_err(|_| bad(format!("temperature {value:?} is not a number")))?,
                    )
                }
                "max-tokens" | "max_tokens" => {
                    arm.max_tokens =
                        Some(value.parse().map_err(|_| {
                            bad(format!("max-tokens {value:?} is not a whole number"))
                        })?)
                }
                "system-prompt" | "system_prompt" => {
                    arm.system_prompt = Some(read(value).map_err(bad)?)
                }
                "tools" => {
                    let text = read(value).map_err(bad)?;
                    arm.tools = Some(
                        serde_json::from_str(&text)
                            .map_err(|e| bad(format!("{value} is not JSON: {e}")))?,
                    );
                }
                other => {
                    return Err(bad(format!(
                        "unknown key {other:?} (expected model, name, provider, endpoint, \
                         system-prompt, tools, temperature, max-tokens)"
                    )))
                }
            }
        }
        if arm.model.is_empty() {
            return Err(bad("an arm needs a model (model=NAME)".into()));
        }
        Ok(arm)
    }

    /// The endpoint this arm calls, without a trailing slash.
    pub fn resolved_endpoint(&self) -> String {
        self.endpoint
            .clone()
            .unwrap_or_else(|| self.provider.default_endpoint())
            .trim_end_matches('/')
            .to_string()
    }
}

/// The endpoints a caller who is not the operator (a REST or MCP request) may have
/// forktrail call: the operator's `configured` ones (`--model-endpoint`), or, when none
/// is, each provider's default ([`Provider::default_endpoint`]). Without a trailing
/// slash.
pub fn offered_endpoints(configured: &[String]) -> Vec<String> {
    let list = match configured.is_empty() {
        false => configured.to_vec(),
        true => [Provider::Openai, Provider::Anthropic]
            .map(Provider::default_endpoint)
            .to_vec(),
    };
    list.into_iter()
        .map(|e| e.trim_end_matches('/').to_string())
        .collect()
}

/// Refuses the first endpoint of `asked` that `offered` does not hold
/// ([`Error::EndpointNotOffered`]).
pub fn check_offered(asked: &[String], offered: &[String]) -> Result<()> {
    for endpoint in asked {
        let endpoint = endpoint.trim_end_matches('/');
        if !offered.iter().any(|o| o == endpoint) {
            return Err(Error::EndpointNotOffered {
                endpoint: endpoint.to_string(),
                offered: offered.to_vec(),
            });
        }
    }
    Ok(())
}

/// What a model costs, in US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Prompt tokens read from a cache (default: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<f64>,
}

impl Price {
    /// Parses `MODEL=IN/OUT` or `MODEL=IN/OUT/CACHED` (dollars per million tokens).
    ///
    /// ```
    /// use forktrail::Price;
    /// let (model, price) = Price::parse("gpt-x=2.5/10")?;
    /// assert_eq!((model.as_str(), price.input, price.output, price.cached), ("gpt-x", 2.5, 10.0, None));
    /// assert!(Price::parse("gpt-x=free").is_err());
    /// # Ok::<(), forktrail::Error>(())
    /// ```
    pub fn parse(text: &str) -> Result<(String, Self)> {
        let bad = || {
            Error::InvalidInput(format!(
                "--price {text:?}: expected MODEL=IN/OUT or MODEL=IN/OUT/CACHED, in US dollars \
                 per million tokens"
            ))
        };
        let (model, rest) = text.rsplit_once('=').ok_or_else(bad)?;
        if model.trim().is_empty() {
            return Err(bad());
        }
        let price = Self::rates(rest).ok_or_else(bad)?;
        Ok((model.trim().to_string(), price))
    }

    /// `IN/OUT` or `IN/OUT/CACHED`, if that is what `rest` is.
    fn rates(rest: &str) -> Option<Self> {
        let numbers = rest
            .split('/')
            .map(|n| {
                n.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite() && *n >= 0.0)
            })
            .collect::<Option<Vec<f64>>>()?;
        match numbers[..] {
            [input, output] => Some(Price {
                input,
                output,
                cached: None,
            }),
            [input, output, cached] => Some(Price {
                input,
                output,
                cached: Some(cached),
            }),
            _ => None,
        }
    }

    /// The most a call can cost: every byte of its request an input token at the dearer
    /// of the input and cache prices (a token stands for at least one byte of the text
    /// it encodes, and the request's JSON holds the text and more), and `max_output`
    /// output tokens (sent as the call's `max_tokens`).
    ///
    /// ```
    /// use forktrail::Price;
    /// let price = Price { input: 1.0, output: 2.0, cached: None };
    /// assert_eq!(price.upper_bound(1_000_000, 500_000), 2.0);
    /// ```
    pub fn upper_bound(&self, request_bytes: u64, max_output: u32) -> f64 {
        let input = self.input.max(self.cached.unwrap_or(self.input));
        (request_bytes as f64 * input + f64::from(max_output) * self.output) / 1e6
    }

    /// The cost of a call, in dollars.
    pub fn cost(&self, input: u64, output: u64, cached: u64) -> f64 {
        let cached = cached.min(input);
        ((input - cached) as f64 * self.input
            + cached as f64 * self.cached.unwrap_or(self.input)
            + output as f64 * self.output)
            / 1e6
    }
}

/// Parses `IN/OUT` or `IN/OUT/CACHED` (dollars per million tokens): the price of one
/// model, as `regenerate --price` takes it.
///
/// ```
/// use forktrail::Price;
/// let price: Price = "3/15/0.3".parse()?;
/// assert_eq!((price.input, price.output, price.cached), (3.0, 15.0, Some(0.3)));
/// assert!("3".parse::<Price>().is_err());
/// # Ok::<(), forktrail::Error>(())
/// ```
impl std::str::FromStr for Price {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        Self::rates(text).ok_or_else(|| {
            Error::InvalidInput(format!(
                "price {text:?}: expected IN/OUT or IN/OUT/CACHED, in US dollars per million \
                 tokens"
            ))
        })
    }
}

/// Options of a comparison: the CLI's `compare` flags and the JSON body of
/// `POST /sessions/{id}/compare`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompareOptions {
    /// The fork point K: every arm sees turns 0..K-1 and answers turn K.
    pub at: u64,
    pub arms: Vec<Arm>,
    /// The most model calls per arm (default [`DEFAULT_MAX_STEPS`]).
    pub max_steps: Option<u64>,
    /// Prices by model (the model an arm asks for).
    pub prices: BTreeMap<String, Price>,
    /// The money cap for the whole comparison, in US dollars, shared by its arms (see
    /// [`Price::upper_bound`] for what a call reserves): required when an arm's
    /// endpoint is off this machine.
    pub budget_usd: Option<f64>,
    /// Allow endpoints off this machine.
    pub allow_remote: bool,
    /// Run anew even if an identical comparison exists.
    pub again: bool,
    /// How many arms run at once (default 1).
    pub parallel: Option<usize>,
    /// The longest wait for one answer, in seconds (default 300).
    pub timeout_secs: Option<u64>,
    /// Refuse contexts estimated above this many tokens (default 32768).
    pub max_context_tokens: Option<u64>,
    /// Return the plan (estimated cost per arm) and write nothing.
    pub dry_run: bool,
    /// Runs per arm, each its own fork (default 1): per-arm statistics over them.
    pub samples: Option<u64>,
    /// A live experiment's agent, workspace and judge (see `Store::begin_experiment`):
    /// never taken from a request body, since its commands run on this machine.
    #[serde(skip)]
    pub experiment: Option<ExperimentSpec>,
}

impl CompareOptions {
    /// The endpoint each arm calls, resolved as the comparison resolves it.
    pub fn endpoints(&self) -> Vec<String> {
        self.arms.iter().map(Arm::resolved_endpoint).collect()
    }
}

/// One call of an arm, by the index of the turn it generated.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallReport {
    pub index: u64,
    #[serde(flatten)]
    pub figures: CallFigures,
}

/// Whether an arm's cost could be computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CostStatus {
    /// Computed from the given prices and the measured tokens.
    Priced,
    /// No price was given for the arm's model.
    Unpriced,
    /// Priced, but some call's tokens were not reported.
    NotMeasured,
}

/// The figures of one arm, measured (never invented: `None` where nothing was
/// reported).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Figures {
    /// Turns after the fork point.
    pub turns: u64,
    /// Model calls (for the baseline: its assistant turns).
    pub steps: u64,
    pub assistant_turns: u64,
    pub tool_calls: u64,
    /// The tools called, in order.
    pub tool_names: Vec<String>,
    /// Tool calls answered from the recording (`None` for the baseline).
    pub answered_from_recording: Option<u64>,
    /// Tool calls the recording could not answer (`None` for the baseline).
    pub unanswered_tool_calls: Option<u64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    /// The latency of every call, summed.
    pub latency_ms: Option<u64>,
    pub cost_usd: Option<f64>,
    pub cost: CostStatus,
    pub finish_reasons: Vec<String>,
    /// The first index (at or after the fork point) where this arm's turn and the
    /// baseline's differ: another role, kind or content, other tool calls (names and
    /// canonical arguments; a call's id is the model's own), or one side ending. `None`: no divergence (always so for
    /// the baseline itself).
    pub first_divergence: Option<u64>,
    /// The first index (at or after the fork point) where this arm's turn and the
    /// baseline's differ in role or text, or one side has ended: what the model said,
    /// whatever it called.
    pub first_text_divergence: Option<u64>,
    /// The turn holding the arm's first tool call that is not the baseline's, the calls
    /// taken in order over the run (names and canonical arguments): the baseline's turn
    /// when the arm made fewer calls. Other words around the recorded call leave it
    /// `None`.
    pub first_tool_call_divergence: Option<u64>,
    /// Whether the arm got through every recorded user turn after the fork point.
    pub reached_end: bool,
}

/// One turn in a turn-aligned diff.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    pub role: String,
    pub kind: String,
    pub content: String,
    /// The calls this turn makes, as `name(canonical arguments)`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<String>,
}

/// One index of an arm against the baseline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiffRow {
    pub index: u64,
    pub same: bool,
    pub baseline: Option<Cell>,
    pub arm: Option<Cell>,
}

/// One arm of a comparison (one sample of it, when it has several) and its figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArmReport {
    pub name: String,
    pub baseline: bool,
    /// Which sample of the arm (1-based) this run is; `None` for the recording itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<u64>,
    /// How an experiment's sample ended and what its verify command judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<SampleOutcome>,
    /// The run's job id (`None` for the baseline).
    pub run: Option<String>,
    /// The session holding the arm's turns: the compared session for the baseline.
    pub session: Option<SessionId>,
    pub provider: Option<Provider>,
    pub model: Option<String>,
    pub endpoint: Option<String>,
    /// `recorded` for the baseline, else the run's status.
    pub status: ArmStatus,
    /// Why a run stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub figures: Figures,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallReport>,
    /// The arm's turns against the baseline's, index by index from the fork point.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diff: Vec<DiffRow>,
}

/// A comparison: its arms (the baseline first) and their figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub comparison: String,
    pub session: SessionId,
    pub at: u64,
    /// `running` while any run is, else `ended`.
    pub status: ComparisonStatus,
    pub created_at: Option<String>,
    pub max_steps: u64,
    pub budget_usd: Option<f64>,
    /// What the budget counted so far, over every arm.
    pub charged_usd: f64,
    /// Runs per arm.
    pub samples: u64,
    /// For a live experiment: its agent, workspace and judge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiment: Option<ExperimentSpec>,
    /// The baseline first, then each arm (a sample per entry).
    pub arms: Vec<ArmReport>,
    /// Each arm over its samples: pass rate and interval, and each figure's mean,
    /// median and interval.
    pub stats: Vec<ArmStats>,
    /// True when an identical earlier comparison is returned instead of a new one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

/// What one arm of a comparison would cost, before anything is called.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArmPlan {
    pub name: String,
    pub provider: Provider,
    pub model: String,
    pub endpoint: String,
    /// Whether the endpoint is off this machine.
    pub remote: bool,
    /// The recorded assistant turns after K (at least one), capped by the step limit.
    pub estimated_steps: u64,
    pub estimated_input_tokens_per_call: u64,
    pub estimated_output_tokens_per_call: u64,
    /// `None`: unpriced.
    pub estimated_usd: Option<f64>,
}

/// A comparison's plan (`dry_run`): every arm's estimated cost and the total.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComparePlan {
    pub session: SessionId,
    pub at: u64,
    pub max_steps: u64,
    pub arms: Vec<ArmPlan>,
    /// The sum over priced arms.
    pub estimated_usd: f64,
    pub budget_usd: Option<f64>,
    pub estimate_method: &'static str,
}

/// How a plan estimates.
pub const PLAN_METHOD: &str = "input: the request at K in characters / 4, for every step; \
output: the recorded assistant turns' mean length in characters / 4; steps: the recorded \
assistant turns after K";
