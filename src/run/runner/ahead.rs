//! Replays prepared while the tester works: before a tester's stage the driver names the batches
//! its report will most likely have autocode replay (`crate::run::replay_verdicts::replay_ahead`:
//! the tester's own, and for the last milestone the final gate's witness replay and its replay
//! with the base tests restored). Each gets a verification tree of its own (`TreeSlot::Ahead`:
//! `ahead-N/`; the tester's copy is the run's own tree) laid out as an overlay, and its room,
//! where its `prepare` steps (the installs) run in a task of their own while the stage does.
//! Only the steps: a check never runs beside the tester or another batch.
//!
//! A replay asked for later takes a prepared room only when it is the same batch: the same tree
//! and steps, and the same key (`crate::run::replay_cache::BatchKey`: the composed tree, `HEAD`
//! and tags, the checks' environment, the room, the timeout), computed again then. Its checks run
//! there once every prepared batch's steps are done. Anything else (another batch, a step that
//! failed, which may have failed beside the stage, a host without overlays, `--in-place`,
//! `--unconfined`) runs as before, alone, and what was prepared goes with its tree.

use std::path::PathBuf;

use tokio::task::JoinHandle;

use super::CliRunner;
use super::replays::{TreeSlot, confinement};
use crate::run::flow::PauseDecision;
use crate::run::isolation::Isolation;
use crate::run::prepare::PrepareStep;
use crate::run::replay::{self, BatchRoom, ReplayError, Replayed, Replays, Restore};
use crate::run::replay_cache::BatchKey;
use crate::run::stage_runner::{OwnedReplayAsk, ReplayResult, ReplayTree};
use crate::run::state::RunState;
use crate::supervise::net::NetAllow;

/// What the steps of a prepared batch came to (the room stays open for its checks).
type StepsRun = (BatchRoom, Result<Vec<Replayed>, ReplayError>);

/// A batch whose room is prepared (or being prepared) ahead of its replay. Dropped, its room
/// and its tree go (a task still running is stopped first).
pub(super) struct AheadBatch {
    tree: ReplayTree,
    prepare: Vec<PrepareStep>,
    slot: TreeSlot,
    key: BatchKey,
    /// The root of its verification tree (never the run's own).
    root: PathBuf,
    steps: Preparing,
}

enum Preparing {
    Running(JoinHandle<StepsRun>),
    Done(Box<StepsRun>),
    Gone,
}

impl AheadBatch {
    /// Waits for its steps to end.
    async fn settle(&mut self) {
        if let Preparing::Running(task) = &mut self.steps {
            self.steps = match task.await {
                Ok(done) => Preparing::Done(Box::new(done)),
                Err(e) => {
                    tracing::debug!(%e, "a batch prepared ahead did not finish");
                    Preparing::Gone
                }
            };
        }
    }
}

impl Drop for AheadBatch {
    fn drop(&mut self) {
        if let Preparing::Running(task) = &self.steps {
            task.abort();
        }
        // The room (its HOME and /tmp layers) before the tree it ran in.
        self.steps = Preparing::Gone;
        if let Err(e) = crate::gittree::remove_all(&self.root) {
            tracing::debug!(%e, "a tree prepared ahead stays until the run's root goes");
        }
    }
}

impl CliRunner {
    /// Starts the `prepare` steps of `batches`, each in its own verification tree and room
    /// (`ahead-1/`, `ahead-2/`, … of the run's verification root), and returns: the steps run
    /// in tasks of their own. What an earlier call prepared goes first. Nothing starts for a
    /// batch without steps, one whose known checks all have stored verdicts, in a run that
    /// replays in place or unconfined, or where the tree cannot be an overlay.
    pub(super) async fn start_ahead(&mut self, state: &RunState, batches: &[OwnedReplayAsk]) {
        self.settle_ahead().await;
        self.ahead.clear();
        if state.unconfined || matches!(state.isolation, Isolation::InPlace) {
            return;
        }
        let allow_connect = self.replay_allowances();
        for (n, asked) in batches.iter().enumerate() {
            let slot = TreeSlot::Ahead(n + 1);
            if asked.1.is_empty() {
                continue;
            }
            if let Some(batch) = self.open_ahead(state, asked, slot, &allow_connect).await {
                self.ahead.push(batch);
            }
        }
    }

