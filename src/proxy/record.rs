//! A proxied call recorded: which session its conversation belongs to, found by the
//! digest chain (extend it, fork it at the divergence, or start a root), its new turns
//! and its answer appended, and the call written beside them, in one transaction.
//!
//! Every call carries its whole history, so the chain of its turns' digests names the
//! history exactly: the longest prefix of it that the store holds is found by binary
//! search over point lookups on `ft:digest` (a request of n turns asks at most
//! log2(n) + 1 of them), so the cost grows with neither the history's length nor the
//! store's size.

use super::wire::{self, Conversation};
use super::Capture;
use crate::error::{Error, Result};
use crate::model::{Agent, Api, ForkOptions, ModelCallInfo, NewSession, SessionId};
use crate::rdf::{self, GraphWriter, ProxiedCallRecord, SessionNode};
use crate::store::Store;
use oxigraph::model::NamedNode;
use serde_json::Value;

/// Where a call was recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Captured {
    /// The session whose history the call's conversation (and answer) is.
    pub session: SessionId,
    /// The call's id.
    pub call: String,
    /// The session forked, and where, when the call diverged from a stored history.
    pub forked_from: Option<(SessionId, u64)>,
    /// Turns the call added.
    pub appended: u64,
}

impl Store {
    /// Records one proxied call (see the module docs).
    pub(crate) fn capture(&self, capture: Capture) -> Result<Captured> {
        let Capture {
            request,
            mut reply_turn,
            mut info,
            hint,
        } = capture;
        // The request is read here, on the recorder's thread, not on the answer's path.
        let (conversation, asked) = wire::read_request(info.api, &request).map_err(|why| {
            Error::InvalidInput(format!(
                "its {} request is not one forktrail reads: {why}",
                info.api
            ))
        })?;
        let asked = asked.filter(|m| Agent::model(m.clone()).is_ok());
        if info.model.is_none() {
            info.model = asked;
        }
        if let (Some(turn), Some(model)) = (reply_turn.as_mut(), &info.model) {
            turn.model.get_or_insert_with(|| model.clone());
        }
        let Conversation {
            turns,
            context,
            overrides,
        } = conversation;
        let request_turns = turns.len() as u64;
        let mut all = turns;
        let answered = reply_turn.is_some();
        all.extend(reply_turn);
        let mut digests = Vec::with_capacity(all.len());
        let mut prev = String::new();
        for (i, turn) in all.iter().enumerate() {
            prev = rdf::turn_digest(&prev, i as u64, turn);
            digests.push(prev.clone());
        }
        let (shared, owner) = self.stored_prefix(&digests)?;
        // A new root's id is known before the write, so the write holds it: the one the
        // call named, unless a session has it already (a conversation that shares
        // nothing with it is not its continuation).
        let named = hint
            .session
            .as_ref()
            .map(|id| SessionId::new(id.clone()))
            .transpose()?;
        let root_id = match (&owner, named) {
            (Some(_), _) => None,
            (None, Some(id)) if !self.exists(&id)? => Some(id),
            (None, _) => Some(SessionId::generate()),
        };
        let keys: Vec<NamedNode> = match (&owner, &root_id) {
            (Some(f), _) => vec![f.iri.clone()],
            (None, Some(id)) => vec![self.session_iri(id)],
            (None, None) => Vec::new(),
        };
        let mut tx = self.write_on(&keys)?;
        let mut forked_from = None;
        let mut facts = match owner {
            Some(f) if f.length as usize == shared || shared == all.len() => f,
            Some(f) => {
                let options = ForkOptions {
                    at: Some(shared as u64),
                    reason: Some("a call through the model proxy diverged here".into()),
                    ..ForkOptions::default()
                };
                forked_from = Some((f.id.clone(), shared as u64));
                let (_, child) = self.fork_in(&mut tx, &f.id, options)?;
                child.ok_or_else(|| Error::Conflict(format!("session {}: no fork made", f.id)))?
            }
            None => self.root_in(&mut tx, &all, root_id, &info, &hint)?,
        };
        let appended = (all.len() - shared) as u64;
        let prev = match shared {
            0 => String::new(),
            n => digests[n - 1].clone(),
        };
        let answered = answered.then_some(request_turns);
        self.record_call(&mut tx, &mut facts, all, shared, prev, answered, &mut info)?;
        let quads = self.call_quads(&facts, &info, &context, overrides)?;
        tx.insert(quads);
        tx.commit()?;
        Ok(Captured {
            session: facts.id,
            call: info.id,
            forked_from,
            appended,
        })
    }

