//! The formats forktrail reads and writes, and how a file's content tells which it is.

use super::lines::{self, SNIFF_WINDOW};
use super::transcripts::{codex, pi};
use super::TranscriptOptions;
use crate::error::{Error, Result};
use oxigraph::io::{RdfFormat, RdfParser};
use std::path::Path;
use std::str::FromStr;

/// What `export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// TriG: one graph per session (lossless; `import` reads it back).
    TriG,
    /// N-Quads (lossless; `import` reads it back).
    NQuads,
    /// Turtle: the triples of one session's graph.
    Turtle,
    /// One replay record per line, for one session.
    Jsonl,
    /// The assembled replay of one session as an OpenAI chat messages JSON array.
    OpenAi,
    /// PROV-O for PROV tools, as Turtle: one graph (a session's chain, or everything)
    /// with the PROV types and relations the ontology implies written out (every turn
    /// a `prov:Entity`, every model a `prov:Agent`, `ft:parentSession` as
    /// `prov:wasDerivedFrom`, …), since PROV tools do no inference.
    Prov,
    /// One self-contained HTML file of a session (playback and fork tree), for
    /// sharing: no script, no network, opens from a `file:` URL.
    Html,
}

impl ExportFormat {
    /// Every export format's name, as `--format` takes it.
    pub const NAMES: &'static [&'static str] = &[
        "trig", "nquads", "turtle", "jsonl", "openai", "prov", "html",
    ];

    /// The media type of what this format writes.
    pub fn media_type(self) -> &'static str {
        match self {
            Self::TriG => "application/trig",
            Self::NQuads => "application/n-quads",
            Self::Turtle | Self::Prov => "text/turtle",
            Self::Jsonl => "application/jsonl",
            Self::OpenAi => "application/json",
            Self::Html => "text/html; charset=utf-8",
        }
    }
}

impl FromStr for ExportFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "trig" => Self::TriG,
            "nquads" => Self::NQuads,
            "turtle" => Self::Turtle,
            "jsonl" => Self::Jsonl,
            "openai" => Self::OpenAi,
            "prov" => Self::Prov,
            "html" => Self::Html,
            _ => {
                return Err(Error::InvalidInput(format!(
                    "unknown export format {s:?} (expected one of: {})",
                    Self::NAMES.join(", ")
                )))
            }
        })
    }
}

/// What `import` reads: forktrail's own exports and the transcripts of other tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportFormat {
    /// forktrail's TriG export.
    TriG,
    /// forktrail's N-Quads export.
    NQuads,
    /// OpenAI chat messages: a JSON array, or one message per line (JSONL).
    OpenAi,
    /// A Claude Code session log (JSONL), or a Claude Code project folder.
    ClaudeCode,
    /// An OpenAI Codex CLI rollout (JSONL): `{"timestamp", "type", "payload"}` lines,
    /// or an early rollout's bare session meta and response items.
    Codex,
    /// A Pi session file (JSONL): a `session` header, then entries forming a tree by
    /// `id`/`parentId`.
    Pi,
    /// OpenTelemetry traces as OTLP JSON Lines (the file exporter's format): GenAI
    /// chat spans become sessions and turns.
    Otlp,
}

