//! The `forktrail` commands: parse arguments, call the library, print the result.
//! Data goes to stdout, errors to stderr with a non-zero exit; a failed command
//! changes nothing.

mod render;

use clap::{Args, Parser, Subcommand};
use forktrail::{
    demo, ExportFormat, ForkOptions, ImportFormat, Kind, NewSession, NewTurn, Role, SessionId,
    Store,
};
use oxigraph::model::{Literal, NamedNode, Term};
use serde_json::json;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Provenance engine for LLM-agent conversations: fork, branch, replay and audit agent
/// sessions stored as RDF.
#[derive(Parser)]
#[command(name = "forktrail", version, about, long_about = None)]
struct Cli {
    /// The store directory (RocksDB).
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
    /// Build a sample conversation with a tree of forks, then print the tree, a replay
    /// of the deepest fork and the answer to an audit query.
    Demo,
    /// Create a root session and print its id.
    New {
        /// The session id (default: a fresh UUID v7).
        #[arg(long)]
        id: Option<String>,
        #[arg(long)]
        title: Option<String>,
        /// Who the session runs for (default: anonymous).
        #[arg(long)]
        principal: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Append a turn; the content comes from --content, --file or standard input.
    Append(AppendArgs),
    /// Fork a session at index K (default: its length), sharing its first K turns.
    Fork(ForkArgs),
    /// Print the turns of a session in order, inherited prefix included. Never writes.
    Replay {
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
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// List the direct children (branches) of a session.
    Branches {
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// Print a session and its descendants.
    Tree {
        session: String,
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
        #[arg(long)]
        json: bool,
    },
    /// Delete a session (refused if it has children, unless --cascade).
    Delete {
        session: String,
        /// Delete the whole subtree in one transaction.
        #[arg(long)]
        cascade: bool,
    },
    /// Copy a fork's inherited turns into it and drop its parent link.
    Detach { session: String },
    /// Name the session's current length as an anchor, with optional JSON state.
    Anchor {
        session: String,
        name: String,
        /// JSON saved with the anchor.
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// List the anchors a session sees: its own and its ancestors' within its prefix.
    Anchors {
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// Fold a fork's new turns back: append one fork_result turn to its parent (or
    /// --into) referring to CHILD@k:turns:a-b, with a summary.
    Merge {
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
        #[arg(long)]
        json: bool,
    },
    /// What-if: fork at turn K and let a model (swapped, or with another system prompt
    /// or tools) answer from there, through an OpenAI-compatible endpoint. Tool calls in
    /// the answer are recorded as a tool_call turn and NEVER executed: regeneration
    /// stops there.
    Regenerate(RegenerateArgs),
    /// List regeneration jobs, or show, cancel or run one.
    Jobs {
        #[command(subcommand)]
        action: Option<JobsAction>,
        #[arg(long)]
        json: bool,
    },
    /// Compare two sessions: common ancestor, shared prefix, and both tails.
    Diff {
        a: String,
        b: String,
        #[arg(long)]
        json: bool,
    },
    /// Run a read-only SPARQL query over the union of all session graphs.
    Query(QueryArgs),
    /// Import sessions: forktrail's own TriG or N-Quads export, an OpenAI chat
    /// transcript (JSON array or JSONL of messages), or a Claude Code session log
    /// (JSONL). All or nothing.
    Import {
        file: PathBuf,
        /// trig, nquads, openai or claude-code (default: from the file extension: .nq
        /// nquads, .json openai, else trig).
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
    /// Serve the store over HTTP: a SPARQL 1.1 endpoint (/sparql, /query, /update,
    /// /store) and a REST API (/sessions). Read-only unless started with a token.
    #[cfg(feature = "server")]
    Serve(ServeArgs),
    /// Export one session, or all, as TriG, N-Quads, Turtle (one session), JSONL
    /// replay records (one session) or OpenAI chat messages (one session).
    Export {
        session: Option<String>,
        #[arg(long, default_value = "trig")]
        format: String,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

#[derive(Args)]
struct AppendArgs {
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
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ForkArgs {
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
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct RegenerateArgs {
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
    #[arg(long)]
    max_tokens: Option<u32>,
    #[arg(long)]
    temperature: Option<f64>,
    /// what-if (default), benchmark or manual.
    #[arg(long)]
    reason: Option<String>,
    /// A retry with the same request id, model, prompt and tools returns the first job.
    #[arg(long)]
    request_id: Option<String>,
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
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum JobsAction {
    /// Print one job.
    Show {
        job: String,
        #[arg(long)]
        json: bool,
    },
    /// Stop a running job: it ends cancelled and leaves no turn.
    Cancel { job: String },
    /// Run a job recorded as running (what `regenerate --background` starts).
    #[command(hide = true)]
    Run { job: String },
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
    /// The SPARQL query text.
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    sparql: Option<String>,
    /// Read the query from a file (e.g. queries/fork-chain.rq).
    #[arg(long)]
    file: Option<PathBuf>,
    /// table, json, csv, tsv or xml for SELECT/ASK; turtle or ntriples for CONSTRUCT/DESCRIBE.
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
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type CliResult = Result<(), Box<dyn std::error::Error>>;

fn open(path: &Path) -> Result<Store, forktrail::Error> {
    #[cfg(feature = "rocksdb")]
    {
        Store::open(path)
    }
    #[cfg(not(feature = "rocksdb"))]
    {
        Err(forktrail::Error::InvalidInput(format!(
            "cannot open {}: this forktrail was built without the rocksdb feature",
            path.display()
        )))
    }
}

fn id(s: &str) -> Result<SessionId, forktrail::Error> {
    s.parse()
}

fn print_json(value: &impl serde::Serialize) -> CliResult {
    println!("{}", serde_json::to_string_pretty(value)?);
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
        | Command::Detach { session }
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
        Command::Jobs { .. } => vec![],
        Command::Export {
            session, format, ..
        } => {
            format.parse::<ExportFormat>()?;
            session.iter().map(String::as_str).collect()
        }
        Command::Import { format, file, .. } => {
            if let Some(f) = format {
                Source::parse(f)?;
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

fn run(cli: Cli) -> CliResult {
    precheck(&cli.command)?;
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
        return cancel_job(&cli.store, job);
    }
    let store = match (&cli.command, open(&cli.store)) {
        // A background worker may find the store still held by the command that
        // started it, for a moment.
        (
            Command::Jobs {
                action: Some(JobsAction::Run { .. }),
                ..
            },
            Err(forktrail::Error::StoreLocked { .. }),
        ) => open_when_free(&cli.store)?,
        (_, store) => store?,
    };
    match cli.command {
        Command::Demo => render::demo(&store, &demo::build(&store)?, &cli.store)?,
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
                print_json(&json!({ "session": session.as_str() }))?;
            } else {
                println!("{session}");
            }
        }
        Command::Append(args) => append(&store, args)?,
        Command::Fork(args) => {
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
                print_json(&plan)?;
            } else {
                let verb = match (args.dry_run, plan.reused) {
                    (true, _) => "would fork",
                    (false, true) => "already forked (same request id)",
                    (false, false) => "forked",
                };
                println!(
                    "{}\n{verb} {} at index {} as branch {} (depth {}, root {})",
                    plan.session,
                    plan.parent,
                    plan.forked_at_index,
                    plan.branch,
                    plan.depth,
                    plan.fork_root
                );
                if let Some(summary) = &plan.summary {
                    println!("summary: {summary}");
                }
            }
        }
        Command::Replay {
            session,
            up_to,
            json,
            jsonl,
        } => {
            let records = store.replay(&id(&session)?, up_to)?;
            if json {
                print_json(&records)?;
            } else if jsonl {
                let mut out = std::io::stdout().lock();
                for r in &records {
                    serde_json::to_writer(&mut out, r)?;
                    out.write_all(b"\n")?;
                }
            } else {
                render::replay(&records);
            }
        }
        Command::Show { session, json } => {
            let info = store.info(&id(&session)?)?;
            if json {
                print_json(&info)?;
            } else {
                render::show(&info);
            }
        }
        Command::Branches { session, json } => {
            let branches = store.branches(&id(&session)?)?;
            if json {
                print_json(&branches)?;
            } else {
                render::branches(&branches);
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
                print_json(&tree)?;
            } else if dot {
                print!("{}", render::tree_dot(&tree));
            } else if mermaid {
                print!("{}", render::tree_mermaid(&tree));
            } else {
                print!("{}", render::tree_text(&tree));
            }
        }
        Command::List { json } => {
            let sessions = store.list()?;
            if json {
                print_json(&sessions)?;
            } else {
                render::list(&sessions);
            }
        }
        Command::Delete { session, cascade } => {
            for deleted in store.delete(&id(&session)?, cascade)? {
                println!("deleted {deleted}");
            }
        }
        Command::Detach { session } => {
            let session = id(&session)?;
            store.detach(&session)?;
            println!("detached {session}");
        }
        Command::Anchor {
            session,
            name,
            state,
            json,
        } => {
            let made = store.anchor(&id(&session)?, &name, state.as_deref())?;
            if json {
                print_json(&made)?;
            } else {
                println!(
                    "anchor {} on {} at index {}",
                    made.name, made.session, made.at_index
                );
            }
        }
        Command::Anchors { session, json } => {
            let anchors = store.anchors(&id(&session)?)?;
            if json {
                print_json(&anchors)?;
            } else {
                render::anchors(&anchors);
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
                print_json(&plan)?;
            } else {
                let verb = if dry_run { "would merge" } else { "merged" };
                println!(
                    "{verb} {} into {} as turn {}",
                    plan.reference, plan.into, plan.index
                );
            }
        }
        Command::Regenerate(args) => regenerate(store, &cli.store, args)?,
        Command::Jobs { action, json } => jobs(&store, action, json)?,
        Command::Diff { a, b, json } => {
            let diff = store.diff(&id(&a)?, &id(&b)?)?;
            if json {
                print_json(&diff)?;
            } else {
                render::diff(&diff);
            }
        }
        Command::Query(args) => query(&store, args)?,
        #[cfg(feature = "server")]
        Command::Serve(args) => serve(store, args)?,
        Command::Import {
            file,
            format,
            skip_invalid,
            json,
        } => import(&store, &file, format.as_deref(), skip_invalid, json)?,
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
                None => store.export(session.as_ref(), format, std::io::stdout().lock())?,
            }
        }
    }
    Ok(())
}

fn open_when_free(path: &Path) -> Result<Store, forktrail::Error> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match open(path) {
            Err(forktrail::Error::StoreLocked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(100))
            }
            other => return other,
        }
    }
}

fn regenerate(store: Store, path: &Path, args: RegenerateArgs) -> CliResult {
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
        max_context_tokens: Some(args.max_context_tokens),
        allow_remote: args.allow_remote,
        timeout_secs: Some(args.timeout),
        dry_run: false,
    };
    if args.dry_run {
        let plan = store.plan_regeneration(&session, &options)?;
        if args.json {
            return print_json(&plan);
        }
        println!("would fork {} at index {}", plan.session, plan.at);
        println!("messages          {}", plan.messages);
        println!(
            "estimated tokens  {} ({})",
            plan.estimated_tokens, plan.estimate_method
        );
        println!("endpoint          {}", plan.endpoint);
        println!("model             {}", plan.model);
        if !plan.swapped.is_empty() {
            println!("swapped           {}", plan.swapped.join(", "));
        }
        return Ok(());
    }
    let job = store.begin_regeneration(&session, &options)?;
    let job = if args.background && job.status == "running" {
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
        print_json(&job)
    } else {
        render::job(&job);
        Ok(())
    }
}

fn jobs(store: &Store, action: Option<JobsAction>, json: bool) -> CliResult {
    match action {
        None if json => print_json(&store.jobs()?),
        None => {
            render::jobs(&store.jobs()?);
            Ok(())
        }
        Some(JobsAction::Show { job, json }) => {
            let job = store.job(&job)?;
            if json {
                print_json(&job)
            } else {
                render::job(&job);
                Ok(())
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
fn cancel_job(path: &Path, job: &str) -> CliResult {
    if !path.exists() {
        return Err(format!("no store at {}", path.display()).into());
    }
    let store = match open(path) {
        Ok(store) => store,
        Err(forktrail::Error::StoreLocked { .. }) => {
            let file = Store::cancel_file(path, job);
            if let Some(dir) = file.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&file, b"")?;
            open_when_free(path)?
        }
        Err(e) => return Err(e.into()),
    };
    let done = store.cancel_job(job)?;
    let _ = std::fs::remove_file(Store::cancel_file(path, job));
    render::job(&done);
    Ok(())
}

/// What `import` reads.
enum Source {
    Rdf(ImportFormat),
    OpenAi,
    ClaudeCode,
}

impl Source {
    fn parse(text: &str) -> Result<Self, String> {
        match text {
            "openai" => Ok(Self::OpenAi),
            "claude-code" => Ok(Self::ClaudeCode),
            other => other.parse().map(Self::Rdf).map_err(|_| {
                format!(
                    "unknown import format {other:?} (expected trig, nquads, openai or claude-code)"
                )
            }),
        }
    }
}

fn import(
    store: &Store,
    file: &Path,
    format: Option<&str>,
    skip_invalid: bool,
    json: bool,
) -> CliResult {
    let extension = file.extension().and_then(|e| e.to_str()).unwrap_or("");
    let source = match (format, extension) {
        (Some(f), _) => Source::parse(f)?,
        (None, "nq" | "nquads") => Source::Rdf(ImportFormat::NQuads),
        (None, "json") => Source::OpenAi,
        (None, _) => Source::Rdf(ImportFormat::TriG),
    };
    let read_err = |e: std::io::Error| format!("cannot read {}: {e}", file.display());
    let report = match source {
        Source::Rdf(format) => {
            let reader = std::fs::File::open(file).map_err(read_err)?;
            let ids = store.import(std::io::BufReader::new(reader), format)?;
            forktrail::TranscriptReport {
                sessions: ids,
                ..Default::default()
            }
        }
        transcript => {
            let text = std::fs::read_to_string(file).map_err(read_err)?;
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
            let report = match transcript {
                Source::OpenAi => store.import_openai(&text, NewSession::default(), &options),
                _ => store.import_claude_code(&text, &options),
            };
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            report?
        }
    };
    if json {
        print_json(&report)?;
    } else {
        for id in &report.sessions {
            println!("imported {id}");
        }
        if report.turns > 0 {
            println!("{} turns", report.turns);
        }
        for (kind, n) in &report.skipped_types {
            println!("skipped {n} line(s) of type {kind}");
        }
        if !report.skipped_invalid.is_empty() {
            let lines: Vec<String> = report.skipped_invalid.iter().map(u64::to_string).collect();
            println!("skipped malformed lines: {}", lines.join(", "));
        }
    }
    Ok(())
}

#[cfg(feature = "server")]
fn serve(store: Store, args: ServeArgs) -> CliResult {
    if args.demo && store.list()?.is_empty() {
        let tree = demo::build(&store)?;
        println!("loaded the demo tree (root {})", tree.root);
    }
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
            println!("forktrail is serving on http://{addr} ({})", if writable { "writes need the token" } else { "read-only" });
            println!("try: curl -H 'Accept: text/csv' --data-urlencode 'query=SELECT ?id ?branch WHERE {{ ?s <https://w3id.org/forktrail/ns#sessionId> ?id ; <https://w3id.org/forktrail/ns#branch> ?branch }}' http://{addr}/sparql");
            println!("     curl http://{addr}/sessions");
        },
    ))?;
    Ok(())
}

fn append(store: &Store, args: AppendArgs) -> CliResult {
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
        print_json(&json!({ "session": session.as_str(), "index": index }))?;
    } else {
        println!("{index}");
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

/// `NAME=VALUE`: `<...>` is an IRI, `"..."` a string, digits an integer, anything else a
/// string.
fn parse_binding(text: &str) -> Result<(String, Term), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("--bind {text:?}: expected NAME=VALUE"))?;
    let name = name.trim_start_matches(['?', '$']).to_string();
    let quoted = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .filter(|_| value.len() >= 2);
    let term: Term = if let Some(text) = quoted {
        Literal::new_simple_literal(text).into()
    } else if let Some(iri) = value.strip_prefix('<').and_then(|v| v.strip_suffix('>')) {
        NamedNode::new(iri)
            .map_err(|e| format!("--bind {name}: invalid IRI <{iri}>: {e}"))?
            .into()
    } else if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        Literal::new_typed_literal(value, oxigraph::model::vocab::xsd::INTEGER).into()
    } else {
        Literal::new_simple_literal(value).into()
    };
    Ok((name, term))
}

fn query(store: &Store, args: QueryArgs) -> CliResult {
    let sparql = match (&args.sparql, &args.file) {
        (Some(text), _) => text.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        (None, None) => return Err("give a SPARQL query or --file".into()),
    };
    let bindings = args
        .bindings
        .iter()
        .map(|b| parse_binding(b))
        .collect::<Result<Vec<_>, _>>()?;
    let bindings: Vec<(&str, Term)> = bindings
        .iter()
        .map(|(n, t)| (n.as_str(), t.clone()))
        .collect();
    let results = store.query(&sparql, &bindings)?;
    render::query_results(results, &args.format, std::io::stdout().lock())
}
