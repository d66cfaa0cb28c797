//! The normalized event vocabulary shared by every CLI parser: [`NormalizedEvent`], [`Usage`],
//! [`FinalReport`], [`ErrorSignal`] and the [`StreamSummary`] a parser hands back at the end.
//!
//! Invariants: every serialized string here is API (documented in `docs/events.md`); token
//! counts that a CLI did not report stay `None`, never zero; output excerpts are capped at
//! [`OUTPUT_EXCERPT_CAP`] bytes, so no event holds a whole command output.

use serde::{Deserialize, Serialize};
use std::fmt;

use super::stop::Stop;

/// The most bytes of a command's output an event keeps (head and tail halves).
pub const OUTPUT_EXCERPT_CAP: usize = 4096;
/// The most bytes of an unknown line an [`NormalizedEvent::Unknown`] keeps.
pub const UNKNOWN_RAW_CAP: usize = 4096;

/// Which CLI wrote the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportKind {
    /// `opencode run --format json` (and tools with `output = "opencode_events"`).
    Opencode,
    /// `codex exec --json`.
    Codex,
    /// `claude -p --output-format stream-json --verbose`.
    Claude,
    /// What an Agent Client Protocol agent writes on stdout (`output = "acp"`): JSON-RPC
    /// responses, `session/update` notifications and the agent's requests.
    Acp,
}

impl TransportKind {
    pub const ALL: [TransportKind; 4] = [
        TransportKind::Opencode,
        TransportKind::Codex,
        TransportKind::Claude,
        TransportKind::Acp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Opencode => "opencode",
            TransportKind::Codex => "codex",
            TransportKind::Claude => "claude",
            TransportKind::Acp => "acp",
        }
    }

    pub fn parse(name: &str) -> Option<TransportKind> {
        TransportKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stable evidence id, `event:<provider id>` (OpenCode `callID`, Codex item id, Claude
/// `tool_use` id). A report cites commands by this id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EvidenceId(String);

impl EvidenceId {
    pub fn from_provider_id(provider_id: &str) -> EvidenceId {
        let mut id = String::with_capacity("event:".len() + provider_id.len());
        id.push_str("event:");
        id.push_str(provider_id);
        EvidenceId(id)
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EvidenceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a command the agent ran ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandStatus {
    /// Ran and exited 0.
    Succeeded,
    /// Ran and exited non-zero (or the CLI marked it failed).
    Failed,
    /// The CLI refused to run it (permission).
    Denied,
    /// Ran to its end in the foreground, but the CLI reports no exit code (Claude Code's
    /// results it does not mark as errors: `grep` finding nothing is one). The exit is unknown;
    /// only the kernel's exec ledger can tell it.
    Ended,
    /// Interrupted, backgrounded, timed out, or a result the parser cannot read: the exit code
    /// is unknown and the command is never evidence.
    Unknown,
}

/// How a non-shell tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Completed,
    Failed,
    Denied,
}

/// What happened to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileChangeKind {
    Add,
    Update,
    Delete,
    /// The CLI wrote or edited the file without saying which.
    Write,
}

/// Token usage in one convention for every CLI.
///
/// - `input_tokens`: prompt tokens that were neither read from nor written to the cache;
/// - `cache_read_tokens`, `cache_write_tokens`: the cached parts of the prompt;
/// - `output_tokens`: completion tokens INCLUDING reasoning; `reasoning_tokens`: the reasoning
///   part of them;
/// - `cost_usd`: only when the CLI reported a cost.
///
/// A field the CLI did not report is `None`, never zero. The same type is the run's usage ledger
/// (per attempt and in total, `run::state`), where `cost_source` says where a cost came from;
/// an event's usage never carries one (and does not print it).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    /// Where `cost_usd` came from, once the run priced it; absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_source: Option<CostSource>,
}

/// Where a recorded cost came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostSource {
    /// The CLI reported it.
    Provider,
    /// Estimated from the model catalogue's dated prices (`crate::prices`).
    PriceTable,
}

fn add_opt_u64(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

fn add_opt_f64(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    }
}

