//! The `forktrail` commands: parse arguments, call the library, print the result.
//! Data goes to stdout, errors to stderr with a non-zero exit; a failed command
//! changes nothing. A reader that stops reading (`| head`) ends the output quietly.
//!
//! One file per command group; each command's arguments are a struct with a `run`
//! method, and [`run`] only picks it. Arguments are typed (session ids, roles,
//! formats), so clap rejects bad ones before any store is opened or created.

mod calls;
mod compare;
mod experiment;
mod figures;
mod jobs;
mod query;
mod render;
#[cfg(feature = "server")]
mod serve;
mod sessions;
mod transfer;
mod tree;
mod verify;
mod watch;

use clap::{Args, CommandFactory, Parser, Subcommand};
use forktrail::{Limits, RemoteAuth, RemoteConfig, Store};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Provenance engine for LLM-agent conversations: fork, branch, replay and audit agent
/// sessions stored as RDF.
#[derive(Parser)]
#[command(name = "forktrail", version, about, long_about = None)]
struct Cli {
    /// The store: a directory (RocksDB; created, with its parents, by demo, new, import,
    /// watch, serve and mcp), or the http:// or https:// URL of a SPARQL 1.1 query endpoint (Oxigraph server,
    /// Virtuoso, GraphDB, a running `forktrail serve`'s /sparql …), which many
    /// processes may share. Credentials come from FORKTRAIL_STORE_TOKEN (bearer), or
    /// FORKTRAIL_STORE_USER and FORKTRAIL_STORE_PASSWORD (Basic or Digest, as the store
    /// asks), only.
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        env = "FORKTRAIL_STORE",
        default_value = "./forktrail-data"
    )]
    store: PathBuf,
    /// With a URL --store: its SPARQL update endpoint. Default: the query URL with a
    /// final /query replaced by /update (Oxigraph server), else the query URL itself.
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        env = "FORKTRAIL_UPDATE_ENDPOINT",
        value_name = "URL"
    )]
    update_endpoint: Option<String>,
    /// With a directory --store: what an acknowledged write survives. process: a crash
    /// of this process (the default); sync: a power loss too (each write flushed to
    /// disk first, slower); an interval such as 100ms: a power loss loses at most the
    /// writes of the last interval.
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        env = "FORKTRAIL_DURABILITY",
        default_value = "process",
        value_name = "process|sync|INTERVAL"
    )]
    durability: forktrail::Durability,
    /// The largest turn content, tool calls or merge summary a write takes, in bytes,
    /// on every surface (CLI, REST, MCP, web UI, imports).
    #[arg(long, global = true, help_heading = "Limits", hide_short_help = true,
          env = "FORKTRAIL_MAX_CONTENT_BYTES", value_name = "BYTES",
          default_value_t = Limits::default().content_bytes)]
    max_content_bytes: usize,
    /// The largest JSON state (an anchor's state, a turn's payload), in bytes.
    #[arg(long, global = true, help_heading = "Limits", hide_short_help = true,
          env = "FORKTRAIL_MAX_STATE_BYTES", value_name = "BYTES",
          default_value_t = Limits::default().state_bytes)]
    max_state_bytes: usize,
    /// The largest title, fork reason, tool name, tool call id or model name, in bytes.
    #[arg(long, global = true, help_heading = "Limits", hide_short_help = true,
          env = "FORKTRAIL_MAX_FIELD_BYTES", value_name = "BYTES",
          default_value_t = Limits::default().field_bytes)]
    max_field_bytes: usize,
    #[command(subcommand)]
    command: Command,
}

/// Where the store is, as the command line says.
pub(crate) struct Target {
    store: PathBuf,
    update_endpoint: Option<String>,
    /// The prefix of the environment variables that hold a remote store's
    /// credentials: `FORKTRAIL_STORE` (`_TOKEN`, `_USER`, `_PASSWORD`).
    credentials: &'static str,
    durability: forktrail::Durability,
    limits: Limits,
}

