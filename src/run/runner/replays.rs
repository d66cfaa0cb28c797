//! The runner's replay of one batch (the `prepare` steps, then the checks, in one tree): in the
//! verification tree composed for it, or in a copy outside git; each batch recorded in
//! `<run>/replays/`; a batch identical to one already run (`crate::run::replay_cache`) not run
//! again, its verdicts reused and recorded as such.

use std::collections::BTreeMap;
use std::time::Duration;

use super::CliRunner;
use super::trees::Composed;
use crate::pause::PauseCode;
use crate::run::flow::PauseDecision;
use crate::run::prepare::{self, CheckRan, CheckVerdict, PrepareRecord, PrepareStep, Prepared};
use crate::run::replay::{self, Batch, ReplayConfinement};
use crate::run::replay_cache::{BatchKey, KeyConfinement, ReplayNo, ReplayResults, Reuse};
use crate::run::stage_runner::{ReplayResult, ReplayTree};
use crate::run::state::RunState;
use crate::supervise::Exit;
use crate::supervise::net::NetAllow;

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
        let mut unique: Vec<String> = Vec::new();
        for c in commands {
            if !unique.contains(c) {
                unique.push(c.clone());
            }
        }
        let env = self.check_env();
        // The user's allowances of every provider this run routes (a test database the checks
        // need is reachable in autocode's replays as in the stages).
        let mut allow_connect: Vec<NetAllow> = Vec::new();
        for provider in self.providers.values() {
            for allow in provider.config.allow_connect() {
                if !allow_connect.contains(&allow) {
                    allow_connect.push(allow);
                }
            }
        }
        let confinement = if state.unconfined {
            ReplayConfinement::Unconfined
        } else {
            ReplayConfinement::Room {
                allow_connect: &allow_connect,
            }
        };
        let timeout = self.replay_timeout;
        let mut keyed: Option<BatchKey> = None;
        let mut tree_id = None;
        let mut reuse = Reuse {
            reused: Vec::new(),
            to_run: unique.clone(),
        };
        let composed = self.compose(state, tree, &env).await;
        if let Some(Ok(composed)) = &composed {
            tree_id = Some(composed.target.clone());
            match self
                .batch_key(state, composed, prepare, &env, &allow_connect, timeout)
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
        if reuse.to_run.is_empty() {
            record(
                state,
                tree,
                tree_id.as_ref(),
                reuse.whole_from(),
                Vec::new(),
                &reuse.reused,
            )?;
            return Ok(reuse.reused);
        }
        let batch = Batch {
            prepare,
            commands: &reuse.to_run,
        };
        let replayed = match composed {
            Some(Ok(composed)) => {
                self.replay_composed(state, &composed, batch, &env, timeout, confinement)
                    .await
            }
            Some(Err(e)) => Err(e),
            None => {
                self.replay_in_copy(state, tree, batch, &env, confinement)
                    .await
            }
        };
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
            tree,
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
