//! Claude Code's `-p --output-format stream-json --verbose` rows (2.1.328) into normalized
//! events.
//!
//! Wire facts (fixtures `claude/*`): `system/init` carries `session_id` and `apiKeySource`;
//! a Bash call is an `assistant` `tool_use` block answered by a `user` `tool_result`; a
//! result not marked as an error has NO exit code, and is not exit 0 either (Claude Code
//! reads some non-zero exits as success, e.g. `grep` finding nothing): when `tool_use_result`
//! shows the call ran to its end (neither interrupted nor backgrounded) it is
//! [`CommandStatus::Ended`] with an unknown exit, whose exit only the exec ledger can tell; a
//! failure's text starts `Exit code N`; anything else is an unknown exit (`None`). Denials come as `system/permission_denied` rows and in
//! `result.permission_denials`; `system/api_retry` rows are the CLI's own retries. The real
//! totals and the report (`structured_output`) are in the final `result` row; the `assistant`
//! rows' usage is only the start-of-message usage and is ignored.
//!
//! Memory: the last assistant text and the tool calls still waiting for their result (capped
//! at [`MAX_PENDING_TOOLS`]) are held, nothing else.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde::Deserialize;

use super::common::{LenientStr, StrOr, Tally, json_error, parse_line};
use super::stop::{Stop, StopClass, reset_hint};
use super::types::{
    CommandStatus, ErrorSignal, ErrorSource, EvidenceId, FileChangeKind, FinalReport,
    NormalizedEvent, StreamSummary, ToolStatus, TransportKind, Usage, excerpt,
};

/// Tool calls awaiting their result that are remembered; older ones are forgotten (their
/// result then reads as an unknown tool).
pub const MAX_PENDING_TOOLS: usize = 256;

#[derive(Deserialize)]
struct WireLine<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    subtype: LenientStr<'a>,
    #[serde(borrow, default)]
    session_id: LenientStr<'a>,
    #[serde(borrow, rename = "apiKeySource", default)]
    api_key_source: LenientStr<'a>,
    /// An object for `assistant`/`user` rows, a string for `system/permission_denied`.
    #[serde(borrow, default)]
    message: Option<Box<StrOr<'a, WireMessage<'a>>>>,
    #[serde(borrow, default)]
    tool_use_result: Option<StrOr<'a, WireToolUseResult<'a>>>,
    #[serde(borrow, default)]
    tool_result_meta: Option<Vec<WireToolResultMeta<'a>>>,
    // system/permission_denied
    #[serde(borrow, default)]
    tool_name: LenientStr<'a>,
    #[serde(borrow, default)]
    tool_use_id: LenientStr<'a>,
    // system/api_retry
    #[serde(default)]
    attempt: Option<u32>,
    #[serde(default)]
    max_retries: Option<u32>,
    #[serde(default)]
    error_status: Option<u16>,
    /// A string on `api_retry` and API-error `assistant` rows.
    #[serde(borrow, default)]
    error: LenientStr<'a>,
    // result
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(borrow, default)]
    result: LenientStr<'a>,
    #[serde(default)]
    structured_output: Option<serde_json::Value>,
    #[serde(borrow, default)]
    permission_denials: Option<Vec<WireDenial<'a>>>,
    #[serde(default)]
    usage: Option<Box<WireUsage>>,
    #[serde(default)]
    total_cost_usd: Option<f64>,
    #[serde(borrow, default)]
    terminal_reason: LenientStr<'a>,
    #[serde(default)]
    api_error_status: Option<u16>,
    #[serde(borrow, default)]
    errors: Option<Vec<LenientStr<'a>>>,
    #[serde(borrow, default)]
    stop_reason: LenientStr<'a>,
}

#[derive(Deserialize)]
struct WireMessage<'a> {
    #[serde(borrow, default)]
    content: Option<StrOr<'a, Vec<WireBlock<'a>>>>,
}

#[derive(Deserialize)]
struct WireBlock<'a> {
    #[serde(borrow, rename = "type", default)]
    kind: LenientStr<'a>,
    #[serde(borrow, default)]
    text: LenientStr<'a>,
    #[serde(borrow, default)]
    thinking: LenientStr<'a>,
    #[serde(borrow, default)]
    id: LenientStr<'a>,
    #[serde(borrow, default)]
    name: LenientStr<'a>,
    #[serde(borrow, default)]
    input: Option<WireToolInput<'a>>,
    #[serde(borrow, default)]
    tool_use_id: LenientStr<'a>,
    #[serde(borrow, default)]
    content: Option<StrOr<'a, Vec<WireBlock<'a>>>>,
    #[serde(default)]
    is_error: Option<bool>,
}

