//! Pause codes: the typed reasons a run stops short of a verified completion.
//!
//! The strings are API (`run.json`, `--json` output, exit-3 stderr lines, scripts that branch on
//! them): never renamed, never reused. Each code carries an explanation and the exact command that
//! continues it; `autocode explain CODE` prints both and `docs/pause-codes.md` is generated from
//! this table (a test keeps the file in step).

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! pause_codes {
    ($( $(#[$doc:meta])* $variant:ident = $string:literal, $why:literal, $next:literal; )*) => {
        /// Why a run paused. Exhaustive: adding a code is an API change.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum PauseCode {
            $( $(#[$doc])* #[serde(rename = $string)] $variant, )*
        }

        impl PauseCode {
            pub const ALL: &'static [PauseCode] = &[$(PauseCode::$variant),*];

            /// The stable string form.
            pub fn as_str(self) -> &'static str {
                match self { $(PauseCode::$variant => $string,)* }
            }

            /// What happened, in one or two sentences.
            pub fn explanation(self) -> &'static str {
                match self { $(PauseCode::$variant => $why,)* }
            }

            /// The command that continues a run paused with this code (`RUN` is the run id).
            /// A paused run may name its route's setting instead of a generic phrase
            /// ([`OUTPUT_CAP_PHRASE`]: `run::handle`).
            pub fn next_step(self) -> &'static str {
                match self { $(PauseCode::$variant => $next,)* }
            }
        }
    };
}

