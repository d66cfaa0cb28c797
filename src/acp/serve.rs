//! What autocode serves an ACP agent: `terminal/*` (each command a supervised family in the
//! stage's room, with the direct runtime's launch, caps and receipts), `fs/read_text_file` and
//! `fs/write_text_file` (the direct runtime's confined file tools; a read-only role cannot
//! write), and `session/request_permission` (the role's policy).
//!
//! Every answer is a JSON-RPC `result` or an [`RpcError`]; nothing an agent sends panics.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::direct::tools::{self, Argv, CommandOptions, ShellContext, ShellRun};
use crate::events::{EvidenceId, FileChangeKind, NormalizedEvent, ToolStatus};
use crate::supervise::{Canceller, Exit, IdleHolder};

/// A JSON-RPC error answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// ACP's "resource not found".
    pub const NOT_FOUND: i64 = -32002;

    pub fn invalid(message: impl Into<String>) -> Self {
        RpcError {
            code: Self::INVALID_PARAMS,
            message: message.into(),
        }
    }
    pub fn internal(message: impl Into<String>) -> Self {
        RpcError {
            code: Self::INTERNAL,
            message: message.into(),
        }
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        RpcError {
            code: Self::NOT_FOUND,
            message: message.into(),
        }
    }
}

fn str_param<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid(format!("`{key}` (a string) is missing")))
}

/// `path` (absolute, as ACP requires) relative to `root`, or the refusal.
fn relative_to(root: &Path, path: &str) -> Result<String, RpcError> {
    let absolute = Path::new(path);
    if !absolute.is_absolute() {
        return Err(RpcError::invalid(format!(
            "`{path}` is not an absolute path"
        )));
    }
    absolute
        .strip_prefix(root)
        .map(|rel| rel.to_string_lossy().into_owned())
        .map_err(|_| {
            RpcError::invalid(format!(
                "`{path}` is outside the stage's directory {}",
                root.display()
            ))
        })
}

/// The file requests, inside the stage's tree.
#[derive(Debug, Clone)]
pub struct Files {
    pub root: PathBuf,
    pub writable: bool,
    served: u32,
}

impl Files {
    pub fn new(root: PathBuf, writable: bool) -> Self {
        Files {
            root,
            writable,
            served: 0,
        }
    }

    fn evidence_id(&mut self) -> EvidenceId {
        self.served += 1;
        EvidenceId::from_provider_id(&format!("acp-fs-{}", self.served))
    }

    /// `fs/read_text_file`: the file's text (from 1-based `line`, at most `limit` lines), capped.
    pub fn read(&mut self, params: &Value) -> (Result<Value, RpcError>, Vec<NormalizedEvent>) {
        let result = str_param(params, "path")
            .and_then(|p| relative_to(&self.root, p))
            .and_then(|rel| tools::read_file(&self.root, &rel).map_err(RpcError::invalid))
            .map(|text| {
                let line = params.get("line").and_then(Value::as_u64).unwrap_or(1);
                let limit = params.get("limit").and_then(Value::as_u64);
                let skip = usize::try_from(line.saturating_sub(1)).unwrap_or(usize::MAX);
                let content: String = match limit {
                    None if skip == 0 => text,
                    _ => text
                        .split_inclusive('\n')
                        .skip(skip)
                        .take(
                            limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX)),
                        )
                        .collect(),
                };
                json!({ "content": content })
            });
        let event = tool_event(
            self.evidence_id(),
            "fs/read_text_file",
            result.as_ref().err(),
        );
        (result, vec![event])
    }

    /// `fs/write_text_file`: creates or replaces the file (a read-only role is refused).
    pub fn write(&mut self, params: &Value) -> (Result<Value, RpcError>, Vec<NormalizedEvent>) {
        let written = str_param(params, "path")
            .and_then(|p| relative_to(&self.root, p))
            .and_then(|rel| {
                let content = str_param(params, "content")?;
                tools::write_file(&self.root, self.writable, &rel, content)
                    .map(|existed| (rel, existed))
                    .map_err(RpcError::invalid)
            });
        let mut events = vec![tool_event(
            self.evidence_id(),
            "fs/write_text_file",
            written.as_ref().err(),
        )];
        let result = written.map(|(path, existed)| {
            events.push(NormalizedEvent::FileChange {
                path,
                kind: if existed {
                    FileChangeKind::Update
                } else {
                    FileChangeKind::Add
                },
            });
            Value::Null
        });
        (result, events)
    }
}

fn tool_event(evidence_id: EvidenceId, tool: &str, error: Option<&RpcError>) -> NormalizedEvent {
    NormalizedEvent::ToolUse {
        evidence_id,
        tool: tool.to_owned(),
        status: if error.is_some() {
            ToolStatus::Failed
        } else {
            ToolStatus::Completed
        },
        error: error.map(|e| e.message.clone()),
    }
}