impl Usage {
    /// Field-wise sum; a field stays `None` only when both sides are `None`.
    pub fn add(&self, other: &Usage) -> Usage {
        Usage {
            input_tokens: add_opt_u64(self.input_tokens, other.input_tokens),
            cache_read_tokens: add_opt_u64(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens: add_opt_u64(self.cache_write_tokens, other.cache_write_tokens),
            output_tokens: add_opt_u64(self.output_tokens, other.output_tokens),
            reasoning_tokens: add_opt_u64(self.reasoning_tokens, other.reasoning_tokens),
            cost_usd: add_opt_f64(self.cost_usd, other.cost_usd),
            // A total keeps the first known source (a lower bound when sources mix).
            cost_source: match other.cost_usd {
                Some(_) => self.cost_source.or(other.cost_source),
                None => self.cost_source,
            },
        }
    }

    /// Adds `other` into `self` ([`Usage::add`] in place): the run's ledger.
    pub fn accumulate(&mut self, other: &Usage) {
        *self = self.add(other);
    }

    /// All tokens counted against `--max-tokens`: input, cache reads and writes, output.
    pub fn total_tokens(&self) -> u64 {
        [
            self.input_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.output_tokens,
        ]
        .into_iter()
        .flatten()
        .fold(0u64, u64::saturating_add)
    }

    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }
}

/// The stage's final report as the CLI delivered it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum FinalReport {
    /// An object the CLI itself validated (Claude Code's `structured_output`).
    Structured(serde_json::Value),
    /// The final message text, still to be parsed and checked (OpenCode's last step, Codex's
    /// `-o` file or last `agent_message`).
    Text(String),
}

/// Where a provider error was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorSource {
    /// An error event in the stream (OpenCode `error`, Codex `error`).
    ErrorEvent,
    /// Codex `turn.failed`.
    TurnFailed,
    /// Claude Code's final `result` row with `is_error: true`.
    ResultRow,
    /// A plain `ERROR:`/`Error:` line that ends the log.
    LogTail,
    /// autocode's own runtime (`src/direct/`): an endpoint's HTTP or protocol failure.
    Direct,
}

/// A provider error, reduced to what stop classification reads.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorSignal {
    pub source: ErrorSource,
    pub message: String,
    /// The HTTP status when the CLI gave one (field or `last status: NNN`).
    pub http_status: Option<u16>,
    /// The provider's machine-readable kind (`APIError`, `rate_limit`, a `terminal_reason`...).
    pub kind: Option<String>,
    /// OpenCode's explicit `isRetryable`; other CLIs never set it.
    pub retryable: Option<bool>,
    /// A reset time or retry-after hint when the provider gave one.
    pub reset_hint: Option<String>,
}

impl Clone for ErrorSignal {
    fn clone(&self) -> Self {
        ErrorSignal {
            source: self.source,
            message: self.message.clone(),
            http_status: self.http_status,
            kind: self.kind.clone(),
            retryable: self.retryable,
            reset_hint: self.reset_hint.clone(),
        }
    }

    /// Reuses `self`'s strings (the stream summary's last error is replaced at every error).
    fn clone_from(&mut self, source: &Self) {
        self.source = source.source;
        self.message.clone_from(&source.message);
        self.http_status = source.http_status;
        self.kind.clone_from(&source.kind);
        self.retryable = source.retryable;
        self.reset_hint.clone_from(&source.reset_hint);
    }
}

impl ErrorSignal {
    pub fn new(source: ErrorSource, message: impl Into<String>) -> ErrorSignal {
        ErrorSignal {
            source,
            message: message.into(),
            http_status: None,
            kind: None,
            retryable: None,
            reset_hint: None,
        }
    }
}

