//! The brief's review in chat mode: once a brief's open questions are answered on a terminal,
//! the person sees the brief and either approves that exact revision (bound to its digest) or
//! gives feedback, which sends the requirements stage round again with the previous brief, the
//! answers and the feedback in its prompt. Runs off a terminal or with `--yes` never wait here.
//!
//! The record ([`BriefReview`]) lives in the run state; the transitions are pure functions the
//! driver calls, so a run paused at the brief continues there on `resume`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::state::{Phase, RunState};

/// The brief's review, as recorded in `run.json` (absent in older runs: nothing reviewed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BriefReview {
    /// Feedback on earlier revisions, oldest first; each made the requirements stage run again.
    #[serde(default)]
    pub feedback: Vec<BriefFeedback>,
    /// The token ([`token`]) of the revision the person approved.
    #[serde(default)]
    pub approved: Option<String>,
    /// The latest brief waits for the person's review before the plan.
    #[serde(default)]
    pub waiting: bool,
}

/// One piece of feedback and the revision it was given on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BriefFeedback {
    /// The token of the revision the feedback concerns.
    pub revision: String,
    pub text: String,
    pub at: DateTime<Utc>,
}

/// What the person decided about the brief shown to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BriefDecision {
    /// `y`: this exact revision.
    Approve,
    /// Any other text: write the brief again with this in mind.
    Feedback(String),
    /// `/pause`, a closed terminal, or no terminal at all.
    Pause,
}

/// The revision number of the latest brief (1 for the first; each feedback adds one).
pub fn revision(state: &RunState) -> usize {
    state.brief_review.feedback.len() + 1
}

/// `b<N>:<sha256>` over the brief and the answers as shown: an approval applies to exactly
/// this revision. `None` before the requirements stage produced a brief.
pub fn token(state: &RunState) -> Option<String> {
    let brief = state.brief.as_ref()?;
    let shown = serde_json::json!({"brief": brief, "answers": state.answers});
    let canonical = serde_json::to_vec(&shown).unwrap_or_default();
    Some(format!(
        "b{}:{}",
        revision(state),
        crate::report::evidence::sha256_hex(&canonical)
    ))
}

/// The brief waits for review when it was written for a person on a terminal.
pub fn await_review(state: &mut RunState) {
    if !state.accept_defaults && state.brief.is_some() {
        state.brief_review.waiting = true;
    }
}

/// Approves the revision `token` names; refused when the brief changed since it was shown.
pub fn approve(state: &mut RunState, token: &str) -> Result<(), String> {
    match self::token(state) {
        Some(current) if current == token => {
            state.brief_review.approved = Some(current);
            state.brief_review.waiting = false;
            Ok(())
        }
        current => Err(format!(
            "brief approval {token} does not match the current brief ({})",
            current.as_deref().unwrap_or("none")
        )),
    }
}

/// Records `text` as feedback on the current revision and sends the run back to the
/// requirements stage (a rework attempt: `flow::next`).
pub fn give_feedback(state: &mut RunState, text: &str) {
    let revision = token(state).unwrap_or_default();
    state.brief_review.feedback.push(BriefFeedback {
        revision,
        text: text.to_owned(),
        at: Utc::now(),
    });
    state.brief_review.waiting = false;
    state.brief_review.approved = None;
    state.phase = Phase::Requirements;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ProviderName, RunId};

    fn state() -> RunState {
        let mut state = RunState::new(
            RunId::new("r1").expect("id"),
            "obj".into(),
            "/tmp".into(),
            ProviderName::new("fake").expect("name"),
            Default::default(),
        );
        state.brief = Some(serde_json::json!({"goals": ["g"]}));
        state.phase = Phase::Plan;
        state
    }

    #[test]
    fn approval_binds_to_the_revision_shown() {
        let mut s = state();
        await_review(&mut s);
        assert!(s.brief_review.waiting);
        let first = token(&s).expect("token");
        assert!(first.starts_with("b1:"), "{first}");
        give_feedback(&mut s, "also a README");
        assert_eq!(s.phase, Phase::Requirements);
        assert_eq!(s.brief_review.feedback[0].revision, first);
        s.brief = Some(serde_json::json!({"goals": ["g", "README"]}));
        let second = token(&s).expect("token");
        assert!(second.starts_with("b2:"), "{second}");
        assert!(approve(&mut s, &first).is_err(), "a stale revision");
        approve(&mut s, &second).expect("the current revision");
        assert_eq!(s.brief_review.approved.as_deref(), Some(second.as_str()));
        assert!(!s.brief_review.waiting);
    }

    #[test]
    fn yes_runs_never_wait() {
        let mut s = state();
        s.accept_defaults = true;
        await_review(&mut s);
        assert!(!s.brief_review.waiting);
    }
}
