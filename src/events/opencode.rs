//! OpenCode's `run --format json` stream (1.18.33), one JSON object per line, into normalized
//! events.
//!
//! Wire facts (fixtures `opencode/*`): every line has `type`, `timestamp`, `sessionID`; a tool
//! call appears once, when finished (`tool_use`, exit code in `part.state.metadata.exit`, a
//! permission rejection is `state.status: "error"`); usage comes per `step_finish` (`input`
//! excludes cache reads, `output` excludes reasoning); the final answer is the text of the last
//! step (`step_finish.reason: "stop"`); an API failure is a single `error` line.
//!
//! Memory: only the texts of the current step are held (to mark them final once the step's
//! reason is known), never the stream.

use std::borrow::Cow;

use serde::Deserialize;

use super::common::{LenientStr, Tally, exit_code, json_error, parse_line};
use super::stop::{Stop, StopClass, reset_hint};
use super::types::{
    CommandStatus, ErrorSignal, ErrorSource, EvidenceId, FileChangeKind, FinalReport,
    NormalizedEvent, StreamSummary, ToolStatus, TransportKind, Usage, excerpt,
};

#[derive(Deserialize)]
struct WireLine<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow, rename = "sessionID", default)]
    session_id: LenientStr<'a>,
    #[serde(borrow, default)]
    part: Option<Box<WirePart<'a>>>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct WirePart<'a> {
    #[serde(borrow, default)]
    text: LenientStr<'a>,
    #[serde(borrow, default)]
    tool: LenientStr<'a>,
    #[serde(borrow, rename = "callID", default)]
    call_id: LenientStr<'a>,
    #[serde(borrow, default)]
    id: LenientStr<'a>,
    #[serde(borrow, default)]
    state: Option<Box<WireToolState<'a>>>,
    #[serde(borrow, default)]
    reason: LenientStr<'a>,
    #[serde(default)]
    tokens: Option<WireTokens>,
    #[serde(default)]
    cost: Option<f64>,
}

#[derive(Deserialize)]
struct WireToolState<'a> {
    #[serde(borrow, default)]
    status: LenientStr<'a>,
    #[serde(borrow, default)]
    input: Option<WireToolInput<'a>>,
    #[serde(borrow, default)]
    output: LenientStr<'a>,
    #[serde(borrow, default)]
    error: LenientStr<'a>,
    #[serde(borrow, default)]
    title: LenientStr<'a>,
    #[serde(borrow, default)]
    metadata: Option<WireToolMetadata<'a>>,
}

#[derive(Deserialize)]
struct WireToolInput<'a> {
    #[serde(borrow, default)]
    command: LenientStr<'a>,
    #[serde(borrow, rename = "filePath", default)]
    file_path: LenientStr<'a>,
}

#[derive(Deserialize)]
struct WireToolMetadata<'a> {
    #[serde(default)]
    exit: Option<i64>,
    #[serde(borrow, default)]
    output: LenientStr<'a>,
}

#[derive(Deserialize)]
struct WireTokens {
    #[serde(default)]
    input: Option<u64>,
    #[serde(default)]
    output: Option<u64>,
    #[serde(default)]
    reasoning: Option<u64>,
    #[serde(default)]
    cache: Option<WireCache>,
}

#[derive(Deserialize)]
struct WireCache {
    #[serde(default)]
    read: Option<u64>,
    #[serde(default)]
    write: Option<u64>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    data: Option<WireErrorData>,
}

#[derive(Deserialize)]
struct WireErrorData {
    #[serde(default)]
    message: Option<String>,
    #[serde(rename = "statusCode", default)]
    status_code: Option<u16>,
    #[serde(rename = "isRetryable", default)]
    is_retryable: Option<bool>,
    #[serde(rename = "responseHeaders", default)]
    response_headers: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The most text bytes held for one step; past it the held texts are emitted as not final
/// and the step gives no report (keeps memory bounded on a pathological stream).
pub const MAX_HELD_STEP_TEXT_BYTES: usize = 16 * 1024 * 1024;

/// What the stream's last significant event was; decides the stop.
#[derive(Debug)]
enum Terminal {
    Nothing,
    /// A text, tool or step start after which the stream ended.
    MidStep,
    StepFinished {
        reason: String,
    },
    Error(ErrorSignal),
}

/// Streaming parser for OpenCode's JSON events.
#[derive(Debug)]
pub struct OpencodeParser {
    tally: Tally,
    /// Texts of the current step, held until its `step_finish` says whether it is the last.
    step_texts: Vec<String>,
    step_text_bytes: usize,
    /// The current step's texts outgrew [`MAX_HELD_STEP_TEXT_BYTES`].
    step_overflowed: bool,
    text_cap: usize,
    report: Option<String>,
    terminal: Terminal,
}

impl Default for OpencodeParser {
    fn default() -> Self {
        Self::new()
    }
}

impl OpencodeParser {
    pub fn new() -> OpencodeParser {
        OpencodeParser {
            tally: Tally::new(TransportKind::Opencode),
            step_texts: Vec::new(),
            step_text_bytes: 0,
            step_overflowed: false,
            text_cap: MAX_HELD_STEP_TEXT_BYTES,
            report: None,
            terminal: Terminal::Nothing,
        }
    }

