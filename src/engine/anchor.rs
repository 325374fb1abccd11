//! Anchors: named points in a session, and forks from them.

use crate::error::{Error, Result};
use crate::model::{check_key, AnchorInfo, SessionId, SizeClass};
use crate::rdf::chain::Chain;
use crate::rdf::{self, anchor_quads, AnchorNode};
use crate::store::Store;

impl Store {
    /// Names the current length of `session` as anchor `name`, with optional JSON
    /// `state`. Names are unique per session.
    pub fn anchor(
        &self,
        session: &SessionId,
        name: &str,
        state: Option<&str>,
    ) -> Result<AnchorInfo> {
        check_key("anchor name", name)?;
        let limits = self.limits;
        limits.check(session.as_str(), "anchor state", SizeClass::State, state)?;
        let state = state
            .map(|text| {
                serde_json::from_str::<serde_json::Value>(text).map_err(|e| {
                    Error::InvalidInput(format!(
                        "the state of anchor {name:?} on session {session} is not valid JSON: {e}"
                    ))
                })
            })
            .transpose()?;
        let mut tx = self.write()?;
        let facts = self.require(session)?;
        if let Some(existing) = self
            .rdf()
            .anchors_of(&facts)?
            .into_iter()
            .find(|a| a.name == name)
        {
            return Err(Error::Conflict(format!(
                "session {session} already has an anchor named {name:?} (at index {})",
                existing.at_index
            )));
        }
        let created = rdf::now();
        let anchor = AnchorNode {
            name: name.to_string(),
            at_index: facts.length,
            state,
            created: Some(created.value().to_string()),
        };
        tx.insert(anchor_quads(&self.iris, &facts, &anchor, created));
        tx.commit()?;
        Ok(info(session, anchor))
    }

    /// The anchors visible from `session`: its own, and those of its ancestors that
    /// lie within the prefix it inherits. Ordered by index, then name.
    pub fn anchors(&self, session: &SessionId) -> Result<Vec<AnchorInfo>> {
        let mut out = visible(self, &self.chain(session)?)?;
        out.sort_by(|a, b| (a.at_index, &a.name).cmp(&(b.at_index, &b.name)));
        Ok(out)
    }

    /// The fork point anchor `name` names, as seen from `parent` (whose chain is
    /// `chain`): its own anchor first, then the nearest ancestor's.
    pub(crate) fn anchor_index(
        &self,
        parent: &SessionId,
        chain: &Chain,
        name: &str,
    ) -> Result<u64> {
        check_key("anchor name", name)?;
        let visible = visible(self, chain)?;
        for facts in chain.levels().iter().rev() {
            if let Some(a) = visible
                .iter()
                .find(|a| a.name == name && a.session == facts.id)
            {
                return Ok(a.at_index);
            }
        }
        let names: Vec<&str> = visible.iter().map(|a| a.name.as_str()).collect();
        Err(Error::InvalidInput(format!(
            "session {parent} has no anchor named {name:?} (visible anchors: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )))
    }
}

/// The anchors the leaf of `chain` sees: each level's own, up to what it sees of that
/// level.
fn visible(store: &Store, chain: &Chain) -> Result<Vec<AnchorInfo>> {
    let mut out = Vec::new();
    for (level, facts) in chain.levels().iter().enumerate() {
        let limit = chain.visible_limit(level);
        out.extend(
            store
                .rdf()
                .anchors_of(facts)?
                .into_iter()
                .filter(|a| a.at_index <= limit)
                .map(|a| info(&facts.id, a)),
        );
    }
    Ok(out)
}

fn info(session: &SessionId, a: AnchorNode) -> AnchorInfo {
    AnchorInfo {
        name: a.name,
        session: session.clone(),
        at_index: a.at_index,
        state: a.state,
        created_at: a.created,
    }
}
