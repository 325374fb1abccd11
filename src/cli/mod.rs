//! The `forktrail` commands: parse arguments, call the library, print the result.
//! Data goes to stdout, errors to stderr with a non-zero exit; a failed command
//! changes nothing. A reader that stops reading (`| head`) ends the output quietly.

mod render;

use clap::{Args, CommandFactory, Parser, Subcommand};
use forktrail::{
    demo, DeleteOptions, DetachOptions, ExportFormat, ForkOptions, ImportFormat, Job, Kind,
    NamedQuery, NewSession, NewTurn, Role, SessionId, Store,
};
use oxigraph::model::Term;
use serde_json::json;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Provenance engine for LLM-agent conversations: fork, branch, replay and audit agent
/// sessions stored as RDF.
#[derive(Parser)]
#[command(name = "forktrail", version, about, long_about = None)]
struct Cli {
    /// The store directory (RocksDB); created, with its parents, by demo, new, import
    /// and serve.
    #[arg(
        long,
        global = true,
        env = "FORKTRAIL_STORE",
        default_value = "./forktrail-data"
    )]
    store: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build a sample conversation with a tree of forks and show it.
    ///
    /// Prints the tree, a replay of the deepest fork, the answer to an audit query and
    /// commands to try next.
    Demo,
    /// Create a root session and print its id.
    New {
        /// The session id (default: a fresh UUID v7).
        #[arg(long)]
        id: Option<String>,
        /// A title for the session (stored as dcterms:title).
        #[arg(long)]
        title: Option<String>,
        /// Who the session runs for (default: anonymous).
        #[arg(long)]
        principal: Option<String>,
        /// Print {"session": ID}.
        #[arg(long)]
        json: bool,
    },
    /// Append a turn; the content comes from --content, --file or standard input.
    Append(AppendArgs),
    /// Fork a session at index K (default: its length), sharing its first K turns.
    Fork(ForkArgs),
    /// Print the turns of a session in order, inherited prefix included. Never writes.
    Replay {
        /// The session to replay.
        session: String,
        /// The last index to print (inclusive).
        #[arg(long)]
        up_to: Option<u64>,
        /// A JSON array of {index, role, content, branch} records.
        #[arg(long, conflicts_with = "jsonl")]
        json: bool,
        /// One JSON record per line.
        #[arg(long)]
        jsonl: bool,
    },
    /// Print a session's lineage facts, counts and head digest.
    Show {
        /// The session to show.
        session: String,
        /// Print the facts as a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// List the direct children (branches) of a session.
    Branches {
        /// The parent session.
        session: String,
        /// Print a JSON array of {session, branch, forked_at_index, created_at, own_turns}.
        #[arg(long)]
        json: bool,
    },
    /// Print a session and its descendants.
    Tree {
        /// The session at the top of the tree.
        session: String,
        /// The tree as nested JSON objects.
        #[arg(long, group = "tree_format")]
        json: bool,
        /// Graphviz DOT.
        #[arg(long, group = "tree_format")]
        dot: bool,
        /// A Mermaid flowchart.
        #[arg(long, group = "tree_format")]
        mermaid: bool,
    },
    /// List every session.
    List {
        /// Print a JSON array of session facts.
        #[arg(long)]
        json: bool,
    },
    /// Delete a session (refused if it has children, unless --cascade).
    Delete {
        /// The session to delete.
        session: String,
        /// Delete the whole subtree in one transaction.
        #[arg(long)]
        cascade: bool,
        /// Print what would be deleted (or why it is refused) and write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print {"deleted", "sessions", "own_turns"}.
        #[arg(long)]
        json: bool,
    },
    /// Make a fork stand alone: copy its inherited turns in and drop its parent link.
    ///
    /// Afterwards the parent can be deleted; the PROV derivation stays.
    Detach {
        /// The fork to detach.
        session: String,
        /// Print what would be copied and which descendants would move up; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print {"session", "parent", "copied_turns", "copied_from", "moved_up"}.
        #[arg(long)]
        json: bool,
    },
    /// Name the session's current length as an anchor, with optional JSON state.
    Anchor {
        /// The session to mark.
        session: String,
        /// The anchor's name (unique in the session).
        name: String,
        /// JSON saved with the anchor.
        #[arg(long)]
        state: Option<String>,
        /// Print the anchor as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the anchors a session sees: its own and its ancestors' within its prefix.
    Anchors {
        /// The session whose anchors to list.
        session: String,
        /// Print a JSON array of anchors.
        #[arg(long)]
        json: bool,
    },
    /// Fold a fork's new turns back into its parent as one fork_result turn.
    ///
    /// The turn (appended to the parent, or --into) refers to CHILD@k:turns:a-b and
    /// carries a summary.
    Merge {
        /// The fork whose turns to merge.
        child: String,
        /// The session to append the result to (default: the child's parent).
        #[arg(long)]
        into: Option<String>,
        /// The summary (default: the child's last assistant turn).
        #[arg(long)]
        summary: Option<String>,
        /// Print the plan and write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the merge as JSON.
        #[arg(long)]
        json: bool,
    },
    /// What-if: fork at turn K and let another model, system prompt or tools answer.
    ///
    /// The model is called through an OpenAI-compatible endpoint. Tool calls in the
    /// answer are recorded as a tool_call turn and NEVER executed: regeneration stops
    /// there. An identical request that already completed is returned, not sent again
    /// (--again asks anew). Exits 1 when the job fails or is cancelled.
    Regenerate(RegenerateArgs),
    /// List regeneration jobs, or show or cancel one.
    Jobs {
        #[command(subcommand)]
        action: Option<JobsAction>,
        /// Print the jobs as a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Compare two sessions: common ancestor, shared prefix, and both tails.
    Diff {
        /// The first session.
        a: String,
        /// The second session.
        b: String,
        /// Print {"common_ancestor", "common_prefix", "found_by", "a_tail", "b_tail"}.
        #[arg(long)]
        json: bool,
    },
    /// Run a read-only SPARQL query: SPARQL text, a shipped query's name, or --file.
    ///
    /// The default graph is the union of all session graphs. `--list` shows the
    /// shipped queries with what each answers and expects.
    Query(QueryArgs),
    /// Import sessions from a file or a Claude Code project folder, all or nothing.
    ///
    /// Reads forktrail's own TriG or N-Quads export, an OpenAI chat transcript (JSON
    /// array or JSONL of messages), a Claude Code session log (JSONL, with its
    /// sub-agents' transcripts) or a Claude Code project folder; the format is told
    /// from the content unless --format says it. A log imported before gets its new
    /// lines appended.
    Import {
        /// The file, or a Claude Code project folder (e.g. ~/.claude/projects/NAME).
        file: PathBuf,
        /// trig, nquads, openai or claude-code (default: told from the content).
        #[arg(long)]
        format: Option<String>,
        /// Transcripts: skip malformed lines (they are reported) instead of importing
        /// nothing.
        #[arg(long)]
        skip_invalid: bool,
        /// Print a JSON report; also keeps the progress bar off.
        #[arg(long)]
        json: bool,
    },
    /// Serve the store over HTTP: SPARQL 1.1, the shipped queries and a REST API.
    ///
    /// Routes: /sparql, /query, /update, /store (SPARQL 1.1 Protocol and Graph Store
    /// read), /queries, /sessions, /import, /jobs, /health, /metrics. Read-only unless
    /// started with a token.
    #[cfg(feature = "server")]
    Serve(ServeArgs),
    /// Export one session, or all, as RDF, replay records, chat messages or PROV-O.
    ///
    /// TriG and N-Quads are lossless (import reads them back); Turtle, JSONL replay
    /// records and OpenAI chat messages take one session; PROV-O is Turtle with the
    /// PROV types and relations written out for PROV tools.
    Export {
        /// The session to export (default: every session; one is needed for turtle,
        /// jsonl and openai).
        session: Option<String>,
        /// trig, nquads, turtle, jsonl, openai or prov (PROV-O as Turtle, with the PROV
        /// types and relations written out for PROV tools).
        #[arg(long, default_value = "trig")]
        format: String,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Print a shell completion script (bash, zsh, fish, powershell or elvish).
    ///
    /// For example: `forktrail completions bash >
    /// ~/.local/share/bash-completion/completions/forktrail`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Args)]
struct AppendArgs {
    /// The session to append to.
    session: String,
    /// system, user, assistant or tool.
    #[arg(long)]
    role: String,
    /// The content (may be empty).
    #[arg(long, conflicts_with = "file")]
    content: Option<String>,
    /// Read the content from this file (must be UTF-8).
    #[arg(long)]
    file: Option<PathBuf>,
    /// message (default), tool_call, usage, compaction, note or fork_result.
    #[arg(long, default_value = "message")]
    kind: String,
    /// The model that generated the turn.
    #[arg(long)]
    model: Option<String>,
    /// The speaker's name (e.g. a tool's).
    #[arg(long)]
    name: Option<String>,
    /// The tool call this tool turn answers.
    #[arg(long)]
    tool_call_id: Option<String>,
    /// The tool calls of an assistant turn, as JSON.
    #[arg(long)]
    tool_calls: Option<String>,
    /// Print {"session": ID, "index": N}.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ForkArgs {
    /// The parent session.
    session: String,
    /// The fork point K: the fork inherits turns 0..K-1 (default: the parent's length).
    #[arg(long, allow_negative_numbers = true, conflicts_with = "anchor")]
    at: Option<i64>,
    /// Fork at this anchor (the parent's own, or an ancestor's within what it inherits).
    #[arg(long)]
    anchor: Option<String>,
    /// Store a short summary of the inherited prefix on the fork (turns per role, tool
    /// calls, models, the last user request).
    #[arg(long)]
    summarize: bool,
    /// Make the fork idempotent: a retry with the same id and options returns the same
    /// fork; the same id with other options is an error.
    #[arg(long)]
    request_id: Option<String>,
    /// The branch label (default: fork-<8 hex>); unique among the parent's children.
    #[arg(long)]
    label: Option<String>,
    /// Why the fork is made (recorded in its provenance).
    #[arg(long)]
    reason: Option<String>,
    /// Who forks (default: the parent's principal).
    #[arg(long)]
    principal: Option<String>,
    /// The fork's session id (default: a fresh UUID v7).
    #[arg(long)]
    id: Option<String>,
    /// Print the plan and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print {"session", "parent", "forked_at_index", "branch", "fork_root", "depth"}.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct RegenerateArgs {
    /// The session to regenerate from.
    session: String,
    /// The fork point K: the model sees turns 0..K-1 and answers turn K.
    #[arg(long)]
    at: u64,
    /// The model (default: the model of the last assistant turn before K).
    #[arg(long)]
    model: Option<String>,
    /// A file whose text replaces the system message.
    #[arg(long, value_name = "FILE")]
    system_prompt: Option<PathBuf>,
    /// A JSON file with the tool list (OpenAI tool definitions) to offer instead.
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
    /// The OpenAI-compatible base URL (default: $OPENAI_BASE_URL, else
    /// http://127.0.0.1:11434/v1). An API key is read from $OPENAI_API_KEY only, and
    /// never stored.
    #[arg(long)]
    endpoint: Option<String>,
    /// The most tokens the model may answer with (sent as max_tokens).
    #[arg(long)]
    max_tokens: Option<u32>,
    /// The sampling temperature, 0 to 2 (sent as temperature; default: the endpoint's).
    #[arg(long)]
    temperature: Option<f64>,
    /// what-if (default), benchmark or manual.
    #[arg(long)]
    reason: Option<String>,
    /// A retry with the same request id and request returns the first job (running or
    /// complete).
    #[arg(long, conflicts_with = "again")]
    request_id: Option<String>,
    /// Ask the model again even if an identical request already completed (by default
    /// that job and its fork are returned and the model is not called).
    #[arg(long)]
    again: bool,
    /// Refuse contexts estimated above this many tokens (characters / 4).
    #[arg(long, default_value_t = forktrail::DEFAULT_MAX_CONTEXT_TOKENS)]
    max_context_tokens: u64,
    /// The longest wait for the answer, in seconds.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Allow an endpoint that is not on this machine.
    #[arg(long)]
    allow_remote: bool,
    /// Print the plan (fork point, messages, estimated tokens, endpoint, model) and
    /// write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Return the job id at once; a worker process runs the job (the store is in use
    /// until it ends). Cancel it with `forktrail jobs cancel ID`.
    #[arg(long, conflicts_with = "dry_run")]
    background: bool,
    /// Print the job (or, with --dry-run, the plan) as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum JobsAction {
    /// Print one job.
    Show {
        /// The job id.
        job: String,
        /// Print the job as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop a running job: it ends cancelled and leaves no turn.
    Cancel {
        /// The job id.
        job: String,
    },
    /// Internal: the worker process `regenerate --background` starts runs a job
    /// recorded as running.
    #[command(hide = true)]
    Run {
        /// The job id.
        job: String,
    },
}

#[cfg(feature = "server")]
#[derive(Args)]
struct ServeArgs {
    /// The address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1:7878")]
    bind: std::net::SocketAddr,
    /// Allow writes (/update, REST writes) to requests with `Authorization: Bearer TOKEN`.
    #[arg(long, env = "FORKTRAIL_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Cancel queries and updates running longer than this (e.g. 30s, 500ms, 2m).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    query_timeout: std::time::Duration,
    /// Queries running at once; more are answered 503 with Retry-After.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    max_concurrent_queries: u16,
    /// The largest request body, in bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    max_body_bytes: usize,
    /// The largest turn content accepted through REST, in bytes.
    #[arg(long, default_value_t = 32 * 1024 * 1024)]
    max_content_bytes: usize,
    /// Load the demo tree first if the store has no session.
    #[arg(long)]
    demo: bool,
    /// Let REST regenerations send context to model endpoints off this machine.
    #[arg(long)]
    allow_remote_models: bool,
}

/// `30s`, `500ms`, `2m`, `1h`, or plain seconds.
#[cfg(feature = "server")]
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((text, "s"), |i| text.split_at(i));
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?} (e.g. 30s, 500ms, 2m)"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "invalid duration unit in {text:?} (use ms, s, m or h)"
            ))
        }
    };
    if seconds <= 0.0 {
        return Err(format!("the duration {text:?} must be positive"));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

#[derive(Args)]
struct QueryArgs {
    /// The SPARQL query text, or the name of a shipped query (see --list).
    #[arg(required_unless_present_any = ["file", "list"], conflicts_with = "file")]
    sparql: Option<String>,
    /// Read the query from a file.
    #[arg(long)]
    file: Option<PathBuf>,
    /// List the shipped queries: what each answers, what it expects, what it returns.
    #[arg(long, conflicts_with_all = ["sparql", "file", "bindings"])]
    list: bool,
    /// table, json, csv, tsv or xml for SELECT; table, json or xml for ASK; turtle,
    /// ntriples or rdfxml for CONSTRUCT/DESCRIBE; with --list, table or json.
    #[arg(long, default_value = "table")]
    format: String,
    /// Bind a projected variable: NAME=VALUE, a string literal, an integer if VALUE is
    /// digits, an IRI if written <...>, a string if written "...". Repeatable.
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    bindings: Vec<String>,
}

/// Runs the CLI and maps errors to stderr and exit code 1.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result = run(cli, &mut out).and_then(|()| Ok(out.flush()?));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`forktrail list | head -1`): stop, as Unix tools do.
        Err(e) if is_broken_pipe(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) => {
            // Data printed before the failure (a failed job's JSON) goes out first.
            let _ = out.flush();
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whether an error is, or was caused by, a write to a closed pipe.
fn is_broken_pipe(mut e: &(dyn std::error::Error + 'static)) -> bool {
    loop {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::BrokenPipe {
                return true;
            }
        }
        if let Some(forktrail::Error::Io { source, .. }) = e.downcast_ref::<forktrail::Error>() {
            if source.kind() == std::io::ErrorKind::BrokenPipe {
                return true;
            }
        }
        match e.source() {
            Some(next) => e = next,
            None => return false,
        }
    }
}

type CliResult = Result<(), Box<dyn std::error::Error>>;
type Out<'a> = &'a mut dyn Write;

/// Opens the store; commands that create one also create its directory and parents.
fn open(path: &Path, create: bool) -> Result<Store, Box<dyn std::error::Error>> {
    if path.is_file() {
        return Err(format!("{} is a file, not a store directory", path.display()).into());
    }
    if create {
        std::fs::create_dir_all(path)
            .map_err(|e| format!("cannot create the store directory {}: {e}", path.display()))?;
    }
    #[cfg(feature = "rocksdb")]
    {
        Ok(Store::open(path)?)
    }
    #[cfg(not(feature = "rocksdb"))]
    {
        Err(format!(
            "cannot open {}: this forktrail was built without the rocksdb feature",
            path.display()
        )
        .into())
    }
}

fn id(s: &str) -> Result<SessionId, forktrail::Error> {
    s.parse()
}

fn print_json(out: Out, value: &impl serde::Serialize) -> CliResult {
    let text = serde_json::to_string_pretty(value)?;
    writeln!(out, "{text}")?;
    Ok(())
}

/// Checks what can be checked without the store, so that bad arguments never create
/// or touch one.
fn precheck(command: &Command) -> CliResult {
    let sessions: Vec<&str> = match command {
        Command::Append(a) => {
            a.role.parse::<Role>()?;
            a.kind.parse::<Kind>()?;
            vec![&a.session]
        }
        Command::Fork(a) => vec![&a.session],
        Command::Replay { session, .. }
        | Command::Show { session, .. }
        | Command::Branches { session, .. }
        | Command::Tree { session, .. }
        | Command::Delete { session, .. }
        | Command::Detach { session, .. }
        | Command::Anchors { session, .. } => vec![session],
        Command::Anchor { session, state, .. } => {
            if let Some(state) = state {
                serde_json::from_str::<serde_json::Value>(state)
                    .map_err(|e| format!("--state is not valid JSON: {e}"))?;
            }
            vec![session]
        }
        Command::Merge { child, into, .. } => std::iter::once(child)
            .chain(into)
            .map(String::as_str)
            .collect(),
        Command::Diff { a, b, .. } => vec![a, b],
        Command::Regenerate(a) => vec![&a.session],
        Command::Jobs { .. } | Command::Completions { .. } => vec![],
        Command::Export {
            session, format, ..
        } => {
            format.parse::<ExportFormat>()?;
            session.iter().map(String::as_str).collect()
        }
        Command::Import { format, file, .. } => {
            if let Some(f) = format {
                f.parse::<ImportFormat>()?;
            }
            std::fs::metadata(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            vec![]
        }
        Command::New {
            id: new_id,
            principal,
            ..
        } => {
            if let Some(p) = principal {
                forktrail::Agent::principal(p.clone())?;
            }
            new_id.iter().map(String::as_str).collect()
        }
        Command::Query(q) => {
            for b in &q.bindings {
                parse_binding(b)?;
            }
            vec![]
        }
        Command::Demo | Command::List { .. } => vec![],
        #[cfg(feature = "server")]
        Command::Serve(_) => vec![],
    };
    for s in sessions {
        id(s)?;
    }
    Ok(())
}

fn run(cli: Cli, out: Out) -> CliResult {
    precheck(&cli.command)?;
    match &cli.command {
        Command::Completions { shell } => {
            clap_complete::generate(*shell, &mut Cli::command(), "forktrail", out);
            return Ok(());
        }
        Command::Query(args) if args.list => return query_list(out, &args.format),
        _ => {}
    }
    let creates = match &cli.command {
        Command::Demo | Command::New { .. } | Command::Import { .. } => true,
        #[cfg(feature = "server")]
        Command::Serve(_) => true,
        _ => false,
    };
    if !creates && !cli.store.exists() {
        return Err(format!(
            "no store at {}: create one with `forktrail new` or `forktrail demo`, or point \
             --store (or FORKTRAIL_STORE) at an existing one",
            cli.store.display()
        )
        .into());
    }
    if let Command::Jobs {
        action: Some(JobsAction::Cancel { job }),
        ..
    } = &cli.command
    {
        return cancel_job(out, &cli.store, job);
    }
    let store = match (&cli.command, open(&cli.store, creates)) {
        // A background worker may find the store still held by the command that
        // started it, for a moment.
        (
            Command::Jobs {
                action: Some(JobsAction::Run { .. }),
                ..
            },
            Err(e),
        ) if is_locked(e.as_ref()) => open_when_free(&cli.store)?,
        (_, store) => store?,
    };
    match cli.command {
        Command::Demo => render::demo(out, &store, &demo::build(&store)?, &cli.store)?,
        Command::New {
            id,
            title,
            principal,
            json,
        } => {
            let session = store.create_session(NewSession {
                id,
                title,
                principal,
            })?;
            if json {
                print_json(out, &json!({ "session": session.as_str() }))?;
            } else {
                writeln!(out, "{session}")?;
            }
        }
        Command::Append(args) => append(out, &store, args)?,
        Command::Fork(args) => fork(out, &store, args)?,
        Command::Replay {
            session,
            up_to,
            json,
            jsonl,
        } => {
            let session = id(&session)?;
            if json {
                print_json(out, &store.replay(&session, up_to)?)?;
            } else if jsonl {
                for r in &store.replay(&session, up_to)? {
                    let line = serde_json::to_string(r)?;
                    writeln!(out, "{line}")?;
                }
            } else {
                // Full turns, so tool calls show.
                render::turns(out, &store.load(&session, up_to)?)?;
            }
        }
        Command::Show { session, json } => {
            let info = store.info(&id(&session)?)?;
            if json {
                print_json(out, &info)?;
            } else {
                render::show(out, &info)?;
            }
        }
        Command::Branches { session, json } => {
            let branches = store.branches(&id(&session)?)?;
            if json {
                print_json(out, &branches)?;
            } else {
                render::branches(out, &branches)?;
            }
        }
        Command::Tree {
            session,
            json,
            dot,
            mermaid,
        } => {
            let tree = store.tree(&id(&session)?)?;
            if json {
                print_json(out, &tree)?;
            } else if dot {
                write!(out, "{}", render::tree_dot(&tree))?;
            } else if mermaid {
                write!(out, "{}", render::tree_mermaid(&tree))?;
            } else {
                write!(out, "{}", render::tree_text(&tree))?;
            }
        }
        Command::List { json } => {
            let sessions = store.list()?;
            if json {
                print_json(out, &sessions)?;
            } else {
                render::list(out, &sessions)?;
            }
        }
        Command::Delete {
            session,
            cascade,
            dry_run,
            json,
        } => {
            let options = DeleteOptions { cascade, dry_run };
            let plan = store.delete_with(&id(&session)?, options)?;
            if json {
                print_json(out, &plan)?;
            } else {
                render::delete(out, &plan, dry_run)?;
            }
        }
        Command::Detach {
            session,
            dry_run,
            json,
        } => {
            let plan = store.detach_with(&id(&session)?, DetachOptions { dry_run })?;
            if json {
                print_json(out, &plan)?;
            } else {
                render::detach(out, &plan, dry_run)?;
            }
        }
        Command::Anchor {
            session,
            name,
            state,
            json,
        } => {
            let made = store.anchor(&id(&session)?, &name, state.as_deref())?;
            if json {
                print_json(out, &made)?;
            } else {
                writeln!(
                    out,
                    "anchor {} on {} at index {}",
                    made.name, made.session, made.at_index
                )?;
            }
        }
        Command::Anchors { session, json } => {
            let anchors = store.anchors(&id(&session)?)?;
            if json {
                print_json(out, &anchors)?;
            } else {
                render::anchors(out, &anchors)?;
            }
        }
        Command::Merge {
            child,
            into,
            summary,
            dry_run,
            json,
        } => {
            let plan = store.merge(
                &id(&child)?,
                forktrail::MergeOptions {
                    into,
                    summary,
                    dry_run,
                },
            )?;
            if json {
                print_json(out, &plan)?;
            } else {
                let verb = if dry_run { "would merge" } else { "merged" };
                writeln!(
                    out,
                    "{verb} {} into {} as turn {}",
                    plan.reference, plan.into, plan.index
                )?;
            }
        }
        Command::Regenerate(args) => regenerate(out, store, &cli.store, args)?,
        Command::Jobs { action, json } => jobs(out, &store, action, json)?,
        Command::Diff { a, b, json } => {
            let (a, b) = (id(&a)?, id(&b)?);
            let diff = store.diff(&a, &b)?;
            if json {
                print_json(out, &diff)?;
            } else {
                let tail = |s: &SessionId| -> Result<Vec<forktrail::Turn>, forktrail::Error> {
                    let mut turns = store.load(s, None)?;
                    turns.drain(..(diff.common_prefix as usize).min(turns.len()));
                    Ok(turns)
                };
                render::diff(out, &diff, &tail(&a)?, &tail(&b)?)?;
            }
        }
        Command::Query(args) => query(out, &store, args)?,
        #[cfg(feature = "server")]
        Command::Serve(args) => serve(out, store, args)?,
        Command::Import {
            file,
            format,
            skip_invalid,
            json,
        } => import(out, &store, &file, format.as_deref(), skip_invalid, json)?,
        Command::Export {
            session,
            format,
            output,
        } => {
            let format: ExportFormat = format.parse()?;
            let session = session.as_deref().map(id).transpose()?;
            match output {
                Some(path) => {
                    // Write beside the target and rename, so a failure leaves no half file.
                    let tmp = path.with_extension("partial");
                    let file = std::fs::File::create(&tmp)
                        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
                    let result =
                        store.export(session.as_ref(), format, std::io::BufWriter::new(file));
                    if let Err(e) = result {
                        let _ = std::fs::remove_file(&tmp);
                        return Err(e.into());
                    }
                    std::fs::rename(&tmp, &path)
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                }
                None => store.export(session.as_ref(), format, out)?,
            }
        }
        Command::Completions { .. } => unreachable!("handled before the store opens"),
    }
    Ok(())
}

fn fork(out: Out, store: &Store, args: ForkArgs) -> CliResult {
    let parent = id(&args.session)?;
    let plan = store.fork(
        &parent,
        ForkOptions {
            at: args.at,
            anchor: args.anchor,
            label: args.label,
            reason: args.reason,
            principal: args.principal,
            id: args.id,
            summarize: args.summarize,
            request_id: args.request_id,
            dry_run: args.dry_run,
        },
    )?;
    if args.json {
        return print_json(out, &plan);
    }
    let verb = match (args.dry_run, plan.reused) {
        (true, _) => "would fork",
        (false, true) => "already forked (same request id)",
        (false, false) => "forked",
    };
    writeln!(
        out,
        "{}\n{verb} {} at index {} as branch {} (depth {}, root {})",
        plan.session, plan.parent, plan.forked_at_index, plan.branch, plan.depth, plan.fork_root
    )?;
    if let Some(summary) = &plan.summary {
        writeln!(out, "summary: {summary}")?;
    }
    Ok(())
}

fn is_locked(e: &(dyn std::error::Error + 'static)) -> bool {
    matches!(
        e.downcast_ref::<forktrail::Error>(),
        Some(forktrail::Error::StoreLocked { .. })
    )
}

fn open_when_free(path: &Path) -> Result<Store, Box<dyn std::error::Error>> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match open(path, false) {
            Err(e) if is_locked(e.as_ref()) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(100))
            }
            other => return other,
        }
    }
}

