//! Digest versions: which version a store's turns are made with, and the one pass that
//! brings a store written by an older version of forktrail to the current one.
//!
//! Version 2 digests cover what version 1 left out (names, tool call ids, tool calls,
//! payloads) and are equal to version 1's for a turn that has none of them, so only the
//! sessions holding such a turn, and the forks below them, change.

use crate::error::{Error, Result};
use crate::rdf::{self, digest_of, history_name, DigestFields, DigestVersion, SessionNode};
use crate::store::Store;
use oxigraph::model::{NamedNode, Quad};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What [`Store::upgrade_digests`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UpgradeReport {
    /// The version the store's digests were made with.
    pub from: DigestVersion,
    /// The version they are made with now.
    pub to: DigestVersion,
    /// Sessions whose digests were rewritten.
    pub sessions: usize,
    /// Turns whose digest was rewritten.
    pub turns: u64,
}

impl UpgradeReport {
    /// Whether the store was brought from an older version.
    pub fn upgraded(&self) -> bool {
        self.from != self.to
    }
}

/// A turn's digest and its name as an OpenTelemetry import gives it (see
/// `rdf::history_name`), each chained over the turn before.
#[derive(Clone, Debug, Default)]
struct Chained {
    digest: String,
    name: String,
}

impl Chained {
    /// A turn that digests alike in both versions and has no payload or name before it:
    /// its name is its digest.
    fn stored(digest: String) -> Self {
        Self {
            name: digest.clone(),
            digest,
        }
    }
}

/// The digests of some sessions as the current version makes them, and the quads that
/// put them in place of the stored ones.
#[derive(Default)]
pub(crate) struct Redigest {
    pub(crate) remove: Vec<Quad>,
    pub(crate) insert: Vec<Quad>,
    /// The sessions whose quads change.
    pub(crate) sessions: BTreeSet<NamedNode>,
    pub(crate) turns: u64,
}

impl Store {
    /// The digest version of the store's turns (see [`DigestVersion`]): the version the
    /// store states; without a statement, version 1 if any turn has a field that only
    /// version 2 covers, else the current version (the two then agree).
    ///
    /// ```
    /// use forktrail::{DigestVersion, Store};
    /// assert_eq!(Store::in_memory()?.digest_version()?, DigestVersion::V2);
    /// # Ok::<(), forktrail::Error>(())
    /// ```
    pub fn digest_version(&self) -> Result<DigestVersion> {
        if let Some(version) = *self.digests.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(version);
        }
        self.stored_digest_version()
    }

    fn stored_digest_version(&self) -> Result<DigestVersion> {
        let rdf = self.rdf();
        match rdf.stated_digest_version()? {
            Some(n) => DigestVersion::from_number(n).ok_or_else(|| {
                Error::InvalidInput(format!(
                    "the store {} states digest version {n}, which this forktrail does not \
                     know: it was written by a newer forktrail",
                    self.location()
                ))
            }),
            None if rdf.any_turn_with_extras()? => Ok(DigestVersion::V1),
            None => Ok(DigestVersion::CURRENT),
        }
    }

    /// Brings the store's digests to the current version in one pass and states the
    /// version: every digest that differs is rewritten (with the base digest of every
    /// fork below it, and an OpenTelemetry import's name for the turn), in one
    /// transaction that holds every other write, and the record index is rebuilt as
    /// sessions are read. A store already at the current version is left as it is, but
    /// for the statement. [`Store::open`] does this by itself; a shared store is
    /// brought up by `forktrail upgrade --store URL`, once.
    pub fn upgrade_digests(&self) -> Result<UpgradeReport> {
        let mut tx = self.write_unchecked(&[])?;
        let from = self.stored_digest_version()?;
        let to = DigestVersion::CURRENT;
        let rdf = self.rdf();
        let stated = rdf.stated_digest_version()?;
        let mut report = UpgradeReport {
            from,
            to,
            ..UpgradeReport::default()
        };
        if stated == Some(u64::from(to.number())) {
            drop(tx);
            self.know_digest_version(to);
            return Ok(report);
        }
        if from != to {
            let redigest = self.redigest(rdf.graphs_with_extras()?, None)?;
            report.sessions = redigest.sessions.len();
            report.turns = redigest.turns;
            tx.remove(redigest.remove);
            tx.insert(redigest.insert);
            for iri in &redigest.sessions {
                tx.forget(iri);
            }
        }
        tx.remove(rdf.store_statements()?);
        tx.insert(rdf::version_quads(&self.iris, to));
        tx.commit()?;
        if let Some(records) = &self.records {
            // Files of the record index's older format are read as absent: gone now,
            // they are written anew by the replays that need them.
            records.clear();
        }
        self.know_digest_version(to);
        Ok(report)
    }

    /// Records the version this process knows the store to be at.
    pub(crate) fn know_digest_version(&self, version: DigestVersion) {
        *self.digests.lock().unwrap_or_else(|p| p.into_inner()) = Some(version);
    }

    /// At open, for a store this process owns: an empty store states the current
    /// version; a store of an older version is upgraded.
    pub(crate) fn settle_digest_version(&self) -> Result<Option<UpgradeReport>> {
        let rdf = self.rdf();
        if rdf.stated_digest_version()?.is_some() {
            let version = self.stored_digest_version()?;
            if version == DigestVersion::CURRENT {
                self.know_digest_version(version);
                return Ok(None);
            }
        }
        if !rdf.any_session()? {
            let mut tx = self.write_unchecked(&[])?;
            tx.remove(rdf.store_statements()?);
            tx.insert(rdf::version_quads(&self.iris, DigestVersion::CURRENT));
            tx.commit()?;
            self.know_digest_version(DigestVersion::CURRENT);
            return Ok(None);
        }
        self.upgrade_digests().map(Some)
    }

    /// Before the first write of this process to a shared store: a store of an older
    /// version is refused (its upgrade holds every writer: `forktrail upgrade`); one
    /// that states no version, and has no turn whose digest the versions disagree on, is
    /// stated to be at the current one before anything is written that would make them
    /// disagree.
    pub(crate) fn check_shared_digests(&self) -> Result<()> {
        if self
            .digests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            return Ok(());
        }
        match self.stored_digest_version()? {
            DigestVersion::CURRENT => {}
            old => {
                return Err(Error::Conflict(format!(
                    "the shared store {} holds turn digests of version {old}, which do not \
                     cover tool calls: run `forktrail upgrade --store {}` once to bring it to \
                     version {} (it holds every writer meanwhile), then write again",
                    self.location(),
                    self.location(),
                    DigestVersion::CURRENT
                )))
            }
        }
        if self.rdf().stated_digest_version()?.is_none() {
            let mut tx = self.write_unchecked(&[])?;
            tx.insert(rdf::version_quads(&self.iris, DigestVersion::CURRENT));
            tx.commit()?;
        }
        self.know_digest_version(DigestVersion::CURRENT);
        Ok(())
    }

    /// The current version's digests for the sessions of `seeds` and every session that
    /// forks below one of them, as stored version-1 digests chain: the quads that put
    /// them in place. The digest before a fork's first turn is taken from the sessions
    /// recomputed, else from the store, else (for a scratch store that holds only the
    /// nodes of sessions that live elsewhere) from `outside`.
    pub(crate) fn redigest(
        &self,
        seeds: BTreeSet<NamedNode>,
        outside: Option<&Store>,
    ) -> Result<Redigest> {
        let rdf = self.rdf();
        // The seeds and their descendants, ordered by depth: a parent is recomputed
        // before its forks.
        let mut nodes: BTreeMap<NamedNode, SessionNode> = BTreeMap::new();
        let mut queue: Vec<NamedNode> = seeds.into_iter().collect();
        while let Some(iri) = queue.pop() {
            if nodes.contains_key(&iri) {
                continue;
            }
            let Some(node) = self.facts_of(iri.as_ref())? else {
                continue;
            };
            queue.extend(rdf.children(&iri)?);
            nodes.insert(iri, node);
        }
        let mut order: Vec<&SessionNode> = nodes.values().collect();
        order.sort_by(|a, b| (a.depth, &a.iri).cmp(&(b.depth, &b.iri)));
        // The new digest of each turn of a recomputed session, and its new name as an
        // OpenTelemetry import names it, by its index.
        let mut digests: HashMap<NamedNode, BTreeMap<u64, Chained>> = HashMap::new();
        let mut out = Redigest::default();
        for node in order {
            let start = node.own_start();
            let old_base = node.base_digest.clone().unwrap_or_default();
            let base = match start {
                0 => Chained::default(),
                k => self.redigested_at(node, k - 1, &nodes, &digests, outside)?,
            };
            if start > 0 && base.digest != old_base {
                let (remove, insert) = rdf::rebase(node, &old_base, &base.digest);
                out.remove.push(remove);
                out.insert.push(insert);
                out.sessions.insert(node.iri.clone());
            }
            let mut prev = base;
            let mut own = BTreeMap::new();
            for index in start..node.length {
                let turn = rdf.turn(node, index)?;
                let fields = DigestFields::from(&turn);
                let next = Chained {
                    digest: digest_of(&prev.digest, index, &fields),
                    name: history_name(&prev.name, index, &fields),
                };
                let sources = rdf.source_ids(node, index)?;
                // An OpenTelemetry import named the turn by its version-1 digest.
                let renamed = sources.contains(&turn.digest) && next.name != turn.digest;
                if next.digest != turn.digest || renamed {
                    let (remove, insert) = rdf::redigest(
                        &self.iris,
                        node,
                        index,
                        (&turn.digest, &next.digest),
                        &next.name,
                        &sources,
                    );
                    out.remove.extend(remove);
                    out.insert.extend(insert);
                    out.sessions.insert(node.iri.clone());
                    out.turns += u64::from(next.digest != turn.digest);
                }
                own.insert(index, next.clone());
                prev = next;
            }
            digests.insert(node.iri.clone(), own);
        }
        Ok(out)
    }

    /// The recomputed digest and name of turn `index` in the chain of `node` (an index
    /// below `node`'s own turns): from the level that owns it; for a level not
    /// recomputed, whose turns digest alike in both versions, its stored digest twice.
    fn redigested_at(
        &self,
        node: &SessionNode,
        index: u64,
        nodes: &BTreeMap<NamedNode, SessionNode>,
        digests: &HashMap<NamedNode, BTreeMap<u64, Chained>>,
        outside: Option<&Store>,
    ) -> Result<Chained> {
        let mut level = node.clone();
        for _ in 0..=crate::model::MAX_FORK_DEPTH {
            let Some(parent) = level.parent.clone() else {
                break;
            };
            let parent_node = match nodes.get(&parent) {
                Some(n) => n.clone(),
                None => match self.facts_of(parent.as_ref())? {
                    Some(n) => n,
                    None => break,
                },
            };
            if index >= parent_node.own_start() {
                if let Some(d) = digests.get(&parent).and_then(|own| own.get(&index)) {
                    return Ok(d.clone());
                }
                if self.rdf().has_turn(&parent_node, index)? {
                    return Ok(Chained::stored(self.rdf().digest(&parent_node, index)?));
                }
                if let Some(outside) = outside {
                    if let Some(there) = outside.facts_of(parent.as_ref())? {
                        return Ok(Chained::stored(outside.rdf().digest(&there, index)?));
                    }
                }
                break;
            }
            level = parent_node;
        }
        Err(Error::Corrupt {
            session: node.id.to_string(),
            detail: format!("no session in the chain holds turn {index}, which the fork follows"),
        })
    }
}