    /// Parse one line (without or with its newline).
    pub fn feed_line(&mut self, line: &[u8]) -> Vec<NormalizedEvent> {
        let mut out = Vec::new();
        self.feed_line_into(line, &mut out);
        out
    }

    pub fn feed_line_into(&mut self, line: &[u8], out: &mut Vec<NormalizedEvent>) {
        let Some(line) = self.tally.start_line(line) else {
            return;
        };
        let wire: WireLine = match parse_line(line) {
            Ok(wire) => wire,
            Err(error) => return self.tally.malformed(out, json_error(&error)),
        };
        if let Some(id) = wire.session_id.as_deref() {
            self.tally.session(out, id, None);
        }
        match wire.kind.as_ref() {
            "step_start" => {
                self.flush_texts(out, false);
                self.step_overflowed = false;
                self.terminal = Terminal::MidStep;
            }
            "text" => {
                if let Some(text) = wire.part.as_ref().and_then(|p| p.text.as_deref()) {
                    if self.step_text_bytes + text.len() > self.text_cap {
                        self.flush_texts(out, false);
                        self.step_overflowed = true;
                    }
                    self.step_text_bytes += text.len();
                    self.step_texts.push(text.to_owned());
                }
                self.terminal = Terminal::MidStep;
            }
            "reasoning" => {
                self.flush_texts(out, false);
                if let Some(text) = wire.part.as_ref().and_then(|p| p.text.as_deref()) {
                    self.tally.emit(
                        out,
                        NormalizedEvent::Reasoning {
                            text: text.to_owned(),
                        },
                    );
                }
                self.terminal = Terminal::MidStep;
            }
            "tool_use" => {
                self.flush_texts(out, false);
                if let Some(part) = &wire.part {
                    self.tool_use(part, out);
                }
                self.terminal = Terminal::MidStep;
            }
            "step_finish" => self.step_finish(wire.part.as_deref(), out),
            "error" => {
                self.flush_texts(out, false);
                let signal = error_signal(wire.error.as_ref());
                self.tally.emit(
                    out,
                    NormalizedEvent::ProviderError {
                        error: signal.clone(),
                    },
                );
                self.terminal = Terminal::Error(signal);
            }
            other => self.tally.unknown(out, Some(other), line),
        }
    }

    /// Record a line longer than the reader's cap (its content was discarded).
    pub fn feed_oversized_line_into(
        &mut self,
        bytes: u64,
        cap: usize,
        out: &mut Vec<NormalizedEvent>,
    ) {
        self.tally.oversized(out, bytes, cap);
    }

    fn flush_texts(&mut self, out: &mut Vec<NormalizedEvent>, is_final: bool) {
        self.step_text_bytes = 0;
        for text in std::mem::take(&mut self.step_texts) {
            self.tally
                .emit(out, NormalizedEvent::Text { text, is_final });
        }
    }

    fn step_finish(&mut self, part: Option<&WirePart>, out: &mut Vec<NormalizedEvent>) {
        let reason = part
            .and_then(|p| p.reason.as_deref())
            .unwrap_or("")
            .to_owned();
        let is_final = reason == "stop" && !self.step_overflowed;
        if reason == "stop" {
            self.report =
                (is_final && !self.step_texts.is_empty()).then(|| self.step_texts.concat());
        }
        self.flush_texts(out, is_final);
        self.step_overflowed = false;
        if let Some(tokens) = part.and_then(|p| p.tokens.as_ref()) {
            let reasoning = tokens.reasoning;
            let usage = Usage {
                input_tokens: tokens.input,
                cache_read_tokens: tokens.cache.as_ref().and_then(|c| c.read),
                cache_write_tokens: tokens.cache.as_ref().and_then(|c| c.write),
                // OpenCode's `output` excludes reasoning; the normalized one includes it.
                output_tokens: tokens
                    .output
                    .map(|o| o.saturating_add(reasoning.unwrap_or(0))),
                reasoning_tokens: reasoning,
                cost_usd: part.and_then(|p| p.cost),
                cost_source: None,
            };
            self.tally.emit(out, NormalizedEvent::Usage { usage });
        }
        self.terminal = Terminal::StepFinished { reason };
    }

