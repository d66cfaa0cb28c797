//! Synthetic long runs made with autocode's own types (so their tags verify), and the cost of
//! one checkpoint as a run grows.
//!
//! `cargo bench --bench run_state -- WORKSPACE STAGES` writes a complete run of STAGES attempts
//! (a 10-milestone plan; every attempt recorded `running` then finished, as the driver does, so
//! the attempt log holds two lines per attempt) into `WORKSPACE/.autocode/runs/`, with the key of
//! `$XDG_STATE_HOME` (or `$HOME`), then times 50 more stages on it (two commits each, as the
//! driver makes) and prints the median commit time. `benches/status.sh` runs it at 1,000 and
//! 10,000 stages and times `autocode status` on the result.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use autocode::ids::{ProviderName, RunId, SessionId};
use autocode::report::ReportKind;
use autocode::role::Role;
use autocode::run::checkpoint::{self, AttemptLog};
use autocode::run::state::{
    AttemptPurpose, AttemptRecord, AttemptStatus, CostSource, CriterionResult, MilestoneProgress,
    Phase, PlanRevision, Route, RunState, Usage,
};

const ROLES: [(Role, ReportKind); 3] = [
    (Role::Builder, ReportKind::Build),
    (Role::Tester, ReportKind::Test),
    (Role::CompletionReviewer, ReportKind::Completion),
];
const MILESTONES: usize = 10;

fn route(model: &str) -> Route {
    Route {
        provider: ProviderName::new("codex").expect("a provider name"),
        model: model.into(),
        effort: Some("medium".into()),
        codex_model_provider: None,
    }
}

fn attempt(seq: u32) -> AttemptRecord {
    let (role, kind) = ROLES[seq as usize % 3];
    let milestone = (seq as usize / 3) % MILESTONES;
    AttemptRecord {
        seq,
        role,
        report_kind: kind,
        attempt: 1,
        dir: format!("{seq:03}-{role}-1"),
        route: route(if role == Role::Builder {
            "gpt-5.6-terra"
        } else {
            "gpt-5.6-sol"
        }),
        purpose: AttemptPurpose::Fresh,
        session: SessionId::new(format!("019a{seq:08x}-7c3e-7d52-a1b0-4f2b6c1d9e8a")).ok(),
        status: AttemptStatus::Running,
        started_at: chrono::Utc::now(),
        finished_at: None,
        usage: Usage::default(),
        milestone: Some(milestone),
        commit: None,
    }
}

fn finish(record: &mut AttemptRecord) {
    record.status = if record.seq.is_multiple_of(7) {
        AttemptStatus::Rejected {
            reason: "the report cites a check that never ran: cargo test --lib".into(),
        }
    } else {
        AttemptStatus::Accepted
    };
    record.finished_at = Some(chrono::Utc::now());
    record.usage = Usage {
        input_tokens: Some(12_000 + u64::from(record.seq)),
        cache_read_tokens: Some(40_000),
        cache_write_tokens: None,
        output_tokens: Some(2_100),
        reasoning_tokens: Some(900),
        cost_usd: Some(0.0421),
        cost_source: Some(CostSource::PriceTable),
    };
}

fn state(workspace: PathBuf, run_id: &RunId) -> RunState {
    let routes: BTreeMap<Role, Route> = Role::ALL
        .iter()
        .map(|role| (*role, route("gpt-5.6-terra")))
        .collect();
    let mut state = RunState::new(
        run_id.clone(),
        "Add a --verbose flag to the CLI and document it".into(),
        workspace,
        ProviderName::new("codex").expect("a provider name"),
        routes,
    );
    let milestones: Vec<serde_json::Value> = (1..=MILESTONES)
        .map(|i| {
            serde_json::json!({"id": format!("M{i}"), "title": format!("Milestone {i}"),
                "description": "Change the parser and its tests.",
                "acceptance_criteria": [{"id": format!("AC{i}"), "text": "the flag works",
                    "check": "cargo test --lib cli", "human_review": false,
                    "kind": "fail_to_pass"}]})
        })
        .collect();
    let plan = serde_json::json!({"summary": "Ten milestones.", "milestones": milestones});
    state.plan_revisions.push(PlanRevision {
        revision: 1,
        plan,
        sha256: "ab".repeat(32),
    });
    state.approved_plan = state.plan_revisions[0].token().into();
    state.phase = Phase::Build { milestone: 0 };
    for m in 0..MILESTONES {
        state.milestones.insert(m, MilestoneProgress::default());
        state.criteria.push(CriterionResult {
            milestone: m,
            criterion_id: format!("AC{}", m + 1),
            verdict: "PASS".into(),
            checks: vec!["cargo test --lib cli".into()],
            detail: "replayed: exit 0".into(),
        });
    }
    state
}

/// One stage as the driver commits it: recorded running, then finished.
fn stage(
    dir: &std::path::Path,
    state: &mut RunState,
    log: &mut AttemptLog,
) -> Result<(), autocode::store::StoreError> {
    let seq = state.next_seq();
    state.attempts.push(attempt(seq));
    checkpoint::commit(dir, state, log)?;
    if let Some(last) = state.attempts.last_mut() {
        finish(last);
    }
    let usage = state.attempts.last().map(|a| a.usage).unwrap_or_default();
    state.usage.accumulate(&usage);
    checkpoint::commit(dir, state, log)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let [workspace, stages] = args.as_slice() else {
        return Err("usage: run_state WORKSPACE STAGES".into());
    };
    let stages: u32 = stages.parse()?;
    std::fs::create_dir_all(workspace)?;
    let workspace = std::fs::canonicalize(workspace)?;
    let run_id = RunId::new(format!("bench-{stages}"))?;
    let dir = autocode::run::runs_dir(&workspace).join(run_id.as_str());
    std::fs::create_dir_all(&dir)?;
    let mut state = state(workspace, &run_id);
    // Every attempt recorded running in one commit, then every one finished in a second: the
    // log a real run leaves (two lines per attempt), without 2·STAGES fsynced commits.
    let mut log = AttemptLog::of(&state);
    state.attempts = (1..=stages).map(attempt).collect();
    checkpoint::commit(&dir, &mut state, &mut log)?;
    for record in &mut state.attempts {
        finish(record);
        let usage = record.usage;
        state.usage.accumulate(&usage);
    }
    checkpoint::commit(&dir, &mut state, &mut log)?;
    // Then 50 stages the way the driver commits them, timed.
    let mut times = Vec::new();
    for _ in 0..50 {
        let started = Instant::now();
        stage(&dir, &mut state, &mut log)?;
        times.push(started.elapsed().as_secs_f64() * 1000.0 / 2.0);
    }
    times.sort_by(f64::total_cmp);
    let size = |name: &str| {
        std::fs::metadata(dir.join(name))
            .map(|m| m.len())
            .unwrap_or(0)
    };
    println!(
        "{} stages: commit median {:.2} ms (p90 {:.2} ms); run.json {} B, attempts.jsonl {} B",
        state.attempts.len(),
        times[times.len() / 2],
        times[times.len() * 9 / 10],
        size(checkpoint::STATE_FILE),
        size(checkpoint::ATTEMPTS_LOG)
    );
    Ok(())
}
