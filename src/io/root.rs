//! A new root session built whole, for the transcript importers: its turns are checked
//! as they come (as `append` checks them), and the quads are made only when the session
//! goes in, straight into the store's bulk loader, with the digest chain computed on the
//! way. Nothing of it is visible before the load commits, and a failed load leaves
//! nothing behind.

use crate::catalog::TurnDoc;
use crate::error::{Error, Result};
use crate::model::{Agent, Limits, NewSession, NewTurn, SessionId, SizeClass};
use crate::rdf::{
    self, session_quads, turn_quads, GraphWriter, SessionNode, SessionRecord, TurnRecord,
};
use crate::records::{Entry, Run};
use crate::store::Store;
use crate::write::{check_turn, ANONYMOUS};
use crate::Label;
use oxigraph::model::NamedNode;
use std::collections::HashSet;

/// A root session being built: its facts and its checked turns.
pub(crate) struct RootBuilder {
    limits: Limits,
    id: SessionId,
    principal: Agent,
    title: Option<String>,
    /// Each turn with the agent it is attributed to, if not the principal.
    turns: Vec<(NewTurn, Option<Agent>)>,
}

impl RootBuilder {
    pub(crate) fn new(limits: Limits, session: NewSession) -> Result<Self> {
        let id = match session.id {
            Some(id) => SessionId::new(id)?,
            None => SessionId::generate(),
        };
        let principal = Agent::principal(session.principal.as_deref().unwrap_or(ANONYMOUS))?;
        let title = session.title.as_deref();
        limits.check(id.as_str(), "title", SizeClass::Field, title)?;
        Ok(Self {
            limits,
            id,
            principal,
            title: session.title,
            turns: Vec::new(),
        })
    }

    /// Adds a turn, refused as `append` would refuse it (and then not added).
    pub(crate) fn append(&mut self, turn: NewTurn) -> Result<u64> {
        let software = check_turn(&self.limits, self.id.as_str(), &turn)?;
        self.turns.push((turn, software));
        Ok(self.turns.len() as u64 - 1)
    }
}

impl Store {
    /// Adds the session `root` built, all or nothing, through the bulk loader;
    /// `progress` is told `(turns written, turns)` as they go in.
    pub(crate) fn add_root(
        &self,
        root: RootBuilder,
        progress: Option<&dyn Fn(u64, u64)>,
    ) -> Result<SessionId> {
        let RootBuilder {
            id,
            principal,
            title,
            turns,
            ..
        } = root;
        let iri = self.session_iri(&id);
        let mut tx = self.write()?;
        if self.exists(&id)? {
            return Err(Error::Conflict(format!(
                "session {id} already exists in the store; delete it first or import into \
                 another store"
            )));
        }
        // One moment for the whole import: when its turns were recorded.
        let created = rdf::now();
        let node = session_quads(
            &self.iris,
            &SessionRecord {
                id: id.as_str(),
                branch: Label::MAIN,
                principal: &principal,
                title: title.as_deref(),
                depth: 0,
                fork_root: &iri,
                created: &created,
            },
            None,
        );
        let principal_iri = self.iris.agent(&principal);
        let total = turns.len() as u64;
        let mut declared: HashSet<NamedNode> = HashSet::new();
        let mut prev = String::new();
        let mut run = tx.indexes_records().then(Run::default);
        // Noted before the load, so that a crash past it leaves the session to the
        // catalog to derive again.
        tx.forget(&iri);
        let catalog = tx.catalogs();
        let at = crate::store::micros(Some(created.value()));
        let mut docs = Vec::new();
        let turn_quads = turns
            .into_iter()
            .enumerate()
            .flat_map(|(index, (turn, software))| {
                let index = index as u64;
                let mut w = GraphWriter::new(iri.clone());
                let by = match &software {
                    Some(agent) => {
                        let agent_iri = self.iris.agent(agent);
                        if declared.insert(agent_iri.clone()) {
                            w.agent(&self.iris, agent);
                        }
                        agent_iri
                    }
                    None => principal_iri.clone(),
                };
                let digest = rdf::turn_digest(&prev, index, turn.role, turn.kind, &turn.content);
                turn_quads(
                    &self.iris,
                    &mut w,
                    &TurnRecord {
                        session: id.as_str(),
                        index,
                        turn: &turn,
                        by: &by,
                        digest: &digest,
                        created: &created,
                    },
                );
                if catalog {
                    docs.push(TurnDoc::of(index, &turn, at));
                }
                // The record index gets the session's file once the import is in, so
                // the first replay after it reads no RDF.
                if let Some(run) = &mut run {
                    let NewTurn {
                        role,
                        kind,
                        content,
                        ..
                    } = turn;
                    run.push(&Entry {
                        index,
                        role,
                        kind,
                        content,
                        branch: None,
                        digest: digest.clone(),
                    });
                }
                prev = digest;
                if let Some(progress) = progress {
                    if index % 256 == 255 || index + 1 == total {
                        progress(index + 1, total);
                    }
                }
                w.quads
            });
        self.backend()
            .bulk_load(&mut node.into_iter().chain(turn_quads))?;
        tx.created(
            &root_facts(&id, &iri, principal_iri, title, &created, total),
            None,
        );
        tx.indexed_turns(&iri, docs);
        if let Some(run) = run {
            tx.imported(&iri, 0, run);
        }
        tx.commit()?;
        Ok(id)
    }
}

/// The facts of a new root session as the catalog takes them.
fn root_facts(
    id: &SessionId,
    iri: &NamedNode,
    principal: NamedNode,
    title: Option<String>,
    created: &oxigraph::model::Literal,
    length: u64,
) -> SessionNode {
    let mut facts = SessionNode::lineage(id.clone(), iri.clone(), None, None);
    facts.branch = Label::MAIN.to_string();
    facts.fork_root = Some(iri.clone());
    facts.principal = Some(principal);
    facts.title = title;
    facts.created = Some(created.value().to_string());
    facts.length = length;
    facts
}
