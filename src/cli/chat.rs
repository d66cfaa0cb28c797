//! The requirements conversation on a terminal (`run`/`resume` when stdin and stderr are
//! terminals, or `--chat`; never with `--no-chat` or off a terminal): the open questions are
//! asked a few at a time with their proposed defaults; Enter or `/default` takes the default,
//! `/pause` stops here (a normal `WAITING_FOR_USER` pause that `autocode resume` continues).
//! The prompts go through the caller's `ask` and `say`, so the conversation is the same
//! whatever terminal it runs on.

use crate::run::state::Question;
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
    fn pause_or_a_closed_terminal_stops_without_answers() {
        assert_eq!(converse(2, &["a", "/pause"]).0, None);
        assert_eq!(converse(2, &["a"]).0, None, "end of input");
    }
}