#[derive(Deserialize)]
struct WireToolInput<'a> {
    #[serde(borrow, default)]
    command: LenientStr<'a>,
    #[serde(borrow, default)]
    file_path: LenientStr<'a>,
    #[serde(borrow, default)]
    notebook_path: LenientStr<'a>,
}

#[derive(Deserialize)]
struct WireToolUseResult<'a> {
    #[serde(default)]
    interrupted: Option<bool>,
    #[serde(borrow, rename = "backgroundTaskId", default)]
    background_task_id: LenientStr<'a>,
}

#[derive(Deserialize)]
struct WireToolResultMeta<'a> {
    #[serde(borrow, default)]
    id: LenientStr<'a>,
    #[serde(borrow, default)]
    permission_decision: Option<WirePermissionDecision<'a>>,
}

#[derive(Deserialize)]
struct WirePermissionDecision<'a> {
    #[serde(borrow, default)]
    decision: LenientStr<'a>,
}

#[derive(Deserialize)]
struct WireDenial<'a> {
    #[serde(borrow, default)]
    tool_name: LenientStr<'a>,
    #[serde(borrow, default)]
    tool_use_id: LenientStr<'a>,
}

/// Anthropic's usage object as Claude Code writes it (its stream and its session transcript,
/// `claude_transcript.rs`).
#[derive(Deserialize, Clone, Copy, Default)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub(super) input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) output_tokens: Option<u64>,
    #[serde(default)]
    output_tokens_details: Option<WireOutputDetails>,
}

#[derive(Deserialize, Clone, Copy, Default)]
struct WireOutputDetails {
    #[serde(default)]
    thinking_tokens: Option<u64>,
}

#[derive(Debug)]
struct PendingTool {
    id: String,
    name: String,
    command: Option<String>,
    path: Option<String>,
}

#[derive(Debug)]
enum Terminal {
    Nothing,
    Running,
    Result(Stop),
}

/// Streaming parser for Claude Code's stream-json rows.
#[derive(Debug)]
pub struct ClaudeParser {
    tally: Tally,
    pending_text: Option<String>,
    pending_tools: VecDeque<PendingTool>,
    /// Tool-use ids already reported as denied (so `result.permission_denials` does not repeat
    /// them); capped like the pending tools.
    denied_ids: VecDeque<String>,
    report: Option<serde_json::Value>,
    terminal: Terminal,
    /// The session's cost before this call (resumed sessions).
    previous_session_cost: Option<f64>,
    /// The session's cost after this call, from the `result` row.
    session_cost: Option<f64>,
}

impl Default for ClaudeParser {
    fn default() -> Self {
        Self::new()
    }
}

impl ClaudeParser {
    /// A parser for a call that starts a new session.
    pub fn new() -> ClaudeParser {
        ClaudeParser::with_previous_session_cost(None)
    }

    /// A parser for a call that resumes a session whose cost so far was
    /// `previous_session_cost_usd` (the previous summary's `claude_session_cost_usd`): Claude
    /// Code's `total_cost_usd` is the session's total, so this call's cost is the difference.
    pub fn with_previous_session_cost(previous_session_cost_usd: Option<f64>) -> ClaudeParser {
        ClaudeParser {
            previous_session_cost: previous_session_cost_usd,
            session_cost: None,
            tally: Tally::new(TransportKind::Claude),
            pending_text: None,
            pending_tools: VecDeque::new(),
            denied_ids: VecDeque::new(),
            report: None,
            terminal: Terminal::Nothing,
        }
    }

    pub fn feed_line(&mut self, line: &[u8]) -> Vec<NormalizedEvent> {
        let mut out = Vec::new();
        self.feed_line_into(line, &mut out);
        out
    }

    pub fn feed_oversized_line_into(
        &mut self,
        bytes: u64,
        cap: usize,
        out: &mut Vec<NormalizedEvent>,
    ) {
        self.tally.oversized(out, bytes, cap);
    }

