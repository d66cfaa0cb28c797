//! Reads a model request body of any of the three wire APIs into one normalized view: which tools
//! are offered, how many assistant turns the history holds, the user prompt texts, and whether it
//! is OpenCode's title-generation call.
//!
//! Invariant: parsing never panics; a body that is not a JSON object is a typed error, and
//! unknown or oddly shaped fields are ignored (the CLIs add fields between versions).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The wire API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// OpenAI Chat Completions (`POST /v1/chat/completions`, OpenCode).
    ChatCompletions,
    /// OpenAI Responses (`POST /v1/responses`, Codex).
    Responses,
    /// Anthropic Messages (`POST /v1/messages`, Claude Code).
    AnthropicMessages,
}

/// A tool the request offers, with its argument schema when it has one.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedTool {
    pub name: String,
    pub schema: Option<Value>,
}

impl OfferedTool {
    /// Whether the argument schema declares `property`.
    pub fn has_property(&self, property: &str) -> bool {
        self.schema
            .as_ref()
            .and_then(|schema| schema.get("properties"))
            .and_then(|properties| properties.get(property))
            .is_some()
    }

    /// Whether the argument schema lists `property` as required.
    pub fn requires(&self, property: &str) -> bool {
        self.schema
            .as_ref()
            .and_then(|schema| schema.get("required"))
            .and_then(Value::as_array)
            .is_some_and(|required| required.iter().any(|r| r.as_str() == Some(property)))
    }

    /// The JSON type the schema gives `property`, if any.
    pub fn property_type(&self, property: &str) -> Option<&str> {
        self.schema
            .as_ref()?
            .get("properties")?
            .get(property)?
            .get("type")?
            .as_str()
    }
}

/// The normalized request.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    pub api: Api,
    pub model: Option<String>,
    pub stream: bool,
    /// Chat Completions `stream_options.include_usage`.
    pub include_usage: bool,
    pub tools: Vec<OfferedTool>,
    /// Assistant turns in the whole history.
    pub assistant_turns: usize,
    /// Assistant turns after the last user prompt.
    pub assistant_turns_since_last_prompt: usize,
    /// Texts of the user messages that are prompts (not tool results), oldest first.
    pub prompts: Vec<String>,
    /// OpenCode's tool-less "You are a title generator" call.
    pub title_call: bool,
    /// Codex's `exec_command` or `write_stdin` answered that the command is still running
    /// (`Process running with session ID N` in the last tool output): the session to poll.
    pub running_session: Option<u64>,
    /// The client decodes `\uXXXX` in tool-call input strings (Claude Code: `claude_repair`);
    /// set from the request's `User-Agent` by the server.
    pub repairs_unicode_escapes: bool,
    /// The agent's working directory, as Claude Code's system prompt states it
    /// (` - Primary working directory: DIR`).
    pub working_dir: Option<String>,
}

/// Claude Code's line naming the session's working directory in its system prompt.
const WORKING_DIR_MARKER: &str = "Primary working directory: ";

/// The working directory a system prompt states, if it states one.
fn stated_working_dir(system_text: &str) -> Option<String> {
    system_text.lines().find_map(|line| {
        let dir = line.split_once(WORKING_DIR_MARKER)?.1.trim();
        dir.starts_with('/').then(|| dir.to_owned())
    })
}

/// A body that cannot be read as a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("request body is not JSON: {0}")]
    NotJson(String),
    #[error("request body is not a JSON object")]
    NotAnObject,
}

/// The marker of OpenCode's title-generation system prompt.
const TITLE_MARKER: &str = "You are a title generator";

/// What one history entry is, for turn counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// Produced by the model (assistant message, reasoning, function call).
    Model,
    /// A user prompt.
    Prompt,
    /// Anything else (tool results, system/developer messages).
    Other,
}

