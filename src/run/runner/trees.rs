//! The runner's snapshots and verification trees (issue 13): one [`Snapshotter`] per work tree
//! (its private index is the stat cache), the run's [`VerifyTrees`], and the replays, the base
//! tree and the tester's copy made from them. A workspace outside git keeps the copies of
//! `super::super::replay` (the callers fall back when these return `None`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::CliRunner;
use crate::gittree::TreeId;
use crate::pause::PauseCode;
use crate::role::Role;
use crate::run::confine;
use crate::run::driver::ReplayTree;
use crate::run::integrity;
use crate::run::replay::{self, ReplayConfinement, ReplayError, Replayed, Restore};
use crate::run::state::RunState;
use crate::run::vtree::{self, BaseTree, TreeRole, VerifyTrees};
use crate::snapshot::{Snapshotter, Taken};

fn base_record(state: &RunState) -> Option<BaseTree> {
    vtree::base_record(&state.run_dir())
}

fn other(e: impl std::fmt::Display) -> ReplayError {
    ReplayError::Copy(std::io::Error::other(e.to_string()))
}

impl CliRunner {
    /// Before a stage of `role`: every role but the builder must leave the source as it found
    /// it, so its snapshot is taken (and recorded in `dir`), and the tester gets its copy, the
    /// verification tree brought to that snapshot. `Err`: what could not be prepared.
    pub(super) async fn before_stage(
        &mut self,
        state: &RunState,
        role: Role,
        dir: &std::path::Path,
        env: &BTreeMap<String, String>,
    ) -> Result<(Option<Taken>, Option<PathBuf>), String> {
        if role == Role::Builder {
            return Ok((None, None));
        }
        let before = self
            .snapshot(state, env)
            .await
            .map_err(|e| format!("cannot snapshot the workspace: {e}"))?;
        let _ =
            integrity::write_stage_record(&dir.join("snapshot-before.json"), &before.record(None));
        let tester_tree = match confine::WorktreeAccess::for_role(role) {
            confine::WorktreeAccess::Copy => self
                .tester_tree(state, &before, env)
                .await
                .map_err(|e| format!("cannot prepare the tester's copy: {e}"))?,
            _ => None,
        };
        Ok((Some(before), tester_tree))
    }

