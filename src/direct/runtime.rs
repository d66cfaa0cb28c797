//! The direct runtime's loop for one stage: a fresh context holding the stage's prompt, then
//! model response → tool calls → results, until the model submits a valid `report`, a bound is
//! reached or the endpoint fails.
//!
//! The loop runs in autocode's own process: the API key never enters the agent's room, and the
//! event log is written by autocode alone from what autocode executed — a command's output goes
//! to the model as a tool result and nowhere else, so nothing a command prints or writes can
//! become a command event. Every executed command is a `command_finished` event with autocode's
//! own id (`event:ac-N`) and the exit code the boundary saw.
//!
//! Bounds ([`Bounds`]): model responses per stage, tool calls per response, the requested
//! response cap, the time per tool call; the stage's token budget and time limit still apply
//! (the caller bounds the whole loop in time).
//!
//! Steering ([`Steering`]), so that a small model finishes: every request requires a tool call
//! (a text answer is never a report), every tool result tells the model how many responses
//! remain, and the last response — or the one after a prose answer — can only be the report: the
//! `report` tool alone, or, where the server constrains an answer to a JSON schema, the report
//! schema as the answer's format. A streamed prose answer is not read to its end: past
//! [`PROSE_CUT_CHARS`] without a tool call autocode stops reading (closing the connection, so
//! the server stops generating) and asks for the report; so it does once the model repeats the
//! same calls with the same results ([`RepeatWatch`]). Each request's response cap is cut to
//! what the server's context still holds, measured on the request itself. An answer that is only a shell command
//! is not prose: the model is told autocode did not run it and keeps every tool, so it can run
//! it through the shell tool.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::http::{Cancel, Client, HttpFailure};
use super::protocol::{
    Exchange, Protocol, ProtocolError, RequestParams, StopReason, TokenField, ToolChoice,
    ToolResult, Turn, stream, usage_of,
};
use super::tools::{self, ShellContext};
use crate::events::{
    CommandStatus, EvidenceId, FileChangeKind, FinalReport, NormalizedEvent, ToolStatus, Usage,
};
use crate::report::{self, ReportKind};
use crate::supervise::Exit;

/// The runtime's bounds (the reference's numbers by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub max_responses: u32,
    pub max_calls_per_response: usize,
    pub max_output_tokens: u32,
    pub tool_timeout: Duration,
}

/// What the endpoint offers to steer a model towards a valid report (detected by the caller from
/// what the server says, never assumed from its kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Steering {
    /// Require a tool call in every response (`tool_choice`; part of all three APIs).
    pub require_tool: bool,
    /// The server constrains an answer to a JSON schema (llama.cpp's `/props` answered, vLLM
    /// listed the model): the forced report is asked as an answer in the report's schema.
    pub answer_schema: bool,
    /// The context the server runs the model with, in tokens, when it said.
    pub context: Option<u64>,
}

/// Bytes per token assumed when measuring a request against the context: lower than any
/// tokenizer's average on English, code and JSON (3.5 to 4.5), so the estimate errs high.
pub const BYTES_PER_TOKEN: u64 = 3;
/// The smallest response cap worth a request: below it the context is full.
pub const MIN_RESPONSE_TOKENS: u64 = 512;

/// The response cap of an endpoint that sets none (`connections setup --max-output-tokens`).
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_responses: 32,
            max_calls_per_response: 8,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            tool_timeout: Duration::from_secs(90),
        }
    }
}

/// Everything one stage's loop needs.
#[derive(Debug, Clone)]
pub struct StageInput {
    pub client: Client,
    pub protocol: Protocol,
    pub token_field: TokenField,
    /// Ask for streamed responses.
    pub stream: bool,
    pub model: String,
    pub system: String,
    pub prompt: String,
    pub kind: ReportKind,
    /// What autocode listed that the report may quote ([`Quotable`]): the report schema the
    /// model is offered (the `report` tool, the constrained answer) lists it as those fields'
    /// only values ([`offered_schema`]), so a server that holds tool arguments to their schema
    /// (llama.cpp's grammar) makes every quote verbatim by construction.
    pub quotable: Quotable,
    /// Whether the role may write its tree (`write_file`; the room decides for `shell`).
    pub writable: bool,
    /// The tree file tools work in (the tester's copy, else the work tree).
    pub root: PathBuf,
    pub shell: ShellContext,
    pub bounds: Bounds,
    pub steering: Steering,
    /// Tokens the run may still spend (`--max-tokens`), if bounded.
    pub tokens_left: Option<u64>,
    /// Where the normalized events are written as JSON lines.
    pub events_log: PathBuf,
    /// Prefix of the boundary labels (`stage 003-builder-1`).
    pub label: String,
}

