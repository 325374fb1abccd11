//! Merge-back of a fork's result, exclusive session writers, and scoped forks.

use crate::error::{Error, Result};
use crate::model::{ForkOptions, Kind, MergeOptions, MergePlan, NewTurn, Role, SessionId};
use crate::rdf::{abandon_quads, merge_quads, MergeRecord};
use crate::store::Store;

impl Store {
    /// Appends one `fork_result` turn to the child's parent (or `options.into`) that
    /// refers to the child's own turns not merged before, `CHILD@k:turns:a-b`, with a
    /// summary (given, or the child's last assistant turn). Merging turns already
    /// merged is refused. PROV: an `ft:Merge` activity used the child and generated the
    /// turn, which `prov:wasDerivedFrom` the child.
    pub fn merge(&self, child: &SessionId, options: MergeOptions) -> Result<MergePlan> {
        let mut tx = self.write()?;
        let chain = self.chain(child)?;
        let facts = chain.leaf().clone();
        let into = match (options.into, chain.parent()) {
            (Some(into), _) => into,
            (None, Some(parent)) => parent.id.clone(),
            (None, None) => {
                return Err(Error::InvalidInput(format!(
                    "session {child} is not a fork: say which session to merge into (--into)"
                )))
            }
        };
        if into == *child {
            return Err(Error::InvalidInput(format!(
                "session {child} cannot be merged into itself"
            )));
        }
        self.not_held(&into)?;
        let target = self.require(&into)?;
        let k = facts.own_start();
        let merged_to = self.rdf().merged_up_to(&facts.iri)?;
        let first = merged_to.map_or(k, |end| end + 1).max(k);
        if first >= facts.length {
            return Err(Error::Conflict(match merged_to {
                Some(end) => format!(
                    "the turns of session {child} up to index {end} are already merged; \
                     append to it before merging again"
                ),
                None => format!("session {child} has no own turns to merge"),
            }));
        }
        let last = facts.length - 1;
        let summary = match options.summary {
            Some(text) => text,
            None => self
                .replay(child, None)?
                .into_iter()
                .rev()
                .find(|r| r.role == Role::Assistant && r.index >= first)
                .map(|r| r.content)
                .ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "session {child} has no assistant turn in {first}..={last} to use as \
                         the summary: give one (--summary)"
                    ))
                })?,
        };
        let reference = format!("{child}@{k}:turns:{first}-{last}");
        let content = format!("[fork_result {reference}]\n{summary}\n[/fork_result]");
        let plan = MergePlan {
            child: child.clone(),
            into: into.clone(),
            index: target.length,
            first,
            last,
            reference,
            content: content.clone(),
        };
        if options.dry_run {
            return Ok(plan);
        }
        let turn = NewTurn::new(Role::Assistant, content).kind(Kind::ForkResult);
        self.append_in(&mut tx, &target, turn, |w, turn, index| {
            let merge = MergeRecord {
                into: into.as_str(),
                index,
                turn,
                child: &facts.iri,
                first,
                last,
                principal: target.principal.as_ref(),
            };
            merge_quads(&self.iris, w, &merge);
        })?;
        tx.commit()?;
        Ok(plan)
    }

    /// An exclusive writer for `session`: until it is dropped, a second writer, and
    /// `append`, `merge` into it or `delete` of it through the store, get
    /// [`Error::Busy`] in this process.
    pub fn writer(&self, session: &SessionId) -> Result<SessionWriter<'_>> {
        self.require(session)?;
        if !self.writers().insert(session.clone()) {
            return Err(Error::Busy {
                session: session.to_string(),
            });
        }
        Ok(SessionWriter {
            store: self,
            session: session.clone(),
        })
    }

    /// Forks `parent` at `at` (its length when `None`), runs `work` with an exclusive
    /// writer on the fork, then merges the fork back into `parent` with the summary
    /// `work` returns (`None`: the fork's last assistant turn). If `work` fails, the fork
    /// stays unmerged, an `ft:Abandon` activity records why, and the error is returned.
    pub fn with_fork<E: From<Error>>(
        &self,
        parent: &SessionId,
        at: Option<u64>,
        work: impl FnOnce(&SessionWriter<'_>) -> std::result::Result<Option<String>, E>,
    ) -> std::result::Result<MergePlan, E> {
        let plan = self.fork(
            parent,
            ForkOptions {
                at,
                reason: Some("with_fork".into()),
                ..ForkOptions::default()
            },
        )?;
        let child = plan.session;
        let outcome = {
            let writer = self.writer(&child)?;
            work(&writer)
        };
        let merged = match outcome {
            Ok(summary) => self.merge(
                &child,
                MergeOptions {
                    into: Some(parent.clone()),
                    summary,
                    dry_run: false,
                },
            ),
            Err(e) => {
                // The work's own error is what the caller needs, even if recording the
                // abandon fails too.
                let _ = self.abandon(&child, "the scoped work returned an error");
                return Err(e);
            }
        };
        merged.map_err(|e| {
            let _ = self.abandon(&child, &format!("the merge failed: {e}"));
            E::from(e)
        })
    }

    /// Records that the work in fork `child` ended without a merge.
    fn abandon(&self, child: &SessionId, why: &str) -> Result<()> {
        let mut tx = self.write()?;
        let facts = self.require(child)?;
        if self.rdf().abandoned(&facts)? {
            return Ok(());
        }
        tx.insert(abandon_quads(&self.iris, &facts, why));
        tx.commit()
    }
}

/// An exclusive writer for one session (see [`Store::writer`]); dropping it releases
/// the session.
pub struct SessionWriter<'s> {
    store: &'s Store,
    session: SessionId,
}

impl SessionWriter<'_> {
    /// The session this writer holds.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// Appends a turn to the held session and returns its index.
    pub fn append(&self, turn: NewTurn) -> Result<u64> {
        let mut tx = self
            .store
            .write_grouped(&[self.store.session_iri(&self.session)])?;
        let facts = self.store.require(&self.session)?;
        let index = self.store.append_in(&mut tx, &facts, turn, |_, _, _| {})?;
        tx.commit()?;
        Ok(index)
    }
}

impl Drop for SessionWriter<'_> {
    fn drop(&mut self) {
        self.store.writers().remove(&self.session);
    }
}
