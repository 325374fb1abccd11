//! Merge-back of a fork's result, exclusive session writers, and scoped forks.

use crate::error::{Error, Result};
use crate::model::{ForkOptions, Kind, MergeOptions, MergePlan, NewTurn, Role, SessionId};
use crate::prov::{self, GraphWriter};
use crate::store::Store;
use crate::vocab::{ft, prov as p, rdf};
use oxigraph::model::{GraphNameRef, Literal, NamedOrBlankNode, QuadRef, Term};

impl Store {
    /// Appends one `fork_result` turn to the child's parent (or `options.into`) that
    /// refers to the child's own turns not merged before, `CHILD@k:turns:a-b`, with a
    /// summary (given, or the child's last assistant turn). Merging turns already
    /// merged is refused. PROV: an `ft:Merge` activity used the child and generated the
    /// turn, which `prov:wasDerivedFrom` the child.
    pub fn merge(&self, child: &SessionId, options: MergeOptions) -> Result<MergePlan> {
        let into = options.into.as_deref().map(SessionId::new).transpose()?;
        let _guard = self.write_guard();
        let chain = self.chain(child)?;
        let facts = chain.last().expect("a chain has a leaf").clone();
        let into = match into {
            Some(into) => into,
            None => match chain.len().checked_sub(2).map(|i| &chain[i]) {
                Some(parent) => SessionId::new(parent.id.clone())?,
                None => {
                    return Err(Error::InvalidInput(format!(
                        "session {child} is not a fork: say which session to merge into (--into)"
                    )))
                }
            },
        };
        if into == *child {
            return Err(Error::InvalidInput(format!(
                "session {child} cannot be merged into itself"
            )));
        }
        self.not_held(&into)?;
        let target = self.require(&into)?;
        let k = facts.own_start();
        let merged_to = self.merged_up_to(&facts.iri)?;
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
            child: child.to_string(),
            into: into.to_string(),
            index: target.length,
            first,
            last,
            reference,
            content: content.clone(),
        };
        if options.dry_run {
            return Ok(plan);
        }
        let child_iri = facts.iri.clone();
        let principal = target.principal.clone();
        let turn = NewTurn::new(Role::Assistant, content).kind(Kind::ForkResult);
        self.append_locked(&target, turn, |w: &mut GraphWriter, turn, index| {
            let activity = self.iris.activity(into.as_str(), &format!("merge/{index}"));
            w.add(&activity, rdf::TYPE, ft::MERGE);
            w.add(&activity, rdf::TYPE, p::ACTIVITY);
            w.add(&activity, p::USED, child_iri.clone());
            w.add(&activity, ft::RANGE_START, Literal::from(first));
            w.add(&activity, ft::RANGE_END, Literal::from(last));
            w.add(&activity, ft::MERGED_AT_INDEX, Literal::from(index));
            w.add(&activity, p::STARTED_AT_TIME, prov::now());
            if let Some(principal) = principal {
                w.add(&activity, p::WAS_ASSOCIATED_WITH, principal);
            }
            w.add(turn, p::WAS_GENERATED_BY, activity);
            w.add(turn, p::WAS_DERIVED_FROM, child_iri.clone());
        })?;
        Ok(plan)
    }

    /// [`Error::Busy`] if a [`SessionWriter`] holds `session`.
    pub(crate) fn not_held(&self, session: &SessionId) -> Result<()> {
        if self.writers().contains(session.as_str()) {
            return Err(Error::Busy {
                session: session.to_string(),
            });
        }
        Ok(())
    }

    /// The last child index any merge of `child` covered, if it was merged.
    fn merged_up_to(&self, child: &oxigraph::model::NamedNode) -> Result<Option<u64>> {
        let mut end = None;
        for quad in
            self.inner
                .quads_for_pattern(None, Some(p::USED), Some(child.as_ref().into()), None)
        {
            let quad = quad?;
            let NamedOrBlankNode::NamedNode(activity) = &quad.subject else {
                continue;
            };
            let graph = quad.graph_name.as_ref();
            if !self
                .inner
                .contains(QuadRef::new(activity, rdf::TYPE, ft::MERGE, graph))?
            {
                continue;
            }
            for q in self.inner.quads_for_pattern(
                Some(activity.as_ref().into()),
                Some(ft::RANGE_END),
                None,
                Some(graph),
            ) {
                if let Term::Literal(l) = q?.object {
                    let value: u64 = l.value().parse().unwrap_or(0);
                    end = Some(end.map_or(value, |e: u64| e.max(value)));
                }
            }
        }
        Ok(end)
    }

    /// An exclusive writer for `session`: until it is dropped, a second writer, and
    /// `append`, `merge` into it or `delete` of it through the store, get
    /// [`Error::Busy`] in this process.
    pub fn writer(&self, session: &SessionId) -> Result<SessionWriter<'_>> {
        self.require(session)?;
        if !self.writers().insert(session.to_string()) {
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
                at: at.map(|k| k as i64),
                reason: Some("with_fork".into()),
                ..ForkOptions::default()
            },
        )?;
        let child = SessionId::new(plan.session)?;
        let outcome = {
            let writer = self.writer(&child)?;
            work(&writer)
        };
        let merged = match outcome {
            Ok(summary) => self.merge(
                &child,
                MergeOptions {
                    into: Some(parent.to_string()),
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
        let _guard = self.write_guard();
        let facts = self.require(child)?;
        let activity = self
            .iris
            .activity(child.as_str(), &format!("abandon/{}", facts.length));
        let graph = GraphNameRef::NamedNode(facts.iri.as_ref());
        if self
            .inner
            .contains(QuadRef::new(&activity, rdf::TYPE, ft::ABANDON, graph))?
        {
            return Ok(());
        }
        let mut w = GraphWriter::new(facts.iri.clone());
        w.add(&activity, rdf::TYPE, ft::ABANDON);
        w.add(&activity, rdf::TYPE, p::ACTIVITY);
        w.add(&activity, p::USED, facts.iri.clone());
        w.add(&activity, ft::REASON, Literal::new_simple_literal(why));
        w.add(&activity, p::ENDED_AT_TIME, prov::now());
        self.commit(&w.quads, &[])
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
        let _guard = self.store.write_guard();
        let facts = self.store.require(&self.session)?;
        self.store.append_locked(&facts, turn, |_, _, _| {})
    }
}

impl Drop for SessionWriter<'_> {
    fn drop(&mut self) {
        self.store.writers().remove(self.session.as_str());
    }
}
