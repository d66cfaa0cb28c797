//! Judging what an attempt produced: the final message (shell-command rule, JSON, schema), the
//! evidence of every check it cites, the usage and cost, and provider reset hints.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use crate::events::{self, FinalReport, NormalizedEvent};
use crate::report::evidence::{self, CitedCheck, CommandRecord};
use crate::report::ledger::{LedgerMatch, LedgerMismatch, check_against_ledger, ledger_match};
use crate::report::{self, ReportKind};
use crate::run::integrity;
use crate::run::stage_runner::AttemptResult;
use crate::run::state::Usage;
use crate::supervise::LedgerEntry;

/// What a stage directory's `validation.json` holds.
#[derive(Debug, Serialize)]
pub(super) struct Validation<'a> {
    pub(super) accepted: bool,
    pub(super) problems: &'a [String],
    pub(super) stop: Option<&'a events::Stop>,
}

/// How report-file tools' capture receipts are checked.
pub(super) struct ReceiptCheck {
    pub(super) work_tree: PathBuf,
    pub(super) context: String,
}

/// What every problem about a forged command event starts with (the driver counts them).
pub const FORGED_EVENT: &str = "forged command event";

/// The stream's finished command events that the kernel's exec ledger does not back: an event
/// with an exit code and no ledgered process that ran that command and ended that way. Genuine
/// events always have one (the CLIs run commands through measured shell wrappers,
/// `report::ledger`); a line written into the CLI's stdout by something else does not.
pub(super) fn forged_events(records: &[CommandRecord], ledger: &[LedgerEntry]) -> Vec<String> {
    records
        .iter()
        .filter_map(|record| {
            let code = record.exit_code?;
            match ledger_match(&record.command, code, ledger) {
                // Ran, but no attested entry says how: not evidence, and not a proven forgery.
                LedgerMatch::Matched { .. }
                | LedgerMatch::NotMatched {
                    reason: LedgerMismatch::Unattested | LedgerMismatch::CutText,
                    ..
                } => None,
                LedgerMatch::NotMatched { reason, .. } => Some(format!(
                    "{FORGED_EVENT} {}: `{}` exit {code} is in the stream but {reason} (the kernel saw no such process)",
                    record.evidence_id, record.command
                )),
            }
        })
        .collect()
}

/// A receipt that passed its own checks counts only when the ledger shows the `autocode
/// capture` that wrote it (an attested exec of this very binary) and the command it ran.
fn receipt_against_ledger(
    mut finding: evidence::EvidenceFinding,
    bytes: &[u8],
    ledger: &[LedgerEntry],
) -> evidence::EvidenceFinding {
    if finding.problem.is_some() {
        return finding;
    }
    let Ok(receipt) = serde_json::from_slice::<evidence::CaptureReceipt>(bytes) else {
        return finding;
    };
    let ours = std::env::current_exe()
        .ok()
        .and_then(|path| std::fs::metadata(path).ok());
    let is_autocode = |exe: &str| {
        use std::os::unix::fs::MetadataExt;
        let theirs = std::fs::metadata(exe).ok();
        matches!((&ours, theirs), (Some(ours), Some(theirs))
            if ours.dev() == theirs.dev() && ours.ino() == theirs.ino())
    };
    if let Err(mismatch) = crate::report::ledger::receipt_in_ledger(
        &receipt,
        &finding.check.evidence_ref,
        ledger,
        is_autocode,
    ) {
        finding.problem = Some(evidence::EvidenceProblem::BadReceipt {
            evidence_ref: finding.check.evidence_ref.clone(),
            reason: mismatch.to_string(),
        });
        finding.matched = None;
    }
    finding
}

/// Judges a final message: shell-command rule, JSON, schema, evidence. With the kernel's exec
/// `ledger` (absent only where no seccomp boundary kept one), a command event that no ledgered
/// process backs rejects the attempt as forged, and every cited check must also be backed.
pub(super) fn judge_report(
    kind: ReportKind,
    final_report: Option<&FinalReport>,
    records: &[CommandRecord],
    ledger: Option<&[LedgerEntry]>,
    receipts: Option<&ReceiptCheck>,
    evidence_out: Option<&Path>,
) -> Result<Value, AttemptResult> {
    let forged = ledger.map_or_else(Vec::new, |ledger| forged_events(records, ledger));
    let judged =
        judge_report_and_evidence(kind, final_report, records, ledger, receipts, evidence_out);
    if forged.is_empty() {
        return judged;
    }
    let mut problems = forged;
    if let Err(AttemptResult::Rejected { problems: more, .. }) = judged {
        problems.extend(more);
    }
    Err(AttemptResult::Rejected {
        problems,
        shell_command: None,
    })
}

