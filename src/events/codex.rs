//! Codex's `exec --json` stream (0.169.0) into normalized events.
//!
//! Wire facts (fixtures `codex/*`): `thread.started` carries the session id; commands are
//! `command_execution` items with `exit_code` and `status`; `turn.completed.usage` is
//! CUMULATIVE per thread (`input_tokens` includes cached input, `output_tokens` includes
//! reasoning), so a call's usage is the difference from the thread's previous total;
//! `error` lines `Reconnecting... n/m (…)` are the CLI's own retries; `turn.failed` ends a failed
//! turn; the "Model metadata … not found" error item appears in every run and is harmless.
//! The report is the `-o` file (empty after `turn.failed`), else the last `agent_message`.
//!
//! Memory: the last agent message is held (to mark it final at `turn.completed`), nothing else.

use std::borrow::Cow;

use super::codex_wire::{WireItem, WireLine, WireUsage, parse_wire_line};
use super::common::{LenientStr, Tally, exit_code, json_error};
use super::stop::{Stop, StopClass, http_status_in_text, reset_hint};
use super::types::{
    CodexThreadTotals, CommandStatus, ErrorSignal, ErrorSource, EvidenceId, FileChangeKind,
    FinalReport, NormalizedEvent, OUTPUT_EXCERPT_CAP, StreamSummary, ToolStatus, TransportKind,
    Usage, excerpt,
};

#[derive(Debug)]
enum Terminal {
    Nothing,
    InTurn,
    Completed,
    Failed(ErrorSignal),
}

/// Streaming parser for Codex's JSON events.
#[derive(Debug)]
pub struct CodexParser {
    tally: Tally,
    /// The thread's cumulative totals so far (the previous call's, then each turn's).
    totals: Option<CodexThreadTotals>,
    totals_changed: bool,
    /// The last agent message, not yet known to be final.
    pending_message: Option<String>,
    /// The last agent message of the last completed turn.
    last_final_message: Option<String>,
    report_file: Option<Vec<u8>>,
    terminal: Terminal,
}

impl Default for CodexParser {
    fn default() -> Self {
        Self::new(None)
    }
}

impl CodexParser {
    /// `previous_total`: the thread's totals after its previous call (from the previous
    /// summary's `codex_thread_totals`), `None` for a new thread.
    pub fn new(previous_total: Option<CodexThreadTotals>) -> CodexParser {
        CodexParser {
            tally: Tally::new(TransportKind::Codex),
            totals: previous_total,
            totals_changed: false,
            pending_message: None,
            last_final_message: None,
            report_file: None,
            terminal: Terminal::Nothing,
        }
    }

    /// The contents of the `-o` file, read by the caller after the process exited.
    pub fn set_report_file(&mut self, contents: &[u8]) {
        self.report_file = Some(contents.to_vec());
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
        let mut wire: WireLine = match parse_wire_line(line) {
            Ok(wire) => wire,
            Err(error) => return self.tally.malformed(out, json_error(&error)),
        };
        match wire.kind.as_ref() {
            "thread.started" => {
                if let Some(id) = wire.thread_id.as_deref() {
                    self.tally.session(out, id, None);
                }
            }
            "turn.started" => {
                self.flush_message(out, false);
                self.terminal = Terminal::InTurn;
            }
            "turn.completed" => {
                let message = self.pending_message.clone();
                self.flush_message(out, true);
                self.last_final_message = message;
                if let Some(usage) = wire.usage {
                    self.turn_usage(*usage, out);
                }
                self.terminal = Terminal::Completed;
            }
            "turn.failed" => {
                self.flush_message(out, false);
                let message = wire
                    .error
                    .as_ref()
                    .and_then(|e| e.message.as_deref())
                    .unwrap_or("turn failed");
                let signal = signal(ErrorSource::TurnFailed, message);
                self.tally.emit(
                    out,
                    NormalizedEvent::ProviderError {
                        error: signal.clone(),
                    },
                );
                self.terminal = Terminal::Failed(signal);
            }
            "error" => {
                let message = wire.message.as_deref().unwrap_or("");
                if let Some(retry) = reconnecting(message) {
                    self.tally.emit(out, retry);
                } else {
                    self.tally.emit(
                        out,
                        NormalizedEvent::ProviderError {
                            error: signal(ErrorSource::ErrorEvent, message),
                        },
                    );
                }
            }
            "item.started" | "item.completed" => {
                let completed = wire.kind == "item.completed";
                match &mut wire.item {
                    Some(item) => self.item(item, completed, line, out),
                    None => self
                        .tally
                        .malformed(out, format!("{} without item", wire.kind)),
                }
            }
            // Progress updates of items that also complete (todo lists, streaming output).
            "item.updated" => {}
            other => self.tally.unknown(out, Some(other), line),
        }
    }

