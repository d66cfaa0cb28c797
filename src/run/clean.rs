//! What `autocode clean` may remove, and removing it: a run's worktree, its branch
//! `autocode/<run-id>` and its verification trees (`run::vtree`, outside the workspace). A branch with
//! commits the user's current branch does not have, or a worktree with uncommitted changes, is
//! the run's result: it is removed only with `--force` ([`CleanPlan::blockers`]). A branch that
//! `apply --squash` took (its record in the run's directory, the squash commit in the user's
//! history, the branch unchanged since) is taken, whatever its own commits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::state::RunState;
use super::workspace::{self, WorkspaceError, git};
use crate::ids::RunId;

/// What cleaning one run would remove, and what would be lost.
#[derive(Debug, Clone, Serialize)]
pub struct CleanPlan {
    pub run_id: RunId,
    /// The run's worktree, when it exists.
    pub worktree: Option<PathBuf>,
    /// `autocode/<run-id>`, when it exists.
    pub branch: Option<String>,
    /// `.autocode/verify/<run-id>`, when it exists.
    pub verify_tree: Option<PathBuf>,
    /// Commits on the branch that the user's current HEAD does not have.
    pub unmerged_commits: u64,
    /// The squash commit in the user's history that holds the branch's result, when
    /// `apply --squash` took it.
    pub squashed_as: Option<String>,
    /// Uncommitted changes in the worktree (`git status --porcelain` lines).
    pub uncommitted: Vec<String>,
}

impl CleanPlan {
    /// Nothing to remove.
    pub fn is_empty(&self) -> bool {
        self.worktree.is_none() && self.branch.is_none() && self.verify_tree.is_none()
    }

    /// Why removing would lose work (empty: safe without `--force`).
    pub fn blockers(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let (Some(branch), n @ 1.., None) =
            (&self.branch, self.unmerged_commits, &self.squashed_as)
        {
            out.push(format!(
                "branch {branch} has {n} commit(s) that your current branch does not have (take them with `autocode apply {}`)",
                self.run_id
            ));
        }
        if let (Some(tree), false) = (&self.worktree, self.uncommitted.is_empty()) {
            out.push(format!(
                "worktree {} has {} uncommitted change(s)",
                tree.display(),
                self.uncommitted.len()
            ));
        }
        out
    }

    /// One line per thing that would be removed.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(tree) = &self.worktree {
            out.push(format!("worktree {}", tree.display()));
        }
        if let Some(branch) = &self.branch {
            out.push(format!("branch {branch}"));
        }
        if let Some(tree) = &self.verify_tree {
            out.push(format!("verification tree {}", tree.display()));
        }
        out
    }
}

/// Where the run's verification trees live (`run::vtree::verification_root`, outside the
/// workspace and every agent's room).
pub fn verify_tree_path(workspace: &Path, run_id: &RunId) -> PathBuf {
    super::vtree::verification_root(workspace, run_id.as_str())
}

/// What cleaning `state`'s run (its directory `run_dir`) in `workspace` (canonical) would remove.
pub async fn plan(
    workspace: &Path,
    run_dir: &Path,
    state: &RunState,
    env: &BTreeMap<String, String>,
) -> Result<CleanPlan, WorkspaceError> {
    let (path, branch) = workspace::worktree_location(workspace, &state.run_id);
    let worktree = path.is_dir().then_some(path);
    let uncommitted = match &worktree {
        Some(tree) => workspace::uncommitted_changes(tree, env).await?,
        None => Vec::new(),
    };
    let in_repo = git(workspace, &["rev-parse", "--is-inside-work-tree"], env)
        .await
        .is_ok();
    let exists = in_repo
        && !git(workspace, &["branch", "--list", &branch], env)
            .await?
            .trim()
            .is_empty();
    let unmerged_commits = if exists {
        super::commit::unmerged_commits(workspace, &branch, env).await?
    } else {
        0
    };
    let squashed_as = if unmerged_commits > 0 {
        super::commit::squash_applied(workspace, run_dir, &branch, env).await
    } else {
        None
    };
    let verify = verify_tree_path(workspace, &state.run_id);
    Ok(CleanPlan {
        run_id: state.run_id.clone(),
        worktree,
        branch: exists.then_some(branch),
        verify_tree: verify.exists().then_some(verify),
        unmerged_commits,
        squashed_as,
        uncommitted,
    })
}

/// Removes what `plan` names (the caller has checked its blockers or was told `--force`).
pub async fn execute(
    workspace: &Path,
    plan: &CleanPlan,
    env: &BTreeMap<String, String>,
) -> Result<(), WorkspaceError> {
    if let Some(tree) = &plan.verify_tree {
        super::vtree::remove_verification_trees(workspace, plan.run_id.as_str()).map_err(|e| {
            WorkspaceError::Git {
                args: "(remove the verification trees)".into(),
                dir: tree.clone(),
                detail: e.to_string(),
            }
        })?;
    }
    if plan.worktree.is_some() || plan.branch.is_some() {
        workspace::remove_worktree(workspace, &plan.run_id, env).await?;
    }
    // The run's private layers of HOME (kept until now for inspection) go with it.
    let run_dir = super::runs_dir(workspace).join(plan.run_id.as_str());
    if let Err(e) = super::layers::remove_run_layers(&run_dir) {
        tracing::warn!("cannot remove the run's private layers: {e}");
    }
    Ok(())
}