impl ImportFormat {
    /// Every import format's name, as `--format` takes it.
    pub const NAMES: &'static [&'static str] = &[
        "trig",
        "nquads",
        "openai",
        "claude-code",
        "codex",
        "pi",
        "otlp",
    ];

    /// The format `content` is written in, told from its first lines, or `None` when it
    /// looks like none of them.
    ///
    /// ```
    /// use forktrail::ImportFormat;
    /// assert_eq!(ImportFormat::sniff(b"[{\"role\": \"user\", \"content\": \"hi\"}]"), Some(ImportFormat::OpenAi));
    /// assert_eq!(ImportFormat::sniff(b"{\"role\": \"user\", \"content\": \"hi\"}\n"), Some(ImportFormat::OpenAi));
    /// assert_eq!(ImportFormat::sniff(b"{\"type\": \"user\", \"uuid\": \"u1\"}\n"), Some(ImportFormat::ClaudeCode));
    /// assert_eq!(ImportFormat::sniff(b"{\"timestamp\": \"2025-09-01T10:00:00.000Z\", \"type\": \"session_meta\", \"payload\": {\"id\": \"s1\"}}\n"), Some(ImportFormat::Codex));
    /// assert_eq!(ImportFormat::sniff(b"{\"type\": \"session\", \"version\": 3, \"id\": \"s1\"}\n"), Some(ImportFormat::Pi));
    /// assert_eq!(ImportFormat::sniff(b"{\"resourceSpans\": []}\n"), Some(ImportFormat::Otlp));
    /// assert_eq!(ImportFormat::sniff(b"<urn:s> <urn:p> <urn:o> <urn:g> .\n"), Some(ImportFormat::NQuads));
    /// assert_eq!(ImportFormat::sniff(b"@prefix ft: <https://w3id.org/forktrail/ns#> .\n"), Some(ImportFormat::TriG));
    /// assert_eq!(ImportFormat::sniff(b"Dear diary,"), None);
    /// ```
    pub fn sniff(content: &[u8]) -> Option<Self> {
        const WINDOW: usize = SNIFF_WINDOW;
        let content = content
            .strip_prefix("\u{feff}".as_bytes())
            .unwrap_or(content);
        let window = String::from_utf8_lossy(&content[..content.len().min(WINDOW)]);
        // Past the window, the last line read may be cut: keep whole lines only, unless
        // the first line alone is longer than the window.
        let (text, first_is_cut) = match window.rfind('\n') {
            Some(end) if content.len() > WINDOW => (&window[..end], false),
            None if content.len() > WINDOW => (&window[..], true),
            _ => (&window[..], false),
        };
        let mut lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        let first = lines.next()?;
        if first.starts_with('[') {
            return Some(Self::OpenAi);
        }
        if first.starts_with('{') {
            // One JSON object per line: a Codex rollout line has a "type" Codex writes
            // and a "payload" (an early rollout opens with a bare session meta, an "id"
            // and a "timestamp"); a Claude Code line has a "type" and the ids that chain
            // lines (its first lines may be snapshots that have neither); an OpenAI
            // message has a "role".
            let claude_keys = [
                "uuid",
                "parentUuid",
                "sessionId",
                "leafUuid",
                "isSidechain",
                "messageId",
            ];
            if first_is_cut {
                // One line longer than the window: judge by the keys it shows.
                let has = |key: &str| first.contains(&format!("\"{key}\":"));
                let codex_type = codex::LINE_TYPES
                    .iter()
                    .any(|t| first.contains(&format!("\"type\":\"{t}\"")));
                if codex_type && has("payload") {
                    return Some(Self::Codex);
                }
                if has("type") && claude_keys.iter().any(|k| has(k)) {
                    return Some(Self::ClaudeCode);
                }
                return has("role").then_some(Self::OpenAi);
            }
            for (i, line) in std::iter::once(first).chain(lines).take(50).enumerate() {
                // A line that is not an object says nothing either way.
                let Ok(serde_json::Value::Object(object)) = serde_json::from_str(line) else {
                    continue;
                };
                if i == 0 && pi::is_pi_header(&object) {
                    return Some(Self::Pi);
                }
                if object.contains_key("resourceSpans") {
                    return Some(Self::Otlp);
                }
                if codex::is_rollout_line(&object)
                    || (i == 0 && codex::is_early_rollout_meta(&object))
                {
                    return Some(Self::Codex);
                }
                if object.get("type").is_some_and(serde_json::Value::is_string)
                    && claude_keys.iter().any(|k| object.contains_key(*k))
                {
                    return Some(Self::ClaudeCode);
                }
                if object.contains_key("role") {
                    return Some(Self::OpenAi);
                }
            }
            return None;
        }
        let lower = first.to_ascii_lowercase();
        if ["@prefix", "@base", "prefix ", "base ", "graph "]
            .iter()
            .any(|k| lower.starts_with(k))
        {
            return Some(Self::TriG);
        }
        if first.starts_with('<') || first.starts_with("_:") {
            // A whole N-Quads statement on the line; anything else (a graph block, a
            // Turtle-style statement) is TriG. A line longer than the window is judged
            // by what it shows: a TriG graph block opens with `{` early.
            if first_is_cut {
                return Some(if first.contains('{') {
                    Self::TriG
                } else {
                    Self::NQuads
                });
            }
            let nquads = RdfParser::from_format(RdfFormat::NQuads)
                .for_slice(first.as_bytes())
                .collect::<std::result::Result<Vec<_>, _>>();
            return Some(match nquads {
                Ok(quads) if !quads.is_empty() => Self::NQuads,
                _ => Self::TriG,
            });
        }
        None
    }

    /// The start of the file at `path`, as much as [`ImportFormat::sniff`] reads, read
    /// by an import's rules: only inside [`TranscriptOptions::within`] when given, only
    /// a regular file, whole lines only with `complete_lines`. A large file is not read
    /// whole.
    ///
    /// ```
    /// use forktrail::{ImportFormat, TranscriptOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let log = dir.path().join("w1.jsonl");
    /// // A log whose last line is still being written.
    /// std::fs::write(&log, "{\"type\": \"user\", \"uuid\": \"u1\"}\n{\"type\": \"assis").unwrap();
    /// let options = TranscriptOptions { complete_lines: true, ..Default::default() };
    /// let head = ImportFormat::head(&log, &options).unwrap();
    /// assert!(head.ends_with(b"}\n"));
    /// assert_eq!(ImportFormat::sniff(&head), Some(ImportFormat::ClaudeCode));
    /// ```
    pub fn head(path: &Path, options: &TranscriptOptions<'_>) -> Result<Vec<u8>> {
        lines::read_head(path, options)
    }

    /// The sniffed format of `content`, or an error naming `what` and the choices.
    pub fn sniff_or_explain(content: &[u8], what: &str) -> Result<Self> {
        Self::sniff(content).ok_or_else(|| {
            // Content that is meant as JSON but does not parse is named as such: the
            // format is not what is wrong.
            let text = String::from_utf8_lossy(content);
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let broken = match first.trim_start().chars().next() {
                Some('{') => serde_json::from_str::<serde::de::IgnoredAny>(first).err(),
                Some('[') => serde_json::from_str::<serde::de::IgnoredAny>(&text).err(),
                _ => None,
            };
            Error::InvalidInput(match broken {
                Some(e) => format!(
                    "{what} is not valid JSON ({e}), so its format cannot be told; fix it, or \
                     pass --format one of {}",
                    Self::NAMES.join(", ")
                ),
                None => format!(
                    "cannot tell the format of {what}; pass --format one of {}",
                    Self::NAMES.join(", ")
                ),
            })
        })
    }
}

/// Whether the first session file of `dir` is a Pi session file.
pub(in crate::io) fn is_pi_folder(dir: &Path) -> bool {
    let Ok(files) = pi::session_files(dir) else {
        return false;
    };
    files.first().is_some_and(|f| {
        lines::read_head(f, &TranscriptOptions::default())
            .is_ok_and(|b| ImportFormat::sniff(&b) == Some(ImportFormat::Pi))
    })
}

impl FromStr for ImportFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "trig" => Self::TriG,
            "nquads" => Self::NQuads,
            "openai" => Self::OpenAi,
            "claude-code" => Self::ClaudeCode,
            "codex" => Self::Codex,
            "pi" => Self::Pi,
            "otlp" => Self::Otlp,
            _ => {
                return Err(Error::InvalidInput(format!(
                    "unknown import format {s:?} (expected one of: {})",
                    Self::NAMES.join(", ")
                )))
            }
        })
    }
}
