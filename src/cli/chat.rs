//! The requirements conversation on a terminal (`run`/`resume` when stdin and stderr are
//! terminals, or `--chat`; never with `--no-chat` or off a terminal): the open questions are
//! asked a few at a time with their proposed defaults; Enter or `/default` takes the default,
//! `/pause` stops here (a normal `WAITING_FOR_USER` pause that `autocode resume` continues).
//! Then the brief is shown (goals, constraints, acceptance criteria, set-asides, answers): `y`
//! approves that exact revision, `/pause` pauses, any other text is feedback for the
//! requirements stage, whose next brief is shown again (`run::brief_review`).
//! The prompts go through the caller's `ask` and `say`, so the conversation is the same
//! whatever terminal it runs on.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::run::brief_review::BriefDecision;
use crate::run::state::{Answer, Question};
use crate::term_text::{LINE_MAX, abridge};

/// How many questions are shown together.
pub const GROUP: usize = 3;

/// What a person's line means.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Default,
    Pause,
    Text(String),
    Unknown(String),
}

fn reply(line: &str) -> Reply {
    match line.trim() {
        "" | "/default" => Reply::Default,
        "/pause" => Reply::Pause,
        command if command.starts_with('/') && !command.contains(char::is_whitespace) => {
            Reply::Unknown(command.to_owned())
        }
        _ => Reply::Text(line.trim().to_owned()),
    }
}

/// Asks `questions` a few at a time. `None`: the person paused (or the terminal closed).
pub fn answer_questions(
    questions: &[Question],
    full_text: &str,
    mut ask: impl FnMut(&str) -> Option<String>,
    mut say: impl FnMut(&str),
) -> Option<Vec<(String, String)>> {
    say(&format!(
        "The requirements gatherer has {} open question{}. Enter or /default takes the proposed default; /pause stops here (autocode resume continues).",
        questions.len(),
        if questions.len() == 1 { "" } else { "s" }
    ));
    let mut answers = Vec::new();
    for (group, chunk) in questions.chunks(GROUP).enumerate() {
        if questions.len() > GROUP {
            let first = group * GROUP + 1;
            say(&format!(
                "questions {first}-{} of {}:",
                first + chunk.len() - 1,
                questions.len()
            ));
        }
        for q in chunk {
            say(&format!(
                "  {}: {}",
                q.id,
                abridge(&q.question, LINE_MAX, full_text)
            ));
        }
        for q in chunk {
            let prompt = format!(
                "{} [default: {}] > ",
                q.id,
                abridge(&q.proposed_default, LINE_MAX, full_text)
            );
            let text = loop {
                match reply(&ask(&prompt)?) {
                    Reply::Default => break q.proposed_default.clone(),
                    Reply::Pause => return None,
                    Reply::Text(text) => break text,
                    Reply::Unknown(command) => say(&format!(
                        "{command} is not a command here: /default or /pause"
                    )),
                }
            };
            answers.push((q.id.clone(), text));
        }
    }
    Some(answers)
}

/// The brief as shown to the person, one line each.
pub fn brief_lines(
    brief: &Value,
    answers: &BTreeMap<String, Answer>,
    full_text: &str,
) -> Vec<String> {
    let line = |text: &str| format!("    {}", abridge(text, LINE_MAX, full_text));
    let texts = |key: &str| -> Vec<String> {
        brief[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(line)
            .collect()
    };
    let mut out = Vec::new();
    if let Some(summary) = brief["summary"].as_str() {
        out.push(format!("  {}", abridge(summary, LINE_MAX, full_text)));
    }
    for (title, key) in [("goals", "goals"), ("constraints", "constraints")] {
        let items = texts(key);
        if !items.is_empty() {
            out.push(format!("  {title}:"));
            out.extend(items);
        }
    }
    let criteria: Vec<String> = brief["acceptance_criteria"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            line(&format!(
                "{}: {}",
                c["id"].as_str().unwrap_or("?"),
                c["text"].as_str().unwrap_or_default()
            ))
        })
        .collect();
    if !criteria.is_empty() {
        out.push("  acceptance criteria:".into());
        out.extend(criteria);
    }
    let set_asides = crate::verify::objective::set_asides(brief);
    if !set_asides.is_empty() {
        out.push("  set aside (not replayed):".into());
        out.extend(
            set_asides
                .iter()
                .map(|(command, reason)| line(&format!("`{command}`: {reason}"))),
        );
    }
    if !answers.is_empty() {
        out.push("  answers:".into());
        out.extend(
            answers
                .iter()
                .map(|(id, a)| line(&format!("{id}: {} ({})", a.text, a.source))),
        );
    }
    out
}