/// One normalized event. Serialized with `"type"` as the tag; the strings are API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NormalizedEvent {
    /// The CLI's session/thread id (emitted again only if it changes mid-stream).
    SessionStarted {
        session_id: String,
        /// Claude Code's `apiKeySource` from its init row (`none` when it uses a login).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        api_key_source: Option<String>,
    },
    /// Assistant text. `is_final` marks the final answer of the run.
    Text { text: String, is_final: bool },
    /// Reasoning/thinking text the CLI chose to show.
    Reasoning { text: String },
    /// A shell command started (only CLIs that announce starts).
    CommandStarted {
        evidence_id: EvidenceId,
        command: String,
    },
    /// A shell command ended. `exit_code` is `None` when the CLI did not report one; such a
    /// command is never evidence.
    CommandFinished {
        evidence_id: EvidenceId,
        command: String,
        exit_code: Option<i32>,
        status: CommandStatus,
        output_excerpt: String,
        /// The full output length in bytes (the excerpt may be shorter).
        output_bytes: u64,
    },
    /// A non-shell tool call ended (read, grep, StructuredOutput...).
    ToolUse {
        evidence_id: EvidenceId,
        tool: String,
        status: ToolStatus,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error: Option<String>,
    },
    /// The agent changed a file through a tool.
    FileChange { path: String, kind: FileChangeKind },
    /// The CLI refused a tool call.
    PermissionDenied {
        tool: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        evidence_id: Option<EvidenceId>,
        message: String,
    },
    /// The CLI is retrying a model request by itself.
    Retry {
        attempt: Option<u32>,
        max_retries: Option<u32>,
        http_status: Option<u16>,
        message: String,
    },
    /// Usage of one model step (OpenCode), one call (Codex, as a difference from the thread's
    /// previous total) or the whole call (Claude's `result` row).
    Usage { usage: Usage },
    /// A non-fatal message from the CLI that is not an error (Codex's "Model metadata … not
    /// found" item).
    Notice { message: String },
    /// A provider error.
    ProviderError { error: ErrorSignal },
    /// The stage's final report.
    FinalReport { report: FinalReport },
    /// A line that is not a JSON object of the CLI's format; the stream goes on.
    Malformed { line_no: u64, error: String },
    /// A JSON line of a type this parser does not know; kept (capped) and otherwise ignored.
    Unknown {
        line_no: u64,
        event_type: Option<String>,
        raw: String,
    },
}

impl NormalizedEvent {
    /// The `type` string of this event (API).
    pub fn type_name(&self) -> &'static str {
        match self {
            NormalizedEvent::SessionStarted { .. } => "session_started",
            NormalizedEvent::Text { .. } => "text",
            NormalizedEvent::Reasoning { .. } => "reasoning",
            NormalizedEvent::CommandStarted { .. } => "command_started",
            NormalizedEvent::CommandFinished { .. } => "command_finished",
            NormalizedEvent::ToolUse { .. } => "tool_use",
            NormalizedEvent::FileChange { .. } => "file_change",
            NormalizedEvent::PermissionDenied { .. } => "permission_denied",
            NormalizedEvent::Retry { .. } => "retry",
            NormalizedEvent::Usage { .. } => "usage",
            NormalizedEvent::Notice { .. } => "notice",
            NormalizedEvent::ProviderError { .. } => "provider_error",
            NormalizedEvent::FinalReport { .. } => "final_report",
            NormalizedEvent::Malformed { .. } => "malformed",
            NormalizedEvent::Unknown { .. } => "unknown",
        }
    }

    /// The command evidence this event is, if any: a finished command whose exit code the CLI
    /// reported (succeeded or failed). Denied, interrupted, backgrounded or unreadable commands
    /// are never evidence.
    pub fn command_evidence(&self) -> Option<(&EvidenceId, i32)> {
        match self {
            NormalizedEvent::CommandFinished {
                evidence_id,
                exit_code: Some(code),
                status: CommandStatus::Succeeded | CommandStatus::Failed,
                ..
            } => Some((evidence_id, *code)),
            _ => None,
        }
    }

    /// Whether this event is work or content (as opposed to bookkeeping: session, retry, usage,
    /// notice, provider error, unknown). The retry predicate requires a stream with none.
    pub fn is_content(&self) -> bool {
        match self {
            NormalizedEvent::Text { .. }
            | NormalizedEvent::Reasoning { .. }
            | NormalizedEvent::CommandStarted { .. }
            | NormalizedEvent::CommandFinished { .. }
            | NormalizedEvent::ToolUse { .. }
            | NormalizedEvent::FileChange { .. }
            | NormalizedEvent::PermissionDenied { .. }
            | NormalizedEvent::FinalReport { .. }
            | NormalizedEvent::Malformed { .. } => true,
            NormalizedEvent::SessionStarted { .. }
            | NormalizedEvent::Retry { .. }
            | NormalizedEvent::Usage { .. }
            | NormalizedEvent::Notice { .. }
            | NormalizedEvent::ProviderError { .. }
            | NormalizedEvent::Unknown { .. } => false,
        }
    }
}

