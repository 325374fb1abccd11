//! Model-based differential test: random sequences of create, append, fork (at random
//! points, of forks), detach, delete and merge, applied to forktrail and to a plain
//! reference model that copies histories; after every step each session's replay
//! equals the model's, in memory and on RocksDB. A fixed seed and case count,
//! so a run is reproducible.

use crate::common;

#[allow(unused_imports)]
use common::*;
use forktrail::{DeleteOptions, Error, ForkOptions, MergeOptions, NewTurn, Role, SessionId};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    Create,
    /// Append to the `n`-th live session (modulo their number).
    Append(usize, bool, String),
    /// Fork the `n`-th session at `at` percent of its length.
    Fork(usize, u8),
    Detach(usize),
    Delete(usize, bool),
    Merge(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::Create),
        6 => (any::<usize>(), any::<bool>(), "[a-z \"'{}\\\\]{0,12}")
            .prop_map(|(n, user, text)| Op::Append(n, user, text)),
        3 => (any::<usize>(), 0..=100u8).prop_map(|(n, at)| Op::Fork(n, at)),
        1 => any::<usize>().prop_map(Op::Detach),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(n, c)| Op::Delete(n, c)),
        1 => any::<usize>().prop_map(Op::Merge),
    ]
}

/// The reference: every session's full history, copied at a fork, and its parent.
#[derive(Default)]
struct Model {
    turns: BTreeMap<SessionId, Vec<(Role, String)>>,
    parent: BTreeMap<SessionId, Option<SessionId>>,
}

impl Model {
    fn nth(&self, n: usize) -> Option<SessionId> {
        let ids: Vec<&SessionId> = self.turns.keys().collect();
        (!ids.is_empty()).then(|| ids[n % ids.len()].clone())
    }

    fn children(&self, id: &SessionId) -> Vec<SessionId> {
        self.parent
            .iter()
            .filter(|(_, p)| p.as_ref() == Some(id))
            .map(|(c, _)| c.clone())
            .collect()
    }

    fn subtree(&self, id: &SessionId) -> Vec<SessionId> {
        let mut out = vec![id.clone()];
        let mut next = 0;
        while next < out.len() {
            out.extend(self.children(&out[next]));
            next += 1;
        }
        out
    }
}

fn run(store: &forktrail::Store, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Create => {
                let id = store.create_session(Default::default()).unwrap();
                model.turns.insert(id.clone(), Vec::new());
                model.parent.insert(id, None);
            }
            Op::Append(n, user, text) => {
                let Some(id) = model.nth(*n) else { continue };
                let role = if *user { Role::User } else { Role::Assistant };
                let index = store.append(&id, NewTurn::new(role, text.clone())).unwrap();
                let turns = model.turns.get_mut(&id).unwrap();
                prop_assert_eq!(index, turns.len() as u64);
                turns.push((role, text.clone()));
            }
            Op::Fork(n, at) => {
                let Some(id) = model.nth(*n) else { continue };
                let len = model.turns[&id].len();
                let at = len * usize::from(*at) / 100;
                let options = ForkOptions {
                    at: Some(at as u64),
                    label: Some(format!("step-{step}")),
                    ..Default::default()
                };
                match store.fork(&id, options) {
                    Ok(plan) => {
                        let child: SessionId = plan.session.parse().unwrap();
                        let prefix = model.turns[&id][..at].to_vec();
                        model.turns.insert(child.clone(), prefix);
                        model.parent.insert(child, Some(id));
                    }
                    // The only refusal a fork may give here: the chain is at its limit.
                    Err(Error::ChainTooDeep { .. }) => {}
                    Err(e) => return Err(TestCaseError::fail(format!("fork: {e}"))),
                }
            }
            Op::Detach(n) => {
                let Some(id) = model.nth(*n) else { continue };
                let result = store.detach(&id);
                if model.parent[&id].is_none() {
                    prop_assert!(result.is_err(), "detach of a root {id} must be refused");
                } else {
                    result.unwrap();
                    model.parent.insert(id, None);
                }
            }
            Op::Delete(n, cascade) => {
                let Some(id) = model.nth(*n) else { continue };
                let options = DeleteOptions {
                    cascade: *cascade,
                    ..Default::default()
                };
                let result = store.delete_with(&id, options);
                if !cascade && !model.children(&id).is_empty() {
                    prop_assert!(result.is_err(), "delete of {id}, which has children");
                } else {
                    result.unwrap();
                    for gone in model.subtree(&id) {
                        model.turns.remove(&gone);
                        model.parent.remove(&gone);
                    }
                }
            }
            Op::Merge(n) => {
                let Some(id) = model.nth(*n) else { continue };
                let Some(parent) = model.parent[&id].clone() else {
                    continue;
                };
                // A merge needs new turns of the child's own; refusals change nothing.
                if let Ok(plan) = store.merge(&id, MergeOptions::default()) {
                    let turns = model.turns.get_mut(&parent).unwrap();
                    prop_assert_eq!(plan.index, turns.len() as u64);
                    turns.push((Role::Assistant, plan.content.clone()));
                }
            }
        }
        // After every step, every session replays as the model says.
        prop_assert_eq!(store.list().unwrap().len(), model.turns.len());
        for (id, turns) in &model.turns {
            let got: Vec<(Role, String)> = store
                .replay(id, None)
                .unwrap()
                .into_iter()
                .enumerate()
                .map(|(i, r)| {
                    assert_eq!(r.index, i as u64);
                    (r.role, r.content)
                })
                .collect();
            prop_assert_eq!(&got, turns, "session {} after step {} ({:?})", id, step, op);
        }
    }
    Ok(())
}

#[test]
fn every_step_replays_as_a_model_that_copies_histories() {
    let config = Config {
        cases: 128,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    runner
        .run(&proptest::collection::vec(op(), 1..40), |ops| {
            run(&forktrail::Store::in_memory().unwrap(), &ops)?;
            #[cfg(feature = "rocksdb")]
            run(&rocksdb(), &ops)?;
            Ok(())
        })
        .unwrap();
}
