//! Scorecard statistics: merges the `result.json` files of any number of out folders into rows
//! per (case, profile) and a total, and renders them as text, Markdown and JUnit XML.
//!
//! Each row also says how sure it is: the Wilson score interval ([`wilson`]) of its pass rate and
//! of its false-completion rate at [`CONFIDENCE`], so merged repeats narrow the interval.
//!
//! Invariants: merging is pure over the loaded results ([`merge`]) and order-independent (rows
//! are sorted by case then profile); `false_complete` is the number CI gates on.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::result::{self, RESULT_FILE, ScenarioResult};
use super::verdict::Verdict;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no {RESULT_FILE} under {dirs}")]
    Empty { dirs: String },
}

/// The confidence level of every interval the scorecard shows.
pub const CONFIDENCE: f64 = 0.95;

/// The standard normal quantile for a two-sided [`CONFIDENCE`] interval (z of 0.975).
pub const Z_95: f64 = 1.959_963_984_540_054;

/// A closed interval of a proportion, within [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

/// The Wilson score interval of `successes` out of `trials` at the normal quantile `z`: how far
/// the true rate may lie from the observed one. Unlike the normal approximation it stays inside
/// [0, 1] and is not empty at 0 or `trials` successes (0 of 10 still allows a rate up to 0.28 at
/// 95 %). `None` without trials or with more successes than trials.
pub fn wilson(successes: u64, trials: u64, z: f64) -> Option<Interval> {
    if trials == 0 || successes > trials || !z.is_finite() || z < 0.0 {
        return None;
    }
    let n = trials as f64;
    let p = successes as f64 / n;
    let z2 = z * z;
    let denominator = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denominator;
    let half = z / denominator * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    // At 0 and at `trials` successes the bound is exactly 0 or 1: rounding must not move it.
    let low = if successes == 0 {
        0.0
    } else {
        (center - half).max(0.0)
    };
    let high = if successes == trials {
        1.0
    } else {
        (center + half).min(1.0)
    };
    Some(Interval { low, high })
}

/// One scorecard row: a (case, profile) pair, or the total.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub case: String,
    pub profile: String,
    pub runs: u64,
    pub passes: u64,
    pub false_completes: u64,
    pub honest_stops: u64,
    pub wrong_stops: u64,
    pub errors: u64,
    /// `passes / runs`; `None` without runs.
    pub pass_rate: Option<f64>,
    /// The Wilson interval of the pass rate at [`CONFIDENCE`].
    pub pass_interval: Option<Interval>,
    /// The Wilson interval of the false-completion rate at [`CONFIDENCE`]: with none seen, its
    /// `high` is how large the rate could still be.
    pub false_complete_interval: Option<Interval>,
    pub median_wall_ms: Option<f64>,
    pub median_stages: Option<f64>,
    pub median_tokens: Option<f64>,
    pub total_tokens: u64,
    /// Sum of the known costs.
    pub cost_usd: f64,
    /// Runs whose cost is unknown (not in the sum).
    pub cost_unknown_runs: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    /// The CI gate: any value above 0 fails.
    pub false_complete: u64,
    /// The confidence level of every row's intervals ([`CONFIDENCE`]).
    pub confidence: f64,
    pub total: Row,
    pub rows: Vec<Row>,
}

/// The median; the mean of the middle two for an even count.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values.get(mid).copied()
    } else {
        Some((values.get(mid - 1)? + values.get(mid)?) / 2.0)
    }
}

