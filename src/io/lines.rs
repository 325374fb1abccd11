//! Logs read line by line, each line bounded: the one reader of the JSONL importers
//! (Claude Code, Codex, Pi, OTLP JSON Lines).
//!
//! A line longer than the bound, or not UTF-8, is a fault of that line, not of its
//! file: the importer refuses it as it refuses a malformed line, or skips and reports
//! it under `skip_invalid`, and the rest of the log goes in. An over-long line is
//! counted as it streams past and never held, so it costs no more memory than the
//! bound. Files are opened only where the import allows
//! ([`TranscriptOptions::within`]), and only regular files.

use super::report::TranscriptOptions;
use crate::error::{Error, Result};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// The longest line an import reads unless told otherwise
/// ([`TranscriptOptions::max_line_bytes`]): 64 MiB, twice the largest content a turn
/// takes by default (a line holds it JSON-escaped, or images inlined as base64 beside
/// it), while a line past it costs no more memory than this.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// How much of the start of a file [`ImportFormat::sniff`] reads.
///
/// [`ImportFormat::sniff`]: crate::ImportFormat::sniff
pub(crate) const SNIFF_WINDOW: usize = 1 << 20;

impl TranscriptOptions<'_> {
    /// The longest line read, in bytes.
    pub(crate) fn line_limit(&self) -> usize {
        self.max_line_bytes.unwrap_or(MAX_LINE_BYTES)
    }
}

/// One line of a log: its number (from 1) and its text, or why it cannot be read.
pub(crate) type LogLine = (u64, std::result::Result<String, LineFault>);

/// Why a line cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LineFault {
    /// Longer than the bound (`bytes` counted as it went past, not kept).
    TooLong { bytes: u64, limit: usize },
    /// Not UTF-8: the first invalid byte is at `offset` in the line.
    NotUtf8 { offset: usize },
}

impl std::fmt::Display for LineFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLong { bytes, limit } => write!(
                f,
                "the line is {bytes} bytes, over the limit of {limit} bytes a line \
                 (--max-line-bytes raises it)"
            ),
            Self::NotUtf8 { offset } => write!(
                f,
                "the line is not valid UTF-8 (invalid byte at offset {offset} of the line)"
            ),
        }
    }
}

