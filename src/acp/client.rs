//! One stage as an ACP client: `initialize` (protocol version 1, advertising `fs` and
//! `terminal`), `session/new` in the stage's directory — or, for a same-stage repair, the
//! earlier attempt's session continued with `session/resume` or `session/load`
//! ([`Continuation`]) — one `session/prompt` with the stage's prompt, the agent's requests
//! served meanwhile ([`super::serve`]), `session/cancel` at the end, then stdin is closed.
//!
//! The history an agent replays while it answers `session/load` (its `session/update`
//! notifications before the load's answer) is handed over as [`Feed::Replayed`], never as a
//! line of this attempt's stream: what an earlier attempt did is no event of this one.
//!
//! Every line the agent writes is handed to the caller first (its parser makes the events and
//! the summary: `crate::events::AcpParser`); what autocode itself did — each terminal's
//! command, file requests, refused permissions — is handed over as [`Feed::Served`] events.
//! Lines are read with a cap ([`crate::events::read_line_capped`]); a line that is not JSON-RPC
//! is the parser's malformed line and is otherwise ignored.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::serve::{self, Files, RpcError, TerminalEnd, Terminals};
use crate::direct::tools::ShellContext;
use crate::events::{self, CommandStatus, EvidenceId, LiveLine, NormalizedEvent, excerpt};
use crate::supervise::{Exit, IdleHolder, LedgerEntry, Receipt, StageStdin, StageStdout};

/// The protocol version autocode speaks.
pub const PROTOCOL_VERSION: u64 = 1;

const INITIALIZE: u64 = 0;
const SESSION_NEW: u64 = 1;
const PROMPT: u64 = 2;
const SET_MODEL: u64 = 3;
const SESSION_CONTINUE: u64 = 4;

/// How an earlier session is continued, by what the agent's `initialize` answer advertises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continuation {
    /// `session/resume` (`agentCapabilities.sessionCapabilities.resume`): the session goes on
    /// without its history being sent again. Preferred.
    Resume,
    /// `session/load` (`agentCapabilities.loadSession`): the agent replays the whole history
    /// as `session/update` notifications before it answers.
    Load,
}

impl Continuation {
    /// What the agent's `initialize` answer (`result`) offers, `session/resume` first.
    pub fn offered(initialize: &Value) -> Option<Self> {
        let caps = initialize.get("agentCapabilities")?;
        if caps
            .pointer("/sessionCapabilities/resume")
            .is_some_and(|v| !v.is_null())
        {
            return Some(Continuation::Resume);
        }
        (caps.get("loadSession").and_then(Value::as_bool) == Some(true))
            .then_some(Continuation::Load)
    }

    /// The JSON-RPC method (also the name recorded in `acp.json`).
    pub fn method(self) -> &'static str {
        match self {
            Continuation::Resume => "session/resume",
            Continuation::Load => "session/load",
        }
    }
}

/// One stage's ACP session.
#[derive(Debug, Clone)]
pub struct AcpStage {
    /// The session's working directory (the stage's tree): `session/new`'s `cwd`, the root of
    /// file requests and terminals.
    pub cwd: PathBuf,
    pub prompt: String,
    /// The session to continue (a same-stage repair of an earlier attempt), else a new one.
    pub resume: Option<String>,
    /// The route's model, selected through the session's `model` option (or `session/set_model`)
    /// when the agent offers one.
    pub model: Option<String>,
    /// Whether the role may write its tree (file writes, the permission policy).
    pub writable: bool,
    /// How terminals run: the stage's room, the agents' environment, a time bound.
    pub shell: ShellContext,
    /// Prefix of the boundary labels (`stage 003-builder-1`).
    pub label: String,
    /// The longest line handed over; a longer one is [`Feed::Oversized`].
    pub max_line: usize,
    /// Where autocode's own messages to the agent are logged (JSON lines), if anywhere.
    pub client_log: Option<PathBuf>,
    /// The agent's idle timer, held while a terminal's command runs (the agent waits silently
    /// on it; the command's own time bound applies).
    pub idle: Option<IdleHolder>,
    /// How long the agent may send nothing while none of its terminals runs before the session
    /// is given up ([`AcpEnd::silent`]); `None`: no bound.
    pub silence: Option<Duration>,
}