    /// Records a call whose conversation belongs to session `fork`, whatever its
    /// digests say: the request's turns past the session's length, then the answer, are
    /// appended to it (a what-if sample's fork, whose first turns the agent was given
    /// from the recording). `money` (inserts, removes) goes in the same transaction: the
    /// call's reservation replaced by its charge. What the call added.
    pub(crate) fn capture_into(
        &self,
        fork: &SessionId,
        capture: Capture,
        money: (Vec<oxigraph::model::Quad>, Vec<oxigraph::model::Quad>),
    ) -> Result<Captured> {
        let Capture {
            request,
            reply_turn,
            mut info,
            hint: _,
        } = capture;
        let (conversation, _) = wire::read_request(info.api, &request).map_err(|why| {
            Error::InvalidInput(format!(
                "its {} request is not one forktrail reads: {why}",
                info.api
            ))
        })?;
        let Conversation {
            turns: mut all,
            context,
            overrides,
        } = conversation;
        let request_turns = all.len() as u64;
        let answered = reply_turn.is_some().then_some(request_turns);
        all.extend(reply_turn);
        let mut tx = self.write_on(&[self.session_iri(fork)])?;
        let mut facts = self.require(fork)?;
        let shared = (facts.length as usize).min(all.len());
        let prev = self.digest_before(&facts, facts.length)?;
        let appended = (all.len() - shared) as u64;
        self.record_call(&mut tx, &mut facts, all, shared, prev, answered, &mut info)?;
        let quads = self.call_quads(&facts, &info, &context, overrides)?;
        tx.insert(quads);
        tx.insert(money.0);
        tx.remove(money.1);
        tx.commit()?;
        Ok(Captured {
            session: facts.id,
            call: info.id,
            forked_from: None,
            appended,
        })
    }

    /// Appends `all[shared..]` to session `facts` in `tx` (their digests chained from
    /// `prev`, the digest of the turn before them), and fills in where call `info`
    /// belongs: its session, its request's turns, and the index of its answer (the turn
    /// at `answered`, or the one it repeated).
    #[allow(clippy::too_many_arguments)]
    fn record_call(
        &self,
        tx: &mut crate::store::WriteTx<'_>,
        facts: &mut SessionNode,
        all: Vec<crate::NewTurn>,
        shared: usize,
        mut prev: String,
        answered: Option<u64>,
        info: &mut ModelCallInfo,
    ) -> Result<()> {
        let request_turns = answered.unwrap_or(all.len() as u64);
        let mut answer_turn = None;
        for (i, turn) in all.into_iter().enumerate().skip(shared) {
            let (index, digest) = self.append_after(tx, facts, turn, Some(prev), |_, _, _| {})?;
            prev = digest;
            facts.length += 1;
            if answered == Some(i as u64) {
                answer_turn = Some(index);
            }
        }
        // A retried call answered alike generated no new turn: it is recorded beside
        // the turn it repeated.
        info.session = facts.id.clone();
        info.request_turns = request_turns;
        info.answer_index = answer_turn.or(answered);
        Ok(())
    }