/// The first malformed line, kept in the summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MalformedLine {
    pub line_no: u64,
    pub error: String,
}

/// Codex's cumulative per-thread totals, as the wire reports them (`input_tokens` includes
/// cached input, `output_tokens` includes reasoning). Store the summary's value and pass it as
/// the previous total of the thread's next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CodexThreadTotals {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_output_tokens: u64,
}

/// What a parser keeps of a whole stream: constant size, whatever the stream's length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    pub transport: TransportKind,
    /// Lines read (including blank and malformed ones).
    pub lines: u64,
    /// Events emitted.
    pub events: u64,
    pub session_id: Option<String>,
    /// The first session id that differed from `session_id`, if any (the caller pauses).
    pub conflicting_session_id: Option<String>,
    /// Claude Code's `apiKeySource` (init row).
    pub api_key_source: Option<String>,
    pub final_report: Option<FinalReport>,
    /// Usage of this call in the normalized convention.
    pub usage: Usage,
    /// Codex only: the thread's cumulative totals after this call.
    pub codex_thread_totals: Option<CodexThreadTotals>,
    /// Claude only: the session's cumulative `total_cost_usd` after this call (Claude Code
    /// reports a session total; store it and pass it to the session's next call).
    pub claude_session_cost_usd: Option<f64>,
    pub stop: Stop,
    pub malformed_lines: u64,
    pub first_malformed: Option<MalformedLine>,
    pub unknown_lines: u64,
    pub commands_finished: u64,
    pub permission_denials: u64,
    pub retries: u64,
    pub provider_errors: u64,
    /// Events for which [`NormalizedEvent::is_content`] holds.
    pub content_events: u64,
    /// The last provider error seen (the one that decided the stop, when it failed).
    pub last_error: Option<ErrorSignal>,
    /// Whether every provider error of the stream was a retryable transport error.
    pub all_errors_retryable_transport: bool,
}

/// Head and tail of `text`, at most [`OUTPUT_EXCERPT_CAP`] bytes plus a marker, cut on char
/// boundaries.
pub fn excerpt(text: &str) -> String {
    if text.len() <= OUTPUT_EXCERPT_CAP {
        return text.to_owned();
    }
    let half = OUTPUT_EXCERPT_CAP / 2;
    let mut head_end = half;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - half;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let omitted = tail_start - head_end;
    format!(
        "{}\n…[{omitted} bytes omitted]…\n{}",
        &text[..head_end],
        &text[tail_start..]
    )
}

/// The first `cap` bytes of `text` (on a char boundary).
pub fn truncate_to(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_owned();
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_keeps_head_and_tail_on_char_boundaries() {
        let text = "é".repeat(5000);
        let cut = excerpt(&text);
        assert!(cut.len() < OUTPUT_EXCERPT_CAP + 64);
        assert!(cut.starts_with('é') && cut.ends_with('é'));
        assert!(cut.contains("bytes omitted"));
        assert_eq!(excerpt("short"), "short");
    }

    #[test]
    fn usage_add_keeps_unknown_as_none() {
        let a = Usage {
            input_tokens: Some(1),
            ..Usage::default()
        };
        let sum = a.add(&Usage::default());
        assert_eq!(sum.input_tokens, Some(1));
        assert_eq!(sum.output_tokens, None);
        assert_eq!(sum.cost_usd, None);
    }

    #[test]
    fn event_type_names_match_serialization() {
        let events = [
            NormalizedEvent::Text {
                text: "x".into(),
                is_final: true,
            },
            NormalizedEvent::Malformed {
                line_no: 1,
                error: "e".into(),
            },
            NormalizedEvent::Notice {
                message: "m".into(),
            },
        ];
        for event in events {
            let value = serde_json::to_value(&event).unwrap();
            assert_eq!(value["type"], event.type_name());
        }
    }

    #[test]
    fn transport_names_round_trip() {
        for kind in TransportKind::ALL {
            assert_eq!(TransportKind::parse(kind.as_str()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }
}
