//! The record index: each session's replay records packed in one file beside a store on
//! disk, so that a cold replay reads one file per session instead of making a point
//! read per turn in RocksDB.
//!
//! It is derived and never the source of truth. Appends extend a session's file after
//! their commit; a file that is missing, stale or damaged is rebuilt from the RDF by the
//! next replay that needs it; and every read checks the records against the turns'
//! digest chain (`Store::replay`), falling back to the RDF on a mismatch. Deletes,
//! pops, detaches, SPARQL updates and imports drop the files they may make stale.
//!
//! A file is a header (magic, the session's first own index, its IRI) and then records
//! `index | role | kind | digest | branch | content | extras | index`, lengths in front
//! (`extras`: a byte of flags, then each of name, tool call id, tool calls and the
//! payload's SHA-256 the turn has, what the digest covers besides); the trailing
//! index lets an append check, by reading 8 bytes, that the file ends right before the
//! turn it adds; the files of the sessions appended to last stay open, so that an
//! append to one of them is a single write. Nothing is synced: after a crash a file may
//! end early or in a torn record, which a read notices and the rebuild repairs.

#![cfg_attr(not(feature = "rocksdb"), allow(dead_code))]

use crate::model::{Kind, NewTurn, ReplayRecord, Role};
use crate::rdf::{digest_of, payload_sha256, DigestFields, PayloadRef};
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The directory of record files inside a store's directory.
pub(crate) const DIR: &str = "forktrail-records";
/// Version 2 keeps what the digest of version 2 covers; a file of version 1 is read as
/// no file, and written anew by the next replay.
const MAGIC: &[u8; 8] = b"FTREC02\n";

/// One turn as the index keeps it: what replay returns and what its digest covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) index: u64,
    pub(crate) role: Role,
    pub(crate) kind: Kind,
    pub(crate) content: String,
    /// The turn's own branch label (a turn copied by detach), else the session's.
    pub(crate) branch: Option<String>,
    /// The turn's digest, as the store holds it when the record was written.
    pub(crate) digest: String,
    pub(crate) name: Option<String>,
    pub(crate) tool_call_id: Option<String>,
    pub(crate) tool_calls: Option<String>,
    /// The SHA-256 of the turn's payload: the digest covers it, replay does not return it.
    pub(crate) payload_sha256: Option<String>,
}

impl Entry {
    /// The entry of new turn `turn`, written at `index` with `digest` in its session's
    /// branch.
    pub(crate) fn new_turn(index: u64, turn: NewTurn, digest: String) -> Entry {
        Entry {
            index,
            role: turn.role,
            kind: turn.kind,
            payload_sha256: turn.payload.as_deref().map(payload_sha256),
            content: turn.content,
            branch: None,
            digest,
            name: turn.name,
            tool_call_id: turn.tool_call_id,
            tool_calls: turn.tool_calls,
        }
    }

    /// What the entry's digest covers.
    pub(crate) fn fields(&self) -> DigestFields<'_> {
        DigestFields {
            role: self.role,
            kind: self.kind,
            content: &self.content,
            name: self.name.as_deref(),
            tool_call_id: self.tool_call_id.as_deref(),
            tool_calls: self.tool_calls.as_deref(),
            payload: self.payload_sha256.as_deref().map(PayloadRef::Sha256),
        }
    }

    /// The replay record of the entry, in `branch` unless it carries a label of its own.
    pub(crate) fn into_record(self, branch: &str) -> ReplayRecord {
        ReplayRecord {
            index: self.index,
            role: self.role,
            content: self.content,
            branch: self.branch.unwrap_or_else(|| branch.to_string()),
            kind: self.kind,
            name: self.name,
            tool_call_id: self.tool_call_id,
            tool_calls: self.tool_calls,
        }
    }
}

/// Whether `entries` chain: each one's digest is the digest of its fields after the
/// one before it (`base` before the first). With the last digest equal to the store's,
/// that vouches for every record, as the store's own digest chain does for its turns.
/// Each link is checked on its own, so long runs are checked on two threads.
pub(crate) fn chained(base: &str, entries: &[Entry]) -> bool {
    fn links(prev: &str, entries: &[Entry]) -> bool {
        let mut prev = prev;
        entries.iter().all(|e| {
            let ok = digest_of(prev, e.index, &e.fields()) == e.digest;
            prev = &e.digest;
            ok
        })
    }
    if entries.len() < 512 {
        return links(base, entries);
    }
    let mid = entries.len() / 2;
    let (head, tail) = entries.split_at(mid);
    std::thread::scope(|scope| {
        let second = scope.spawn(|| links(&head[mid - 1].digest, tail));
        let first = links(base, head);
        first && second.join().unwrap_or(false)
    })
}

