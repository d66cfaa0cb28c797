//! A whole one-line task (the demo's `hello.txt`) on a given git workspace, end to end: a real
//! CLI against the scripted model, every stage, the replays and the final gate (issue 13's
//! "a one-line task on a generated 100k-file repository"). `harness = false`; run through
//! `benches/task_on_workspace.sh`, which generates the repositories and times `git status`
//! beside it. Prints one line: seconds, outcome, stages, run directory size.
//!
//! `cargo bench --bench task_on_workspace -- <repo> [codex|claude|opencode] [worktree|in-place]`

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use autocode::demo::{self, DEMO_OBJECTIVE};
use autocode::provider::{ConfigPaths, Registry};
use autocode::run::api::{self, StartOptions};
use autocode::run::driver::{DriveOutcome, Interaction};
use autocode::run::state::{PlanRevision, Question};
use autocode::transport::BuiltinTransport;

struct Quiet;

impl Interaction for Quiet {
    fn answer_questions(&mut self, _: &[Question]) -> Option<Vec<(String, String)>> {
        None
    }
    fn approve_plan(&mut self, _: &PlanRevision) -> bool {
        true
    }
    fn note(&mut self, _: &str) {}
}

fn du(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| du(&entry.path()))
        .sum()
}

fn main() {
    autocode::supervise::init_before_threads();
    // `RUST_LOG=autocode=debug` logs every supervised launch and checkpoint with its time.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let Some(repo) = args.first().map(PathBuf::from) else {
        eprintln!(
            "usage: task_on_workspace <git repo> [codex|claude|opencode] [worktree|in-place]"
        );
        std::process::exit(2);
    };
    let preferred = match args.get(1).map(String::as_str) {
        Some("claude") => Some(BuiltinTransport::Claude),
        Some("opencode") => Some(BuiltinTransport::Opencode),
        _ => Some(BuiltinTransport::Codex),
    };
    let base: BTreeMap<std::ffi::OsString, std::ffi::OsString> = std::env::vars_os().collect();
    let path_var = base
        .get(std::ffi::OsStr::new("PATH"))
        .cloned()
        .unwrap_or_default();
    // The pinned CLIs of this checkout first (the bench measures those), then PATH.
    let search = demo::CliSearch {
        executable: None,
        dir: Some(PathBuf::from("tests/clis/node_modules/.bin")),
    };
    let cli = match demo::find_cli(preferred, &path_var, &search) {
        Ok(cli) => cli,
        Err(e) => {
            eprintln!("{e} (install the pinned CLIs: npm ci --prefix tests/clis)");
            std::process::exit(2);
        }
    };
    let home = tempfile::tempdir().expect("home");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (seconds, outcome, stages, run_dir) = runtime.block_on(async {
        let server = demo::start_server().await.expect("scripted model");
        let overrides = demo::isolated_cli_env(cli.transport, &server, home.path(), demo::DEMO_CLI)
            .expect("cli home");
        let env = demo::run_env(&base, &overrides, &cli);
        let registry = Registry::new(ConfigPaths::from_env(&env).expect("config paths"));
        let models = demo::demo_routes(|model| demo::model_id(cli.transport, model));
        let opts = StartOptions {
            objective: DEMO_OBJECTIVE.into(),
            workspace: repo.clone(),
            provider: Some(cli.transport.as_str().into()),
            models,
            yes: true,
            scripted_local: true,
            in_place: args.get(2).map(String::as_str) == Some("in-place"),
            ..StartOptions::default()
        };
        let start = Instant::now();
        let summary = api::start(&registry, &env, opts, &mut Quiet)
            .await
            .expect("run");
        let seconds = start.elapsed().as_secs_f64();
        server.shutdown().await;
        let outcome = match &summary.outcome {
            DriveOutcome::Complete => "complete".to_owned(),
            DriveOutcome::Paused { pause } => format!("paused {}", pause.code.as_str()),
        };
        let stages = autocode::run::load(&summary.run_dir)
            .map(|state| state.attempts.len())
            .unwrap_or(0);
        (seconds, outcome, stages, summary.run_dir)
    });
    // The run's verification tree is outside the run directory: measured, then removed (a
    // bench run must not leave a checkout of the repository in the cache).
    let run_id = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let verify_root = autocode::run::vtree::verification_root(&repo, &run_id);
    let verify_size = du(&verify_root);
    let _ = autocode::run::vtree::remove_verification_trees(&repo, &run_id);
    println!(
        "{seconds:.1} s | {outcome} | {stages} stages | run directory {:.1} MB | verification root {:.1} MB | {}",
        du(&run_dir) as f64 / 1e6,
        verify_size as f64 / 1e6,
        run_dir.display()
    );
}