fn row(case: &str, profile: &str, results: &[&ScenarioResult]) -> Row {
    let count = |v: Verdict| results.iter().filter(|r| r.verdict == v).count() as u64;
    let mut wall: Vec<f64> = results.iter().map(|r| r.timings.wall_ms as f64).collect();
    let mut stages: Vec<f64> = results.iter().map(|r| f64::from(r.stages)).collect();
    let mut tokens: Vec<f64> = results.iter().map(|r| r.tokens as f64).collect();
    let runs = results.len() as u64;
    let passes = count(Verdict::Pass);
    let false_completes = count(Verdict::FalseComplete);
    Row {
        case: case.to_owned(),
        profile: profile.to_owned(),
        runs,
        passes,
        false_completes,
        honest_stops: count(Verdict::HonestStop),
        wrong_stops: count(Verdict::WrongStop),
        errors: count(Verdict::Error),
        pass_rate: (runs > 0).then(|| passes as f64 / runs as f64),
        pass_interval: wilson(passes, runs, Z_95),
        false_complete_interval: wilson(false_completes, runs, Z_95),
        median_wall_ms: median(&mut wall),
        median_stages: median(&mut stages),
        median_tokens: median(&mut tokens),
        total_tokens: results.iter().map(|r| r.tokens).sum(),
        cost_usd: results.iter().filter_map(|r| r.cost_usd).sum(),
        cost_unknown_runs: results.iter().filter(|r| r.cost_usd.is_none()).count() as u64,
    }
}

/// Merges results into rows per (case, profile) and a total.
/// Whether a scorecard fails its command: any FALSE_COMPLETE, or, on a scripted profile (whose
/// model plays a fixed script, so the outcome is autocode's alone), a WRONG_STOP or an ERROR. A
/// live model's wrong stop is a measurement, not a failure; a profile that does not parse counts
/// as scripted (its result cannot say otherwise).
pub fn fails_the_gate(results: &[ScenarioResult]) -> bool {
    results.iter().any(|result| match result.verdict {
        Verdict::FalseComplete => true,
        Verdict::WrongStop | Verdict::Error => result
            .profile
            .parse::<super::profile::Profile>()
            .map_or(true, |profile| profile.is_scripted()),
        Verdict::Pass | Verdict::HonestStop => false,
    })
}

pub fn merge(results: &[ScenarioResult]) -> Stats {
    let mut groups: BTreeMap<(&str, &str), Vec<&ScenarioResult>> = BTreeMap::new();
    for r in results {
        groups
            .entry((r.case.as_str(), r.profile.as_str()))
            .or_default()
            .push(r);
    }
    let rows: Vec<Row> = groups
        .iter()
        .map(|((case, profile), rs)| row(case, profile, rs))
        .collect();
    let all: Vec<&ScenarioResult> = results.iter().collect();
    let total = row("TOTAL", "all", &all);
    Stats {
        false_complete: total.false_completes,
        confidence: CONFIDENCE,
        total,
        rows,
    }
}