/// Why a stage stopped without a report: each becomes a typed pause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectFailure {
    #[error(transparent)]
    Http(#[from] HttpFailure),
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error("the model asked for {calls} tool calls in one response; at most {max} are allowed")]
    ToolFlood { calls: usize, max: usize },
    #[error(
        "the model used all {0} model responses of the stage without submitting a valid report"
    )]
    ResponseLimit(u32),
    #[error("the response hit the {0}-token response cap")]
    OutputCap(u32),
    #[error(
        "the conversation (about {used} tokens) leaves less than {MIN_RESPONSE_TOKENS} tokens for a response in the server's {context}-token context"
    )]
    ContextFull { used: u64, context: u64 },
    #[error("the provider's content filter stopped the response")]
    ContentFilter,
    #[error("the stage went over the run's --max-tokens")]
    Budget,
    #[error("the boundary could not run a command: {0}")]
    Boundary(String),
    #[error("the boundary could not verify that every process of `{0}` is gone")]
    Unverified(String),
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq)]
pub enum StageEnd {
    /// A report that validated against the role's schema (evidence is judged by the caller).
    Reported(Value),
    /// The model stopped answering with tools and never reported (repairable).
    NoReport(String),
    /// The model's last answer was a shell command written as its report (`{"cmd": …}`), which
    /// autocode did not run: the CLIs' shell-command final message (`problem`; `command`: the
    /// command as its JSON object), repairable once and a repeated failure after.
    ShellCommand {
        problem: String,
        command: String,
    },
    Failed(DirectFailure),
}

/// What the loop did.
#[derive(Debug, Clone)]
pub struct StageRun {
    pub events: Vec<NormalizedEvent>,
    /// The boundary's receipt of every command, by its evidence id.
    pub receipts: Vec<(EvidenceId, crate::supervise::Receipt)>,
    pub usage: Usage,
    pub responses: u32,
    pub end: StageEnd,
}

struct EventLog {
    events: Vec<NormalizedEvent>,
    file: Option<std::io::BufWriter<std::fs::File>>,
}

impl EventLog {
    fn push(&mut self, event: NormalizedEvent) {
        if let Some(file) = self.file.as_mut()
            && serde_json::to_writer(&mut *file, &event).is_ok()
        {
            let _ = file.write_all(b"\n");
            let _ = file.flush();
        }
        self.events.push(event);
    }
}

fn total_tokens(usage: &Usage) -> u64 {
    [
        usage.input_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.output_tokens,
    ]
    .into_iter()
    .flatten()
    .sum()
}

