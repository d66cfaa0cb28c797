//! The runner's replay of one batch (the `prepare` steps, then the checks, in one tree): in the
//! verification tree composed for it, or in a copy outside git; each batch recorded in
//! `<run>/replays/`; a batch identical to one already run (`crate::run::replay_cache`) not run
//! again, its verdicts reused and recorded as such; the `prepare` steps of two batches at once,
//! each in its own tree, where both run as overlays (`replay_pair`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::CliRunner;
use super::trees::Composed;
use crate::pause::PauseCode;
use crate::run::flow::PauseDecision;
use crate::run::isolation::Isolation;
use crate::run::prepare::{self, CheckRan, CheckVerdict, PrepareRecord, PrepareStep, Prepared};
use crate::run::replay::{self, Batch, BatchRoom, ReplayConfinement, Replays, Restore};
use crate::run::replay_cache::{BatchKey, KeyConfinement, ReplayNo, ReplayResults, Reuse};
use crate::run::stage_runner::{ReplayResult, ReplayTree};
use crate::run::state::RunState;
use crate::run::vtree::VerifyTree;
use crate::supervise::Exit;
use crate::supervise::net::NetAllow;

/// The root, in the verification root, of the tree of a replay running beside another.
const SIDE_TREE: &str = "side";

fn cleanup_pause(what: String) -> PauseDecision {
    PauseDecision::new(PauseCode::PausedProcessCleanup, what)
}

impl CliRunner {
    /// The run's stored replay verdicts, read on first use (`Err`: the file does not verify).
    fn replay_results(&mut self, state: &RunState) -> Result<&mut ReplayResults, PauseDecision> {
        let dir = state.run_dir();
        let loaded = match self.replay_results.take() {
            Some((at, results)) if at == dir => results,
            _ => ReplayResults::load(&dir).map_err(|e| cleanup_pause(e.to_string()))?,
        };
        Ok(&mut self.replay_results.insert((dir, loaded)).1)
    }

    /// The key of a batch in `composed` (`crate::run::replay_cache::BatchKey`).
    async fn batch_key(
        &self,
        state: &RunState,
        composed: &Composed,
        prepare: &[PrepareStep],
        env: &BTreeMap<String, String>,
        allow_connect: &[NetAllow],
        timeout: Duration,
    ) -> Result<BatchKey, replay::ReplayError> {
        let (head, refs_sha256) = self.shown_refs(state, composed).await?;
        Ok(BatchKey {
            tree: composed.target.clone(),
            head,
            refs_sha256,
            prepare: prepare.to_vec(),
            env_sha256: BatchKey::env_digest(env),
            confinement: if state.unconfined {
                KeyConfinement::Unconfined
            } else {
                KeyConfinement::Room {
                    allow_connect: allow_connect.iter().map(|a| format!("{a:?}")).collect(),
                }
            },
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            autocode: BatchKey::this_autocode(),
        })
    }

    /// The user's allowances of every provider this run routes (a test database the checks
    /// need is reachable in autocode's replays as in the stages).
    fn replay_allowances(&self) -> Vec<NetAllow> {
        let mut allow_connect: Vec<NetAllow> = Vec::new();
        for provider in self.providers.values() {
            for allow in provider.config.allow_connect() {
                if !allow_connect.contains(&allow) {
                    allow_connect.push(allow);
                }
            }
        }
        allow_connect
    }

    /// The verification tree a replay running beside another uses ([`Self::replay_pair`]): its
    /// own directory, index and layer, in the run's verification root (removed once the pair
    /// is done), over the same private object store.
    pub(super) async fn side_tree(
        &mut self,
        state: &RunState,
        env: &BTreeMap<String, String>,
    ) -> Result<Option<VerifyTree>, String> {
        Ok(self.verify_tree(state, env).await?.map(|main| {
            VerifyTree::new(
                &main.root().join(SIDE_TREE),
                main.store().clone(),
                &state.work_tree,
            )
        }))
    }

