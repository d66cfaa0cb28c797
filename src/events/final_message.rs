//! The "final message that is only a shell command" rule (a known provider defect, #512).
//!
//! A final message counts as only a command when it is a JSON object whose keys are `cmd` or
//! `command` (holding a command) plus, at most, the other arguments of a Codex shell call
//! (`workdir`, `timeout_ms`, `yield_time_ms`, `max_output_tokens`, `shell`, `login`,
//! `with_escalated_permissions`, `justification`), and none of its keys is a field of the
//! stage's schema. Such a message is rejected with [`ShellCommandFinalMessage`] and never run.
//! A command whose text embeds a JSON report is still a command: it is not unwrapped.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The keys that hold the command itself.
pub const COMMAND_KEYS: [&str; 2] = ["cmd", "command"];
/// The other arguments of a Codex shell call that may accompany it.
pub const SHELL_CALL_ARGUMENTS: [&str; 8] = [
    "workdir",
    "timeout_ms",
    "yield_time_ms",
    "max_output_tokens",
    "shell",
    "login",
    "with_escalated_permissions",
    "justification",
];

/// The typed rejection of a final message that is a shell call's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error(
    "Provider final message is a shell command ({{\"{key}\": {command:?}}}) instead of the JSON report"
)]
pub struct ShellCommandFinalMessage {
    /// `cmd` or `command`.
    pub key: String,
    /// The command text (an argv array joined with spaces).
    pub command: String,
}

/// What a final message is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FinalMessage {
    /// A JSON object to check against the stage's schema.
    Report { object: Map<String, Value> },
    /// A shell call's arguments: rejected, never executed.
    ShellCommandFinalMessage { rejection: ShellCommandFinalMessage },
    /// Not a JSON object at all.
    NotJsonObject { error: String },
}

/// The command a `cmd`/`command` value holds: a non-blank string, or a non-empty array of
/// strings (an argv).
fn command_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Array(items) if !items.is_empty() => {
            let parts: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
            parts.map(|p| p.join(" ")).filter(|s| !s.trim().is_empty())
        }
        _ => None,
    }
}

/// Strip one Markdown code fence around the whole message, if there is one.
fn unfence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return trimmed;
    };
    // Drop the info string (`json`) on the opening line.
    match body.split_once('\n') {
        Some((info, inner)) if !info.contains('{') => inner.trim(),
        _ => body.trim(),
    }
}

/// Classify a stage's final message. `schema_fields` are the top-level property names of the
/// stage's report schema.
pub fn classify_final_message(text: &str, schema_fields: &[&str]) -> FinalMessage {
    let body = unfence(text);
    let object = match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(object)) => object,
        Ok(other) => {
            return FinalMessage::NotJsonObject {
                error: format!("expected a JSON object, found {}", json_kind(&other)),
            };
        }
        Err(error) => {
            return FinalMessage::NotJsonObject {
                error: error.to_string(),
            };
        }
    };
    match shell_command(&object, schema_fields) {
        Some(rejection) => FinalMessage::ShellCommandFinalMessage { rejection },
        None => FinalMessage::Report { object },
    }
}

fn shell_command(
    object: &Map<String, Value>,
    schema_fields: &[&str],
) -> Option<ShellCommandFinalMessage> {
    if object.keys().any(|k| schema_fields.contains(&k.as_str())) {
        return None;
    }
    let only_shell_keys = object
        .keys()
        .all(|k| COMMAND_KEYS.contains(&k.as_str()) || SHELL_CALL_ARGUMENTS.contains(&k.as_str()));
    if !only_shell_keys {
        return None;
    }
    let mut found = None;
    for key in COMMAND_KEYS {
        if let Some(value) = object.get(key) {
            // Every command key present must hold a command.
            let command = command_text(value)?;
            found.get_or_insert(ShellCommandFinalMessage {
                key: key.to_owned(),
                command,
            });
        }
    }
    found
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &[&str] = &["status", "summary", "checks"];

    fn is_command(text: &str, schema: &[&str]) -> bool {
        matches!(
            classify_final_message(text, schema),
            FinalMessage::ShellCommandFinalMessage { .. }
        )
    }

    #[test]
    fn shell_command_rule_table() {
        let table: &[(&str, &[&str], bool)] = &[
            // The reference example (#512).
            (r#"{"cmd": "ls docs/ && wc -l docs/*.md"}"#, SCHEMA, true),
            (r#"{"command": "cargo test"}"#, SCHEMA, true),
            (
                r#"{"command": ["bash", "-lc", "cargo test"]}"#,
                SCHEMA,
                true,
            ),
            (
                r#"{"cmd": "make", "workdir": "/ws", "timeout_ms": 1000, "yield_time_ms": 10, "max_output_tokens": 100, "shell": "bash", "login": true, "with_escalated_permissions": false, "justification": "x"}"#,
                SCHEMA,
                true,
            ),
            // Fenced, still a command.
            ("```json\n{\"cmd\": \"ls\"}\n```", SCHEMA, true),
            // A command embedding a report is still a command.
            (
                r#"{"cmd": "echo '{\"status\":\"done\",\"summary\":\"x\",\"checks\":[]}'"}"#,
                SCHEMA,
                true,
            ),
            // No command key: only arguments.
            (r#"{"workdir": "/ws"}"#, SCHEMA, false),
            // A key outside the shell-call arguments.
            (r#"{"cmd": "ls", "status": "done"}"#, SCHEMA, false),
            (
                r#"{"cmd": "ls", "sandbox_permissions": "x"}"#,
                SCHEMA,
                false,
            ),
            // A command key that is a schema field: it is the report.
            (r#"{"command": "ls"}"#, &["command", "exit_code"], false),
            (r#"{"cmd": "ls", "workdir": "/"}"#, &["workdir"], false),
            // Not holding a command.
            (r#"{"cmd": ""}"#, SCHEMA, false),
            (r#"{"cmd": 3}"#, SCHEMA, false),
            (r#"{"cmd": []}"#, SCHEMA, false),
            (r#"{"cmd": "ls", "command": 5}"#, SCHEMA, false),
            // An ordinary report.
            (
                r#"{"status": "done", "summary": "x", "checks": []}"#,
                SCHEMA,
                false,
            ),
        ];
        for (text, schema, expected) in table {
            assert_eq!(is_command(text, schema), *expected, "{text}");
        }
    }

    #[test]
    fn rejection_names_the_command() {
        let FinalMessage::ShellCommandFinalMessage { rejection } =
            classify_final_message(r#"{"cmd": "ls docs/"}"#, SCHEMA)
        else {
            panic!("expected a rejection");
        };
        assert_eq!(rejection.key, "cmd");
        assert_eq!(rejection.command, "ls docs/");
        assert!(
            rejection
                .to_string()
                .starts_with("Provider final message is a shell command ({\"cmd\": \"ls docs/\"})")
        );
    }

    #[test]
    fn non_objects_are_not_reports() {
        for text in [
            "All done! I created out.txt (this reply is deliberately not JSON).",
            "[1, 2]",
            "\"cmd\"",
            "",
        ] {
            assert!(
                matches!(
                    classify_final_message(text, SCHEMA),
                    FinalMessage::NotJsonObject { .. }
                ),
                "{text}"
            );
        }
        assert!(matches!(
            classify_final_message(r#"{"status": "weird", "summary": 42}"#, SCHEMA),
            FinalMessage::Report { .. }
        ));
    }
}