    pub fn feed_line_into(&mut self, line: &[u8], out: &mut Vec<NormalizedEvent>) {
        let Some(line) = self.tally.start_line(line) else {
            return;
        };
        let wire: WireLine = match parse_line(line) {
            Ok(wire) => wire,
            Err(error) => return self.tally.malformed(out, json_error(&error)),
        };
        if !matches!(self.terminal, Terminal::Result(_)) {
            self.terminal = Terminal::Running;
        }
        match wire.kind.as_ref() {
            "system" => self.system(&wire, line, out),
            "assistant" => self.assistant(&wire, out),
            "user" => self.user(&wire, out),
            "result" => self.result(&wire, out),
            // Raw SSE events (`--include-partial-messages`): the same content arrives again
            // as whole assistant rows.
            "stream_event" => {}
            other => self.tally.unknown(out, Some(other), line),
        }
    }

    fn flush_text(&mut self, out: &mut Vec<NormalizedEvent>, is_final: bool) {
        if let Some(text) = self.pending_text.take() {
            self.tally
                .emit(out, NormalizedEvent::Text { text, is_final });
        }
    }

    fn system(&mut self, wire: &WireLine, raw: &[u8], out: &mut Vec<NormalizedEvent>) {
        match wire.subtype.as_deref().unwrap_or("") {
            "init" => {
                if let Some(id) = wire.session_id.as_deref() {
                    let source = wire.api_key_source.as_deref().map(str::to_owned);
                    self.tally.session(out, id, source);
                }
            }
            "api_retry" => {
                let kind = wire.error.as_deref().unwrap_or("");
                let message = match wire.error_status {
                    Some(status) => format!("{kind} ({status})"),
                    None => kind.to_owned(),
                };
                self.tally.emit(
                    out,
                    NormalizedEvent::Retry {
                        attempt: wire.attempt,
                        max_retries: wire.max_retries,
                        http_status: wire.error_status,
                        message,
                    },
                );
            }
            "permission_denied" => {
                let tool_use_id = wire.tool_use_id.as_deref();
                if let Some(id) = tool_use_id {
                    self.remember_denied(id);
                }
                let message = match wire.message.as_deref() {
                    Some(StrOr::Str(s)) => s.to_string(),
                    _ => String::new(),
                };
                self.tally.emit(
                    out,
                    NormalizedEvent::PermissionDenied {
                        tool: wire.tool_name.as_deref().unwrap_or("unknown").to_owned(),
                        evidence_id: tool_use_id.map(EvidenceId::from_provider_id),
                        message,
                    },
                );
            }
            "thinking_tokens" | "status" | "ui_invalidate" | "compact_boundary" => {}
            other => self.tally.unknown(out, Some(other), raw),
        }
    }

    fn remember_denied(&mut self, id: &str) {
        if self.denied_ids.iter().any(|d| d == id) {
            return;
        }
        if self.denied_ids.len() >= MAX_PENDING_TOOLS {
            self.denied_ids.pop_front();
        }
        self.denied_ids.push_back(id.to_owned());
    }

