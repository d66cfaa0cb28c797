//! The scripted model server: a loopback HTTP/1.1 server (tokio + hyper) that speaks OpenAI Chat
//! Completions, OpenAI Responses and Anthropic Messages well enough for the real OpenCode, Codex
//! and Claude Code CLIs to run offline, answering from a script.
//!
//! Theory of operation: every model request is normalized ([`request::ModelRequest`]), matched to
//! a script conversation, and its step chosen from the number of assistant turns in the request's
//! history ([`script::Conversation::resolve`]), so the server keeps no per-session state and a
//! resumed session continues its script. autocode's readiness canaries are answered by a
//! built-in responder ([`canary`]) that consumes no step. The only shared state is the per-conversation count of
//! served fault steps (HTTP errors, hangs, garbage) and the request log. The chosen step becomes a
//! [`reply::Plan`], which [`wire`] renders in the API's wire form.
//!
//! Invariants: it binds 127.0.0.1 only; every request, including 404s, is logged (in memory and,
//! when asked, as JSON lines to a file) before it is answered; shutdown (or dropping the
//! [`RunningServer`]) stops accepting, ends hanging requests and closes every connection.

pub mod canary;
mod claude_repair;
pub mod reply;
pub mod request;
pub mod script;
pub mod wire;

/// How Claude Code names itself (`claude-cli/2.1.328 (external, sdk-cli)`).
const CLAUDE_CODE_USER_AGENT: &str = "claude-cli/";

use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER, USER_AGENT};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

pub use reply::{Answer, Finish, HttpFault, Plan, PlanError, ToolCall, Usage};
pub use request::{Api, ModelRequest, OfferedTool, RequestError};
pub use script::{
    Conversation, MatchRule, Resolved, Script, ScriptError, ScriptSyntax, Step, TurnCounting,
};

/// Request bodies above this size are refused (the largest real request is about 45 kB).
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// The answer when a conversation has no step left: plain text, so every CLI ends its turn.
pub const EXHAUSTED_TEXT: &str = "scripted model: script exhausted";

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub script: Script,
    /// 0 picks an ephemeral port.
    pub port: u16,
    /// Also append every log entry as a JSON line to this file.
    pub log_file: Option<PathBuf>,
}

impl ServerConfig {
    /// An ephemeral-port server for `script`, logging in memory only.
    pub fn new(script: Script) -> ServerConfig {
        ServerConfig {
            script,
            port: 0,
            log_file: None,
        }
    }
}

/// What the server did with a request (serialized strings are the log's API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Answered a tool call (shell, write, StructuredOutput report).
    ToolCall,
    /// Answered text (text step, report as text).
    Text,
    /// Answered truncated text with a length stop.
    Length,
    /// Answered OpenCode's title-generation call (no step consumed).
    Title,
    /// Answered autocode's readiness canary with the built-in responder (no step consumed).
    Canary,
    HttpError,
    Hang,
    Garbage,
    /// The conversation had no step left; answered [`EXHAUSTED_TEXT`].
    Exhausted,
    /// No conversation matched; answered 400.
    NoMatch,
    /// The body could not be read as a request; answered 400.
    BadRequest,
    /// The step cannot be played against this request (e.g. no shell tool offered); answered 400.
    Unplayable,
    Models,
    Hello,
    NotFound,
}

/// One log line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestLogEntry {
    /// 1-based arrival order.
    pub seq: u64,
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    #[serde(default)]
    pub api: Option<Api>,
    #[serde(default)]
    pub conversation: Option<String>,
    /// The assistant-turn count that selected the step.
    #[serde(default)]
    pub step: Option<usize>,
    /// Index of the script step played (turn or fault step).
    #[serde(default)]
    pub script_step: Option<usize>,
    pub action: Action,
    /// The tool the answer called.
    #[serde(default)]
    pub tool: Option<String>,
    /// Tools the request offered.
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub user_agent: Option<String>,
    /// The request's `tool_choice`, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// The JSON schema format the answer was asked in (Chat Completions `response_format`,
    /// Responses `text.format`), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_format: Option<Value>,
    /// The response cap the request asked for (`max_tokens`, `max_completion_tokens`,
    /// `max_output_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// HTTP status answered; `None` for a hang (nothing is answered).
    pub status: Option<u16>,
    /// Why a request was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Failures of the server itself.
