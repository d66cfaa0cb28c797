//! Turns a script step and a normalized request into an API-neutral reply plan: the answer
//! (thinking, text, one tool call, finish reason, usage) or the fault to serve.
//!
//! Invariants: tool calls only name tools the request offers, with the arguments filled the way
//! that tool's schema spells them; usage numbers depend only on the step index, exactly like the
//! prototype mock (so fixture numbers can be compared).

use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::request::{ModelRequest, OfferedTool};
use super::script::Step;

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    Stop,
    ToolCall,
    Length,
}

/// Deterministic token usage of the answer at step `k` (the prototype mock's numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// All prompt tokens, cached ones included.
    pub input: u64,
    pub cached: u64,
    /// Anthropic `cache_creation_input_tokens`.
    pub cache_creation: u64,
    /// All output tokens, reasoning included.
    pub output: u64,
    pub reasoning: u64,
}

impl Usage {
    pub fn for_step(step: usize) -> Usage {
        let k = u64::try_from(step).unwrap_or(u64::MAX);
        Usage {
            input: 1000u64.saturating_add(k.saturating_mul(100)),
            cached: 600u64.saturating_add(k.saturating_mul(10)),
            cache_creation: 300u64.saturating_add(k),
            output: 40u64.saturating_add(k),
            reasoning: 12u64.saturating_add(k),
        }
    }
}

/// One tool call of an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Value,
}

/// A successful model answer, before it is put in a wire format.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub thinking: Option<String>,
    pub text: Option<String>,
    pub tool_call: Option<ToolCall>,
    pub finish: Finish,
    pub usage: Usage,
}

impl Answer {
    pub fn text(text: impl Into<String>, step: usize) -> Answer {
        Answer {
            thinking: None,
            text: Some(text.into()),
            tool_call: None,
            finish: Finish::Stop,
            usage: Usage::for_step(step),
        }
    }
}

/// An HTTP error to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpFault {
    pub status: u16,
    pub retry_after: Option<u32>,
    pub message: String,
}

/// Everything a model request can get.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Answer(Answer),
    Error(HttpFault),
    /// Answer nothing until shutdown or the timeout.
    Hang(Option<Duration>),
    Garbage,
}

/// A step that cannot be played against this request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the request offers no shell tool (looked for {looked_for}); offered: {offered}")]
    NoShellTool {
        looked_for: &'static str,
        offered: String,
    },
    #[error("the request offers no tool {name}; offered: {offered}")]
    NoSuchTool { name: String, offered: String },
}

/// Shell tools by name, in preference order. `mcp__acp__Bash` is Zed's Claude Code ACP adapter
/// (`claude-code-acp`), whose Bash runs in the ACP client's terminal; it replaces `Bash` there.
const SHELL_TOOLS: [&str; 5] = ["bash", "Bash", "exec_command", "shell", ACP_BASH];
/// The time bound a scripted shell call gives a tool that requires one (ms).
const SCRIPTED_TIMEOUT_MS: u64 = 120_000;
/// The Claude Code ACP adapter's shell and write tools.
const ACP_BASH: &str = "mcp__acp__Bash";
const ACP_WRITE: &str = "mcp__acp__Write";
/// Claude Code's structured-output tool.
const STRUCTURED_OUTPUT_TOOL: &str = "StructuredOutput";
/// autocode's direct runtime's report tool (its arguments are the report, like Claude's).
const DIRECT_REPORT_TOOL: &str = "report";
/// The longest `yield_time_ms` Codex's `exec_command` honours ("effective range is 250-30000 ms").
const CODEX_MAX_YIELD_MS: u64 = 30_000;
/// autocode's direct runtime's file-writing tool (`path`, `content`).
const DIRECT_WRITE_TOOL: &str = "write_file";
/// Used for Claude's Bash `description` when the step gives none (the prototype's text).
const DEFAULT_DESCRIPTION: &str = "Run the scripted mock command";

