//! The runner's replay of one batch (the `prepare` steps, then the checks, in one tree): in the
//! verification tree composed for it, or in a copy outside git; each batch recorded in
//! `<run>/replays/`; a batch identical to one already run (`crate::run::replay_cache`) not run
//! again, its verdicts reused and recorded as such; the `prepare` steps of two batches at once,
//! each in its own tree, where they run as overlays (`replay_together`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::CliRunner;
use super::trees::Composed;
use crate::pause::PauseCode;
use crate::run::flow::PauseDecision;
use crate::run::prepare::{self, CheckRan, CheckVerdict, PrepareRecord, PrepareStep, Prepared};
use crate::run::replay::{self, Batch, ReplayConfinement, Replays};
use crate::run::replay_cache::{BatchKey, KeyConfinement, ReplayNo, ReplayResults, Reuse};
use crate::run::stage_runner::{OwnedReplayAsk, ReplayAsk, ReplayResult, ReplayTree};
use crate::run::state::RunState;
use crate::run::vtree::VerifyTree;
use crate::supervise::Exit;
use crate::supervise::net::NetAllow;

/// Which verification tree of the run a replay uses: each has its own directory, index and
/// layer, over the same private object store, so two replays (or a replay and the tester's
/// copy) never share one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TreeSlot {
    /// The run's own tree (the tester's copy and every replay alone).
    Main,
    /// `ahead-N/` of the verification root: the Nth of the batches prepared together, beside
    /// each other and while the tester works in the run's own tree (`super::ahead`).
    Ahead(usize),
}

impl TreeSlot {
    /// Its root's name in the verification root (`None`: the root itself).
    fn dir_name(self) -> Option<String> {
        match self {
            TreeSlot::Main => None,
            TreeSlot::Ahead(n) => Some(format!("ahead-{n}")),
        }
    }
}

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
            env_sha256: BatchKey::env_digest(&self.env_for_key(env)),
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
    pub(super) fn replay_allowances(&self) -> Vec<NetAllow> {
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

    /// The verification tree of `slot`: the run's own, or one rooted in the run's verification
    /// root (removed once its replay is done: `super::ahead`), over the same private object
    /// store.
    pub(super) async fn slot_tree(
        &mut self,
        state: &RunState,
        env: &BTreeMap<String, String>,
        slot: TreeSlot,
    ) -> Result<Option<VerifyTree>, String> {
        Ok(self
            .verify_tree(state, env)
            .await?
            .map(|main| match slot.dir_name() {
                None => main,
                Some(name) => VerifyTree::new(
                    &main.root().join(name),
                    main.store().clone(),
                    &state.work_tree,
                ),
            }))
    }

    /// A batch composed in the tree of `slot`, keyed and matched with the stored verdicts.
    pub(super) async fn plan_batch(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        prepare: &[PrepareStep],
        commands: &[String],
        allow_connect: &[NetAllow],
        slot: TreeSlot,
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
        let composed = self.compose(state, tree, &env, slot).await;
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
    /// others run as one batch), in the room prepared for the batch while the tester worked
    /// when there is one (`super::ahead`). `Err` is a pause.
    pub(super) async fn replay_batch(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        prepare: &[PrepareStep],
        commands: &[String],
    ) -> Result<Vec<ReplayResult>, PauseDecision> {
        if !self.ahead.is_empty() {
            self.settle_ahead().await;
            let prepared = self.take_ahead(tree, prepare);
            // What else was prepared goes: no check runs beside it, nor later in its tree.
            self.ahead.clear();
            if let Some(prepared) = prepared
                && let Some(replayed) = self.replay_prepared(state, prepared, commands).await
            {
                return replayed;
            }
        }
        self.replay_batch_alone(state, tree, prepare, commands)
            .await
    }

    /// [`Self::replay_batch`] in the run's own tree, nothing prepared ahead.
    async fn replay_batch_alone(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        prepare: &[PrepareStep],
        commands: &[String],
    ) -> Result<Vec<ReplayResult>, PauseDecision> {
        let allow_connect = self.replay_allowances();
        let confinement = confinement(state, &allow_connect);
        let mut planned = self
            .plan_batch(
                state,
                tree,
                prepare,
                commands,
                &allow_connect,
                TreeSlot::Main,
            )
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

    /// Batches whose `prepare` steps run at once (each batch in its own verification tree,
    /// confined as an overlay of the work tree: its own mount namespace, upper layer, `HOME` and
    /// `/tmp`: `super::ahead`, which may have started them while the tester worked), then their
    /// checks one batch after the other; else wholly one after the other, as
    /// [`Self::replay_batch`] runs them (a batch without steps, an `--in-place` work tree, which
    /// is the person's and may move meanwhile, no overlay). Each comes to what it would alone:
    /// the same trees, keys, records and stored verdicts, numbered in this order. No check runs
    /// while anything of another batch does, and a step that failed beside the others' runs
    /// again alone (the batch whole), so none can fail or pass because of another (a fixed port,
    /// the load). One result per batch, in order.
    pub(super) async fn replay_together(
        &mut self,
        state: &RunState,
        batches: &[ReplayAsk<'_>],
    ) -> Vec<Result<Vec<ReplayResult>, PauseDecision>> {
        if self.ahead.is_empty() {
            let asked: Vec<OwnedReplayAsk> = batches
                .iter()
                .map(|(tree, prepare, commands)| {
                    ((*tree).clone(), prepare.to_vec(), commands.to_vec())
                })
                .collect();
            self.start_ahead(state, &asked).await;
        }
        self.settle_ahead().await;
        let prepared: Vec<_> = batches
            .iter()
            .map(|(tree, prepare, _)| self.take_ahead(tree, prepare))
            .collect();
        self.ahead.clear();
        // Each in its prepared room, else alone; one after the other.
        let mut results = Vec::with_capacity(batches.len());
        for (prepared, (tree, prepare, commands)) in prepared.into_iter().zip(batches) {
            let replayed = match prepared {
                Some(prepared) => self.replay_prepared(state, prepared, commands).await,
                None => None,
            };
            results.push(match replayed {
                Some(replayed) => replayed,
                None => {
                    self.replay_batch_alone(state, tree, prepare, commands)
                        .await
                }
            });
        }
        results
    }

    /// Judges, records and keeps what a planned batch's run came to.
    pub(super) fn finish_batch(
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
            // No tree to run them in: they do not run, and judge nothing.
            Err(replay::ReplayError::NoFailingTests(why)) => {
                return Ok(unique
                    .into_iter()
                    .map(|command| ReplayResult {
                        command,
                        passed: false,
                        detail: why.clone(),
                        ran: CheckRan::NotPrepared,
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
pub(super) struct PlannedBatch {
    tree: ReplayTree,
    /// The composed tree's id.
    tree_id: Option<crate::gittree::TreeId>,
    unique: Vec<String>,
    pub(super) reuse: Reuse,
    pub(super) keyed: Option<BatchKey>,
    pub(super) env: BTreeMap<String, String>,
    pub(super) composed: Option<Result<Composed, replay::ReplayError>>,
}

impl PlannedBatch {
    /// Every verdict reused: nothing runs, and the record says where each came from.
    pub(super) fn all_reused(self, state: &RunState) -> Result<Vec<ReplayResult>, PauseDecision> {
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
pub(super) fn confinement<'a>(
    state: &RunState,
    allow_connect: &'a [NetAllow],
) -> ReplayConfinement<'a> {
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
            ReplayTree::FinalWithBaseCode(_) => "final_with_base_code",
            ReplayTree::FinalWithFailingTests(_) => "final_with_failing_tests",
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