#[derive(Debug, thiserror::Error)]
pub enum ScriptedModelError {
    #[error(transparent)]
    Script(#[from] ScriptError),
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the request log {path}")]
    LogFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the bound address to stdout")]
    Stdout(#[source] std::io::Error),
    #[error("cannot install the signal handlers")]
    Signal(#[source] std::io::Error),
}

/// Starts scripted model servers.
pub struct ScriptedServer;

impl ScriptedServer {
    /// Binds 127.0.0.1:`config.port` and serves until [`RunningServer::shutdown`] or drop.
    pub async fn start(config: ServerConfig) -> Result<RunningServer, ScriptedModelError> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, config.port));
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ScriptedModelError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ScriptedModelError::Bind { addr, source })?;
        let log_file = match &config.log_file {
            Some(path) => Some(Mutex::new(open_log(path)?)),
            None => None,
        };
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let state = Arc::new(State {
            script: config.script,
            faults_served: Mutex::new(HashMap::new()),
            log: Mutex::new(Vec::new()),
            log_file,
            seq: AtomicU64::new(0),
            shutdown: shutdown_rx.clone(),
        });
        let accept_task = tokio::spawn(accept_loop(listener, state.clone(), shutdown_rx));
        Ok(RunningServer {
            addr,
            state,
            shutdown_tx,
            accept_task: Some(accept_task),
        })
    }
}

fn open_log(path: &Path) -> Result<std::fs::File, ScriptedModelError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| ScriptedModelError::LogFile {
            path: path.to_owned(),
            source,
        })
}

/// A server that is accepting connections.
pub struct RunningServer {
    addr: SocketAddr,
    state: Arc<State>,
    shutdown_tx: watch::Sender<bool>,
    accept_task: Option<JoinHandle<()>>,
}

impl RunningServer {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, no path: Claude's `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`: OpenCode's `baseURL` and Codex's `base_url`.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// A copy of the request log so far.
    pub fn requests(&self) -> Vec<RequestLogEntry> {
        lock(&self.state.log).clone()
    }

    /// Stops accepting, ends hanging requests, closes all connections and waits for that.
    pub async fn shutdown(mut self) {
        self.shutdown_tx.send_replace(true);
        if let Some(task) = self.accept_task.take() {
            // A JoinError here means the accept task panicked or was cancelled; either way it
            // is gone, which is what shutdown wants.
            let _ = task.await;
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shutdown_tx.send_replace(true);
    }
}

/// The arguments of `autocode scripted-model serve`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeArgs {
    pub script: PathBuf,
    /// 0 (the default) picks an ephemeral port.
    pub port: u16,
    pub log: Option<PathBuf>,
}

/// `autocode scripted-model serve`: loads the script, prints the bound address
/// (`127.0.0.1:PORT`) as the first stdout line, and serves until SIGINT or SIGTERM.
pub async fn serve_command(args: ServeArgs) -> Result<(), ScriptedModelError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).map_err(ScriptedModelError::Signal)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(ScriptedModelError::Signal)?;
    let stop = async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    };
    serve_until(args, &mut std::io::stdout(), stop).await
}

/// [`serve_command`] with the output and the stop condition given (for tests and embedding).
pub async fn serve_until(
    args: ServeArgs,
    out: &mut impl Write,
    stop: impl Future<Output = ()>,
) -> Result<(), ScriptedModelError> {
    let script = Script::load(&args.script)?;
    let server = ScriptedServer::start(ServerConfig {
        script,
        port: args.port,
        log_file: args.log,
    })
    .await?;
    writeln!(out, "{}", server.addr())
        .and_then(|()| out.flush())
        .map_err(ScriptedModelError::Stdout)?;
    stop.await;
    server.shutdown().await;
    Ok(())
}

struct State {
    script: Script,
    /// (conversation index, step index) → times served.
    faults_served: Mutex<HashMap<(usize, usize), u32>>,
    log: Mutex<Vec<RequestLogEntry>>,
    log_file: Option<Mutex<std::fs::File>>,
    seq: AtomicU64,
    shutdown: watch::Receiver<bool>,
}