/// How many record files stay open for appending: enough for the sessions a busy
/// server appends to at once, few against the descriptors RocksDB leaves free.
const OPEN_FILES: usize = 16;

/// The record files of one store.
pub(crate) struct Records {
    dir: PathBuf,
    /// File changes happen under this lock.
    state: Mutex<State>,
}

struct State {
    /// Bumped by every drop; a reader that rebuilds a file does so only if nothing was
    /// dropped since it started reading the RDF.
    epoch: u64,
    /// Files recently appended to, open, with the index their next record must have:
    /// an append to one of them is one write, without opening the file and reading its
    /// trailer. A file is closed here before it is removed.
    open: Vec<Open>,
}

struct Open {
    path: PathBuf,
    file: std::fs::File,
    next: u64,
}

/// Consecutive records encoded as a file holds them, with their first and last index.
#[derive(Default)]
pub(crate) struct Run {
    bytes: Vec<u8>,
    indices: Option<(u64, u64)>,
}

impl Run {
    /// Adds the record of the turn after the last one pushed.
    pub(crate) fn push(&mut self, entry: &Entry) {
        encode(entry, &mut self.bytes);
        let first = self.indices.map_or(entry.index, |(first, _)| first);
        self.indices = Some((first, entry.index));
    }
}

/// What a session's file holds.
pub(crate) struct Stored {
    /// Records from the session's first own index on, contiguous.
    pub(crate) entries: Vec<Entry>,
    /// Whether the file ends where its last good record does (no torn or stray bytes).
    pub(crate) clean: bool,
}

