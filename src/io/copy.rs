//! A whole store into another (embedded ↔ remote), checked afterwards session by
//! session.

use crate::error::{Error, Result};
use crate::model::{SessionId, SessionInfo};
use crate::store::Store;
use oxigraph::io::{RdfFormat, RdfSerializer};
use oxigraph::model::Quad;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// What [`Store::copy_to`] moved, and what it checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CopyReport {
    /// The sessions copied, oldest first.
    pub sessions: Vec<SessionId>,
    /// Turns the sessions store themselves (inherited prefixes not counted again).
    pub own_turns: u64,
    /// Quads written to the destination.
    pub quads: u64,
    /// Sessions whose length and head digest were read back from the destination and
    /// found equal to the source's: all of them, or the copy returns an error.
    pub verified: usize,
}

/// At most how many quads (and about how many bytes of N-Quads) go into the
/// destination in one import, which is one request on a remote store: servers cap a
/// request, and Virtuoso compiles a fenced update of 1,000 quads into more than the
/// 10,000 lines of SQL it takes (500 pass; it also refuses a request over 10 MB).
const BATCH_QUADS: usize = 500;
const BATCH_BYTES: usize = 4 << 20;

impl Store {
    /// Copies every session of this store into `dest`, then reads every copied session
    /// back from `dest` and compares its length and head digest with this store's.
    ///
    /// Sessions go in batches of about 500 quads, parents before their forks,
    /// each batch one import (all or nothing, one request on a remote store), so a copy
    /// of any size stays within what a SPARQL server takes in one request and what this
    /// process holds in memory. Refused, with nothing written, when a session already
    /// exists in `dest`. A batch that fails stops the copy: the error says how many
    /// sessions the destination holds by then. Writers of this store may go on
    /// meanwhile: a session they change between the listing and the export is reported
    /// as changed during the copy (copy again, or stop them).
    pub fn copy_to(&self, dest: &Store) -> Result<CopyReport> {
        let mut before = self.list()?;
        let there: BTreeSet<SessionId> = dest.list()?.into_iter().map(|s| s.session).collect();
        if let Some(s) = before.iter().find(|s| there.contains(&s.session)) {
            return Err(Error::Conflict(format!(
                "session {} already exists in the destination; nothing copied: delete it \
                 there first or copy into another store",
                s.session
            )));
        }
        // Parents first: a fork's parent is one level less deep (the sort is stable, so
        // oldest first within a level).
        before.sort_by_key(|s| s.depth);
        let (quads, copied) = self.copy_batches(dest, &before)?;
        let copied: BTreeMap<SessionId, SessionInfo> = dest
            .list()?
            .into_iter()
            .filter(|s| copied.contains(&s.session))
            .map(|s| (s.session.clone(), s))
            .collect();
        let mut verified = 0;
        for source in &before {
            let Some(there) = copied.get(&source.session) else {
                return Err(differs(&source.session, "is missing from the destination"));
            };
            if (there.length, &there.head_digest) != (source.length, &source.head_digest) {
                let detail = format!(
                    "has {} turns and head digest {} in the destination, {} and {} here",
                    there.length,
                    there.head_digest.as_deref().unwrap_or("(none)"),
                    source.length,
                    source.head_digest.as_deref().unwrap_or("(none)"),
                );
                return Err(differs(&source.session, &detail));
            }
            verified += 1;
        }
        if copied.len() != before.len() {
            let extra = copied
                .keys()
                .find(|id| !before.iter().any(|s| s.session == **id));
            let id = extra.expect("a copied session not listed before");
            return Err(Error::Conflict(format!(
                "session {id} was created in the source during the copy; the destination \
                 holds it unchecked: copy again into an empty store, or stop the source's \
                 writers first"
            )));
        }
        before.sort_by(|a, b| (&a.created_at, &a.session).cmp(&(&b.created_at, &b.session)));
        Ok(CopyReport {
            own_turns: before.iter().map(|s| s.own_turns).sum(),
            sessions: before.into_iter().map(|s| s.session).collect(),
            quads,
            verified,
        })
    }

