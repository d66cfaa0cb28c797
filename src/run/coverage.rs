//! Coverage of the objective: every acceptance criterion of the brief quotes the part of the
//! objective it covers (`covers`); autocode computes the units of the objective (list items,
//! table rows, headings, sentences: `objective::units`) no criterion covers, hands them to the
//! plan reviewer and the completion reviewer, and requires an explicit verdict on each
//! (`uncovered`: covered elsewhere by a named criterion whose text quotes it, out of scope
//! because …, or not done). A unit is covered only by quotes that span at least half of it: one
//! quoted bullet does not cover its sibling, and a generic fragment covers nothing. "Not done" is
//! a blocking concern for the plan and keeps the run from COMPLETE.

use std::collections::BTreeMap;

use serde_json::Value;

use super::state::{Finding, RunState};
use crate::verify::objective::units;

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

/// A unit counts as covered when quotes span at least this share of it (in characters).
const SUBSTANTIAL: f64 = 0.5;

/// Where each of `needles` lies in `haystack` (all occurrences, byte ranges).
fn occurrences(haystack: &str, needle: &str) -> Vec<(usize, usize)> {
    if needle.is_empty() {
        return Vec::new();
    }
    haystack
        .match_indices(needle)
        .map(|(at, m)| (at, at + m.len()))
        .collect()
}

/// How much of `span` the `ranges` cover, as a share of its length.
fn covered_share(span: (usize, usize), ranges: &[(usize, usize)]) -> f64 {
    let (start, end) = span;
    if end <= start {
        return 0.0;
    }
    let mut clipped: Vec<(usize, usize)> = ranges
        .iter()
        .map(|&(a, b)| (a.max(start), b.min(end)))
        .filter(|(a, b)| a < b)
        .collect();
    clipped.sort();
    let mut covered = 0usize;
    let mut reach = start;
    for (a, b) in clipped {
        let a = a.max(reach);
        if b > a {
            covered += b - a;
            reach = b;
        }
    }
    covered as f64 / (end - start) as f64
}

/// The units of `objective` (at least three words) that `quotes` do not cover: a unit is covered
/// when the quotes' occurrences in the objective span at least half of it.
pub fn uncovered_units(objective: &str, quotes: &[String]) -> Vec<String> {
    let text = normalize(objective);
    let ranges: Vec<(usize, usize)> = quotes
        .iter()
        .map(|q| normalize(q))
        .filter(|q| q.len() >= MIN_QUOTE)
        .flat_map(|q| occurrences(&text, &q))
        .collect();
    let mut cursor = 0usize;
    let mut out = Vec::new();
    for unit in units(objective) {
        let n = normalize(&unit);
        let at = text[cursor.min(text.len())..]
            .find(&n)
            .map(|p| p + cursor)
            .or_else(|| text.find(&n));
        let share = match at {
            Some(at) => {
                cursor = at + n.len();
                covered_share((at, at + n.len()), &ranges)
            }
            // Not found as written (it should always be): only a quote holding it covers it.
            None => {
                if quotes.iter().any(|q| normalize(q).contains(&n)) {
                    1.0
                } else {
                    0.0
                }
            }
        };
        if unit.split_whitespace().count() >= 3 && share < SUBSTANTIAL {
            out.push(unit);
        }
    }
    out
}

/// The units of the objective (at least three words) no criterion of the accepted brief covers.
pub fn uncovered(state: &RunState) -> Vec<String> {
    let Some(brief) = &state.brief else {
        return Vec::new();
    };
    uncovered_units(&state.objective, &quotes(brief))
}

/// Whether `text` (a criterion's text or quotes) quotes a substantial part of `unit`.
fn quotes_unit(unit: &str, texts: &[String]) -> bool {
    let n = normalize(unit);
    !n.is_empty()
        && (texts.iter().any(|t| normalize(t).contains(&n))
            || uncovered_units(unit, texts).is_empty())
}

/// Every criterion a verdict can name: the brief's (text and quotes) and the plans' (text), by id.
fn named_criteria(state: &RunState) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    if let Some(brief) = &state.brief {
        for c in brief["acceptance_criteria"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let mut texts: Vec<String> = c["covers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|q| q.as_str().map(str::to_owned))
                .collect();
            texts.extend(c["text"].as_str().map(str::to_owned));
            out.push((c["id"].as_str().unwrap_or_default().to_owned(), texts));
        }
    }
    let plans = [state.latest_plan(), state.approved_plan()];
    for plan in plans.into_iter().flatten() {
        for m in plan.plan["milestones"].as_array().into_iter().flatten() {
            for c in m["acceptance_criteria"].as_array().into_iter().flatten() {
                out.push((
                    c["id"].as_str().unwrap_or_default().to_owned(),
                    c["text"].as_str().map(str::to_owned).into_iter().collect(),
                ));
            }
        }
    }
    out
}

