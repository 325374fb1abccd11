//! A session's fork chain: the session and its ancestors, root first, and which of them
//! stores which of the leaf's turns.

use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::rdf::SessionNode;

/// A session and its ancestors, root first: never empty, the leaf last.
#[derive(Clone, Debug)]
pub(crate) struct Chain {
    levels: Vec<SessionNode>,
}

/// Turns `from..to` of the leaf, stored by `owner`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span<'c> {
    pub(crate) owner: &'c SessionNode,
    pub(crate) from: u64,
    pub(crate) to: u64,
}

impl Chain {
    /// The chain of `levels`, root first; `None` if there are none.
    pub(crate) fn new(levels: Vec<SessionNode>) -> Option<Self> {
        (!levels.is_empty()).then_some(Self { levels })
    }

    /// Root first.
    pub(crate) fn levels(&self) -> &[SessionNode] {
        &self.levels
    }

    pub(crate) fn leaf(&self) -> &SessionNode {
        self.levels.last().expect("a chain is never empty")
    }

    pub(crate) fn root(&self) -> &SessionNode {
        &self.levels[0]
    }

    /// The leaf's parent, unless the leaf is a root.
    pub(crate) fn parent(&self) -> Option<&SessionNode> {
        self.levels.len().checked_sub(2).map(|i| &self.levels[i])
    }

    /// The number of levels: a fork of the leaf would have this depth.
    pub(crate) fn len(&self) -> usize {
        self.levels.len()
    }

    /// The leaf's ancestors as a chain of their own (the parent's), if any.
    pub(crate) fn ancestors(&self) -> Option<Chain> {
        Chain::new(self.levels[..self.levels.len() - 1].to_vec())
    }

    /// What the leaf sees of level `level`'s own turns: those below the lowest fork
    /// point of the levels after it (a fork of a fork may cut deeper into the prefix
    /// than its parent did). `u64::MAX` for the leaf.
    pub(crate) fn visible_limit(&self, level: usize) -> u64 {
        self.levels[level + 1..]
            .iter()
            .map(SessionNode::own_start)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Which level stores turn `index` of the leaf, if the leaf has it.
    pub(crate) fn owner_of(&self, index: u64) -> Option<&SessionNode> {
        if index >= self.leaf().length {
            return None;
        }
        self.levels
            .iter()
            .enumerate()
            .rev()
            .find(|(level, f)| f.own_start() <= index && index < self.visible_limit(*level))
            .map(|(_, f)| f)
    }

    /// Which level stores which of the leaf's turns `0..=up_to` (all of them without
    /// `up_to`): spans, contiguous from index 0. An `up_to` past the end is an error
    /// naming the session and the valid range.
    pub(crate) fn spans(&self, id: &SessionId, up_to: Option<u64>) -> Result<Vec<Span<'_>>> {
        let leaf = self.leaf();
        let end = match up_to {
            None => leaf.length,
            Some(n) if n < leaf.length => n + 1,
            Some(n) => {
                return Err(Error::IndexOutOfRange {
                    session: id.to_string(),
                    index: n.into(),
                    valid: match leaf.length {
                        0 => "none: the session has no turns".into(),
                        length => format!("0..={}", length - 1),
                    },
                })
            }
        };
        let mut spans = Vec::new();
        let mut next = 0;
        for (level, owner) in self.levels.iter().enumerate() {
            let stop = self.visible_limit(level).min(owner.length).min(end);
            let from = owner.own_start().max(next);
            if from < stop {
                if from != next {
                    break;
                }
                spans.push(Span {
                    owner,
                    from,
                    to: stop,
                });
                next = stop;
            }
        }
        if next != end {
            return Err(Error::Corrupt {
                session: id.to_string(),
                detail: format!("the chain yields {next} turns where {end} were expected"),
            });
        }
        Ok(spans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxigraph::model::NamedNode;

    fn node(id: &str, parent: Option<&str>, at: u64, length: u64) -> SessionNode {
        let iri = |id: &str| NamedNode::new(format!("urn:forktrail:session:{id}")).unwrap();
        SessionNode {
            length,
            ..SessionNode::lineage(
                SessionId::new(id).unwrap(),
                iri(id),
                parent.map(iri),
                parent.map(|_| at),
            )
        }
    }

    #[test]
    fn a_fork_of_a_fork_cutting_inside_the_prefix_hides_the_parents_later_turns() {
        // a: 0..6; b forks a at 4 and owns 4..7; c forks b at 2 and owns 2..5.
        let chain = Chain::new(vec![
            node("a", None, 0, 6),
            node("b", Some("a"), 4, 7),
            node("c", Some("b"), 2, 5),
        ])
        .unwrap();
        assert_eq!(
            (
                chain.visible_limit(0),
                chain.visible_limit(1),
                chain.visible_limit(2)
            ),
            (2, 2, u64::MAX)
        );
        let spans: Vec<(&str, u64, u64)> = chain
            .spans(&SessionId::new("c").unwrap(), None)
            .unwrap()
            .iter()
            .map(|s| (s.owner.id.as_str(), s.from, s.to))
            .collect();
        assert_eq!(spans, [("a", 0, 2), ("c", 2, 5)]);
        assert_eq!(chain.owner_of(1).unwrap().id.as_str(), "a");
        assert_eq!(chain.owner_of(3).unwrap().id.as_str(), "c");
        assert!(chain.owner_of(5).is_none());
        let err = chain
            .spans(&SessionId::new("c").unwrap(), Some(9))
            .unwrap_err();
        assert!(err.to_string().contains("valid: 0..=4"), "{err}");
    }
}
