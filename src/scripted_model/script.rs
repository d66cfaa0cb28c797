//! The script format: conversations chosen by a match rule, each a list of steps.
//!
//! Invariants: a loaded [`Script`] has at least one conversation, every conversation has at least
//! one step, every `times`/`repeat` count is at least 1 and every HTTP error status is 4xx/5xx.
//! Step selection ([`Conversation::resolve`]) is a pure function of the assistant-turn count and
//! the number of times each fault step was already served, so it is table-tested without a server.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A whole script file (TOML or JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Model ids listed by `GET /v1/models`.
    #[serde(default = "default_models")]
    pub models: Vec<String>,
    /// The answer to OpenCode's tool-less title-generation call.
    #[serde(default = "default_title")]
    pub title: String,
    /// Tried in order; the first whose rule matches the request wins.
    #[serde(rename = "conversation", alias = "conversations")]
    pub conversations: Vec<Conversation>,
}

fn default_models() -> Vec<String> {
    vec!["mock-model".to_owned()]
}

fn default_title() -> String {
    "Mock session title".to_owned()
}

/// One scripted conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conversation {
    pub name: String,
    #[serde(default, rename = "match")]
    pub match_rule: MatchRule,
    /// Which assistant turns select the step (see [`TurnCounting`]).
    #[serde(default)]
    pub count_turns: TurnCounting,
    #[serde(rename = "step", alias = "steps")]
    pub steps: Vec<Step>,
}

/// How a request is matched to a conversation. Prompt texts are the user messages that are not
/// tool results (for Codex this includes its `<environment_context>` message).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchRule {
    /// Matches every request.
    #[default]
    Default,
    /// Some user prompt message contains this substring.
    PromptContains(String),
    /// The last user prompt message contains this substring (a resumed session's new prompt).
    LastPromptContains(String),
}

/// Which assistant turns count when choosing the step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnCounting {
    /// Every assistant turn in the request: a resumed session continues the script.
    #[default]
    Conversation,
    /// Only assistant turns after the last user prompt: each new prompt restarts at step 0
    /// (what the prototype mock did for its `followup` scripts).
    SinceLastPrompt,
}

/// One step. Turn steps (`shell`, `write_file`, `tool`, `text`, `report`, `length`) each answer one
/// assistant turn (`repeat` consecutive turns). Fault steps (`http_error`, `hang`, `garbage`)
/// produce no turn: they are served `times` times (counted per conversation, across requests)
/// to the requests for the next turn step, then that turn step answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Call the shell tool (`bash`, `exec_command`, `Bash`) with this command.
    Shell {
        command: String,
        /// Filled in when the tool has a `description` argument (Claude's Bash).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<String>,
        /// How long Codex waits before it yields a command still running (its `yield_time_ms`;
        /// default its longest, 30 s); the scripted model then polls it until it ends.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        yield_ms: Option<u64>,
        #[serde(default = "one")]
        repeat: u32,
    },
    /// Write a file with the runtime's write tool (OpenCode `write`, Claude `Write`, autocode's
    /// direct runtime `write_file`), or a shell heredoc when there is none (Codex, read-only roles).
    WriteFile {
        path: String,
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<String>,
        #[serde(default = "one")]
        repeat: u32,
    },
    /// Call the offered tool `name` (an MCP server's `mcp__server__tool`, any tool the request
    /// offers) with these arguments.
    Tool {
        name: String,
        arguments: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<String>,
        #[serde(default = "one")]
        repeat: u32,
    },
    /// Answer plain text (ends the CLI's turn).
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<String>,
        #[serde(default = "one")]
        repeat: u32,
    },
    /// Answer a JSON report: a `StructuredOutput` (Claude) or `report` (autocode's direct runtime)
    /// tool call when offered, else compact JSON text.
    Report {
        report: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<String>,
        #[serde(default = "one")]
        repeat: u32,
    },
    /// Answer truncated text and stop for length.
    Length {
        text: String,
        #[serde(default = "one")]
        repeat: u32,
    },
    /// Answer an HTTP error in the API's error shape.
    HttpError {
        status: u16,
        #[serde(default = "one")]
        times: u32,
        /// Seconds, sent as the `retry-after` header.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after: Option<u32>,
        /// Defaults to `mock <status> error`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Keep the connection open without answering until shutdown or `seconds` pass, then close it.
    Hang {
        #[serde(default = "one")]
        times: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<u64>,
    },
    /// Answer status 200 with a body that is neither valid SSE events nor JSON.
    Garbage {
        #[serde(default = "one")]
        times: u32,
    },
}

