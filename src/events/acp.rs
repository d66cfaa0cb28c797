//! What an Agent Client Protocol agent writes on stdout (`output = "acp"`, protocol version 1),
//! one JSON-RPC 2.0 message per line, into normalized events.
//!
//! Wire facts (fixtures `tests/fixtures/acp/*`): `session/update` notifications carry the
//! session's progress (`agent_message_chunk`, `agent_thought_chunk`, `tool_call`,
//! `tool_call_update`, `plan`, `usage_update`); the response holding `stopReason` ends the
//! prompt turn and may carry `usage` (OpenCode 1.18.33: `inputTokens` excludes the cached part,
//! `outputTokens` excludes `thoughtTokens`); an error response ends the stage. The agent's own
//! requests (`fs/*`, `terminal/*`, `session/request_permission`) produce no event here: autocode
//! serves them and records what it did itself (`crate::acp`).
//!
//! A tool call of kind `execute` whose command the agent ran with its own tools becomes a
//! command event with the exit code the agent reported (`rawOutput.metadata.exit` for OpenCode,
//! `rawOutput.exit_code`/`exitCode` otherwise): like every CLI's events, it is evidence only
//! where the kernel's exec ledger backs it. A tool call whose content is an autocode terminal is
//! a tool use: autocode's own command event for that terminal is the evidence.
//!
//! The final report is the agent's message text after its last tool call, when the turn ended
//! with `end_turn`. Memory: the current message and at most [`MAX_OPEN_TOOLS`] unfinished tool
//! calls are held, never the stream.

use std::collections::BTreeMap;

use serde_json::Value;

use super::common::{Tally, json_error, parse_line};
use super::stop::{Stop, StopClass};
use super::types::{
    CommandStatus, ErrorSignal, ErrorSource, EvidenceId, FileChangeKind, FinalReport,
    NormalizedEvent, StreamSummary, ToolStatus, TransportKind, Usage, excerpt,
};

/// Unfinished tool calls held at most; past it the oldest is dropped (its end is then a
/// tool call without a start, still recorded).
pub const MAX_OPEN_TOOLS: usize = 1024;

#[derive(Debug, Default, Clone)]
struct OpenTool {
    kind: Option<String>,
    title: Option<String>,
    command: Option<String>,
    started: bool,
    /// The call shows an autocode terminal: autocode ran the command.
    terminal: bool,
    path: Option<String>,
}

#[derive(Debug)]
enum Terminal {
    Nothing,
    Running,
    Ended(String),
    Error(ErrorSignal),
}

/// The ACP stream parser.
#[derive(Debug)]
pub struct AcpParser {
    tally: Tally,
    text: String,
    tools: BTreeMap<String, OpenTool>,
    /// Insertion order of `tools` (oldest first), to drop the oldest.
    order: std::collections::VecDeque<String>,
    cost_usd: Option<f64>,
    terminal: Terminal,
    report: Option<String>,
}

impl Default for AcpParser {
    fn default() -> Self {
        Self::new()
    }
}

/// A command line from a tool call's `rawInput.command` (a string, or an argv joined).
fn command_of(raw_input: &Value) -> Option<String> {
    match raw_input.get("command")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(words) => {
            let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
            (!words.is_empty()).then(|| words.join(" "))
        }
        _ => None,
    }
}

/// The exit code an agent reported for its own command.
fn reported_exit(raw_output: &Value) -> Option<i32> {
    let candidates = [
        raw_output.pointer("/metadata/exit"),
        raw_output.get("exit_code"),
        raw_output.get("exitCode"),
        raw_output.pointer("/exitStatus/exitCode"),
    ];
    candidates
        .into_iter()
        .flatten()
        .find_map(Value::as_i64)
        .and_then(|c| i32::try_from(c).ok())
}

fn text_of(content: &Value) -> Option<&str> {
    (content.get("type").and_then(Value::as_str) == Some("text"))
        .then(|| content.get("text").and_then(Value::as_str))
        .flatten()
}

/// The text of a tool call's `content` blocks (output shown to the user).
fn content_text(content: &Value) -> String {
    let mut out = String::new();
    for block in content.as_array().into_iter().flatten() {
        if let Some(text) = block.get("content").and_then(text_of) {
            out.push_str(text);
        }
    }
    out
}

fn has_terminal(content: &Value) -> bool {
    content
        .as_array()
        .into_iter()
        .flatten()
        .any(|b| b.get("type").and_then(Value::as_str) == Some("terminal"))
}

