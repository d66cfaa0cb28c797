//! The runtime's steering words and bounds, so that a small model finishes its stage: the report
//! schema it is offered, what it is told after each response (how many remain, that a text
//! answer is not a report, that a shell command answered as text was not run), the opening a cut
//! text answer leaves in the history, and [`RepeatWatch`], which notices a model going round in
//! circles (the same calls with the same results, a third time) so the next response can only
//! be the report.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use serde_json::Value;

use crate::direct::protocol::{ToolCall, ToolResult};
use crate::report::ReportKind;

/// The reminder after a response that neither called a tool nor reported.
pub const REPORT_REMINDER: &str = "You ended your turn without calling the `report` tool. Text answers are not reports: call `report` with the stage's report (its arguments are the report), or keep working with the tools.";

/// Characters of a text answer (with no tool call begun) after which autocode stops reading it,
/// or a quarter as many text pieces (`stream::ProseWatch`): about 400 tokens, far more than any
/// preamble to a tool call, far less than the response cap.
pub const PROSE_CUT_CHARS: usize = 1600;

/// The opening of a cut text answer, as the history keeps it: its first sentence, at most 200
/// characters, marked as cut.
pub(super) fn opening(text: &str) -> String {
    let text = text.trim_start();
    let mut end = text.len();
    for (i, c) in text.char_indices() {
        if i >= 200 {
            end = i;
            break;
        }
        if matches!(c, '.' | '!' | '?' | '\n') && i > 0 {
            end = i + c.len_utf8();
            break;
        }
    }
    format!("{} […]", text[..end].trim_end())
}

/// The reminder after a text answer autocode cut.
pub const CUT_REMINDER: &str = "Your answer was text without a tool call, so autocode stopped reading it. Text answers are not reports: call `report` with the stage's report (its arguments are the report).";

/// The reminder after a response without a tool call: when its text is only a shell command
/// (the final-message rule of `crate::events::final_message`, as for a CLI's final message), it
/// says so and that autocode did not run it; otherwise [`REPORT_REMINDER`].
pub fn reminder_after_text(text: Option<&str>, kind: ReportKind) -> String {
    match shell_command_answer(text, kind) {
        Some(rejection) => {
            let command = serde_json::json!({ rejection.key.clone(): rejection.command });
            format!(
                "Your final message was a shell command ({command}) instead of the report. autocode did not run it. {REPORT_REMINDER}"
            )
        }
        None => REPORT_REMINDER.to_owned(),
    }
}

/// The command, when a response's text is only a shell command (the final-message rule).
pub(super) fn shell_command_answer(
    text: Option<&str>,
    kind: ReportKind,
) -> Option<crate::events::ShellCommandFinalMessage> {
    let fields = kind.top_level_fields();
    let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    match crate::events::classify_final_message(text?, &fields) {
        crate::events::FinalMessage::ShellCommandFinalMessage { rejection } => Some(rejection),
        _ => None,
    }
}

/// How many times one response (the same calls, the same results) may be seen in a stage
/// before the model is taken to be going round in circles.
pub const REPEATS_BEFORE_REPORT: u32 = 3;

/// Notices a model that repeats itself: a response whose calls (names and arguments) and results
/// (outputs, error flags) are exactly those of two earlier responses of the stage. Measured with
/// the 1.5B model: a builder that had written its file ran `echo … > hello.txt`, `grep …`,
/// `test -f …` in turn until its 32 responses were spent. A model making progress changes what it
/// runs or what it gets back, so this never fires on honest work that moves. A command's event
/// id (new every run) is not part of its result here.
#[derive(Debug, Default)]
pub struct RepeatWatch {
    seen: HashMap<u64, u32>,
}

impl RepeatWatch {
    /// Records one response's calls and their results; `true` once this exact response has been
    /// seen [`REPEATS_BEFORE_REPORT`] times.
    pub fn repeated(&mut self, calls: &[ToolCall], results: &[ToolResult]) -> bool {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for call in calls {
            call.name.hash(&mut hasher);
            call.arguments.to_string().hash(&mut hasher);
        }
        for result in results {
            result.is_error.hash(&mut hasher);
            without_event_id(&result.output).hash(&mut hasher);
        }
        let count = self.seen.entry(hasher.finish()).or_default();
        *count += 1;
        *count >= REPEATS_BEFORE_REPORT
    }
}

