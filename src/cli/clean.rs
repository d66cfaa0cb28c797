//! `autocode clean [RUN] [--force] [--workspace DIR] [--json]`: removes a run's worktree, its
//! branch `autocode/<run-id>` and its verification tree. The run's result is never lost by
//! accident: a branch with commits your current branch lacks, or a worktree with uncommitted
//! changes, stays unless `--force`. Without a run id, clean names the latest run and what it
//! would remove, and asks on a terminal; without one it refuses (exit 2) and says how to name
//! the run.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::output;
use crate::error::{EdgeError, exit};
use crate::ids::RunId;
use crate::run::clean::{self, CleanPlan};
use crate::store::{RunLock, StoreError};

#[derive(Debug, Args)]
pub struct CleanArgs {
    /// The run to clean (default: the most recent run, named and confirmed on a terminal).
    pub run: Option<RunId>,
    /// The project the run belongs to (default: the current directory).
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// Remove even a branch with commits your current branch does not have, or a worktree with
    /// uncommitted changes: the run's result is lost.
    #[arg(long)]
    pub force: bool,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Cleaned<'a> {
    run_id: &'a RunId,
    removed: Vec<String>,
    #[serde(flatten)]
    plan: &'a CleanPlan,
}

/// A run found in a workspace, held by its lock and verified again under it: what `clean` and
/// `apply` act on. Dropping it releases the lock.
pub(super) struct HeldRun {
    pub workspace: PathBuf,
    /// The run's directory (`.autocode/runs/<run-id>`).
    pub dir: PathBuf,
    pub env: BTreeMap<String, String>,
    pub runtime: tokio::runtime::Runtime,
    pub state: crate::run::state::RunState,
    /// Held until the command is done.
    pub lock: RunLock,
}

/// Finds `run` (or the latest) in `workspace`, takes its lock and verifies it under the lock;
/// a run held by another autocode is refused, the message ending with `nothing_done`.
pub(super) fn hold_run(
    workspace: &std::path::Path,
    run: Option<&RunId>,
    nothing_done: &str,
) -> Result<HeldRun, EdgeError> {
    let workspace = std::fs::canonicalize(workspace)
        .map_err(|e| EdgeError::usage(format!("workspace {}: {e}", workspace.display())))?;
    let env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let runtime = super::runtime()?;
    let found = runtime
        .block_on(crate::run::find_run(&workspace, run, &env))
        .map_err(super::run::find_error)?;
    let lock = match RunLock::acquire(&found.dir.join("lock")) {
        Ok(lock) => lock,
        Err(StoreError::Busy { .. }) => {
            return Err(EdgeError::usage(format!(
                "run {} is in use by another autocode process; {nothing_done}",
                found.state.run_id
            ))
            .hint(format!("autocode status {}", found.state.run_id)));
        }
        Err(e) => return Err(EdgeError::internal(e)),
    };
    // Verified again under the lock.
    let state = runtime
        .block_on(crate::run::trust::verify_run(&workspace, &found.dir, &env))
        .map_err(|e| super::run::find_error(e.into()))?;
    Ok(HeldRun {
        workspace,
        dir: found.dir,
        env,
        runtime,
        state,
        lock,
    })
}

/// Asks `prompt` on the terminal; `true` for yes.
fn confirm(prompt: &str) -> bool {
    // The prompt names runs and paths: stripped like every line for the terminal, and a
    // closed stderr is not a panic.
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{}", crate::term_text::terminal_safe(prompt));
    let _ = err.flush();
    drop(err);
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim(), "y" | "Y" | "yes")
}

pub fn clean(args: CleanArgs) -> Result<ExitCode, EdgeError> {
    let HeldRun {
        workspace,
        dir,
        env,
        runtime,
        state,
        lock: _lock,
    } = hold_run(&args.workspace, args.run.as_ref(), "nothing was removed")?;
    let id = state.run_id.clone();
    let plan = runtime
        .block_on(clean::plan(&workspace, &dir, &state, &env))
        .map_err(EdgeError::internal)?;
    if plan.is_empty() {
        output::say!("run {id}: nothing to remove (no worktree, branch or verification tree)");
        if args.json {
            output::print_json(&Cleaned {
                run_id: &id,
                removed: Vec::new(),
                plan: &plan,
            })?;
        }
        return Ok(ExitCode::from(exit::OK));
    }
    let listing = plan.describe().join(", ");
    let blockers = plan.blockers();
    if !blockers.is_empty() && !args.force {
        return Err(EdgeError::usage(format!(
            "not cleaning run {id}: {}; nothing was removed",
            blockers.join("; ")
        ))
        .hint(format!(
            "take the result first (`autocode apply {id}`), or discard it with `autocode clean {id} --force`"
        )));
    }
    if args.run.is_none() {
        let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        if !interactive {
            return Err(EdgeError::usage(format!(
                "clean without a run id would remove the latest run {id}: {listing}; nothing was removed"
            ))
            .hint(format!("name the run: `autocode clean {id}`")));
        }
        output::say!(
            "run {id} ({}): would remove {listing}",
            state.objective.lines().next().unwrap_or_default()
        );
        if !confirm("remove? [y/N] ") {
            output::say!("nothing was removed");
            return Ok(ExitCode::from(exit::OK));
        }
    }
    runtime
        .block_on(clean::execute(&workspace, &plan, &env))
        .map_err(EdgeError::internal)?;
    output::say!("run {id}: removed {listing}");
    if args.json {
        output::print_json(&Cleaned {
            run_id: &id,
            removed: plan.describe(),
            plan: &plan,
        })?;
    }
    Ok(ExitCode::from(exit::OK))
}