    fn blocks<'w, 'a>(wire: &'w WireLine<'a>) -> &'w [WireBlock<'a>] {
        match wire.message.as_deref() {
            Some(StrOr::Other(WireMessage {
                content: Some(StrOr::Other(blocks)),
            })) => blocks,
            _ => &[],
        }
    }

    fn assistant(&mut self, wire: &WireLine, out: &mut Vec<NormalizedEvent>) {
        // An API-error row repeats the error the result row carries; its text is Claude Code's
        // message, not the model's answer.
        let api_error = wire.error.as_deref().is_some();
        for block in Self::blocks(wire) {
            match block.kind.as_deref().unwrap_or("") {
                "text" => {
                    let text = block.text.as_deref().unwrap_or("").to_owned();
                    self.flush_text(out, false);
                    if api_error {
                        self.tally
                            .emit(out, NormalizedEvent::Notice { message: text });
                    } else {
                        self.pending_text = Some(text);
                    }
                }
                "thinking" => {
                    self.flush_text(out, false);
                    if let Some(text) = block.thinking.as_deref() {
                        self.tally.emit(
                            out,
                            NormalizedEvent::Reasoning {
                                text: text.to_owned(),
                            },
                        );
                    }
                }
                "tool_use" => {
                    self.flush_text(out, false);
                    self.tool_use(block, out);
                }
                _ => {}
            }
        }
    }

    fn tool_use(&mut self, block: &WireBlock, out: &mut Vec<NormalizedEvent>) {
        let id = block.id.as_deref().unwrap_or("unknown").to_owned();
        let name = block.name.as_deref().unwrap_or("unknown").to_owned();
        let input = block.input.as_ref();
        let command = input.and_then(|i| i.command.as_deref()).map(str::to_owned);
        let path = input
            .and_then(|i| i.file_path.as_deref().or(i.notebook_path.as_deref()))
            .map(str::to_owned);
        if name == "Bash" {
            self.tally.emit(
                out,
                NormalizedEvent::CommandStarted {
                    evidence_id: EvidenceId::from_provider_id(&id),
                    command: command.clone().unwrap_or_default(),
                },
            );
        }
        if self.pending_tools.len() >= MAX_PENDING_TOOLS {
            self.pending_tools.pop_front();
        }
        self.pending_tools.push_back(PendingTool {
            id,
            name,
            command,
            path,
        });
    }

    fn user(&mut self, wire: &WireLine, out: &mut Vec<NormalizedEvent>) {
        self.flush_text(out, false);
        for block in Self::blocks(wire) {
            match block.kind.as_deref().unwrap_or("") {
                "tool_result" => self.tool_result(wire, block, out),
                // Synthetic nudges such as "[structured-output-enforce] …".
                "text" => {
                    if let Some(text) = block.text.as_deref() {
                        self.tally.emit(
                            out,
                            NormalizedEvent::Notice {
                                message: text.to_owned(),
                            },
                        );
                    }
                }
                _ => {}
            }
        }
    }

    fn tool_result(&mut self, wire: &WireLine, block: &WireBlock, out: &mut Vec<NormalizedEvent>) {
        let id = block.tool_use_id.as_deref().unwrap_or("unknown");
        let evidence_id = EvidenceId::from_provider_id(id);
        let pending = self
            .pending_tools
            .iter()
            .position(|t| t.id == id)
            .and_then(|i| self.pending_tools.remove(i));
        let name = pending.as_ref().map_or("unknown", |t| t.name.as_str());
        let is_error = block.is_error == Some(true);
        let text = content_text(block.content.as_ref());
        let rejected_by_meta = wire.tool_result_meta.iter().flatten().any(|m| {
            m.id.as_deref() == Some(id)
                && m.permission_decision
                    .as_ref()
                    .and_then(|d| d.decision.as_deref())
                    == Some("reject")
        });
        let already_denied = self.denied_ids.iter().any(|d| d == id);
        let denied = already_denied || rejected_by_meta;
        if denied && !already_denied {
            self.remember_denied(id);
            self.tally.emit(
                out,
                NormalizedEvent::PermissionDenied {
                    tool: name.to_owned(),
                    evidence_id: Some(evidence_id.clone()),
                    message: text.clone(),
                },
            );
        }
        if name == "Bash" {
            let (exit_code, status) = if denied {
                (None, CommandStatus::Denied)
            } else if is_error {
                match failure_exit_code(&text) {
                    Some(code) => (Some(code), CommandStatus::Failed),
                    None => (None, CommandStatus::Unknown),
                }
            } else if ran_in_foreground(wire.tool_use_result.as_ref()) {
                // Not marked as an error is not exit 0: Claude Code reads some non-zero exits
                // as success (`grep` without a match, `… | grep -q` in a pipeline).
                (None, CommandStatus::Ended)
            } else {
                (None, CommandStatus::Unknown)
            };
            let command = pending.and_then(|t| t.command).unwrap_or_default();
            self.tally.emit(
                out,
                NormalizedEvent::CommandFinished {
                    evidence_id,
                    command,
                    exit_code,
                    status,
                    output_excerpt: excerpt(&text),
                    output_bytes: text.len() as u64,
                },
            );
            return;
        }
        let status = if denied {
            ToolStatus::Denied
        } else if is_error {
            ToolStatus::Failed
        } else {
            ToolStatus::Completed
        };
        if status == ToolStatus::Completed
            && matches!(name, "Edit" | "Write" | "MultiEdit" | "NotebookEdit")
            && let Some(path) = pending.as_ref().and_then(|t| t.path.clone())
        {
            self.tally.emit(
                out,
                NormalizedEvent::FileChange {
                    path,
                    kind: FileChangeKind::Write,
                },
            );
        }
        self.tally.emit(
            out,
            NormalizedEvent::ToolUse {
                evidence_id,
                tool: name.to_owned(),
                status,
                error: (status != ToolStatus::Completed).then(|| excerpt(&text)),
            },
        );
    }

    fn result(&mut self, wire: &WireLine, out: &mut Vec<NormalizedEvent>) {
        let is_error = wire.is_error == Some(true);
        self.flush_text(out, !is_error);
        for denial in wire.permission_denials.iter().flatten() {
            let id = denial.tool_use_id.as_deref();
            if id.is_some_and(|id| self.denied_ids.iter().any(|d| d == id)) {
                continue;
            }
            if let Some(id) = id {
                self.remember_denied(id);
            }
            self.tally.emit(
                out,
                NormalizedEvent::PermissionDenied {
                    tool: denial.tool_name.as_deref().unwrap_or("unknown").to_owned(),
                    evidence_id: id.map(EvidenceId::from_provider_id),
                    message: "listed in result.permission_denials".to_owned(),
                },
            );
        }
        if wire.total_cost_usd.is_some() {
            self.session_cost = wire.total_cost_usd;
        }
        if let Some(usage) = &wire.usage {
            let thinking = usage
                .output_tokens_details
                .as_ref()
                .and_then(|d| d.thinking_tokens);
            let usage = Usage {
                input_tokens: usage.input_tokens,
                cache_read_tokens: usage.cache_read_input_tokens,
                cache_write_tokens: usage.cache_creation_input_tokens,
                output_tokens: usage.output_tokens,
                // Claude Code writes 0 when the API reported no thinking count (the mock's
                // thinking blocks still show 0), so 0 is indistinguishable from unknown.
                reasoning_tokens: thinking.filter(|t| *t > 0),
                cost_usd: wire
                    .total_cost_usd
                    .map(|total| (total - self.previous_session_cost.unwrap_or(0.0)).max(0.0)),
                cost_source: None,
            };
            self.tally.emit(out, NormalizedEvent::Usage { usage });
        }
        let subtype = wire.subtype.as_deref().unwrap_or("");
        let stop_reason = wire.stop_reason.as_deref();
        let stop = if is_error {
            let message = wire
                .result
                .as_deref()
                .map(str::to_owned)
                .or_else(|| {
                    wire.errors.as_ref().map(|errors| {
                        errors
                            .iter()
                            .filter_map(|e| e.as_deref())
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                })
                .unwrap_or_else(|| subtype.to_owned());
            let mut signal = ErrorSignal::new(ErrorSource::ResultRow, message);
            signal.http_status = wire.api_error_status;
            signal.kind = wire
                .terminal_reason
                .as_deref()
                .or(Some(subtype))
                .map(str::to_owned);
            signal.reset_hint = reset_hint(&signal.message);
            self.tally.emit(
                out,
                NormalizedEvent::ProviderError {
                    error: signal.clone(),
                },
            );
            match (subtype, stop_reason) {
                ("error_max_structured_output_retries", _) => {
                    let mut stop = Stop::new(StopClass::StructuredOutputExhausted);
                    stop.detail = Some(signal.message);
                    stop
                }
                (_, Some("refusal")) => Stop::new(StopClass::ContentRefusal),
                (_, Some("max_tokens")) => Stop::new(StopClass::OutputCap),
                _ => Stop::from_signal(&signal),
            }
        } else {
            match stop_reason {
                Some("refusal") => Stop::new(StopClass::ContentRefusal),
                Some("max_tokens") => Stop::new(StopClass::OutputCap),
                _ => Stop::new(StopClass::Completed),
            }
        };
        self.report = wire.structured_output.clone().filter(|v| !v.is_null());
        self.terminal = Terminal::Result(stop);
    }

    pub fn finish_into(mut self, out: &mut Vec<NormalizedEvent>) -> StreamSummary {
        self.flush_text(out, false);
        let stop = match std::mem::replace(&mut self.terminal, Terminal::Nothing) {
            Terminal::Nothing => Stop::new(self.tally.nothing_stop()),
            Terminal::Running => Stop::new(StopClass::CutStream),
            Terminal::Result(stop) => stop,
        };
        let report = self.report.take().map(FinalReport::Structured);
        let mut summary = self.tally.finish_with_report(out, report, stop, None);
        summary.claude_session_cost_usd = self.session_cost;
        summary
    }

    pub fn finish(self) -> StreamSummary {
        self.finish_into(&mut Vec::new())
    }
}

/// The text of a tool result: a string, or the text blocks of an array.
fn content_text(content: Option<&StrOr<Vec<WireBlock>>>) -> String {
    match content {
        Some(StrOr::Str(s)) => s.to_string(),
        Some(StrOr::Other(blocks)) => blocks
            .iter()
            .filter_map(|b| b.text.as_deref())
            .collect::<Vec<_>>()
            .join("\n"),
        None => String::new(),
    }
}

/// `Exit code N` at the start of a failed Bash result.
fn failure_exit_code(text: &str) -> Option<i32> {
    let rest = text.strip_prefix("Exit code ")?;
    let digits: &str = rest
        .split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .next()?;
    digits.parse().ok()
}

/// A successful Bash result counts as exit 0 only when Claude Code says the call ran in the
/// foreground to its end.
fn ran_in_foreground(result: Option<&StrOr<WireToolUseResult>>) -> bool {
    match result {
        Some(StrOr::Other(r)) => {
            r.interrupted == Some(false) && r.background_task_id.as_deref().is_none()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HAPPY: &str = include_str!("../../tests/fixtures/real-clis/claude/happy/stdout.jsonl");

    fn run(stream: &str) -> (Vec<NormalizedEvent>, StreamSummary) {
        let mut parser = ClaudeParser::new();
        let mut events = Vec::new();
        for line in stream.lines() {
            parser.feed_line_into(line.as_bytes(), &mut events);
        }
        let summary = parser.finish_into(&mut events);
        (events, summary)
    }

    #[test]
    fn happy_totals_come_from_the_result_row() {
        let (_, summary) = run(HAPPY);
        // Anthropic semantics: input_tokens already excludes cache reads and writes.
        assert_eq!(summary.usage.input_tokens, Some(2100));
        assert_eq!(summary.usage.cache_read_tokens, Some(1210));
        assert_eq!(summary.usage.cache_write_tokens, Some(300 + 301));
        assert_eq!(summary.usage.output_tokens, Some(81));
        assert_eq!(summary.usage.reasoning_tokens, None);
        assert_eq!(summary.usage.cost_usd, Some(0.013267000000000001));
        assert_eq!(summary.api_key_source.as_deref(), Some("ANTHROPIC_API_KEY"));
        assert_eq!(summary.stop.class, StopClass::Completed);
        assert!(
            matches!(summary.final_report, Some(FinalReport::Structured(ref v)) if v["status"] == "done")
        );
    }

    #[test]
    fn exit_code_rules() {
        assert_eq!(failure_exit_code("Exit code 3\nls: cannot access"), Some(3));
        assert_eq!(failure_exit_code("Exit code 127"), Some(127));
        assert_eq!(failure_exit_code("Command timed out"), None);
        let foreground: WireToolUseResult =
            serde_json::from_str(r#"{"stdout":"x","interrupted":false}"#).unwrap();
        assert!(ran_in_foreground(Some(&StrOr::Other(foreground))));
        let interrupted: WireToolUseResult =
            serde_json::from_str(r#"{"stdout":"x","interrupted":true}"#).unwrap();
        assert!(!ran_in_foreground(Some(&StrOr::Other(interrupted))));
        let background: WireToolUseResult =
            serde_json::from_str(r#"{"interrupted":false,"backgroundTaskId":"b1"}"#).unwrap();
        assert!(!ran_in_foreground(Some(&StrOr::Other(background))));
        assert!(!ran_in_foreground(None));
    }

    #[test]
    fn backgrounded_command_has_no_exit_code() {
        let stream = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"sleep 99","run_in_background":true}}]}}
{"type":"user","message":{"content":[{"tool_use_id":"t1","type":"tool_result","content":"Command running in background with ID: b1","is_error":false}]},"tool_use_result":{"stdout":"","interrupted":false,"backgroundTaskId":"b1"}}"#;
        let (events, _) = run(stream);
        assert!(events.iter().any(|e| matches!(
            e,
            NormalizedEvent::CommandFinished {
                exit_code: None,
                status: CommandStatus::Unknown,
                command,
                ..
            } if command == "sleep 99"
        )));
    }

    /// `npm install && npm test | grep -q passing` whose grep found nothing: Claude Code does
    /// not mark it as an error and reports no exit code. That is an unknown exit, not exit 0.
    #[test]
    fn a_result_not_marked_as_an_error_has_an_unknown_exit() {
        let stream = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"npm install && npm test | grep -q passing"}}]}}
{"type":"user","message":{"content":[{"tool_use_id":"t2","type":"tool_result","content":"","is_error":false}]},"tool_use_result":{"stdout":"","stderr":"","interrupted":false,"isImage":false,"noOutputExpected":false,"returnCodeInterpretation":"No matches found"}}"#;
        let (events, _) = run(stream);
        let finished: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, NormalizedEvent::CommandFinished { .. }))
            .collect();
        assert!(
            matches!(
                finished.as_slice(),
                [NormalizedEvent::CommandFinished {
                    exit_code: None,
                    status: CommandStatus::Ended,
                    ..
                }]
            ),
            "{finished:?}"
        );
        assert_eq!(finished[0].command_evidence(), None);
    }
}
