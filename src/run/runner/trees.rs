//! The runner's snapshots and verification tree (issue 13): one [`Snapshotter`] per work tree
//! (its private index is the stat cache), the run's [`VerifyTree`] (the tester's copy and every
//! replay; a second one for a replay that runs beside another), and the base tree saved as a
//! tree id and compared from git. A workspace outside git keeps the copies of
//! `super::super::replay` (the callers fall back when these return `None`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::CliRunner;
use crate::gittree::{SnapshotPath, TreeId};
use crate::pause::PauseCode;
use crate::role::Role;
use crate::run::confine;
use crate::run::integrity;
use crate::run::isolation::Isolation;
use crate::run::replay::{
    self, Batch, CopyReport, ReplayConfinement, ReplayError, Replays, Restore,
};
use crate::run::stage_runner::ReplayTree;
use crate::run::state::RunState;
use crate::run::vtree::{self, BaseSource, BaseTree, Layer, LayerError, VerifyTree};
use crate::snapshot::{Snapshotter, Taken};
use crate::verify::treediff::Comparison;

/// The tester's copy: the verification tree's directory, and the overlay the tester's family
/// mounts there (`None`: the tree is checked out in it).
pub(super) struct TesterTree {
    pub(super) dir: PathBuf,
    pub(super) overlay: Option<crate::supervise::Overlay>,
}

/// A replay's tree after composing: the verification tree that shows it, its id, and the work
/// tree's snapshot when one was just taken (the layer's lower tree).
pub(super) struct Composed {
    pub(super) vtree: VerifyTree,
    pub(super) target: TreeId,
    pub(super) now: Option<TreeId>,
}

/// The work tree's private index (the snapshots' stat cache) in the verification root.
const WORKTREE_INDEX: &str = "worktree.index";

pub(super) fn other(e: impl std::fmt::Display) -> ReplayError {
    ReplayError::Copy(std::io::Error::other(e.to_string()))
}