/// `session/request_permission` answered by the role's policy: a read-only role refuses tool
/// calls that edit, delete or move files; everything else is allowed once (the room and the
/// boundary still confine it). Returns the result and, for a refusal, the event.
pub fn permission(
    writable: bool,
    params: &Value,
) -> (Result<Value, RpcError>, Vec<NormalizedEvent>) {
    let call = params.get("toolCall").unwrap_or(&Value::Null);
    let kind = call.get("kind").and_then(Value::as_str).unwrap_or("other");
    let refuse = !writable && matches!(kind, "edit" | "delete" | "move");
    let options: Vec<&Value> = params
        .get("options")
        .and_then(Value::as_array)
        .map(|o| o.iter().collect())
        .unwrap_or_default();
    let pick = |kinds: &[&str]| {
        kinds.iter().find_map(|k| {
            options
                .iter()
                .find(|o| o.get("kind").and_then(Value::as_str) == Some(k))
                .and_then(|o| o.get("optionId").and_then(Value::as_str))
        })
    };
    let chosen = if refuse {
        pick(&["reject_once", "reject_always"])
    } else {
        pick(&["allow_once", "allow_always"])
    };
    let outcome = match chosen {
        Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
        None => json!({"outcome": {"outcome": "cancelled"}}),
    };
    let mut events = Vec::new();
    if refuse || chosen.is_none() {
        events.push(NormalizedEvent::PermissionDenied {
            tool: call
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or(kind)
                .to_owned(),
            evidence_id: call
                .get("toolCallId")
                .and_then(Value::as_str)
                .map(EvidenceId::from_provider_id),
            message: if refuse {
                format!("this role is read-only: autocode refused a `{kind}` tool call")
            } else {
                "the agent offered no allow option".to_owned()
            },
        });
    }
    (Ok(outcome), events)
}

/// How a terminal's command ended, once it has.
#[derive(Debug, Clone)]
pub struct TerminalEnd {
    pub terminal_id: String,
    pub command: String,
    /// `None`: the boundary could not run it (the message says why).
    pub run: Result<ShellRun, String>,
}

impl TerminalEnd {
    /// The terminal's number (`term-N`; 0 for an id autocode did not make).
    pub fn number(&self) -> u64 {
        self.terminal_id
            .strip_prefix("term-")
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    }

    /// ACP's `exitStatus`.
    pub fn exit_status(&self) -> Value {
        match &self.run {
            Ok(run) => match run.exit {
                Exit::Code(c) => json!({"exitCode": c, "signal": null}),
                Exit::Signal(s) => json!({"exitCode": null, "signal": signal_name(s)}),
                Exit::TimedOut => json!({"exitCode": null, "signal": "SIGKILL"}),
            },
            Err(_) => json!({"exitCode": null, "signal": null}),
        }
    }
}

fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        other => format!("signal {other}"),
    }
}

/// One terminal. Its end reaches the agent (through `wait_for_exit`, or an exit status in
/// `output`) only once autocode made its command event: `held` keeps an end that arrived before
/// the agent asked, so the event carries the tool call the agent showed the terminal under
/// before asking, whichever of the command and the agent's update came first.
struct Terminal {
    canceller: Canceller,
    /// What the agent may see: `None` until published.
    done: watch::Sender<Option<Arc<TerminalEnd>>>,
    /// The end, arrived and not yet published.
    held: Option<Arc<TerminalEnd>>,
    /// The agent waits for it (`wait_for_exit` came before the end).
    awaited: bool,
}

/// The agent's terminals: each `terminal/create` one supervised family.
pub struct Terminals {
    shell: ShellContext,
    label: String,
    next: u32,
    open: BTreeMap<String, Terminal>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    ended: tokio::sync::mpsc::UnboundedSender<Arc<TerminalEnd>>,
    idle: Option<IdleHolder>,
}

impl Terminals {
    /// `ended` receives every terminal's end (autocode's command event is made from it).
    pub fn new(
        shell: ShellContext,
        label: String,
        ended: tokio::sync::mpsc::UnboundedSender<Arc<TerminalEnd>>,
    ) -> Self {
        Terminals {
            shell,
            label,
            next: 0,
            open: BTreeMap::new(),
            tasks: Vec::new(),
            ended,
            idle: None,
        }
    }

    /// Holds `idle` (the agent's idle timer) while any terminal's command runs.
    pub fn holding(mut self, idle: Option<IdleHolder>) -> Self {
        self.idle = idle;
        self
    }

    /// How many terminals the agent created.
    pub fn created(&self) -> u32 {
        self.next
    }

    /// Whether a terminal's command (or the cleanup of one) is still under way.
    pub fn running(&self) -> bool {
        self.tasks.iter().any(|task| !task.is_finished())
    }