/// Runs one stage to its end.
pub async fn run_stage(input: StageInput) -> StageRun {
    let mut log = EventLog {
        events: Vec::new(),
        file: std::fs::File::create(&input.events_log)
            .ok()
            .map(std::io::BufWriter::new),
    };
    let report_schema = offered_schema(input.kind, &input.quotable);
    let mut specs = tools::tool_specs(input.kind, input.writable);
    for spec in specs.iter_mut().filter(|t| t.name == tools::REPORT) {
        spec.parameters = report_schema.clone();
    }
    let report_only: Vec<_> = specs
        .iter()
        .filter(|t| t.name == tools::REPORT)
        .cloned()
        .collect();
    let system = format!(
        "{}\n\n{}",
        input.system,
        budget_line(input.bounds.max_responses)
    );
    let mut exchange = Exchange::new(input.protocol, &input.prompt);
    let mut usage = Usage::default();
    let mut responses = 0u32;
    let mut commands = 0u32;
    let mut idle_turns = 0u32;
    // The last response without a tool call was prose (not a shell command).
    let mut after_prose = false;
    // The model went round in circles: from then on every response must be the report.
    let mut repeats = RepeatWatch::default();
    let mut repeating = false;
    let mut receipts = Vec::new();
    let end = loop {
        if responses >= input.bounds.max_responses {
            break StageEnd::Failed(DirectFailure::ResponseLimit(input.bounds.max_responses));
        }
        // The last response, the one after a prose answer, and every one after the model
        // repeated itself can only be the report.
        let must_report = input.bounds.max_responses - responses == 1 || after_prose || repeating;
        let answer_schema = must_report
            && input.steering.answer_schema
            && input.protocol != Protocol::AnthropicMessages;
        let mut params = RequestParams {
            model: &input.model,
            system: &system,
            tools: match (must_report, answer_schema) {
                (_, true) => &[],
                (true, false) => &report_only,
                (false, false) => &specs,
            },
            max_output_tokens: input.bounds.max_output_tokens,
            token_field: input.token_field,
            stream: input.stream,
            tool_choice: if input.steering.require_tool {
                ToolChoice::Required
            } else {
                ToolChoice::Unset
            },
            answer_schema: answer_schema.then_some(&report_schema),
        };
        if let Some(context) = input.steering.context {
            let measured = exchange.request_body(&params).to_string().len() as u64;
            let used = measured.div_ceil(BYTES_PER_TOKEN);
            let room = context.saturating_sub(used);
            if room < MIN_RESPONSE_TOKENS {
                break StageEnd::Failed(DirectFailure::ContextFull { used, context });
            }
            params.max_output_tokens = params
                .max_output_tokens
                .min(u32::try_from(room).unwrap_or(u32::MAX));
        }
        let cap = params.max_output_tokens;
        let body = exchange.request_body(&params);
        let client = input.client.clone();
        let path = input.protocol.path();
        // The read runs on a blocking thread: if this stage is dropped (its time limit, a stop
        // signal) the guard cancels it, so the server stops generating and the process can exit.
        let cancel = Cancel::new();
        let _cancel_on_drop = cancel.on_drop();
        // A streamed text answer that runs on is cut ([`stream::ProseWatch`]); never the report
        // asked as an answer in its schema.
        let watch_prose = input.stream && !answer_schema;
        let protocol = input.protocol;
        let (answer, watch) = tokio::task::spawn_blocking(move || {
            if watch_prose {
                let mut watch = stream::ProseWatch::new(protocol, PROSE_CUT_CHARS);
                let reply =
                    client.post_json_watched(path, &body, &cancel, &mut |piece| watch.feed(piece));
                (reply, Some(watch))
            } else {
                (client.post_json_cancellable(path, &body, &cancel), None)
            }
        })
        .await
        .unwrap_or_else(|e| {
            let failure = HttpFailure::Transport(format!("the request task failed: {e}"));
            (Err(failure), None)
        });
        responses += 1;
        let reply = match answer {
            Ok(reply) => reply,
            Err(failure) => {
                log.push(NormalizedEvent::ProviderError {
                    error: provider_error(&failure),
                });
                break StageEnd::Failed(failure.into());
            }
        };
        if reply.cut {
            // Prose past the cut: what it said is kept in the events, but the history holds only
            // its opening (a small model copies its own rambling into the report it is asked for
            // next: measured with the 1.5B model, a report `summary` of 2,400 characters of one
            // repeated sentence); its usage is unknown (a stream's usage comes at its end); the
            // next response can only be the report.
            let said = watch.as_ref().map(|w| w.text()).unwrap_or_default();
            let chars = watch.as_ref().map_or(0, |w| w.text_chars());
            log.push(NormalizedEvent::Text {
                text: said.to_owned(),
                is_final: false,
            });
            log.push(NormalizedEvent::Notice {
                message: format!(
                    "autocode stopped reading the model's text answer after {chars} characters without a tool call (a text answer is never a report)"
                ),
            });
            idle_turns += 1;
            after_prose = true;
            if idle_turns >= 2 {
                break StageEnd::NoReport(
                    "the model answered in text twice without calling the `report` tool".into(),
                );
            }
            exchange.push_assistant_text(&opening(said));
            exchange.push_user_text(&format!(
                "{CUT_REMINDER}\n\n{}",
                remaining_note(input.bounds.max_responses - responses)
            ));
            continue;
        }
        let parsed = if reply.event_stream {
            exchange.parse_stream(&reply.body)
        } else {
            exchange.parse_response(&reply.body)
        };
        let turn = match parsed {
            Ok(turn) => turn,
            Err(e) => {
                let failed = if reply.event_stream {
                    stream::assemble(input.protocol, &String::from_utf8_lossy(&reply.body))
                        .map(|body| usage_of(input.protocol, body.to_string().as_bytes()))
                        .unwrap_or_default()
                } else {
                    usage_of(input.protocol, &reply.body)
                };
                if !failed.is_empty() {
                    usage = usage.add(&failed);
                    log.push(NormalizedEvent::Usage { usage: failed });
                }
                log.push(NormalizedEvent::ProviderError {
                    error: crate::events::ErrorSignal::new(
                        crate::events::ErrorSource::Direct,
                        e.to_string(),
                    ),
                });
                break StageEnd::Failed(e.into());
            }
        };
        usage = usage.add(&turn.usage);
        record_turn(&mut log, &turn);
        if input
            .tokens_left
            .is_some_and(|left| total_tokens(&usage) > left)
        {
            break StageEnd::Failed(DirectFailure::Budget);
        }
        match turn.stop {
            StopReason::Length => {
                break StageEnd::Failed(DirectFailure::OutputCap(cap));
            }
            StopReason::ContentFilter => break StageEnd::Failed(DirectFailure::ContentFilter),
            StopReason::EndTurn | StopReason::ToolCalls => {}
        }
        if turn.calls.len() > input.bounds.max_calls_per_response {
            break StageEnd::Failed(DirectFailure::ToolFlood {
                calls: turn.calls.len(),
                max: input.bounds.max_calls_per_response,
            });
        }
        exchange.push_turn(&turn);
        if answer_schema && turn.calls.is_empty() {
            // The report asked as an answer in its schema: the answer's text is the report.
            let tool_id = EvidenceId::from_provider_id(&format!("ac-answer-{responses}"));
            let answer = turn.text.as_deref().unwrap_or_default();
            let checked = serde_json::from_str::<Value>(answer)
                .map_err(|e| format!("the answer is not JSON: {e}"))
                .and_then(|report| {
                    report::validate(input.kind, &report)
                        .map(|()| report)
                        .map_err(|rejection| rejection.to_string())
                });
            match checked {
                Ok(report) => {
                    log.push(tool_event(tool_id, tools::REPORT, None));
                    log.push(NormalizedEvent::FinalReport {
                        report: FinalReport::Structured(report.clone()),
                    });
                    break StageEnd::Reported(report);
                }
                Err(problem) => {
                    let problem = format!("the report was not accepted: {problem}");
                    log.push(tool_event(tool_id, tools::REPORT, Some(&problem)));
                    idle_turns += 1;
                    after_prose = true;
                    if idle_turns >= 2 {
                        break StageEnd::NoReport(problem);
                    }
                    exchange.push_user_text(&format!(
                        "{problem}\n\n{}",
                        remaining_note(input.bounds.max_responses - responses)
                    ));
                    continue;
                }
            }
        }
        if turn.calls.is_empty() {
            idle_turns += 1;
            let shell_command = shell_command_answer(turn.text.as_deref(), input.kind);
            after_prose = shell_command.is_none();
            if idle_turns >= 2 {
                break match shell_command {
                    Some(rejection) => StageEnd::ShellCommand {
                        problem: format!(
                            "the model ended its turn twice without calling the `report` tool, the last time with {rejection}; it was not run"
                        ),
                        command:
                            serde_json::json!({ rejection.key.clone(): rejection.command.clone() })
                                .to_string(),
                    },
                    None => StageEnd::NoReport(
                        "the model ended its turn twice without calling the `report` tool".into(),
                    ),
                };
            }
            exchange.push_user_text(&format!(
                "{}\n\n{}",
                reminder_after_text(turn.text.as_deref(), input.kind),
                remaining_note(input.bounds.max_responses - responses)
            ));
            continue;
        }
        idle_turns = 0;
        after_prose = false;
        let mut results = Vec::with_capacity(turn.calls.len());
        let mut ended = None;
        for call in &turn.calls {
            let result = |output: String, is_error: bool| ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                output,
                is_error,
            };
            let tool_id = EvidenceId::from_provider_id(&format!("ac-tool-{}", call.id));
            match call.name.as_str() {
                tools::SHELL => {
                    let command = match tools::str_arg(&call.arguments, "command") {
                        Ok(c) => c.to_owned(),
                        Err(e) => {
                            results.push(result(e, true));
                            continue;
                        }
                    };
                    commands += 1;
                    let evidence_id = EvidenceId::from_provider_id(&format!("ac-{commands}"));
                    log.push(NormalizedEvent::CommandStarted {
                        evidence_id: evidence_id.clone(),
                        command: command.clone(),
                    });
                    let label = format!("{} command {commands}", input.label);
                    let run = match tools::run_shell(&input.shell, label, &command).await {
                        Ok(run) => run,
                        Err(e) => {
                            ended = Some(StageEnd::Failed(DirectFailure::Boundary(e.to_string())));
                            break;
                        }
                    };
                    let verified = run.receipt.verified;
                    receipts.push((evidence_id.clone(), run.receipt.clone()));
                    if !verified {
                        ended = Some(StageEnd::Failed(DirectFailure::Unverified(command)));
                        break;
                    }
                    let (exit_code, status, exit_text) = match run.exit {
                        Exit::Code(0) => {
                            (Some(0), CommandStatus::Succeeded, "exit code 0".to_owned())
                        }
                        Exit::Code(c) => (Some(c), CommandStatus::Failed, format!("exit code {c}")),
                        Exit::Signal(s) => (
                            None,
                            CommandStatus::Unknown,
                            format!("killed by signal {s}"),
                        ),
                        Exit::TimedOut => (
                            None,
                            CommandStatus::Unknown,
                            format!(
                                "timed out after {} s and was killed",
                                input.shell.timeout.as_secs()
                            ),
                        ),
                    };
                    let excerpt: String = run.output.chars().take(2000).collect();
                    log.push(NormalizedEvent::CommandFinished {
                        evidence_id: evidence_id.clone(),
                        command,
                        exit_code,
                        status,
                        output_excerpt: excerpt,
                        output_bytes: run.output_bytes,
                    });
                    let mut answer = format!(
                        "event id: {evidence_id}\n{exit_text}\noutput:\n{}",
                        run.output
                    );
                    if !input.writable
                        && exit_code != Some(0)
                        && steering::refused_a_write(&run.output)
                    {
                        answer = format!("{answer}\n{}", steering::READ_ONLY_NOTE);
                    }
                    results.push(result(answer, exit_code != Some(0)));
                }
                tools::READ_FILE => {
                    let read = tools::str_arg(&call.arguments, "path")
                        .and_then(|p| tools::read_file(&input.root, p));
                    log.push(tool_event(tool_id, tools::READ_FILE, read.as_ref().err()));
                    results.push(match read {
                        Ok(text) => result(text, false),
                        Err(e) => result(e, true),
                    });
                }
                tools::WRITE_FILE => {
                    let written = tools::str_arg(&call.arguments, "path").and_then(|p| {
                        let content = tools::str_arg(&call.arguments, "content")?;
                        tools::write_file(&input.root, input.writable, p, content).map(|e| (p, e))
                    });
                    log.push(tool_event(
                        tool_id,
                        tools::WRITE_FILE,
                        written.as_ref().err(),
                    ));
                    results.push(match written {
                        Ok((path, existed)) => {
                            log.push(NormalizedEvent::FileChange {
                                path: path.to_owned(),
                                kind: if existed {
                                    FileChangeKind::Update
                                } else {
                                    FileChangeKind::Add
                                },
                            });
                            result(format!("wrote {path}"), false)
                        }
                        Err(e) => result(e, true),
                    });
                }
                tools::REPORT => match report::validate(input.kind, &call.arguments) {
                    Ok(()) => {
                        log.push(tool_event(tool_id, tools::REPORT, None));
                        log.push(NormalizedEvent::FinalReport {
                            report: FinalReport::Structured(call.arguments.clone()),
                        });
                        ended = Some(StageEnd::Reported(call.arguments.clone()));
                        break;
                    }
                    Err(rejection) => {
                        let problem = format!("the report was not accepted: {rejection}");
                        log.push(tool_event(tool_id, tools::REPORT, Some(&problem)));
                        results.push(result(problem, true));
                    }
                },
                other => {
                    let problem = format!("there is no tool `{other}`");
                    log.push(tool_event(tool_id, other, Some(&problem)));
                    results.push(result(problem, true));
                }
            }
        }
        if let Some(end) = ended {
            break end;
        }
        if repeats.repeated(&turn.calls, &results) && !repeating {
            repeating = true;
            log.push(NormalizedEvent::Notice {
                message: format!(
                    "the model repeated the same calls with the same results {} times; its next response can only be the report",
                    steering::REPEATS_BEFORE_REPORT
                ),
            });
        }
        if let Some(last) = results.last_mut() {
            let note = if repeating {
                steering::REPEAT_NOTE.to_owned()
            } else {
                remaining_note(input.bounds.max_responses - responses)
            };
            last.output = format!("{}\n\n{note}", last.output);
        }
        exchange.push_results(&results);
    };
    if let Some(mut file) = log.file.take() {
        let _ = file.flush();
    }
    StageRun {
        events: log.events,
        receipts,
        usage,
        responses,
        end,
    }
}

