//! A whole store into another (embedded ↔ remote), checked afterwards session by
//! session.

use crate::error::{Error, Result};
use crate::model::{SessionId, SessionInfo};
use crate::store::Store;
use oxigraph::io::RdfFormat;
use serde::Serialize;
use std::collections::BTreeMap;

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

impl Store {
    /// Copies every session of this store into `dest`, all or nothing (one import),
    /// then reads every copied session back from `dest` and compares its length and
    /// head digest with this store's.
    ///
    /// Refused, with nothing written, when a session already exists in `dest`. Writers
    /// of this store may go on meanwhile: a session they change between the listing and
    /// the export is reported as changed during the copy (copy again, or stop them).
    pub fn copy_to(&self, dest: &Store) -> Result<CopyReport> {
        let before = self.list()?;
        let mut nquads = Vec::new();
        self.export(None, crate::ExportFormat::NQuads, &mut nquads)?;
        let quads = nquads
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count() as u64;
        let sessions = dest.import_graphs(nquads.as_slice(), RdfFormat::NQuads)?;
        let copied: BTreeMap<SessionId, SessionInfo> = dest
            .list()?
            .into_iter()
            .filter(|s| sessions.contains(&s.session))
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
        Ok(CopyReport {
            own_turns: before.iter().map(|s| s.own_turns).sum(),
            sessions: before.into_iter().map(|s| s.session).collect(),
            quads,
            verified,
        })
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
