//! Synthetic runs for the dashboard's benchmarks (`benches/dashboard.sh`), made with autocode's
//! own types and key so their tags verify.
//!
//! `cargo bench --bench dashboard_runs -- WORKSPACE RUNS EVENTS` writes RUNS complete runs of
//! three stages each into `WORKSPACE/.autocode/runs/` (key of `$XDG_STATE_HOME` or `$HOME`), and
//! gives the first run's builder stage an `events.jsonl` of EVENTS lines (about 200 bytes each,
//! shaped like normalized events). Prints the first run's id and stage.

use std::collections::BTreeMap;
use std::io::Write;

use autocode::ids::{ProviderName, RunId};
use autocode::report::ReportKind;
use autocode::role::Role;
use autocode::run::checkpoint::{self, AttemptLog};
use autocode::run::state::{
    AttemptPurpose, AttemptRecord, AttemptStatus, Phase, Route, RunState, Usage,
};

fn route(model: &str) -> Route {
    Route {
        provider: ProviderName::new("codex").expect("a provider name"),
        model: model.into(),
        effort: Some("medium".into()),
        codex_model_provider: None,
    }
}

fn attempt(seq: u32, role: Role, kind: ReportKind) -> AttemptRecord {
    let now = chrono::Utc::now();
    AttemptRecord {
        seq,
        role,
        report_kind: kind,
        attempt: 1,
        dir: format!("{seq:03}-{role}-1"),
        route: route("gpt-5.6-terra"),
        purpose: AttemptPurpose::Fresh,
        session: None,
        status: AttemptStatus::Accepted,
        started_at: now,
        finished_at: Some(now),
        usage: Usage {
            input_tokens: Some(12_000),
            output_tokens: Some(2_100),
            ..Usage::default()
        },
        milestone: Some(0),
        commit: None,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let [workspace, runs, events] = args.as_slice() else {
        return Err("usage: dashboard_runs WORKSPACE RUNS EVENTS".into());
    };
    let (runs, events): (u32, u64) = (runs.parse()?, events.parse()?);
    let workspace = std::fs::canonicalize(workspace)?;
    let routes: BTreeMap<Role, Route> = Role::ALL
        .iter()
        .map(|role| (*role, route("gpt-5.6-terra")))
        .collect();
    let mut first = None;
    for n in 0..runs {
        let run_id = RunId::new(format!("bench-{n:05}"))?;
        let dir = autocode::run::runs_dir(&workspace).join(run_id.as_str());
        std::fs::create_dir_all(&dir)?;
        let mut state = RunState::new(
            run_id.clone(),
            format!("Synthetic run {n}: add a --verbose flag to the CLI"),
            workspace.clone(),
            ProviderName::new("codex")?,
            routes.clone(),
        );
        let mut log = AttemptLog::of(&state);
        state.attempts = vec![
            attempt(1, Role::Builder, ReportKind::Build),
            attempt(2, Role::Tester, ReportKind::Test),
            attempt(3, Role::CompletionReviewer, ReportKind::Completion),
        ];
        for a in &state.attempts.clone() {
            state.usage.accumulate(&a.usage);
        }
        state.phase = Phase::Complete;
        state.completed_at = Some(chrono::Utc::now());
        checkpoint::commit(&dir, &mut state, &mut log)?;
        if first.is_none() {
            first = Some((run_id, dir, state.attempts[0].dir.clone()));
        }
    }
    if let Some((run_id, dir, stage)) = first {
        let stage_dir = dir.join("stages").join(&stage);
        std::fs::create_dir_all(&stage_dir)?;
        let mut out =
            std::io::BufWriter::new(std::fs::File::create(stage_dir.join("events.jsonl"))?);
        for i in 0..events {
            writeln!(
                out,
                r#"{{"kind":"command_finished","seq":{i},"command":"cargo test --lib cli::parse::case_{i}","exit_code":0,"output":"test cli::parse::case_{i} ... ok","at_ms":{i}}}"#
            )?;
        }
        out.flush()?;
        println!("{run_id} {stage}");
    }
    Ok(())
}