    fn tool_use(&mut self, part: &WirePart, out: &mut Vec<NormalizedEvent>) {
        let tool = part.tool.as_deref().unwrap_or("unknown").to_owned();
        let provider_id = part
            .call_id
            .as_deref()
            .or(part.id.as_deref())
            .unwrap_or("unknown");
        let evidence_id = EvidenceId::from_provider_id(provider_id);
        let Some(state) = &part.state else {
            return self
                .tally
                .unknown(out, Some("tool_use"), b"tool_use without state");
        };
        let status = state.status.as_deref().unwrap_or("");
        let error = state.error.as_deref();
        let denied = status == "error" && error.is_some_and(is_permission_rejection);
        if denied {
            self.tally.emit(
                out,
                NormalizedEvent::PermissionDenied {
                    tool: tool.clone(),
                    evidence_id: Some(evidence_id.clone()),
                    message: error.unwrap_or("").to_owned(),
                },
            );
        }
        if tool == "bash" {
            let command = state
                .input
                .as_ref()
                .and_then(|i| i.command.as_deref())
                .or(state.title.as_deref())
                .unwrap_or("")
                .to_owned();
            if matches!(status, "pending" | "running") {
                return self.tally.emit(
                    out,
                    NormalizedEvent::CommandStarted {
                        evidence_id,
                        command,
                    },
                );
            }
            let exit = if status == "completed" {
                exit_code(state.metadata.as_ref().and_then(|m| m.exit))
            } else {
                None
            };
            let command_status = match (status, exit) {
                _ if denied => CommandStatus::Denied,
                ("completed", Some(0)) => CommandStatus::Succeeded,
                ("completed", Some(_)) => CommandStatus::Failed,
                _ => CommandStatus::Unknown,
            };
            let output = state
                .output
                .as_deref()
                .or(state.metadata.as_ref().and_then(|m| m.output.as_deref()))
                .or(error)
                .unwrap_or("");
            self.tally.emit(
                out,
                NormalizedEvent::CommandFinished {
                    evidence_id,
                    command,
                    exit_code: exit,
                    status: command_status,
                    output_excerpt: excerpt(output),
                    output_bytes: output.len() as u64,
                },
            );
            return;
        }
        if matches!(status, "pending" | "running") {
            return;
        }
        let tool_status = match status {
            _ if denied => ToolStatus::Denied,
            "completed" => ToolStatus::Completed,
            _ => ToolStatus::Failed,
        };
        if tool_status == ToolStatus::Completed
            && matches!(tool.as_str(), "edit" | "write" | "patch" | "multiedit")
            && let Some(path) = state.input.as_ref().and_then(|i| i.file_path.as_deref())
        {
            self.tally.emit(
                out,
                NormalizedEvent::FileChange {
                    path: path.to_owned(),
                    kind: FileChangeKind::Write,
                },
            );
        }
        self.tally.emit(
            out,
            NormalizedEvent::ToolUse {
                evidence_id,
                tool,
                status: tool_status,
                error: (tool_status != ToolStatus::Completed)
                    .then(|| error.unwrap_or("").to_owned()),
            },
        );
    }

    /// End of stream: flush held texts, decide the stop and hand back the summary.
    pub fn finish_into(mut self, out: &mut Vec<NormalizedEvent>) -> StreamSummary {
        // Texts after the last step_finish belong to a step that never finished.
        self.flush_texts(out, false);
        let stop = match &self.terminal {
            Terminal::Nothing => Stop::new(self.tally.nothing_stop()),
            Terminal::MidStep => Stop::new(StopClass::CutStream),
            Terminal::Error(signal) => Stop::from_signal(signal),
            Terminal::StepFinished { reason } => Stop::new(match reason.as_str() {
                "stop" => StopClass::Completed,
                "length" => StopClass::OutputCap,
                "content-filter" => StopClass::ContentRefusal,
                "tool-calls" => StopClass::EndedWithoutAnswer,
                _ => StopClass::Unclassified,
            }),
        };
        let report = self.report.take().map(FinalReport::Text);
        self.tally.finish_with_report(out, report, stop, None)
    }