impl Target {
    /// The query URL of a remote store.
    fn url(&self) -> Option<&str> {
        let s = self.store.to_str()?;
        (s.starts_with("http://") || s.starts_with("https://")).then_some(s)
    }

    /// The directory of an embedded store.
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.url().is_none().then_some(self.store.as_path())
    }

    /// The arguments that point another forktrail process at this store.
    pub(crate) fn args(&self) -> Vec<std::ffi::OsString> {
        let mut args = vec!["--store".into(), self.store.clone().into_os_string()];
        if let Some(update) = &self.update_endpoint {
            args.extend(["--update-endpoint".into(), update.into()]);
        }
        args.extend(["--durability".into(), self.durability.to_string().into()]);
        let Limits {
            content_bytes,
            state_bytes,
            field_bytes,
        } = self.limits;
        for (option, bytes) in [
            ("--max-content-bytes", content_bytes),
            ("--max-state-bytes", state_bytes),
            ("--max-field-bytes", field_bytes),
        ] {
            args.extend([option.into(), bytes.to_string().into()]);
        }
        args
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.store.display())
    }
}

#[derive(Subcommand)]
enum Command {
    /// Build a sample conversation with a tree of forks and show it.
    ///
    /// Prints the tree, a replay of the deepest fork, the answer to an audit query and
    /// commands to try next.
    Demo,
    /// Create a root session and print its id.
    New(sessions::NewArgs),
    /// Append a turn; the content comes from --content, --file or standard input.
    Append(sessions::AppendArgs),
    /// Fork a session at index K (default: its length), sharing its first K turns.
    Fork(tree::ForkArgs),
    /// Print the turns of a session in order, inherited prefix included. Never writes.
    Replay(sessions::ReplayArgs),
    /// Print a session's lineage facts, counts and head digest.
    Show(sessions::ShowArgs),
    /// List the direct children (branches) of a session.
    Branches(tree::BranchesArgs),
    /// Print a session and its descendants.
    Tree(tree::TreeArgs),
    /// List sessions, a page at a time: newest activity first, filtered by principal,
    /// model, roots, parent, family or time.
    ///
    /// A page costs the same however many sessions the store holds. It prints the
    /// cursor of the next page on standard error; --all prints every page.
    List(sessions::ListArgs),
    /// Search turn contents, titles, branch labels and models: words and "phrases",
    /// best first.
    Search(sessions::SearchArgs),
    /// Rebuild the catalog (pages of sessions, search) from the RDF.
    ///
    /// The catalog is derived: safe to delete, rebuilt by this or by the first read
    /// that finds it missing or damaged. Writes wait while it is rebuilt. On a shared
    /// store (a URL), the catalog this machine keeps of it (under $FORKTRAIL_CACHE_DIR,
    /// else the user's cache directory): rebuild it after a write made around
    /// forktrail, which the store's change feed does not name.
    Reindex(sessions::ReindexArgs),
    /// Bring a store written by an older forktrail to the current digest version.
    ///
    /// Digests of version 2 cover tool calls, tool results' calls, names and payloads,
    /// which version 1 left out. A store on disk is brought up when it is opened (this
    /// then says what was done); a shared store (--store URL) needs this once, and holds
    /// every writer meanwhile.
    Upgrade(sessions::UpgradeArgs),
    /// Delete a session (refused if it has children, unless --cascade).
    Delete(sessions::DeleteArgs),
    /// Remove a session's last turn (refused if it is inherited, or a fork, an anchor or
    /// any statement points at it): the `pop_item` of agent session stores.
    Pop(sessions::PopArgs),
    /// Make a fork stand alone: copy its inherited turns in and drop its parent link.
    ///
    /// Afterwards the parent can be deleted; the PROV derivation stays.
    Detach(tree::DetachArgs),
    /// Name the session's current length as an anchor, with optional JSON state.
    Anchor(tree::AnchorArgs),
    /// List the anchors a session sees: its own and its ancestors' within its prefix.
    Anchors(tree::AnchorsArgs),
    /// Fold a fork's new turns back into its parent as one fork_result turn.
    ///
    /// The turn (appended to the parent, or --into) refers to CHILD@k:turns:a-b and
    /// carries a summary.
    Merge(tree::MergeArgs),
    /// What-if: fork at turn K and let another model, system prompt or tools answer.
    ///
    /// The model is called through an OpenAI-compatible endpoint. Tool calls in the
    /// answer are recorded as a tool_call turn and NEVER executed: regeneration stops
    /// there. An identical request that already completed is returned, not sent again
    /// (--again asks anew). Exits 1 when the job fails or is cancelled.
    Regenerate(jobs::RegenerateArgs),
    /// What-if for the rest of a session: replay it from turn K against several models.
    ///
    /// Each --arm forks the session at K and lets its model answer; its tool calls are
    /// answered from the recording and NEVER executed (an arm stops at a call the
    /// recording cannot answer), and the recorded user turns are fed in order until
    /// they run out. Prints the arms side by side with the recording's own continuation
    /// (the baseline): steps, tool calls, tokens, latency, cost and where each first
    /// diverges. Every step is committed as it is taken: a comparison whose process
    /// stopped goes on with `forktrail jobs resume ID`. An identical comparison is
    /// printed, not run again (--again runs anew). Exits 0 once the arms have run,
    /// whatever they stopped on.
    Compare(compare::CompareArgs),
    /// A live what-if: the agent's own harness replays the recording and runs each
    /// arm's tools in a copy of its workspace; a verify command judges.
    ///
    /// Per arm and sample (--samples N): a fresh copy of --workspace, the --agent
    /// command started in it with its base URL on this experiment's model endpoint. Its
    /// calls whose answers lie before turn K are answered from the recording (matched on
    /// their conversation), so its harness runs the recorded tool calls for real; from K
    /// on, the arm's model answers, under the money cap (--budget-usd), each sample
    /// stored as a fork at K. When the agent exits (or at --max-steps or --timeout),
    /// --verify runs in the copy: exit 0 is a pass. Prints each arm's pass rate with its
    /// 95 % Wilson interval and each figure's mean, median and 95 % interval, then every
    /// sample. WITHOUT --sandbox bwrap THE AGENT'S TOOLS RUN WITH YOUR RIGHTS.
    Experiment(experiment::ExperimentArgs),
    /// List every comparison: its id, session, fork point, status and arms.
    Comparisons(compare::ComparisonsArgs),
    /// List regeneration jobs, or show, cancel or resume a job, comparison or run.
    Jobs(jobs::JobsArgs),
    /// Compare two sessions: common ancestor, shared prefix, and both tails.
    Diff(tree::DiffArgs),
    /// Run a read-only SPARQL query: SPARQL text, a shipped query's name, or --file.
    ///
    /// The default graph is the union of all session graphs. `--list` shows the
    /// shipped queries with what each answers and expects.
    Query(query::QueryArgs),
    /// Import sessions from a file or a Claude Code project folder, all or nothing.
    ///
    /// Reads forktrail's own TriG or N-Quads export, an OpenAI chat transcript (JSON
    /// array or JSONL of messages), a Claude Code session log (JSONL, with its
    /// sub-agents' transcripts) or project folder, a Codex CLI rollout, a Pi session
    /// file or folder, or OpenTelemetry traces (OTLP JSON Lines); the format is told
    /// from the content unless --format says it. A log imported before gets its new
    /// lines appended; a session that repeats a stored one's start becomes a fork of it.
    Import(transfer::ImportArgs),
    /// Follow agents' session folders: import new Claude Code, Codex and Pi logs and
    /// the new lines of grown ones as they are written.
    ///
    /// Without folders, follows those of ~/.claude/projects, ~/.codex/sessions and
    /// ~/.pi/agent/sessions that exist. What the folders hold is imported first, then
    /// each file once it has been left alone for --settle-ms; a last line still being
    /// written waits for its newline. Imports are idempotent, so a restart writes only
    /// what is new. Runs until stopped (Ctrl-C), or with --once imports and exits.
    ///
    /// Nothing outside the folders is read: links to folders are not followed, a file
    /// that resolves elsewhere is reported and not read, and folders more than 16 levels
    /// down are left alone. A line too long, not UTF-8 or malformed is skipped and
    /// reported once, and the rest of its log goes in.
    Watch(watch::WatchArgs),
    /// Serve the store over HTTP: a web UI, SPARQL 1.1, the shipped queries and a REST
    /// API.
    ///
    /// Open http://127.0.0.1:7878/ in a browser for the web UI (sessions, fork trees,
    /// playback, diff, provenance). Routes: / and /ui/… (the web UI), /sparql, /query,
    /// /update, /store (SPARQL 1.1 Protocol and Graph Store read), /queries, /sessions,
    /// /import, /v1/traces (OpenTelemetry traces in), /mcp (MCP over Streamable HTTP;
    /// writes with the token), /jobs, /health, /metrics, and with --upstream the model
    /// proxy (/proxy/anthropic, /proxy/openai). Read-only unless started with a token.
    #[cfg(feature = "server")]
    Serve(serve::ServeArgs),
    /// The model calls an agent made through the proxy that a session holds: when,
    /// which API and model, how each ended, the turns it sent and the one it answered,
    /// tokens, latency, cost, principal. `--request CALL` prints a call's request as the
    /// agent sent it, rebuilt from the store.
    Calls(calls::CallsArgs),
    /// Record agents as their model endpoint: `serve` with the model proxy on, its
    /// upstreams the providers' own APIs unless --upstream says otherwise.
    ///
    /// Point an agent's base URL at it and run the agent as usual:
    /// `ANTHROPIC_BASE_URL=http://127.0.0.1:7878/proxy/anthropic claude`, or
    /// `OPENAI_BASE_URL=http://127.0.0.1:7878/proxy/openai/v1` for OpenAI clients (Codex
    /// takes it as a model provider's `base_url`, see the README). Each call goes on to the upstream with the agent's own key (never stored)
    /// and is recorded as it is answered: a request that carries a stored session's
    /// turns extends it, one that shares a prefix forks it there, one that shares
    /// nothing starts a root. `forktrail calls SESSION` lists a session's calls.
    #[cfg(feature = "server")]
    Proxy(serve::ProxyArgs),
    /// Serve the store to an MCP client (an agent or its host) over standard input and
    /// output.
    ///
    /// Tools: list_sessions, search, show_session, replay_session, list_branches,
    /// fork_session, append_turn, diff_sessions, regenerate, job_status, cancel_job,
    /// compare_models, comparison, query, verify; each session's replay is the resource
    /// forktrail://sessions/{id}/replay. Speaks MCP 2026-07-28 (stateless,
    /// server/discover) and the handshake versions 2024-11-05 to 2025-11-25. Read-only
    /// unless started with --allow-writes. `forktrail serve` offers the same at /mcp.
    #[cfg(feature = "mcp")]
    Mcp(McpArgs),
    /// Export one session, or all, as RDF, replay records, chat messages or PROV-O.
    ///
    /// TriG and N-Quads are lossless (import reads them back); Turtle, JSONL replay
    /// records and OpenAI chat messages take one session; PROV-O is Turtle with the
    /// PROV types and relations written out for PROV tools.
    Export(transfer::ExportArgs),
    /// Check the store: recompute every turn's digest across fork points, and check
    /// lineage, indices, labels and provenance.
    ///
    /// Each problem is printed on one line naming the session, the index and what is
    /// wrong; exits 1 when there is any. --file checks an exported TriG or N-Quads file
    /// on its own, without a store.
    Verify(verify::VerifyArgs),
    /// Back the whole store up into a new directory, while writers go on.
    ///
    /// A store on disk is backed up by RocksDB's checkpoint (one consistent snapshot);
    /// a remote store, or a store held by `forktrail serve` (reach it with --store URL),
    /// is copied and checked session by session. Open the backup with --store DIR.
    Backup(transfer::BackupArgs),
    /// Copy every session of one store into another (embedded or remote), then check
    /// each copied session's length and head digest.
    ///
    /// Moves a store between a directory and a SPARQL 1.1 store, either way, in imports
    /// of about 500 quads (one request each on a remote store; parents before forks;
    /// each all or nothing). The destination is created if it is a directory; a session
    /// already there is refused before anything is written. If an import fails, the
    /// error says how many sessions the destination holds by then.
    /// Credentials for a remote --to come from FORKTRAIL_TO_TOKEN, or FORKTRAIL_TO_USER
    /// and FORKTRAIL_TO_PASSWORD (those of --from, as for --store, from FORKTRAIL_STORE_*).
    Copy(transfer::CopyArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell or elvish).
    ///
    /// For example: `forktrail completions bash >
    /// ~/.local/share/bash-completion/completions/forktrail`.
    Completions(CompletionsArgs),
}