/// A poisoned lock only means another request panicked; the data (counters, log) is still
/// consistent because every critical section is a single insert or push.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn wait_for_shutdown(mut shutdown: watch::Receiver<bool>) {
    while !*shutdown.borrow_and_update() {
        if shutdown.changed().await.is_err() {
            return;
        }
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<State>, shutdown: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    let stop = wait_for_shutdown(shutdown);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let state = state.clone();
                    connections.spawn(async move {
                        let service = service_fn(move |request| handle(state.clone(), request));
                        if let Err(error) = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await
                        {
                            tracing::debug!(%error, "scripted model connection ended");
                        }
                    });
                }
                Err(error) => tracing::warn!(%error, "scripted model accept failed"),
            },
        }
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

/// Returned by the service to make hyper drop the connection without answering.
#[derive(Debug, thiserror::Error)]
#[error("hung request ended without an answer")]
struct HangUp;

type HttpResponse = Response<Full<Bytes>>;

fn respond(status: u16, content_type: &str, body: String) -> HttpResponse {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(CONTENT_TYPE, value);
    }
    response
}

fn json_response(status: u16, body: &Value) -> HttpResponse {
    respond(status, "application/json", body.to_string())
}

async fn handle(state: Arc<State>, request: Request<Incoming>) -> Result<HttpResponse, HangUp> {
    let seq = state.seq.fetch_add(1, Ordering::Relaxed).saturating_add(1);
    let method = request.method().clone();
    let path = request.uri().path_and_query().map_or_else(
        || request.uri().path().to_owned(),
        |pq| pq.as_str().to_owned(),
    );
    let route = request.uri().path().trim_end_matches('/').to_owned();
    let header = |name| {
        request
            .headers()
            .get(name)
            .and_then(|value: &HeaderValue| value.to_str().ok())
            .map(str::to_owned)
    };
    let user_agent = header(USER_AGENT.as_str());
    let anthropic_form = header("anthropic-version").is_some();
    let mut entry = RequestLogEntry {
        seq,
        method: method.to_string(),
        path,
        api: None,
        conversation: None,
        step: None,
        script_step: None,
        action: Action::NotFound,
        tool: None,
        tools: Vec::new(),
        model: None,
        stream: None,
        user_agent,
        tool_choice: None,
        answer_format: None,
        max_tokens: None,
        status: None,
        detail: None,
    };
    let api = match (&method, route.as_str()) {
        (&Method::POST, "/v1/chat/completions") => Some(Api::ChatCompletions),
        (&Method::POST, "/v1/responses") => Some(Api::Responses),
        (&Method::POST, "/v1/messages") => Some(Api::AnthropicMessages),
        _ => None,
    };
    let Some(api) = api else {
        let response = match (&method, route.as_str()) {
            (&Method::HEAD | &Method::GET, "/api/hello") => {
                entry.action = Action::Hello;
                respond(200, "text/plain", String::new())
            }
            (&Method::GET, "/v1/models") => {
                entry.action = Action::Models;
                json_response(200, &models_body(&state.script.models, anthropic_form))
            }
            _ => json_response(
                404,
                &json!({"error": {"message": format!("not found: {method} {}", entry.path), "type": "not_found"}}),
            ),
        };
        entry.status = Some(response.status().as_u16());
        state.record(entry);
        return Ok(response);
    };
    entry.api = Some(api);
    let body = match Limited::new(request.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            entry.action = Action::BadRequest;
            entry.detail = Some(format!("cannot read the body: {error}"));
            return Ok(state.refuse(api, entry));
        }
    };
    let parsed = match ModelRequest::parse(api, &body) {
        Ok(mut parsed) => {
            parsed.repairs_unicode_escapes = entry
                .user_agent
                .as_deref()
                .is_some_and(|agent| agent.starts_with(CLAUDE_CODE_USER_AGENT));
            parsed
        }
        Err(error) => {
            entry.action = Action::BadRequest;
            entry.detail = Some(error.to_string());
            return Ok(state.refuse(api, entry));
        }
    };
    if let Ok(raw) = serde_json::from_slice::<Value>(&body) {
        entry.tool_choice = raw.get("tool_choice").cloned();
        entry.answer_format = raw
            .get("response_format")
            .or_else(|| raw.pointer("/text/format"))
            .cloned();
        entry.max_tokens = ["max_tokens", "max_completion_tokens", "max_output_tokens"]
            .iter()
            .find_map(|field| raw.get(*field).and_then(Value::as_u64));
    }
    entry.tools = parsed.tool_names();
    entry.model = parsed.model.clone();
    entry.stream = Some(parsed.stream);
    state.answer(&parsed, entry).await
}