    /// Writes `sessions` (parents first) into `dest` in imports of about [`BATCH_BYTES`]
    /// each; returns the quads written (agent declarations, which each batch repeats
    /// for the turns it holds, counted once) and the sessions the imports reported.
    fn copy_batches(
        &self,
        dest: &Store,
        sessions: &[SessionInfo],
    ) -> Result<(u64, BTreeSet<SessionId>)> {
        let rdf = self.rdf();
        let mut agents_sent = HashSet::new();
        let mut quads = 0u64;
        let mut copied = BTreeSet::new();
        let mut batch = Batch::default();
        for (n, session) in sessions.iter().enumerate() {
            let graph = rdf.graph(self.session_iri(&session.session).as_ref())?;
            let agents = rdf.agent_declarations(&graph)?;
            quads += graph.len() as u64;
            for agent in &agents {
                quads += u64::from(agents_sent.insert(agent.clone()));
            }
            batch.add(graph, agents)?;
            if batch.bytes.len() >= BATCH_BYTES
                || batch.quads >= BATCH_QUADS
                || n + 1 == sessions.len()
            {
                let ids = dest
                    .import_graphs(batch.bytes.as_slice(), RdfFormat::NQuads)
                    .map_err(|e| stopped(e, copied.len(), sessions.len()))?;
                copied.extend(ids);
                batch = Batch::default();
            }
        }
        Ok((quads, copied))
    }
}

/// One import of a batched copy: its N-Quads, and the agent declarations in it.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    quads: usize,
    agents: HashSet<Quad>,
}

impl Batch {
    fn add(&mut self, graph: Vec<Quad>, agents: Vec<Quad>) -> Result<()> {
        let write_err = |e| Error::io("cannot write the copy's N-Quads", e);
        let mut w = RdfSerializer::from_format(RdfFormat::NQuads).for_writer(&mut self.bytes);
        for quad in &graph {
            w.serialize_quad(quad).map_err(write_err)?;
        }
        self.quads += graph.len();
        for agent in agents {
            if !self.agents.contains(&agent) {
                w.serialize_quad(&agent).map_err(write_err)?;
                self.quads += 1;
                self.agents.insert(agent);
            }
        }
        w.finish().map_err(write_err)?;
        Ok(())
    }
}

/// The error of a batch that failed after `done` of `all` sessions were copied.
fn stopped(e: Error, done: usize, all: usize) -> Error {
    if done == 0 {
        return e;
    }
    let note = format!(
        "the copy stopped after {done} of {all} sessions, which the destination now holds \
         (delete them there, or copy into an empty store)"
    );
    match e {
        Error::Conflict(m) => Error::Conflict(format!("{m}; {note}")),
        Error::InvalidInput(m) => Error::InvalidInput(format!("{m}; {note}")),
        // Its detail may end in the whole update: the note goes first.
        Error::Remote { url, detail } => Error::Remote {
            url,
            detail: format!("{note}; the next import: {detail}"),
        },
        Error::Io { context, source } => Error::Io {
            context: format!("{context} ({note})"),
            source,
        },
        // The rest name a condition (a full disk, a lock) the note would only blur.
        other => other,
    }
}

/// The error for a session that differs after a copy.
fn differs(id: &SessionId, detail: &str) -> Error {
    Error::Corrupt {
        session: id.to_string(),
        detail: format!(
            "after the copy, the session {detail}; if writers changed it during the copy, \
             copy again with them stopped"
        ),
    }
}

/// What [`Store::backup`] wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BackupReport {
    /// The new store directory.
    pub path: std::path::PathBuf,
    /// Sessions in the backup, as read back from it.
    pub sessions: usize,
    /// `checkpoint` (RocksDB's own, of a store on disk) or `copy` (a verified
    /// [`Store::copy_to`], of any other store).
    pub method: &'static str,
}

impl Store {
    /// Backs the whole store up into `dir`, a new directory that [`Store::open`] opens
    /// as a store of its own, while writers go on.
    ///
    /// A store on disk is backed up by RocksDB's checkpoint: one consistent snapshot,
    /// hard-linked where `dir` is on the same file system. Any other store (in memory,
    /// remote) is copied with [`Store::copy_to`], checked session by session.
    #[cfg(feature = "rocksdb")]
    pub fn backup(&self, dir: &std::path::Path) -> Result<BackupReport> {
        if dir.exists() {
            return Err(Error::InvalidInput(format!(
                "{} already exists: back up into a new directory",
                dir.display()
            )));
        }
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::io(format!("cannot create {}", parent.display()), e))?;
        }
        let method = match self.backend().backup(dir) {
            Some(result) => {
                result?;
                "checkpoint"
            }
            None => {
                self.copy_to(&Store::open(dir)?)?;
                "copy"
            }
        };
        let sessions = Store::open(dir)?.list()?.len();
        Ok(BackupReport {
            path: dir.to_path_buf(),
            sessions,
            method,
        })
    }
}