    /// A batch composed, keyed and matched with the stored verdicts (`side`: in the tree of a
    /// replay running beside another).
    async fn plan_batch(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        prepare: &[PrepareStep],
        commands: &[String],
        allow_connect: &[NetAllow],
        side: bool,
    ) -> Result<PlannedBatch, PauseDecision> {
        let mut unique: Vec<String> = Vec::new();
        for c in commands {
            if !unique.contains(c) {
                unique.push(c.clone());
            }
        }
        let env = self.check_env();
        let mut keyed: Option<BatchKey> = None;
        let mut reuse = Reuse {
            reused: Vec::new(),
            to_run: unique.clone(),
        };
        let composed = self.compose(state, tree, &env, side).await;
        if let Some(Ok(composed)) = &composed {
            match self
                .batch_key(
                    state,
                    composed,
                    prepare,
                    &env,
                    allow_connect,
                    self.replay_timeout,
                )
                .await
            {
                Ok(key) => {
                    reuse = self.replay_results(state)?.reuse(&key, &unique);
                    keyed = Some(key);
                }
                // Without a key the batch runs, and is not kept.
                Err(e) => tracing::debug!(%e, "no replay key: the batch runs"),
            }
        }
        Ok(PlannedBatch {
            tree: tree.clone(),
            tree_id: match &composed {
                Some(Ok(composed)) => Some(composed.target.clone()),
                _ => None,
            },
            unique,
            reuse,
            keyed,
            env,
            composed,
        })
    }

    /// Replays `commands` (each once, in order) in a clean tree of `tree` after the `prepare`
    /// steps, but for those whose verdicts an identical batch already gave (then reused; the
    /// others run as one batch). `Err` is a pause.
    pub(super) async fn replay_batch(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        prepare: &[PrepareStep],
        commands: &[String],
    ) -> Result<Vec<ReplayResult>, PauseDecision> {
        let allow_connect = self.replay_allowances();
        let confinement = confinement(state, &allow_connect);
        let mut planned = self
            .plan_batch(state, tree, prepare, commands, &allow_connect, false)
            .await?;
        if planned.reuse.to_run.is_empty() {
            return planned.all_reused(state);
        }
        let batch = Batch {
            prepare,
            commands: &planned.reuse.to_run,
        };
        let timeout = self.replay_timeout;
        let replayed = match planned.composed.take() {
            Some(Ok(composed)) => {
                self.replay_composed(state, &composed, batch, &planned.env, timeout, confinement)
                    .await
            }
            Some(Err(e)) => Err(e),
            None => {
                self.replay_in_copy(state, tree, batch, &planned.env, confinement)
                    .await
            }
        };
        self.finish_batch(state, planned, replayed)
    }

    /// Two batches, their `prepare` steps at once (each batch in its own verification tree,
    /// both confined as overlays of the work tree: its own mount namespace, upper layer, `HOME`
    /// and `/tmp` each), then their checks one batch after the other; else wholly one after the
    /// other, as [`Self::replay_batch`] runs them (neither has a step, an `--in-place` work tree,
    /// which is the person's and may move meanwhile, no overlay). Each comes to what it would
    /// alone: the same trees, keys, records and stored verdicts, numbered in this order. No
    /// check runs while anything of the other batch does, and a step that failed beside the
    /// other batch's runs again alone (the batch whole), so neither can fail or pass because of
    /// the other (a fixed port, the load).
    pub(super) async fn replay_pair(
        &mut self,
        state: &RunState,
        first: (&ReplayTree, &[PrepareStep], &[String]),
        second: (&ReplayTree, &[PrepareStep], &[String]),
    ) -> [Result<Vec<ReplayResult>, PauseDecision>; 2] {
        let apart = state.unconfined
            || matches!(state.isolation, Isolation::InPlace)
            || (first.1.is_empty() && second.1.is_empty());
        if !apart && let Some(ready) = self.layered_pair(state, first, second).await {
            return ready;
        }
        [
            self.replay_batch(state, first.0, first.1, first.2).await,
            self.replay_batch(state, second.0, second.1, second.2).await,
        ]
    }