    /// After a stage that had to leave the source alone: `None` when it did (the snapshot
    /// after, with the changes, is recorded in `dir`), else the pause it comes to.
    pub(super) async fn changed_since(
        &mut self,
        state: &RunState,
        role: Role,
        before: &Taken,
        dir: &std::path::Path,
        env: &BTreeMap<String, String>,
    ) -> Option<(PauseCode, String)> {
        let compared = match self.snapshot(state, env).await {
            Ok(after) => match self.snapshotter(state, env).await {
                Ok(snapshotter) => snapshotter
                    .diff(before, &after)
                    .await
                    .map(|changes| (after, changes))
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match compared {
            Ok((after, changes)) => {
                let _ = integrity::write_stage_record(
                    &dir.join("snapshot-after.json"),
                    &after.record(Some(&changes)),
                );
                if changes.is_empty() {
                    return None;
                }
                let names: Vec<String> = changes
                    .iter()
                    .map(|c| format!("{} ({:?})", c.path, c.kind))
                    .collect();
                Some((
                    PauseCode::PausedDiscoveryWrite,
                    format!(
                        "the {role} changed the workspace, which its role forbids: {}",
                        names.join(", ")
                    ),
                ))
            }
            Err(e) => Some((
                PauseCode::PausedProviderUncertain,
                format!("cannot snapshot the workspace: {e}"),
            )),
        }
    }

    /// The snapshotter of the run's work tree, opened on first use.
    pub(super) async fn snapshotter(
        &mut self,
        state: &RunState,
        env: &BTreeMap<String, String>,
    ) -> Result<&mut Snapshotter, String> {
        if !self.snapshotters.contains_key(&state.work_tree) {
            let root = vtree::verification_root(&state.workspace, state.run_id.as_str());
            let snapshotter = Snapshotter::open(
                &state.work_tree,
                &state.run_dir().join("git"),
                &root.join("worktree.index"),
                env,
            )
            .await
            .map_err(|e| e.to_string())?;
            self.snapshotters
                .insert(state.work_tree.clone(), snapshotter);
        }
        self.snapshotters
            .get_mut(&state.work_tree)
            .ok_or_else(|| "no snapshotter".to_owned())
    }

    pub(super) async fn snapshot(
        &mut self,
        state: &RunState,
        env: &BTreeMap<String, String>,
    ) -> Result<Taken, String> {
        self.snapshotter(state, env)
            .await?
            .take()
            .await
            .map_err(|e| e.to_string())
    }

    /// The run's verification trees (`None`: the work tree is not in git).
    pub(super) async fn verify_trees(
        &mut self,
        state: &RunState,
        env: &BTreeMap<String, String>,
    ) -> Result<Option<VerifyTrees>, String> {
        let root = vtree::verification_root(&state.workspace, state.run_id.as_str());
        let store = self.snapshotter(state, env).await?.store().cloned();
        Ok(store.map(|store| VerifyTrees::new(&root, store)))
    }

    /// The tester's copy: the tester tree brought to `before` (the snapshot just taken).
    /// `Ok(None)`: outside git (the caller copies).
    pub(super) async fn tester_tree(
        &mut self,
        state: &RunState,
        before: &Taken,
        env: &BTreeMap<String, String>,
    ) -> Result<Option<PathBuf>, String> {
        let Taken::Tree(tree) = before else {
            return Ok(None);
        };
        let Some(trees) = self.verify_trees(state, env).await? else {
            return Ok(None);
        };
        trees
            .bring_to(TreeRole::Tester, tree)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Some(trees.dir(TreeRole::Tester)))
    }

    /// Saves the base tree as a git tree and materializes it. `Ok(None)`: outside git.
    pub(super) async fn save_base_tree(
        &mut self,
        state: &RunState,
        env: &BTreeMap<String, String>,
    ) -> Result<Option<Vec<String>>, String> {
        let Taken::Tree(tree) = self.snapshot(state, env).await? else {
            return Ok(None);
        };
        let Some(trees) = self.verify_trees(state, env).await? else {
            return Ok(None);
        };
        let unclosed = self.ensure_base(state, &trees, &tree).await?;
        Ok(Some(unclosed))
    }

    /// Brings the base verification tree to `tree` unless it is there, and records it.
    async fn ensure_base(
        &mut self,
        state: &RunState,
        trees: &VerifyTrees,
        tree: &TreeId,
    ) -> Result<Vec<String>, String> {
        let dir = trees.dir(TreeRole::Base);
        let record = BaseTree {
            tree: tree.clone(),
            dir: dir.clone(),
        };
        let unclosed = if trees.current(TreeRole::Base).as_ref() == Some(tree) {
            Vec::new()
        } else {
            trees
                .bring_to(TreeRole::Base, tree)
                .await
                .map_err(|e| e.to_string())?
                .unclosed
        };
        if base_record(state).as_ref() != Some(&record) {
            integrity::write_record(&state.run_dir().join(vtree::BASE_TREE_FILE), &record)
                .map_err(|e| e.to_string())?;
        }
        Ok(unclosed)
    }

    /// Replays `commands` in the replay tree brought to `tree`'s content. `None`: outside git,
    /// or a base saved as a copy by an older autocode (the caller copies).
    pub(super) async fn replay_in_tree(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        commands: &[String],
        env: &BTreeMap<String, String>,
        timeout: Duration,
        confinement: ReplayConfinement,
    ) -> Option<Result<Vec<Replayed>, ReplayError>> {
        let trees = match self.verify_trees(state, env).await {
            Ok(Some(trees)) => trees,
            Ok(None) => return None,
            Err(e) => return Some(Err(other(e))),
        };
        let base = base_record(state);
        if state.verification.base_saved && base.is_none() {
            return None;
        }
        if let Some(base) = &base
            && let Err(e) = self.ensure_base(state, &trees, &base.tree).await
        {
            return Some(Err(other(e)));
        }
        let target = match tree {
            ReplayTree::Base => match &base {
                Some(base) => base.tree.clone(),
                None => return None,
            },
            ReplayTree::Final | ReplayTree::FinalWithBaseFiles(_) => {
                match self.snapshot(state, env).await {
                    Ok(Taken::Tree(tree)) => tree,
                    Ok(Taken::Files(_)) => return None,
                    Err(e) => return Some(Err(other(e))),
                }
            }
        };
        let report = match trees.bring_to(TreeRole::Replay, &target).await {
            Ok(report) => report,
            Err(e) => return Some(Err(other(e))),
        };
        if let Err(e) = replay::refuse_unclosed(report.unclosed, &state.verification.base_unclosed)
        {
            return Some(Err(e));
        }
        let base_dir = trees.dir(TreeRole::Base);
        let restored = match tree {
            ReplayTree::FinalWithBaseFiles(files) => Restore {
                from: Some(&base_dir),
                files,
            },
            _ => Restore::default(),
        };
        Some(
            replay::run_checks_in(
                &trees.dir(TreeRole::Replay),
                restored,
                commands,
                env,
                timeout,
                confinement,
            )
            .await,
        )
    }

    /// Replays `commands` in a fresh copy (outside git, or an older run's copied base).
    pub(super) async fn replay_in_copy(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        commands: &[String],
        env: &BTreeMap<String, String>,
        confinement: ReplayConfinement,
    ) -> Result<Vec<Replayed>, ReplayError> {
        let base = crate::run::verify::base_dir(state);
        let (root, restore) = match tree {
            ReplayTree::Final => (state.work_tree.clone(), Restore::default()),
            ReplayTree::Base => (base.clone(), Restore::default()),
            ReplayTree::FinalWithBaseFiles(files) => (
                state.work_tree.clone(),
                Restore {
                    from: Some(&base),
                    files,
                },
            ),
        };
        replay::replay_checks_restoring(
            &root,
            restore,
            &state.verification.base_unclosed,
            commands,
            env,
            self.replay_timeout,
            confinement,
        )
        .await
    }
}