/// The usage recorded in a stage's events log (`usage` events summed): what a stage spent when
/// its loop was stopped before it ended (the time limit) and gave no [`StageRun`]. Unreadable
/// lines are skipped; a field no event carried stays unknown.
pub fn usage_in_events_log(path: &std::path::Path) -> Usage {
    let Ok(file) = std::fs::File::open(path) else {
        return Usage::default();
    };
    let mut usage = Usage::default();
    for line in std::io::BufRead::lines(std::io::BufReader::new(file)).map_while(Result::ok) {
        if let Ok(NormalizedEvent::Usage { usage: spent }) = serde_json::from_str(&line) {
            usage = usage.add(&spent);
        }
    }
    usage
}

fn record_turn(log: &mut EventLog, turn: &Turn) {
    if let Some(text) = &turn.reasoning {
        log.push(NormalizedEvent::Reasoning { text: text.clone() });
    }
    if let Some(text) = &turn.text {
        log.push(NormalizedEvent::Text {
            text: text.clone(),
            is_final: false,
        });
    }
    if !turn.usage.is_empty() {
        log.push(NormalizedEvent::Usage { usage: turn.usage });
    }
}

fn tool_event(evidence_id: EvidenceId, tool: &str, error: Option<&String>) -> NormalizedEvent {
    NormalizedEvent::ToolUse {
        evidence_id,
        tool: tool.to_owned(),
        status: if error.is_some() {
            ToolStatus::Failed
        } else {
            ToolStatus::Completed
        },
        error: error.cloned(),
    }
}

