//! One call of a sample's agent: matched on its conversation (its turns, as digests)
//! against the sample's script (the recording up to K, then the sample's committed
//! steps) and answered from it when the answer is there; else sent to the arm's model,
//! under the money cap, and recorded in the sample's fork.

use super::gateway::Incoming;
use super::sample::{Experiment, Sample};
use crate::error::Result;
use crate::model::{Api, Drift, ModelCallInfo, OnDrift, Role, RunStatus, Turn};
use crate::proxy::routes::{recorded, relay, Ended, Outgoing};
use crate::proxy::wire::{self, replayed::Replayed};
use crate::proxy::{forward, Capture, Hint};
use crate::whatif::{Price, Refused, DEFAULT_MAX_OUTPUT_TOKENS};
use serde_json::Value;
use std::time::Instant;

/// An excerpt of a turn, to say what differed.
fn shown(turn: Option<(&str, &str)>) -> String {
    match turn {
        Some((role, content)) => {
            let text: String = content.chars().take(160).collect();
            let more = if content.chars().count() > 160 {
                "…"
            } else {
                ""
            };
            format!("{role}: {text:?}{more}")
        }
        None => "nothing".into(),
    }
}

impl Experiment<'_> {
    /// Answers `call` of `sample`'s agent.
    pub(super) fn answer(&self, sample: &mut Sample<'_>, call: Incoming) -> Result<()> {
        let Some(api) = recorded(call.kind, &call.method, &call.rest) else {
            return self.pass_through(sample, call);
        };
        sample.calls += 1;
        // The agent's key goes to the arm's endpoint and nowhere else.
        for name in ["x-api-key", "authorization"] {
            if let Some(v) = call.headers.get(name).and_then(|v| v.to_str().ok()) {
                crate::secrets::hold(
                    v.trim_start_matches("Bearer ")
                        .trim_start_matches("bearer "),
                );
            }
        }
        let (conversation, _) = match wire::read_request(api, &call.body) {
            Ok(read) => read,
            Err(why) => {
                call.refuse(
                    400,
                    &format!("forktrail cannot read this {api} request: {why}"),
                );
                return Ok(());
            }
        };
        let mut prev = String::new();
        let digests: Vec<String> = (conversation.turns.iter().enumerate())
            .map(|(i, t)| {
                prev = crate::rdf::turn_digest(&prev, i as u64, t);
                prev.clone()
            })
            .collect();
        let n = digests.len();
        let script = &sample.script;
        let same = (digests.iter().zip(script))
            .take_while(|(d, t)| **d == t.digest)
            .count();
        if same < n && same < script.len() {
            // The conversation left the script: before K, the environment drifted.
            let drift = Drift {
                call: sample.calls,
                index: same as u64,
                detail: format!(
                    "recorded {}; now {}",
                    shown(
                        script
                            .get(same)
                            .map(|t| (t.role.as_str(), t.content.as_str()))
                    ),
                    shown(
                        (conversation.turns.get(same))
                            .map(|t| (t.role.as_str(), t.content.as_str()))
                    ),
                ),
            };
            let why = format!(
                "the environment diverged from the recording at call {} (turn {}): {}",
                drift.call, drift.index, drift.detail
            );
            sample.drift.get_or_insert(drift);
            if self.spec.on_drift == OnDrift::Stop || same as u64 >= sample.at {
                call.refuse(409, &format!("forktrail experiment: {why}"));
                sample.stop = Some((RunStatus::Drifted, why));
                return Ok(());
            }
        }
        if n < script.len() {
            return self.replay(sample, call, api, n);
        }
        if sample.replay_only {
            let why = format!(
                "the recording ends at turn {}: the replayed agent asked for more",
                script.len()
            );
            call.refuse(409, &format!("forktrail experiment: {why}"));
            return Ok(());
        }
        self.live(sample, call, api)
    }

    /// Answers the call for turn `n` from the script.
    fn replay(&self, sample: &mut Sample<'_>, call: Incoming, api: Api, n: usize) -> Result<()> {
        let turn: &Turn = &sample.script[n];
        if turn.role != Role::Assistant {
            let why = format!(
                "the agent asked for an answer at turn {n}, where the recording holds a {} turn",
                turn.role.as_str()
            );
            call.refuse(409, &format!("forktrail experiment: {why}"));
            sample.stop = Some((RunStatus::Drifted, why));
            return Ok(());
        }
        let payload: Value = match turn.payload.as_deref().map(serde_json::from_str) {
            Some(Ok(v)) => v,
            _ => {
                let why = format!("turn {n} of the recording has no message to give again");
                call.refuse(409, &format!("forktrail experiment: {why}"));
                sample.stop = Some((RunStatus::Failed, why));
                return Ok(());
            }
        };
        let fork_calls;
        let recorded: &[ModelCallInfo] = if (n as u64) < sample.at {
            &self.recorded
        } else {
            fork_calls = self.store.model_calls(&sample.fork)?;
            &fork_calls
        };
        let info = recorded.iter().find(|c| c.answer_index == Some(n as u64));
        let usage = wire::Usage {
            input: info.and_then(|c| c.input_tokens),
            output: info.and_then(|c| c.output_tokens),
            cached: info.and_then(|c| c.cached_tokens),
        };
        let body: Value = serde_json::from_slice(&call.body).unwrap_or_default();
        let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
        let asked = body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("recorded");
        let id = format!("msg_forktrail_{n}");
        let (kind, bytes) = Replayed {
            payload: &payload,
            model: turn.model.as_deref().unwrap_or(asked),
            stop_reason: info.and_then(|c| c.stop_reason.as_deref()),
            usage: &usage,
            id: &id,
        }
        .body(api, stream);
        sample.replayed += 1;
        call.give(kind, bytes);
        Ok(())
    }

    /// A call the experiment does not record (`count_tokens`, `/v1/models`): sent on to
    /// the arm's endpoint as it is; refused for a replayed baseline, which has none.
    fn pass_through(&self, sample: &mut Sample<'_>, call: Incoming) -> Result<()> {
        if sample.replay_only {
            let why = format!(
                "{} is not answered by a replay of the recording (it has no model endpoint)",
                call.rest
            );
            call.refuse(404, &why);
            return Ok(());
        }
        let url = forward::target(
            &sample.arm.resolved_endpoint(),
            &call.rest,
            call.query.as_deref(),
        );
        let outgoing = Outgoing {
            method: call.method.as_str().to_string(),
            url,
            headers: forwarded(&call.headers),
            body: call.body,
        };
        relay(
            &self.agent,
            &outgoing,
            None,
            None,
            None::<fn(Ended)>,
            call.head,
            call.chunks,
        );
        Ok(())
    }

    /// Sends the call to the arm's model (as the arm's model), under the money cap, and
    /// records it in the sample's fork before its answer's last bytes go out.
    fn live(&self, sample: &mut Sample<'_>, call: Incoming, api: Api) -> Result<()> {
        let store = self.store;
        if sample.live >= self.settings.max_steps {
            let why = format!("took its {} steps (--max-steps)", self.settings.max_steps);
            call.refuse(429, &format!("forktrail experiment: the sample {why}"));
            sample.stop = Some((RunStatus::MaxSteps, why));
            return Ok(());
        }
        let (bytes, max_output) = as_arm(&call.body, &sample.arm, api);
        let price: Option<Price> = self.settings.prices.get(&sample.arm.model).copied();
        let upper = price
            .filter(|_| self.settings.budget_usd.is_some())
            .map(|p| p.upper_bound(bytes.len() as u64, max_output));
        if let Some(upper) = upper {
            let ids = [sample.run.id.as_str(), self.id.as_str()];
            let stop = || store.cancel_requested(&ids, sample.flag);
            match self.budget.reserve(upper, stop) {
                Ok(()) => {}
                Err(Refused::Exhausted(why)) => {
                    call.refuse(429, &format!("forktrail experiment: the money cap: {why}"));
                    sample.stop = Some((RunStatus::BudgetExhausted, why));
                    return Ok(());
                }
                Err(Refused::Stopped) => {
                    call.refuse(503, "forktrail experiment: cancelled");
                    sample.stop = Some((RunStatus::Cancelled, "cancelled".into()));
                    return Ok(());
                }
            }
            // Written before the call: a process that dies during it leaves it charged.
            if !store.hold(&sample.run.node, upper)? {
                self.budget.settle(Some(upper), 0.0);
                call.refuse(503, "forktrail experiment: the sample has ended");
                return Ok(());
            }
        }
        let outgoing = Outgoing {
            method: call.method.as_str().to_string(),
            url: forward::target(
                &sample.arm.resolved_endpoint(),
                &call.rest,
                call.query.as_deref(),
            ),
            headers: forwarded(&call.headers),
            body: bytes.clone().into(),
        };
        let started = Instant::now();
        let mut recorded: Option<Result<()>> = None;
        let fork = sample.fork.clone();
        let node = sample.run.node.clone();
        let model = sample.arm.model.clone();
        let on_end = |ended: Ended| {
            let info = ModelCallInfo {
                started_at: Some(
                    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                ),
                ..ModelCallInfo::blank(uuid::Uuid::now_v7().to_string(), api, fork.clone())
            };
            let billed = ended.status.is_some_and(|s| s < 400) || ended.status.is_none();
            let mut capture = Capture {
                request: bytes.clone(),
                hint: Hint::default(),
                ..ended.capture(info, started, &self.settings.prices)
            };
            if capture.info.cost_usd.is_none() {
                if let (Some(p), Some(i), Some(o)) =
                    (price, capture.info.input_tokens, capture.info.output_tokens)
                {
                    capture.info.cost_usd =
                        Some(p.cost(i, o, capture.info.cached_tokens.unwrap_or(0)));
                }
            }
            if let Some(turn) = capture.reply_turn.as_mut() {
                turn.model.get_or_insert_with(|| model.clone());
            }
            capture.info.model.get_or_insert_with(|| model.clone());
            let cost = capture.info.cost_usd;
            // Its charge replaces its reservation in the same transaction; a call that
            // may have been billed and reported nothing is charged its upper bound.
            let lost = upper.filter(|_| cost.is_none() && billed);
            let money = match (upper, lost) {
                (None, _) => Ok((Vec::new(), Vec::new())),
                (Some(_), Some(_)) => store.rdf().charge_reservation(&node),
                (Some(_), None) => store
                    .rdf()
                    .release_reservation(&node)
                    .map(|r| (Vec::new(), r)),
            };
            recorded =
                Some(money.and_then(|money| store.capture_into(&fork, capture, money).map(|_| ())));
            if let Some(upper) = upper {
                self.budget
                    .settle(Some(upper), lost.or(cost).unwrap_or(0.0));
            }
        };
        relay(
            &self.agent,
            &outgoing,
            Some(api),
            Some(started),
            Some(on_end),
            call.head,
            call.chunks,
        );
        sample.live += 1;
        if let Some(result) = recorded {
            result?;
        }
        sample.script = store.load(&sample.fork, None)?;
        Ok(())
    }
}