/// Codex reported the last command still running (it yields after `yield_time_ms`): the reply
/// polls it with `write_stdin` (empty `chars`, Codex's longest wait for an empty poll) until it
/// ends, as a model does, answering no script step; `None` when nothing runs or no poll tool
/// is offered.
pub fn poll_running(request: &ModelRequest, turn: usize) -> Option<Plan> {
    let session = request.running_session?;
    let tool = request.tool(super::request::POLL_TOOL)?;
    let mut arguments = Map::new();
    arguments.insert("session_id".into(), json!(session));
    arguments.insert("chars".into(), json!(""));
    if tool.has_property("yield_time_ms") {
        arguments.insert("yield_time_ms".into(), json!(CODEX_MAX_POLL_MS));
    }
    Some(Plan::Answer(Answer {
        thinking: None,
        text: None,
        tool_call: Some(ToolCall {
            name: tool.name.clone(),
            arguments: Value::Object(arguments),
        }),
        finish: Finish::ToolCall,
        usage: Usage::for_step(turn),
    }))
}

/// The longest wait Codex's `write_stdin` honours for an empty poll ("empty polls wait
/// 5000-300000 ms").
const CODEX_MAX_POLL_MS: u64 = 300_000;

/// Plans the reply to `request` for `step`, the script step answering assistant turn `turn`.
/// A tool call to a client that decodes `\uXXXX` in tool input is shielded from it, so the
/// script's text reaches the tool byte for byte.
pub fn plan_step(step: &Step, request: &ModelRequest, turn: usize) -> Result<Plan, PlanError> {
    let mut plan = plan_unshielded(step, request, turn)?;
    if request.repairs_unicode_escapes
        && let Plan::Answer(Answer {
            tool_call: Some(call),
            ..
        }) = &mut plan
    {
        super::claude_repair::shield(&mut call.arguments);
    }
    Ok(plan)
}

fn plan_unshielded(step: &Step, request: &ModelRequest, turn: usize) -> Result<Plan, PlanError> {
    let usage = Usage::for_step(turn);
    let answer = |thinking: &Option<String>, text: Option<String>, tool_call: Option<ToolCall>| {
        let finish = if tool_call.is_some() {
            Finish::ToolCall
        } else {
            Finish::Stop
        };
        Plan::Answer(Answer {
            thinking: thinking.clone(),
            text,
            tool_call,
            finish,
            usage,
        })
    };
    Ok(match step {
        Step::Shell {
            command,
            description,
            thinking,
            yield_ms,
            ..
        } => answer(
            thinking,
            None,
            Some(shell_call(
                request,
                command,
                description.as_deref(),
                yield_ms.unwrap_or(CODEX_MAX_YIELD_MS),
            )?),
        ),
        Step::WriteFile {
            path,
            content,
            thinking,
            ..
        } => {
            let call = match write_call(request, path, content) {
                Some(call) => call,
                None => shell_call(
                    request,
                    &heredoc_command(path, content),
                    None,
                    CODEX_MAX_YIELD_MS,
                )?,
            };
            answer(thinking, None, Some(call))
        }
        Step::Tool {
            name,
            arguments,
            thinking,
            ..
        } => {
            let Some(tool) = request.tool(name) else {
                return Err(PlanError::NoSuchTool {
                    name: name.clone(),
                    offered: request.tool_names().join(", "),
                });
            };
            let call = ToolCall {
                name: tool.name.clone(),
                arguments: arguments.clone(),
            };
            answer(thinking, None, Some(call))
        }
        Step::Text { text, thinking, .. } => answer(thinking, Some(text.clone()), None),
        Step::Report {
            report, thinking, ..
        } => {
            if let Some(tool) = request
                .tool(STRUCTURED_OUTPUT_TOOL)
                .or_else(|| request.tool(DIRECT_REPORT_TOOL))
            {
                let call = ToolCall {
                    name: tool.name.clone(),
                    arguments: report.clone(),
                };
                answer(thinking, None, Some(call))
            } else {
                answer(thinking, Some(report.to_string()), None)
            }
        }
        Step::Length { text, .. } => Plan::Answer(Answer {
            thinking: None,
            text: Some(text.clone()),
            tool_call: None,
            finish: Finish::Length,
            usage,
        }),
        Step::HttpError {
            status,
            retry_after,
            message,
            ..
        } => Plan::Error(HttpFault {
            status: *status,
            retry_after: *retry_after,
            message: message
                .clone()
                .unwrap_or_else(|| super::wire::error_message(request.api, *status)),
        }),
        Step::Hang { seconds, .. } => Plan::Hang(seconds.map(Duration::from_secs)),
        Step::Garbage { .. } => Plan::Garbage,
    })
}

