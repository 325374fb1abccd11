//! Adoption: a root session made a fork of a session that arrived after it. A Claude
//! Code sub-agent's transcript imported before the log that launched it is adopted at
//! 0 when that log comes; a Codex fork rollout imported before the rollout it was
//! forked from (its `forked_from_id`) is stored whole and waits for it, and when that
//! one comes it is adopted at the end of the prefix they share: the repeated turns
//! are dropped from it, and it inherits them as any fork does.

use super::report::SharedCopy;
use crate::error::{Error, Result};
use crate::model::{Role, SessionId, MAX_FORK_DEPTH};
use crate::rdf::{adopt_change, repointed, Adoption, SessionNode};
use crate::store::Store;
use std::collections::HashSet;

/// The reason a fork adopted for its source's `forked_from_id` records.
const FORKED_FROM_REASON: &str = "imported before the session its source forked it from";

impl Store {
    /// Makes root session `child` a fork at `at` of `parent`, labelled `label`, its
    /// descendants moving down with it (within the depth limit). The child's first `at`
    /// turns must repeat the parent's (equal digests at `at - 1`): they are dropped,
    /// and what pointed at one of them (a sub-agent's launch, say) points at the
    /// parent's turn of that index. Its later turns chain on that same digest, so they
    /// stay as they are. Returns the sessions it changed.
    pub(crate) fn adopt(
        &self,
        child: &SessionId,
        parent: &SessionId,
        at: u64,
        label: &str,
        reason: &str,
    ) -> Result<Vec<SessionId>> {
        let mut tx = self.write()?;
        let facts = self.require(child)?;
        let chain = self.chain(parent)?;
        let shift = chain.len() as u64;
        let subtree = self.subtree_of(facts.clone())?;
        let deepest = subtree
            .iter()
            .map(|f| f.depth + shift)
            .max()
            .unwrap_or(shift);
        if deepest > MAX_FORK_DEPTH as u64 {
            return Err(Error::ForkTooDeep {
                parent: parent.to_string(),
                depth: deepest as usize,
                max: MAX_FORK_DEPTH,
            });
        }
        let base_digest = match at {
            0 => None,
            at => {
                let theirs = self.digest_in_chain(&chain, at - 1)?;
                if self.rdf().digest(&facts, at - 1)? != theirs {
                    return Err(Error::Conflict(format!(
                        "session {child} does not start with the first {at} turns of \
                         {parent}; it cannot become its fork there"
                    )));
                }
                Some(theirs)
            }
        };
        let rdf = self.rdf();
        let dropped: Vec<_> = (0..at).map(|i| self.iris.turn(child.as_str(), i)).collect();
        let gone: HashSet<_> = dropped.iter().cloned().collect();
        for (index, turn) in dropped.iter().enumerate() {
            tx.remove(rdf.about(turn.as_ref(), facts.iri.as_ref())?);
            let owner = chain.owner_of(index as u64).ok_or_else(|| Error::Corrupt {
                session: parent.to_string(),
                detail: format!("no session in its chain owns turn {index}"),
            })?;
            let original = self.iris.turn(owner.id.as_str(), index as u64);
            for quad in rdf.naming(turn.as_ref())? {
                let from_kept = match &quad.subject {
                    oxigraph::model::NamedOrBlankNode::NamedNode(s) => !gone.contains(s),
                    _ => true,
                };
                if from_kept {
                    tx.remove([quad.clone()]);
                    tx.insert([repointed(quad, &original)]);
                }
            }
        }
        let node_quads = rdf.about(facts.iri.as_ref(), facts.iri.as_ref())?;
        let (inserts, removes) = adopt_change(
            &self.iris,
            &subtree,
            &node_quads,
            &Adoption {
                chain: chain.levels(),
                at,
                base_digest: base_digest.as_deref(),
                label,
                reason,
            },
        );
        tx.insert(inserts);
        tx.remove(removes);
        tx.claim_label(&chain.leaf().iri, label);
        for f in subtree.iter().chain([chain.leaf()]) {
            tx.forget(&f.iri);
        }
        tx.commit()?;
        Ok(subtree.into_iter().map(|f| f.id).collect())
    }

    /// Adopts the root sessions waiting for `parent` (imported while it was not in the
    /// store, their source naming it as what they were forked from), each at the end of
    /// the longest prefix it shares with `parent`. One that shares nothing but system
    /// turns, or would pass the depth limit, stays a root and keeps waiting.
    pub(crate) fn adopt_awaiting(&self, parent: &SessionId) -> Result<Vec<SharedCopy>> {
        let mut adopted = Vec::new();
        let waiting = self.rdf().awaiting(parent.as_str())?;
        if waiting.is_empty() {
            return Ok(adopted);
        }
        let chain = self.chain(parent)?;
        let mut taken = HashSet::new();
        for iri in waiting {
            let Some(child) = self.facts_of(iri.as_ref())? else {
                continue;
            };
            if child.parent.is_some() || child.id == *parent {
                continue;
            }
            let at = self.shared_prefix(&child, &chain)?;
            if at == 0
                || self
                    .load_range(&child.id, 0, at - 1)?
                    .iter()
                    .all(|t| t.role == Role::System)
            {
                continue;
            }
            let label = self.copy_label(&chain.leaf().iri, &mut taken)?;
            match self.adopt(&child.id, parent, at, label.as_str(), FORKED_FROM_REASON) {
                Ok(_) => adopted.push(SharedCopy {
                    session: child.id.clone(),
                    parent: parent.clone(),
                    shared_turns: at,
                    branch: label.to_string(),
                }),
                Err(Error::ForkTooDeep { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(adopted)
    }

    /// How many first turns root session `child` shares with the leaf of `chain`: equal
    /// digests at an index mean equal histories up to it, so found by bisection.
    fn shared_prefix(&self, child: &SessionNode, chain: &crate::rdf::chain::Chain) -> Result<u64> {
        let rdf = self.rdf();
        let same = |i: u64| -> Result<bool> {
            Ok(rdf.digest(child, i)? == self.digest_in_chain(chain, i)?)
        };
        let (mut lo, mut hi) = (0, child.length.min(chain.leaf().length));
        // Invariant: the first `lo` turns are shared, the first `hi + 1` are not (or
        // there are not that many).
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if same(mid - 1)? {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Ok(lo)
    }
}