fn models_body(models: &[String], anthropic_form: bool) -> Value {
    if anthropic_form {
        let data: Vec<Value> = models
            .iter()
            .map(|id| json!({"type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z"}))
            .collect();
        json!({"data": data, "has_more": false, "first_id": models.first(), "last_id": models.last()})
    } else {
        let data: Vec<Value> = models
            .iter()
            .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "autocode-scripted"}))
            .collect();
        json!({"object": "list", "data": data})
    }
}

/// The conversation a request belongs to.
fn choose_conversation<'a>(
    script: &'a Script,
    request: &ModelRequest,
) -> Option<(usize, &'a Conversation)> {
    script
        .conversations
        .iter()
        .enumerate()
        .find(|(_, conversation)| match &conversation.match_rule {
            MatchRule::Default => true,
            MatchRule::PromptContains(needle) => request
                .prompts
                .iter()
                .any(|prompt| prompt.contains(needle.as_str())),
            MatchRule::LastPromptContains(needle) => request
                .prompts
                .last()
                .is_some_and(|prompt| prompt.contains(needle.as_str())),
        })
}

impl State {
    fn record(&self, entry: RequestLogEntry) {
        if let Some(file) = &self.log_file {
            match serde_json::to_string(&entry) {
                Ok(line) => {
                    let mut file = lock(file);
                    if let Err(error) = writeln!(file, "{line}").and_then(|()| file.flush()) {
                        tracing::warn!(%error, "cannot append to the scripted model request log");
                    }
                }
                Err(error) => tracing::warn!(%error, "cannot serialize a request log entry"),
            }
        }
        lock(&self.log).push(entry);
    }

    /// Answers 400 in the API's error shape, with the entry's detail as message.
    fn refuse(&self, api: Api, mut entry: RequestLogEntry) -> HttpResponse {
        let fault = HttpFault {
            status: 400,
            retry_after: None,
            message: entry
                .detail
                .clone()
                .unwrap_or_else(|| "scripted model refused the request".to_owned()),
        };
        entry.status = Some(400);
        self.record(entry);
        json_response(400, &wire::error_body(api, &fault))
    }

