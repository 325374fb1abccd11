//! The scratch store's sessions written into the store in one transaction, refused if
//! what they were built on changed meanwhile.

use crate::error::{Error, Result};
use crate::model::{Label, SessionId};
use crate::rdf::SessionNode;
use crate::store::Store;
use oxigraph::model::{NamedNode, Quad};
use std::collections::BTreeMap;

/// What an import writes.
#[derive(Default)]
pub(super) struct Written {
    /// Sessions the import creates.
    pub(super) created: Vec<SessionId>,
    /// Sessions already in the store that gain turns (or a parent).
    pub(super) extended: Vec<SessionId>,
    /// Sessions already in the store that were copied into the scratch store, with
    /// their quads as copied.
    pub(super) existing: BTreeMap<SessionId, Vec<Quad>>,
}

impl Store {
    /// Writes what the scratch store holds for `written`'s sessions: new sessions are
    /// added, existing ones that changed are replaced by their scratch graph (which
    /// started as a copy of them), in one transaction. Refused if a copied session
    /// changed in the store meanwhile.
    pub(super) fn commit_scratch(&self, scratch: &Store, written: &Written) -> Result<()> {
        let mut tx = self.write()?;
        for (id, copied) in written
            .existing
            .iter()
            .filter(|(id, _)| written.extended.contains(id))
        {
            if self.graph_quads(&self.session_iri(id))? != *copied {
                return Err(Error::Conflict(format!(
                    "session {id} changed while it was being imported into; import again"
                )));
            }
            // A sub-agent linked now hangs on a session that must still be there.
            let facts = scratch.require(id)?;
            if let Some(parent) = &facts.parent {
                self.check_parent(&facts, parent, written)?;
            }
        }
        for id in &written.created {
            if self.exists(id)? {
                return Err(Error::Conflict(format!(
                    "session {id} was created in the store while this import ran; import \
                     again"
                )));
            }
            // A fork of a session already here must still have a label of its own.
            let facts = scratch.require(id)?;
            if let Some(parent) = &facts.parent {
                self.check_parent(&facts, parent, written)?;
                let label = Label::new(facts.branch.clone())?;
                if let Some(existing) = self.rdf().child_with_label(parent, &label)? {
                    return Err(Error::DuplicateLabel {
                        parent: self.iris.name_of(parent.as_ref()),
                        label: label.to_string(),
                        existing: existing.to_string(),
                    });
                }
            }
        }
        for id in written.created.iter().chain(&written.extended) {
            let iri = self.session_iri(id);
            if written.existing.contains_key(id) {
                tx.drop_graph(iri.clone());
            }
            tx.insert(scratch.rdf().graph(iri.as_ref())?);
            tx.forget(&iri);
        }
        // The agents the new turns are attributed to, declared in the scratch store.
        tx.insert(scratch.rdf().graph(self.iris.agents_graph().as_ref())?);
        tx.commit()
    }

    /// The parent a fork of the import hangs on is still in the store (unless the
    /// import creates it too), with the same turns below the fork point. A fork may
    /// hang on turns the import appends to its parent (a log that grew and branched
    /// among its new lines): those are not in the store yet, and the parent, which the
    /// import extends, is checked unchanged since it was copied.
    fn check_parent(
        &self,
        fork: &SessionNode,
        parent: &NamedNode,
        written: &Written,
    ) -> Result<()> {
        let parent_id = self.iris.name_of(parent.as_ref());
        if written.created.iter().any(|c| c.as_str() == parent_id) {
            return Ok(());
        }
        let changed = || {
            Error::Conflict(format!(
                "session {parent_id} changed while this import ran; import again"
            ))
        };
        let Some(here) = self.facts_of(parent.as_ref())? else {
            return Err(changed());
        };
        let k = fork.own_start();
        if k == 0 {
            return Ok(());
        }
        let chain = self.chain(&here.id)?;
        if k > chain.leaf().length {
            // Past what the store holds of the parent: fine only if the import appends
            // the turns it forks at.
            return if written.extended.contains(&here.id) {
                Ok(())
            } else {
                Err(changed())
            };
        }
        let digest = self.digest_in_chain(&chain, k - 1)?;
        if fork.base_digest.as_deref() != Some(digest.as_str()) {
            return Err(changed());
        }
        Ok(())
    }

    /// Every quad of a graph, sorted.
    pub(super) fn graph_quads(&self, graph: &NamedNode) -> Result<Vec<Quad>> {
        let mut quads = self.rdf().graph(graph.as_ref())?;
        quads.sort_by_cached_key(|q| q.to_string());
        Ok(quads)
    }
}
