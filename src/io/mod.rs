//! Export and import: forktrail's own RDF (lossless), JSONL replay records, PROV-O for
//! PROV tools, and the transcripts of other tools (OpenAI chat messages, Claude Code
//! logs, Codex CLI rollouts); formats told apart by their content.
//!
//! | file | what |
//! | --- | --- |
//! | `formats.rs` | the formats, and telling them from a file's content |
//! | `graphs.rs` | session graphs in and out, the PROV export, the validated import |
//! | `report.rs` | what transcript imports take and report |
//! | `lines.rs` | logs read line by line, each line bounded; files read only where allowed |
//! | `transcripts/` | other tools' logs in: OpenAI messages (and out), Claude Code, Codex, Pi, OTLP |
//! | `root.rs` | new root sessions built whole; copies stored as forks |
//! | `adopt.rs` | a root made a fork of a session that arrived after it |
//! | `copy.rs` | a whole store into another, checked session by session |

mod adopt;
mod copy;
mod formats;
mod graphs;
mod lines;
mod report;
mod root;
mod transcripts;

pub use copy::{BackupReport, CopyReport};
pub use formats::{ExportFormat, ImportFormat};
pub use lines::MAX_LINE_BYTES;
pub use report::SharedCopy;
pub use report::{Skipped, TranscriptOptions, TranscriptReport};
pub(crate) use transcripts::openai::openai_messages;
pub(crate) use transcripts::otlp::decode_request as decode_otlp_request;

use crate::error::{Error, Result};
use crate::model::{NewSession, SessionId};
use crate::store::Store;
use oxigraph::io::RdfFormat;
use oxigraph::model::NamedNode;
use std::io::{Read, Write};
use std::path::Path;

impl Store {
    /// Writes one session (or, with `None`, every session) in `format`.
    ///
    /// TriG and N-Quads keep each session in its graph and read back losslessly with
    /// [`Store::import`]; exporting one fork exports only its own graph, so import it
    /// where its parent exists (or export everything). The PROV export of a session
    /// holds its chain.
    pub fn export(
        &self,
        session: Option<&SessionId>,
        format: ExportFormat,
        mut out: impl Write,
    ) -> Result<()> {
        let write_err = |e: std::io::Error| Error::io("cannot write the export", e);
        let one = |what: &str| {
            session.ok_or_else(|| Error::InvalidInput(format!("{what} export needs a SESSION")))
        };
        match format {
            ExportFormat::Jsonl => {
                for record in self.replay(one("a jsonl (replay records of one session)")?, None)? {
                    let line = serde_json::to_string(&record).map_err(|e| write_err(e.into()))?;
                    writeln!(out, "{line}").map_err(write_err)?;
                }
            }
            ExportFormat::OpenAi => {
                let messages = self.export_openai(one("an openai (its messages in order)")?)?;
                let text =
                    serde_json::to_string_pretty(&messages).map_err(|e| write_err(e.into()))?;
                writeln!(out, "{text}").map_err(write_err)?;
            }
            ExportFormat::Html => {
                let page = self.export_html(one("an html (one session's playback and tree)")?)?;
                out.write_all(page.as_bytes()).map_err(write_err)?;
            }
            ExportFormat::Turtle => {
                let Some(id) = session else {
                    return Err(Error::InvalidInput(
                        "turtle export holds one graph: name a SESSION, or use trig".into(),
                    ));
                };
                self.write_graphs(&[self.require(id)?.iri], RdfFormat::Turtle, &mut out)?;
            }
            ExportFormat::Prov => {
                let graphs: Vec<NamedNode> = match session {
                    // The chain: what the session's turns and lineage point into.
                    Some(id) => self
                        .chain(id)?
                        .levels()
                        .iter()
                        .map(|f| f.iri.clone())
                        .collect(),
                    None => self.all_graphs()?,
                };
                self.write_prov(&graphs, &mut out)?;
            }
            ExportFormat::TriG | ExportFormat::NQuads => {
                let graphs = match session {
                    Some(id) => vec![self.require(id)?.iri],
                    None => self.all_graphs()?,
                };
                let format = if format == ExportFormat::TriG {
                    RdfFormat::TriG
                } else {
                    RdfFormat::NQuads
                };
                self.write_graphs(&graphs, format, &mut out)?;
            }
        }
        out.flush().map_err(write_err)
    }

