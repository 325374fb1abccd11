//! Pi session files in: one JSONL file per session (`~/.pi/agent/sessions/--<cwd>--/
//! <time>_<uuid>.jsonl`), a `session` header first, then entries that form a tree by
//! `id`/`parentId`: branching in Pi (`/tree`) adds children to an earlier entry in the
//! same file.
//!
//! The tree becomes a root session named by the header's `id` (its main line: the first
//! child, in file order, of every entry) and a fork (`alt-N`) at each point where an
//! entry has more children, as Claude Code's alternatives do: the files share the
//! builder in `family.rs`, so a file imported again after it grew gains only its
//! new entries, and a copy shares its parent's turns. Each turn keeps `<session>/<id>`
//! as `ft:sourceId` (Pi's ids are unique within a file only).
//!
//! | entry | turn |
//! | --- | --- |
//! | `message`, role `user` | user, its text (images left out) |
//! | `message`, role `assistant` | assistant text, then a `tool_call` turn for its tool calls; `model` attributes both; thinking left out |
//! | `message`, role `toolResult` | tool, with `toolCallId` and `toolName` |
//! | `message`, role `bashExecution` | user, `$ command` and its output (unless kept out of context) |
//! | `message`, role `custom`; `custom_message` | user, its content |
//! | `message`, role `branchSummary`; `branch_summary` | assistant `note`, the summary |
//! | `message`, role `compactionSummary`; `compaction` | assistant `compaction`, the summary |
//!
//! Other entries (`model_change`, `thinking_level_change`, `custom`, `label`,
//! `session_info`, …) are skipped and counted; entries below them hang on their parent.
//! Version 1 files, a linear list without ids, are read as a chain in file order.

use super::family::{Family, Forks, Node, SourceFile};
use crate::error::{Error, Result};
use crate::io::lines::{self, LogLine};
use crate::io::report::{Skipped, TranscriptOptions, TranscriptReport};
use crate::model::{Kind, NewTurn, Role, SessionId, MAX_FORK_DEPTH};
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

/// Whether a JSON object is a Pi session header: `"type": "session"` with an `id` and
/// a `version`.
pub(in crate::io) fn is_pi_header(object: &serde_json::Map<String, Value>) -> bool {
    object.get("type").and_then(Value::as_str) == Some("session")
        && object.get("id").is_some_and(Value::is_string)
        && object.contains_key("version")
}

impl Store {
    /// Imports a Pi session file (JSONL) given as text: its tree as a root session and a
    /// fork at each branch point, all or nothing. A file imported before gets its new
    /// entries. `name` names the file in errors.
    pub fn import_pi(
        &self,
        text: &str,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        self.import_pi_file(None, lines::lines_of(text.as_bytes(), options), options)
    }

    /// Imports a Pi session file given as its lines; `name` names it in errors.
    pub(in crate::io) fn import_pi_file(
        &self,
        name: Option<String>,
        lines: Vec<LogLine>,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let file = SourceFile {
            name,
            lines,
            agent: None,
            spawned_by: None,
        };
        self.import_pi_files(vec![file], options)
    }

    /// Imports every Pi session file (`*.jsonl`) of a folder (one project's, as Pi
    /// keeps them), all or nothing: a fork's file whose parent's file is among them
    /// shares that parent's entries as it would the stored parent's.
    pub(in crate::io) fn import_pi_folder(
        &self,
        dir: &Path,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let mut files = Vec::new();
        for path in session_files(dir)? {
            files.push(SourceFile {
                name: Some(path.display().to_string()),
                lines: lines::read_log(&path, options)?,
                agent: None,
                spawned_by: None,
            });
        }
        if files.is_empty() {
            return Err(Error::InvalidInput(format!(
                "{} holds no Pi session file (*.jsonl); nothing was imported",
                dir.display()
            )));
        }
        self.import_pi_files(files, options)
    }