/// The lines of `input`, each at most `limit` bytes; with `complete_lines`, a last
/// line not ended by a newline (still being written) is left out. Blank lines are left
/// out (their numbers are not reused), a byte-order mark first is not part of the
/// first line, and a `\r` before a newline is not part of its line.
pub(crate) fn read_lines(
    mut input: impl BufRead,
    limit: usize,
    complete_lines: bool,
) -> std::io::Result<Vec<LogLine>> {
    let mut out = Vec::new();
    let mut line: Vec<u8> = Vec::new();
    // Bytes of the line so far, kept or not.
    let mut len: u64 = 0;
    let mut number = 0u64;
    loop {
        let buffer = match input.fill_buf() {
            Ok(buffer) => buffer,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buffer.is_empty() {
            break;
        }
        let newline = buffer.iter().position(|b| *b == b'\n');
        let chunk = &buffer[..newline.unwrap_or(buffer.len())];
        len += chunk.len() as u64;
        if len <= limit as u64 {
            line.extend_from_slice(chunk);
        } else if line.capacity() > 0 {
            // Past the bound: what was kept goes, and nothing more is.
            line = Vec::new();
        }
        let used = chunk.len() + usize::from(newline.is_some());
        input.consume(used);
        if newline.is_some() {
            number += 1;
            finish(&mut out, number, std::mem::take(&mut line), len, limit);
            len = 0;
        }
    }
    if len > 0 && !complete_lines {
        finish(&mut out, number + 1, line, len, limit);
    }
    Ok(out)
}

/// The lines of `bytes` (text given whole: a request body, a string), bounded as
/// [`read_lines`] bounds a file's.
pub(crate) fn lines_of(bytes: &[u8], options: &TranscriptOptions<'_>) -> Vec<LogLine> {
    read_lines(bytes, options.line_limit(), false).expect("reading memory does not fail")
}

/// The lines of the file at `path`, bounded, if it may be read (see [`confined`]).
pub(crate) fn read_log(path: &Path, options: &TranscriptOptions<'_>) -> Result<Vec<LogLine>> {
    let cannot = |e: std::io::Error| Error::io(format!("cannot read {}", path.display()), e);
    let file = open(path, options)?;
    read_lines(
        BufReader::with_capacity(1 << 16, file),
        options.line_limit(),
        options.complete_lines,
    )
    .map_err(cannot)
}

/// The whole file at `path`, for the formats that are not read line by line (OpenAI
/// transcripts, RDF); with `complete_lines`, up to its last newline.
pub(crate) fn read_whole(path: &Path, options: &TranscriptOptions<'_>) -> Result<Vec<u8>> {
    let cannot = |e: std::io::Error| Error::io(format!("cannot read {}", path.display()), e);
    let mut file = open(path, options)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(cannot)?;
    if options.complete_lines {
        let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(end);
    }
    Ok(bytes)
}

/// The start of the file at `path`, as much as [`ImportFormat::sniff`] reads to tell a
/// format (with `complete_lines`, whole lines only), without reading a large file
/// whole.
///
/// [`ImportFormat::sniff`]: crate::ImportFormat::sniff
pub(crate) fn read_head(path: &Path, options: &TranscriptOptions<'_>) -> Result<Vec<u8>> {
    let cannot = |e: std::io::Error| Error::io(format!("cannot read {}", path.display()), e);
    let file = open(path, options)?;
    let mut bytes = Vec::new();
    file.take(SNIFF_WINDOW as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    // Past the window the sniffer keeps whole lines itself.
    if options.complete_lines && bytes.len() <= SNIFF_WINDOW {
        let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(end);
    }
    Ok(bytes)
}

/// At most `limit` bytes of the file at `path` (a small side file, such as a
/// sub-agent's `meta.json`), if it may be read; `None` if it is missing, not a regular
/// file, or outside the folders the import reads.
pub(crate) fn read_small(
    path: &Path,
    limit: u64,
    options: &TranscriptOptions<'_>,
) -> Option<String> {
    let file = open(path, options).ok()?;
    let mut text = String::new();
    file.take(limit).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Whether the file at `path` may be read by an import with `options`: it resolves
/// (through every link) inside one of [`TranscriptOptions::within`], when that is
/// given. The resolved path, or `None` when it may not.
pub(crate) fn confined(path: &Path, options: &TranscriptOptions<'_>) -> Result<Option<PathBuf>> {
    let real = std::fs::canonicalize(path)
        .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
    Ok(inside(&real, options.within).then_some(real))
}

/// The error for a file an import may not read.
pub(crate) fn outside(path: &Path) -> Error {
    Error::InvalidInput(format!(
        "{} leads outside the folders being read (a link to somewhere else); it was not \
         read, and nothing was imported",
        path.display()
    ))
}

/// Whether `real` (a resolved path) is inside one of `roots` (resolved here), or
/// `roots` is empty.
fn inside(real: &Path, roots: &[PathBuf]) -> bool {
    roots.is_empty()
        || roots
            .iter()
            .any(|root| std::fs::canonicalize(root).is_ok_and(|root| real.starts_with(root)))
}

/// Opens `path` for reading if it is a regular file the import may read: refused when
/// it resolves outside the folders given, or is not a regular file (a FIFO or a
/// device would block the import or never end). The file opened is checked again
/// after the open, so that a link swapped in between is not followed out.
fn open(path: &Path, options: &TranscriptOptions<'_>) -> Result<std::fs::File> {
    let cannot = |e: std::io::Error| Error::io(format!("cannot read {}", path.display()), e);
    let not_a_file = || {
        Error::InvalidInput(format!(
            "{} is not a regular file; it was not read, and nothing was imported",
            path.display()
        ))
    };
    let real = confined(path, options)?.ok_or_else(|| outside(path))?;
    if !std::fs::metadata(&real).map_err(cannot)?.is_file() {
        return Err(not_a_file());
    }
    let file = std::fs::File::open(&real).map_err(cannot)?;
    if !file.metadata().map_err(cannot)?.is_file() {
        return Err(not_a_file());
    }
    #[cfg(target_os = "linux")]
    if !options.within.is_empty() {
        use std::os::fd::AsRawFd;
        let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()));
        if !opened.is_ok_and(|opened| inside(&opened, options.within)) {
            return Err(outside(path));
        }
    }
    Ok(file)
}

/// Adds line `number` (`len` bytes, `bytes` of it kept) to `out` unless it is blank.
fn finish(out: &mut Vec<LogLine>, number: u64, mut bytes: Vec<u8>, len: u64, limit: usize) {
    if len > limit as u64 {
        out.push((number, Err(LineFault::TooLong { bytes: len, limit })));
        return;
    }
    if bytes.last() == Some(&b'\r') {
        bytes.pop();
    }
    if number == 1 && bytes.starts_with("\u{feff}".as_bytes()) {
        bytes.drain(..3);
    }
    match String::from_utf8(bytes) {
        Ok(text) if text.trim().is_empty() => {}
        Ok(text) => out.push((number, Ok(text))),
        Err(e) => out.push((
            number,
            Err(LineFault::NotUtf8 {
                offset: e.utf8_error().valid_up_to(),
            }),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8], limit: usize, complete: bool) -> Vec<LogLine> {
        // A tiny buffer, so that lines cross buffer boundaries.
        read_lines(BufReader::with_capacity(3, bytes), limit, complete).unwrap()
    }

    #[test]
    fn lines_are_numbered_as_in_the_file_and_blank_ones_left_out() {
        let got = read(b"\xef\xbb\xbf{\"a\":1}\r\n\n  \nsecond\nlast", 100, false);
        assert_eq!(
            got,
            [
                (1, Ok("{\"a\":1}".to_string())),
                (4, Ok("second".to_string())),
                (5, Ok("last".to_string())),
            ]
        );
        // A last line still being written waits for its newline.
        let got = read(b"one\ntwo", 100, true);
        assert_eq!(got, [(1, Ok("one".to_string()))]);
    }

    #[test]
    fn a_line_past_the_bound_or_not_utf8_is_a_fault_of_its_own_line() {
        let mut bytes = b"ok\n".to_vec();
        bytes.extend_from_slice(&[b'x'; 25]);
        bytes.extend_from_slice(b"\nbad \xff byte\nstill ok\n");
        let got = read(&bytes, 20, false);
        assert_eq!(
            got,
            [
                (1, Ok("ok".to_string())),
                (
                    2,
                    Err(LineFault::TooLong {
                        bytes: 25,
                        limit: 20
                    })
                ),
                (3, Err(LineFault::NotUtf8 { offset: 4 })),
                (4, Ok("still ok".to_string())),
            ]
        );
        // A line exactly at the bound is read.
        assert_eq!(read(&[b'y'; 20], 20, false), [(1, Ok("y".repeat(20)))]);
    }
}
