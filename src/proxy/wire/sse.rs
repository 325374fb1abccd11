//! Server-sent events read as they arrive: bytes in, whole events out.

/// A reader of an event stream, fed the bytes as they come.
#[derive(Debug, Default)]
pub(crate) struct Events {
    line: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
}

impl Events {
    /// Feeds `bytes`; each event they complete is handed to `each` as `(event, data)`.
    pub(crate) fn feed(&mut self, bytes: &[u8], mut each: impl FnMut(&str, &str)) {
        for &b in bytes {
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = std::mem::take(&mut self.line);
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if self.has_data {
                    each(&self.event, &self.data);
                }
                self.event.clear();
                self.data.clear();
                self.has_data = false;
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((&line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => self.event = value.to_string(),
                "data" => {
                    if self.has_data {
                        self.data.push('\n');
                    }
                    self.data.push_str(value);
                    self.has_data = true;
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_lines_ending_in_crlf_are_read_whole() {
        let mut events = Events::default();
        let mut seen = Vec::new();
        let stream = b"event: a\r\ndata: {\"x\":\r\n\r\nevent: b\ndata: 1\ndata: 2\n\n: comment\n\ndata: [DONE]\n\n";
        for chunk in stream.chunks(3) {
            events.feed(chunk, |e, d| seen.push((e.to_string(), d.to_string())));
        }
        assert_eq!(
            seen,
            [
                ("a".into(), "{\"x\":".into()),
                ("b".into(), "1\n2".into()),
                (String::new(), "[DONE]".into())
            ]
        );
    }
}