#[cfg(feature = "mcp")]
#[derive(Args)]
struct McpArgs {
    /// Allow the tools that write: fork_session, append_turn, regenerate,
    /// compare_models, cancel_job.
    #[arg(long)]
    allow_writes: bool,
    /// Let regenerate and compare_models send context to model endpoints off this
    /// machine.
    #[arg(long)]
    allow_remote_models: bool,
    /// Cancel a query tool call running longer than this (e.g. 30s, 500ms, 2m).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    query_timeout: std::time::Duration,
    /// Limit regenerate, swap_model and compare_models to this model endpoint (repeat
    /// for more); without it they take any endpoint the CLI takes. An API key goes
    /// only to its provider's API or its $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL either
    /// way.
    #[arg(long = "model-endpoint", value_name = "URL")]
    model_endpoints: Vec<String>,
    /// Let run_experiment run agent and verify commands on this machine, with your
    /// rights (it also needs --allow-writes).
    #[arg(long)]
    allow_experiments: bool,
}

#[cfg(feature = "mcp")]
impl McpArgs {
    fn run(self, store: Store) -> CliResult {
        let mode = if self.allow_writes {
            "read-write"
        } else {
            "read-only"
        };
        eprintln!(
            "forktrail mcp: serving {} ({mode}) on standard input and output",
            store.location()
        );
        let config = forktrail::mcp::McpConfig {
            allow_writes: self.allow_writes,
            allow_remote_models: self.allow_remote_models,
            query_timeout: self.query_timeout,
            model_endpoints: (!self.model_endpoints.is_empty()).then_some(self.model_endpoints),
            allow_experiments: self.allow_experiments,
        };
        let server = forktrail::mcp::McpServer::new(std::sync::Arc::new(store), config);
        Ok(server.run_stdio()?)
    }
}