    fn import_pi_files(
        &self,
        files: Vec<SourceFile>,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let siblings: Siblings = files.iter().filter_map(|f| scan(&f.lines)).collect();
        let mut report = TranscriptReport::default();
        let mut families = BTreeMap::new();
        let mut fork_of = HashMap::new();
        for (index, file) in files.iter().enumerate() {
            let (session, family) = self.read_tree(file, index, &siblings, options, &mut report)?;
            if let Some((Some(parent), _)) = siblings.get(session.as_str()) {
                if siblings.contains_key(parent) {
                    fork_of.insert(session.to_string(), parent.clone());
                }
            }
            families.insert(Some(session.to_string()), family);
        }
        // A fork's file goes into its parent's family, its copies being the parent's
        // entries: its own entries become a fork named by its id.
        let families = Forks::of(fork_of).merge(families);
        self.import_families(&files, families, "pi", options, report)
    }
}

/// Of a session file: its parent session (the header's `parentSession`) and its
/// entries' ids.
type Lineage = (Option<String>, HashSet<String>);

/// The lineage of each session file an import holds, by session id.
type Siblings = HashMap<String, Lineage>;

/// A session file's id, parent and entry ids, from its header and lines.
fn scan(lines: &[LogLine]) -> Option<(String, Lineage)> {
    let mut lines = lines
        .iter()
        .map(|(_, line)| line.as_deref().unwrap_or_default());
    let header: Value = serde_json::from_str(lines.next()?).ok()?;
    let id = header.get("id")?.as_str()?.to_string();
    let parent = header
        .get("parentSession")
        .and_then(Value::as_str)
        .and_then(session_of_path);
    let ids = lines
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v.get("id")?.as_str().map(str::to_string))
        .collect();
    Some((id, (parent, ids)))
}

/// The `*.jsonl` files of `dir`, in name order (Pi names them by their start time, so
/// parents come before their forks).
pub(in crate::io) fn session_files(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("cannot read {}", dir.display()), e))?;
    let mut out: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    out.sort();
    Ok(out)
}

impl Store {
    /// The file's session id and its entries as a family of lines. In a fork's file (a
    /// header naming its `parentSession`), an entry the stored parent holds under the same
    /// id is that entry: the fork then shares it instead of storing it again.
    fn read_tree(
        &self,
        file: &SourceFile,
        index: usize,
        siblings: &Siblings,
        options: &TranscriptOptions<'_>,
        report: &mut TranscriptReport,
    ) -> Result<(SessionId, Family)> {
        let where_ = |n: u64| match &file.name {
            Some(name) => format!("{name} line {n}"),
            None => format!("line {n}"),
        };
        let all = &file.lines;
        let Some((first_n, first)) = all.first() else {
            return Err(Error::InvalidInput(
                "the file is empty; nothing was imported".into(),
            ));
        };
        let header = first
            .as_deref()
            .ok()
            .and_then(|first| serde_json::from_str::<Value>(first).ok())
            .and_then(|v| v.as_object().cloned())
            .filter(is_pi_header)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "{}: a Pi session file starts with a header {{\"type\": \"session\", \"id\", \
                 \"version\"}}; nothing was imported",
                    where_(*first_n)
                ))
            })?;
        let raw_id = header.get("id").and_then(Value::as_str).unwrap_or_default();
        let session = SessionId::new(raw_id).map_err(|e| {
            Error::InvalidInput(format!("{}: {e}; nothing was imported", where_(*first_n)))
        })?;
        let parent_session = header
            .get("parentSession")
            .and_then(Value::as_str)
            .and_then(session_of_path);
        // Entry id → the source id it is stored under: a copy's is the parent's.
        let mut stored_as: HashMap<String, String> = HashMap::new();
        let mut family = Family::default();
        let mut previous: Option<String> = None;
        let total = all.len() as u64;
        for (done, (n, line)) in all.iter().enumerate().skip(1) {
            if let Some(progress) = options.progress {
                progress(done as u64 + 1, total);
            }
            let parsed = line
                .as_deref()
                .map_err(ToString::to_string)
                .and_then(|line| {
                    serde_json::from_str::<Value>(line).map_err(|e| format!("not JSON: {e}"))
                })
                .and_then(|v| entry(&v, *n, previous.as_deref()));
            let entry = match parsed {
                Ok(entry) => entry,
                Err(why) if options.skip_invalid => {
                    skip(report, file, *n, why);
                    continue;
                }
                Err(why) => {
                    return Err(Error::InvalidInput(format!(
                        "{}: {why}; nothing was imported",
                        where_(*n)
                    )))
                }
            };
            let (uuid, copy) = self.entry_owner(
                session.as_str(),
                parent_session.as_deref(),
                &entry.id,
                siblings,
            )?;
            if entry.kind == "session_info" {
                family.title = entry.name.clone().or(family.title.take());
            }
            let parent = entry.parent.as_deref().map(|p| {
                stored_as
                    .get(p)
                    .cloned()
                    .unwrap_or_else(|| format!("{session}/{p}"))
            });
            stored_as.insert(entry.id.clone(), uuid.clone());
            previous = Some(entry.id.clone());
            if family.by_uuid.contains_key(&uuid) || family.passthrough.contains_key(&uuid) {
                let why = format!("entry id {} is used twice", entry.id);
                if options.skip_invalid {
                    skip(report, file, *n, why);
                    continue;
                }
                return Err(Error::InvalidInput(format!(
                    "{}: {why}; nothing was imported",
                    where_(*n),
                )));
            }
            match entry.turns {
                Some((kind, turns)) if !turns.is_empty() => {
                    family.by_uuid.insert(uuid.clone(), family.nodes.len());
                    family.nodes.push(Node {
                        file: index,
                        line: *n,
                        uuid,
                        kind,
                        parent,
                        log_session: Some(session.to_string()),
                        turns,
                        copy,
                        ..Node::default()
                    });
                }
                _ => {
                    *report.skipped_types.entry(entry.kind).or_default() += 1;
                    family.passthrough.insert(uuid, parent);
                }
            }
        }
        Ok((session, family))
    }

    /// The source id entry `id` of session `session` is stored under, and whether it
    /// is a copy: a fork's file holds the entries it copied under their ids, so an
    /// entry its parent's file (in this import) or its stored parent holds is the
    /// parent's, and so on up a fork of a fork.
    fn entry_owner(
        &self,
        session: &str,
        parent: Option<&str>,
        id: &str,
        siblings: &Siblings,
    ) -> Result<(String, bool)> {
        let (mut owner, mut up) = (session.to_string(), parent.map(str::to_string));
        for _ in 0..=MAX_FORK_DEPTH {
            let Some(from) = up.take() else { break };
            match siblings.get(&from) {
                Some((grandparent, ids)) if ids.contains(id) => {
                    owner = from;
                    up = grandparent.clone();
                }
                Some(_) => break,
                None => {
                    if self
                        .rdf()
                        .session_holding(&format!("{from}/{id}"))?
                        .is_some()
                    {
                        owner = from;
                    }
                    break;
                }
            }
        }
        let copy = owner != session;
        Ok((format!("{owner}/{id}"), copy))
    }
}