    /// The quads of call `info`, recorded in session `facts`.
    fn call_quads(
        &self,
        facts: &SessionNode,
        info: &ModelCallInfo,
        context: &Value,
        overrides: Vec<(usize, Value)>,
    ) -> Result<Vec<oxigraph::model::Quad>> {
        let turn_iri = match info.answer_index {
            Some(index) => Some(self.turn_iri_in(facts, index)?),
            None => None,
        };
        let turn_iri = turn_iri.as_ref();
        let context_text = context.to_string();
        let context_iri = self.iris.request_context(facts.id.as_str(), &context_text);
        let context_stored = self.rdf().has_context(&context_iri, &facts.iri)?;
        let overrides = (!overrides.is_empty()).then(|| {
            Value::Array(
                overrides
                    .into_iter()
                    .map(|(i, m)| Value::Array(vec![Value::from(i), m]))
                    .collect(),
            )
            .to_string()
        });
        let principal = self.iris.agent(&Agent::principal(
            info.principal
                .as_deref()
                .unwrap_or(crate::engine::write::ANONYMOUS),
        )?);
        let model = match &info.model {
            Some(m) => Some(self.iris.agent(&Agent::model(m.clone())?)),
            None => None,
        };
        let mut w = GraphWriter::new(facts.iri.clone());
        ProxiedCallRecord {
            info,
            session: facts.id.as_str(),
            turn: turn_iri,
            model: model.as_ref(),
            principal: &principal,
            context: &context_text,
            context_stored,
            overrides: overrides.as_deref(),
        }
        .write(&self.iris, &mut w);
        Ok(w.quads)
    }

    /// Adds to `tx` the root a conversation that shares nothing stored starts, titled by
    /// its first words, linked to the session `hint` names as its spawner.
    fn root_in(
        &self,
        tx: &mut crate::store::WriteTx<'_>,
        all: &[crate::NewTurn],
        root_id: Option<SessionId>,
        info: &ModelCallInfo,
        hint: &super::Hint,
    ) -> Result<SessionNode> {
        let title = all
            .iter()
            .find(|t| t.role == crate::Role::User && !t.content.trim().is_empty())
            .map(|t| t.content.chars().take(80).collect::<String>());
        let root = self.create_in(
            tx,
            NewSession {
                id: root_id.map(|id| id.to_string()),
                title,
                principal: info.principal.clone(),
            },
        )?;
        if let Some(parent) = &hint.parent {
            // Derived from the spawning session's last turn, when it is stored.
            let spawner = match SessionId::new(parent.clone()) {
                Ok(id) if self.exists(&id)? => {
                    let facts = self.require(&id)?;
                    match facts.length {
                        0 => None,
                        n => Some(self.turn_iri_in(&facts, n - 1)?),
                    }
                }
                _ => None,
            };
            tx.insert(rdf::sub_agent_quads(
                &root.iri,
                &rdf::SubAgentFacts {
                    agent_id: root.id.as_str(),
                    spawned_in_session: Some(parent.as_str()),
                    tool_call_id: None,
                    spawned_by: spawner.as_ref(),
                },
            ));
        }
        Ok(root)
    }

