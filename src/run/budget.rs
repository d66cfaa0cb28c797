//! Budgets: `--max-usd`, `--max-minutes`, `--max-stage-minutes`, `--max-idle-minutes` and
//! `--max-tokens`, checked before each stage and turned into limits the stage enforces while it
//! runs. Minutes count active stage time (wall time of attempts), so a run paused overnight does
//! not use up its allowance. Cost is enforced only where it is known (from the provider or the
//! dated price table); an unknown cost is never guessed.

use std::time::Duration;

use super::flow::PauseDecision;
use super::state::RunState;
use crate::pause::PauseCode;

/// The limits one stage attempt runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageLimits {
    /// Wall-clock limit of the attempt (the smaller of the stage limit and the run's remainder).
    pub timeout: Option<Duration>,
    /// No output for this long stops the attempt.
    pub idle: Option<Duration>,
    /// Tokens left before `--max-tokens` is reached.
    pub tokens_left: Option<u64>,
    /// Which pause a timeout means.
    pub timeout_code: PauseCode,
}

/// The pause to take before launching another stage, if a budget is already spent.
pub fn check_before_stage(state: &RunState) -> Option<PauseDecision> {
    let b = &state.budgets;
    if let Some(max) = b.max_minutes
        && state.active_ms >= max * 60_000
    {
        return Some(PauseDecision::new(
            PauseCode::PausedTimeLimit,
            format!(
                "the run used {} of its {max} active minutes",
                state.active_ms / 60_000
            ),
        ));
    }
    if let Some(max) = b.max_tokens {
        let used = state.usage.total_tokens();
        if used >= max {
            return Some(PauseDecision::new(
                PauseCode::PausedBudget,
                format!("the run used {used} tokens of its --max-tokens {max}"),
            ));
        }
    }
    if let (Some(max), Some(spent)) = (b.max_usd, state.usage.cost_usd)
        && spent >= max
    {
        return Some(PauseDecision::new(
            PauseCode::PausedBudget,
            format!("the run spent ${spent:.4} of its --max-usd ${max:.2}"),
        ));
    }
    None
}

/// The limits of the next attempt.
pub fn stage_limits(state: &RunState) -> StageLimits {
    let b = &state.budgets;
    let stage = b.max_stage_minutes.map(|m| Duration::from_secs(m * 60));
    let run_left = b
        .max_minutes
        .map(|m| Duration::from_secs((m * 60).saturating_sub(state.active_ms / 1000)));
    let (timeout, timeout_code) = match (stage, run_left) {
        (Some(s), Some(r)) if r < s => (Some(r), PauseCode::PausedTimeLimit),
        (Some(s), _) => (Some(s), PauseCode::PausedStageTimeout),
        (None, Some(r)) => (Some(r), PauseCode::PausedTimeLimit),
        (None, None) => (None, PauseCode::PausedStageTimeout),
    };
    StageLimits {
        timeout,
        idle: b.max_idle_minutes.map(|m| Duration::from_secs(m * 60)),
        tokens_left: b
            .max_tokens
            .map(|max| max.saturating_sub(state.usage.total_tokens())),
        timeout_code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::flow::tests::new_state;

    #[test]
    fn budgets_are_checked_before_a_stage() {
        let mut state = new_state();
        assert_eq!(check_before_stage(&state), None);
        state.budgets.max_tokens = Some(1000);
        state.usage.input_tokens = Some(600);
        state.usage.output_tokens = Some(400);
        assert_eq!(
            check_before_stage(&state).unwrap().code,
            PauseCode::PausedBudget
        );
        state.budgets.max_tokens = None;
        state.budgets.max_usd = Some(1.0);
        assert_eq!(
            check_before_stage(&state),
            None,
            "unknown cost is not enforced"
        );
        state.usage.cost_usd = Some(1.5);
        assert_eq!(
            check_before_stage(&state).unwrap().code,
            PauseCode::PausedBudget
        );
        state.budgets.max_usd = None;
        state.budgets.max_minutes = Some(2);
        state.active_ms = 150_000;
        assert_eq!(
            check_before_stage(&state).unwrap().code,
            PauseCode::PausedTimeLimit
        );
    }

    #[test]
    fn stage_limits_take_the_smaller_allowance() {
        let mut state = new_state();
        state.budgets.max_stage_minutes = Some(10);
        state.budgets.max_minutes = Some(30);
        state.active_ms = 25 * 60_000;
        let limits = stage_limits(&state);
        assert_eq!(limits.timeout, Some(Duration::from_secs(300)));
        assert_eq!(limits.timeout_code, PauseCode::PausedTimeLimit);
        state.active_ms = 0;
        let limits = stage_limits(&state);
        assert_eq!(limits.timeout, Some(Duration::from_secs(600)));
        assert_eq!(limits.timeout_code, PauseCode::PausedStageTimeout);
    }
}