    /// `terminal/create`: starts the command, returns its id at once.
    pub async fn create(&mut self, params: &Value) -> Result<Value, RpcError> {
        let program = str_param(params, "command")?.to_owned();
        let args: Vec<String> = match params.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| RpcError::invalid("`args` must be strings"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(RpcError::invalid("`args` must be an array")),
        };
        let mut options = CommandOptions::default();
        for var in params
            .get("env")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(name), Some(value)) = (
                var.get("name").and_then(Value::as_str),
                var.get("value").and_then(Value::as_str),
            ) else {
                return Err(RpcError::invalid("`env` entries need `name` and `value`"));
            };
            options.extra_env.push((name.to_owned(), value.to_owned()));
        }
        if let Some(cwd) = params.get("cwd").and_then(Value::as_str) {
            let rel = relative_to(&self.shell.cwd, cwd).or_else(|e| {
                if Path::new(cwd) == self.shell.cwd {
                    Ok(String::new())
                } else {
                    Err(e)
                }
            })?;
            if !rel.is_empty() {
                let dir = tools::confined_path(&self.shell.cwd, &rel)
                    .map_err(|e| RpcError::invalid(e.to_string()))?;
                options.cwd = Some(dir);
            }
        }
        options.cap = params
            .get("outputByteLimit")
            .and_then(Value::as_u64)
            .map(|l| usize::try_from(l).unwrap_or(usize::MAX));
        // With arguments the command is a program; without, a shell line (what agents send).
        let command = if args.is_empty() {
            program.clone()
        } else {
            std::iter::once(program.as_str())
                .chain(args.iter().map(String::as_str))
                .map(shell_word)
                .collect::<Vec<_>>()
                .join(" ")
        };
        self.next += 1;
        let terminal_id = format!("term-{}", self.next);
        let label = format!("{} terminal {}", self.label, self.next);
        let argv = if args.is_empty() {
            Argv::Shell(&program)
        } else {
            Argv::Exec {
                program: &program,
                args: &args,
            }
        };
        let running = tools::start_command(&self.shell, label, argv, &options)
            .await
            .map_err(|e| RpcError::internal(format!("the boundary could not run it: {e}")))?;
        let canceller = running.canceller();
        let (done, _) = watch::channel(None);
        let ended = self.ended.clone();
        let id = terminal_id.clone();
        let hold = self.idle.as_ref().map(IdleHolder::hold);
        self.tasks.push(tokio::spawn(async move {
            let run = tools::finish_command(running, &options)
                .await
                .map_err(|e| e.to_string());
            drop(hold);
            let end = Arc::new(TerminalEnd {
                terminal_id: id,
                command,
                run,
            });
            let _ = ended.send(end);
        }));
        self.open.insert(
            terminal_id.clone(),
            Terminal {
                canceller,
                done,
                held: None,
                awaited: false,
            },
        );
        Ok(json!({ "terminalId": terminal_id }))
    }

    /// A terminal's command ended: its end is given back when the agent already waits for it
    /// (or released the terminal), to be made an event and [published](Terminals::publish) at
    /// once; otherwise it is held until the agent asks ([`Terminals::take_held`]).
    pub fn arrived(&mut self, end: Arc<TerminalEnd>) -> Option<Arc<TerminalEnd>> {
        match self.open.get_mut(&end.terminal_id) {
            Some(terminal) if !terminal.awaited => {
                terminal.held = Some(end);
                None
            }
            _ => Some(end),
        }
    }

    /// The held end of the terminal a request names (`terminalId`), if any: the agent is about
    /// to learn of it, so its event is made first.
    pub fn take_held(&mut self, params: &Value) -> Option<Arc<TerminalEnd>> {
        let id = params.get("terminalId").and_then(Value::as_str)?;
        self.open.get_mut(id)?.held.take()
    }

    /// Every end still held, in the order the terminals were made (the session is over).
    pub fn take_all_held(&mut self) -> Vec<Arc<TerminalEnd>> {
        let mut ends: Vec<_> = self
            .open
            .values_mut()
            .filter_map(|terminal| terminal.held.take())
            .collect();
        ends.sort_by_key(|end| end.number());
        ends
    }

    /// Lets the agent see the end (its event was made).
    pub fn publish(&self, end: Arc<TerminalEnd>) {
        if let Some(terminal) = self.open.get(&end.terminal_id) {
            terminal.done.send_replace(Some(end));
        }
    }

    fn terminal(&self, params: &Value) -> Result<&Terminal, RpcError> {
        let id = str_param(params, "terminalId")?;
        self.open
            .get(id)
            .ok_or_else(|| RpcError::not_found(format!("no terminal `{id}`")))
    }

    /// `terminal/output`: the output so far (autocode hands it over once the command ended;
    /// before that it is empty) and the exit status when known.
    pub fn output(&self, params: &Value) -> Result<Value, RpcError> {
        let terminal = self.terminal(params)?;
        let end = terminal.done.borrow().clone();
        Ok(match end {
            Some(end) => match &end.run {
                Ok(run) => json!({
                    "output": run.output,
                    "truncated": run.truncated,
                    "exitStatus": end.exit_status(),
                }),
                Err(e) => json!({"output": e, "truncated": false, "exitStatus": end.exit_status()}),
            },
            None => json!({"output": "", "truncated": false}),
        })
    }

    /// `terminal/wait_for_exit`: a future answering once the command ended.
    pub fn wait_for_exit(
        &mut self,
        params: &Value,
    ) -> Result<impl std::future::Future<Output = Result<Value, RpcError>> + use<>, RpcError> {
        let id = str_param(params, "terminalId")?;
        let terminal = self
            .open
            .get_mut(id)
            .ok_or_else(|| RpcError::not_found(format!("no terminal `{id}`")))?;
        terminal.awaited = true;
        let mut done = terminal.done.subscribe();
        Ok(async move {
            match done.wait_for(Option::is_some).await {
                Ok(end) => Ok(end.as_ref().map(|e| e.exit_status()).unwrap_or(Value::Null)),
                Err(_) => Err(RpcError::internal("the terminal's command was lost")),
            }
        })
    }

    /// `terminal/kill`: ends the command's family; the terminal stays readable.
    pub fn kill(&self, params: &Value) -> Result<Value, RpcError> {
        self.terminal(params)?.canceller.cancel();
        Ok(json!({}))
    }

    /// `terminal/release`: ends the command if it still runs and forgets the terminal.
    pub fn release(&mut self, params: &Value) -> Result<Value, RpcError> {
        let id = str_param(params, "terminalId")?;
        let terminal = self
            .open
            .remove(id)
            .ok_or_else(|| RpcError::not_found(format!("no terminal `{id}`")))?;
        if terminal.done.borrow().is_none() {
            terminal.canceller.cancel();
        }
        Ok(json!({}))
    }

    /// Ends every command still running and waits for each family's verified cleanup.
    pub async fn shut_down(&mut self) {
        for terminal in self.open.values() {
            if terminal.done.borrow().is_none() {
                terminal.canceller.cancel();
            }
        }
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

/// A word quoted for `sh` when it needs it (the command's text in autocode's event).
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_stay_in_the_tree_and_read_only_roles_cannot_write() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        let mut files = Files::new(root.clone(), false);
        let path = root.join("a.txt");
        let (refused, events) =
            files.write(&json!({"path": path, "content": "x", "sessionId": "s"}));
        assert!(refused.unwrap_err().message.contains("read-only"));
        assert!(!path.exists());
        assert!(matches!(
            events[0],
            NormalizedEvent::ToolUse {
                status: ToolStatus::Failed,
                ..
            }
        ));
        let mut files = Files::new(root.clone(), true);
        let (ok, events) = files.write(&json!({"path": path, "content": "1\n2\n3\n"}));
        assert_eq!(ok.unwrap(), Value::Null);
        assert!(events.iter().any(|e| matches!(
            e,
            NormalizedEvent::FileChange { path, kind: FileChangeKind::Add } if path == "a.txt"
        )));
        let (read, _) = files.read(&json!({"path": path, "line": 2, "limit": 1}));
        assert_eq!(read.unwrap(), json!({"content": "2\n"}));
        for outside in ["/etc/passwd", "a.txt"] {
            let (r, _) = files.read(&json!({ "path": outside }));
            assert!(r.is_err(), "{outside}");
        }
        let (r, _) = files.read(&json!({"path": root.join("../x")}));
        assert!(r.is_err());
    }

    #[test]
    fn permissions_follow_the_role() {
        let params = |kind: &str| {
            json!({"sessionId": "s", "toolCall": {"toolCallId": "c1", "kind": kind, "title": "t"},
                "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                            {"optionId": "always", "name": "Always", "kind": "allow_always"},
                            {"optionId": "no", "name": "Reject", "kind": "reject_once"}]})
        };
        let chosen = |writable: bool, kind: &str| {
            let (result, events) = permission(writable, &params(kind));
            (
                result.unwrap()["outcome"]["optionId"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                events.len(),
            )
        };
        assert_eq!(chosen(true, "edit"), ("yes".to_owned(), 0));
        assert_eq!(chosen(false, "execute"), ("yes".to_owned(), 0));
        assert_eq!(chosen(false, "edit"), ("no".to_owned(), 1));
        assert_eq!(chosen(false, "delete"), ("no".to_owned(), 1));
        let (none, events) = permission(true, &json!({"options": []}));
        assert_eq!(none.unwrap()["outcome"]["outcome"], "cancelled");
        assert_eq!(events.len(), 1);
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("cargo"), "cargo");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