/// What the caller is handed, in order.
#[derive(Debug)]
pub enum Feed<'a> {
    /// A line the agent wrote (without its newline).
    Line(&'a [u8]),
    /// A line longer than the cap, discarded.
    Oversized(u64),
    /// Something autocode did for the agent.
    Served(NormalizedEvent),
    /// A `session/update` the agent sent while answering `session/load`: the earlier
    /// attempts' history replayed, no part of this attempt's stream (record it apart or drop
    /// it; never parse it into this attempt's events).
    Replayed(&'a [u8]),
}

/// What the session left behind.
#[derive(Debug, Default)]
pub struct AcpEnd {
    /// The agent answered the prompt (with any stop reason).
    pub prompt_answered: bool,
    /// The agent's `initialize` answer (its name, version and capabilities).
    pub agent: Option<Value>,
    /// The session's id, once `session/new` (or the continuation) answered.
    pub session: Option<String>,
    /// How an earlier session was continued (`None`: a new session).
    pub continued: Option<Continuation>,
    /// The `session/update` notifications replayed during `session/load` (handed over as
    /// [`Feed::Replayed`]).
    pub replayed_updates: u32,
    /// How the route's model was selected (`config_option`, `set_model`, `current`, or
    /// `not_selectable`: the agent offers no choice and runs its own configuration).
    pub model_selection: Option<&'static str>,
    pub terminals_created: u32,
    pub file_requests: u32,
    /// Every terminal command's receipt, by its evidence id.
    pub receipts: Vec<(EvidenceId, Receipt)>,
    /// The kernel's exec ledger of every terminal command (their `seq` moved past the agent's).
    pub ledger: Vec<LedgerEntry>,
    /// A terminal whose family the boundary could not prove gone.
    pub unverified: Vec<String>,
    /// Why the session could not go on (a wrong protocol version, a lost stdin).
    pub failure: Option<String>,
    /// The agent sent nothing for this long while none of its terminals ran, and the session
    /// was given up ([`AcpStage::silence`]): it stopped making progress.
    pub silent: Option<Duration>,
    /// The agent closed its stdout (it is exiting); otherwise autocode ended the session while
    /// the agent still listened (an ACP agent is a server: neither pinned agent exits when its
    /// stdin closes, measured).
    pub stream_closed: bool,
}

/// How often a session bounded by [`AcpStage::silence`] looks whether its terminals still run.
const TERMINAL_POLL: Duration = Duration::from_millis(500);

/// Where a terminal's ledger entries start, so they never collide with the agent's own.
pub const TERMINAL_SEQ_BASE: u64 = 1 << 40;
/// The `seq` room of one terminal.
const TERMINAL_SEQ_SPAN: u64 = 1 << 24;

enum Incoming {
    Line(Vec<u8>),
    Oversized(u64),
}

/// Runs the session to its end (prompt answered, stream closed, or a protocol failure).
pub async fn drive(
    stage: AcpStage,
    stdin: StageStdin,
    stdout: StageStdout,
    mut on: impl FnMut(Feed<'_>),
) -> AcpEnd {
    let mut end = AcpEnd::default();
    let (lines_tx, mut lines) = mpsc::channel::<Incoming>(64);
    let max_line = stage.max_line;
    let reader = tokio::spawn(async move {
        let mut reader = tokio::io::BufReader::with_capacity(1 << 16, stdout);
        let mut line = Vec::new();
        loop {
            let item = match events::read_line_capped(&mut reader, &mut line, max_line).await {
                Ok(LiveLine::End) | Err(_) => break,
                Ok(LiveLine::Complete) => Incoming::Line(std::mem::take(&mut line)),
                Ok(LiveLine::Oversized { bytes }) => Incoming::Oversized(bytes),
            };
            if lines_tx.send(item).await.is_err() {
                break;
            }
        }
    });
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(write_messages(stdin, out_rx, stage.client_log.clone()));
    let send = |message: Value| {
        let _ = out_tx.send(message);
    };
    let (ended_tx, mut ended) = mpsc::unbounded_channel::<Arc<TerminalEnd>>();
    let mut terminals = Terminals::new(stage.shell.clone(), stage.label.clone(), ended_tx)
        .holding(stage.idle.clone());
    let mut files = Files::new(stage.cwd.clone(), stage.writable);
    // Which tool call shows which terminal (the agent's id is the evidence id the model sees).
    let mut owners: std::collections::BTreeMap<String, String> = Default::default();
    let mut session: Option<String> = None;
    let mut replaying = false;
    let mut heard = tokio::time::Instant::now();
    send(
        json!({"jsonrpc": "2.0", "id": INITIALIZE, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true},
            "clientInfo": {"name": "autocode", "version": env!("CARGO_PKG_VERSION")},
        }}),
    );
    loop {
        // A terminal's end becomes autocode's command event when the agent is about to learn
        // of it (its `wait_for_exit` is answered, or `output` shows the exit), never before:
        // the agent's updates up to its asking (the tool call that shows the terminal) are
        // read first, and whatever it writes after the answer comes after the event. An end
        // the agent already waits for is made an event at once.
        // The silence bound counts from the last line or terminal end, never while a
        // terminal's command runs (the agent waits on it without a word).
        let quiet = stage.silence.filter(|_| !terminals.running());
        let incoming = tokio::select! {
            biased;
            Some(done) = ended.recv() => {
                if let Some(done) = terminals.arrived(done) {
                    on(Feed::Served(terminal_event(&done, &owners, &mut end)));
                    terminals.publish(done);
                }
                heard = tokio::time::Instant::now();
                continue;
            }
            line = lines.recv() => match line {
                Some(line) => line,
                None => {
                    end.stream_closed = true;
                    break;
                }
            },
            () = tokio::time::sleep_until(heard + quiet.unwrap_or_default()), if quiet.is_some() => {
                end.silent = quiet;
                break;
            }
            // A terminal that ends is announced on `ended`; look again meanwhile, so the
            // bound starts once none runs.
            () = tokio::time::sleep(TERMINAL_POLL), if quiet.is_none() && stage.silence.is_some() => {
                continue;
            }
        };
        heard = tokio::time::Instant::now();
        let line = match incoming {
            Incoming::Oversized(bytes) => {
                on(Feed::Oversized(bytes));
                continue;
            }
            Incoming::Line(line) => line,
        };
        let message = serde_json::from_slice::<Value>(&line).ok();
        // While `session/load` is answered, the agent's updates are the earlier history.
        if replaying
            && message.as_ref().is_some_and(|m| {
                m.get("id").is_none()
                    && m.get("method").and_then(Value::as_str) == Some("session/update")
            })
        {
            end.replayed_updates += 1;
            on(Feed::Replayed(&line));
            continue;
        }
        on(Feed::Line(&line));
        let Some(message) = message else {
            continue;
        };
        note_terminal_owners(&message, &mut owners);
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").cloned();
        match (method, id) {
            (Some(method), Some(id)) => {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                if method.starts_with("terminal/")
                    && let Some(done) = terminals.take_held(&params)
                {
                    on(Feed::Served(terminal_event(&done, &owners, &mut end)));
                    terminals.publish(done);
                }
                let (reply, served) = match method {
                    "fs/read_text_file" => {
                        end.file_requests += 1;
                        files.read(&params)
                    }
                    "fs/write_text_file" => {
                        end.file_requests += 1;
                        files.write(&params)
                    }
                    "session/request_permission" => serve::permission(stage.writable, &params),
                    "terminal/create" => (terminals.create(&params).await, Vec::new()),
                    "terminal/output" => (terminals.output(&params), Vec::new()),
                    "terminal/kill" => (terminals.kill(&params), Vec::new()),
                    "terminal/release" => (terminals.release(&params), Vec::new()),
                    "terminal/wait_for_exit" => match terminals.wait_for_exit(&params) {
                        Ok(waiting) => {
                            let out = out_tx.clone();
                            tokio::spawn(async move {
                                let _ = out.send(answer(id, waiting.await));
                            });
                            continue;
                        }
                        Err(e) => (Err(e), Vec::new()),
                    },
                    other => (
                        Err(RpcError {
                            code: RpcError::METHOD_NOT_FOUND,
                            message: format!("autocode does not serve `{other}`"),
                        }),
                        Vec::new(),
                    ),
                };
                for event in served {
                    on(Feed::Served(event));
                }
                send(answer(id, reply));
            }
            (Some(_), None) => {}
            (None, Some(id)) => {
                let failed = message.get("error").is_some();
                match id.as_u64() {
                    Some(INITIALIZE) if !failed => {
                        let result = message.get("result").cloned().unwrap_or(Value::Null);
                        let version = result.get("protocolVersion").and_then(Value::as_u64);
                        end.agent = Some(result);
                        if version != Some(PROTOCOL_VERSION) {
                            end.failure = Some(format!(
                                "the agent speaks ACP protocol version {}, autocode speaks {PROTOCOL_VERSION}",
                                version.map_or("(none)".to_owned(), |v| v.to_string())
                            ));
                            break;
                        }
                        match &stage.resume {
                            None => send(
                                json!({"jsonrpc": "2.0", "id": SESSION_NEW, "method": "session/new",
                                "params": {"cwd": stage.cwd, "mcpServers": []}}),
                            ),
                            Some(earlier) => {
                                let agent = end.agent.as_ref().unwrap_or(&Value::Null);
                                let Some(how) = Continuation::offered(agent) else {
                                    end.failure = Some(format!(
                                        "the agent offers neither session/resume nor session/load, so session {earlier} cannot be continued"
                                    ));
                                    break;
                                };
                                end.continued = Some(how);
                                replaying = how == Continuation::Load;
                                send(json!({"jsonrpc": "2.0", "id": SESSION_CONTINUE,
                                    "method": how.method(),
                                    "params": {"sessionId": earlier, "cwd": stage.cwd, "mcpServers": []}}));
                            }
                        }
                    }
                    Some(SESSION_NEW | SESSION_CONTINUE) if !failed => {
                        replaying = false;
                        // A continued session keeps its id (`session/load` answers without one).
                        let id = match (&stage.resume, message.pointer("/result/sessionId")) {
                            (_, Some(Value::String(id))) => id.clone(),
                            (Some(earlier), None) => earlier.clone(),
                            _ => {
                                end.failure =
                                    Some("session/new answered without a sessionId".into());
                                break;
                            }
                        };
                        let id = id.as_str();
                        session = Some(id.to_owned());
                        end.session = Some(id.to_owned());
                        let result = message.get("result").unwrap_or(&Value::Null);
                        match select_model(id, stage.model.as_deref(), result) {
                            Ok((how, Some(request))) => {
                                end.model_selection = Some(how);
                                send(request);
                            }
                            Ok((how, None)) => {
                                end.model_selection = Some(how);
                                send(prompt_request(id, &stage.prompt));
                            }
                            Err(failure) => {
                                end.failure = Some(failure);
                                break;
                            }
                        }
                    }
                    Some(SET_MODEL) => {
                        if let Some(error) = message.get("error") {
                            end.failure = Some(format!(
                                "the agent refused the route's model: {}",
                                error.get("message").and_then(Value::as_str).unwrap_or("?")
                            ));
                            break;
                        }
                        if let Some(id) = &session {
                            send(prompt_request(id, &stage.prompt));
                        }
                    }
                    Some(PROMPT) => {
                        end.prompt_answered = !failed;
                        break;
                    }
                    Some(SESSION_CONTINUE) => {
                        let how = end.continued.map_or("session/load", Continuation::method);
                        end.failure = Some(format!(
                            "the agent could not continue session {} ({how}): {}",
                            stage.resume.as_deref().unwrap_or("?"),
                            message
                                .pointer("/error/message")
                                .and_then(Value::as_str)
                                .unwrap_or("?")
                        ));
                        break;
                    }
                    // A failed initialize or session/new: the parser recorded the error.
                    Some(INITIALIZE | SESSION_NEW) => break,
                    _ => {}
                }
            }
            (None, None) => {}
        }
    }
    if let Some(session) = &session {
        send(json!({"jsonrpc": "2.0", "method": "session/cancel",
            "params": {"sessionId": session}}));
    }
    terminals.shut_down().await;
    while let Ok(done) = ended.try_recv() {
        if let Some(done) = terminals.arrived(done) {
            on(Feed::Served(terminal_event(&done, &owners, &mut end)));
        }
    }
    for done in terminals.take_all_held() {
        on(Feed::Served(terminal_event(&done, &owners, &mut end)));
    }
    end.terminals_created = terminals.created();
    drop(out_tx);
    // The writer closes stdin once it has written what was queued (session/cancel).
    if writer.await.ok() == Some(false) && end.failure.is_none() && !end.prompt_answered {
        end.failure = Some("the agent's stdin closed early".into());
    }
    reader.abort();
    end
}