    /// How many of the turns whose chained digests are `digests` the store holds (a
    /// binary search: a turn is stored only after its predecessors), and the session
    /// that stores the last of them.
    fn stored_prefix(&self, digests: &[String]) -> Result<(usize, Option<SessionNode>)> {
        let (mut lo, mut hi, mut owner) = (0usize, digests.len(), None);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            match self.holder_of(&digests[mid - 1], mid as u64)? {
                Some(facts) => {
                    lo = mid;
                    owner = Some(facts);
                }
                None => hi = mid - 1,
            }
        }
        let owner = match owner {
            Some(f) if f.length as usize >= lo => Some(f),
            _ if lo > 0 => self.holder_of(&digests[lo - 1], lo as u64)?,
            _ => None,
        };
        Ok((lo, owner))
    }

    /// The session that stores the turn at `index - 1` whose digest is `digest`,
    /// preferring one whose history ends there.
    fn holder_of(&self, digest: &str, len: u64) -> Result<Option<SessionNode>> {
        let mut best = None;
        for graph in self.rdf().graphs_with_digest(digest)? {
            let Some(facts) = self.facts_of(graph.as_ref())? else {
                continue;
            };
            if facts.length == len {
                return Ok(Some(facts));
            }
            best.get_or_insert(facts);
        }
        Ok(best)
    }

    /// The IRI of turn `index` as session `facts` sees it (its own, or an ancestor's).
    fn turn_iri_in(&self, facts: &SessionNode, index: u64) -> Result<NamedNode> {
        if index >= facts.own_start() {
            return Ok(self.iris.turn(facts.id.as_str(), index));
        }
        let chain = self.chain(&facts.id)?;
        let owner = chain.owner_of(index).ok_or_else(|| Error::Corrupt {
            session: facts.id.to_string(),
            detail: format!("turn {index} has no owner in its chain"),
        })?;
        Ok(self.iris.turn(owner.id.as_str(), index))
    }

    /// The calls an agent made through the model proxy that session `id` holds (those
    /// whose answers extended it), oldest first.
    pub fn model_calls(&self, id: &SessionId) -> Result<Vec<ModelCallInfo>> {
        let facts = self.require(id)?;
        Ok(self
            .rdf()
            .proxied_calls(id, &facts.iri)?
            .into_iter()
            .map(|c| c.info)
            .collect())
    }

    /// The calls through the model proxy whose answers session `id`'s history holds,
    /// its ancestors' included, oldest first.
    pub(crate) fn chain_calls(&self, id: &SessionId) -> Result<Vec<ModelCallInfo>> {
        let chain = self.chain(id)?;
        let mut out = Vec::new();
        for (level, node) in chain.levels().iter().enumerate() {
            let limit = chain.visible_limit(level);
            out.extend(
                self.rdf()
                    .proxied_calls(&node.id, &node.iri)?
                    .into_iter()
                    .map(|c| c.info)
                    .filter(|c| c.answer_index.is_some_and(|i| i < limit)),
            );
        }
        out.sort_by_key(|c| c.answer_index);
        Ok(out)
    }

    /// The request call `call` of session `id` sent, rebuilt from the stored session: its
    /// context (model, system prompt, tools, settings), its turns' messages and what it
    /// sent beyond them. It equals what the agent sent, field by field (images' and files'
    /// bytes as their SHA-256).
    pub fn rebuilt_request(&self, id: &SessionId, call: &str) -> Result<Value> {
        let facts = self.require(id)?;
        let stored = self
            .rdf()
            .proxied_calls(id, &facts.iri)?
            .into_iter()
            .find(|c| c.info.id == call)
            .ok_or_else(|| Error::CallNotFound {
                session: id.to_string(),
                call: call.to_string(),
            })?;
        let corrupt = |detail: String| Error::Corrupt {
            session: id.to_string(),
            detail: format!("model call {call}: {detail}"),
        };
        let context = match &stored.context {
            Some(node) => self.rdf().context_json(node, &facts.iri)?,
            None => None,
        }
        .ok_or_else(|| corrupt("no request context".into()))?;
        let context: Value =
            serde_json::from_str(&context).map_err(|e| corrupt(format!("context: {e}")))?;
        let turns = if stored.info.request_turns == 0 {
            Vec::new()
        } else {
            self.load(id, Some(stored.info.request_turns - 1))?
        };
        let payloads: Vec<Option<&str>> = turns.iter().map(|t| t.payload.as_deref()).collect();
        let mut messages = match stored.info.api {
            Api::OpenaiResponses => wire::responses::items_of(&payloads),
            _ => wire::messages_of(&payloads),
        }
        .map_err(corrupt)?;
        if let Some(text) = &stored.overrides {
            let list: Vec<(usize, Value)> =
                serde_json::from_str(text).map_err(|e| corrupt(format!("overrides: {e}")))?;
            for (i, message) in list {
                let slot = messages
                    .get_mut(i)
                    .ok_or_else(|| corrupt(format!("an override of message {i}, past the end")))?;
                *slot = message;
            }
        }
        Ok(match stored.info.api {
            Api::AnthropicMessages => wire::anthropic::rebuild(&context, messages),
            Api::OpenaiChat => wire::openai::rebuild(&context, messages),
            Api::OpenaiResponses if context.get("input").is_some_and(Value::is_string) => context,
            Api::OpenaiResponses => wire::responses::rebuild(&context, messages),
        })
    }
}