fn judge_report_and_evidence(
    kind: ReportKind,
    final_report: Option<&FinalReport>,
    records: &[CommandRecord],
    ledger: Option<&[LedgerEntry]>,
    receipts: Option<&ReceiptCheck>,
    evidence_out: Option<&Path>,
) -> Result<Value, AttemptResult> {
    let reject = |problems: Vec<String>| AttemptResult::Rejected {
        problems,
        shell_command: None,
    };
    let report = match final_report {
        None => {
            return Err(reject(vec![
                "the stage ended without a final report".into(),
            ]));
        }
        Some(FinalReport::Structured(value)) => value.clone(),
        Some(FinalReport::Text(text)) => {
            let fields = kind.top_level_fields();
            let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
            match events::classify_final_message(text, &fields) {
                events::FinalMessage::Report { object } => Value::Object(object),
                events::FinalMessage::ShellCommandFinalMessage { rejection } => {
                    return Err(AttemptResult::Rejected {
                        problems: vec![format!("{rejection}; it was not run")],
                        shell_command: Some(
                            json!({ rejection.key.clone(): rejection.command.clone() }).to_string(),
                        ),
                    });
                }
                events::FinalMessage::NotJsonObject { error } => {
                    return Err(reject(vec![format!(
                        "the final message is not a JSON report: {error}"
                    )]));
                }
            }
        }
    };
    if let Err(rejection) = report::validate(kind, &report) {
        let problems = match rejection {
            report::ReportRejection::Schema { violations } => violations
                .into_iter()
                .map(|v| {
                    format!(
                        "{}: {}",
                        if v.instance_path.is_empty() {
                            "/"
                        } else {
                            &v.instance_path
                        },
                        v.message
                    )
                })
                .collect(),
            other => vec![other.to_string()],
        };
        return Err(reject(problems));
    }
    let checks = cited_checks(kind, &report);
    let findings = match receipts {
        None => {
            let findings = evidence::check_event_evidence(&checks, records);
            match ledger {
                Some(ledger) => check_against_ledger(findings, records, ledger),
                None => findings,
            }
        }
        Some(rc) => checks
            .iter()
            .map(|check| {
                let path = rc.work_tree.join(&check.evidence_ref);
                let inside = path.starts_with(rc.work_tree.join(".autocode/evidence"))
                    && !check.evidence_ref.contains("..");
                let bytes = if inside {
                    crate::bounded_read::read(&path, crate::bounded_read::REPORT_CAP).ok()
                } else {
                    None
                };
                let finding =
                    evidence::check_receipt_evidence(check, bytes.as_deref(), &rc.context);
                match (ledger, bytes.as_deref()) {
                    (Some(ledger), Some(bytes)) => receipt_against_ledger(finding, bytes, ledger),
                    _ => finding,
                }
            })
            .collect(),
    };
    if let Some(path) = evidence_out {
        let _ = integrity::write_stage_record(
            path,
            &json!({ "checks": findings, "command_events": records }),
        );
    }
    let problems: Vec<String> = findings
        .iter()
        .filter_map(|f| {
            f.problem
                .as_ref()
                .map(|p| format!("check `{}`: {p}", f.check.command))
        })
        .collect();
    if !problems.is_empty() {
        return Err(reject(problems));
    }
    Ok(report)
}