    fn flush_message(&mut self, out: &mut Vec<NormalizedEvent>, is_final: bool) {
        if let Some(text) = self.pending_message.take() {
            self.tally
                .emit(out, NormalizedEvent::Text { text, is_final });
        }
    }

    fn turn_usage(&mut self, wire: WireUsage, out: &mut Vec<NormalizedEvent>) {
        let now = CodexThreadTotals {
            input_tokens: wire.input_tokens.unwrap_or(0),
            cached_input_tokens: wire.cached_input_tokens.unwrap_or(0),
            cache_write_input_tokens: wire.cache_write_input_tokens.unwrap_or(0),
            output_tokens: wire.output_tokens.unwrap_or(0),
            reasoning_output_tokens: wire.reasoning_output_tokens.unwrap_or(0),
        };
        let before = self.totals.unwrap_or_default();
        let delta = |now: u64, before: u64| now.saturating_sub(before);
        let cached = delta(now.cached_input_tokens, before.cached_input_tokens);
        let cache_write = delta(
            now.cache_write_input_tokens,
            before.cache_write_input_tokens,
        );
        let input = delta(now.input_tokens, before.input_tokens);
        let usage = Usage {
            // Codex's input includes the cached part; the normalized one excludes cache reads
            // and writes.
            input_tokens: wire
                .input_tokens
                .map(|_| input.saturating_sub(cached).saturating_sub(cache_write)),
            cache_read_tokens: wire.cached_input_tokens.map(|_| cached),
            cache_write_tokens: wire.cache_write_input_tokens.map(|_| cache_write),
            output_tokens: wire
                .output_tokens
                .map(|_| delta(now.output_tokens, before.output_tokens)),
            reasoning_tokens: wire
                .reasoning_output_tokens
                .map(|_| delta(now.reasoning_output_tokens, before.reasoning_output_tokens)),
            cost_usd: None,
            cost_source: None,
        };
        self.totals = Some(now);
        self.totals_changed = true;
        self.tally.emit(out, NormalizedEvent::Usage { usage });
    }