pause_codes! {
    /// The requirements stage asked questions that need answers.
    WaitingForUser = "WAITING_FOR_USER",
        "The requirements gatherer asked open questions and no terminal was available to answer them.",
        "autocode resume RUN --answer ID=TEXT (repeat per question), or --yes to accept the proposed defaults";
    /// A plan revision waits for its approval token.
    AwaitingPlanApproval = "AWAITING_PLAN_APPROVAL",
        "The plan was reviewed and waits for your approval of this exact revision.",
        "autocode resume RUN --approve-plan TOKEN (the token is printed with the pause and in `autocode status RUN`)";
    /// A verifier shares a model family with what it checks.
    PausedCrossModel = "PAUSED_CROSS_MODEL",
        "A saved run's verifier role runs on the same model family as the role it checks (checked again on every resume; a new run is refused by its preflight instead); nothing was launched.",
        "start a new run (its preflight moves the verifiers to another installed, signed-in provider), or name a model of another family for the role (e.g. --tester-model M), or pass --single-model M to waive independence knowingly";
    /// The login or billing route of a provider is not the expected one.
    PausedBillingRoute = "PAUSED_BILLING_ROUTE",
        "The provider's login or billing route did not pass its check (wrong login mode, an API key source, or a forbidden variable); no model was called.",
        "fix the login named in the message (e.g. `claude auth login`, or unset the forbidden variable), then autocode resume RUN";
    /// The provider answered with a rate limit.
    PausedRateLimit = "PAUSED_RATE_LIMIT",
        "The provider rate-limited the stage (HTTP 429).",
        "autocode resume RUN --wait (sleeps until the reset time when it is known), or autocode resume RUN later";
    /// The provider is overloaded.
    PausedProviderCapacity = "PAUSED_PROVIDER_CAPACITY",
        "The provider reported it is overloaded or out of capacity.",
        "autocode resume RUN later, or choose another model for the role";
    /// A spend, token or subscription budget ran out.
    PausedBudget = "PAUSED_BUDGET",
        "A budget ran out: --max-usd or --max-tokens, or the provider's own subscription or credit limit.",
        "raise the limit (autocode resume RUN --max-usd N / --max-tokens N), or autocode resume RUN --wait for a provider limit with a known reset time";
    /// The run's wall-clock allowance ran out.
    PausedTimeLimit = "PAUSED_TIME_LIMIT",
        "The run used up its --max-minutes allowance.",
        "autocode resume RUN --max-minutes N";
    /// One stage ran longer than allowed, or went idle.
    PausedStageTimeout = "PAUSED_STAGE_TIMEOUT",
        "A stage exceeded --max-stage-minutes or produced no output for --max-idle-minutes; its process family was stopped.",
        "autocode resume RUN (optionally with a larger --max-stage-minutes or --max-idle-minutes)";
    /// The model refused the content.
    PausedContentFilter = "PAUSED_CONTENT_FILTER",
        "The provider refused the request or the answer (content filter).",
        "rephrase the objective, or choose another model for the role, then autocode resume RUN";
    /// The answer was cut off by the output-token limit.
    PausedOutputCap = "PAUSED_OUTPUT_CAP",
        "The stage's answer was cut off by the output-token limit.",
        "raise the route's response cap (a paused run names the setting of its route) or choose another model, then set the attempt aside with autocode resume RUN --abandon-stage ATTEMPT";
    /// The provider's stop could not be classified with certainty.
    PausedProviderUncertain = "PAUSED_PROVIDER_UNCERTAIN",
        "The provider stopped for a reason autocode cannot classify with certainty (authentication, a cut stream, a start failure, a context-window limit); the request is not replayed blindly.",
        "read the stage log the message names (the attempt's stderr.log, its events in stdout.log beside it), fix the cause, then autocode resume RUN --abandon-stage ATTEMPT";
    /// The CLI, its version or its configuration changed since the run started.
    PausedTransportChanged = "PAUSED_TRANSPORT_CHANGED",
        "The agent CLI, its version, or a configuration it reads changed since the run recorded it.",
        "autocode resume RUN --accept-transport-change (after checking the change is intended)";
    /// A report stayed invalid after its repairs.
    PausedInvalidOutput = "PAUSED_INVALID_OUTPUT",
        "A stage's report still failed its schema or evidence check after the bounded report-only repairs.",
        "look at validation.json in the stage directory, then autocode resume RUN --abandon-stage ATTEMPT to run the stage again";
    /// A read-only stage changed the workspace.
    PausedDiscoveryWrite = "PAUSED_DISCOVERY_WRITE",
        "A read-only stage changed files in the workspace, or a judging stage changed source files; its report was rejected.",
        "inspect and revert the change named in the message, then autocode resume RUN --abandon-stage ATTEMPT";
    /// Another process wrote the work tree during the builder stage.
    PausedForeignEdit = "PAUSED_FOREIGN_EDIT",
        "A process outside the builder's room (you, an editor, a tool) wrote files in the work tree during the builder stage; the stage's result was not taken as the agent's work.",
        "check the files named in the message (keep or revert them), then autocode resume RUN --abandon-stage ATTEMPT to run the builder again on the tree as it is";
    /// Plan review rounds ran out.
    PausedPlanningBudget = "PAUSED_PLANNING_BUDGET",
        "The plan reviewer still had blocking concerns after two review rounds.",
        "read the concerns with autocode status RUN, refine the objective or approve with autocode resume RUN --approve-plan TOKEN";
    /// The builder's retries ran out.
    PausedBuilderRetryLimit = "PAUSED_BUILDER_RETRY_LIMIT",
        "The builder failed the milestone after its ordinary retry and its stronger attempt.",
        "read the findings and the resolver's diagnosis with autocode status RUN, adjust the objective or the builder model, then autocode resume RUN (the builder gets one more attempt)";
    /// The same failure kept coming back.
    PausedRepeatedFailure = "PAUSED_REPEATED_FAILURE",
        "The same failure happened three times at the same source.",
        "read the repeated failure and the resolver's diagnosis with autocode status RUN, change what causes it, then autocode resume RUN";
    /// A stage's processes could not be proven gone.
    PausedProcessCleanup = "PAUSED_PROCESS_CLEANUP",
        "The boundary could not verify that every process of a stage is gone (no POLLHUP from the listener).",
        "check for survivors named in supervision.json, stop them, then autocode resume RUN";
    /// The builder (after the retries the policy allows) or the completion reviewer reported
    /// the work blocked.
    PausedBlocked = "PAUSED_BLOCKED",
        "The builder (after the retries the policy allows) or the completion reviewer reported that the milestone cannot proceed without a decision from you.",
        "read the blocker in the pause reason (autocode status RUN), change what blocks it, then autocode resume RUN";
    /// A stage's stream showed commands the kernel never saw run, again after a repair.
    PausedForgedEvidence = "PAUSED_FORGED_EVIDENCE",
        "A stage's output stream held command events with no counterpart in the kernel-attested exec ledger (a forged event, e.g. written into the CLI's stdout through /proc), and did so again after being told. The attempt's ledger.jsonl and events.jsonl show which.",
        "read ledger.jsonl and events.jsonl of the attempt named in the message; if the agent misbehaved, change its model or provider, then autocode resume RUN --abandon-stage ATTEMPT";
    /// autocode stopped while a stage was running and its artifacts do not make it adoptable.
    PausedInterrupted = "PAUSED_INTERRUPTED",
        "autocode stopped while a stage was running, and the stage's artifacts do not hold a complete, valid, verified report; the attempt is kept.",
        "autocode resume RUN --abandon-stage ATTEMPT to run the stage again";
    /// A criterion no check can verify waits for a person.
    AwaitingHumanReview = "AWAITING_HUMAN_REVIEW",
        "Every check passed on the final tree, but some criteria cannot be verified by a check: the plan marks them for human review, or their fail_to_pass check already passed on the base tree. `autocode status RUN` shows each one, why it needs a person, and the part of the diff that bears on it.",
        "autocode resume RUN --accept CRITERION (repeat per criterion), or autocode resume RUN --reject CRITERION --because TEXT to send its milestone back to the builder";
    /// The builder changed existing tests, and the checks fail with the original tests.
    AwaitingTestChangeReview = "AWAITING_TEST_CHANGE_REVIEW",
        "The builder modified or deleted test files of the base tree, and the checks fail when those files are restored to their original version. `autocode status RUN` shows the test diff and the failing output.",
        "autocode resume RUN --accept-test-changes if the new tests are right, or change the objective and start again";
    /// Another autocode holds the run, or another run works in place in the directory.
    PausedRunBusy = "PAUSED_RUN_BUSY",
        "Another autocode process holds this run's lock, or another run works in place in this directory (one run at a time may: a second `--in-place` run creates nothing); nothing was changed.",
        "wait for the other process to finish (autocode status RUN), then autocode resume RUN (a new in-place run: start it again, or without --in-place to work in a worktree)";
}