/// The checks a report cites (build: `checks`; test: every criterion's `checks`).
pub(super) fn cited_checks(kind: ReportKind, report: &Value) -> Vec<CitedCheck> {
    let parse = |v: &Value| -> Option<CitedCheck> {
        Some(CitedCheck {
            command: v["command"].as_str()?.to_owned(),
            exit_code: v["exit_code"].as_i64()?,
            evidence_ref: v["evidence_ref"].as_str()?.to_owned(),
        })
    };
    match kind {
        ReportKind::Build => report["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(parse)
            .collect(),
        ReportKind::Test => report["criteria"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["checks"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| parse(&v))
            .collect(),
        _ => Vec::new(),
    }
}

pub(super) fn command_record(event: &NormalizedEvent) -> Option<CommandRecord> {
    CommandRecord::from_event(event)
}

pub(super) fn command_records(events: &[NormalizedEvent]) -> Vec<CommandRecord> {
    events.iter().filter_map(command_record).collect()
}

/// The events' usage in the run's convention, with a cost from the provider or the dated
/// prices of the model catalogue the run reads (else unknown).
pub(super) fn usage_totals(
    usage: &events::Usage,
    model: &str,
    catalogue: &crate::models::Catalogue,
) -> Usage {
    let mut totals = Usage {
        cost_usd: None,
        cost_source: None,
        ..*usage
    };
    if let Some(cost) = usage.cost_usd.filter(|c| *c > 0.0) {
        totals.cost_usd = Some(cost);
        totals.cost_source = Some(crate::events::CostSource::Provider);
    } else if let Some(cost) = crate::prices::estimate(catalogue, model, &totals) {
        totals.cost_usd = Some(cost);
        totals.cost_source = Some(crate::events::CostSource::PriceTable);
    }
    totals
}

/// When a provider limit with a reset hint ends: epoch seconds (`1767225600`), a number of
/// seconds (`retry-after: 30`), or an hour of the day in UTC (`3pm`, `3pm (UTC)`, `15:00`), the
/// next such moment. Anything else is unknown.
pub fn resume_after_from_hint(
    hint: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<chrono::DateTime<chrono::Utc>> {
    use chrono::{Duration as Span, NaiveTime, TimeZone};
    let mut text = hint
        .trim()
        .trim_end_matches("(UTC)")
        .trim()
        .to_ascii_lowercase();
    for prefix in [
        "retry-after:",
        "retry after",
        "try again in",
        "resets at",
        "resets",
        "in",
    ] {
        if let Some(rest) = text.strip_prefix(prefix) {
            text = rest.trim().to_owned();
        }
    }
    for suffix in ["seconds", "second", "secs", "sec", "s"] {
        if let Some(rest) = text.strip_suffix(suffix)
            && rest.trim().parse::<i64>().is_ok()
        {
            text = rest.trim().to_owned();
            break;
        }
    }
    if let Ok(n) = text.parse::<i64>() {
        return if n > 1_000_000_000 {
            chrono::Utc.timestamp_opt(n, 0).single()
        } else if n >= 0 {
            Some(now + Span::seconds(n))
        } else {
            None
        };
    }
    let hour_minute = if let Some(h) = text.strip_suffix("am").or_else(|| text.strip_suffix("pm")) {
        let (h, m) = h.trim().split_once(':').unwrap_or((h.trim(), "0"));
        let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
        if !(1..=12).contains(&h) {
            return None;
        }
        let h = match (text.ends_with("pm"), h) {
            (true, 12) => 12,
            (true, h) => h + 12,
            (false, 12) => 0,
            (false, h) => h,
        };
        (h, m)
    } else {
        let (h, m) = text.split_once(':')?;
        (h.parse().ok()?, m.parse().ok()?)
    };
    let time = NaiveTime::from_hms_opt(hour_minute.0, hour_minute.1, 0)?;
    let today = now.date_naive().and_time(time).and_utc();
    Some(if today > now {
        today
    } else {
        today + Span::days(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn reset_hints_become_times() {
        let now = chrono::Utc
            .with_ymd_and_hms(2026, 11, 29, 14, 0, 0)
            .unwrap();
        let at = |h| resume_after_from_hint(h, now).map(|t| t.to_rfc3339());
        assert_eq!(
            at("1767225600").as_deref(),
            Some("2026-01-01T00:00:00+00:00")
        );
        assert_eq!(at("30").as_deref(), Some("2026-11-29T14:00:30+00:00"));
        assert_eq!(
            at("3pm (UTC)").as_deref(),
            Some("2026-11-29T15:00:00+00:00")
        );
        assert_eq!(at("9am").as_deref(), Some("2026-11-30T09:00:00+00:00"));
        assert_eq!(at("12am").as_deref(), Some("2026-11-30T00:00:00+00:00"));
        assert_eq!(at("16:30").as_deref(), Some("2026-11-29T16:30:00+00:00"));
        assert_eq!(
            at("retry-after: 1").as_deref(),
            Some("2026-11-29T14:00:01+00:00")
        );
        assert_eq!(
            at("try again in 30s").as_deref(),
            Some("2026-11-29T14:00:30+00:00")
        );
        assert_eq!(at("soon"), None);
        assert_eq!(at("13pm"), None);
    }
}