fn prompt_request(session: &str, prompt: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": PROMPT, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": prompt}]}})
}

/// How the route's `model` is selected in a new session (`result`: `session/new`'s answer):
/// its name and the request to send first, if any. A model the agent's list does not offer is
/// a failure, never a silent run on another model.
pub fn select_model(
    session: &str,
    model: Option<&str>,
    result: &Value,
) -> Result<(&'static str, Option<Value>), String> {
    let Some(model) = model else {
        return Ok(("not_selectable", None));
    };
    let option = result
        .get("configOptions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|o| {
            o.get("category").and_then(Value::as_str) == Some("model")
                || o.get("id").and_then(Value::as_str) == Some("model")
        });
    if let Some(option) = option {
        if option.get("currentValue").and_then(Value::as_str) == Some(model) {
            return Ok(("current", None));
        }
        let offered: Vec<&str> = option
            .get("options")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|o| o.get("value").and_then(Value::as_str))
            .collect();
        if !offered.contains(&model) {
            return Err(format!(
                "the agent does not offer the route's model `{model}` ({} offered)",
                offered.len()
            ));
        }
        let config_id = option.get("id").and_then(Value::as_str).unwrap_or("model");
        return Ok((
            "config_option",
            Some(
                json!({"jsonrpc": "2.0", "id": SET_MODEL, "method": "session/set_config_option",
                "params": {"sessionId": session, "configId": config_id, "value": model}}),
            ),
        ));
    }
    if let Some(models) = result.get("models") {
        if models.get("currentModelId").and_then(Value::as_str) == Some(model) {
            return Ok(("current", None));
        }
        let offered = models
            .get("availableModels")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|m| m.get("modelId").and_then(Value::as_str) == Some(model));
        if !offered {
            return Err(format!(
                "the agent does not offer the route's model `{model}`"
            ));
        }
        return Ok((
            "set_model",
            Some(
                json!({"jsonrpc": "2.0", "id": SET_MODEL, "method": "session/set_model",
                "params": {"sessionId": session, "modelId": model}}),
            ),
        ));
    }
    Ok(("not_selectable", None))
}