/// `30s`, `500ms`, `2m`, `1h`, or plain seconds.
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
struct CompletionsArgs {
    /// The shell.
    shell: clap_complete::Shell,
}

/// Runs the CLI and maps errors to stderr and exit code 1.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // Not locked for the whole run: `forktrail mcp` writes to stdout from its runtime's
    // threads (each write here takes the lock for as long as it lasts).
    let mut out = std::io::BufWriter::new(std::io::stdout());
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

/// Picks the command. Those that need no store run first; the others get it opened
/// (and created, for the commands that make one).
fn run(cli: Cli, out: Out) -> CliResult {
    let path = Target {
        store: cli.store,
        update_endpoint: cli.update_endpoint,
        credentials: "FORKTRAIL_STORE",
        durability: cli.durability,
        limits: Limits {
            content_bytes: cli.max_content_bytes,
            state_bytes: cli.max_state_bytes,
            field_bytes: cli.max_field_bytes,
        },
    };
    let store = match cli.command {
        Command::Completions(args) => {
            clap_complete::generate(args.shell, &mut Cli::command(), "forktrail", out);
            return Ok(());
        }
        Command::Query(args) if args.list => return args.list(out),
        Command::Copy(args) => return args.run(out, path),
        Command::Verify(args) if args.is_file() => return args.run_file(out),
        Command::Jobs(args) if args.is_cancel() => return args.cancel(out, &path),
        Command::Jobs(args) if args.is_worker() => return args.run(out, &open_when_free(&path)?),
        ref command => open(&path, command.creates_store())?,
    };
    match cli.command {
        Command::Demo => render::demo(out, &store, &forktrail::demo::build(&store)?, &path),
        Command::New(args) => args.run(out, &store),
        Command::Append(args) => args.run(out, &store),
        Command::Fork(args) => args.run(out, &store),
        Command::Replay(args) => args.run(out, &store),
        Command::Show(args) => args.run(out, &store),
        Command::Branches(args) => args.run(out, &store),
        Command::Tree(args) => args.run(out, &store),
        Command::List(args) => args.run(out, &store),
        Command::Search(args) => args.run(out, &store),
        Command::Reindex(args) => args.run(out, &store),
        Command::Upgrade(args) => args.run(out, &store),
        Command::Delete(args) => args.run(out, &store),
        Command::Pop(args) => args.run(out, &store),
        Command::Detach(args) => args.run(out, &store),
        Command::Anchor(args) => args.run(out, &store),
        Command::Anchors(args) => args.run(out, &store),
        Command::Merge(args) => args.run(out, &store),
        Command::Regenerate(args) => args.run(out, store, &path),
        Command::Compare(args) => args.run(out, store, &path),
        Command::Experiment(args) => args.run(out, store, &path),
        Command::Comparisons(args) => args.run(out, &store),
        Command::Jobs(args) => args.run(out, &store),
        Command::Calls(args) => args.run(out, &store),
        Command::Diff(args) => args.run(out, &store),
        Command::Query(args) => args.run(out, &store),
        Command::Import(args) => args.run(out, &store),
        Command::Watch(args) => args.run(out, &store),
        #[cfg(feature = "server")]
        Command::Serve(args) => args.run(out, store),
        #[cfg(feature = "server")]
        Command::Proxy(args) => args.run(out, store),
        #[cfg(feature = "mcp")]
        Command::Mcp(args) => args.run(store),
        Command::Export(args) => args.run(out, &store),
        Command::Verify(args) => args.run(out, &store),
        Command::Backup(args) => args.run(out, &store),
        Command::Completions(_) | Command::Copy(_) => unreachable!("opens its own stores"),
    }
}