    /// Picks the plan for a parsed model request, logs it and answers it.
    async fn answer(
        &self,
        request: &ModelRequest,
        mut entry: RequestLogEntry,
    ) -> Result<HttpResponse, HangUp> {
        let api = request.api;
        let canary = canary::canary_marker(request)
            .filter(|_| !canary::scripted_explicitly(&self.script, request));
        let plan = if request.title_call {
            entry.action = Action::Title;
            entry.step = Some(0);
            Plan::Answer(Answer::text(self.script.title.clone(), 0))
        } else if let Some(marker) = canary {
            entry.action = Action::Canary;
            let step = Step::Shell {
                command: format!("echo {marker}"),
                description: None,
                thinking: None,
                yield_ms: None,
                repeat: 1,
            };
            match reply::plan_step(&step, request, 0) {
                Ok(plan) => plan,
                Err(error) => {
                    entry.action = Action::Unplayable;
                    entry.detail = Some(error.to_string());
                    return Ok(self.refuse(api, entry));
                }
            }
        } else {
            let Some((conversation_index, conversation)) =
                choose_conversation(&self.script, request)
            else {
                entry.action = Action::NoMatch;
                entry.detail = Some("no script conversation matches this request".to_owned());
                return Ok(self.refuse(api, entry));
            };
            entry.conversation = Some(conversation.name.clone());
            let turn = match conversation.count_turns {
                TurnCounting::Conversation => request.assistant_turns,
                TurnCounting::SinceLastPrompt => request.assistant_turns_since_last_prompt,
            };
            entry.step = Some(turn);
            if let Some(poll) = reply::poll_running(request, turn) {
                // Codex's command is still running: poll it, answering no script step.
                entry.detail = Some("polls a command still running".to_owned());
                poll
            } else {
                let resolved = {
                    let mut served = lock(&self.faults_served);
                    let resolved = conversation.resolve(turn, |step| {
                        served
                            .get(&(conversation_index, step))
                            .copied()
                            .unwrap_or(0)
                    });
                    if let Resolved::Fault { step_index } = resolved {
                        let count = served.entry((conversation_index, step_index)).or_insert(0);
                        *count = count.saturating_add(1);
                    }
                    resolved
                };
                let step = match resolved {
                    Resolved::Turn { step_index } | Resolved::Fault { step_index } => conversation
                        .steps
                        .get(step_index)
                        .map(|step| (step_index, step)),
                    Resolved::Exhausted => None,
                };
                match step {
                    None => {
                        entry.action = Action::Exhausted;
                        Plan::Answer(Answer::text(EXHAUSTED_TEXT, turn))
                    }
                    Some((step_index, step)) => {
                        entry.script_step = Some(step_index);
                        match reply::plan_step(step, request, turn) {
                            Ok(plan) => plan,
                            Err(error) => {
                                entry.action = Action::Unplayable;
                                entry.detail = Some(error.to_string());
                                return Ok(self.refuse(api, entry));
                            }
                        }
                    }
                }
            }
        };
        let model = request
            .model
            .clone()
            .or_else(|| self.script.models.first().cloned())
            .unwrap_or_default();
        let ids = wire::Ids::new(entry.seq);
        let response = match plan {
            Plan::Answer(answer) => {
                if !matches!(
                    entry.action,
                    Action::Title | Action::Exhausted | Action::Canary
                ) {
                    entry.action = match (&answer.tool_call, answer.finish) {
                        (_, Finish::Length) => Action::Length,
                        (Some(_), _) => Action::ToolCall,
                        (None, _) => Action::Text,
                    };
                }
                entry.tool = answer.tool_call.as_ref().map(|call| call.name.clone());
                let rendered = wire::render_answer(
                    api,
                    &answer,
                    &model,
                    &ids,
                    request.stream,
                    request.include_usage,
                );
                respond(200, rendered.content_type, rendered.body)
            }
            Plan::Error(fault) => {
                entry.action = Action::HttpError;
                let mut response = json_response(fault.status, &wire::error_body(api, &fault));
                if let Some(seconds) = fault.retry_after {
                    response
                        .headers_mut()
                        .insert(RETRY_AFTER, HeaderValue::from(seconds));
                }
                response
            }
            Plan::Garbage => {
                entry.action = Action::Garbage;
                let rendered = wire::garbage(request.stream);
                respond(200, rendered.content_type, rendered.body)
            }
            Plan::Hang(timeout) => {
                entry.action = Action::Hang;
                self.record(entry);
                self.hang(timeout).await;
                return Err(HangUp);
            }
        };
        entry.status = Some(response.status().as_u16());
        self.record(entry);
        Ok(response)
    }

    async fn hang(&self, timeout: Option<Duration>) {
        let until_shutdown = wait_for_shutdown(self.shutdown.clone());
        match timeout {
            Some(limit) => {
                // Elapsed or not, the request ends here without an answer.
                let _ = tokio::time::timeout(limit, until_shutdown).await;
            }
            None => until_shutdown.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log's action strings are API (documented in docs/scripted-model.md).
    #[test]
    fn action_strings_are_stable() {
        let expected = [
            (Action::ToolCall, "tool_call"),
            (Action::Text, "text"),
            (Action::Length, "length"),
            (Action::Title, "title"),
            (Action::Canary, "canary"),
            (Action::HttpError, "http_error"),
            (Action::Hang, "hang"),
            (Action::Garbage, "garbage"),
            (Action::Exhausted, "exhausted"),
            (Action::NoMatch, "no_match"),
            (Action::BadRequest, "bad_request"),
            (Action::Unplayable, "unplayable"),
            (Action::Models, "models"),
            (Action::Hello, "hello"),
            (Action::NotFound, "not_found"),
        ];
        let doc = include_str!("../../docs/scripted-model.md");
        for (action, name) in expected {
            assert_eq!(serde_json::to_value(action).unwrap(), json!(name));
            assert!(doc.contains(name), "{name} is documented");
        }
    }

    #[test]
    fn models_list_has_both_forms() {
        let models = vec!["a".to_owned(), "b".to_owned()];
        let openai = models_body(&models, false);
        assert_eq!(openai["data"][1]["id"], "b");
        let anthropic = models_body(&models, true);
        assert_eq!(anthropic["first_id"], "a");
        assert_eq!(anthropic["last_id"], "b");
    }
}
