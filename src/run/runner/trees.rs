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
mod tests {
    use super::*;
    use crate::ids::{ProviderName, RunId};
    use crate::run::workspace::git_test_env as env;

    /// An `--in-place` run over a fresh git workspace `ws/` holding `files`, with its run
    /// directory and a runner; its verification root goes with it.
    struct InPlace {
        _dir: tempfile::TempDir,
        ws: PathBuf,
        state: RunState,
        runner: CliRunner,
    }

    impl InPlace {
        async fn new(files: &[(&str, &str)]) -> InPlace {
            static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let dir = tempfile::tempdir().unwrap();
            let root = std::fs::canonicalize(dir.path()).unwrap();
            let ws = root.join("ws");
            crate::run::workspace::git_init_for_tests(&ws).await;
            for (path, content) in files {
                let path = ws.join(path);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, content).unwrap();
            }
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let run_id = format!("t{n}-{}", std::process::id());
            let state = RunState::new(
                RunId::new(&run_id).unwrap(),
                "objective".into(),
                ws.clone(),
                ProviderName::new("p").unwrap(),
                BTreeMap::new(),
            );
            assert!(matches!(state.isolation, Isolation::InPlace));
            std::fs::create_dir_all(state.run_dir()).unwrap();
            InPlace {
                _dir: dir,
                ws,
                state,
                runner: CliRunner::new(env(), Vec::new()),
            }
        }

        async fn snapshot(&mut self) -> TreeId {
            match self.runner.snapshot(&self.state, &env()).await.unwrap() {
                Taken::Tree(tree) => tree,
                Taken::Files(_) => panic!("a git workspace"),
            }
        }

