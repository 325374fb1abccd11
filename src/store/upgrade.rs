//! The upgrade of a store's digests from an older version. Version 2 digests cover what
//! version 1 left out (names, tool call ids, tool calls, payloads) and are version 1's
//! for a turn that has none of them, so an upgrade rewrites only the sessions holding
//! such turns and the forks below them.

use super::Store;
use crate::error::Result;
use crate::model::{DigestVersion, UpgradeReport};
use crate::rdf;

impl Store {
    /// Brings the store's digests to the current version in one pass and states the
    /// version: every digest that differs is rewritten (with the base digest of every
    /// fork below it, and an OpenTelemetry import's name for the turn), in one
    /// transaction that holds every other write, and the record index is rebuilt as
    /// sessions are read. A store already at the current version is left as it is, but
    /// for the statement. [`Store::open`] does this by itself; a shared store is
    /// brought up by `forktrail upgrade --store URL`, once.
    pub fn upgrade_digests(&self) -> Result<UpgradeReport> {
        let mut tx = self.write_unchecked(&[])?;
        let from = self.digest_version()?;
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
            let redigest = rdf::redigest(&rdf, rdf.graphs_with_extras()?, None)?;
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
}
