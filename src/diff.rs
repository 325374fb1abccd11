//! Where two sessions part: lowest common ancestor and first divergent index.

use crate::error::Result;
use crate::model::{FoundBy, ReplayRecord, SessionDiff, SessionId};
use crate::store::Store;

impl Store {
    /// Compares `a` and `b`: their deepest shared session by lineage, the length of the
    /// history they share (by turn digests, so it holds across a detach and for
    /// identical but unrelated histories), and both tails from there as replay records.
    pub fn diff(&self, a: &SessionId, b: &SessionId) -> Result<SessionDiff> {
        let (chain_a, chain_b) = (self.chain(a)?, self.chain(b)?);
        let common_ancestor = chain_a
            .levels()
            .iter()
            .rev()
            .find(|f| chain_b.levels().iter().any(|g| g.iri == f.iri))
            .map(|f| f.id.clone());
        let (turns_a, turns_b) = (self.load(a, None)?, self.load(b, None)?);
        // Digests chain, so the first difference ends the shared prefix.
        let common_prefix = turns_a
            .iter()
            .zip(&turns_b)
            .take_while(|(x, y)| x.digest == y.digest)
            .count();
        let found_by = match (&common_ancestor, common_prefix) {
            (Some(_), _) => FoundBy::Lineage,
            (None, 0) => FoundBy::None,
            (None, _) => FoundBy::Digest,
        };
        let tail = |turns: &[crate::Turn]| -> Vec<ReplayRecord> {
            turns[common_prefix..]
                .iter()
                .map(ReplayRecord::from)
                .collect()
        };
        Ok(SessionDiff {
            a: a.clone(),
            b: b.clone(),
            common_ancestor,
            common_prefix: common_prefix as u64,
            found_by,
            a_tail: tail(&turns_a),
            b_tail: tail(&turns_b),
        })
    }
}