        /// Snapshots until one git wrote has recorded a watch state (the files just written
        /// are within the racy rule's tick at first).
        async fn settled(&mut self) -> TreeId {
            let mut tree = self.snapshot().await;
            for _ in 0..2 {
                tree = self.snapshot().await;
            }
            tree
        }
    }

    impl Drop for InPlace {
        fn drop(&mut self) {
            let _ = vtree::remove_verification_trees(&self.ws, self.state.run_id.as_str());
        }
    }

    /// An `--in-place` replay stands only while the person's workspace holds still: proven by
    /// a snapshot on the fast path with the layer's tree; an edit, even one that puts the same
    /// content back, is a move.
    #[tokio::test]
    async fn an_in_place_workspace_holds_still_only_if_no_stat_moved() {
        let mut f = InPlace::new(&[("a.txt", "a\n")]).await;
        let tree = f.settled().await;
        let (runner, state) = (&mut f.runner, &f.state);
        assert!(runner.unchanged_since(state, &tree, &env()).await);
        // The same content written again moves the file's stat.
        std::fs::write(f.ws.join("a.txt"), "a\n").unwrap();
        assert!(!runner.unchanged_since(state, &tree, &env()).await);
        // Still, once git wrote that snapshot, the tree holds still again.
        assert!(runner.unchanged_since(state, &tree, &env()).await);
        std::fs::write(f.ws.join("b.txt"), "new\n").unwrap();
        assert!(!runner.unchanged_since(state, &tree, &env()).await);
    }

    /// An `--in-place` replay during which the person edits the workspace does not stand: it
    /// runs again in a checkout of the tree. The check waits on a FIFO outside the workspace;
    /// whoever opens the FIFO's other end (this test's thread) edits the workspace at the
    /// first run of the check and lets each run go on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_in_place_replay_is_redone_in_a_checkout_when_the_workspace_moved() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let mut f = InPlace::new(&[("a.txt", "a\n")]).await;
        // Outside /tmp and HOME: in the replay's private view of those a FIFO is another pipe.
        let gate_dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let gate = gate_dir.path().join("gate");
        nix::unistd::mkfifo(&gate, nix::sys::stat::Mode::S_IRWXU).unwrap();
        f.settled().await;
        let served = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let opener = {
            let (gate, ws, served, stop) =
                (gate.clone(), f.ws.clone(), served.clone(), stop.clone());
            std::thread::spawn(move || {
                loop {
                    // Blocks until a run of the check opens the FIFO to read.
                    let mut end = std::fs::OpenOptions::new().write(true).open(&gate).unwrap();
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    if served.fetch_add(1, Ordering::SeqCst) == 0 {
                        // The person saves the file again, same content: its stat moves.
                        std::fs::write(ws.join("a.txt"), "a\n").unwrap();
                    }
                    std::io::Write::write_all(&mut end, b"go\n").unwrap();
                    // Waits until that run closes its end (POLLERR on ours): one serve a run.
                    use std::os::fd::AsFd;
                    let mut fds = [nix::poll::PollFd::new(
                        end.as_fd(),
                        nix::poll::PollFlags::empty(),
                    )];
                    nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE).unwrap();
                }
            })
        };
        let check = format!("read -r go < {} && grep -qx a a.txt", gate.display());
        let replayed = f
            .runner
            .replay_in_tree(
                &f.state,
                &ReplayTree::Final,
                Batch {
                    prepare: &[],
                    commands: std::slice::from_ref(&check),
                },
                &env(),
                Duration::from_secs(60),
                ReplayConfinement::Room { allow_connect: &[] },
            )
            .await
            .expect("a git workspace")
            .unwrap()
            .checks;
        stop.store(true, Ordering::SeqCst);
        // Releases the thread's next open, if it waits on one.
        let _release = nix::fcntl::open(
            &gate,
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_NONBLOCK,
            nix::sys::stat::Mode::empty(),
        )
        .unwrap();
        opener.join().unwrap();
        assert_eq!(served.load(Ordering::SeqCst), 2, "the check ran twice");
        assert_eq!(replayed.len(), 1);
        assert!(replayed[0].passed(), "{replayed:?}");
        let room = replayed[0].receipt.room.as_ref().expect("a room");
        assert!(
            room.overlay.is_none(),
            "the result is the checkout's: {room:?}"
        );
    }

    /// What a layer read of the work tree serves the next layer only while the snapshots'
    /// fast path proves nothing moved: an ignored file left in a tracked directory after one
    /// layer (the same tree for git) is hidden from the next.
    #[tokio::test]
    async fn a_layer_reads_the_work_tree_again_once_anything_moved() {
        let mut f = InPlace::new(&[(".gitignore", "*.log\n"), ("src/a.txt", "a\n")]).await;
        let env = env();
        let vtree = f.runner.verify_tree(&f.state, &env).await.unwrap().unwrap();
        let mut whiteouts = Vec::new();
        let mut tree = None;
        for round in 0..4 {
            if round == 3 {
                std::fs::write(f.ws.join("src/left.log"), "left by an agent\n").unwrap();
            }
            let taken = f.snapshot().await;
            assert!(
                tree.is_none_or(|t| t == taken),
                "an ignored file is not in the tree"
            );
            let just_taken = Some(taken.clone());
            let layer = f.runner.layer(&f.state, &vtree, &taken, just_taken, &env);
            let layer = layer.await;
            let Some(layer) = layer.unwrap() else {
                panic!("this host mounts overlays");
            };
            let upper = layer.overlay.upper;
            // The work tree's `.git` is covered by the tree's own (`vtree::gitdir`).
            assert!(upper.join(".git").is_file());
            whiteouts = ["src/left.log", ".git"]
                .into_iter()
                .filter(|rel| {
                    use std::os::unix::fs::FileTypeExt;
                    std::fs::symlink_metadata(upper.join(rel))
                        .is_ok_and(|m| m.file_type().is_char_device())
                })
                .collect();
            if round == 2 {
                assert!(f.runner.lower_view.is_some(), "the work tree settled");
            }
            tree = Some(taken);
        }
        assert_eq!(whiteouts, ["src/left.log"]);
    }
}