fn answer(id: Value, result: Result<Value, RpcError>) -> Value {
    match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": e.code, "message": e.message}}),
    }
}

/// Writes each message as one line; returns whether every write succeeded.
async fn write_messages(
    mut stdin: StageStdin,
    mut messages: mpsc::UnboundedReceiver<Value>,
    log: Option<PathBuf>,
) -> bool {
    let mut log = match log {
        Some(path) => tokio::fs::File::create(path).await.ok(),
        None => None,
    };
    let mut ok = true;
    while let Some(message) = messages.recv().await {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        if let Some(file) = log.as_mut() {
            let _ = file.write_all(&line).await;
        }
        if ok && stdin.write_all(&line).await.is_err() {
            ok = false;
        }
    }
    if let Some(mut file) = log {
        let _ = file.flush().await;
    }
    ok
}

/// Remembers which tool call shows which terminal.
fn note_terminal_owners(message: &Value, owners: &mut std::collections::BTreeMap<String, String>) {
    if message.get("method").and_then(Value::as_str) != Some("session/update") {
        return;
    }
    let Some(update) = message.pointer("/params/update") else {
        return;
    };
    let Some(call) = update.get("toolCallId").and_then(Value::as_str) else {
        return;
    };
    for block in update
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if block.get("type").and_then(Value::as_str) == Some("terminal")
            && let Some(terminal) = block.get("terminalId").and_then(Value::as_str)
        {
            owners
                .entry(terminal.to_owned())
                .or_insert_with(|| call.to_owned());
        }
    }
}