impl AcpParser {
    pub fn new() -> Self {
        Self {
            tally: Tally::new(TransportKind::Acp),
            text: String::new(),
            tools: BTreeMap::new(),
            order: std::collections::VecDeque::new(),
            cost_usd: None,
            terminal: Terminal::Nothing,
            report: None,
        }
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
        let value: Value = match parse_line(line) {
            Ok(value) => value,
            Err(e) => return self.tally.malformed(out, json_error(&e)),
        };
        if !value.is_object() || value.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return self
                .tally
                .malformed(out, "not a JSON-RPC 2.0 message".to_owned());
        }
        if matches!(self.terminal, Terminal::Nothing) {
            self.terminal = Terminal::Running;
        }
        match (value.get("method").and_then(Value::as_str), value.get("id")) {
            (Some("session/update"), None) => self.update(&value, out),
            // The agent's requests: autocode serves and records them (`crate::acp`).
            (Some(_), Some(_)) => {}
            (Some(method), None) => self.tally.unknown(out, Some(method), line),
            (None, Some(_)) => self.response(&value, out),
            (None, None) => self.tally.unknown(out, None, line),
        }
    }

    fn response(&mut self, value: &Value, out: &mut Vec<NormalizedEvent>) {
        if let Some(error) = value.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the agent answered with an error")
                .to_owned();
            let detail = error.get("data").map(|d| match d {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            let mut signal = ErrorSignal::new(
                ErrorSource::ErrorEvent,
                match detail {
                    Some(d) => format!("{message}: {d}"),
                    None => message,
                },
            );
            signal.kind = error.get("code").map(Value::to_string);
            self.tally.emit(
                out,
                NormalizedEvent::ProviderError {
                    error: signal.clone(),
                },
            );
            self.terminal = Terminal::Error(signal);
            return;
        }
        let Some(result) = value.get("result") else {
            return;
        };
        if let Some(id) = result.get("sessionId").and_then(Value::as_str) {
            self.tally.session(out, id, None);
        }
        if let Some(reason) = result.get("stopReason").and_then(Value::as_str) {
            let ended = reason == "end_turn";
            self.flush_text(out, ended);
            let usage = result.get("usage").map(usage_of).unwrap_or_default();
            let usage = Usage {
                cost_usd: self.cost_usd.take(),
                ..usage
            };
            if !usage.is_empty() {
                self.tally.emit(out, NormalizedEvent::Usage { usage });
            }
            self.terminal = Terminal::Ended(reason.to_owned());
        }
    }

    fn update(&mut self, value: &Value, out: &mut Vec<NormalizedEvent>) {
        let params = value.get("params").unwrap_or(&Value::Null);
        if let Some(id) = params.get("sessionId").and_then(Value::as_str) {
            self.tally.session(out, id, None);
        }
        let update = params.get("update").unwrap_or(&Value::Null);
        let kind = update.get("sessionUpdate").and_then(Value::as_str);
        match kind {
            Some("agent_message_chunk") => {
                if let Some(text) = update.get("content").and_then(text_of) {
                    self.text.push_str(text);
                }
            }
            Some("agent_thought_chunk") => {
                if let Some(text) = update.get("content").and_then(text_of) {
                    self.tally.emit(
                        out,
                        NormalizedEvent::Reasoning {
                            text: text.to_owned(),
                        },
                    );
                }
            }
            Some("tool_call") | Some("tool_call_update") => self.tool(update, out),
            Some("plan") => {
                let entries: Vec<String> = update
                    .get("entries")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|e| {
                        let content = e.get("content").and_then(Value::as_str)?;
                        let status = e.get("status").and_then(Value::as_str).unwrap_or("?");
                        Some(format!("[{status}] {content}"))
                    })
                    .collect();
                self.tally.emit(
                    out,
                    NormalizedEvent::Notice {
                        message: format!("plan: {}", entries.join("; ")),
                    },
                );
            }
            Some("usage_update") => {
                // The session's cumulative cost: the last one before the turn's end counts.
                let cost = update.get("cost");
                if cost
                    .and_then(|c| c.get("currency"))
                    .and_then(Value::as_str)
                    .is_some_and(|c| c.eq_ignore_ascii_case("USD"))
                {
                    self.cost_usd = cost.and_then(|c| c.get("amount")).and_then(Value::as_f64);
                }
            }
            // Echoes of the prompt and session metadata: nothing to record.
            Some(
                "user_message_chunk"
                | "available_commands_update"
                | "current_mode_update"
                | "config_option_update"
                | "session_info_update",
            ) => {}
            other => {
                let raw = value.to_string();
                self.tally.unknown(out, other, raw.as_bytes());
            }
        }
    }

    fn tool(&mut self, update: &Value, out: &mut Vec<NormalizedEvent>) {
        let Some(id) = update.get("toolCallId").and_then(Value::as_str) else {
            let raw = update.to_string();
            return self
                .tally
                .unknown(out, Some("tool_call without toolCallId"), raw.as_bytes());
        };
        // Text before a tool call is not the final answer.
        self.flush_text(out, false);
        if !self.tools.contains_key(id) {
            if self.tools.len() >= MAX_OPEN_TOOLS
                && let Some(oldest) = self.order.pop_front()
            {
                self.tools.remove(&oldest);
            }
            self.order.push_back(id.to_owned());
        }
        let tool = self.tools.entry(id.to_owned()).or_default();
        if let Some(kind) = update.get("kind").and_then(Value::as_str) {
            tool.kind = Some(kind.to_owned());
        }
        if let Some(title) = update.get("title").and_then(Value::as_str) {
            tool.title = Some(title.to_owned());
        }
        if let Some(command) = update.get("rawInput").and_then(command_of) {
            tool.command = Some(command);
        }
        if let Some(path) = update
            .pointer("/locations/0/path")
            .and_then(Value::as_str)
            .or_else(|| update.pointer("/rawInput/filePath").and_then(Value::as_str))
            .or_else(|| {
                update
                    .pointer("/rawInput/file_path")
                    .and_then(Value::as_str)
            })
        {
            tool.path = Some(path.to_owned());
        }
        if update.get("content").is_some_and(has_terminal) {
            tool.terminal = true;
        }
        let evidence_id = EvidenceId::from_provider_id(id);
        let is_shell = tool.kind.as_deref() == Some("execute") && !tool.terminal;
        if is_shell
            && !tool.started
            && let Some(command) = &tool.command
        {
            tool.started = true;
            let event = NormalizedEvent::CommandStarted {
                evidence_id: evidence_id.clone(),
                command: command.clone(),
            };
            self.tally.emit(out, event);
        }
        let Some(tool) = self.tools.get(id).cloned() else {
            return;
        };
        let status = update.get("status").and_then(Value::as_str);
        if !matches!(status, Some("completed" | "failed")) {
            return;
        }
        self.tools.remove(id);
        self.order.retain(|t| t != id);
        let failed = status == Some("failed");
        if is_shell && let Some(command) = tool.command {
            let exit_code = update.get("rawOutput").and_then(reported_exit);
            let status = match (exit_code, failed) {
                (Some(0), _) => CommandStatus::Succeeded,
                (Some(_), _) => CommandStatus::Failed,
                (None, false) => CommandStatus::Ended,
                (None, true) => CommandStatus::Unknown,
            };
            let output = update
                .get("content")
                .map(content_text)
                .filter(|t| !t.is_empty())
                .or_else(|| {
                    update
                        .pointer("/rawOutput/output")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_default();
            self.tally.emit(
                out,
                NormalizedEvent::CommandFinished {
                    evidence_id,
                    command,
                    exit_code,
                    status,
                    output_bytes: output.len() as u64,
                    output_excerpt: excerpt(&output),
                },
            );
            return;
        }
        let name = tool
            .kind
            .clone()
            .or(tool.title.clone())
            .unwrap_or_else(|| "tool".to_owned());
        if !failed
            && matches!(tool.kind.as_deref(), Some("edit" | "delete" | "move"))
            && let Some(path) = tool.path
        {
            let kind = match tool.kind.as_deref() {
                Some("delete") => FileChangeKind::Delete,
                _ => FileChangeKind::Write,
            };
            self.tally
                .emit(out, NormalizedEvent::FileChange { path, kind });
        }
        self.tally.emit(
            out,
            NormalizedEvent::ToolUse {
                evidence_id,
                tool: name,
                status: if failed {
                    ToolStatus::Failed
                } else {
                    ToolStatus::Completed
                },
                error: failed.then(|| content_text(update.get("content").unwrap_or(&Value::Null))),
            },
        );
    }

    /// Emits the held message text; `last` marks it as the turn's final answer (the report).
    fn flush_text(&mut self, out: &mut Vec<NormalizedEvent>, last: bool) {
        if self.text.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.text);
        if last {
            self.report = Some(text.clone());
        }
        self.tally.emit(
            out,
            NormalizedEvent::Text {
                text,
                is_final: last,
            },
        );
    }

    /// End of stream: flush held text, decide the stop and hand back the summary.
    pub fn finish_into(mut self, out: &mut Vec<NormalizedEvent>) -> StreamSummary {
        self.flush_text(out, false);
        let stop = match &self.terminal {
            Terminal::Nothing => Stop::new(self.tally.nothing_stop()),
            Terminal::Running => Stop::new(StopClass::CutStream),
            Terminal::Error(signal) => Stop::from_signal(signal),
            Terminal::Ended(reason) => Stop::new(match reason.as_str() {
                "end_turn" => StopClass::Completed,
                "max_tokens" => StopClass::OutputCap,
                "refusal" => StopClass::ContentRefusal,
                "max_turn_requests" => StopClass::EndedWithoutAnswer,
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

/// ACP's (unstable) `usage` of a prompt response in the normalized convention.
fn usage_of(usage: &Value) -> Usage {
    let field = |name: &str| usage.get(name).and_then(Value::as_u64);
    let thought = field("thoughtTokens");
    Usage {
        input_tokens: field("inputTokens"),
        cache_read_tokens: field("cachedReadTokens"),
        cache_write_tokens: field("cachedWriteTokens"),
        // Normalized output includes reasoning.
        output_tokens: match (field("outputTokens"), thought) {
            (None, None) => None,
            (o, t) => Some(o.unwrap_or(0).saturating_add(t.unwrap_or(0))),
        },
        reasoning_tokens: thought,
        cost_usd: None,
        cost_source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::StreamParser;

    fn parse(stream: &str) -> (Vec<NormalizedEvent>, StreamSummary) {
        let mut parser = AcpParser::new();
        let mut out = Vec::new();
        for line in stream.lines() {
            StreamParser::feed_line_into(&mut parser, line.as_bytes(), &mut out);
        }
        let summary = StreamParser::finish_into(parser, &mut out);
        (out, summary)
    }

    #[test]
    fn an_agent_command_keeps_its_reported_exit_and_the_last_text_is_the_report() {
        let stream = concat!(
            r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"ses_1"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Running it."}}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","kind":"execute","status":"pending","rawInput":{}}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"in_progress","rawInput":{"command":"make test"}}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed","rawOutput":{"output":"ok\n","metadata":{"exit":2}}}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"{\"status\":"}}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\"done\"}"}}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_1","update":{"sessionUpdate":"usage_update","used":10,"size":100,"cost":{"amount":0.25,"currency":"USD"}}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","usage":{"inputTokens":5,"outputTokens":3,"thoughtTokens":1,"cachedReadTokens":7,"totalTokens":16}}}"#,
            "\n",
        );
        let (events, summary) = parse(stream);
        assert_eq!(summary.stop.class, StopClass::Completed);
        assert_eq!(summary.session_id.as_deref(), Some("ses_1"));
        assert_eq!(summary.malformed_lines, 0);
        assert_eq!(summary.unknown_lines, 0);
        assert_eq!(
            summary.final_report,
            Some(FinalReport::Text(r#"{"status":"done"}"#.into()))
        );
        assert_eq!(summary.usage.input_tokens, Some(5));
        assert_eq!(summary.usage.output_tokens, Some(4));
        assert_eq!(summary.usage.reasoning_tokens, Some(1));
        assert_eq!(summary.usage.cost_usd, Some(0.25));
        let finished = events
            .iter()
            .find_map(|e| match e {
                NormalizedEvent::CommandFinished {
                    evidence_id,
                    command,
                    exit_code,
                    status,
                    ..
                } => Some((evidence_id.as_str(), command.as_str(), *exit_code, *status)),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            finished,
            ("event:c1", "make test", Some(2), CommandStatus::Failed)
        );
        assert!(events.contains(&NormalizedEvent::Text {
            text: "Running it.".into(),
            is_final: false
        }));
    }

    #[test]
    fn a_terminal_tool_call_is_not_a_command_event_and_errors_stop_the_stage() {
        let stream = concat!(
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t1","kind":"execute","status":"in_progress","rawInput":{"command":"ls"},"content":[{"type":"terminal","terminalId":"term-1"}]}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","rawOutput":{"exit_code":0}}}}"#,
            "\n",
            "not json\n",
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Internal error","data":"429 rate limit exceeded"}}"#,
            "\n",
        );
        let (events, summary) = parse(stream);
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, NormalizedEvent::CommandFinished { .. })),
            "{events:?}"
        );
        assert!(
            events
                .iter()
                .any(|e| matches!(e, NormalizedEvent::ToolUse { tool, .. } if tool == "execute"))
        );
        assert_eq!(summary.malformed_lines, 1);
        assert_eq!(summary.stop.class, StopClass::RateLimit);
        assert_eq!(summary.final_report, None);
    }

    #[test]
    fn a_turn_that_did_not_end_normally_has_no_report() {
        let stream = concat!(
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"{\"a\":1"}}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"max_tokens"}}"#,
            "\n",
        );
        let (_, summary) = parse(stream);
        assert_eq!(summary.stop.class, StopClass::OutputCap);
        assert_eq!(summary.final_report, None);
        let (_, cut) = parse(
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}"#,
        );
        assert_eq!(cut.stop.class, StopClass::CutStream);
    }
}