    async fn open_ahead(
        &mut self,
        state: &RunState,
        (tree, prepare, commands): &OwnedReplayAsk,
        slot: TreeSlot,
        allow_connect: &[NetAllow],
    ) -> Option<AheadBatch> {
        let planned = self
            .plan_batch(state, tree, prepare, commands, allow_connect, slot)
            .await
            .ok()?;
        let key = planned.keyed.clone()?;
        // Every check it will run has a stored verdict for this batch (a resumed run): nothing
        // to prepare.
        if !commands.is_empty() && planned.reuse.to_run.is_empty() {
            return None;
        }
        let Some(Ok(composed)) = &planned.composed else {
            return None;
        };
        let root = composed.vtree.root().to_owned();
        let layer = self
            .layer(
                state,
                &composed.vtree,
                &composed.target,
                composed.now.clone(),
                &planned.env,
            )
            .await
            .ok()
            .flatten()?;
        replay::refuse_unclosed(
            layer.report.unclosed.clone(),
            &state.verification.base_unclosed,
        )
        .ok()?;
        let room = BatchRoom::open(
            &composed.vtree.dir(),
            Restore::default(),
            &planned.env,
            self.replay_timeout,
            confinement(state, allow_connect),
            Some(layer.overlay.clone()),
            super::trees::tree_files(composed).await,
        )
        .ok()?;
        let steps = prepare.to_vec();
        let task = tokio::spawn(async move {
            let ran = room.prepare(&steps).await;
            (room, ran)
        });
        Some(AheadBatch {
            tree: tree.clone(),
            prepare: prepare.to_vec(),
            slot,
            key,
            root,
            steps: Preparing::Running(task),
        })
    }

    /// Waits until no prepared batch's step runs.
    pub(super) async fn settle_ahead(&mut self) {
        for batch in &mut self.ahead {
            batch.settle().await;
        }
    }

    /// The batch prepared for `tree` with `prepare`, if any (the caller settles them first).
    pub(super) fn take_ahead(
        &mut self,
        tree: &ReplayTree,
        prepare: &[PrepareStep],
    ) -> Option<AheadBatch> {
        let at = self
            .ahead
            .iter()
            .position(|b| &b.tree == tree && b.prepare == prepare)?;
        Some(self.ahead.remove(at))
    }

    /// Replays `commands` in the room prepared ahead for their batch, after
    /// [`Self::settle_ahead`]: `None` when it cannot serve (its key changed, a step failed or did
    /// not run; the caller replays the batch alone, as if nothing had been prepared).
    pub(super) async fn replay_prepared(
        &mut self,
        state: &RunState,
        mut ahead: AheadBatch,
        commands: &[String],
    ) -> Option<Result<Vec<ReplayResult>, PauseDecision>> {
        let Preparing::Done(done) = std::mem::replace(&mut ahead.steps, Preparing::Gone) else {
            return None;
        };
        let (room, Ok(steps)) = *done else {
            return None;
        };
        // A step that failed beside the tester may have failed because of it.
        if steps.iter().any(|s| !s.passed()) {
            return None;
        }
        let allow_connect = self.replay_allowances();
        let planned = match self
            .plan_batch(
                state,
                &ahead.tree,
                &ahead.prepare,
                commands,
                &allow_connect,
                ahead.slot,
            )
            .await
        {
            Ok(planned) => planned,
            Err(pause) => return Some(Err(pause)),
        };
        if planned.keyed.as_ref() != Some(&ahead.key) {
            tracing::debug!("the batch prepared ahead is not the one asked for: it runs alone");
            return None;
        }
        if planned.reuse.to_run.is_empty() {
            return Some(planned.all_reused(state));
        }
        tracing::debug!(tree = ?ahead.tree, "the replay runs in the room prepared ahead");
        let checks = room.checks(&planned.reuse.to_run).await;
        drop(room);
        drop(ahead);
        Some(self.finish_batch(
            state,
            planned,
            checks.map(|checks| Replays { steps, checks }),
        ))
    }
}