/// Whether `reason` names `id` as a word of its own.
fn names(reason: &str, id: &str) -> bool {
    !id.is_empty()
        && reason.match_indices(id).any(|(at, _)| {
            let before = reason[..at].chars().next_back();
            let after = reason[at + id.len()..].chars().next();
            let part = |c: Option<char>| {
                c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.')
            };
            let continues = part(after) && after != Some('.');
            !part(before) && !continues
        })
}

/// Why a `covered_elsewhere` verdict on `unit` does not hold, if it does not: its reason must
/// name a criterion (of the brief or the plan) whose text or quotes quote that unit.
fn elsewhere_problem(state: &RunState, unit: &str, reason: &str) -> Option<String> {
    let criteria = named_criteria(state);
    let named: Vec<&(String, Vec<String>)> = criteria
        .iter()
        .filter(|(id, _)| names(reason, id))
        .collect();
    if named.is_empty() {
        let ids: Vec<&str> = criteria.iter().map(|(id, _)| id.as_str()).collect();
        return Some(format!(
            "the covered_elsewhere verdict on {unit:?} names no criterion: its reason must name the criterion that covers it (one of: {})",
            ids.join(", ")
        ));
    }
    if named.iter().any(|(_, texts)| quotes_unit(unit, texts)) {
        return None;
    }
    let mut ids: Vec<&str> = named.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort();
    ids.dedup();
    Some(format!(
        "the covered_elsewhere verdict on {unit:?} names {}, whose text does not quote it: name a criterion that states this unit, or answer not_done or out_of_scope",
        ids.join(", ")
    ))
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
            Some(w) => {
                *seen.entry(w.clone()).or_default() += 1;
                if v["verdict"] == "covered_elsewhere"
                    && let Some(problem) =
                        elsewhere_problem(state, w, v["reason"].as_str().unwrap_or_default())
                {
                    problems.push(problem);
                }
            }
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
    out.push_str("Give exactly one verdict on each part in \"uncovered\" (in \"sentence\", as written here): covered_elsewhere (the reason names the criterion id whose text states this part), out_of_scope (say why), or not_done. A not_done verdict blocks the plan and the completion.\n\n");
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

    /// The class of issue 25 item 1: bullets without full stops are units of their own, and a
    /// quote covers a unit only when it spans at least half of it.
    #[test]
    fn a_quoted_bullet_does_not_cover_its_sibling_nor_a_fragment_a_sentence() {
        let objective = "La bibliothèque doit offrir deux fonctions\n* `slugify(title)` turns a title into a URL slug\n* `deslugify(slug)` turns a slug back into words\n\nBoth functions must handle the empty string gracefully and the README documents them.";
        let one = vec!["`slugify(title)` turns a title into a URL slug".to_owned()];
        assert_eq!(
            uncovered_units(objective, &one),
            [
                "La bibliothèque doit offrir deux fonctions",
                "`deslugify(slug)` turns a slug back into words",
                "Both functions must handle the empty string gracefully and the README documents them.",
            ]
        );
        // A generic fragment of the last sentence covers nothing; most of it does.
        let fragment = vec!["the empty string".to_owned(), "documents them".to_owned()];
        assert_eq!(uncovered_units(objective, &fragment).len(), 4);
        let most = vec!["Both functions must handle the empty string gracefully".to_owned()];
        assert_eq!(uncovered_units(objective, &most).len(), 3);
        // Quotes add up, also across units.
        let all = vec![
            "La bibliothèque doit offrir deux fonctions * `slugify(title)` turns a title into a URL slug".to_owned(),
            "turns a slug back into words".to_owned(),
            "`deslugify(slug)`".to_owned(),
            "Both functions must handle the empty string gracefully and the README".to_owned(),
        ];
        assert!(uncovered_units(objective, &all).is_empty());
    }

    #[test]
    fn covered_elsewhere_names_a_criterion_that_quotes_the_unit() {
        let mut state = new_state();
        state.objective = "Add `--json` to the CLI.\n- it prints one object per line\n- errors go to stderr as JSON too\n".into();
        state.brief = Some(json!({"acceptance_criteria": [
            {"id": "AC1", "text": "json flag", "covers": ["Add `--json` to the CLI.", "it prints one object per line"]},
            {"id": "AC2", "text": "stderr stays human", "covers": ["Add `--json`"]}]}));
        let unit = "errors go to stderr as JSON too";
        assert_eq!(uncovered(&state), [unit]);
        let verdict = |reason: &str| json!({"uncovered": [{"sentence": unit, "verdict": "covered_elsewhere", "reason": reason}]});
        let unnamed = verdict_problems(&state, &verdict("the plan handles it"));
        assert!(unnamed[0].contains("names no criterion"), "{unnamed:?}");
        let wrong = verdict_problems(&state, &verdict("see AC2"));
        assert!(wrong[0].contains("does not quote it"), "{wrong:?}");
        let mut brief = state.brief.clone().unwrap();
        brief["acceptance_criteria"][1]["text"] =
            json!("Errors go to stderr as JSON too, one object each");
        state.brief = Some(brief);
        assert!(verdict_problems(&state, &verdict("covered by AC2.")).is_empty());
        assert!(verdict_problems(&state, &verdict("covered by XAC2")).len() == 1);
    }
}
