//! Opening a store: on disk (its digests brought to the current version first), in
//! memory, or across the network.

use super::catalog::Catalog;
use super::records::Records;
use super::Store;
use crate::error::{Error, Result};
use crate::model::DigestVersion;
use crate::storage::{Embedded, Remote, RemoteConfig};
use std::path::Path;

impl Store {
    /// Opens (or creates) an on-disk store in directory `path`.
    ///
    /// One process owns a store directory: a second one gets [`Error::StoreLocked`].
    #[cfg(feature = "rocksdb")]
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let mut store = Self::wrap(Box::new(Embedded::open(path.as_ref())?));
        store.records = Some(Records::new(path.as_ref()));
        store.catalog = Some(Catalog::open(path.as_ref()).map_err(|e| Error::Io {
            context: format!(
                "opening the catalog in {}",
                path.as_ref().join(crate::store::catalog::DIR).display()
            ),
            source: std::io::Error::other(e),
        })?);
        store.upgraded = store.settle_digest_version()?;
        Ok(store)
    }

    /// A fresh in-memory store, gone when dropped.
    pub fn in_memory() -> Result<Self> {
        let mut store = Self::wrap(Box::new(Embedded::in_memory()?));
        store.catalog = Some(Catalog::in_memory().map_err(|e| Error::Io {
            context: "creating the catalog in memory".into(),
            source: std::io::Error::other(e),
        })?);
        // Made by this code: its digests are the current version's.
        store.know_digest_version(DigestVersion::CURRENT);
        Ok(store)
    }

    /// A remote SPARQL 1.1 store (Oxigraph server, Virtuoso, GraphDB, Neptune, another
    /// `forktrail serve`, …), which many processes may share.
    ///
    /// Nothing is sent until the first operation. Its default graph must be the union
    /// of its named graphs (Oxigraph server: `--union-default-graph`); writers of one
    /// store coordinate through leases in the graph `{base}leases` (ARCHITECTURE.md
    /// says what that relies on).
    ///
    /// Pages of sessions and search come from a catalog this process keeps of the
    /// store in memory, built from the RDF at its first read and then kept up to date
    /// by the store's change feed (see `store/feed.rs`).
    pub fn remote(config: RemoteConfig) -> Result<Self> {
        let mut store = Self::wrap(Box::new(Remote::new(config)?));
        let catalog = Catalog::in_memory().map_err(|e| Error::Io {
            context: "creating the catalog in memory".into(),
            source: std::io::Error::other(e),
        })?;
        catalog.stale();
        store.catalog = Some(catalog);
        store.feed = Some(super::feed::Feed::new());
        Ok(store)
    }
}