/// A regeneration job that ended `failed` or `cancelled`: the command fails with it.
#[derive(Debug)]
struct JobEnded(String);

impl std::fmt::Display for JobEnded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for JobEnded {}

/// `Ok` for a job that is complete or still running (in the background); the job's
/// outcome as an error otherwise.
fn job_outcome(job: &Job) -> CliResult {
    match job.status.as_str() {
        "failed" => Err(JobEnded(format!(
            "regeneration job {} failed: {} (see `forktrail jobs show {}`)",
            job.job,
            job.error.as_deref().unwrap_or("no reason recorded"),
            job.job
        ))
        .into()),
        "cancelled" => Err(JobEnded(format!("regeneration job {} was cancelled", job.job)).into()),
        _ => Ok(()),
    }
}

fn regenerate(out: Out, store: Store, path: &Path, args: RegenerateArgs) -> CliResult {
    let session = id(&args.session)?;
    let read = |file: &Path| {
        std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))
    };
    let tools = match &args.tools {
        Some(file) => Some(
            serde_json::from_str::<serde_json::Value>(&read(file)?)
                .map_err(|e| format!("{} is not JSON: {e}", file.display()))?,
        ),
        None => None,
    };
    let options = forktrail::RegenerateOptions {
        at: args.at,
        model: args.model,
        system_prompt: args.system_prompt.as_deref().map(read).transpose()?,
        tools,
        endpoint: args.endpoint,
        max_tokens: args.max_tokens,
        temperature: args.temperature,
        reason: args.reason,
        request_id: args.request_id,
        again: args.again,
        max_context_tokens: Some(args.max_context_tokens),
        allow_remote: args.allow_remote,
        timeout_secs: Some(args.timeout),
        dry_run: false,
    };
    if args.dry_run {
        let plan = store.plan_regeneration(&session, &options)?;
        if args.json {
            return print_json(out, &plan);
        }
        writeln!(out, "would fork {} at index {}", plan.session, plan.at)?;
        writeln!(out, "messages          {}", plan.messages)?;
        writeln!(
            out,
            "estimated tokens  {} ({})",
            plan.estimated_tokens, plan.estimate_method
        )?;
        writeln!(out, "endpoint          {}", plan.endpoint)?;
        writeln!(out, "model             {}", plan.model)?;
        if !plan.swapped.is_empty() {
            writeln!(out, "swapped           {}", plan.swapped.join(", "))?;
        }
        return Ok(());
    }
    let job = store.begin_regeneration(&session, &options)?;
    let job = if job.status != "running" {
        job
    } else if args.background {
        drop(store);
        std::process::Command::new(std::env::current_exe()?)
            .arg("--store")
            .arg(path)
            .args(["jobs", "run", &job.job])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the background worker: {e}"))?;
        job
    } else {
        store.run_job(&job.job)?
    };
    if args.json {
        print_json(out, &job)?;
    } else if job_outcome(&job).is_ok() {
        render::job(out, &job)?;
    }
    job_outcome(&job)
}

