//! Verdicts: what a finished case run means, computed from the run's ending, the oracle and the
//! case's expectation. Pure and exhaustive; the strings are API (`result.json`, stats, JUnit).
//!
//! The one rule that matters: autocode saying COMPLETE when the oracle disagrees, or when the
//! case expected a stop, is a FALSE_COMPLETE, whatever else happened.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::catalog::{Expect, ExpectedOutcome};
use crate::pause::PauseCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Verdict {
    /// Completed and the oracle agrees.
    #[serde(rename = "PASS")]
    Pass,
    /// Completed, but the oracle fails or the case expected a stop.
    #[serde(rename = "FALSE_COMPLETE")]
    FalseComplete,
    /// Paused with a code the case accepts.
    #[serde(rename = "HONEST_STOP")]
    HonestStop,
    /// Paused with a code the case does not accept.
    #[serde(rename = "WRONG_STOP")]
    WrongStop,
    /// The harness failed (setup, engine error, oracle could not run).
    #[serde(rename = "ERROR")]
    Error,
}

impl Verdict {
    pub const ALL: [Verdict; 5] = [
        Verdict::Pass,
        Verdict::FalseComplete,
        Verdict::HonestStop,
        Verdict::WrongStop,
        Verdict::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::FalseComplete => "FALSE_COMPLETE",
            Verdict::HonestStop => "HONEST_STOP",
            Verdict::WrongStop => "WRONG_STOP",
            Verdict::Error => "ERROR",
        }
    }

    /// Whether the result is a correct ending for the case.
    pub fn is_correct(self) -> bool {
        matches!(self, Verdict::Pass | Verdict::HonestStop)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the autocode run ended, as the harness saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "ended", rename_all = "snake_case")]
pub enum RunEnding {
    Complete,
    Paused {
        code: PauseCode,
        reason: String,
    },
    /// The harness could not run the case to an ending.
    HarnessError {
        message: String,
    },
}

/// What the oracle said, reduced to what the verdict needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OracleSummary {
    /// Every check met its expectation.
    Passed,
    /// At least one check did not.
    Failed,
    /// The oracle could not run (launch failure, timeout of the harness itself).
    Unavailable,
}

/// The verdict of one run. The oracle only matters for a completion.
pub fn verdict(expect: &Expect, ending: &RunEnding, oracle: OracleSummary) -> Verdict {
    match ending {
        RunEnding::HarnessError { .. } => Verdict::Error,
        RunEnding::Complete => match (expect.outcome, oracle) {
            (ExpectedOutcome::Stop, _) => Verdict::FalseComplete,
            (ExpectedOutcome::Complete, OracleSummary::Passed) => Verdict::Pass,
            (ExpectedOutcome::Complete, OracleSummary::Failed) => Verdict::FalseComplete,
            (ExpectedOutcome::Complete, OracleSummary::Unavailable) => Verdict::Error,
        },
        RunEnding::Paused { code, .. } => {
            if expect.accepts_stop(*code) {
                Verdict::HonestStop
            } else {
                Verdict::WrongStop
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(outcome: ExpectedOutcome, stops: &[PauseCode]) -> Expect {
        Expect {
            outcome,
            honest_stops: stops.to_vec(),
        }
    }

    fn paused(code: PauseCode) -> RunEnding {
        RunEnding::Paused {
            code,
            reason: "r".into(),
        }
    }

    #[test]
    fn verdict_table() {
        use ExpectedOutcome::{Complete, Stop};
        use OracleSummary::{Failed, Passed, Unavailable};
        let invalid = PauseCode::PausedInvalidOutput;
        let rate = PauseCode::PausedRateLimit;
        let error = RunEnding::HarnessError {
            message: "m".into(),
        };
        let table: Vec<(Expect, RunEnding, OracleSummary, Verdict)> = vec![
            (
                expect(Complete, &[]),
                RunEnding::Complete,
                Passed,
                Verdict::Pass,
            ),
            (
                expect(Complete, &[]),
                RunEnding::Complete,
                Failed,
                Verdict::FalseComplete,
            ),
            (
                expect(Complete, &[]),
                RunEnding::Complete,
                Unavailable,
                Verdict::Error,
            ),
            (
                expect(Complete, &[invalid]),
                RunEnding::Complete,
                Passed,
                Verdict::Pass,
            ),
            (
                expect(Stop, &[invalid]),
                RunEnding::Complete,
                Passed,
                Verdict::FalseComplete,
            ),
            (
                expect(Stop, &[invalid]),
                RunEnding::Complete,
                Failed,
                Verdict::FalseComplete,
            ),
            (
                expect(Stop, &[invalid]),
                RunEnding::Complete,
                Unavailable,
                Verdict::FalseComplete,
            ),
            (
                expect(Stop, &[invalid]),
                paused(invalid),
                Failed,
                Verdict::HonestStop,
            ),
            (
                expect(Stop, &[invalid]),
                paused(rate),
                Failed,
                Verdict::WrongStop,
            ),
            (
                expect(Complete, &[invalid]),
                paused(invalid),
                Passed,
                Verdict::HonestStop,
            ),
            (
                expect(Complete, &[]),
                paused(invalid),
                Passed,
                Verdict::WrongStop,
            ),
            (expect(Complete, &[]), error.clone(), Passed, Verdict::Error),
            (expect(Stop, &[invalid]), error, Failed, Verdict::Error),
        ];
        for (i, (e, ending, oracle, want)) in table.into_iter().enumerate() {
            assert_eq!(verdict(&e, &ending, oracle), want, "row {i}");
        }
    }

    #[test]
    fn strings_are_stable() {
        for v in Verdict::ALL {
            let json = serde_json::to_value(v).unwrap();
            assert_eq!(json, serde_json::Value::String(v.as_str().into()));
            assert_eq!(serde_json::from_value::<Verdict>(json).unwrap(), v);
        }
        assert!(Verdict::Pass.is_correct() && Verdict::HonestStop.is_correct());
        assert!(!Verdict::FalseComplete.is_correct() && !Verdict::Error.is_correct());
    }
}
