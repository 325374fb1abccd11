//! The digest version of the store's turns (see `rdf::DigestVersion`): which one the
//! store is at, and the check a write to a shared store makes first. Bringing a store
//! up from an older version is `upgrade.rs`'s.

use super::Store;
use crate::error::{Error, Result};
use crate::model::DigestVersion;

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

    pub(super) fn stored_digest_version(&self) -> Result<DigestVersion> {
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

    /// Records the version this process knows the store to be at.
    pub(crate) fn know_digest_version(&self, version: DigestVersion) {
        *self.digests.lock().unwrap_or_else(|p| p.into_inner()) = Some(version);
    }

    /// Before a write to a shared store, until this process knows the store's version:
    /// a store of an older version is refused (its upgrade holds every writer:
    /// `forktrail upgrade`); `true` when the store states no version (and has no turn
    /// whose digest the versions disagree on): the write then states the current one,
    /// in the same commit, before anything makes the versions disagree.
    pub(crate) fn check_shared_digests(&self) -> Result<bool> {
        if self
            .digests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            return Ok(false);
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
            return Ok(true);
        }
        self.know_digest_version(DigestVersion::CURRENT);
        Ok(false)
    }
}
