//! Coverage of the objective: every acceptance criterion of the brief quotes the part of the
//! objective it covers (`covers`); autocode computes the sentences no criterion cites, hands them
//! to the plan reviewer and the completion reviewer, and requires an explicit verdict on each
//! (`uncovered`: covered elsewhere, out of scope because …, or not done). "Not done" is a
//! blocking concern for the plan and keeps the run from COMPLETE.

use std::collections::BTreeMap;

use serde_json::Value;

use super::state::{Finding, RunState};
use super::verify::sentences;

/// Lowercase, backticks and emphasis dropped, whitespace collapsed: how quotes are compared.
pub fn normalize(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '`' | '*'))
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Quotes shorter than this (normalized) cite nothing: "a" would otherwise cover every sentence.
const MIN_QUOTE: usize = 8;

/// Every `covers` quote of the brief.
fn quotes(brief: &Value) -> Vec<String> {
    brief["acceptance_criteria"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["covers"].as_array().cloned().unwrap_or_default())
        .filter_map(|q| q.as_str().map(str::to_owned))
        .collect()
}

/// Problems with a requirements report's quotes: each must be in the objective, verbatim.
pub fn quote_problems(objective: &str, brief: &Value) -> Vec<String> {
    let objective = normalize(objective);
    let mut problems = Vec::new();
    for c in brief["acceptance_criteria"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let id = c["id"].as_str().unwrap_or_default();
        for q in c["covers"].as_array().into_iter().flatten() {
            let q = q.as_str().unwrap_or_default();
            if !objective.contains(&normalize(q)) {
                problems.push(format!(
                    "criterion {id:?} covers {q:?}, which is not in the objective: quote the objective verbatim"
                ));
            }
        }
    }
    problems
}

/// The sentences of the objective (at least three words) that no criterion of the accepted
/// brief cites: a sentence is cited when a quote lies within it or it lies within a quote.
pub fn uncovered(state: &RunState) -> Vec<String> {
    let Some(brief) = &state.brief else {
        return Vec::new();
    };
    let quotes: Vec<String> = quotes(brief)
        .iter()
        .map(|q| normalize(q))
        .filter(|q| q.len() >= MIN_QUOTE)
        .collect();
    sentences(&state.objective)
        .into_iter()
        .filter(|s| s.split_whitespace().count() >= 3)
        .filter(|s| {
            let n = normalize(s);
            !quotes
                .iter()
                .any(|q| n.contains(q.as_str()) || q.contains(&n))
        })
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Problems with a reviewer's `uncovered` verdicts: exactly one per uncovered sentence.
pub fn verdict_problems(state: &RunState, report: &Value) -> Vec<String> {
    let wanted = uncovered(state);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for v in report["uncovered"].as_array().into_iter().flatten() {
        let sentence = v["sentence"].as_str().unwrap_or_default();
        let n = normalize(sentence);
        match wanted.iter().find(|w| normalize(w) == n) {
            Some(w) => *seen.entry(w.clone()).or_default() += 1,
            None => problems.push(format!(
                "uncovered names {sentence:?}, which is not one of the listed sentences"
            )),
        }
    }
    for w in &wanted {
        match seen.get(w).copied().unwrap_or(0) {
            1 => {}
            0 => problems.push(format!("no verdict on the uncovered sentence {w:?}")),
            n => problems.push(format!("{n} verdicts on the uncovered sentence {w:?}")),
        }
    }
    problems
}

/// The `not_done` verdicts of a review, as (sentence, reason).
pub fn not_done(report: &Value) -> Vec<(String, String)> {
    report["uncovered"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["verdict"] == "not_done")
        .map(|v| {
            (
                v["sentence"].as_str().unwrap_or_default().to_owned(),
                v["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The completion reviewer's `not_done` verdicts as blocking findings of `milestone`.
pub fn not_done_findings(report: &Value, milestone: usize) -> Vec<Finding> {
    not_done(report)
        .into_iter()
        .enumerate()
        .map(|(i, (sentence, reason))| Finding {
            id: format!("objective-not-done-{}", i + 1),
            milestone,
            text: format!("the objective asks for this and it is not done: {sentence} ({reason})"),
            source: "completion".into(),
        })
        .collect()
}

/// The prompt section for the plan and completion reviewers.
pub fn prompt_section(state: &RunState) -> String {
    let list = uncovered(state);
    let mut out = String::from("\n# Parts of the objective no acceptance criterion cites\n\n");
    if list.is_empty() {
        out.push_str("None: answer with \"uncovered\": [].\n");
        return out;
    }
    out.push_str("Give exactly one verdict on each sentence in \"uncovered\" (the sentence as written here): covered_elsewhere (say where), out_of_scope (say why), or not_done. A not_done verdict blocks the plan and the completion.\n\n");
    for s in list {
        out.push_str(&format!("- {s}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::flow::tests::new_state;
    use serde_json::json;

    #[test]
    fn sentences_no_criterion_cites_are_uncovered() {
        let mut state = new_state();
        state.objective = "Implement `count_vowels(text)` in `vowels.py`. Also implement `count_consonants(text)`. Use only the standard library.".into();
        let brief = json!({"acceptance_criteria": [
            {"id": "AC1", "text": "vowels", "covers": ["Implement count_vowels(text) in vowels.py"]},
            {"id": "AC2", "text": "stdlib", "covers": ["use only the standard   library"]}]});
        assert!(quote_problems(&state.objective, &brief).is_empty());
        assert_eq!(
            quote_problems(
                &state.objective,
                &json!({"acceptance_criteria": [{"id": "X", "covers": ["count everything"]}]})
            )
            .len(),
            1
        );
        state.brief = Some(brief);
        assert_eq!(
            uncovered(&state),
            ["Also implement `count_consonants(text)`."]
        );
        let good = json!({"uncovered": [{"sentence": "Also implement `count_consonants(text)`.", "verdict": "not_done", "reason": "dropped"}]});
        assert!(verdict_problems(&state, &good).is_empty());
        assert_eq!(verdict_problems(&state, &json!({"uncovered": []})).len(), 1);
        let extra = json!({"uncovered": [
            {"sentence": "Also implement count_consonants(text).", "verdict": "out_of_scope", "reason": "x"},
            {"sentence": "Something else entirely.", "verdict": "not_done", "reason": "x"}]});
        assert_eq!(verdict_problems(&state, &extra).len(), 1);
        assert_eq!(not_done(&good).len(), 1);
        assert_eq!(not_done_findings(&good, 0)[0].id, "objective-not-done-1");
        assert!(prompt_section(&state).contains("count_consonants"));
    }

    #[test]
    fn a_quote_of_the_whole_objective_covers_every_sentence() {
        let mut state = new_state();
        state.objective = "Fix it.\n\nKeep the tests passing and add one.".into();
        state.brief = Some(json!({"acceptance_criteria": [
            {"id": "AC1", "text": "t", "covers": ["Fix it. Keep the tests passing and add one."]}]}));
        assert!(uncovered(&state).is_empty());
        assert!(prompt_section(&state).contains("\"uncovered\": []"));
    }
}