    fn item(
        &mut self,
        item: &mut WireItem,
        completed: bool,
        raw: &[u8],
        out: &mut Vec<NormalizedEvent>,
    ) {
        let kind = item.kind.as_deref().unwrap_or("");
        let evidence_id = EvidenceId::from_provider_id(item.id.as_deref().unwrap_or("unknown"));
        if kind != "agent_message" && completed {
            // Anything after an agent message means that message was not the last.
            self.flush_message(out, false);
        }
        match (kind, completed) {
            ("command_execution", false) => self.tally.emit(
                out,
                NormalizedEvent::CommandStarted {
                    evidence_id,
                    command: take(&mut item.command),
                },
            ),
            ("command_execution", true) => {
                let exit = exit_code(item.exit_code);
                let status = match (item.status.as_deref().unwrap_or(""), exit) {
                    ("declined", _) => CommandStatus::Denied,
                    ("completed", Some(0)) => CommandStatus::Succeeded,
                    ("completed" | "failed", Some(_)) => CommandStatus::Failed,
                    _ => CommandStatus::Unknown,
                };
                let command = take(&mut item.command);
                if status == CommandStatus::Denied {
                    self.tally.emit(
                        out,
                        NormalizedEvent::PermissionDenied {
                            tool: "exec_command".to_owned(),
                            evidence_id: Some(evidence_id.clone()),
                            message: format!("declined: {command}"),
                        },
                    );
                }
                let output = item.aggregated_output.0.take().unwrap_or_default();
                let output_bytes = output.len() as u64;
                // An output within the cap is kept whole: moved when serde_json already owns it
                // (it had escapes), else copied once.
                let output_excerpt = if output.len() <= OUTPUT_EXCERPT_CAP {
                    output.into_owned()
                } else {
                    excerpt(&output)
                };
                self.tally.emit(
                    out,
                    NormalizedEvent::CommandFinished {
                        evidence_id,
                        command,
                        exit_code: if status == CommandStatus::Unknown
                            || status == CommandStatus::Denied
                        {
                            None
                        } else {
                            exit
                        },
                        status,
                        output_excerpt,
                        output_bytes,
                    },
                );
            }
            ("agent_message", true) => {
                self.flush_message(out, false);
                self.pending_message = Some(take(&mut item.text));
            }
            ("reasoning", true) => {
                if let Some(text) = item.text.0.take() {
                    self.tally.emit(
                        out,
                        NormalizedEvent::Reasoning {
                            text: text.into_owned(),
                        },
                    );
                }
            }
            ("file_change", true) => {
                let failed = item.status.as_deref() == Some("failed");
                for change in item.changes.iter().flatten() {
                    let Some(path) = change.path.as_deref() else {
                        continue;
                    };
                    if failed {
                        continue;
                    }
                    let kind = match change.kind.as_deref() {
                        Some("add") => FileChangeKind::Add,
                        Some("delete") => FileChangeKind::Delete,
                        Some("update") => FileChangeKind::Update,
                        _ => FileChangeKind::Write,
                    };
                    self.tally.emit(
                        out,
                        NormalizedEvent::FileChange {
                            path: path.to_owned(),
                            kind,
                        },
                    );
                }
            }
            ("error", true) => {
                let message = item.message.as_deref().unwrap_or("");
                if message.starts_with("Model metadata for") {
                    self.tally.emit(
                        out,
                        NormalizedEvent::Notice {
                            message: message.to_owned(),
                        },
                    );
                } else {
                    self.tally.emit(
                        out,
                        NormalizedEvent::ProviderError {
                            error: signal(ErrorSource::ErrorEvent, message),
                        },
                    );
                }
            }
            ("mcp_tool_call" | "web_search" | "todo_list", true) => {
                let status = match item.status.as_deref() {
                    Some("failed") => ToolStatus::Failed,
                    _ => ToolStatus::Completed,
                };
                self.tally.emit(
                    out,
                    NormalizedEvent::ToolUse {
                        evidence_id,
                        tool: item.tool.as_deref().unwrap_or(kind).to_owned(),
                        status,
                        error: None,
                    },
                );
            }
            (_, false) => {}
            (other, true) => self.tally.unknown(out, Some(other), raw),
        }
    }

    pub fn finish_into(mut self, out: &mut Vec<NormalizedEvent>) -> StreamSummary {
        self.flush_message(out, false);
        let (stop, report) = match &self.terminal {
            Terminal::Nothing => (Stop::new(self.tally.nothing_stop()), None),
            Terminal::InTurn => (Stop::new(StopClass::CutStream), None),
            // After turn.failed the -o file is empty and no message is the report.
            Terminal::Failed(signal) => (Stop::from_signal(signal), None),
            Terminal::Completed => {
                let from_file = self
                    .report_file
                    .as_deref()
                    .filter(|b| !b.trim_ascii().is_empty())
                    .map(|b| String::from_utf8_lossy(b).into_owned());
                (
                    Stop::new(StopClass::Completed),
                    from_file.or_else(|| self.last_final_message.take()),
                )
            }
        };
        let report = report.map(FinalReport::Text);
        let totals = self.totals_changed.then_some(self.totals).flatten();
        self.tally.finish_with_report(out, report, stop, totals)
    }

    pub fn finish(self) -> StreamSummary {
        self.finish_into(&mut Vec::new())
    }
}

/// A kept string field: moved out when serde_json had to unescape it (it owns it), else copied
/// once; absent or not a string is empty.
fn take(field: &mut LenientStr) -> String {
    field.0.take().map(Cow::into_owned).unwrap_or_default()
}