/// A shell result without its first line when that names the command's event id.
fn without_event_id(output: &str) -> &str {
    match output.split_once('\n') {
        Some((first, rest)) if first.starts_with("event id: ") => rest,
        _ => output,
    }
}

/// What the model of a read-only stage is told when a command it ran was refused a write.
/// Measured with the 1.5B model: its requirements stage tried to create the objective's file,
/// got `Read-only file system`, and wrote "the objective cannot be completed because the
/// workspace is read-only" into its brief, which every later stage (the builder's included)
/// then repeated as a blocker.
pub const READ_ONLY_NOTE: &str = "[autocode: this stage may not change the workspace, by design; a later builder stage makes the changes, in a workspace it may write. A write refused here is not a blocker and not a fact about the objective: say in your report what must change.]";

/// Whether a failed command's output says it was refused a write (the room of a read-only stage
/// refuses silently: the command's own words are what there is).
pub fn refused_a_write(output: &str) -> bool {
    let output = output.to_ascii_lowercase();
    [
        "read-only file system",
        "permission denied",
        "operation not permitted",
    ]
    .iter()
    .any(|words| output.contains(words))
}

/// What the model is told when it repeats itself.
pub const REPEAT_NOTE: &str = "[autocode: this is the third time you made these same calls and got these same results. Your next response must be the `report` call.]";

/// What autocode listed that a report may quote, each list for the fields that must quote it
/// ([`offered_schema`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quotable {
    /// The objective's units (`crate::verify::objective::units`): a requirements report's
    /// `covers`. None: no limit.
    pub objective_units: Vec<String>,
    /// The commands the objective shows as required checks or setup steps: a requirements
    /// report's `set_aside_commands`. None: nothing may be set aside.
    pub commands: Vec<String>,
    /// The objective's sentences no criterion cites (`crate::run::coverage::uncovered`): a plan
    /// or completion review's `uncovered`. None: `uncovered` must be empty.
    pub uncovered: Vec<String>,
}

/// The report schema offered to the model: the role's schema, with every field that quotes
/// something autocode listed limited to that list ([`Quotable`]). Every report it admits is one
/// the role's own schema admits; the checks still judge the quotes.
pub fn offered_schema(kind: ReportKind, quotable: &Quotable) -> Value {
    let mut schema = kind.cli_schema();
    match kind {
        ReportKind::Requirements => {
            if !quotable.objective_units.is_empty()
                && let Some(items) = schema
                    .pointer_mut("/properties/acceptance_criteria/items/properties/covers/items")
            {
                items["enum"] = Value::from(quotable.objective_units.clone());
            }
            limit(
                &mut schema,
                "set_aside_commands",
                "command",
                &quotable.commands,
            );
        }
        ReportKind::PlanReview | ReportKind::Completion => {
            limit(&mut schema, "uncovered", "sentence", &quotable.uncovered);
        }
        _ => {}
    }
    match kind {
        ReportKind::PlanReview => verdict_last(&mut schema, "verdict"),
        ReportKind::Completion => verdict_last(&mut schema, "decision"),
        _ => {}
    }
    schema
}

/// Moves a review's verdict after its reasons in the schema's key order. A server that constrains
/// the answer to the schema generates the keys in that order, so the model writes its summary,
/// concerns and coverage verdicts before it commits to a verdict. Measured with a 1.5B reviewer
/// (verdict first): `changes_requested` with no concern, three times in a row. The schema admits
/// exactly the same reports.
fn verdict_last(schema: &mut Value, key: &str) {
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut)
        && let Some(verdict) = properties.shift_remove(key)
    {
        properties.insert(key.to_owned(), verdict);
    }
    if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut)
        && let Some(at) = required.iter().position(|k| k == key)
    {
        let verdict = required.remove(at);
        required.push(verdict);
    }
}

/// Limits the array `field`'s items' `key` to `listed`; nothing listed: no items.
fn limit(schema: &mut Value, field: &str, key: &str, listed: &[String]) {
    let Some(array) = schema.pointer_mut(&format!("/properties/{field}")) else {
        return;
    };
    if listed.is_empty() {
        array["maxItems"] = Value::from(0);
    } else if let Some(value) = array.pointer_mut(&format!("/items/properties/{key}")) {
        value["enum"] = Value::from(listed.to_vec());
    }
}