    /// Both batches planned and laid out as overlays, prepared at once, checked one after the
    /// other and finished; `None` when either cannot be (nothing to run, outside git, no
    /// overlay): the caller runs them apart.
    async fn layered_pair(
        &mut self,
        state: &RunState,
        first: (&ReplayTree, &[PrepareStep], &[String]),
        second: (&ReplayTree, &[PrepareStep], &[String]),
    ) -> Option<[Result<Vec<ReplayResult>, PauseDecision>; 2]> {
        let allow_connect = self.replay_allowances();
        let mut planned = Vec::with_capacity(2);
        let mut layers = Vec::with_capacity(2);
        for (side, (tree, prepare, commands)) in [(false, first), (true, second)] {
            let batch = match self
                .plan_batch(state, tree, prepare, commands, &allow_connect, side)
                .await
            {
                Ok(batch) => batch,
                Err(pause) => {
                    tracing::debug!(?pause, "replays side by side: planned apart");
                    return None;
                }
            };
            let Some(Ok(composed)) = &batch.composed else {
                return None;
            };
            if batch.reuse.to_run.is_empty() {
                return None;
            }
            let layer = self
                .layer(
                    state,
                    &composed.vtree,
                    &composed.target,
                    composed.now.clone(),
                    &batch.env,
                )
                .await
                .ok()
                .flatten()?;
            layers.push((
                composed.vtree.root().to_owned(),
                composed.vtree.dir(),
                layer,
            ));
            planned.push(batch);
        }
        let base_unclosed = &state.verification.base_unclosed;
        let timeout = self.replay_timeout;
        let confinement = confinement(state, &allow_connect);
        let prepares = [first.1, second.1];
        let rooms: Vec<Result<BatchRoom, replay::ReplayError>> = layers
            .iter()
            .zip(&planned)
            .map(|((_, dir, layer), batch)| {
                replay::refuse_unclosed(layer.report.unclosed.clone(), base_unclosed)?;
                BatchRoom::open(
                    dir,
                    Restore::default(),
                    &batch.env,
                    timeout,
                    confinement,
                    Some(layer.overlay.clone()),
                )
            })
            .collect();
        let prepare = |at: usize| {
            let room = rooms[at].as_ref().ok();
            let steps = prepares[at];
            async move {
                match room {
                    Some(room) => room.prepare(steps).await,
                    None => Ok(Vec::new()),
                }
            }
        };
        // The installs at once; then the checks one batch after the other, so no check of one
        // runs while anything of the other does.
        let (steps_one, steps_two) = tokio::join!(prepare(0), prepare(1));
        let mut outcomes = Vec::with_capacity(2);
        for (at, steps) in [steps_one, steps_two].into_iter().enumerate() {
            let outcome = match (&rooms[at], steps) {
                (Err(_), _) => None,
                (Ok(_), Err(e)) => Some(Err(e)),
                // A step that failed beside the other batch's may have failed because of it:
                // the batch runs again alone, below, and only that run counts.
                (Ok(_), Ok(steps)) if steps.iter().any(|s| !s.passed()) => None,
                (Ok(room), Ok(steps)) => Some(
                    room.checks(&planned[at].reuse.to_run)
                        .await
                        .map(|checks| Replays { steps, checks }),
                ),
            };
            outcomes.push(outcome);
        }
        drop(rooms);
        // The side tree serves this pair only (a later pair lays its layer out again): what the
        // witness batch installed there goes now, not with the run's root.
        if let Some((side_root, _, _)) = layers.get(1)
            && let Err(e) = crate::gittree::remove_all(side_root)
        {
            tracing::debug!(%e, "the side tree stays until the run's root goes");
        }
        let mut planned = planned.into_iter();
        let mut results = Vec::with_capacity(2);
        for ((outcome, batch), alone) in outcomes
            .into_iter()
            .zip(planned.by_ref())
            .zip([first, second])
        {
            results.push(match outcome {
                Some(replayed) => self.finish_batch(state, batch, replayed),
                None => self.replay_batch(state, alone.0, alone.1, alone.2).await,
            });
        }
        let mut results = results.into_iter();
        Some([results.next()?, results.next()?])
    }