fn jobs(out: Out, store: &Store, action: Option<JobsAction>, json: bool) -> CliResult {
    match action {
        None if json => print_json(out, &store.jobs()?),
        None => Ok(render::jobs(out, &store.jobs()?)?),
        Some(JobsAction::Show { job, json }) => {
            let job = store.job(&job)?;
            if json {
                print_json(out, &job)
            } else {
                Ok(render::job(out, &job)?)
            }
        }
        Some(JobsAction::Run { job }) => {
            store.run_job(&job)?;
            Ok(())
        }
        Some(JobsAction::Cancel { .. }) => unreachable!("handled before the store opens"),
    }
}

/// Cancels a job. If a background worker holds the store, a cancel file asks it to
/// stop, and this waits for the store to report the outcome.
fn cancel_job(out: Out, path: &Path, job: &str) -> CliResult {
    let store = match open(path, false) {
        Ok(store) => store,
        Err(e) if is_locked(e.as_ref()) => {
            let file = Store::cancel_file(path, job);
            if let Some(dir) = file.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&file, b"")?;
            open_when_free(path)?
        }
        Err(e) => return Err(e),
    };
    let done = store.cancel_job(job)?;
    let _ = std::fs::remove_file(Store::cancel_file(path, job));
    Ok(render::job(out, &done)?)
}