fn one() -> u32 {
    1
}

impl Step {
    /// The serialized `kind` string (also the log's action for fault steps).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Step::Shell { .. } => "shell",
            Step::WriteFile { .. } => "write_file",
            Step::Tool { .. } => "tool",
            Step::Text { .. } => "text",
            Step::Report { .. } => "report",
            Step::Length { .. } => "length",
            Step::HttpError { .. } => "http_error",
            Step::Hang { .. } => "hang",
            Step::Garbage { .. } => "garbage",
        }
    }

    /// For a turn step, how many consecutive turns it answers; `None` for fault steps.
    fn turn_slots(&self) -> Option<u32> {
        match self {
            Step::Shell { repeat, .. }
            | Step::WriteFile { repeat, .. }
            | Step::Tool { repeat, .. }
            | Step::Text { repeat, .. }
            | Step::Report { repeat, .. }
            | Step::Length { repeat, .. } => Some(*repeat),
            Step::HttpError { .. } | Step::Hang { .. } | Step::Garbage { .. } => None,
        }
    }

    /// For a fault step, how many times it is served; `None` for turn steps.
    pub fn fault_times(&self) -> Option<u32> {
        match self {
            Step::HttpError { times, .. } | Step::Hang { times, .. } | Step::Garbage { times } => {
                Some(*times)
            }
            _ => None,
        }
    }
}

/// What a request in a conversation gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// Answer turn step `step_index`.
    Turn { step_index: usize },
    /// Serve fault step `step_index` (the caller counts it as served).
    Fault { step_index: usize },
    /// The script has no step for this turn.
    Exhausted,
}

impl Conversation {
    /// Chooses the step for the request whose assistant-turn count is `turn`.
    /// `served(i)` is how many times fault step `i` was already served.
    pub fn resolve(&self, turn: usize, served: impl Fn(usize) -> u32) -> Resolved {
        let mut turns_before: usize = 0;
        let mut pending_faults: Vec<usize> = Vec::new();
        let first_unserved = |pending: &[usize]| {
            pending.iter().copied().find(|&index| {
                let times = self
                    .steps
                    .get(index)
                    .and_then(Step::fault_times)
                    .unwrap_or(0);
                served(index) < times
            })
        };
        for (index, step) in self.steps.iter().enumerate() {
            match step.turn_slots() {
                None => pending_faults.push(index),
                Some(slots) => {
                    let slots = usize::try_from(slots).unwrap_or(usize::MAX);
                    if turn < turns_before.saturating_add(slots) {
                        return match first_unserved(&pending_faults) {
                            Some(step_index) => Resolved::Fault { step_index },
                            None => Resolved::Turn { step_index: index },
                        };
                    }
                    turns_before = turns_before.saturating_add(slots);
                    pending_faults.clear();
                }
            }
        }
        match first_unserved(&pending_faults) {
            Some(step_index) => Resolved::Fault { step_index },
            None => Resolved::Exhausted,
        }
    }
}

/// A script that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot read script {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("script {path} is not valid TOML: {message}")]
    Toml { path: PathBuf, message: String },
    #[error("script {path} is not valid JSON (line {line}, column {column}): {message}")]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("script {path}: {problem}")]
    Invalid { path: PathBuf, problem: String },
}

/// The two accepted file syntaxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptSyntax {
    Toml,
    Json,
}

impl ScriptSyntax {
    /// `.json` files are JSON; everything else is TOML.
    pub fn from_path(path: &Path) -> Self {
        match path.extension().and_then(|ext| ext.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("json") => ScriptSyntax::Json,
            _ => ScriptSyntax::Toml,
        }
    }
}