    /// Judges, records and keeps what a planned batch's run came to.
    fn finish_batch(
        &mut self,
        state: &RunState,
        planned: PlannedBatch,
        replayed: Result<Replays, replay::ReplayError>,
    ) -> Result<Vec<ReplayResult>, PauseDecision> {
        let PlannedBatch {
            tree,
            tree_id,
            unique,
            reuse,
            keyed,
            ..
        } = planned;
        let replayed = match replayed {
            // A copy that is not closed fails every check, naming the paths.
            Err(e @ replay::ReplayError::NotClosed { .. }) => {
                return Ok(unique
                    .into_iter()
                    .map(|command| ReplayResult {
                        command,
                        passed: false,
                        detail: e.to_string(),
                        ran: CheckRan::Refused,
                        tests: crate::verify::testcount::TestTally::Unknown,
                        test_ids: None,
                    })
                    .collect());
            }
            other => other,
        }
        .map_err(|e| cleanup_pause(format!("autocode could not replay the checks: {e}")))?;
        if let Some(bad) = replayed
            .steps
            .iter()
            .chain(&replayed.checks)
            .find(|r| !r.receipt.verified)
        {
            return Err(cleanup_pause(format!(
                "the replay of `{}` left processes the boundary could not prove gone",
                bad.command
            )));
        }
        let prepared = replayed.prepared();
        let timed_out = replayed.checks.iter().any(|r| r.exit == Exit::TimedOut);
        let ran: Vec<ReplayResult> = match prepared.failure() {
            Some(why) => reuse
                .to_run
                .iter()
                .map(|command| ReplayResult {
                    command: command.clone(),
                    passed: false,
                    detail: why.clone(),
                    ran: CheckRan::NotPrepared,
                    tests: crate::verify::testcount::TestTally::Unknown,
                    test_ids: None,
                })
                .collect(),
            None => replayed
                .checks
                .into_iter()
                .map(|r| ReplayResult {
                    ran: CheckRan::Ran,
                    passed: r.passed(),
                    tests: r.tests,
                    test_ids: r.test_ids,
                    detail: match r.exit {
                        Exit::Code(0) => "exit 0".into(),
                        Exit::Code(c) => format!("exit {c}: {}", r.output_tail.trim()),
                        Exit::Signal(s) => format!("killed by signal {s}"),
                        Exit::TimedOut => "timed out".into(),
                    },
                    command: r.command,
                })
                .collect(),
        };
        let results = reuse.merge(&unique, ran.clone());
        let no = record(
            state,
            &tree,
            tree_id.as_ref(),
            None,
            prepared.steps.clone(),
            &results,
        )?;
        // Kept: a batch whose steps all passed and whose checks all ended on their own (a
        // failed step or a timeout may be the network or the load: they run again).
        if let (Some(key), Some(no), None, false) = (keyed, no, prepared.failure(), timed_out) {
            let run_dir = state.run_dir();
            let stored = self.replay_results(state)?;
            stored.keep(key, no, &ran);
            if let Err(e) = stored.save(&run_dir) {
                tracing::warn!(%e, "the replay results were not kept: the batch runs again next time");
            }
        }
        Ok(results)
    }
}

/// A batch ready to run: its checks (each once), what stored verdicts answer, its key and its
/// composed tree (`None`: outside git, or a base saved as a copy).
struct PlannedBatch {
    tree: ReplayTree,
    /// The composed tree's id.
    tree_id: Option<crate::gittree::TreeId>,
    unique: Vec<String>,
    reuse: Reuse,
    keyed: Option<BatchKey>,
    env: BTreeMap<String, String>,
    composed: Option<Result<Composed, replay::ReplayError>>,
}

impl PlannedBatch {
    /// Every verdict reused: nothing runs, and the record says where each came from.
    fn all_reused(self, state: &RunState) -> Result<Vec<ReplayResult>, PauseDecision> {
        record(
            state,
            &self.tree,
            self.tree_id.as_ref(),
            self.reuse.whole_from(),
            Vec::new(),
            &self.reuse.reused,
        )?;
        Ok(self.reuse.reused)
    }
}

/// Where a run's replays may write and reach.
fn confinement<'a>(state: &RunState, allow_connect: &'a [NetAllow]) -> ReplayConfinement<'a> {
    if state.unconfined {
        ReplayConfinement::Unconfined
    } else {
        ReplayConfinement::Room { allow_connect }
    }
}

/// Records a batch in `<run>/replays/` (`super::super::prepare::PrepareRecord`) and returns its
/// number.
fn record(
    state: &RunState,
    tree: &ReplayTree,
    tree_id: Option<&crate::gittree::TreeId>,
    reused_from: Option<ReplayNo>,
    steps: Vec<prepare::StepRun>,
    results: &[ReplayResult],
) -> Result<Option<ReplayNo>, PauseDecision> {
    let record = PrepareRecord {
        tree: match tree {
            ReplayTree::Final => "final",
            ReplayTree::Base => "base",
            ReplayTree::FinalWithBaseFiles(_) => "final_with_base_files",
        },
        at: chrono::Utc::now(),
        prepared: Prepared::of(steps),
        checks: results.iter().map(|r| r.command.clone()).collect(),
        tree_id: tree_id.cloned(),
        reused_from,
        results: results
            .iter()
            .map(|r| CheckVerdict {
                command: r.command.clone(),
                passed: r.passed,
                ran: r.ran,
            })
            .collect(),
    };
    let path = prepare::write_record(&state.run_dir(), &record).map_err(|e| {
        cleanup_pause(format!(
            "autocode could not record how it prepared the replay: {e}"
        ))
    })?;
    Ok(ReplayNo::of_record(&path))
}