/// autocode's own command event for a terminal that ended (its id: the tool call that shows
/// the terminal, else the terminal's), with its receipt and ledger kept in `end`.
fn terminal_event(
    done: &TerminalEnd,
    owners: &std::collections::BTreeMap<String, String>,
    end: &mut AcpEnd,
) -> NormalizedEvent {
    let evidence_id = EvidenceId::from_provider_id(
        owners
            .get(&done.terminal_id)
            .map_or(done.terminal_id.as_str(), String::as_str),
    );
    let run = match &done.run {
        Ok(run) => run,
        Err(e) => {
            return NormalizedEvent::CommandFinished {
                evidence_id,
                command: done.command.clone(),
                exit_code: None,
                status: CommandStatus::Unknown,
                output_excerpt: excerpt(e),
                output_bytes: 0,
            };
        }
    };
    let index = done.number();
    let base = TERMINAL_SEQ_BASE + index * TERMINAL_SEQ_SPAN;
    end.ledger
        .extend(run.ledger.iter().cloned().map(|mut entry| {
            entry.seq += base;
            entry
        }));
    end.receipts
        .push((evidence_id.clone(), run.receipt.clone()));
    if !run.receipt.verified {
        end.unverified.push(done.command.clone());
    }
    let (exit_code, status) = match run.exit {
        Exit::Code(0) => (Some(0), CommandStatus::Succeeded),
        Exit::Code(c) => (Some(c), CommandStatus::Failed),
        Exit::Signal(_) | Exit::TimedOut => (None, CommandStatus::Unknown),
    };
    NormalizedEvent::CommandFinished {
        evidence_id,
        command: done.command.clone(),
        exit_code,
        status,
        output_excerpt: excerpt(&run.output),
        output_bytes: run.output_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_continued_as_the_agent_offers() {
        // Both pinned agents (fixtures `acp/*/004-builder-1`) offer both: resume, no replay.
        let both = json!({"agentCapabilities": {"loadSession": true,
            "sessionCapabilities": {"fork": {}, "list": {}, "resume": {}}}});
        assert_eq!(Continuation::offered(&both), Some(Continuation::Resume));
        let load = json!({"agentCapabilities": {"loadSession": true}});
        assert_eq!(Continuation::offered(&load), Some(Continuation::Load));
        for none in [
            json!({"agentCapabilities": {"loadSession": false, "sessionCapabilities": {}}}),
            json!({"agentCapabilities": {"sessionCapabilities": {"resume": null}}}),
            json!({}),
        ] {
            assert_eq!(Continuation::offered(&none), None, "{none}");
        }
    }

    #[test]
    fn the_routes_model_is_selected_or_the_session_fails() {
        // OpenCode: a `model` config option.
        let opencode = json!({"configOptions": [{"id": "model", "category": "model",
            "currentValue": "mock/a", "options": [{"value": "mock/a"}, {"value": "mock/b"}]}]});
        assert_eq!(
            select_model("s", Some("mock/a"), &opencode).unwrap(),
            ("current", None)
        );
        let (how, request) = select_model("s", Some("mock/b"), &opencode).unwrap();
        assert_eq!(how, "config_option");
        assert_eq!(
            request.unwrap()["params"],
            json!({"sessionId": "s", "configId": "model", "value": "mock/b"})
        );
        assert!(select_model("s", Some("other/c"), &opencode).is_err());
        // Claude Code's adapter: a model list.
        let claude = json!({"models": {"currentModelId": "default",
            "availableModels": [{"modelId": "default"}, {"modelId": "opus"}]}});
        let (how, request) = select_model("s", Some("opus"), &claude).unwrap();
        assert_eq!(how, "set_model");
        assert_eq!(request.unwrap()["method"], "session/set_model");
        assert!(select_model("s", Some("gpt-9"), &claude).is_err());
        // No choice offered: the agent's own configuration, said so.
        assert_eq!(
            select_model("s", Some("x"), &json!({})).unwrap(),
            ("not_selectable", None)
        );
    }
}
