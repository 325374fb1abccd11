//! The one error type of forktrail: a variant per failure a caller can act on.

use std::path::PathBuf;

/// Everything that can go wrong in forktrail.
///
/// Messages are lower-case, name the session, index or path involved and, where there
/// is a remedy, say what to do. Any operation that returns an error has changed nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No session with this id exists in the store.
    #[error("session {session} not found")]
    SessionNotFound { session: String },

    /// A fork's parent session is no longer in the store.
    #[error(
        "session {session} has parent {parent}, which is missing from the store; \
         restore {parent} (e.g. `forktrail import`), or detach forks before deleting their parent"
    )]
    ParentMissing { session: String, parent: String },

    /// An index outside the valid range of a session. The index is as the caller gave
    /// it: any `u64` or `i64` (a negative fork point, say) fits.
    #[error("index {index} is out of range for session {session} (valid: {valid})")]
    IndexOutOfRange {
        session: String,
        index: i128,
        valid: String,
    },

    /// A fork would be deeper than [`crate::MAX_FORK_DEPTH`].
    #[error(
        "forking {parent} would create depth {depth}, deeper than the limit of {max}; \
         detach {parent} first to start a new chain"
    )]
    ForkTooDeep {
        parent: String,
        depth: usize,
        max: usize,
    },

    /// A stored chain (edited by hand) is deeper than [`crate::MAX_FORK_DEPTH`].
    #[error("the fork chain of session {session} is deeper than the limit of {max} levels")]
    ChainTooDeep { session: String, max: usize },

    /// `parentSession` links form a cycle (possible only by editing the store by hand).
    #[error("the fork chain of session {session} has a cycle: {}", cycle.join(" -> "))]
    CycleDetected { session: String, cycle: Vec<String> },

    /// A session with children cannot be deleted without `cascade`.
    #[error(
        "session {session} has {} {}: {}; delete with cascade to remove the subtree, or \
         detach the children first",
        children.len(), if children.len() == 1 { "child session" } else { "child sessions" },
        children.join(", ")
    )]
    HasChildren {
        session: String,
        children: Vec<String>,
    },

    /// A session id is empty, too long or uses a character outside `A-Z a-z 0-9 . _ : -`.
    #[error("invalid session id {value:?}: {reason}")]
    InvalidId { value: String, reason: String },

    /// A branch label or agent name breaks the naming rules.
    #[error("invalid {what} {value:?}: {reason}")]
    InvalidName {
        what: &'static str,
        value: String,
        reason: String,
    },

    /// An unknown turn role.
    #[error("unknown role {value:?} (expected one of: system, user, assistant, tool)")]
    InvalidRole { value: String },

    /// An unknown turn kind.
    #[error(
        "unknown turn kind {value:?} (expected one of: message, tool_call, usage, compaction, \
         note, fork_result)"
    )]
    InvalidKind { value: String },

    /// Another child of the same parent already carries this branch label.
    #[error("session {parent} already has a child with branch label {label:?} ({existing})")]
    DuplicateLabel {
        parent: String,
        label: String,
        existing: String,
    },

    /// No job (a regeneration, a comparison or one of its runs) has this id.
    #[error(
        "no job {job} in this store: not a regeneration, comparison or run (see `forktrail jobs`)"
    )]
    JobNotFound { job: String },

    /// No model call with this id was recorded in this session (see `forktrail calls`).
    #[error("session {session} holds no model call {call} (see `forktrail calls {session}`)")]
    CallNotFound { session: String, call: String },

    /// A caller who is not the operator (a REST or MCP request) asked for a model
    /// endpoint the operator did not offer: its context, and a key, could go anywhere.
    #[error(
        "endpoint {endpoint} is not one this server offers ({}); start it with \
         --model-endpoint to add one",
        offered.join(", ")
    )]
    EndpointNotOffered {
        endpoint: String,
        offered: Vec<String>,
    },

    /// A writer handle holds the session (see `Store::writer`).
    #[error("session {session} is busy: a SessionWriter holds it until it is dropped")]
    Busy { session: String },

    /// The operation would overwrite existing data (a session id already taken, …).
    #[error("{0}")]
    Conflict(String),

    /// Input that is not what it should be (bad UTF-8, malformed JSON, …).
    #[error("{0}")]
    InvalidInput(String),

    /// The disk holding the store is full: nothing was written. Reads go on; writes go
    /// on once there is room again (the store is then opened anew, which takes
    /// `needed` bytes free), without a restart.
    #[error(
        "the disk holding store {} is full, so nothing was written; {} ({detail})",
        path.display(),
        room_remedy(*needed, *free)
    )]
    StorageFull {
        path: PathBuf,
        /// Bytes that must be free on the disk for writes to go on: opening the store
        /// anew replays and flushes its write-ahead log.
        needed: Option<u64>,
        /// Bytes free when the write failed.
        free: Option<u64>,
        detail: String,
    },

    /// A free-text field is larger than the store's [`crate::Limits`] allow.
    #[error(
        "the {field} for session {session} is {bytes} bytes, over the limit of {limit} \
         bytes ({option} raises it)"
    )]
    TooLarge {
        field: &'static str,
        session: String,
        bytes: usize,
        limit: usize,
        /// The command-line option (and environment variable) that sets the limit.
        option: &'static str,
    },

    /// Another process holds the on-disk store. `server` is the SPARQL URL of the
    /// `forktrail serve` that holds it, when that server said so.
    #[error(
        "store {} is in use by another process{}; or stop that process",
        path.display(),
        match server {
            Some(url) => format!(
                " (`forktrail serve` at {url}): run commands through it with \
                 `forktrail --store {url} …` (FORKTRAIL_STORE_TOKEN=its token, to write)"
            ),
            None => " — is `forktrail serve` running? Then run commands through it with \
                     `forktrail --store http://HOST:PORT/sparql …` (FORKTRAIL_STORE_TOKEN=its \
                     token, to write)"
                .to_string(),
        }
    )]
    StoreLocked {
        path: PathBuf,
        server: Option<String>,
    },

    /// A remote SPARQL store could not be reached, refused a request or answered
    /// something unreadable.
    #[error("the SPARQL store at {url} failed: {detail}")]
    Remote { url: String, detail: String },

    /// Other processes kept writing the same sessions of a shared store for longer than
    /// forktrail waits.
    #[error(
        "{what} is being written by another process; gave up after {seconds} s \
         (a writer that died holds it until its lease expires)"
    )]
    Contended { what: String, seconds: u64 },

    /// The stored data breaks forktrail's model (edited by hand or by a foreign tool).
    #[error("corrupt data in session {session}: {detail}")]
    Corrupt { session: String, detail: String },

    /// A SPARQL query failed to parse or evaluate.
    #[error("query failed: {0}")]
    Query(String),

    /// A query was cancelled (for example by the server's time limit).
    #[error("the query was cancelled: {0}")]
    Cancelled(String),

    /// A file could not be parsed (import).
    #[error("cannot parse {what}: {detail}")]
    Parse { what: String, detail: String },

    /// The underlying Oxigraph store failed.
    #[error("store error: {0}")]
    Store(#[from] oxigraph::store::StorageError),

    /// An I/O failure, naming what was being read or written.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// What a full disk asks of its owner: how much room, when that is known.
fn room_remedy(needed: Option<u64>, free: Option<u64>) -> String {
    let mb = |bytes: u64| format!("{:.1} MB", bytes as f64 / 1e6);
    let now = free
        .map(|free| format!("{} now; ", mb(free)))
        .unwrap_or_default();
    match needed {
        Some(needed) => format!(
            "free space until {} are free there ({now}opening the store anew replays and \
             flushes its write-ahead log) and retry, with no restart; reads go on meanwhile",
            mb(needed)
        ),
        None => "free space and retry".into(),
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}
