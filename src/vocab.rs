//! The ontology's terms as constants (`ontology/forktrail.ttl` is the authority; a test
//! keeps the two in step).

use oxigraph::model::NamedNodeRef;

macro_rules! terms {
    ($ns:literal; $($name:ident = $local:literal),* $(,)?) => {
        $(pub const $name: NamedNodeRef<'static> =
            NamedNodeRef::new_unchecked(concat!($ns, $local));)*
        /// Every term of this vocabulary that forktrail writes.
        pub const ALL: &[NamedNodeRef<'static>] = &[$($name),*];
    };
}

/// The forktrail vocabulary, `https://w3id.org/forktrail/ns#`.
pub mod ft {
    use super::*;
    /// The namespace IRI.
    pub const NS: &str = "https://w3id.org/forktrail/ns#";
    terms! { "https://w3id.org/forktrail/ns#";
        SESSION = "Session", TURN = "Turn", FORK = "Fork", DETACH = "Detach",
        MODEL = "Model", TOOL = "Tool", ANCHOR = "Anchor", MERGE = "Merge", ABANDON = "Abandon",
        REGENERATION = "Regeneration",
        SESSION_ID = "sessionId", BRANCH = "branch", PARENT_SESSION = "parentSession",
        FORKED_AT_INDEX = "forkedAtIndex", FORK_ROOT = "forkRoot", FORK_DEPTH = "forkDepth",
        BASE_DIGEST = "baseDigest", REASON = "reason",
        INDEX = "index", ROLE = "role", KIND = "kind", CONTENT = "content", DIGEST = "digest",
        NAME = "name", TOOL_CALL_ID = "toolCallId", TOOL_CALLS = "toolCalls", PAYLOAD = "payload",
        SUMMARY = "summary", REQUEST_ID = "requestId", REQUEST_DIGEST = "requestDigest",
        ANCHOR_NAME = "anchorName", ANCHOR_OF = "anchorOf", AT_INDEX = "atIndex", STATE = "state",
        RANGE_START = "rangeStart", RANGE_END = "rangeEnd", MERGED_AT_INDEX = "mergedAtIndex",
        JOB_ID = "jobId", STATUS = "status", ENDPOINT = "endpoint", REQUEST_BODY = "requestBody",
        REQUEST_KEY = "requestKey", TIMEOUT_SECS = "timeoutSeconds", ERROR_MESSAGE = "errorMessage",
        INPUT_TOKENS = "inputTokens", OUTPUT_TOKENS = "outputTokens", LATENCY_MS = "latencyMs",
        RESULT_SESSION = "resultSession",
        COMPARISON = "Comparison", RUN = "Run", MODEL_CALL = "ModelCall",
        ARM_NAME = "armName", ARM_INDEX = "armIndex", ARM_SPEC = "armSpec", PROVIDER = "provider",
        MAX_STEPS = "maxSteps", BUDGET_USD = "budgetUsd", CACHED_TOKENS = "cachedTokens",
        FINISH_REASON = "finishReason", CHARGED_USD = "chargedUsd", COST_USD = "costUsd",
        RESERVED_USD = "reservedUsd", LOST_CALLS_USD = "lostCallsUsd",
        SOURCE_ID = "sourceId", AGENT_ID = "agentId", SPAWNED_BY = "spawnedBy",
        SPAWNED_IN_SESSION = "spawnedInSession", SPAWN_TOOL_CALL_ID = "spawnToolCallId",
        FORKED_FROM_ID = "forkedFromId",
        LEASE = "Lease", LEASE_OF = "leaseOf", LEASE_EXPIRES = "leaseExpires",
        CHANGE = "Change", CHANGE_BY = "changeBy", CHANGE_SEQ = "changeSeq",
        CHANGE_AT = "changeAt", CHANGED = "changed",
        STORE = "Store", DIGEST_VERSION = "digestVersion",
        PROXIED_CALL = "ProxiedCall", CALL_ID = "callId", API = "api", OUTCOME = "outcome",
        REQUEST_TURNS = "requestTurns", REQUEST_CONTEXT = "requestContext",
        CONTEXT_JSON = "contextJson", MESSAGE_OVERRIDES = "messageOverrides",
        FIRST_BYTE_MS = "firstByteMs", UPSTREAM_STATUS = "upstreamStatus",
        INCOMPLETE = "incomplete",
        SAMPLE = "sample", VERDICT = "verdict", AGENT_EXIT_CODE = "agentExitCode",
        VERIFY_EXIT_CODE = "verifyExitCode", VERIFY_OUTPUT = "verifyOutput",
        AGENT_OUTPUT = "agentOutput", WALL_MS = "wallMs", REPLAYED_CALLS = "replayedCalls",
        DRIFT_CALL = "driftCall", DRIFT_INDEX = "driftIndex", DRIFT_DETAIL = "driftDetail",
    }
}

/// PROV-O, `http://www.w3.org/ns/prov#`.
pub mod prov {
    use super::*;
    /// The namespace IRI.
    pub const NS: &str = "http://www.w3.org/ns/prov#";
    terms! { "http://www.w3.org/ns/prov#";
        ENTITY = "Entity", ACTIVITY = "Activity", AGENT = "Agent",
        SOFTWARE_AGENT = "SoftwareAgent", PERSON = "Person",
        WAS_DERIVED_FROM = "wasDerivedFrom", WAS_GENERATED_BY = "wasGeneratedBy",
        WAS_ATTRIBUTED_TO = "wasAttributedTo", WAS_ASSOCIATED_WITH = "wasAssociatedWith",
        USED = "used", WAS_INFLUENCED_BY = "wasInfluencedBy", STARTED_AT_TIME = "startedAtTime", ENDED_AT_TIME = "endedAtTime", GENERATED_AT_TIME = "generatedAtTime",
    }
}

/// Dublin Core terms, `http://purl.org/dc/terms/`.
pub mod dcterms {
    use super::*;
    terms! { "http://purl.org/dc/terms/"; CREATED = "created", TITLE = "title", IS_PART_OF = "isPartOf" }
}

pub use oxigraph::model::vocab::{rdf, rdfs, xsd};
