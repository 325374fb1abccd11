//! The catalog's journal: the sessions a write is about to change, noted before its
//! commit, so that after a crash the catalog knows which sessions it may have missed.
//!
//! A write notes its sessions (one line each, `write(2)`, not synced: a killed process
//! loses nothing the kernel has, and a power cut loses the store's own unsynced log
//! too) before it commits, and the catalog marks each line done once the write's
//! effects are in its index writer (or the write failed). An index commit records the
//! first line still open (not done): at the next open, the lines from there on are the
//! sessions to derive again from the RDF. Lines are cheap to replay twice, never
//! missed: deriving a session from the RDF is idempotent.
//!
//! Files are numbered (`journal-N`); a new one is started once the current one is
//! large and nothing in it is open, and older ones are removed once an index commit
//! points past them.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A journal file this large is replaced by a new one at the next commit that leaves
/// nothing open in it.
const ROTATE_BYTES: u64 = 8 << 20;

/// Where the index's last commit says replay starts: a file and a byte offset in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Mark {
    pub(crate) file: u64,
    pub(crate) offset: u64,
}

/// A noted line: which file, and where in it.
pub(crate) type Line = (u64, u64);

pub(crate) struct Journal {
    dir: PathBuf,
    number: u64,
    file: File,
    len: u64,
    /// Lines noted and not yet done.
    open: BTreeSet<Line>,
}

fn name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("journal-{number}"))
}

/// The numbers of the journal files in `dir`, in order.
fn numbers(dir: &Path) -> Vec<u64> {
    let mut out: Vec<u64> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("journal-")?
                .parse()
                .ok()
        })
        .collect();
    out.sort_unstable();
    out
}

impl Journal {
    /// Opens the journal in `dir`, returning it and the sessions noted from `from` on
    /// (the index's last commit), each once, in the order first noted. Recovery goes
    /// to a new file: the old ones stay until a commit points past them.
    pub(crate) fn open(dir: &Path, from: Mark) -> std::io::Result<(Self, Vec<String>)> {
        std::fs::create_dir_all(dir)?;
        let mut seen = BTreeSet::new();
        let mut replay = Vec::new();
        let existing = numbers(dir);
        for &number in existing.iter().filter(|&&n| n >= from.file) {
            let mut reader = BufReader::new(File::open(name(dir, number))?);
            if number == from.file {
                reader.seek(SeekFrom::Start(from.offset))?;
            }
            let mut line = String::new();
            while reader.read_line(&mut line)? > 0 {
                // A torn last line (the process died mid-write) is incomplete: its
                // write had not committed, since the note comes first.
                if let Some(id) = line.strip_suffix('\n') {
                    if !id.is_empty() && seen.insert(id.to_string()) {
                        replay.push(id.to_string());
                    }
                }
                line.clear();
            }
        }
        let number = existing.last().map_or(from.file, |n| n + 1).max(from.file);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(name(dir, number))?;
        let len = file.metadata()?.len();
        Ok((
            Self {
                dir: dir.to_path_buf(),
                number,
                file,
                len,
                open: BTreeSet::new(),
            },
            replay,
        ))
    }

    /// Notes that `session` is about to change; the line stays open until [`done`].
    ///
    /// [`done`]: Journal::done
    pub(crate) fn note(&mut self, session: &str) -> std::io::Result<Line> {
        let line = (self.number, self.len);
        let text = format!("{session}\n");
        self.file.write_all(text.as_bytes())?;
        self.len += text.len() as u64;
        self.open.insert(line);
        Ok(line)
    }

    /// Notes lines that are open from the start (sessions replayed at open, which stay
    /// open until derived again).
    pub(crate) fn note_open(&mut self, sessions: &[String]) -> std::io::Result<Vec<Line>> {
        sessions.iter().map(|s| self.note(s)).collect()
    }

    pub(crate) fn done(&mut self, line: Line) {
        self.open.remove(&line);
    }

    /// Where replay must start if the index committed now: the first open line, or
    /// the end of the journal. Starts a new file first when this one is large and has
    /// nothing open.
    pub(crate) fn mark(&mut self) -> std::io::Result<Mark> {
        if let Some(&(file, offset)) = self.open.first() {
            return Ok(Mark { file, offset });
        }
        if self.len >= ROTATE_BYTES {
            self.number += 1;
            self.file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(name(&self.dir, self.number))?;
            self.len = 0;
        }
        Ok(Mark {
            file: self.number,
            offset: self.len,
        })
    }

    /// Removes the files an index commit at `mark` no longer needs.
    pub(crate) fn prune(&self, mark: Mark) {
        for number in numbers(&self.dir) {
            if number < mark.file {
                let _ = std::fs::remove_file(name(&self.dir, number));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_from_the_mark_on_are_replayed_once_each_and_a_torn_line_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, replay) = Journal::open(dir.path(), Mark::default()).unwrap();
        assert!(replay.is_empty());
        let a = j.note("a").unwrap();
        j.done(a);
        let mark = j.mark().unwrap();
        let b = j.note("b").unwrap();
        j.note("c").unwrap();
        j.note("b").unwrap();
        j.done(b);
        // `c` is still open: a commit now must replay from it.
        assert_eq!(j.mark().unwrap(), Mark { file: 0, offset: 4 });
        std::fs::OpenOptions::new()
            .append(true)
            .open(name(dir.path(), 0))
            .unwrap()
            .write_all(b"torn")
            .unwrap();
        drop(j);
        let (j, replay) = Journal::open(dir.path(), mark).unwrap();
        assert_eq!(replay, ["b", "c"]);
        // Recovery writes to a new file; the old one goes once a commit is past it.
        assert_eq!(j.number, 1);
        j.prune(Mark { file: 1, offset: 0 });
        assert_eq!(numbers(dir.path()), [1]);
    }
}