impl CliRunner {
    /// Before a stage of `role`: every role but the builder must leave the source as it found
    /// it, so its snapshot is taken (and recorded in `dir`), and the tester gets its copy, the
    /// verification tree brought to that snapshot (as an overlay when `overlay_allowed`: a CLI
    /// confined in its room; autocode's own runtime reads the tree itself). `Err`: what could
    /// not be prepared.
    pub(super) async fn before_stage(
        &mut self,
        state: &RunState,
        role: Role,
        dir: &std::path::Path,
        env: &BTreeMap<String, String>,
        overlay_allowed: bool,
    ) -> Result<(Option<Taken>, Option<TesterTree>), String> {
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
                .tester_tree(state, &before, env, overlay_allowed)
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
                // A confined judge's room cannot write the work tree (the tester writes its
                // copy, every other role nothing): what changed there is someone else's doing.
                let what = if state.unconfined {
                    format!(
                        "the workspace changed during the {role} stage, which the {role}'s role forbids (the run is unconfined: the {role} or another process changed it)"
                    )
                } else {
                    format!(
                        "the workspace changed during the {role} stage, though the {role}'s room could not write there: another process changed it (you, an editor, a tool); check the changes, then `autocode resume`"
                    )
                };
                Some((
                    PauseCode::PausedDiscoveryWrite,
                    format!("{what}: {}", names.join(", ")),
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
                &root.join(WORKTREE_INDEX),
                env,
            )
            .await
            .map_err(|e| e.to_string())?;
            // Only a work tree in git has a verification root.
            if snapshotter.store().is_some() {
                vtree::claim_root(&root, &state.run_dir())
                    .map_err(|e| format!("verification root {}: {e}", root.display()))?;
            }
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

    /// The run's verification tree (`None`: the work tree is not in git).
    pub(super) async fn verify_tree(
        &mut self,
        state: &RunState,
        env: &BTreeMap<String, String>,
    ) -> Result<Option<VerifyTree>, String> {
        let root = vtree::verification_root(&state.workspace, state.run_id.as_str());
        let store = self.snapshotter(state, env).await?.store().cloned();
        Ok(store.map(|store| {
            let tree = VerifyTree::new(&root, store, &state.work_tree);
            tree.remove_legacy_trees();
            tree
        }))
    }

    /// The tester's copy: the verification tree brought to `before` (the snapshot just taken),
    /// as an overlay when `overlay_allowed` and the run can use one. `Ok(None)`: outside git
    /// (the caller copies).
    pub(super) async fn tester_tree(
        &mut self,
        state: &RunState,
        before: &Taken,
        env: &BTreeMap<String, String>,
        overlay_allowed: bool,
    ) -> Result<Option<TesterTree>, String> {
        let Taken::Tree(tree) = before else {
            return Ok(None);
        };
        let Some(vtree) = self.verify_tree(state, env).await? else {
            return Ok(None);
        };
        if overlay_allowed
            && let Some(layer) = self
                .layer(state, &vtree, tree, Some(tree.clone()), env)
                .await?
        {
            return Ok(Some(TesterTree {
                dir: vtree.dir(),
                overlay: Some(layer.overlay),
            }));
        }
        vtree.bring_to(tree).await.map_err(|e| e.to_string())?;
        Ok(Some(TesterTree {
            dir: vtree.dir(),
            overlay: None,
        }))
    }

    /// Saves the base tree as a git tree (`<run>/base-tree.json`) and returns what its closed
    /// form leaves out: as its overlay would show it when the run uses one (nothing of the tree
    /// is written), else from the verification tree brought to it (where the plan's checks on
    /// the base run next). `Ok(None)`: outside git.
    pub(super) async fn save_base_tree(
        &mut self,
        state: &RunState,
        env: &BTreeMap<String, String>,
    ) -> Result<Option<Vec<String>>, String> {
        let Taken::Tree(tree) = self.snapshot(state, env).await? else {
            return Ok(None);
        };
        let Some(vtree) = self.verify_tree(state, env).await? else {
            return Ok(None);
        };
        let unclosed = match self
            .layer(state, &vtree, &tree, Some(tree.clone()), env)
            .await?
        {
            Some(layer) => layer.report.unclosed,
            None => {
                vtree
                    .bring_to(&tree)
                    .await
                    .map_err(|e| e.to_string())?
                    .unclosed
            }
        };
        let record = BaseTree { tree, dir: None };
        integrity::write_record(&state.run_dir().join(vtree::BASE_TREE_FILE), &record)
            .map_err(|e| e.to_string())?;
        Ok(Some(unclosed))
    }

    /// The work tree compared with the base tree: from git (the base tree id against a
    /// snapshot taken now), or by walking `<run>/base/` beside it. `Ok(None)`: no base saved.
    pub(super) async fn compare_with_base(
        &mut self,
        state: &RunState,
        env: &BTreeMap<String, String>,
    ) -> Result<Option<Comparison>, String> {
        match vtree::base_source(&state.verification, &state.run_dir()) {
            None => Ok(None),
            Some(BaseSource::Dir(dir)) => Ok(Some(Comparison::of_dirs(&dir, &state.work_tree))),
            Some(BaseSource::GitTree(base)) => {
                let Taken::Tree(now) = self.snapshot(state, env).await? else {
                    return Err(
                        "the base is a git tree but the work tree is no longer in git".into(),
                    );
                };
                let store = self
                    .snapshotter(state, env)
                    .await?
                    .store()
                    .cloned()
                    .ok_or_else(|| "the work tree's git store is gone".to_owned())?;
                Comparison::of_trees(&store, &base, &now)
                    .await
                    .map(Some)
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// Replays `commands` in the verification tree brought to `tree`'s content (the base tree,
    /// the work tree's snapshot, or that snapshot with some paths as they are in the base
    /// tree). `None`: outside git, or a base saved as a copy (the caller copies).
    #[cfg(test)]
    pub(super) async fn replay_in_tree(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        batch: Batch<'_>,
        env: &BTreeMap<String, String>,
        timeout: Duration,
        confinement: ReplayConfinement<'_>,
    ) -> Option<Result<Replays, ReplayError>> {
        let composed = match self
            .compose(state, tree, env, super::replays::TreeSlot::Main)
            .await?
        {
            Ok(composed) => composed,
            Err(e) => return Some(Err(e)),
        };
        Some(
            self.replay_composed(state, &composed, batch, env, timeout, confinement)
                .await,
        )
    }

    /// The tree a replay in `tree` runs in: its id after composing (the base tree, the work
    /// tree's snapshot, or that snapshot with some paths as they are in the base tree). `None`:
    /// outside git, or a base saved as a copy (the caller copies). `slot`: which of the run's
    /// verification trees shows it ([`Self::slot_tree`]).
    pub(super) async fn compose(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        env: &BTreeMap<String, String>,
        slot: super::replays::TreeSlot,
    ) -> Option<Result<Composed, ReplayError>> {
        let vtree = self.slot_tree(state, env, slot).await;
        let vtree = match vtree {
            Ok(Some(vtree)) => vtree,
            Ok(None) => return None,
            Err(e) => return Some(Err(other(e))),
        };
        let base = match vtree::base_source(&state.verification, &state.run_dir()) {
            Some(BaseSource::Dir(_)) => return None,
            Some(BaseSource::GitTree(base)) => Some(base),
            None => None,
        };
        // The work tree's snapshot, when one was just taken (the layer's lower tree).
        let mut now = None;
        let target = match tree {
            ReplayTree::Base => base.clone()?,
            ReplayTree::Final
            | ReplayTree::FinalWithBaseFiles(_)
            | ReplayTree::FinalWithBaseCode(_)
            | ReplayTree::FinalWithFailingTests(_) => match self.snapshot(state, env).await {
                Ok(Taken::Tree(tree)) => {
                    now = Some(tree.clone());
                    tree
                }
                Ok(Taken::Files(_)) => return None,
                Err(e) => return Some(Err(other(e))),
            },
        };
        let target = match (tree, &base) {
            (ReplayTree::FinalWithBaseFiles(files), Some(base)) => {
                match vtree
                    .store()
                    .with_paths_from(&target, base, files, &vtree.scratch_index())
                    .await
                {
                    Ok(composed) => composed,
                    Err(e) => return Some(Err(other(e))),
                }
            }
            (ReplayTree::FinalWithBaseCode(files), Some(base)) => {
                let store = vtree.store();
                let taken = match store
                    .with_paths_from(&target, base, files, &vtree.scratch_index())
                    .await
                {
                    Ok(taken) => taken,
                    Err(e) => return Some(Err(other(e))),
                };
                match super::witness_tree::witness_contents(store, base, &target, files).await {
                    Ok(contents) => match store
                        .with_contents_anywhere(&taken, &contents, &vtree.scratch_index())
                        .await
                    {
                        Ok(shown) => shown,
                        Err(e) => return Some(Err(other(e))),
                    },
                    Err(e) => return Some(Err(other(e))),
                }
            }
            (ReplayTree::FinalWithBaseFiles(_) | ReplayTree::FinalWithBaseCode(_), None) => {
                return None;
            }
            (ReplayTree::FinalWithFailingTests(checks), _) => {
                match super::failing_tree::with_failing_tests(&vtree, &target, checks).await {
                    Ok(failing) => failing,
                    Err(e) => return Some(Err(e)),
                }
            }
            _ => target,
        };
        Some(Ok(Composed { vtree, target, now }))
    }

    /// What the composed tree's git metadata shows besides its files: the work tree's `HEAD`
    /// and a digest of the tags and the `shallow` file (`vtree::gitdir`), for the replay key.
    pub(super) async fn shown_refs(
        &self,
        state: &RunState,
        composed: &Composed,
    ) -> Result<(Option<String>, String), ReplayError> {
        let store = composed.vtree.store();
        let head = store.head_of(&state.work_tree).await.map_err(other)?;
        let tags = store.tags_of(&state.work_tree).await.map_err(other)?;
        let shallow = std::fs::read(store.repo_common_dir().join("shallow")).ok();
        Ok((
            head.map(|h| h.as_str().to_owned()),
            crate::run::replay_cache::BatchKey::refs_digest(&tags, shallow.as_deref()),
        ))
    }

    /// Replays `commands` in the verification tree brought to the composed tree.
    pub(super) async fn replay_composed(
        &mut self,
        state: &RunState,
        composed: &Composed,
        batch: Batch<'_>,
        env: &BTreeMap<String, String>,
        timeout: Duration,
        confinement: ReplayConfinement<'_>,
    ) -> Result<Replays, ReplayError> {
        let Composed { vtree, target, now } = composed;
        let layer = match confinement {
            ReplayConfinement::Room { .. } => self
                .layer(state, vtree, target, now.clone(), env)
                .await
                .map_err(other)?,
            ReplayConfinement::Unconfined => None,
        };
        let base_unclosed = &state.verification.base_unclosed;
        let files = tree_files(composed).await;
        let checks_in = |report: CopyReport, overlay| {
            let dir = vtree.dir();
            let files = files.clone();
            async move {
                replay::refuse_unclosed(report.unclosed, base_unclosed)?;
                replay::run_batch_in(
                    &dir,
                    Restore::default(),
                    batch.prepare,
                    batch.commands,
                    env,
                    timeout,
                    confinement,
                    overlay,
                    files,
                )
                .await
            }
        };
        if let Some(layer) = layer {
            let replayed = checks_in(layer.report, Some(layer.overlay)).await;
            // An `--in-place` work tree is the person's: the replay stands only if nothing in
            // it moved meanwhile (the snapshot's fast path proves no stat changed since the
            // layer's snapshot); else it runs again in a checkout of the tree.
            if !matches!(state.isolation, Isolation::InPlace)
                || self.unchanged_since(state, &layer.lower_tree, env).await
            {
                return replayed;
            }
            tracing::debug!("the work tree moved during the replay: checked out and replayed");
        }
        match vtree.bring_to(target).await {
            Ok(report) => checks_in(report, None).await,
            Err(e) => Err(other(e)),
        }
    }

    /// Whether the work tree is still `tree`, proven without git: a snapshot on the fast path
    /// (no stat of what the tree depends on changed since the last snapshot git wrote).
    async fn unchanged_since(
        &mut self,
        state: &RunState,
        tree: &TreeId,
        env: &BTreeMap<String, String>,
    ) -> bool {
        match self.snapshot(state, env).await {
            Ok(Taken::Tree(now)) => {
                &now == tree
                    && self
                        .snapshotter(state, env)
                        .await
                        .is_ok_and(|s| s.last_path() == Some(SnapshotPath::Watched))
            }
            _ => false,
        }
    }

    /// `tree` as an overlay over the work tree (`crate::run::vtree::Layer`), for a confined
    /// family on a host that mounts overlays. `just_taken`: the work tree's snapshot when the
    /// caller took one right before (else one is taken here). `Ok(None)`: the caller checks the
    /// tree out (a host without overlays; a tree an overlay cannot show;
    /// `AUTOCODE_VERIFICATION_TREE=checkout`).
    pub(super) async fn layer(
        &mut self,
        state: &RunState,
        vtree: &VerifyTree,
        tree: &TreeId,
        just_taken: Option<TreeId>,
        env: &BTreeMap<String, String>,
    ) -> Result<Option<Layer>, String> {
        if state.unconfined
            || std::env::var("AUTOCODE_VERIFICATION_TREE").as_deref() == Ok("checkout")
        {
            return Ok(None);
        }
        // Tried where the upper layer will live (a file system that cannot hold one, as some
        // network file systems, checks the tree out instead), once per root.
        let root = vtree.root().to_owned();
        let missing = match self.overlay_roots.get(&root) {
            Some(missing) => missing.clone(),
            None => {
                let missing = crate::supervise::probe().overlay_missing_in(&root);
                self.overlay_roots.insert(root, missing.clone());
                missing
            }
        };
        if let Some(missing) = missing {
            tracing::debug!(%missing, "verification tree checked out");
            return Ok(None);
        }
        let lower_tree = match just_taken {
            Some(tree) => tree,
            None => match self.snapshot(state, env).await? {
                Taken::Tree(tree) => tree,
                Taken::Files(_) => return Ok(None),
            },
        };
        let lower_index =
            vtree::verification_root(&state.workspace, state.run_id.as_str()).join(WORKTREE_INDEX);
        // What the last layer read of the work tree still holds when this snapshot and the one
        // it was read after were both proven from the same watch state.
        let proof = self.snapshotter(state, env).await?.watch_proof();
        let mut known = match (self.lower_view.take(), proof) {
            (Some((then, view)), Some(now)) if then == now => Some(view),
            _ => None,
        };
        let reused = known.is_some();
        let started = std::time::Instant::now();
        let layer = vtree
            .layer_known(
                tree,
                &state.work_tree,
                &lower_index,
                &lower_tree,
                &mut known,
            )
            .await;
        self.lower_view = proof.zip(known);
        match layer {
            Ok(layer) => {
                tracing::debug!(
                    ms = started.elapsed().as_secs_f64() * 1e3,
                    reused,
                    "verification tree as an overlay"
                );
                Ok(Some(layer))
            }
            Err(LayerError::Unsupported(why)) => {
                tracing::debug!(%why, "verification tree checked out");
                Ok(None)
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Replays `commands` in a fresh copy (outside git, or an older run's copied base).
    pub(super) async fn replay_in_copy(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        batch: Batch<'_>,
        env: &BTreeMap<String, String>,
        confinement: ReplayConfinement<'_>,
    ) -> Result<Replays, ReplayError> {
        let base = vtree::base_copy_dir(&state.run_dir());
        let (root, restore) = match tree {
            ReplayTree::Final => (state.work_tree.clone(), Restore::default()),
            ReplayTree::Base => (base.clone(), Restore::default()),
            ReplayTree::FinalWithFailingTests(_) => {
                return Err(ReplayError::NoFailingTests(
                    "outside git autocode does not compose a tree with the tests made to fail"
                        .to_owned(),
                ));
            }
            // Outside git the code files come back whole, their inline tests with them; the
            // names the result adds stand in (`verify::standins`).
            ReplayTree::FinalWithBaseFiles(files) => (
                state.work_tree.clone(),
                Restore {
                    from: Some(&base),
                    files,
                    stand_ins: false,
                },
            ),
            ReplayTree::FinalWithBaseCode(files) => (
                state.work_tree.clone(),
                Restore {
                    from: Some(&base),
                    files,
                    stand_ins: true,
                },
            ),
        };
        replay::replay_checks_restoring(
            &root,
            restore,
            &state.verification.base_unclosed,
            batch.prepare,
            batch.commands,
            env,
            self.replay_timeout,
            confinement,
        )
        .await
    }
}

/// The files of the composed tree (its git entries, links and submodules left out), whose tests
/// a replay's checks must leave as they found them (`replay::TreeFiles`). A tree that cannot be
/// read watches nothing (the replay runs as before).
pub(super) async fn tree_files(composed: &Composed) -> replay::TreeFiles {
    match composed.vtree.store().entries(&composed.target).await {
        Ok(entries) => replay::TreeFiles::Listed(
            entries
                .into_iter()
                .filter(|e| e.mode.starts_with("100"))
                .map(|e| e.path)
                .collect(),
        ),
        Err(e) => {
            tracing::warn!("the replay's tree could not be listed, its tests are not watched: {e}");
            replay::TreeFiles::Listed(Vec::new())
        }
    }
}

#[cfg(test)]
mod tests;