/// Shows the brief revision `token` names and asks: `y` approves it, `/pause` (or a closed
/// terminal) pauses, any other text is feedback.
pub fn review_brief(
    brief: &Value,
    answers: &BTreeMap<String, Answer>,
    token: &str,
    full_text: &str,
    mut ask: impl FnMut(&str) -> Option<String>,
    mut say: impl FnMut(&str),
) -> BriefDecision {
    say(&format!("brief revision {token}:"));
    for line in brief_lines(brief, answers, full_text) {
        say(&line);
    }
    say(
        "y approves this brief; /pause stops here; any other text is feedback and the brief is written again.",
    );
    loop {
        let Some(line) = ask("brief> ") else {
            return BriefDecision::Pause;
        };
        match line.trim() {
            "" => {}
            "y" | "Y" | "yes" => return BriefDecision::Approve,
            "/pause" => return BriefDecision::Pause,
            command if command.starts_with('/') && !command.contains(char::is_whitespace) => {
                say(&format!(
                    "{command} is not a command here: y, /pause or feedback"
                ));
            }
            text => return BriefDecision::Feedback(text.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn questions(n: usize) -> Vec<Question> {
        (1..=n)
            .map(|i| Question {
                id: format!("Q{i}"),
                question: format!("question {i}?"),
                proposed_default: format!("default {i}"),
            })
            .collect()
    }

    fn converse(n: usize, lines: &[&str]) -> (Option<Vec<(String, String)>>, Vec<String>) {
        let mut input = lines.iter().map(|l| (*l).to_owned());
        let mut shown = Vec::new();
        let mut said = Vec::new();
        let answers = answer_questions(
            &questions(n),
            "status",
            |prompt| {
                shown.push(prompt.to_owned());
                input.next()
            },
            |line| said.push(line.to_owned()),
        );
        said.extend(shown);
        (answers, said)
    }

    #[test]
    fn defaults_answers_and_unknown_commands() {
        let (answers, said) = converse(4, &["", "/default", "/defualt", "mine", "  yes  ", "x"]);
        assert_eq!(
            answers,
            Some(vec![
                ("Q1".into(), "default 1".into()),
                ("Q2".into(), "default 2".into()),
                ("Q3".into(), "mine".into()),
                ("Q4".into(), "yes".into()),
            ])
        );
        assert!(said.iter().any(|l| l == "questions 1-3 of 4:"), "{said:?}");
        assert!(said.iter().any(|l| l == "questions 4-4 of 4:"), "{said:?}");
        assert!(
            said.iter()
                .any(|l| l.starts_with("/defualt is not a command")),
            "{said:?}"
        );
        assert!(
            said.iter().any(|l| l == "Q1 [default: default 1] > "),
            "{said:?}"
        );
    }

    #[test]
    fn the_brief_is_shown_and_decided() {
        let brief = serde_json::json!({
            "summary": "A greeting.",
            "goals": ["hello.txt exists"],
            "constraints": ["no network"],
            "acceptance_criteria": [{"id": "AC1", "text": "contains hello"}],
            "set_aside_commands": [{"command": "make deploy", "reason": "needs credentials"}]
        });
        let answers = BTreeMap::from([(
            "Q1".to_owned(),
            Answer {
                text: "hello.txt".into(),
                source: "user".into(),
            },
        )]);
        let decide = |lines: &[&str]| {
            let mut input = lines.iter().map(|l| (*l).to_owned());
            let mut said = Vec::new();
            let decision = review_brief(
                &brief,
                &answers,
                "b1:ab",
                "status",
                |_| input.next(),
                |line| said.push(line.to_owned()),
            );
            (decision, said)
        };
        let (decision, said) = decide(&["", "/nope", "y"]);
        assert_eq!(decision, BriefDecision::Approve);
        for shown in [
            "brief revision b1:ab:",
            "    hello.txt exists",
            "    no network",
            "    AC1: contains hello",
            "    `make deploy`: needs credentials",
            "    Q1: hello.txt (user)",
        ] {
            assert!(said.iter().any(|l| l == shown), "{shown}: {said:?}");
        }
        assert!(
            said.iter().any(|l| l.starts_with("/nope is not")),
            "{said:?}"
        );
        assert_eq!(
            decide(&["  also a README  "]).0,
            BriefDecision::Feedback("also a README".into())
        );
        assert_eq!(decide(&["/pause"]).0, BriefDecision::Pause);
        assert_eq!(decide(&[]).0, BriefDecision::Pause, "end of input");
    }

    #[test]
    fn pause_or_a_closed_terminal_stops_without_answers() {
        assert_eq!(converse(2, &["a", "/pause"]).0, None);
        assert_eq!(converse(2, &["a"]).0, None, "end of input");
    }
}