fn provider_error(failure: &HttpFailure) -> crate::events::ErrorSignal {
    let mut signal =
        crate::events::ErrorSignal::new(crate::events::ErrorSource::Direct, failure.to_string());
    match failure {
        HttpFailure::RateLimited { retry_after, .. } => {
            signal.http_status = Some(429);
            signal.reset_hint = retry_after.clone();
        }
        HttpFailure::Server { status, .. }
        | HttpFailure::Client { status, .. }
        | HttpFailure::Redirect { status, .. } => signal.http_status = Some(*status),
        _ => {}
    }
    signal
}

mod steering;
#[cfg(test)]
mod steering_tests;

pub use steering::{
    CUT_REMINDER, PROSE_CUT_CHARS, Quotable, REPORT_REMINDER, RepeatWatch, budget_line,
    offered_schema, remaining_note, reminder_after_text,
};
use steering::{opening, shell_command_answer};

#[cfg(test)]
mod tests {
    use super::*;

    /// A stage stopped by its time limit keeps what its events recorded as spent.
    #[test]
    fn the_usage_of_a_stopped_stage_is_read_back_from_its_events() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events.jsonl");
        let spent = |input, output| NormalizedEvent::Usage {
            usage: Usage {
                input_tokens: Some(input),
                output_tokens: Some(output),
                ..Usage::default()
            },
        };
        let lines = [
            serde_json::to_string(&spent(2159, 35)).unwrap(),
            "{not json".to_owned(),
            serde_json::to_string(&NormalizedEvent::Notice {
                message: "n".into(),
            })
            .unwrap(),
            serde_json::to_string(&spent(400, 12)).unwrap(),
        ];
        std::fs::write(&log, lines.join("\n")).unwrap();
        let usage = usage_in_events_log(&log);
        assert_eq!(usage.input_tokens, Some(2559));
        assert_eq!(usage.output_tokens, Some(47));
        assert_eq!(
            usage.cache_read_tokens, None,
            "never sent: unknown, not zero"
        );
        assert_eq!(
            usage_in_events_log(&dir.path().join("absent.jsonl")),
            Usage::default()
        );
    }
}