/// The words of `PAUSED_OUTPUT_CAP`'s next step that a paused run replaces with the setting of
/// the route that paused (`OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX`, the direct runtime's
/// `--max-output-tokens`, …).
pub const OUTPUT_CAP_PHRASE: &str =
    "the route's response cap (a paused run names the setting of its route)";

impl fmt::Display for PauseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown pause code {0:?}")]
pub struct UnknownPauseCode(pub String);

impl std::str::FromStr for PauseCode {
    type Err = UnknownPauseCode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_uppercase();
        PauseCode::ALL
            .iter()
            .copied()
            .find(|code| code.as_str() == wanted)
            .ok_or_else(|| UnknownPauseCode(s.to_owned()))
    }
}

/// The text of `docs/pause-codes.md`, generated from the table above.
pub fn render_markdown() -> String {
    let mut out = String::from(
        "# Pause codes\n\n\
         <!-- Generated from src/pause.rs by `autocode explain --markdown`; a test keeps it in step. -->\n\n\
         A run that cannot reach a verified completion stops with one of these codes. The strings are \
         API: they are never renamed or reused. `autocode explain CODE` prints the same text; every \
         pause prints its code, the reason and the command that continues it, and exits with 3.\n\n\
         In the commands, `RUN` is the run id (optional when the workspace has one paused run).\n\n\
         | code | what happened | how to continue |\n|---|---|---|\n",
    );
    for code in PauseCode::ALL {
        out.push_str(&format!(
            "| `{}` | {} | `{}` |\n",
            code.as_str(),
            code.explanation(),
            code.next_step().replace('|', "\\|")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialized_form_is_the_documented_string() {
        for code in PauseCode::ALL {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, serde_json::Value::String(code.as_str().to_owned()));
            let back: PauseCode = serde_json::from_value(json).unwrap();
            assert_eq!(back, *code);
            assert_eq!(code.as_str().parse::<PauseCode>().unwrap(), *code);
        }
    }

    #[test]
    fn required_codes_exist_with_stable_strings() {
        let strings: Vec<&str> = PauseCode::ALL.iter().map(|c| c.as_str()).collect();
        for required in [
            "WAITING_FOR_USER",
            "AWAITING_PLAN_APPROVAL",
            "PAUSED_CROSS_MODEL",
            "PAUSED_BILLING_ROUTE",
            "PAUSED_RATE_LIMIT",
            "PAUSED_PROVIDER_CAPACITY",
            "PAUSED_BUDGET",
            "PAUSED_TIME_LIMIT",
            "PAUSED_STAGE_TIMEOUT",
            "PAUSED_CONTENT_FILTER",
            "PAUSED_OUTPUT_CAP",
            "PAUSED_PROVIDER_UNCERTAIN",
            "PAUSED_TRANSPORT_CHANGED",
            "PAUSED_INVALID_OUTPUT",
            "PAUSED_DISCOVERY_WRITE",
            "PAUSED_PLANNING_BUDGET",
            "PAUSED_BUILDER_RETRY_LIMIT",
            "PAUSED_REPEATED_FAILURE",
            "PAUSED_PROCESS_CLEANUP",
            "PAUSED_INTERRUPTED",
            "PAUSED_RUN_BUSY",
            "AWAITING_HUMAN_REVIEW",
            "AWAITING_TEST_CHANGE_REVIEW",
            "PAUSED_FORGED_EVIDENCE",
            "PAUSED_FOREIGN_EDIT",
        ] {
            assert!(strings.contains(&required), "{required} missing");
        }
        assert_eq!(strings.len(), 26);
    }

    #[test]
    fn every_code_says_how_to_continue() {
        for code in PauseCode::ALL {
            assert!(code.next_step().contains("autocode") || code.next_step().contains("--"));
            assert!(!code.explanation().is_empty());
        }
        assert!("paused_rate_limit".parse::<PauseCode>().is_ok());
        assert!("PAUSED_NOPE".parse::<PauseCode>().is_err());
    }

    #[test]
    fn docs_pause_codes_md_is_generated_from_the_enum() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/pause-codes.md");
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(
            on_disk,
            render_markdown(),
            "docs/pause-codes.md is stale: run `cargo run -- explain --markdown > docs/pause-codes.md`"
        );
    }
}
