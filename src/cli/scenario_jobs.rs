//! `scenario run --jobs N`: the planned jobs run N at a time, each in a child `autocode
//! scenario run` of its own (one case, one profile, one repetition), so jobs share no process
//! state (the boundary's keeper threads, the tokio runtime, the reaper). Each child writes its
//! `result.json` where a sequential run would; its messages are printed as one block when it
//! ends, so two jobs' lines never interleave.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::scenario::catalog::Job;
use crate::scenario::result::{self, RESULT_FILE, ScenarioResult};
use crate::scenario::runner;

/// What every child is given besides its job.
pub struct ChildArgs<'a> {
    pub out: &'a Path,
    pub cli_bin: &'a Path,
    pub catalog: &'a Path,
    pub authorize_live: bool,
}

/// One job's child arguments: the case, the profile and the one repetition (counted from 1).
fn child_args(job: &Job<'_>, args: &ChildArgs<'_>) -> Vec<OsString> {
    let repetition = job.repeat.saturating_add(1).to_string();
    let mut argv: Vec<OsString> = vec![
        "scenario".into(),
        "run".into(),
        job.scenario.name.clone().into(),
        "--profile".into(),
        job.profile.as_str().into(),
        "--repeat".into(),
        repetition.clone().into(),
        "--repetition".into(),
        repetition.into(),
        "--out".into(),
        args.out.into(),
        "--cli-bin".into(),
        args.cli_bin.into(),
        "--catalog".into(),
        args.catalog.into(),
    ];
    if args.authorize_live {
        argv.push("--i-authorize-live-model-spend".into());
    }
    argv
}

/// What a child's messages may hold (its lines per job are few; a flood is cut).
const MESSAGES_CAP: usize = 1 << 20;

/// Runs `jobs` in up to `parallel` children at a time; returns each job's result, in the order
/// of `jobs`. A child that leaves no readable result (it crashed, it was killed) is a harness
/// error for its job, never a silent gap.
pub fn run_in_children(
    jobs: &[Job<'_>],
    parallel: usize,
    args: &ChildArgs<'_>,
) -> Result<Vec<ScenarioResult>, std::io::Error> {
    let exe = std::env::current_exe()?;
    let queue: Mutex<VecDeque<usize>> = Mutex::new((0..jobs.len()).collect());
    let results: Mutex<Vec<Option<ScenarioResult>>> = Mutex::new(vec![None; jobs.len()]);
    let print = Mutex::new(());
    std::thread::scope(|scope| {
        for _ in 0..parallel.clamp(1, jobs.len().max(1)) {
            scope.spawn(|| {
                // The guard goes into the closure and is dropped there: never held for a job.
                while let Some(index) = queue.lock().ok().and_then(|mut q| q.pop_front()) {
                    let job = &jobs[index];
                    let result = run_child(&exe, job, args);
                    let block = render_block(job, &result);
                    if let Ok(_guard) = print.lock() {
                        eprint!("{block}");
                    }
                    if let Ok(mut all) = results.lock() {
                        all[index] = Some(result.result);
                    }
                }
            });
        }
    });
    let results = results
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Ok(results
        .into_iter()
        .zip(jobs)
        .map(|(result, job)| result.unwrap_or_else(|| missing(job, "the job never ran".to_owned())))
        .collect())
}

/// A finished child: its result and the messages it printed.
struct Finished {
    result: ScenarioResult,
    messages: String,
}

fn run_child(exe: &Path, job: &Job<'_>, args: &ChildArgs<'_>) -> Finished {
    let dir = result::result_dir(
        args.out,
        &job.scenario.name,
        job.profile.as_str(),
        job.repeat,
    );
    // A result an earlier run left there is not this child's.
    let _ = std::fs::remove_file(dir.join(RESULT_FILE));
    // The child is autocode itself, the boundary of the agents it starts: it runs as an
    // ordinary child (a boundary around it would refuse its own listener).
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let output = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|runtime| {
            runtime
                .block_on(crate::supervise::run_in_current_family(
                    &exe.as_os_str().to_owned(),
                    &child_args(job, args),
                    &cwd,
                    MESSAGES_CAP,
                ))
                .map_err(|e| e.to_string())
        });
    let (messages, status) = match output {
        Ok(out) => (
            String::from_utf8_lossy(&out.stderr).into_owned(),
            Some(out.exit),
        ),
        Err(e) => (format!("cannot start {}: {e}\n", exe.display()), None),
    };
    let result = match result::read(&dir.join(RESULT_FILE)) {
        Ok(result) => result,
        Err(e) => {
            let status = status.map_or_else(|| "did not start".to_owned(), |s| format!("{s:?}"));
            missing(
                job,
                format!(
                    "the job's process ended ({status}) without a readable {}: {e}",
                    dir.join(RESULT_FILE).display()
                ),
            )
        }
    };
    Finished { result, messages }
}

/// The child's own lines, or the job's line and verdict when it printed none.
fn render_block(job: &Job<'_>, finished: &Finished) -> String {
    let mut block = finished.messages.clone();
    if !block.contains(&format!("running {} on", job.scenario.name)) {
        block.insert_str(
            0,
            &format!(
                "running {} on {} (#{})\n  {}\n",
                job.scenario.name,
                job.profile,
                job.repeat + 1,
                finished.result.verdict
            ),
        );
    }
    if !block.ends_with('\n') {
        block.push('\n');
    }
    block
}

fn missing(job: &Job<'_>, message: String) -> ScenarioResult {
    runner::error_result(job, message, chrono::Utc::now(), std::time::Instant::now())
}

/// The out folder as children are given it: absolute, so a child's working directory never
/// changes where its result lands.
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}