impl Records {
    pub(crate) fn new(store_dir: &Path) -> Self {
        Self {
            dir: store_dir.join(DIR),
            state: Mutex::new(State {
                epoch: 0,
                open: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    fn file_of(&self, session: &str) -> PathBuf {
        let name = crate::rdf::sha256_hex(&[session.as_bytes()]);
        self.dir.join(format!("{}.rec", &name[..32]))
    }

    /// The records of `session`, whose own turns start at `own_start`; `None` when it
    /// has no file, or a file for another session or another first index.
    pub(crate) fn read(&self, session: &str, own_start: u64) -> Option<Stored> {
        let bytes = std::fs::read(self.file_of(session)).ok()?;
        let mut r = Cursor(&bytes);
        let body = header(&mut r, session, own_start)?;
        let mut r = Cursor(body);
        let mut entries = Vec::new();
        let mut next = own_start;
        loop {
            if r.0.is_empty() {
                return Some(Stored {
                    entries,
                    clean: true,
                });
            }
            match record(&mut r, next) {
                Some(entry) => {
                    entries.push(entry);
                    next += 1;
                }
                None => {
                    return Some(Stored {
                        entries,
                        clean: false,
                    })
                }
            }
        }
    }

    /// The index of the last record in the file of `session`, if it has one: a hint
    /// for finding the session's length, which the caller checks against the store.
    pub(crate) fn last_index(&self, session: &str, own_start: u64) -> Option<u64> {
        let mut file = std::fs::File::open(self.file_of(session)).ok()?;
        last_index(&mut file, session, own_start).ok()?
    }

    /// Extends the file of `session` with turns it just committed, if the file ends
    /// right before them; a file that does not is removed (the next replay rebuilds
    /// it). Best effort: the index is derived.
    pub(crate) fn appended<'e>(
        &self,
        session: &str,
        own_start: u64,
        entries: impl IntoIterator<Item = &'e Entry>,
    ) {
        let mut state = self.lock();
        self.extend(&mut state, session, own_start, entries);
    }

    /// Extends the file with `entries` read from the RDF by a replay that started at
    /// `epoch`, or writes it anew (`fresh`) when the old one was damaged.
    pub(crate) fn fill(
        &self,
        epoch: u64,
        session: &str,
        own_start: u64,
        entries: &[Entry],
        fresh: bool,
    ) {
        let mut state = self.lock();
        if state.epoch != epoch || entries.is_empty() {
            return;
        }
        if fresh {
            state.remove(&self.file_of(session));
        }
        self.extend(&mut state, session, own_start, entries);
    }

    /// Writes a run of records a committed import encoded as it went, for `session`
    /// (see [`Records::appended`]).
    pub(crate) fn imported(&self, session: &str, own_start: u64, run: &Run) {
        let mut state = self.lock();
        self.write_run(&mut state, session, own_start, run);
    }

    fn extend<'e>(
        &self,
        state: &mut State,
        session: &str,
        own_start: u64,
        entries: impl IntoIterator<Item = &'e Entry>,
    ) {
        let mut run = Run::default();
        for entry in entries {
            run.push(entry);
        }
        self.write_run(state, session, own_start, &run);
    }

    fn write_run(&self, state: &mut State, session: &str, own_start: u64, run: &Run) {
        let (Some((first, last)), out) = (run.indices, &run.bytes) else {
            return;
        };
        let path = self.file_of(session);
        // A file open here ends right before `next` (its records are appended only
        // through it, and it is closed before any other change to the file).
        let file = match state.open.iter().position(|o| o.path == path) {
            Some(at) if state.open[at].next == first => Ok(Some(state.open.remove(at).file)),
            Some(at) => {
                state.open.remove(at);
                self.try_open(&path, session, own_start, first)
            }
            None => self.try_open(&path, session, own_start, first),
        };
        let written = file.and_then(|file| {
            let Some(file) = file else {
                return Ok(None);
            };
            (&file).write_all(out)?;
            Ok(Some(file))
        });
        match written {
            Ok(Some(file)) => {
                if state.open.len() >= OPEN_FILES {
                    state.open.remove(0);
                }
                state.open.push(Open {
                    path,
                    file,
                    next: last + 1,
                });
            }
            Ok(None) => {}
            Err(_) => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// The file of `session` opened for appending records from index `first`: created
    /// with its header when `first` is its first own index; `None` when there is no
    /// file and `first` is not where one starts (the next replay writes it whole); an
    /// error when the file does not end right before `first`.
    fn try_open(
        &self,
        path: &Path,
        session: &str,
        own_start: u64,
        first: u64,
    ) -> std::io::Result<Option<std::fs::File>> {
        let stale = || std::io::Error::other("the file does not end before these turns");
        match OpenOptions::new().read(true).append(true).open(path) {
            Ok(mut file) => {
                let expected = match last_index(&mut file, session, own_start)? {
                    Some(last) => last + 1,
                    None => own_start,
                };
                if expected != first {
                    return Err(stale());
                }
                Ok(Some(file))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if first != own_start {
                    return Ok(None);
                }
                std::fs::create_dir_all(&self.dir)?;
                let mut head = Vec::with_capacity(header_len(session));
                head.extend_from_slice(MAGIC);
                head.extend_from_slice(&own_start.to_le_bytes());
                head.extend_from_slice(&(session.len() as u32).to_le_bytes());
                head.extend_from_slice(session.as_bytes());
                let file = OpenOptions::new()
                    .create_new(true)
                    .append(true)
                    .open(path)?;
                if let Err(e) = (&file).write_all(&head) {
                    let _ = std::fs::remove_file(path);
                    return Err(e);
                }
                Ok(Some(file))
            }
            Err(e) => Err(e),
        }
    }

    /// Drops the file of `session` (its turns changed other than by appends).
    pub(crate) fn forget(&self, session: &str) {
        let mut state = self.lock();
        state.epoch += 1;
        state.remove(&self.file_of(session));
    }

    /// Drops every file (a change that may touch any session).
    pub(crate) fn clear(&self) {
        let mut state = self.lock();
        state.epoch += 1;
        state.open.clear();
        if let Ok(files) = std::fs::read_dir(&self.dir) {
            for file in files.flatten() {
                let _ = std::fs::remove_file(file.path());
            }
        }
    }
}

impl State {
    /// Closes the file at `path` if it is open, and removes it.
    fn remove(&mut self, path: &Path) {
        self.open.retain(|o| o.path != path);
        let _ = std::fs::remove_file(path);
    }
}

fn header_len(session: &str) -> usize {
    MAGIC.len() + 8 + 4 + session.len()
}

/// The index the file's last record ends with, `None` when it has no record; an error
/// when the file is not one for `own_start`.
fn last_index(
    file: &mut std::fs::File,
    session: &str,
    own_start: u64,
) -> std::io::Result<Option<u64>> {
    let stale = || std::io::Error::other("not the file of these turns");
    let len = file.metadata()?.len();
    let head = header_len(session) as u64;
    let mut start = [0u8; 16];
    if len < head || file.read_exact(&mut start).is_err() {
        return Err(stale());
    }
    if &start[..8] != MAGIC || u64::from_le_bytes(start[8..].try_into().unwrap()) != own_start {
        return Err(stale());
    }
    if len == head {
        return Ok(None);
    }
    let mut last = [0u8; 8];
    file.seek(SeekFrom::End(-8))?;
    file.read_exact(&mut last)?;
    Ok(Some(u64::from_le_bytes(last)))
}

fn encode(e: &Entry, out: &mut Vec<u8>) {
    let (role, kind) = (e.role.as_str(), e.kind.as_str());
    let branch = e.branch.as_deref().unwrap_or("");
    out.extend_from_slice(&e.index.to_le_bytes());
    out.push(role.len() as u8);
    out.push(kind.len() as u8);
    out.push(u8::from(e.branch.is_some()));
    out.push(e.digest.len() as u8);
    out.extend_from_slice(&(branch.len() as u32).to_le_bytes());
    out.extend_from_slice(&(e.content.len() as u64).to_le_bytes());
    out.extend_from_slice(role.as_bytes());
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(e.digest.as_bytes());
    out.extend_from_slice(branch.as_bytes());
    out.extend_from_slice(e.content.as_bytes());
    let extras = [&e.name, &e.tool_call_id, &e.tool_calls, &e.payload_sha256];
    let flags = extras
        .iter()
        .enumerate()
        .fold(0u8, |f, (bit, v)| f | (u8::from(v.is_some()) << bit));
    out.push(flags);
    for value in extras.into_iter().flatten() {
        out.extend_from_slice(&(value.len() as u64).to_le_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    out.extend_from_slice(&e.index.to_le_bytes());
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn text(&mut self, n: usize) -> Option<&'a str> {
        std::str::from_utf8(self.take(n)?).ok()
    }
}

/// Checks the header and returns the bytes after it.
fn header<'a>(r: &mut Cursor<'a>, session: &str, own_start: u64) -> Option<&'a [u8]> {
    (r.take(8)? == MAGIC).then_some(())?;
    (r.u64()? == own_start).then_some(())?;
    let n = r.u32()? as usize;
    (r.take(n)? == session.as_bytes()).then_some(())?;
    Some(r.0)
}

/// The record with index `index` at the cursor, if it is whole and well formed.
fn record(r: &mut Cursor<'_>, index: u64) -> Option<Entry> {
    (r.u64()? == index).then_some(())?;
    let (role, kind, has_branch) = (r.byte()? as usize, r.byte()? as usize, r.byte()?);
    let digest = r.byte()? as usize;
    let branch = r.u32()? as usize;
    let content = usize::try_from(r.u64()?).ok()?;
    let role: Role = r.text(role)?.parse().ok()?;
    let kind: Kind = r.text(kind)?.parse().ok()?;
    let digest = r.text(digest)?.to_string();
    let branch = r.text(branch)?.to_string();
    let content = r.text(content)?.to_string();
    let flags = r.byte()?;
    let mut extra = |bit: u8| -> Option<Option<String>> {
        if flags & (1 << bit) == 0 {
            return Some(None);
        }
        let n = usize::try_from(r.u64()?).ok()?;
        Some(Some(r.text(n)?.to_string()))
    };
    let (name, tool_call_id, tool_calls, payload_sha256) =
        (extra(0)?, extra(1)?, extra(2)?, extra(3)?);
    (r.u64()? == index).then_some(())?;
    Some(Entry {
        index,
        role,
        kind,
        content,
        branch: (has_branch == 1).then_some(branch),
        digest,
        name,
        tool_call_id,
        tool_calls,
        payload_sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(from: u64, to: u64) -> Vec<Entry> {
        (from..to)
            .map(|index| Entry {
                index,
                role: Role::User,
                kind: Kind::Message,
                content: format!("turn {index} ü"),
                branch: (index == 3).then(|| "main".to_string()),
                digest: format!("{index:064x}"),
                name: (index == 2).then(|| "a tool".to_string()),
                tool_call_id: (index == 2).then(|| "call-1".to_string()),
                tool_calls: (index == 1).then(|| "[]".to_string()),
                payload_sha256: (index == 4).then(|| "ab".repeat(32)),
            })
            .collect()
    }

    /// A run whose digests chain from `base`.
    fn chain(base: &str, n: u64) -> Vec<Entry> {
        let mut prev = base.to_string();
        (0..n)
            .map(|index| {
                let content = format!("turn {index}");
                let mut entry = Entry {
                    index,
                    role: Role::Tool,
                    kind: Kind::Note,
                    content,
                    branch: None,
                    digest: String::new(),
                    name: None,
                    tool_call_id: (index % 3 == 1).then(|| format!("call-{index}")),
                    tool_calls: (index % 3 == 2)
                        .then(|| format!(r#"[{{"id":"{index}","name":"f","arguments":"{{}}"}}]"#)),
                    payload_sha256: (index % 5 == 4).then(|| "cd".repeat(32)),
                };
                prev = digest_of(&prev, index, &entry.fields());
                entry.digest = prev.clone();
                entry
            })
            .collect()
    }

    #[test]
    fn every_link_of_a_run_is_checked_short_or_long() {
        for n in [3, 2000] {
            let good = chain("base", n);
            assert!(chained("base", &good), "{n}");
            assert!(!chained("other base", &good), "{n}");
            for at in [0, n / 2 - 1, n / 2, n - 1] {
                let mut bad = good.clone();
                bad[at as usize].content.push('!');
                assert!(!chained("base", &bad), "{n} {at}");
                let mut bad = good.clone();
                bad[at as usize].kind = Kind::Message;
                assert!(!chained("base", &bad), "{n} {at}");
                let mut bad = good.clone();
                bad[at as usize].tool_call_id = Some("another call".into());
                assert!(!chained("base", &bad), "{n} {at}");
                let mut bad = good.clone();
                bad[at as usize].payload_sha256 = Some("ef".repeat(32));
                assert!(!chained("base", &bad), "{n} {at}");
            }
        }
    }

    #[test]
    fn appends_extend_only_a_file_that_ends_right_before_them() {
        let dir = tempfile::tempdir().unwrap();
        let r = Records::new(dir.path());
        // A fork at 2: its file starts at 2; an append elsewhere writes nothing.
        r.appended("s", 2, &entries(3, 4));
        assert!(r.read("s", 2).is_none());
        r.appended("s", 2, &entries(2, 4));
        r.appended("s", 2, &entries(4, 5));
        let read = r.read("s", 2).unwrap();
        assert_eq!(read.entries, entries(2, 5));
        assert!(read.clean);
        // Another first index (a detach), or another session: not this file.
        assert!(r.read("s", 0).is_none());
        assert!(r.read("t", 2).is_none());
        // A gap removes the file rather than leave it wrong.
        r.appended("s", 2, &entries(6, 7));
        assert!(r.read("s", 2).is_none());
    }

    #[test]
    fn a_torn_tail_is_read_up_to_the_last_whole_record_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let r = Records::new(dir.path());
        r.appended("s", 0, &entries(0, 3));
        let path = r.file_of("s");
        let len = std::fs::metadata(&path).unwrap().len();
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(len - 5).unwrap();
        // The process that tore it is gone: the store is opened again.
        let r = Records::new(dir.path());
        let read = r.read("s", 0).unwrap();
        assert_eq!(read.entries, entries(0, 2));
        assert!(!read.clean);
        // The trailer no longer names turn 2: an append of 3 removes the file.
        r.appended("s", 0, &entries(3, 4));
        assert!(r.read("s", 0).is_none());
    }

    #[test]
    fn appends_go_on_through_open_files_and_start_anew_after_a_forget() {
        let dir = tempfile::tempdir().unwrap();
        let r = Records::new(dir.path());
        for at in 0..4 {
            r.appended("s", 0, &entries(at, at + 1));
        }
        assert_eq!(r.read("s", 0).unwrap().entries, entries(0, 4));
        // Forgotten: an append past its first index writes nothing, one from it starts
        // a new file.
        r.forget("s");
        r.appended("s", 0, &entries(4, 5));
        assert!(r.read("s", 0).is_none());
        r.appended("s", 0, &entries(0, 2));
        assert_eq!(r.read("s", 0).unwrap().entries, entries(0, 2));
        // More sessions than files kept open: each still ends where it should.
        for n in 0..OPEN_FILES + 3 {
            let name = format!("t{n}");
            r.appended(&name, 1, &entries(1, 2));
        }
        for n in 0..OPEN_FILES + 3 {
            let name = format!("t{n}");
            r.appended(&name, 1, &entries(2, 3));
            assert_eq!(r.read(&name, 1).unwrap().entries, entries(1, 3), "{name}");
        }
    }

    #[test]
    fn a_fill_from_a_reader_that_started_before_a_drop_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let r = Records::new(dir.path());
        let epoch = r.epoch();
        r.forget("other");
        r.fill(epoch, "s", 0, &entries(0, 2), true);
        assert!(r.read("s", 0).is_none());
        r.fill(r.epoch(), "s", 0, &entries(0, 2), true);
        assert_eq!(r.read("s", 0).unwrap().entries, entries(0, 2));
        r.clear();
        assert!(r.read("s", 0).is_none());
    }
}
