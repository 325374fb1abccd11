//! Shared setup: stores of every kind, small builders, and the "changes nothing" check.
#![allow(dead_code)]

pub mod stub;

use forktrail::{Error, ForkOptions, NewSession, NewTurn, Role, SessionId, Store};

/// A store under test, with the temp dir that keeps an on-disk one alive.
pub struct TestStore {
    pub store: Store,
    pub kind: &'static str,
    _dir: Option<tempfile::TempDir>,
}

impl std::ops::Deref for TestStore {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

/// One in-memory store and, with the `rocksdb` feature, one on-disk store.
pub fn stores() -> Vec<TestStore> {
    #[allow(unused_mut)]
    let mut out = vec![TestStore {
        store: Store::in_memory().unwrap(),
        kind: "memory",
        _dir: None,
    }];
    #[cfg(feature = "rocksdb")]
    out.push(rocksdb());
    out
}

#[cfg(feature = "rocksdb")]
pub fn rocksdb() -> TestStore {
    let dir = tempfile::tempdir().unwrap();
    TestStore {
        store: Store::open(dir.path().join("store")).unwrap(),
        kind: "rocksdb",
        _dir: Some(dir),
    }
}

pub fn sid(s: &str) -> SessionId {
    s.parse().unwrap()
}

/// A root session `id` with `n` turns alternating user/assistant, contents `"{id} {i}"`.
pub fn session_with(store: &Store, id: &str, n: usize) -> SessionId {
    let id = store
        .create_session(NewSession {
            id: Some(id.into()),
            ..Default::default()
        })
        .unwrap();
    append_n(store, &id, n);
    id
}

pub fn append_n(store: &Store, id: &SessionId, n: usize) {
    for _ in 0..n {
        let len = store.info(id).unwrap().length;
        let role = if len.is_multiple_of(2) {
            Role::User
        } else {
            Role::Assistant
        };
        store
            .append(id, NewTurn::new(role, format!("{id} {len}")))
            .unwrap();
    }
}

pub fn fork_at(store: &Store, parent: &SessionId, at: u64, id: &str, label: &str) -> SessionId {
    let plan = store
        .fork(
            parent,
            ForkOptions {
                at: Some(at),
                label: Some(label.into()),
                id: Some(id.into()),
                ..Default::default()
            },
        )
        .unwrap();
    plan.session
}

/// Runs `op`, which must fail, and checks the store's quads are exactly as before.
pub fn fails_unchanged<T: std::fmt::Debug>(
    store: &Store,
    op: impl FnOnce() -> Result<T, Error>,
) -> Error {
    let before = quads(store);
    let err = op().expect_err("the operation should have failed");
    assert_eq!(
        before,
        quads(store),
        "a failed operation changed the store ({err})"
    );
    err
}

/// Every quad of the store, sorted, as N-Quads lines.
pub fn quads(store: &Store) -> Vec<String> {
    let mut all: Vec<String> = store
        .oxigraph()
        .iter()
        .map(|q| q.unwrap().to_string())
        .collect();
    all.sort();
    all
}
