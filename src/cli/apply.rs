//! `autocode apply [RUN] [--squash] [--workspace DIR] [--json]`: takes a completed run's result
//! — the commits on `autocode/<run-id>` — into your current branch, as a merge (fast-forward
//! when possible) or, with `--squash`, as one commit. It refuses (exit 2, nothing done) a run
//! that is not complete or worked in place, a checkout with uncommitted changes (`.autocode/`
//! aside), and a merge that would replace a file of yours that git does not track (untracked or
//! ignored, like a `.env`); a merge that conflicts is aborted, leaving your tree as it was
//! (exit 1). A squash is recorded in the run's directory, so a second `apply` does nothing and
//! `clean` knows the result was taken.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::output;
use crate::error::{EdgeError, exit};
use crate::ids::RunId;
use crate::run::commit::{self, MergeMode, MergeOutcome};
use crate::run::isolation::Isolation;
use crate::run::state::Phase;
use crate::run::workspace;

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The run whose result to take (default: the most recent run).
    pub run: Option<RunId>,
    /// One commit on your branch instead of the run's own commits.
    #[arg(long)]
    pub squash: bool,
    /// The project the run belongs to (default: the current directory).
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Applied<'a> {
    run_id: &'a RunId,
    branch: &'a str,
    into: &'a str,
    mode: MergeMode,
    #[serde(flatten)]
    outcome: &'a MergeOutcome,
}

fn is_autocode_path(line: &str) -> bool {
    let path = line.get(3..).unwrap_or(line);
    path.starts_with(".autocode/") || path.contains("/.autocode/")
}

pub fn apply(args: ApplyArgs) -> Result<ExitCode, EdgeError> {
    let super::clean::HeldRun {
        workspace,
        dir,
        env,
        runtime,
        state,
        lock: _lock,
    } = super::clean::hold_run(&args.workspace, args.run.as_ref(), "nothing was merged")?;
    let id = &state.run_id;
    let (_, branch) = workspace::worktree_location(&workspace, id);
    if !matches!(&state.isolation, Isolation::Worktree { branch: b, .. } if *b == branch) {
        return Err(EdgeError::usage(format!(
            "run {id} worked in place: its changes are already in your files (not committed); there is no branch to apply"
        )));
    }
    if state.phase != Phase::Complete {
        return Err(EdgeError::usage(format!(
            "run {id} is not complete; nothing was merged"
        ))
        .hint(format!(
            "`autocode status {id}` says where it stands; `git merge {branch}` takes its accepted builder stages anyway"
        )));
    }
    if let Err(e) = crate::transport::opencode::ensure_git_exclusions(&workspace) {
        output::say!("could not add .autocode/ to the repository's info/exclude: {e}");
    }
    if let Some(commit) = runtime.block_on(commit::squash_applied(&workspace, &dir, &branch, &env))
    {
        return finish(
            &args,
            id,
            &branch,
            &current_branch(&runtime, &workspace, &env),
            MergeMode::Squash,
            &MergeOutcome::AlreadySquashed { commit },
        );
    }
    let overwritten = runtime
        .block_on(commit::files_merge_would_overwrite(
            &workspace, &branch, &env,
        ))
        .map_err(EdgeError::internal)?;
    if !overwritten.is_empty() {
        return Err(EdgeError::usage(format!(
            "taking {branch} would replace {} file(s) of yours that git does not track (untracked or ignored): {}; nothing was merged",
            overwritten.len(),
            overwritten.join(", ")
        ))
        .hint(format!(
            "move them out of the way (or commit them), then `autocode apply {id}`; compare first with `git show {branch}:<path>`"
        )));
    }
    let dirty: Vec<String> = runtime
        .block_on(workspace::uncommitted_changes(&workspace, &env))
        .map_err(EdgeError::internal)?
        .into_iter()
        .filter(|l| !is_autocode_path(l))
        .collect();
    if !dirty.is_empty() {
        let names: Vec<&str> = dirty.iter().map(|l| l.get(3..).unwrap_or(l)).collect();
        return Err(EdgeError::usage(format!(
            "your checkout has uncommitted changes ({}); nothing was merged",
            names.join(", ")
        ))
        .hint(format!(
            "commit or stash them (`git stash -u`), then `autocode apply {id}`"
        )));
    }
    let into = current_branch(&runtime, &workspace, &env);
    let tip = runtime
        .block_on(workspace::git(&workspace, &["rev-parse", &branch], &env))
        .map_err(EdgeError::internal)?;
    let mode = if args.squash {
        MergeMode::Squash
    } else {
        MergeMode::Merge
    };
    let message = format!(
        "autocode: run {id}: {}",
        state.objective.lines().next().unwrap_or_default()
    );
    let outcome = runtime
        .block_on(commit::merge_run_branch(
            &workspace, &branch, mode, &message, &env,
        ))
        .map_err(EdgeError::internal)?;
    if let (MergeMode::Squash, MergeOutcome::Merged { commit }) = (mode, &outcome) {
        commit::record_squash(&dir, tip.trim(), commit).map_err(|e| {
            EdgeError::internal(format!(
                "squashed {branch} into {into} as {commit}, but could not record it ({e}): `autocode clean {id}` will count the branch as unmerged; do not apply it again"
            ))
        })?;
    }
    finish(&args, id, &branch, &into, mode, &outcome)
}