/// The shell tool call for `command`, arguments spelled the way the offered tool wants them.
fn shell_call(
    request: &ModelRequest,
    command: &str,
    description: Option<&str>,
    yield_ms: u64,
) -> Result<ToolCall, PlanError> {
    let tool = SHELL_TOOLS
        .iter()
        .find_map(|name| request.tool(name))
        .ok_or_else(|| PlanError::NoShellTool {
            looked_for: "bash, Bash, exec_command, shell, mcp__acp__Bash",
            offered: request.tool_names().join(", "),
        })?;
    let mut arguments = Map::new();
    if tool.has_property("cmd") && !tool.has_property("command") {
        arguments.insert("cmd".into(), json!(command));
    } else if tool.property_type("command") == Some("array") {
        // The older Codex `shell` tool takes an argv.
        arguments.insert("command".into(), json!(["bash", "-lc", command]));
    } else {
        arguments.insert("command".into(), json!(command));
    }
    if tool.has_property("yield_time_ms") {
        // Codex's `exec_command` yields a command still running after 10 s by default and
        // expects the model to poll it with `write_stdin` (`poll_running`); a script waits as
        // long as Codex allows unless its step says otherwise (a command that ends sooner
        // returns when it ends).
        arguments.insert("yield_time_ms".into(), json!(yield_ms));
    }
    // The Claude Code ACP adapter's Bash requires its time bound (ms); a model gives it.
    if (tool.requires("timeout") || tool.name == ACP_BASH) && tool.has_property("timeout") {
        arguments.insert("timeout".into(), json!(SCRIPTED_TIMEOUT_MS));
    }
    if tool.has_property("description") {
        arguments.insert(
            "description".into(),
            json!(description.unwrap_or(DEFAULT_DESCRIPTION)),
        );
    }
    Ok(ToolCall {
        name: tool.name.clone(),
        arguments: Value::Object(arguments),
    })
}

/// The write tool call (`write {filePath, content}`, `Write {file_path, content}`), if offered.
/// The Claude Code ACP adapter hands its Write's path to the client, and ACP takes absolute
/// paths only: a relative step path is joined to the working directory the request states, as
/// a model follows the tool's "absolute path"; unstated, the step is written through the shell.
fn write_call(request: &ModelRequest, path: &str, content: &str) -> Option<ToolCall> {
    let tool: &OfferedTool = request
        .tool("write")
        .or_else(|| request.tool("Write"))
        .or_else(|| request.tool(ACP_WRITE))
        .or_else(|| request.tool(DIRECT_WRITE_TOOL))?;
    let path_key = ["filePath", "file_path", "path"]
        .into_iter()
        .find(|key| tool.has_property(key))
        .unwrap_or(if tool.name == "write" {
            "filePath"
        } else {
            "file_path"
        });
    let path = if tool.name == ACP_WRITE && !path.starts_with('/') {
        let dir = request.working_dir.as_deref()?;
        format!("{}/{path}", dir.trim_end_matches('/'))
    } else {
        path.to_owned()
    };
    Some(ToolCall {
        name: tool.name.clone(),
        arguments: json!({ path_key: path, "content": content }),
    })
}