/// The headers sent on: the client's, less hop-by-hop ones and forktrail's own.
fn forwarded(headers: &axum::http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| forward::passes(name.as_str()))
        .filter_map(|(name, value)| {
            Some((name.as_str().to_string(), value.to_str().ok()?.to_string()))
        })
        .collect()
}

/// The request as the arm sends it: the arm's model, and its sampling where it sets
/// it, the rest the agent's; its bytes and the most output tokens it may bring.
fn as_arm(request: &[u8], arm: &crate::whatif::Arm, api: Api) -> (Vec<u8>, u32) {
    let mut body: Value = serde_json::from_slice(request).unwrap_or_default();
    body["model"] = Value::String(arm.model.clone());
    if let Some(t) = arm.temperature {
        body["temperature"] = Value::from(t);
    }
    if let Some(n) = arm.max_tokens {
        let key = limit_key(&body, api);
        body[key] = Value::from(n);
    }
    let max_output = output_limit(&mut body, api);
    (body.to_string().into_bytes(), max_output)
}

/// The field of `body` that limits its answer's tokens in `api`.
fn limit_key(body: &Value, api: Api) -> &'static str {
    match api {
        Api::AnthropicMessages => "max_tokens",
        Api::OpenaiChat if body.get("max_completion_tokens").is_some() => "max_completion_tokens",
        Api::OpenaiChat => "max_tokens",
        Api::OpenaiResponses => "max_output_tokens",
    }
}

/// The most output tokens the call may bring: its own limit, or the default one set
/// in it (a call with no limit has no upper bound to reserve).
fn output_limit(body: &mut Value, api: Api) -> u32 {
    let key = limit_key(body, api);
    match body.get(key).and_then(Value::as_u64) {
        Some(n) => u32::try_from(n).unwrap_or(u32::MAX),
        None => {
            body[key] = Value::from(DEFAULT_MAX_OUTPUT_TOKENS);
            DEFAULT_MAX_OUTPUT_TOKENS
        }
    }
}
