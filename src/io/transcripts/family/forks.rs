//! Forks' logs (a Claude Code line's `forkedFrom`, a Pi file's `parentSession`) merged
//! into the family of the log they were forked from, their copied history stored once.

use super::{steps, Family};
use crate::error::Result;
use crate::model::{SessionId, MAX_FORK_DEPTH};
use crate::store::Store;
use std::collections::{BTreeMap, HashMap};

/// Where `key` leads in `links` followed to the end (a chain no longer than the
/// depth limit, and never round a loop).
fn chase(links: &HashMap<String, String>, key: &str) -> String {
    let mut key = key;
    for _ in 0..=MAX_FORK_DEPTH {
        match links.get(key) {
            Some(next) if next != key => key = next,
            _ => break,
        }
    }
    key.to_string()
}

/// The forks' logs an import holds, from their lines' `forkedFrom` (or a Pi file's
/// `parentSession`).
#[derive(Default)]
pub(in crate::io::transcripts) struct Forks {
    /// A fork's log id → the log it was forked from.
    pub(in crate::io::transcripts) fork_of: HashMap<String, String>,
    /// A copied line's uuid → the uuid of the message it copies.
    pub(in crate::io::transcripts) alias: HashMap<String, String>,
}

impl Forks {
    /// Forks whose copied lines already carry the uuids of what they copy: `fork_of`
    /// maps a fork's log to the log it was forked from.
    pub(in crate::io::transcripts) fn of(fork_of: HashMap<String, String>) -> Self {
        Forks {
            fork_of,
            alias: HashMap::new(),
        }
    }

    /// What `uuid` is a copy of, through copies of copies (a fork of a fork).
    fn original(&self, uuid: &str) -> String {
        chase(&self.alias, uuid)
    }

    /// The log a fork's log was first forked from (itself when it is no fork).
    fn root_log(&self, log: &str) -> String {
        chase(&self.fork_of, log)
    }

    /// Aliases the copied lines of a fork's log whose originals neither the import nor
    /// the store names: a fork of a fork imported on its own copies lines its parent's
    /// log had copied in turn, and those were stored once, under the session they
    /// copied, with no source id of their own. Such lines are found by position in the
    /// stored session's chain (their turns' digests equal the stored ones there) and
    /// aliased to the source message of the turn at that index.
    pub(in crate::io::transcripts) fn resolve_stored(
        &mut self,
        store: &Store,
        families: &BTreeMap<Option<String>, Family>,
    ) -> Result<()> {
        for (log, family) in families {
            let Some(from) = log.as_ref().and_then(|l| self.fork_of.get(l)) else {
                continue;
            };
            let Ok(from) = SessionId::new(from.clone()) else {
                continue;
            };
            if families.contains_key(&Some(from.to_string())) || !store.exists(&from)? {
                continue;
            }
            let chain = store.chain(&from)?;
            let (mut digest, mut index) = (String::new(), 0u64);
            // The copies as they were stored: an answer's lines as one turn.
            let family = steps::rebuild(family.clone(), |_| false);
            for node in family.nodes.iter().filter(|n| n.copy) {
                for turn in &node.turns {
                    digest = crate::rdf::turn_digest(&digest, index, turn);
                    index += 1;
                }
                let Some(last) = index.checked_sub(1).filter(|&l| l < chain.leaf().length) else {
                    break;
                };
                if store.digest_in_chain(&chain, last)? != digest {
                    break;
                }
                let original = self.original(&node.uuid);
                if store.rdf().session_holding(&original)?.is_some() {
                    continue;
                }
                let owner = chain.owner_of(last).expect("an index within the chain");
                let turn = store.iris.turn(owner.id.as_str(), last);
                // A turn made of several lines has a source id per line; any pairing of
                // the copies with them names the same turn.
                let mut sources = store.rdf().source_ids(&turn, &owner.iri)?;
                sources.sort_unstable();
                for (line, source) in std::iter::once(&node.uuid).chain(&node.merged).zip(sources) {
                    self.alias.insert(line.clone(), source);
                }
            }
        }
        Ok(())
    }

    /// Moves each fork's lines into the family of the log it was forked from: its copied
    /// lines become the messages they copy (dropped where the import holds those), and
    /// its own lines hang on them. Its own lines keep their `sessionId`, which makes
    /// them a session of their own (a fork named by the fork's log), so the copied
    /// history is stored once.
    pub(in crate::io::transcripts) fn merge(
        &self,
        mut families: BTreeMap<Option<String>, Family>,
    ) -> BTreeMap<Option<String>, Family> {
        if self.fork_of.is_empty() {
            return families;
        }
        let keys: Vec<Option<String>> = families.keys().cloned().collect();
        for key in keys {
            let Some(log) = &key else { continue };
            let root = self.root_log(log);
            if root == *log {
                continue;
            }
            let Some(fork) = families.remove(&key) else {
                continue;
            };
            let into = families.entry(Some(root)).or_default();
            for (uuid, parent) in fork.passthrough {
                let parent = parent.map(|p| self.original(&p));
                into.passthrough.insert(self.original(&uuid), parent);
            }
            for mut node in fork.nodes {
                node.uuid = self.original(&node.uuid);
                node.parent = node.parent.map(|p| self.original(&p));
                if node.copy && into.by_uuid.contains_key(&node.uuid) {
                    continue;
                }
                into.by_uuid.insert(node.uuid.clone(), into.nodes.len());
                into.nodes.push(node);
            }
        }
        families
    }
}
