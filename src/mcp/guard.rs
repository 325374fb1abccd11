//! The bound on what one stdio message may make the server parse.
//!
//! A message is parsed whole into JSON values, where a value takes 32 bytes and an
//! object or array a node of up to ~640 bytes more, so a 64 MiB line filled with
//! `{"":0},` would take some 5 GiB parsed. [`Bounded`] counts, as the bytes go by, the
//! `[`, `{`, `,` and `:` outside strings of each line (every value but a container's
//! first follows one); a line past [`MAX_JSON_VALUES`] values or [`MAX_JSON_CONTAINERS`]
//! objects and arrays is cut there: what follows, up to its newline, is dropped, so the
//! parser sees a message that does not parse, skips it, and reads on.
//! That keeps a message's parse under ~100 MB besides its strings; legitimate messages
//! stay far below (a turn's content is one value).

use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// The most JSON values one message may hold: see the module's documentation.
pub const MAX_JSON_VALUES: usize = 1_000_000;
/// The most objects and arrays one message may hold: see [`MAX_JSON_VALUES`].
pub const MAX_JSON_CONTAINERS: usize = 100_000;

/// Where the scan of the current line stands.
#[derive(Default)]
struct Scan {
    values: usize,
    containers: usize,
    in_string: bool,
    escaped: bool,
    /// The line went past a limit: its bytes are dropped up to its newline.
    cut: bool,
}

impl Scan {
    /// Whether byte `b` of the line is passed on; a newline starts a new line.
    fn keep(&mut self, b: u8) -> bool {
        if b == b'\n' {
            let cut = self.cut;
            *self = Scan::default();
            // The line was ended where it was cut.
            return !cut;
        }
        if self.cut {
            return false;
        }
        if self.in_string {
            match b {
                _ if self.escaped => self.escaped = false,
                b'\\' => self.escaped = true,
                b'"' => self.in_string = false,
                _ => {}
            }
            return true;
        }
        match b {
            b'"' => self.in_string = true,
            b'[' | b'{' => {
                self.values += 1;
                self.containers += 1;
            }
            b',' | b':' => self.values += 1,
            _ => {}
        }
        if self.values > MAX_JSON_VALUES || self.containers > MAX_JSON_CONTAINERS {
            self.cut = true;
        }
        true
    }
}

/// A reader passing on its input's lines, each cut where it goes past the limits.
pub(super) struct Bounded<R> {
    inner: R,
    scan: Scan,
}

impl<R> Bounded<R> {
    pub(super) fn new(inner: R) -> Self {
        Self {
            inner,
            scan: Scan::default(),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Bounded<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            let start = buf.filled().len();
            match Pin::new(&mut this.inner).poll_read(cx, buf) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
            let end = buf.filled().len();
            if end == start {
                return Poll::Ready(Ok(())); // the end of the input
            }
            let mut kept = start;
            let filled = buf.filled_mut();
            for i in start..end {
                let b = filled[i];
                let was_cut = this.scan.cut;
                if this.scan.keep(b) {
                    // The byte that goes past a limit ends the line instead: the
                    // parser reads what came so far as one message, which does not
                    // parse.
                    filled[kept] = if !was_cut && this.scan.cut { b'\n' } else { b };
                    kept += 1;
                }
            }
            buf.set_filled(kept);
            if kept > start {
                return Poll::Ready(Ok(()));
            }
            // Everything read was dropped: read on rather than report the end.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn through(input: Vec<u8>) -> Vec<u8> {
        let mut out = Vec::new();
        Bounded::new(&input[..])
            .read_to_end(&mut out)
            .await
            .unwrap();
        out
    }

    #[tokio::test]
    async fn a_line_within_the_limits_passes_unchanged() {
        let zeros = format!("[{}]\nnext\n", vec!["0"; MAX_JSON_VALUES].join(","));
        assert_eq!(through(zeros.clone().into_bytes()).await, zeros.as_bytes());
        // Commas, colons and brackets inside a string (an escaped quote included) are
        // content, not values.
        let content = format!(
            "{{\"content\": \"\\\"{}\"}}\n",
            "[{,:".repeat(MAX_JSON_VALUES)
        );
        assert_eq!(
            through(content.clone().into_bytes()).await,
            content.as_bytes()
        );
    }

    #[tokio::test]
    async fn a_line_past_the_limits_is_cut_and_the_next_passes() {
        let zeros = format!(
            "[{}]\n{{\"next\":1}}\n",
            vec!["0"; MAX_JSON_VALUES + 5].join(",")
        );
        let out = String::from_utf8(through(zeros.into_bytes()).await).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "one cut line, then the next");
        assert!(serde_json::from_str::<serde_json::Value>(lines[0]).is_err());
        assert!(lines[0].len() < 2 * MAX_JSON_VALUES + 2, "cut at the limit");
        assert_eq!(lines[1], r#"{"next":1}"#);
        let objects = format!("[{}]\n", vec!["{}"; MAX_JSON_CONTAINERS + 1].join(","));
        let out = through(objects.into_bytes()).await;
        assert!(
            out.len() < 3 * MAX_JSON_CONTAINERS + 2,
            "cut at the containers' limit"
        );
        assert_eq!(out.last(), Some(&b'\n'));
    }
}