impl Script {
    /// Reads and validates a script file; the syntax follows the extension.
    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let text = crate::bounded_read::read_to_string(path, crate::bounded_read::SCRIPT_CAP)
            .map_err(|source| ScriptError::Read {
                path: path.to_owned(),
                source,
            })?;
        Script::parse(&text, ScriptSyntax::from_path(path), path)
    }

    /// Parses and validates script text; `path` only labels errors.
    pub fn parse(text: &str, syntax: ScriptSyntax, path: &Path) -> Result<Script, ScriptError> {
        let script: Script = match syntax {
            ScriptSyntax::Toml => toml::from_str(text).map_err(|error| ScriptError::Toml {
                path: path.to_owned(),
                message: error.to_string(),
            })?,
            ScriptSyntax::Json => {
                serde_json::from_str(text).map_err(|error| ScriptError::Json {
                    path: path.to_owned(),
                    line: error.line(),
                    column: error.column(),
                    message: error.to_string(),
                })?
            }
        };
        script.validate().map_err(|problem| ScriptError::Invalid {
            path: path.to_owned(),
            problem,
        })?;
        Ok(script)
    }

    fn validate(&self) -> Result<(), String> {
        if self.conversations.is_empty() {
            return Err("the script has no conversation".to_owned());
        }
        for conversation in &self.conversations {
            let name = &conversation.name;
            if conversation.steps.is_empty() {
                return Err(format!("conversation {name:?} has no step"));
            }
            for (index, step) in conversation.steps.iter().enumerate() {
                let count = step.turn_slots().or(step.fault_times()).unwrap_or(0);
                if count == 0 {
                    return Err(format!(
                        "conversation {name:?} step {index} ({}): repeat/times must be at least 1",
                        step.kind_name()
                    ));
                }
                if let Step::HttpError { status, .. } = step
                    && !(400..=599).contains(status)
                {
                    return Err(format!(
                        "conversation {name:?} step {index}: http_error status {status} is not 4xx/5xx"
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(steps: Vec<Step>) -> Conversation {
        Conversation {
            name: "c".into(),
            match_rule: MatchRule::Default,
            count_turns: TurnCounting::Conversation,
            steps,
        }
    }

    fn text(repeat: u32) -> Step {
        Step::Text {
            text: "t".into(),
            thinking: None,
            repeat,
        }
    }

    fn error(times: u32) -> Step {
        Step::HttpError {
            status: 429,
            times,
            retry_after: None,
            message: None,
        }
    }

    #[test]
    fn turns_select_steps_and_repeat_widens_a_step() {
        let conversation = conversation(vec![text(1), text(2), text(1)]);
        let never = |_| 0;
        let expected = [0, 1, 1, 2];
        for (turn, step_index) in expected.into_iter().enumerate() {
            assert_eq!(
                conversation.resolve(turn, never),
                Resolved::Turn { step_index }
            );
        }
        assert_eq!(conversation.resolve(4, never), Resolved::Exhausted);
    }

    #[test]
    fn faults_precede_their_turn_until_served() {
        let conversation = conversation(vec![text(1), error(2), text(1)]);
        assert_eq!(
            conversation.resolve(1, |_| 0),
            Resolved::Fault { step_index: 1 }
        );
        assert_eq!(
            conversation.resolve(1, |_| 1),
            Resolved::Fault { step_index: 1 }
        );
        assert_eq!(
            conversation.resolve(1, |_| 2),
            Resolved::Turn { step_index: 2 }
        );
        // A fault never applies to an earlier turn.
        assert_eq!(
            conversation.resolve(0, |_| 0),
            Resolved::Turn { step_index: 0 }
        );
    }

    #[test]
    fn trailing_faults_apply_after_the_last_turn() {
        let conversation = conversation(vec![error(3)]);
        assert_eq!(
            conversation.resolve(0, |_| 2),
            Resolved::Fault { step_index: 0 }
        );
        assert_eq!(conversation.resolve(0, |_| 3), Resolved::Exhausted);
    }

    #[test]
    fn toml_script_parses_with_defaults() {
        let text = r#"
[[conversation]]
name = "happy"
match = { prompt_contains = "out.txt" }
[[conversation.step]]
kind = "shell"
command = "echo hello > out.txt"
[[conversation.step]]
kind = "http_error"
status = 429
retry_after = 1
[[conversation.step]]
kind = "report"
report = { status = "done", checks = [] }
"#;
        let script = Script::parse(text, ScriptSyntax::Toml, Path::new("s.toml")).unwrap();
        assert_eq!(script.models, vec!["mock-model".to_owned()]);
        let conversation = &script.conversations[0];
        assert_eq!(
            conversation.match_rule,
            MatchRule::PromptContains("out.txt".into())
        );
        assert_eq!(
            conversation.steps[1],
            Step::HttpError {
                status: 429,
                times: 1,
                retry_after: Some(1),
                message: None
            }
        );
    }

    #[test]
    fn the_documented_example_script_parses() {
        let doc = include_str!("../../docs/scripted-model.md");
        let section = doc.split("## Script format").nth(1).unwrap();
        let example = section
            .split("```toml")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .unwrap();
        let script = Script::parse(example, ScriptSyntax::Toml, Path::new("doc.toml")).unwrap();
        assert_eq!(script.conversations.len(), 2);
        assert_eq!(
            script.conversations[0].count_turns,
            TurnCounting::SinceLastPrompt
        );
        assert_eq!(script.conversations[1].steps.len(), 3);
    }

    #[test]
    fn json_script_parses() {
        let text = r#"{"conversations":[{"name":"d","match":"default","steps":[{"kind":"text","text":"hi"}]}]}"#;
        let script = Script::parse(text, ScriptSyntax::Json, Path::new("s.json")).unwrap();
        assert_eq!(script.conversations[0].match_rule, MatchRule::Default);
    }

    #[test]
    fn invalid_scripts_give_typed_errors() {
        let unknown_key =
            "[[conversation]]\nname='a'\n[[conversation.step]]\nkind='text'\ntext='x'\nbogus=1\n";
        assert!(matches!(
            Script::parse(unknown_key, ScriptSyntax::Toml, Path::new("a.toml")),
            Err(ScriptError::Toml { .. })
        ));
        let bad_status =
            "[[conversation]]\nname='a'\n[[conversation.step]]\nkind='http_error'\nstatus=200\n";
        assert!(matches!(
            Script::parse(bad_status, ScriptSyntax::Toml, Path::new("a.toml")),
            Err(ScriptError::Invalid { .. })
        ));
        let zero_times =
            "[[conversation]]\nname='a'\n[[conversation.step]]\nkind='garbage'\ntimes=0\n";
        assert!(matches!(
            Script::parse(zero_times, ScriptSyntax::Toml, Path::new("a.toml")),
            Err(ScriptError::Invalid { .. })
        ));
        let no_steps = "[[conversation]]\nname='a'\nstep=[]\n";
        assert!(matches!(
            Script::parse(no_steps, ScriptSyntax::Toml, Path::new("a.toml")),
            Err(ScriptError::Invalid { .. })
        ));
        let json = "{\"conversation\": [";
        assert!(matches!(
            Script::parse(json, ScriptSyntax::Json, Path::new("a.json")),
            Err(ScriptError::Json { line: 1, .. })
        ));
    }

    fn any_step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            (1u32..4).prop_map(text),
            (1u32..4).prop_map(error),
            (1u32..3).prop_map(|times| Step::Garbage { times }),
        ]
    }

    proptest::proptest! {
        #[test]
        fn resolve_points_at_the_right_kind_of_step(
            steps in proptest::collection::vec(any_step(), 1..8),
            turn in 0usize..12,
            served in 0u32..4,
        ) {
            let conversation = conversation(steps);
            match conversation.resolve(turn, |_| served) {
                Resolved::Turn { step_index } => {
                    proptest::prop_assert!(conversation.steps[step_index].turn_slots().is_some());
                }
                Resolved::Fault { step_index } => {
                    let times = conversation.steps[step_index].fault_times();
                    proptest::prop_assert!(times.is_some_and(|times| served < times));
                }
                Resolved::Exhausted => {
                    let slots: u32 = conversation.steps.iter().filter_map(Step::turn_slots).sum();
                    proptest::prop_assert!(turn >= slots as usize);
                }
            }
        }

        #[test]
        fn script_parsing_never_panics(text in "\\PC{0,200}") {
            let _ = Script::parse(&text, ScriptSyntax::Toml, Path::new("p.toml"));
            let _ = Script::parse(&text, ScriptSyntax::Json, Path::new("p.json"));
        }
    }
}