/// The user's current branch, for messages.
fn current_branch(
    runtime: &tokio::runtime::Runtime,
    workspace: &std::path::Path,
    env: &std::collections::BTreeMap<String, String>,
) -> String {
    runtime
        .block_on(workspace::git(
            workspace,
            &["symbolic-ref", "--quiet", "--short", "HEAD"],
            env,
        ))
        .map(|b| b.trim().to_owned())
        .unwrap_or_else(|_| "HEAD (detached)".into())
}

/// Prints what `apply` did (JSON on stdout when asked, a line for people on stderr).
fn finish(
    args: &ApplyArgs,
    id: &RunId,
    branch: &str,
    into: &str,
    mode: MergeMode,
    outcome: &MergeOutcome,
) -> Result<ExitCode, EdgeError> {
    if args.json {
        output::print_json(&Applied {
            run_id: id,
            branch,
            into,
            mode,
            outcome,
        })?;
    }
    match outcome {
        MergeOutcome::AlreadyMerged => {
            output::say!("{branch} is already in {into}: nothing to do");
            Ok(ExitCode::from(exit::OK))
        }
        MergeOutcome::AlreadySquashed { commit } => {
            output::say!(
                "{branch} was already squashed into {into} as {commit}: nothing to do; the run's worktree and branch can go: autocode clean {id}"
            );
            Ok(ExitCode::from(exit::OK))
        }
        MergeOutcome::Merged { commit } => {
            let how = if args.squash { "squashed" } else { "merged" };
            output::say!("{how} {branch} into {into} (now at {commit})");
            output::say!("the run's worktree and branch can go: autocode clean {id}");
            Ok(ExitCode::from(exit::OK))
        }
        MergeOutcome::Conflict { files } => {
            output::say!(
                "error: merging {branch} into {into} conflicts in {}: the merge was aborted and your tree is as it was",
                files.join(", ")
            );
            output::say!(
                "hint: merge by hand (`git merge {branch}`, resolve, commit), or rebase the branch first"
            );
            Ok(ExitCode::from(exit::FAILED))
        }
    }
}

/// The COMPLETE lines about the result: where it is and how to take it (stderr, for people).
pub fn say_result(summary: &crate::run::api::RunSummary) {
    match (&summary.result, &summary.isolation) {
        (Some(result), _) => {
            output::say!(
                "result: {} commit(s) on branch {} (worktree {})",
                result.commits,
                result.branch,
                summary.work_tree.display()
            );
            if !result.diff_stat.is_empty() {
                output::say!("{}", result.diff_stat);
            }
            output::say!("take it: {}", result.take.join("   or   "));
        }
        (None, Isolation::InPlace) => output::say!(
            "worked in place: the changes are in {} and are not committed",
            summary.work_tree.display()
        ),
        (None, Isolation::Worktree { branch, .. }) => output::say!(
            "result: branch {branch} (worktree {}); take it with `autocode apply {}`",
            summary.work_tree.display(),
            summary.run_id
        ),
    }
}