/// The system prompt's line on the stage's response budget.
pub fn budget_line(max_responses: u32) -> String {
    format!(
        "This stage allows at most {max_responses} model responses. Each tool result says how many remain; the last one can only be the `report` call."
    )
}

/// What the model is told after each response: how many responses remain.
pub fn remaining_note(remaining: u32) -> String {
    match remaining {
        0 | 1 => {
            "[autocode: 1 model response remains for this stage: it must be the `report` call.]"
                .to_owned()
        }
        n => format!(
            "[autocode: {n} model responses remain for this stage; call `report` before they run out.]"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report;

    /// A requirements report's quotes are offered as the objective's units only: what the
    /// offered schema admits the role's schema admits too, and a quote outside it is refused by
    /// the offered schema (a constraining server cannot write it).
    #[test]
    fn a_requirements_report_is_offered_the_objective_units_as_its_only_quotes() {
        let objective = "Create hello.txt containing exactly the line `hello, world`.";
        let quotable = crate::verify::objective::units(objective);
        assert!(!quotable.is_empty());
        let offered = offered_schema(
            ReportKind::Requirements,
            &Quotable {
                objective_units: quotable.clone(),
                ..Quotable::default()
            },
        );
        let covers = &offered["properties"]["acceptance_criteria"]["items"]["properties"]["covers"];
        assert_eq!(covers["items"]["enum"], Value::from(quotable.clone()));
        let brief = |quote: &str| {
            serde_json::json!({"summary": "s", "goals": ["g"], "constraints": [],
                "acceptance_criteria": [{"id": "a1", "text": "t", "covers": [quote]}],
                "open_questions": []})
        };
        let verbatim = brief(&quotable[0]);
        assert!(jsonschema::is_valid(&offered, &verbatim));
        assert!(report::validate(ReportKind::Requirements, &verbatim).is_ok());
        assert!(crate::run::coverage::quote_problems(objective, &verbatim).is_empty());
        let invented = brief("The command runs without any errors");
        assert!(!jsonschema::is_valid(&offered, &invented));
        // Other roles, and an objective without units, get the role's schema unchanged.
        let units = Quotable {
            objective_units: quotable,
            ..Quotable::default()
        };
        assert_eq!(
            offered_schema(ReportKind::Build, &units),
            ReportKind::Build.cli_schema()
        );
        // No units: `covers` as the role's schema has it (set-asides limited as below).
        let plain = offered_schema(ReportKind::Requirements, &Quotable::default());
        assert_eq!(
            plain["properties"]["acceptance_criteria"],
            ReportKind::Requirements.cli_schema()["properties"]["acceptance_criteria"]
        );
    }

    /// A reviewer's `uncovered` sentences are offered as the sentences autocode listed only;
    /// with none listed, `uncovered` must be empty (measured with a 1.5B model: a plan review
    /// rejected for an `uncovered` sentence of its own making).
    #[test]
    fn a_reviewer_is_offered_the_listed_sentences_as_its_only_uncovered() {
        let listed = vec!["Document it in the README.".to_owned()];
        let quotable = Quotable {
            uncovered: listed.clone(),
            ..Quotable::default()
        };
        let review = |sentence: &str| {
            serde_json::json!({"verdict": "approve", "summary": "s", "concerns": [],
                "uncovered": [{"sentence": sentence, "verdict": "out_of_scope", "reason": "r"}]})
        };
        for kind in [ReportKind::PlanReview, ReportKind::Completion] {
            let offered = offered_schema(kind, &quotable);
            let sentence = &offered["properties"]["uncovered"]["items"]["properties"]["sentence"];
            assert_eq!(sentence["enum"], Value::from(listed.clone()), "{kind:?}");
        }
        let offered = offered_schema(ReportKind::PlanReview, &quotable);
        let listed_one = review(&listed[0]);
        assert!(jsonschema::is_valid(&offered, &listed_one));
        assert!(report::validate(ReportKind::PlanReview, &listed_one).is_ok());
        assert!(!jsonschema::is_valid(
            &offered,
            &review("The review is done.")
        ));
        // None listed: only an empty list.
        let none = offered_schema(ReportKind::PlanReview, &Quotable::default());
        assert!(!jsonschema::is_valid(&none, &listed_one));
        let mut empty = listed_one.clone();
        empty["uncovered"] = serde_json::json!([]);
        assert!(jsonschema::is_valid(&none, &empty));
    }

    /// A requirements report may set aside only a command the objective shows as a check or
    /// setup step (measured with a 1.5B model: it set aside `touch hello.txt`, its own refused
    /// command); the objective showing none, `set_aside_commands` must be empty or null.
    #[test]
    fn a_brief_may_set_aside_only_a_command_the_objective_shows() {
        let brief = |set_aside: Value| {
            serde_json::json!({"summary": "s", "goals": ["g"], "constraints": [],
                "acceptance_criteria": [{"id": "a1", "text": "t", "covers": ["x"]}],
                "open_questions": [], "set_aside_commands": set_aside})
        };
        let own = brief(serde_json::json!([{"command": "touch hello.txt",
            "reason": "the stage is read-only so it cannot run"}]));
        let none = offered_schema(ReportKind::Requirements, &Quotable::default());
        assert!(!jsonschema::is_valid(&none, &own));
        assert!(jsonschema::is_valid(&none, &brief(Value::Null)));
        assert!(jsonschema::is_valid(&none, &brief(serde_json::json!([]))));
        let shown = Quotable {
            commands: vec!["npm test".into()],
            ..Quotable::default()
        };
        let offered = offered_schema(ReportKind::Requirements, &shown);
        assert!(!jsonschema::is_valid(&offered, &own));
        let npm = brief(serde_json::json!([{"command": "npm test",
            "reason": "the objective names it only as an example"}]));
        assert!(jsonschema::is_valid(&offered, &npm));
        assert!(report::validate(ReportKind::Requirements, &npm).is_ok());
    }

    #[test]
    fn a_text_answer_that_is_a_shell_command_is_named_as_one() {
        let cmd = r#"{"cmd": "python3 -m unittest -q test_vowels"}"#;
        let reminder = reminder_after_text(Some(cmd), ReportKind::Build);
        assert!(
            reminder.starts_with(
                r#"Your final message was a shell command ({"cmd":"python3 -m unittest -q test_vowels"})"#
            ),
            "{reminder}"
        );
        assert!(reminder.contains("autocode did not run it"), "{reminder}");
        assert!(reminder.ends_with(REPORT_REMINDER), "{reminder}");
        // Prose, a report sent as text and no text at all get the plain reminder.
        for text in [
            Some("All done."),
            Some(r#"{"status": "done", "cmd": "x"}"#),
            None,
        ] {
            assert_eq!(
                reminder_after_text(text, ReportKind::Build),
                REPORT_REMINDER,
                "{text:?}"
            );
        }
    }

    fn call(name: &str, command: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: serde_json::json!({"command": command}),
        }
    }

    fn result(id: u32, output: &str) -> ToolResult {
        ToolResult {
            call_id: "c".into(),
            name: "shell".into(),
            output: format!("event id: event:ac-{id}\nexit code 0\noutput:\n{output}"),
            is_error: false,
        }
    }

    #[test]
    fn a_refused_write_is_told_from_other_failures() {
        assert!(refused_a_write(
            "sh: 1: cannot create hello.txt: Read-only file system\n"
        ));
        assert!(refused_a_write(
            "touch: cannot touch 'a': Permission denied"
        ));
        assert!(!refused_a_write(
            "grep: hello.txt: No such file or directory"
        ));
    }

    /// The third identical response (calls and results; event ids aside) is a repeat; a
    /// changed result or command is progress.
    #[test]
    fn the_third_identical_response_is_a_repeat_and_progress_is_not() {
        let mut watch = RepeatWatch::default();
        let grep = [call("shell", "grep -q hello hello.txt")];
        assert!(!watch.repeated(&grep, &[result(1, "")]));
        assert!(!watch.repeated(&[call("shell", "test -f hello.txt")], &[result(2, "")]));
        assert!(!watch.repeated(&grep, &[result(3, "")]));
        // The same command with another result (the tree changed): progress.
        assert!(!watch.repeated(&grep, &[result(4, "hello")]));
        assert!(watch.repeated(&grep, &[result(5, "")]));
    }
}