fn import(
    out: Out,
    store: &Store,
    file: &Path,
    format: Option<&str>,
    skip_invalid: bool,
    json: bool,
) -> CliResult {
    let format = format.map(str::parse::<ImportFormat>).transpose()?;
    // A progress bar on a terminal only, and never with --json.
    let bar = (!json && std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .then(|| indicatif::ProgressBar::new(0));
    let progress = |done: u64, total: u64| {
        if let Some(bar) = &bar {
            bar.set_length(total);
            bar.set_position(done);
        }
    };
    let options = forktrail::TranscriptOptions {
        skip_invalid,
        progress: Some(&progress),
    };
    let report = if file.is_dir() {
        match format {
            None | Some(ImportFormat::ClaudeCode) => store.import_claude_code_path(file, &options),
            Some(other) => {
                return Err(format!(
                    "{} is a folder: only a Claude Code project folder can be imported \
                     (--format claude-code), not {other:?}",
                    file.display()
                )
                .into())
            }
        }
    } else {
        let bytes =
            std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let what = file.display().to_string();
        match format {
            Some(format) => Ok(format),
            None => ImportFormat::sniff_or_explain(&bytes, &what),
        }
        .and_then(|format| match format {
            // From disk, so that its sub-agents' transcripts come along.
            ImportFormat::ClaudeCode => store.import_claude_code_path(file, &options),
            other => store.import_with(&bytes, Some(other), &options),
        })
    };
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let report = report?;
    if json {
        return print_json(out, &report);
    }
    for id in &report.sessions {
        writeln!(out, "imported {id}")?;
    }
    for id in &report.extended {
        writeln!(out, "extended {id}")?;
    }
    if report.sessions.is_empty() && report.extended.is_empty() {
        writeln!(out, "up to date: nothing new in {}", file.display())?;
    }
    if report.turns > 0 {
        writeln!(out, "{}", render::count(report.turns, "turn", "turns"))?;
    }
    for (kind, n) in &report.skipped_types {
        writeln!(
            out,
            "skipped {} of type {kind}",
            render::count(*n, "line", "lines")
        )?;
    }
    let numbers = |lines: &[u64]| -> String {
        let lines: Vec<String> = lines.iter().map(u64::to_string).collect();
        lines.join(", ")
    };
    if !report.skipped_invalid_in.is_empty() {
        for (file, lines) in &report.skipped_invalid_in {
            writeln!(out, "skipped malformed lines of {file}: {}", numbers(lines))?;
        }
    } else if !report.skipped_invalid.is_empty() {
        writeln!(
            out,
            "skipped malformed lines: {}",
            numbers(&report.skipped_invalid)
        )?;
    }
    for id in &report.unresolved_subagents {
        writeln!(
            out,
            "sub-agent {id}: the turn that launched it is not in the store (link unresolved)"
        )?;
    }
    Ok(())
}

#[cfg(feature = "server")]
fn serve(out: Out, store: Store, args: ServeArgs) -> CliResult {
    if args.demo && store.list()?.is_empty() {
        let tree = demo::build(&store)?;
        writeln!(out, "loaded the demo tree (root {})", tree.root)?;
    }
    out.flush()?;
    let config = forktrail::server::ServerConfig {
        bind: args.bind,
        token: args.token.filter(|t| !t.is_empty()),
        query_timeout: args.query_timeout,
        max_concurrent_queries: usize::from(args.max_concurrent_queries),
        max_body_bytes: args.max_body_bytes,
        max_content_bytes: args.max_content_bytes,
        allow_remote_models: args.allow_remote_models,
    };
    let writable = config.token.is_some();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(forktrail::server::serve(
        std::sync::Arc::new(store),
        config,
        move |addr| {
            // Written, not println!: nobody reading stdout must not stop the server.
            let mut out = std::io::stdout();
            let _ = writeln!(out, "forktrail is serving on http://{addr} ({})", if writable { "writes need the token" } else { "read-only" });
            let _ = writeln!(out, "try: curl -H 'Accept: text/csv' --data-urlencode 'query=SELECT ?id ?branch WHERE {{ ?s <https://w3id.org/forktrail/ns#sessionId> ?id ; <https://w3id.org/forktrail/ns#branch> ?branch }}' http://{addr}/sparql");
            let _ = writeln!(out, "     curl http://{addr}/sessions");
            let _ = writeln!(out, "     curl http://{addr}/queries");
            let _ = out.flush();
        },
    ))?;
    Ok(())
}

fn append(out: Out, store: &Store, args: AppendArgs) -> CliResult {
    let session = id(&args.session)?;
    let role: Role = args.role.parse()?;
    let kind: Kind = args.kind.parse()?;
    let content = match (args.content, &args.file) {
        (Some(text), _) => text,
        (None, Some(path)) => {
            let bytes =
                std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            utf8(bytes, &path.display().to_string())?
        }
        (None, None) => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| format!("cannot read standard input: {e}"))?;
            utf8(bytes, "standard input")?
        }
    };
    let mut turn = NewTurn::new(role, content).kind(kind);
    turn.model = args.model;
    turn.name = args.name;
    turn.tool_call_id = args.tool_call_id;
    turn.tool_calls = args.tool_calls;
    let index = store.append(&session, turn)?;
    if args.json {
        print_json(out, &json!({ "session": session.as_str(), "index": index }))?;
    } else {
        writeln!(out, "{index}")?;
    }
    Ok(())
}