/// Finds every `result.json` under `dirs` (a folder holding one is not searched further).
pub fn collect(dirs: &[PathBuf]) -> Result<Vec<(PathBuf, ScenarioResult)>, StatsError> {
    let mut found = Vec::new();
    for dir in dirs {
        walk(dir, &mut found)?;
    }
    if found.is_empty() {
        let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        return Err(StatsError::Empty {
            dirs: names.join(", "),
        });
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

fn walk(dir: &Path, found: &mut Vec<(PathBuf, ScenarioResult)>) -> Result<(), StatsError> {
    let file = dir.join(RESULT_FILE);
    if file.is_file() {
        let loaded = result::read(&file)?;
        found.push((file, loaded));
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|source| StatsError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let mut subdirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| StatsError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let kind = entry.file_type().map_err(|source| StatsError::Io {
            path: entry.path(),
            source,
        })?;
        if kind.is_dir() {
            subdirs.push(entry.path());
        }
    }
    subdirs.sort();
    for sub in subdirs {
        walk(&sub, found)?;
    }
    Ok(())
}

fn opt(value: Option<f64>, scale: f64, digits: usize) -> String {
    value
        .map(|v| format!("{:.*}", digits, v / scale))
        .unwrap_or_else(|| "-".into())
}

fn cost(row: &Row) -> String {
    if row.cost_unknown_runs == row.runs {
        "unknown".into()
    } else if row.cost_unknown_runs > 0 {
        format!("${:.4}+?", row.cost_usd)
    } else {
        format!("${:.4}", row.cost_usd)
    }
}

/// `0.80 [0.49, 0.94]`: the pass rate and its interval.
fn pass_rate(row: &Row) -> String {
    match (row.pass_rate, row.pass_interval) {
        (Some(rate), Some(i)) => format!("{rate:.2} [{:.2}, {:.2}]", i.low, i.high),
        _ => "-".into(),
    }
}

const COLUMNS: usize = 13;

const HEADERS: [&str; COLUMNS] = [
    "case",
    "profile",
    "runs",
    "pass",
    "pass rate [95% CI]",
    "false complete",
    "honest stop",
    "wrong stop",
    "error",
    "median wall s",
    "median stages",
    "median tokens",
    "cost",
];

fn cells(row: &Row) -> [String; COLUMNS] {
    [
        row.case.clone(),
        row.profile.clone(),
        row.runs.to_string(),
        row.passes.to_string(),
        pass_rate(row),
        row.false_completes.to_string(),
        row.honest_stops.to_string(),
        row.wrong_stops.to_string(),
        row.errors.to_string(),
        opt(row.median_wall_ms, 1000.0, 1),
        opt(row.median_stages, 1.0, 1),
        opt(row.median_tokens, 1.0, 0),
        cost(row),
    ]
}

/// A plain text table for people.
pub fn render_text(stats: &Stats) -> String {
    let mut lines: Vec<[String; COLUMNS]> = vec![HEADERS.map(str::to_owned)];
    lines.extend(stats.rows.iter().map(cells));
    lines.push(cells(&stats.total));
    let mut widths = [0usize; COLUMNS];
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in &lines {
        let padded: Vec<String> = line
            .iter()
            .zip(widths.iter())
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(padded.join("  ").trim_end());
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "false completions: {}{}",
        stats.false_complete,
        false_complete_bound(stats)
    );
    out
}

/// ` of N runs (95% CI of the rate: [low, high])`, the confidence in the gate's number.
fn false_complete_bound(stats: &Stats) -> String {
    match stats.total.false_complete_interval {
        Some(i) => format!(
            " of {} runs (rate {:.0}% CI [{:.3}, {:.3}])",
            stats.total.runs,
            stats.confidence * 100.0,
            i.low,
            i.high
        ),
        None => String::new(),
    }
}

/// A GitHub-flavoured Markdown table.
pub fn render_markdown(stats: &Stats) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| {} |", HEADERS.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(HEADERS.len()));
    for row in &stats.rows {
        let _ = writeln!(out, "| {} |", cells(row).join(" | "));
    }
    let total = cells(&stats.total).map(|c| format!("**{c}**"));
    let _ = writeln!(out, "| {} |", total.join(" | "));
    let _ = writeln!(
        out,
        "\nFalse completions: **{}**{}{}",
        stats.false_complete,
        false_complete_bound(stats),
        if stats.false_complete > 0 {
            " (CI fails)"
        } else {
            ""
        }
    );
    out
}

fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters, even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// `8/10 = 0.800, 95% CI [0.490, 0.943]`.
fn rate_with_interval(hits: u64, runs: u64, interval: Option<Interval>) -> String {
    match interval {
        Some(i) => format!(
            "{hits}/{runs} = {:.3}, {:.0}% CI [{:.3}, {:.3}]",
            hits as f64 / runs as f64,
            CONFIDENCE * 100.0,
            i.low,
            i.high
        ),
        None => format!("{hits}/{runs}"),
    }
}

/// JUnit XML: one test case per result; FALSE_COMPLETE and WRONG_STOP are failures, ERROR an
/// error, PASS and HONEST_STOP pass. The suite's `<properties>` carry each (case, profile)'s
/// pass rate and the total false-completion rate with their intervals.
pub fn render_junit(results: &[ScenarioResult]) -> String {
    let failures = results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::FalseComplete | Verdict::WrongStop))
        .count();
    let errors = results
        .iter()
        .filter(|r| r.verdict == Verdict::Error)
        .count();
    let total_s: f64 = results
        .iter()
        .map(|r| r.timings.wall_ms as f64 / 1000.0)
        .sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuite name=\"autocode-scenarios\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{total_s:.3}\">",
        results.len()
    );
    let stats = merge(results);
    if !results.is_empty() {
        out.push_str("  <properties>\n");
        for row in stats.rows.iter().chain(std::iter::once(&stats.total)) {
            let _ = writeln!(
                out,
                "    <property name=\"pass rate: {} on {}\" value=\"{}\"/>",
                xml_escape(&row.case),
                xml_escape(&row.profile),
                rate_with_interval(row.passes, row.runs, row.pass_interval)
            );
        }
        let _ = writeln!(
            out,
            "    <property name=\"false completion rate\" value=\"{}\"/>",
            rate_with_interval(
                stats.total.false_completes,
                stats.total.runs,
                stats.total.false_complete_interval
            )
        );
        out.push_str("  </properties>\n");
    }
    let mut sorted: Vec<&ScenarioResult> = results.iter().collect();
    sorted.sort_by(|a, b| (&a.case, &a.profile, a.repeat).cmp(&(&b.case, &b.profile, b.repeat)));
    for r in sorted {
        let ending = match &r.ending {
            super::verdict::RunEnding::Complete => "COMPLETE".to_owned(),
            super::verdict::RunEnding::Paused { code, reason } => format!("{code}: {reason}"),
            super::verdict::RunEnding::HarnessError { message } => format!("error: {message}"),
        };
        let failed_checks: Vec<String> = r
            .oracle
            .iter()
            .filter(|c| !c.passed)
            .map(|c| format!("{}: {}", c.name, c.problems.join("; ")))
            .collect();
        let detail = format!(
            "verdict {}; run {ending}; oracle failures: {}",
            r.verdict,
            if failed_checks.is_empty() {
                "none".to_owned()
            } else {
                failed_checks.join(" | ")
            }
        );
        let _ = write!(
            out,
            "  <testcase classname=\"{}\" name=\"{}#{}\" time=\"{:.3}\"",
            xml_escape(&r.case),
            xml_escape(&r.profile),
            r.repeat + 1,
            r.timings.wall_ms as f64 / 1000.0
        );
        match r.verdict {
            Verdict::Pass | Verdict::HonestStop => {
                let _ = writeln!(
                    out,
                    "><system-out>{}</system-out></testcase>",
                    xml_escape(&detail)
                );
            }
            Verdict::FalseComplete | Verdict::WrongStop => {
                let _ = writeln!(
                    out,
                    "><failure type=\"{}\" message=\"{}\"/></testcase>",
                    r.verdict,
                    xml_escape(&detail)
                );
            }
            Verdict::Error => {
                let _ = writeln!(
                    out,
                    "><error type=\"ERROR\" message=\"{}\"/></testcase>",
                    xml_escape(&detail)
                );
            }
        }
    }
    out.push_str("</testsuite>\n");
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pause::PauseCode;
    use crate::scenario::result::{RESULT_FORMAT, Timings};
    use crate::scenario::verdict::RunEnding;

    #[allow(clippy::too_many_arguments)] // a table-row builder: one argument per column
    pub(crate) fn sample(
        case: &str,
        profile: &str,
        repeat: u32,
        verdict: Verdict,
        wall_ms: u64,
        stages: u32,
        tokens: u64,
        cost: Option<f64>,
    ) -> ScenarioResult {
        ScenarioResult {
            format_version: RESULT_FORMAT,
            case: case.into(),
            profile: profile.into(),
            protocol: None,
            repeat,
            verdict,
            ending: match verdict {
                Verdict::Pass | Verdict::FalseComplete => RunEnding::Complete,
                Verdict::HonestStop | Verdict::WrongStop => RunEnding::Paused {
                    code: PauseCode::PausedInvalidOutput,
                    reason: "bad <report> & more".into(),
                },
                Verdict::Error => RunEnding::HarnessError {
                    message: "boom".into(),
                },
            },
            run_id: None,
            stages,
            resumes: 0,
            tokens,
            cost_usd: cost,
            oracle: vec![],
            timings: Timings {
                wall_ms,
                ..Timings::default()
            },
            started_at: chrono::DateTime::UNIX_EPOCH,
        }
    }

    fn close(interval: Option<Interval>, low: f64, high: f64) {
        let i = interval.expect("an interval");
        assert!(
            (i.low - low).abs() < 5e-4 && (i.high - high).abs() < 5e-4,
            "{i:?} is not [{low}, {high}]"
        );
    }

    #[test]
    fn wilson_matches_known_values() {
        // Reference values: the Wilson score interval at 95 % (z = 1.959964), e.g. R's
        // `prop.test(x, n, correct = FALSE)$conf.int` and Newcombe (1998), table I.
        close(wilson(8, 10, Z_95), 0.4902, 0.9433);
        close(wilson(0, 10, Z_95), 0.0, 0.2775);
        close(wilson(10, 10, Z_95), 0.7225, 1.0);
        close(wilson(1, 2, Z_95), 0.0945, 0.9055);
        close(wilson(81, 263, Z_95), 0.2553, 0.3662);
        close(wilson(15, 148, Z_95), 0.0624, 0.1605);
        close(wilson(0, 1, Z_95), 0.0, 0.7935);
        // The bounds at the edges are exact, not merely close.
        assert_eq!(wilson(0, 10, Z_95).map(|i| i.low), Some(0.0));
        assert_eq!(wilson(10, 10, Z_95).map(|i| i.high), Some(1.0));
        // More repeats of the same rate narrow the interval.
        let ten = wilson(8, 10, Z_95).unwrap();
        let hundred = wilson(80, 100, Z_95).unwrap();
        assert!(hundred.high - hundred.low < ten.high - ten.low);
        // z = 0 is the point estimate.
        close(wilson(3, 4, 0.0), 0.75, 0.75);
        assert_eq!(wilson(0, 0, Z_95), None);
        assert_eq!(wilson(3, 2, Z_95), None);
        assert_eq!(wilson(1, 2, f64::NAN), None);
        assert_eq!(wilson(1, 2, -1.0), None);
    }

    #[test]
    fn rows_carry_their_intervals() {
        let mut results: Vec<ScenarioResult> = (0..8)
            .map(|r| sample("a", "scripted-codex", r, Verdict::Pass, 1, 1, 1, None))
            .collect();
        results.push(sample(
            "a",
            "scripted-codex",
            8,
            Verdict::HonestStop,
            1,
            1,
            1,
            None,
        ));
        results.push(sample(
            "a",
            "scripted-codex",
            9,
            Verdict::FalseComplete,
            1,
            1,
            1,
            None,
        ));
        let stats = merge(&results);
        let row = &stats.rows[0];
        assert_eq!(row.pass_rate, Some(0.8));
        close(row.pass_interval, 0.4902, 0.9433);
        close(row.false_complete_interval, 0.0179, 0.4042);
        assert_eq!(stats.confidence, 0.95);
        let md = render_markdown(&stats);
        assert!(md.contains("| pass rate [95% CI] |"), "{md}");
        assert!(md.contains("| 0.80 [0.49, 0.94] |"), "{md}");
        assert!(
            md.contains("of 10 runs (rate 95% CI [0.018, 0.404])"),
            "{md}"
        );
        assert!(render_text(&stats).contains("0.80 [0.49, 0.94]"));
        let junit = render_junit(&results);
        assert!(
            junit.contains(
                "<property name=\"pass rate: a on scripted-codex\" value=\"8/10 = 0.800, 95% CI [0.490, 0.943]\"/>"
            ),
            "{junit}"
        );
        assert!(junit.contains(
            "<property name=\"false completion rate\" value=\"1/10 = 0.100, 95% CI [0.018, 0.404]\"/>"
        ));
        let json = serde_json::to_value(&stats).unwrap();
        assert_eq!(json["confidence"], 0.95);
        assert!(json["rows"][0]["pass_interval"]["low"].as_f64().is_some());
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0]), Some(3.0));
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn merge_groups_counts_and_totals() {
        let results = vec![
            sample("a", "scripted-codex", 0, Verdict::Pass, 1000, 7, 100, None),
            sample(
                "a",
                "scripted-codex",
                1,
                Verdict::FalseComplete,
                3000,
                9,
                300,
                None,
            ),
            sample(
                "a",
                "scripted-claude",
                0,
                Verdict::HonestStop,
                2000,
                4,
                50,
                Some(0.5),
            ),
            sample(
                "b",
                "scripted-codex",
                0,
                Verdict::Error,
                10,
                0,
                0,
                Some(0.25),
            ),
        ];
        let stats = merge(&results);
        assert_eq!(stats.false_complete, 1);
        assert_eq!(stats.rows.len(), 3);
        let codex = &stats.rows[1];
        assert_eq!(
            (codex.case.as_str(), codex.profile.as_str()),
            ("a", "scripted-codex")
        );
        assert_eq!((codex.runs, codex.passes, codex.false_completes), (2, 1, 1));
        assert_eq!(codex.median_wall_ms, Some(2000.0));
        assert_eq!(codex.median_stages, Some(8.0));
        assert_eq!(codex.total_tokens, 400);
        assert_eq!(codex.cost_unknown_runs, 2);
        let t = &stats.total;
        assert_eq!((t.runs, t.passes, t.honest_stops, t.errors), (4, 1, 1, 1));
        assert_eq!(t.cost_usd, 0.75);
        assert_eq!(t.median_tokens, Some(75.0));
        let mut reversed = results.clone();
        reversed.reverse();
        assert_eq!(merge(&reversed), stats, "merging is order-independent");
    }

    #[test]
    fn renderers_show_counts_and_escape() {
        let results = vec![
            sample(
                "a&b",
                "scripted-codex",
                0,
                Verdict::Pass,
                1000,
                7,
                100,
                None,
            ),
            sample(
                "c",
                "scripted-codex",
                0,
                Verdict::WrongStop,
                1000,
                7,
                100,
                Some(0.1),
            ),
            sample("d", "scripted-codex", 0, Verdict::Error, 1000, 7, 100, None),
        ];
        let stats = merge(&results);
        let text = render_text(&stats);
        assert!(text.contains("TOTAL") && text.contains("false completions: 0"));
        let md = render_markdown(&stats);
        assert!(md.lines().count() >= 6 && md.contains("| a&b | scripted-codex | 1 | 1 |"));
        let junit = render_junit(&results);
        assert!(junit.contains("tests=\"3\" failures=\"1\" errors=\"1\""));
        assert!(junit.contains("classname=\"a&amp;b\""));
        assert!(junit.contains("bad &lt;report&gt; &amp; more"));
        assert!(!junit.contains("a&b"));
    }

    #[test]
    fn a_false_completion_anywhere_and_a_wrong_stop_on_a_scripted_profile_fail_the_gate() {
        let row = |profile: &str, verdict| sample("a", profile, 0, verdict, 1, 1, 1, None);
        let honest = [
            row("scripted-codex", Verdict::Pass),
            row("scripted-opencode", Verdict::HonestStop),
            row("claude", Verdict::WrongStop),
            row("claude", Verdict::Error),
        ];
        assert!(!fails_the_gate(&honest));
        for failing in [
            row("claude", Verdict::FalseComplete),
            row("scripted-codex", Verdict::FalseComplete),
            row("scripted-direct", Verdict::WrongStop),
            row("scripted-claude", Verdict::Error),
            row("no such profile!", Verdict::WrongStop),
        ] {
            let mut results = honest.to_vec();
            results.push(failing.clone());
            assert!(fails_the_gate(&results), "{failing:?}");
        }
    }

    #[test]
    fn collect_walks_several_out_folders() {
        let root = tempfile::tempdir().unwrap();
        let first = root.path().join("one");
        let second = root.path().join("two");
        let a = sample("a", "scripted-codex", 0, Verdict::Pass, 1, 1, 1, None);
        let b = sample("a", "scripted-codex", 1, Verdict::Pass, 1, 1, 1, None);
        result::write(&result::result_dir(&first, "a", "scripted-codex", 0), &a).unwrap();
        result::write(&result::result_dir(&second, "a", "scripted-codex", 1), &b).unwrap();
        let found = collect(&[first.clone(), second]).unwrap();
        assert_eq!(found.len(), 2);
        let empty = root.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(matches!(collect(&[empty]), Err(StatsError::Empty { .. })));
    }
}