impl Command {
    /// Whether the command makes a store where there is none.
    fn creates_store(&self) -> bool {
        match self {
            Command::Demo | Command::New(_) | Command::Import(_) | Command::Watch(_) => true,
            #[cfg(feature = "server")]
            Command::Serve(_) | Command::Proxy(_) => true,
            #[cfg(feature = "mcp")]
            Command::Mcp(_) => true,
            _ => false,
        }
    }
}

/// Opens the store; commands that create one also create its directory and parents.
fn open(target: &Target, create: bool) -> Result<Store, Box<dyn std::error::Error>> {
    let Some(path) = target.dir() else {
        return open_remote(target);
    };
    if path.is_file() {
        return Err(format!("{} is a file, not a store directory", path.display()).into());
    }
    if !create && !path.exists() {
        return Err(format!(
            "no store at {}: create one with `forktrail new` or `forktrail demo`, or point \
             --store (or FORKTRAIL_STORE) at an existing one",
            path.display()
        )
        .into());
    }
    if create {
        std::fs::create_dir_all(path)
            .map_err(|e| format!("cannot create the store directory {}: {e}", path.display()))?;
    }
    #[cfg(feature = "rocksdb")]
    {
        let store = Store::open(path)?;
        if let Some(r) = store.upgrade_report().filter(|r| r.upgraded()) {
            eprintln!(
                "upgraded the store's digests from version {} to {}: {} turns rewritten in {} \
                 sessions (they now cover tool calls)",
                r.from, r.to, r.turns, r.sessions
            );
        }
        Ok(store
            .with_durability(target.durability)
            .with_limits(target.limits))
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

/// A remote store, with credentials from the environment only (never from arguments,
/// which other users of the machine can read).
fn open_remote(target: &Target) -> Result<Store, Box<dyn std::error::Error>> {
    let url = target.url().expect("called for a URL");
    let p = target.credentials;
    let var = |name: &str| {
        std::env::var(format!("{p}_{name}"))
            .ok()
            .filter(|v| !v.is_empty())
    };
    let auth = match (var("TOKEN"), var("USER"), var("PASSWORD")) {
        (Some(_), Some(_), _) => return Err(format!("set {p}_TOKEN or {p}_USER, not both").into()),
        (Some(token), None, _) => RemoteAuth::Bearer(token),
        (None, Some(user), password) => RemoteAuth::Password(user, password.unwrap_or_default()),
        (None, None, Some(_)) => return Err(format!("{p}_PASSWORD is set without {p}_USER").into()),
        (None, None, None) => RemoteAuth::None,
    };
    let mut config = RemoteConfig::new(url).with_auth(auth);
    if let Some(update) = &target.update_endpoint {
        config = config.with_update_url(update.clone());
    }
    let store = Store::remote(config)?.with_limits(target.limits);
    Ok(match catalog_dir(url) {
        Some(dir) => store.with_catalog_dir(dir)?,
        None => store,
    })
}

/// Where the CLI keeps its catalog of the shared store at `url` between runs (see
/// `Store::with_catalog_dir`): `$FORKTRAIL_CACHE_DIR`, else `$XDG_CACHE_HOME/forktrail`,
/// else `~/.cache/forktrail`, under `catalogs/` by a digest of the URL. With none of
/// them, the catalog is built in memory at each run.
fn catalog_dir(url: &str) -> Option<std::path::PathBuf> {
    use sha2::Digest;
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let cache = var("FORKTRAIL_CACHE_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| std::path::Path::new(&d).join("forktrail")))
        .or_else(|| var("HOME").map(|h| std::path::Path::new(&h).join(".cache/forktrail")))?;
    let digest = sha2::Sha256::digest(url.as_bytes());
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    Some(cache.join("catalogs").join(name))
}

fn is_locked(e: &(dyn std::error::Error + 'static)) -> bool {
    matches!(
        e.downcast_ref::<forktrail::Error>(),
        Some(forktrail::Error::StoreLocked { .. })
    )
}

/// Opens the store, waiting up to 30 s while another process holds it (a background
/// worker finds the store still held by the command that started it, for a moment).
fn open_when_free(path: &Target) -> Result<Store, Box<dyn std::error::Error>> {
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

/// Starts `forktrail <the store's arguments> <args>` as a background worker, with no
/// standard input or output: it waits for the store this process holds to be free.
fn spawn_worker(path: &Target, args: &[&str]) -> CliResult {
    std::process::Command::new(std::env::current_exe()?)
        .args(path.args())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the background worker: {e}"))?;
    Ok(())
}

fn print_json(out: Out, value: &(impl serde::Serialize + ?Sized)) -> CliResult {
    let text = serde_json::to_string_pretty(value)?;
    writeln!(out, "{text}")?;
    Ok(())
}

/// Prints `value` as JSON with `--json`, else as `text` renders it.
fn emit<T: serde::Serialize + ?Sized>(
    out: Out,
    json: bool,
    value: &T,
    text: impl FnOnce(Out, &T) -> std::io::Result<()>,
) -> CliResult {
    if json {
        print_json(out, value)
    } else {
        Ok(text(out, value)?)
    }
}

/// A text that must be read whole as UTF-8: say where it is not instead of storing
/// replacement characters.
fn utf8(bytes: Vec<u8>, source: &str) -> Result<String, forktrail::Error> {
    String::from_utf8(bytes).map_err(|e| {
        forktrail::Error::InvalidInput(format!(
            "{source} is not valid UTF-8 (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// A path that must exist, checked while the arguments are parsed (so a mistyped one
/// never creates a store).
fn existing_path(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    std::fs::metadata(&path)
        .map(|_| path)
        .map_err(|e| format!("cannot read {text}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use forktrail::{ExportFormat, ImportFormat};

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