/// Content must be UTF-8: say where it is not instead of storing replacement characters.
fn utf8(bytes: Vec<u8>, source: &str) -> Result<String, forktrail::Error> {
    String::from_utf8(bytes).map_err(|e| {
        forktrail::Error::InvalidInput(format!(
            "{source} is not valid UTF-8 (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// `NAME=VALUE`, the value read as [`forktrail::binding_value`] reads it.
fn parse_binding(text: &str) -> Result<(String, Term), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("--bind {text:?}: expected NAME=VALUE"))?;
    let name = name.trim_start_matches(['?', '$']).to_string();
    let term = forktrail::binding_value(value).map_err(|e| format!("--bind {name}: {e}"))?;
    Ok((name, term))
}

fn query_list(out: Out, format: &str) -> CliResult {
    let all = forktrail::queries::ALL;
    match format {
        "json" => {
            let list: Vec<serde_json::Value> = all
                .iter()
                .map(|q| json!({ "name": q.name, "help": q.help(), "inputs": q.inputs() }))
                .collect();
            print_json(out, &list)
        }
        "table" => Ok(render::query_list(out, all)?),
        other => Err(format!("--list prints as table or json, not {other:?}").into()),
    }
}

fn query(out: Out, store: &Store, args: QueryArgs) -> CliResult {
    let bindings = args
        .bindings
        .iter()
        .map(|b| parse_binding(b))
        .collect::<Result<Vec<_>, _>>()?;
    let bindings: Vec<(&str, Term)> = bindings
        .iter()
        .map(|(n, t)| (n.as_str(), t.clone()))
        .collect();
    let results = match (&args.sparql, &args.file) {
        (Some(text), _) => match NamedQuery::find(text) {
            Some(named) => store.query_named(&named, &bindings)?,
            None if is_query_name(text) => {
                return Err(format!(
                    "no shipped query is named {text:?}; `forktrail query --list` shows them \
                     (or give SPARQL text)"
                )
                .into())
            }
            None => store.query(text, &bindings)?,
        },
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            store.query(&text, &bindings)?
        }
        (None, None) => return Err("give a SPARQL query, a query name or --file".into()),
    };
    render::query_results(results, &args.format, out)
}

/// A word like a query's name (`audit-turn-origin`), which no SPARQL query is.
fn is_query_name(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag, option and argument of every command says what it is for.
    #[test]
    fn every_argument_of_every_command_has_help_text() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
                if arg
                    .get_help()
                    .is_none_or(|h| h.to_string().trim().is_empty())
                {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in command.get_subcommands() {
                if sub.get_about().is_none() && !sub.is_hide_set() {
                    missing.push(format!("{path} {} (no about)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        let mut command = Cli::command();
        command.build();
        walk(&command, "forktrail", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }

    #[test]
    fn the_export_format_help_lists_every_export_format() {
        let command = Cli::command();
        let export = command.find_subcommand("export").unwrap();
        let format = export
            .get_arguments()
            .find(|a| a.get_id() == "format")
            .unwrap();
        let help = format.get_help().unwrap().to_string();
        for name in ExportFormat::NAMES {
            assert!(
                help.contains(name),
                "export --format help lacks {name}: {help}"
            );
        }
        let import = command.find_subcommand("import").unwrap();
        let help = import
            .get_arguments()
            .find(|a| a.get_id() == "format")
            .unwrap()
            .get_help()
            .unwrap()
            .to_string();
        for name in ImportFormat::NAMES {
            assert!(
                help.contains(name),
                "import --format help lacks {name}: {help}"
            );
        }
    }

    #[test]
    fn a_broken_pipe_is_found_through_wrapped_errors() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let wrapped = forktrail::Error::Io {
            context: "cannot write the export".into(),
            source: std::io::Error::from(std::io::ErrorKind::BrokenPipe),
        };
        let boxed: Box<dyn std::error::Error> = Box::new(pipe);
        assert!(is_broken_pipe(boxed.as_ref()));
        let boxed: Box<dyn std::error::Error> = Box::new(wrapped);
        assert!(is_broken_pipe(boxed.as_ref()));
        let other: Box<dyn std::error::Error> = "no store".into();
        assert!(!is_broken_pipe(other.as_ref()));
    }
}