impl ModelRequest {
    /// Parses `body` as a request of `api`.
    pub fn parse(api: Api, body: &[u8]) -> Result<ModelRequest, RequestError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|error| RequestError::NotJson(error.to_string()))?;
        let object = value.as_object().ok_or(RequestError::NotAnObject)?;
        let mut entries: Vec<(Entry, String)> = Vec::new();
        let mut system_text = String::new();
        let mut running_session = None;
        let tools: Vec<OfferedTool> = match api {
            Api::ChatCompletions => {
                for message in array(object, "messages") {
                    let role = str_field(message, "role").unwrap_or_default();
                    let text = content_text(message.get("content"));
                    let entry = match role {
                        "assistant" => Entry::Model,
                        "user" => Entry::Prompt,
                        "system" | "developer" => {
                            system_text.push_str(&text);
                            Entry::Other
                        }
                        _ => Entry::Other,
                    };
                    entries.push((entry, text));
                }
                array(object, "tools")
                    .filter_map(|tool| {
                        let function = tool.get("function")?;
                        Some(OfferedTool {
                            name: str_field(function, "name")?.to_owned(),
                            schema: function.get("parameters").cloned(),
                        })
                    })
                    .collect()
            }
            Api::Responses => {
                if let Some(instructions) = object.get("instructions").and_then(Value::as_str) {
                    system_text.push_str(instructions);
                }
                match object.get("input") {
                    Some(Value::String(prompt)) => entries.push((Entry::Prompt, prompt.clone())),
                    Some(Value::Array(items)) => {
                        for item in items {
                            let kind = str_field(item, "type").unwrap_or("message");
                            let role = str_field(item, "role").unwrap_or_default();
                            let text = content_text(item.get("content"));
                            let entry = match (kind, role) {
                                ("message", "assistant") => Entry::Model,
                                ("message", "user") => Entry::Prompt,
                                ("message", _) => {
                                    system_text.push_str(&text);
                                    Entry::Other
                                }
                                (kind, _) if kind.ends_with("_output") => Entry::Other,
                                // The scripted model's own polls of a running command are not
                                // script turns (they answer no step).
                                ("function_call", _)
                                    if str_field(item, "name") == Some(POLL_TOOL) =>
                                {
                                    Entry::Other
                                }
                                ("reasoning" | "function_call" | "custom_tool_call", _)
                                | ("local_shell_call" | "web_search_call", _) => Entry::Model,
                                _ => Entry::Other,
                            };
                            entries.push((entry, text));
                        }
                        running_session = items
                            .last()
                            .filter(|item| str_field(item, "type") == Some("function_call_output"))
                            .and_then(|item| still_running(item.get("output")));
                    }
                    _ => {}
                }
                array(object, "tools")
                    .filter_map(|tool| {
                        let name = str_field(tool, "name").or_else(|| str_field(tool, "type"))?;
                        Some(OfferedTool {
                            name: name.to_owned(),
                            schema: tool.get("parameters").cloned(),
                        })
                    })
                    .collect()
            }
            Api::AnthropicMessages => {
                system_text.push_str(&content_text(object.get("system")));
                for message in array(object, "messages") {
                    let role = str_field(message, "role").unwrap_or_default();
                    let text = content_text(message.get("content"));
                    let has_tool_result = message
                        .get("content")
                        .and_then(Value::as_array)
                        .is_some_and(|blocks| {
                            blocks
                                .iter()
                                .any(|block| str_field(block, "type") == Some("tool_result"))
                        });
                    let entry = match role {
                        "assistant" => Entry::Model,
                        "user" if !has_tool_result => Entry::Prompt,
                        _ => Entry::Other,
                    };
                    entries.push((entry, text));
                }
                array(object, "tools")
                    .filter_map(|tool| {
                        Some(OfferedTool {
                            name: str_field(tool, "name")?.to_owned(),
                            schema: tool.get("input_schema").cloned(),
                        })
                    })
                    .collect()
            }
        };
        let assistant_turns = count_model_runs(entries.iter().map(|(entry, _)| *entry));
        let since_last_prompt = match entries.iter().rposition(|(e, _)| *e == Entry::Prompt) {
            Some(position) => count_model_runs(
                entries
                    .iter()
                    .skip(position.saturating_add(1))
                    .map(|(entry, _)| *entry),
            ),
            None => assistant_turns,
        };
        let prompts = entries
            .into_iter()
            .filter(|(entry, _)| *entry == Entry::Prompt)
            .map(|(_, text)| text)
            .collect();
        Ok(ModelRequest {
            api,
            model: object
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_owned),
            stream: object
                .get("stream")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            include_usage: object
                .get("stream_options")
                .and_then(|options| options.get("include_usage"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            title_call: tools.is_empty() && system_text.contains(TITLE_MARKER),
            repairs_unicode_escapes: false,
            working_dir: stated_working_dir(&system_text),
            running_session,
            tools,
            assistant_turns,
            assistant_turns_since_last_prompt: since_last_prompt,
            prompts,
        })
    }

    /// The names of the offered tools, in request order.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|tool| tool.name.clone()).collect()
    }

    /// The offered tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&OfferedTool> {
        self.tools.iter().find(|tool| tool.name == name)
    }
}

/// An assistant turn is a maximal run of consecutive model entries (a Responses turn is several
/// items: reasoning, function calls, message).
fn count_model_runs(entries: impl Iterator<Item = Entry>) -> usize {
    let mut runs = 0usize;
    let mut in_run = false;
    for entry in entries {
        let is_model = entry == Entry::Model;
        if is_model && !in_run {
            runs = runs.saturating_add(1);
        }
        in_run = is_model;
    }
    runs
}