    pub fn finish(self) -> StreamSummary {
        self.finish_into(&mut Vec::new())
    }
}

/// OpenCode's texts for a tool call the permission policy refused.
fn is_permission_rejection(error: &str) -> bool {
    let lower = error.to_lowercase();
    lower.contains("rejected permission")
        || lower.contains("permission denied by")
        || lower.contains("prevents you from using")
}

fn error_signal(error: Option<&WireError>) -> ErrorSignal {
    let name = error.and_then(|e| e.name.clone());
    let data = error.and_then(|e| e.data.as_ref());
    let message = data
        .and_then(|d| d.message.clone())
        .or_else(|| name.clone())
        .unwrap_or_else(|| "unknown error".to_owned());
    let retry_after = data
        .and_then(|d| d.response_headers.as_ref())
        .and_then(|h| h.get("retry-after"))
        .and_then(|v| v.as_str())
        .map(|v| format!("retry-after: {v}"));
    let mut signal = ErrorSignal::new(ErrorSource::ErrorEvent, message);
    signal.http_status = data.and_then(|d| d.status_code);
    signal.kind = name;
    signal.retryable = data.and_then(|d| d.is_retryable);
    signal.reset_hint = retry_after.or_else(|| reset_hint(&signal.message));
    signal
}

#[cfg(test)]
mod tests {
    use super::*;

    const HAPPY: &str = include_str!("../../tests/fixtures/real-clis/opencode/happy/stdout.jsonl");

    fn run(stream: &str) -> (Vec<NormalizedEvent>, StreamSummary) {
        let mut parser = OpencodeParser::new();
        let mut events = Vec::new();
        for line in stream.lines() {
            parser.feed_line_into(line.as_bytes(), &mut events);
        }
        let summary = parser.finish_into(&mut events);
        (events, summary)
    }

    #[test]
    fn happy_usage_matches_the_mock_numbers() {
        let (events, summary) = run(HAPPY);
        let usages: Vec<Usage> = events
            .iter()
            .filter_map(|e| match e {
                NormalizedEvent::Usage { usage } => Some(*usage),
                _ => None,
            })
            .collect();
        // step 0: 1000 input of which 600 cached, 40 output of which 12 reasoning.
        assert_eq!(usages[0].input_tokens, Some(400));
        assert_eq!(usages[0].cache_read_tokens, Some(600));
        assert_eq!(usages[0].output_tokens, Some(40));
        assert_eq!(usages[0].reasoning_tokens, Some(12));
        assert_eq!(usages[1].output_tokens, Some(41));
        // Total: 2100 input of which 1210 cached, 81 output of which 25 reasoning.
        assert_eq!(summary.usage.input_tokens, Some(2100 - 1210));
        assert_eq!(summary.usage.cache_read_tokens, Some(1210));
        assert_eq!(summary.usage.cache_write_tokens, Some(0));
        assert_eq!(summary.usage.output_tokens, Some(81));
        assert_eq!(summary.usage.reasoning_tokens, Some(25));
        assert_eq!(summary.stop.class, StopClass::Completed);
        assert!(
            matches!(summary.final_report, Some(FinalReport::Text(ref t)) if t.starts_with("{\"status\": \"done\""))
        );
    }

    #[test]
    fn final_text_is_marked_only_in_the_stop_step() {
        let (events, _) = run(HAPPY);
        let texts: Vec<bool> = events
            .iter()
            .filter_map(|e| match e {
                NormalizedEvent::Text { is_final, .. } => Some(*is_final),
                _ => None,
            })
            .collect();
        assert_eq!(texts, [true]);
    }

    #[test]
    fn oversized_step_text_is_not_final_and_gives_no_report() {
        let mut parser = OpencodeParser::new();
        parser.text_cap = 10;
        let mut events = Vec::new();
        for line in [
            r#"{"type":"step_start","sessionID":"ses_1","part":{}}"#,
            r#"{"type":"text","sessionID":"ses_1","part":{"text":"0123456789"}}"#,
            r#"{"type":"text","sessionID":"ses_1","part":{"text":"abc"}}"#,
            r#"{"type":"step_finish","sessionID":"ses_1","part":{"reason":"stop"}}"#,
        ] {
            parser.feed_line_into(line.as_bytes(), &mut events);
        }
        let summary = parser.finish_into(&mut events);
        assert_eq!(summary.final_report, None);
        let finals: Vec<bool> = events
            .iter()
            .filter_map(|e| match e {
                NormalizedEvent::Text { is_final, .. } => Some(*is_final),
                _ => None,
            })
            .collect();
        assert_eq!(finals, [false, false]);
    }

    #[test]
    fn garbage_lines_are_malformed_and_the_stream_goes_on() {
        let stream = format!("not json\n\n{{\"type\":\"step_start\"\n{HAPPY}");
        let (events, summary) = run(&stream);
        assert_eq!(summary.malformed_lines, 2);
        assert_eq!(summary.first_malformed.as_ref().map(|m| m.line_no), Some(1));
        assert_eq!(summary.stop.class, StopClass::Completed);
        assert!(matches!(
            events[0],
            NormalizedEvent::Malformed { line_no: 1, .. }
        ));
    }
}