fn signal(source: ErrorSource, message: &str) -> ErrorSignal {
    let mut signal = ErrorSignal::new(source, message);
    signal.http_status = http_status_in_text(message);
    signal.reset_hint = reset_hint(message);
    signal
}

/// `Reconnecting... 2/5 (reason)` or `Reconnecting... waiting for network (reason)`.
fn reconnecting(message: &str) -> Option<NormalizedEvent> {
    let rest = message.strip_prefix("Reconnecting...")?.trim_start();
    let (counter, reason) = match rest.split_once(" (") {
        Some((counter, reason)) => (counter, reason.strip_suffix(')').unwrap_or(reason)),
        None => (rest, ""),
    };
    let (attempt, max_retries) = match counter.split_once('/') {
        Some((a, m)) => (a.trim().parse().ok(), m.trim().parse().ok()),
        None => (None, None),
    };
    Some(NormalizedEvent::Retry {
        attempt,
        max_retries,
        http_status: http_status_in_text(reason),
        message: message.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HAPPY: &str = include_str!("../../tests/fixtures/real-clis/codex/happy/stdout.jsonl");
    const RESUME: &str = include_str!("../../tests/fixtures/real-clis/codex/resume/stdout.jsonl");

    fn run(stream: &str, previous: Option<CodexThreadTotals>) -> StreamSummary {
        let mut parser = CodexParser::new(previous);
        let mut events = Vec::new();
        for line in stream.lines() {
            parser.feed_line_into(line.as_bytes(), &mut events);
        }
        parser.finish_into(&mut events)
    }

    #[test]
    fn usage_is_normalized_and_differenced_per_call() {
        let first = run(HAPPY, None);
        // 2100 input of which 1210 cached; 81 output of which 25 reasoning.
        assert_eq!(first.usage.input_tokens, Some(890));
        assert_eq!(first.usage.cache_read_tokens, Some(1210));
        assert_eq!(first.usage.output_tokens, Some(81));
        assert_eq!(first.usage.reasoning_tokens, Some(25));
        assert_eq!(first.usage.cost_usd, None);
        // The resumed call reports the thread's cumulative 4200; its own share is 2100.
        let second = run(RESUME, first.codex_thread_totals);
        assert_eq!(second.usage, first.usage);
        assert_eq!(
            second.codex_thread_totals.map(|t| t.input_tokens),
            Some(4200)
        );
        // Without the previous total the cumulative number would be taken whole.
        assert_eq!(run(RESUME, None).usage.input_tokens, Some(4200 - 2420));
    }

    #[test]
    fn reconnecting_lines_are_retries() {
        let Some(NormalizedEvent::Retry {
            attempt,
            max_retries,
            http_status,
            ..
        }) = reconnecting(
            "Reconnecting... 3/5 (exceeded retry limit, last status: 429 Too Many Requests)",
        )
        else {
            panic!("expected a retry");
        };
        assert_eq!(
            (attempt, max_retries, http_status),
            (Some(3), Some(5), Some(429))
        );
        assert!(matches!(
            reconnecting(
                "Reconnecting... waiting for network (Connection failed: error sending request)"
            ),
            Some(NormalizedEvent::Retry { attempt: None, .. })
        ));
        assert!(reconnecting("exceeded retry limit").is_none());
    }

    #[test]
    fn report_file_wins_and_empty_file_falls_back() {
        let mut parser = CodexParser::new(None);
        for line in HAPPY.lines() {
            parser.feed_line(line.as_bytes());
        }
        parser.set_report_file(b"{\"from\":\"file\"}");
        let summary = parser.finish();
        assert_eq!(
            summary.final_report,
            Some(FinalReport::Text("{\"from\":\"file\"}".into()))
        );
        let mut parser = CodexParser::new(None);
        for line in HAPPY.lines() {
            parser.feed_line(line.as_bytes());
        }
        parser.set_report_file(b"");
        assert!(
            matches!(parser.finish().final_report, Some(FinalReport::Text(t)) if t.starts_with("{\"status\": \"done\""))
        );
    }
}