fn array<'a>(object: &'a Map<String, Value>, key: &str) -> impl Iterator<Item = &'a Value> {
    object
        .get(key)
        .and_then(Value::as_array)
        .map(|items| items.iter())
        .into_iter()
        .flatten()
}

fn str_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// The text of a content field: a string, or the `text` of each part of an array.
/// Codex's tool that polls a running command (`write_stdin` with empty `chars`).
pub const POLL_TOOL: &str = "write_stdin";

/// The session of a command Codex reports still running in a tool output (`Process running
/// with session ID 1234`), if it does.
fn still_running(output: Option<&Value>) -> Option<u64> {
    const MARK: &str = "Process running with session ID ";
    let text = content_text(output);
    let at = text.find(MARK)? + MARK.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text.as_str()),
                other => str_field(other, "text"),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(api: Api, body: Value) -> ModelRequest {
        ModelRequest::parse(api, body.to_string().as_bytes()).unwrap()
    }

    /// Codex's words for a command still running after its yield (`unified_exec`), and the
    /// scripted model's polls, which are not script turns.
    #[test]
    fn a_running_command_is_seen_and_polls_are_not_turns() {
        let call = |name: &str, id: &str| json!({"type": "function_call", "name": name, "call_id": id, "arguments": "{}"});
        let output = |id: &str, text: &str| json!({"type": "function_call_output", "call_id": id, "output": text});
        let running = "Chunk ID: 1a2b\nWall time: 30.0 seconds\nProcess running with session ID 4321\nOriginal token count: 3\nOutput:\npip ...";
        let exited = "Chunk ID: 3c4d\nWall time: 12.0 seconds\nProcess exited with code 0\nOriginal token count: 3\nOutput:\ndone";
        let prompt = json!({"type": "message", "role": "user", "content": "go"});
        let request = parse(
            Api::Responses,
            json!({"input": [prompt, call("exec_command", "c1"), output("c1", running)]}),
        );
        assert_eq!(request.running_session, Some(4321));
        assert_eq!(request.assistant_turns, 1);
        // Polled once, still running; then it ends: the poll counted no turn.
        let request = parse(
            Api::Responses,
            json!({"input": [prompt, call("exec_command", "c1"), output("c1", running),
                call(POLL_TOOL, "c2"), output("c2", running)]}),
        );
        assert_eq!(
            (request.running_session, request.assistant_turns),
            (Some(4321), 1)
        );
        let request = parse(
            Api::Responses,
            json!({"input": [prompt, call("exec_command", "c1"), output("c1", running),
                call(POLL_TOOL, "c2"), output("c2", exited)]}),
        );
        assert_eq!(
            (request.running_session, request.assistant_turns),
            (None, 1)
        );
    }

    #[test]
    fn chat_title_call_and_agent_call() {
        let title = parse(
            Api::ChatCompletions,
            json!({"model":"m","stream":true,"stream_options":{"include_usage":true},
                "messages":[{"role":"system","content":"You are a title generator. You output ONLY a thread title."},
                            {"role":"user","content":"do it"}]}),
        );
        assert!(title.title_call && title.stream && title.include_usage);
        let agent = parse(
            Api::ChatCompletions,
            json!({"messages":[{"role":"system","content":"x"},{"role":"user","content":[{"type":"text","text":"do it"}]},
                    {"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","content":"hello"}],
                   "tools":[{"type":"function","function":{"name":"bash","parameters":{"properties":{"command":{"type":"string"}}}}}]}),
        );
        assert!(!agent.title_call);
        assert_eq!(agent.assistant_turns, 1);
        assert_eq!(agent.prompts, vec!["do it".to_owned()]);
        assert_eq!(
            agent.tool("bash").unwrap().property_type("command"),
            Some("string")
        );
    }

    #[test]
    fn responses_items_group_into_turns() {
        let request = parse(
            Api::Responses,
            json!({"input":[
                {"type":"message","role":"developer","content":[{"type":"input_text","text":"base"}]},
                {"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context/>"}]},
                {"type":"message","role":"user","content":[{"type":"input_text","text":"first"}]},
                {"type":"reasoning","summary":[]},{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c"},
                {"type":"function_call_output","call_id":"c","output":"ok"},
                {"type":"message","role":"assistant","content":[{"type":"output_text","text":"{}"}]},
                {"type":"message","role":"user","content":[{"type":"input_text","text":"second"}]},
                {"type":"function_call","name":"exec_command","arguments":"{}","call_id":"d"}],
              "tools":[{"type":"function","name":"exec_command","parameters":{}},{"type":"namespace","name":"multi_agent_v1"},{"type":"web_search"}]}),
        );
        assert_eq!(request.assistant_turns, 3);
        assert_eq!(request.assistant_turns_since_last_prompt, 1);
        assert_eq!(request.prompts.last().map(String::as_str), Some("second"));
        assert_eq!(
            request.tool_names(),
            vec!["exec_command", "multi_agent_v1", "web_search"]
        );
    }

    #[test]
    fn the_stated_working_directory_is_read_from_claudes_system_prompt() {
        let system = "# Environment\nYou have been invoked in the following environment: \n - Primary working directory: /tmp/ws a\n - Is a git repository: true\n";
        let request = parse(
            Api::AnthropicMessages,
            json!({"system":[{"type":"text","text":system}],"messages":[]}),
        );
        assert_eq!(request.working_dir.as_deref(), Some("/tmp/ws a"));
        let relative = parse(
            Api::AnthropicMessages,
            json!({"system":"Primary working directory: ws","messages":[]}),
        );
        assert_eq!(relative.working_dir, None);
    }

    #[test]
    fn anthropic_tool_results_are_not_prompts() {
        let request = parse(
            Api::AnthropicMessages,
            json!({"system":[{"type":"text","text":"sys"}],"messages":[
                {"role":"user","content":[{"type":"text","text":"prompt"}]},
                {"role":"system","content":"env"},
                {"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]},
                {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"hello"}]}],
              "tools":[{"name":"Bash","input_schema":{"properties":{"command":{},"description":{}}}}]}),
        );
        assert_eq!(request.assistant_turns, 1);
        assert_eq!(request.assistant_turns_since_last_prompt, 1);
        assert_eq!(request.prompts, vec!["prompt".to_owned()]);
        assert!(request.tool("Bash").unwrap().has_property("description"));
    }

    #[test]
    fn bad_bodies_are_typed_errors() {
        assert!(matches!(
            ModelRequest::parse(Api::Responses, b"{nope"),
            Err(RequestError::NotJson(_))
        ));
        assert_eq!(
            ModelRequest::parse(Api::Responses, b"[1]"),
            Err(RequestError::NotAnObject)
        );
    }

    #[test]
    fn real_fixture_bodies_parse() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real-clis");
        let cases = [
            (
                "opencode/happy/mock/full_002_v1_chat_completions.json",
                Api::ChatCompletions,
                true,
                0,
            ),
            (
                "opencode/happy/mock/full_003_v1_chat_completions_tools.json",
                Api::ChatCompletions,
                false,
                10,
            ),
            (
                "codex/happy/mock/full_002_v1_responses_tools.json",
                Api::Responses,
                false,
                9,
            ),
            (
                "claude/happy/mock/full_002_v1_messages_tools.json",
                Api::AnthropicMessages,
                false,
                8,
            ),
        ];
        for (file, api, title_call, tool_count) in cases {
            let capture: Value =
                serde_json::from_slice(&std::fs::read(root.join(file)).unwrap()).unwrap();
            let body = capture.get("body").unwrap().to_string();
            let request = ModelRequest::parse(api, body.as_bytes()).unwrap();
            assert_eq!(request.title_call, title_call, "{file}");
            assert_eq!(request.tools.len(), tool_count, "{file}");
            assert_eq!(request.assistant_turns, 0, "{file}");
            assert!(request.stream, "{file}");
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            prop::sample::select(vec![
                "messages",
                "role",
                "user",
                "assistant",
                "tool",
                "system",
                "content",
                "text",
                "type",
                "message",
                "function_call",
                "reasoning",
                "tool_result",
                "tools",
                "name",
                "function",
                "input",
                "parameters",
                "input_schema",
                "You are a title generator",
            ])
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(
                    (
                        prop::sample::select(vec![
                            "messages",
                            "input",
                            "tools",
                            "role",
                            "content",
                            "type",
                            "text",
                            "function",
                            "name",
                            "system",
                            "stream",
                            "model",
                            "instructions",
                        ]),
                        inner
                    ),
                    0..6
                )
                .prop_map(|entries| Value::Object(
                    entries
                        .into_iter()
                        .map(|(key, value)| (key.to_owned(), value))
                        .collect()
                )),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn parsing_never_panics_on_odd_json(value in json_value()) {
            let body = value.to_string();
            for api in [Api::ChatCompletions, Api::Responses, Api::AnthropicMessages] {
                if let Ok(request) = ModelRequest::parse(api, body.as_bytes()) {
                    proptest::prop_assert!(
                        request.assistant_turns_since_last_prompt <= request.assistant_turns
                    );
                }
            }
        }

        #[test]
        fn parsing_never_panics_on_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            for api in [Api::ChatCompletions, Api::Responses, Api::AnthropicMessages] {
                let _ = ModelRequest::parse(api, &bytes);
            }
        }
    }
}