/// Notes a line skipped under `skip_invalid`, and why.
fn skip(report: &mut TranscriptReport, file: &SourceFile, line: u64, why: impl std::fmt::Display) {
    report.skipped_invalid.push(line);
    report.skipped.push(Skipped {
        file: file.name.clone(),
        line: Some(line),
        why: why.to_string(),
    });
}

/// The session id in a session file's path: `<time>_<uuid>.jsonl`.
fn session_of_path(path: &str) -> Option<String> {
    let stem = std::path::Path::new(path).file_stem()?.to_str()?;
    let id = stem.rsplit('_').next()?;
    SessionId::new(id).ok().map(|_| id.to_string())
}

/// One entry: its id, its parent's, what it is, and the turns it becomes (with the
/// role the builder files it under), if any.
struct Entry {
    id: String,
    parent: Option<String>,
    kind: String,
    /// A `session_info` entry's name for the session.
    name: Option<String>,
    turns: Option<(String, Vec<NewTurn>)>,
}

/// Reads one entry; `previous` is the entry before it, the parent of a version 1 entry
/// (which has no ids: its line number stands in).
fn entry(v: &Value, n: u64, previous: Option<&str>) -> std::result::Result<Entry, String> {
    let object = v.as_object().ok_or("an entry must be a JSON object")?;
    let text = |key: &str| object.get(key).and_then(Value::as_str);
    let kind = text("type").ok_or("an entry needs a \"type\"")?.to_string();
    let (id, parent) = match object.get("id") {
        Some(Value::String(id)) => {
            let parent = match object.get("parentId") {
                None | Some(Value::Null) => None,
                Some(Value::String(p)) => Some(p.clone()),
                Some(_) => return Err("\"parentId\" must be a string or null".into()),
            };
            (id.clone(), parent)
        }
        Some(_) => return Err("\"id\" must be a string".into()),
        None => (format!("line-{n}"), previous.map(str::to_string)),
    };
    let turns = match kind.as_str() {
        "message" => {
            let message = object
                .get("message")
                .and_then(Value::as_object)
                .ok_or("a message entry needs a \"message\" object")?;
            message_turns(message)?
        }
        "compaction" => summary(text("summary"), Kind::Compaction),
        "branch_summary" => summary(text("summary"), Kind::Note),
        "custom_message" => Some((
            "user".into(),
            non_empty(Role::User, content_text(object.get("content"))),
        )),
        _ => None,
    };
    let kind = match kind.as_str() {
        "message" => format!(
            "message/{}",
            v.pointer("/message/role")
                .and_then(Value::as_str)
                .unwrap_or("?")
        ),
        _ => kind,
    };
    Ok(Entry {
        name: text("name").map(str::to_string),
        id,
        parent,
        kind,
        turns,
    })
}