    /// Every session's graph, oldest session first.
    fn all_graphs(&self) -> Result<Vec<NamedNode>> {
        Ok(self
            .list()?
            .iter()
            .map(|s| self.session_iri(&s.session))
            .collect())
    }

    /// Imports `content` in `format`, or in the format its content shows when `None`
    /// (see [`ImportFormat::sniff`]), all or nothing: forktrail's own TriG or N-Quads,
    /// an OpenAI transcript or a Codex CLI rollout (one new session each), a Claude
    /// Code log or a Pi session file.
    pub fn import_with(
        &self,
        content: &[u8],
        format: Option<ImportFormat>,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let format = match format {
            Some(format) => format,
            None => ImportFormat::sniff_or_explain(content, "the input")?,
        };
        let text = || {
            std::str::from_utf8(content).map_err(|e| {
                Error::InvalidInput(format!(
                    "the input is not valid UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ))
            })
        };
        // Logs are read line by line, each line bounded: a bad line is that line's
        // fault, not the input's.
        let lines = || lines::lines_of(content, options);
        match format {
            ImportFormat::OpenAi => self.import_openai(text()?, NewSession::default(), options),
            ImportFormat::ClaudeCode => self.import_claude_lines(lines(), options),
            ImportFormat::Codex => self.import_codex_lines(lines(), options),
            ImportFormat::Pi => self.import_pi_file(None, lines(), options),
            ImportFormat::Otlp => {
                self.import_otlp(&transcripts::otlp::decode_lines(&lines())?, options)
            }
            ImportFormat::TriG | ImportFormat::NQuads => Ok(TranscriptReport {
                sessions: self.import(content, format)?,
                ..Default::default()
            }),
        }
    }

    /// Imports a file, or a Claude Code project folder, as [`Store::import_with`] does
    /// (the format told by the content unless given). A Claude Code log is read from
    /// disk so that its sub-agents' transcripts, beside it, come along.
    pub fn import_path(
        &self,
        path: &Path,
        format: Option<ImportFormat>,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        if path.is_dir() {
            return match format {
                Some(ImportFormat::Pi) => self.import_pi_folder(path, options),
                None if formats::is_pi_folder(path) => self.import_pi_folder(path, options),
                None | Some(ImportFormat::ClaudeCode) => {
                    self.import_claude_code_path(path, options)
                }
                Some(other) => Err(Error::InvalidInput(format!(
                    "{} is a folder: only a Claude Code project folder or a Pi session \
                     folder can be imported (--format claude-code or pi), not {other:?}",
                    path.display()
                ))),
            };
        }
        let format = match format {
            Some(format) => format,
            None => ImportFormat::sniff_or_explain(
                &lines::read_head(path, options)?,
                &path.display().to_string(),
            )?,
        };
        match format {
            ImportFormat::ClaudeCode => self.import_claude_code_path(path, options),
            ImportFormat::Pi => {
                let lines = lines::read_log(path, options)?;
                self.import_pi_file(Some(path.display().to_string()), lines, options)
            }
            ImportFormat::Codex => {
                self.import_codex_lines(lines::read_log(path, options)?, options)
            }
            ImportFormat::Otlp => {
                let requests = transcripts::otlp::decode_lines(&lines::read_log(path, options)?)?;
                self.import_otlp(&requests, options)
            }
            other => self.import_with(&lines::read_whole(path, options)?, Some(other), options),
        }
    }

    /// Reads forktrail's own TriG/N-Quads export and adds its sessions, all or none.
    /// Refuses sessions that already exist, graphs that are not session graphs under
    /// this store's base IRI, and forks whose parent is neither in the file nor here.
    /// Returns the imported session ids.
    ///
    /// Transcripts (OpenAI, Claude Code, Codex) are read whole and imported with default
    /// options; [`Store::import_with`] returns their full report.
    pub fn import(&self, mut input: impl Read, format: ImportFormat) -> Result<Vec<SessionId>> {
        match format {
            ImportFormat::TriG => self.import_graphs(input, RdfFormat::TriG),
            ImportFormat::NQuads => self.import_graphs(input, RdfFormat::NQuads),
            transcript => {
                let mut bytes = Vec::new();
                input
                    .read_to_end(&mut bytes)
                    .map_err(|e| Error::io("cannot read the import", e))?;
                let options = TranscriptOptions::default();
                Ok(self
                    .import_with(&bytes, Some(transcript), &options)?
                    .sessions)
            }
        }
    }
}