/// A shell command that writes `content` to `path` exactly (a trailing newline is kept as given).
pub fn heredoc_command(path: &str, content: &str) -> String {
    let mut delimiter = "AUTOCODE_EOF".to_owned();
    while content.lines().any(|line| line == delimiter) {
        delimiter.push('_');
    }
    let quoted = shell_quote(path);
    // The heredoc always ends the text with a newline; `printf %s "$(cat)"` would drop all
    // trailing newlines, so the file is written and the one extra newline truncated instead.
    let body = if content.ends_with('\n') {
        content.to_owned()
    } else {
        format!("{content}\n")
    };
    let trim = if content.ends_with('\n') || content.is_empty() {
        String::new()
    } else {
        format!(" && truncate -s -1 {quoted}")
    };
    let write = if content.is_empty() {
        format!(": > {quoted}")
    } else {
        format!("cat > {quoted} <<'{delimiter}'\n{body}{delimiter}\n")
    };
    let parent = std::path::Path::new(path)
        .parent()
        .map(|parent| parent.to_string_lossy().into_owned())
        .filter(|parent| !parent.is_empty());
    let mkdir = match parent {
        Some(parent) => format!("mkdir -p {} && ", shell_quote(&parent)),
        None => String::new(),
    };
    if trim.is_empty() {
        format!("{mkdir}{write}")
    } else {
        // The heredoc must end the command line, so the truncation runs after it.
        format!("{mkdir}{write}true{trim}")
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted_model::request::Api;

    fn request(tools: Vec<OfferedTool>) -> ModelRequest {
        ModelRequest {
            api: Api::ChatCompletions,
            model: None,
            stream: true,
            include_usage: true,
            tools,
            assistant_turns: 0,
            assistant_turns_since_last_prompt: 0,
            prompts: vec![],
            title_call: false,
            running_session: None,
            repairs_unicode_escapes: false,
            working_dir: None,
        }
    }

    fn tool(name: &str, schema: Value) -> OfferedTool {
        OfferedTool {
            name: name.into(),
            schema: Some(schema),
        }
    }

    fn shell(command: &str) -> Step {
        Step::Shell {
            command: command.into(),
            description: None,
            thinking: None,
            yield_ms: None,
            repeat: 1,
        }
    }

    fn tool_call(plan: Plan) -> ToolCall {
        match plan {
            Plan::Answer(Answer {
                tool_call: Some(call),
                finish: Finish::ToolCall,
                ..
            }) => call,
            other => panic!("expected a tool call, got {other:?}"),
        }
    }

    #[test]
    fn usage_matches_the_prototype() {
        let first = Usage::for_step(0);
        let second = Usage::for_step(1);
        assert_eq!(first.input + second.input, 2100);
        assert_eq!(first.cached + second.cached, 1210);
        assert_eq!(first.output + second.output, 81);
        assert_eq!(first.reasoning + second.reasoning, 25);
        assert_eq!(first.cache_creation + second.cache_creation, 601);
    }

    #[test]
    fn shell_arguments_follow_each_cli_schema() {
        let cases = [
            (
                tool("bash", json!({"properties":{"command":{"type":"string"}}})),
                json!({"command":"ls"}),
            ),
            (
                tool(
                    "exec_command",
                    json!({"properties":{"cmd":{"type":"string"}}}),
                ),
                json!({"cmd":"ls"}),
            ),
            (
                tool(
                    "exec_command",
                    json!({"properties":{"cmd":{"type":"string"},"yield_time_ms":{"type":"number"}}}),
                ),
                json!({"cmd":"ls","yield_time_ms":CODEX_MAX_YIELD_MS}),
            ),
            (
                tool(
                    "Bash",
                    json!({"properties":{"command":{"type":"string"},"description":{"type":"string"}}}),
                ),
                json!({"command":"ls","description":DEFAULT_DESCRIPTION}),
            ),
            (
                tool("shell", json!({"properties":{"command":{"type":"array"}}})),
                json!({"command":["bash","-lc","ls"]}),
            ),
        ];
        for (offered, expected) in cases {
            let name = offered.name.clone();
            let call = tool_call(plan_step(&shell("ls"), &request(vec![offered]), 0).unwrap());
            assert_eq!(call.name, name);
            assert_eq!(call.arguments, expected);
        }
    }

    #[test]
    fn shell_without_a_shell_tool_is_an_error() {
        let result = plan_step(&shell("ls"), &request(vec![tool("read", json!({}))]), 0);
        assert!(matches!(result, Err(PlanError::NoShellTool { .. })));
    }

    #[test]
    fn a_tool_step_calls_the_offered_tool_by_name_or_is_unplayable() {
        let step = Step::Tool {
            name: "mcp__autocode__start_run".into(),
            arguments: json!({"objective": "x", "workspace": "/w"}),
            thinking: None,
            repeat: 1,
        };
        let offered = request(vec![
            tool("Bash", json!({})),
            tool(
                "mcp__autocode__start_run",
                json!({"properties":{"objective":{}}}),
            ),
        ]);
        let call = tool_call(plan_step(&step, &offered, 0).unwrap());
        assert_eq!(call.name, "mcp__autocode__start_run");
        assert_eq!(call.arguments, json!({"objective": "x", "workspace": "/w"}));
        let result = plan_step(&step, &request(vec![tool("Bash", json!({}))]), 0);
        assert!(
            matches!(&result, Err(PlanError::NoSuchTool { offered, .. }) if offered == "Bash"),
            "{result:?}"
        );
    }

    #[test]
    fn write_file_uses_the_write_tool_or_a_heredoc() {
        let step = Step::WriteFile {
            path: "a/b.txt".into(),
            content: "x\n".into(),
            thinking: None,
            repeat: 1,
        };
        let opencode = request(vec![tool(
            "write",
            json!({"properties":{"filePath":{},"content":{}}}),
        )]);
        assert_eq!(
            tool_call(plan_step(&step, &opencode, 0).unwrap()).arguments,
            json!({"filePath":"a/b.txt","content":"x\n"})
        );
        let claude = request(vec![tool(
            "Write",
            json!({"properties":{"file_path":{},"content":{}}}),
        )]);
        assert_eq!(
            tool_call(plan_step(&step, &claude, 0).unwrap()).arguments,
            json!({"file_path":"a/b.txt","content":"x\n"})
        );
        // The ACP adapter's Write: an absolute path under the stated working directory, or the
        // shell when none is stated.
        let mut acp = request(vec![
            tool(ACP_BASH, json!({"properties":{"command":{}}})),
            tool(
                ACP_WRITE,
                json!({"properties":{"file_path":{},"content":{}}}),
            ),
        ]);
        let call = tool_call(plan_step(&step, &acp, 0).unwrap());
        assert_eq!(call.name, ACP_BASH);
        acp.working_dir = Some("/ws/tree".into());
        let call = tool_call(plan_step(&step, &acp, 0).unwrap());
        assert_eq!(call.name, ACP_WRITE);
        assert_eq!(
            call.arguments,
            json!({"file_path":"/ws/tree/a/b.txt","content":"x\n"})
        );
        let direct = request(vec![
            tool("shell", json!({"properties":{"command":{}}})),
            tool("write_file", json!({"properties":{"path":{},"content":{}}})),
        ]);
        let call = tool_call(plan_step(&step, &direct, 0).unwrap());
        assert_eq!(call.name, "write_file");
        assert_eq!(call.arguments, json!({"path":"a/b.txt","content":"x\n"}));
        let codex = request(vec![tool("exec_command", json!({"properties":{"cmd":{}}}))]);
        let call = tool_call(plan_step(&step, &codex, 0).unwrap());
        assert_eq!(
            call.arguments,
            json!({"cmd":"mkdir -p 'a' && cat > 'a/b.txt' <<'AUTOCODE_EOF'\nx\nAUTOCODE_EOF\n"})
        );
    }

    #[tokio::test]
    async fn heredoc_writes_exact_content_through_a_real_shell() {
        let dir = tempfile::tempdir().unwrap();
        let contents = [
            "plain\n",
            "no newline",
            "",
            "AUTOCODE_EOF\nline with 'quotes' and $HOME\n\n",
        ];
        for (index, content) in contents.into_iter().enumerate() {
            let path = format!("sub dir/f{index}.txt");
            let spec = crate::supervise::LaunchSpec {
                label: "heredoc check".into(),
                program: "bash".into(),
                args: vec!["-c".into(), heredoc_command(&path, content).into()],
                env: std::env::vars_os().collect(),
                cwd: dir.path().to_owned(),
                stdin: crate::supervise::StdinSource::Null,
                stdio: crate::supervise::StdioMode::Captured { limit: 4096 },
                timeout: Some(std::time::Duration::from_secs(30)),
                room: None,
            };
            let finished = crate::supervise::run(spec).await.unwrap();
            assert_eq!(finished.exit, crate::supervise::Exit::Code(0));
            let written = std::fs::read_to_string(dir.path().join(&path)).unwrap();
            assert_eq!(written, content, "content {index}");
        }
    }

    #[test]
    fn report_is_structured_output_when_offered_else_json_text() {
        let step = Step::Report {
            report: json!({"status":"done"}),
            thinking: None,
            repeat: 1,
        };
        let claude = request(vec![tool(STRUCTURED_OUTPUT_TOOL, json!({}))]);
        assert_eq!(
            tool_call(plan_step(&step, &claude, 1).unwrap()).arguments,
            json!({"status":"done"})
        );
        match plan_step(&step, &request(vec![]), 1).unwrap() {
            Plan::Answer(answer) => {
                assert_eq!(answer.text.as_deref(), Some(r#"{"status":"done"}"#));
                assert_eq!(answer.finish, Finish::Stop);
                assert_eq!(answer.usage, Usage::for_step(1));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