/// The turns of a message, by its role; `None` for a role forktrail does not import.
fn message_turns(
    message: &serde_json::Map<String, Value>,
) -> std::result::Result<Option<(String, Vec<NewTurn>)>, String> {
    let text = |key: &str| message.get(key).and_then(Value::as_str);
    let role = text("role").ok_or("a message needs a \"role\"")?;
    let content = || content_text(message.get("content"));
    Ok(match role {
        "user" | "custom" => Some(("user".into(), non_empty(Role::User, content()))),
        "assistant" => {
            let model = text("model").map(str::to_string);
            let mut texts = Vec::new();
            let mut calls = Vec::new();
            for block in message
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => texts.extend(block.get("text").and_then(Value::as_str)),
                    Some("toolCall") => calls.push(json!({
                        "id": block.get("id").cloned().unwrap_or(Value::Null),
                        "type": "function",
                        "function": {
                            "name": block.get("name").cloned().unwrap_or(Value::Null),
                            "arguments": block.get("arguments").map(Value::to_string)
                                .unwrap_or_else(|| "{}".into()),
                        }
                    })),
                    _ => {}
                }
            }
            let mut turns = non_empty(Role::Assistant, texts.join("\n\n"));
            if !calls.is_empty() {
                turns.push(
                    NewTurn::new(Role::Assistant, "")
                        .kind(Kind::ToolCall)
                        .tool_calls(Value::Array(calls).to_string()),
                );
            }
            if let Some(model) = model {
                turns = turns.into_iter().map(|t| t.model(model.clone())).collect();
            }
            Some(("assistant".into(), turns))
        }
        "toolResult" => {
            let mut turn = NewTurn::new(Role::Tool, content());
            if let Some(id) = text("toolCallId") {
                turn = turn.tool_call_id(id);
            }
            if let Some(name) = text("toolName") {
                turn = turn.name(name);
            }
            Some(("user".into(), vec![turn]))
        }
        "bashExecution" => {
            if message.get("excludeFromContext").and_then(Value::as_bool) == Some(true) {
                return Ok(None);
            }
            let command = text("command").unwrap_or_default();
            let output = text("output").unwrap_or_default();
            let shown = format!("$ {command}\n{output}");
            Some((
                "user".into(),
                vec![NewTurn::new(Role::User, shown.trim_end())],
            ))
        }
        "branchSummary" => summary(text("summary"), Kind::Note),
        "compactionSummary" => summary(text("summary"), Kind::Compaction),
        _ => None,
    })
}

/// An assistant turn of `kind` holding `summary`, if it has text.
fn summary(summary: Option<&str>, kind: Kind) -> Option<(String, Vec<NewTurn>)> {
    Some((
        "assistant".into(),
        non_empty(Role::Assistant, summary.unwrap_or_default().to_string())
            .into_iter()
            .map(|t| t.kind(kind))
            .collect(),
    ))
}

/// One turn of `role` holding `text`, or none when it is blank.
fn non_empty(role: Role, text: String) -> Vec<NewTurn> {
    if text.trim().is_empty() {
        Vec::new()
    } else {
        vec![NewTurn::new(role, text)]
    }
}

/// The text of a message's content: a string, or its text blocks joined by blank lines
/// (images left out).
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}
