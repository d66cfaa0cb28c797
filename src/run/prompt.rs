//! Stage prompts: what each role is told, built from the typed run state.
//!
//! A prompt carries the objective, the context the role needs (brief, answers, plan, milestone,
//! open findings), the rules of its sandbox, how to cite evidence on its transport, and the report
//! schema. Repairs and corrections are short follow-ups in the same session when the transport
//! keeps one, so they do not repeat the context.

use serde_json::Value;

use super::flow::{StagePlan, criteria_of, milestones};
use super::prepare::COULD_NOT_PREPARE;
use super::state::RunState;
use crate::report::ReportKind;
use crate::report::evidence::UNNAMED_EVENT_REF;
use crate::role::{Role, SandboxMode};
use crate::verify::CheckKind;
use crate::verify::treediff::Comparison;

/// How commands become evidence on the stage's transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvidenceStyle {
    /// The CLI's own command events (OpenCode, Codex, Claude Code, `opencode_events` tools).
    Events,
    /// `autocode capture` receipts (report-file tools).
    CaptureReceipts,
}

fn role_brief(role: Role) -> &'static str {
    match role {
        Role::Requirements => {
            "You are the requirements gatherer. Read the workspace and turn the objective into a brief: goals, constraints, acceptance criteria (each testable), and at most three open questions, each with a proposed default. Ask only questions whose answer would change the work. For each acceptance criterion, quote in covers the part(s) of the objective it covers, verbatim and whole (each list item, table row or sentence it covers): autocode lists every part no criterion's quotes span at least half of to the reviewers. A command the objective shows as a required check or setup step that cannot or need not run for this work (a service this machine lacks, an example the objective only illustrates) goes in set_aside_commands with its reason; the reviewers and the person see it, and every other such command is replayed."
        }
        Role::Planner => {
            "You are the planner. Write a plan of small milestones. Every acceptance criterion is verified by a shell command that exits 0 exactly when it holds (a check, run from the workspace root), or is marked human_review when no command can decide it. Give each criterion its kind: fail_to_pass when it asks for a change (its check must fail on the current tree, or against the current code with the tests the work adds, and pass after the work; autocode runs every check on the current tree before the first build, and at the end against the current code with the work's tests) or pass_to_pass when it guards behaviour that already works (its check passes before and after). A check whose exit status cannot depend on the work (`… || true`, `…; exit 0`, `echo …`) is rejected. Commands the objective requires are replayed by autocode anyway: plan checks may add to them, never replace them. autocode replays checks in a clean checkout of the tree under test (git metadata included: `git describe` and `git log` work there), which holds no ignored files: no node_modules/, .venv/, target/ or build outputs. When the checks need dependencies installed or something generated first, declare those commands as the milestone's prepare steps (`npm ci`, `python3 -m venv .venv && .venv/bin/pip install -e .[test]`, `go mod download`, `cargo fetch`): autocode runs them once before the checks of every replay and on the base tree, and a later milestone gets the earlier milestones' steps too. A prepare step only sets up the environment; it never does the work or decides a criterion, and when one fails the checks are reported as could not prepare. Leave prepare null when a clean checkout runs the checks as it is."
        }
        Role::PlanReviewer => {
            "You are the plan reviewer, working independently of the planner. Approve the plan, or list concerns; mark a concern blocking only when the plan would fail the objective or its checks would not prove the criteria. autocode runs the checks in a clean checkout (no ignored files such as node_modules/, .venv/ or target/) after each milestone's prepare steps: a check that needs dependencies no prepare step installs cannot pass there, and a prepare step that does the work, writes what a check reads as its verdict, or could make a check pass whatever the work is a blocking concern."
        }
        Role::Builder => {
            "You are the builder. Change the workspace to meet this milestone's acceptance criteria. Run the checks yourself before you report. Do not commit, push, or change branches."
        }
        Role::Tester => {
            "You are the tester. Judge this milestone: run every check command, and report PASS or FAIL per criterion with the commands you ran. Do not change source files: you may write only under .autocode/. A check that did not exit 0 is a FAIL; autocode re-runs every check you report passing."
        }
        Role::CompletionReviewer => {
            "You are the completion reviewer. Decide, from the plan, the test results and the workspace: CONTINUE (this milestone is done and more remain), REWORK (with blocking findings), BLOCKED (a human decision is needed), or COMPLETE (the last milestone is done and the objective is met)."
        }
        Role::Resolver => {
            "You are the resolver. Diagnose why the work is stuck and say what should change."
        }
    }
}

/// Why a read-only stage does not write, in words that keep the sandbox apart from the task.
/// Measured with a 1.5B model told only "this stage is read-only": its plan said the objective
/// "should be completed without making any changes", and its reviews asked that the objective's
/// file not be made writable.
fn read_only_reason(role: Role) -> &'static str {
    match role {
        Role::Requirements | Role::Planner | Role::PlanReviewer => {
            " That is this stage's rule, not the objective's: the builder, a later stage, makes the changes the objective asks for, in a workspace it may write."
        }
        Role::CompletionReviewer => {
            " The builder already made its changes; you judge them as they are."
        }
        Role::Builder | Role::Tester | Role::Resolver => "",
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The full prompt of a fresh stage attempt.
/// `changes`: the work tree against the base tree, shown to the completion reviewer (`None`
/// when no base was saved, or for the other roles; see [`shows_changes`]).
pub fn stage_prompt(
    state: &RunState,
    plan: &StagePlan,
    sandbox: SandboxMode,
    evidence: EvidenceStyle,
    changes: Option<&Comparison>,
) -> String {
    let mut out = String::new();
    out.push_str(role_brief(plan.role));
    out.push_str("\n\n# Objective\n\n");
    out.push_str(state.objective.trim());
    out.push('\n');
    if !state.verification.objective_commands.is_empty() {
        out.push_str("\n# Commands the objective shows\n\nautocode replays each required_check, verbatim, on the base and the final tree whatever the plan says; a setup command is never replayed as a check (a milestone's prepare step runs it); a mentioned one is not replayed; a set_aside one was set aside by the requirements for the reason shown, which reviewers judge:\n\n");
        out.push_str(&crate::verify::objective::describe(
            &state.verification.objective_commands,
            &super::flow::milestones(state),
        ));
    } else if !state.verification.required_checks.is_empty() {
        out.push_str("\n# Commands the objective requires to pass\n\nautocode replays each of these, verbatim, on the final tree whatever the plan says:\n\n");
        for check in &state.verification.required_checks {
            out.push_str(&format!("- `{check}`\n"));
        }
    }
    if let Some(brief) = &state.brief {
        out.push_str(if plan.role == Role::Requirements {
            "\n# Your previous brief\n\n```json\n"
        } else {
            "\n# Brief (accepted)\n\n```json\n"
        });
        out.push_str(&pretty(brief));
        out.push_str("\n```\n");
    }
    if !state.answers.is_empty() {
        out.push_str("\n# Answers to the open questions\n\n");
        for (id, answer) in &state.answers {
            out.push_str(&format!("- {id}: {} ({})\n", answer.text, answer.source));
        }
    }
    match plan.role {
        Role::Requirements if !state.brief_review.feedback.is_empty() => {
            out.push_str("\n# The person's feedback on your previous brief: write the brief again to address it (keep the answers above unless the feedback changes them)\n\n");
            for feedback in &state.brief_review.feedback {
                out.push_str(&format!("- on {}: {}\n", feedback.revision, feedback.text));
            }
        }
        Role::Planner if !state.plan_concerns.is_empty() => {
            if let Some(previous) = state.latest_plan() {
                out.push_str(&format!(
                    "\n# Your previous plan (revision {})\n\n```json\n{}\n```\n",
                    previous.revision,
                    pretty(&previous.plan)
                ));
                // What autocode measured, beside what the reviewer made of it.
                base_tree_section(state, &previous.plan, &mut out);
            }
            out.push_str(
                "\n# Blocking concerns from the plan review: revise the plan to address them\n\n",
            );
            for concern in &state.plan_concerns {
                out.push_str(&format!("- {concern}\n"));
            }
        }
        Role::PlanReviewer => {
            if let Some(latest) = state.latest_plan() {
                out.push_str(&format!(
                    "\n# The plan to review (revision {})\n\n```json\n{}\n```\n",
                    latest.revision,
                    pretty(&latest.plan)
                ));
                base_tree_section(state, &latest.plan, &mut out);
                out.push_str(&super::coverage::prompt_section(state));
            }
        }
        Role::Builder | Role::Tester | Role::CompletionReviewer | Role::Resolver => {
            if let Some(m) = plan.milestone {
                let all = milestones(state);
                if let Some(milestone) = all.get(m) {
                    out.push_str(&format!(
                        "\n# Milestone {} of {}\n\n```json\n{}\n```\n",
                        m + 1,
                        all.len(),
                        pretty(milestone)
                    ));
                }
                let criteria = criteria_of(state, m);
                let prepare = super::replay_verdicts::prepare_through(state, Some(m));
                if plan.role == Role::Tester && !prepare.is_empty() {
                    out.push_str("\n# Prepare steps (run them first, in order: your copy is a clean checkout without installed dependencies; autocode runs them the same way before it replays your checks)\n\n");
                    for step in &prepare {
                        out.push_str(&format!("- `{}`\n", step.as_str()));
                    }
                }
                if plan.role == Role::Tester && !criteria.is_empty() {
                    out.push_str("\n# Checks to run (one per criterion)\n\n");
                    for (id, check) in &criteria {
                        match check {
                            Some(check) => out.push_str(&format!("- {id}: `{check}`\n")),
                            None => out
                                .push_str(&format!("- {id}: human review (report HUMAN_REVIEW)\n")),
                        }
                    }
                }
                if plan.role == Role::CompletionReviewer {
                    if let Some(changes) = changes {
                        changes_section(state, changes, &mut out);
                    }
                    out.push_str(&super::coverage::prompt_section(state));
                    let results: Vec<_> =
                        state.criteria.iter().filter(|c| c.milestone == m).collect();
                    if !results.is_empty() {
                        out.push_str(
                            "\n# Verified criteria (after autocode replayed the checks)\n\n",
                        );
                        for c in results {
                            out.push_str(&format!("- {}: {}\n", c.criterion_id, c.verdict));
                        }
                    }
                }
                let findings: Vec<_> = state
                    .open_findings
                    .iter()
                    .filter(|f| f.milestone == m)
                    .collect();
                if !findings.is_empty() {
                    out.push_str("\n# Open findings to fix\n\n");
                    for f in findings {
                        out.push_str(&format!("- {} ({}): {}\n", f.id, f.source, f.text));
                    }
                }
            }
        }
        _ => {}
    }
    out.push_str("\n# Rules\n\n");
    match sandbox {
        SandboxMode::ReadOnly => {
            out.push_str("- You only read in this stage: do not create, change or delete any file (autocode compares the workspace before and after).");
            out.push_str(read_only_reason(plan.role));
            out.push('\n');
        }
        SandboxMode::WorkspaceWrite if plan.role == Role::Builder => {
            out.push_str("- Work only inside the workspace. Leave no background process running: autocode stops the whole process family when the stage ends.\n")
        }
        SandboxMode::WorkspaceWrite => out.push_str("- Do not change source files; write only under .autocode/.\n"),
    }
    if matches!(plan.kind, ReportKind::Build | ReportKind::Test) {
        match evidence {
            EvidenceStyle::Events => out.push_str(&format!(
                "- Every check you report must be a command you ran in this session, cited as {{\"command\", \"exit_code\", \"evidence_ref\"}}: the exact command text, its real exit code, and evidence_ref \"event:<id>\" with the id of your tool call, or \"{UNNAMED_EVENT_REF}\" when you cannot see it (autocode then requires exactly one command in this session with that text and exit code). Commands that ran in the background have no exit code and are not evidence.\n"
            )),
            EvidenceStyle::CaptureReceipts => out.push_str(
                "- Run every check you report through `autocode capture --output .autocode/evidence/NAME.json -- COMMAND ARGS` (a new NAME each time) and cite it as {\"command\", \"exit_code\", \"evidence_ref\": \".autocode/evidence/NAME.json\"}.\n",
            ),
        }
    }
    out.push_str(&format!(
        "\n# Report\n\nFinish with your report: one JSON object, and nothing else, that validates against this JSON Schema ({} report):\n\n```json\n{}\n```\n",
        plan.kind.as_str(),
        plan.kind.schema_text().trim()
    ));
    out
}

/// What the plan's checks did on the base tree: a `fail_to_pass` check that already passes there
/// shows the change only by failing against the base code with the work's tests (else its
/// criterion needs a person), a `pass_to_pass` one that fails guards nothing.
fn base_tree_section(state: &RunState, plan: &Value, out: &mut String) {
    let base = &state.verification.base_checks;
    let mut lines = Vec::new();
    for milestone in plan["milestones"].as_array().into_iter().flatten() {
        for c in milestone["acceptance_criteria"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let (Some(id), Some(check)) = (c["id"].as_str(), c["check"].as_str()) else {
                continue;
            };
            if c["human_review"].as_bool().unwrap_or(false) {
                continue;
            }
            let kind = CheckKind::of_criterion(c);
            let Some(result) = base.get(check) else {
                continue;
            };
            let verdict = match (kind, result.held()) {
                (_, false) if result.detail.starts_with(COULD_NOT_PREPARE) => format!(
                    "did NOT RUN on the base tree (its prepare steps failed there), so nothing shows how it does there: {}",
                    result.detail
                ),
                (CheckKind::FailToPass, true) => "already PASSES on the base tree (which lacks the tests the work will add): it shows the change only if it FAILS against the base code with the work's tests, which autocode replays at the end; if it does not, the criterion goes to a person (a check that selects the tests the work adds fails on the base tree already)".to_owned(),
                (CheckKind::FailToPass, false) if !result.passed => "fails on the base tree, as a fail_to_pass check must".to_owned(),
                (CheckKind::FailToPass, false) => "runs no test on the base tree (its runner says none ran: the tests it selects do not exist yet), so it fails there, as a fail_to_pass check must".to_owned(),
                (CheckKind::PassToPass, true) => "passes on the base tree, as a pass_to_pass check must".to_owned(),
                (CheckKind::PassToPass, false) => format!("this pass_to_pass check FAILS on the base tree ({}): it does not guard existing behaviour (if the work is what will make it pass, its kind is fail_to_pass)", result.why_not()),
            };
            lines.push(format!("- {id} `{check}` ({}): {verdict}\n", kind.as_str()));
        }
    }
    if !lines.is_empty() {
        out.push_str(
            "\n# The plan's checks, run by autocode on the base tree (before any change)\n\n",
        );
        for line in lines {
            out.push_str(&line);
        }
        let any_fails = base.iter().any(|(_, b)| !b.passed);
        if !any_fails {
            out.push_str("\nNo check fails on the base tree. A run whose work changes more than documentation completes only when a check passes on the result having run a test and fails against the base code with the work's tests: a check that failed on the base tree, or a fail_to_pass check (a pass_to_pass guard is not tried); otherwise it waits for a person.\n");
        }
    }
}

/// Whether a stage of `role` is shown the changes from the base tree.
pub fn shows_changes(role: Role) -> bool {
    role == Role::CompletionReviewer
}

/// The work so far, base → work tree: the diff of test files apart from the rest.
fn changes_section(state: &RunState, comparison: &Comparison, out: &mut String) {
    let changes = comparison.changes();
    let checks: Vec<String> = milestones(state)
        .iter()
        .flat_map(|m| {
            m["acceptance_criteria"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c["check"].as_str().map(str::to_owned))
        .chain(state.verification.required_checks.iter().cloned())
        .collect();
    let matcher = crate::verify::treediff::TestMatcher::new(&checks);
    let (tests, other): (Vec<_>, Vec<_>) = changes
        .iter()
        .map(|(rel, _)| rel.clone())
        .partition(|rel| matcher.is_test(rel));
    out.push_str("\n# Changes to test files (base tree → now)\n\n");
    if tests.is_empty() {
        out.push_str("None.\n");
    } else {
        out.push_str("Judge these on their own: a weakened or deleted test is not a passing one.\n\n```diff\n");
        out.push_str(&comparison.diff_of(&tests, 12_000));
        out.push_str("```\n");
    }
    out.push_str("\n# Other changes (base tree → now)\n\n");
    if other.is_empty() {
        out.push_str("None.\n");
    } else {
        out.push_str("```diff\n");
        out.push_str(&comparison.diff_of(&other, 20_000));
        out.push_str("```\n");
    }
}

/// The follow-up asking for a report-only repair. `rejected`: the report itself, for a repair on a
/// fresh session (the stage prompt before this holds the schema; a kept session holds both).
pub fn repair_prompt(problems: &[String], rejected: Option<&Value>) -> String {
    let mut out = String::new();
    if let Some(report) = rejected {
        out.push_str(&format!(
            "# Your rejected report\n\n```json\n{}\n```\n\n",
            pretty(report)
        ));
    }
    out.push_str("autocode rejected your report:\n\n");
    for p in problems {
        out.push_str(&format!("- {p}\n"));
    }
    out.push_str("\nReply with the corrected JSON report only, against the schema above. Do not change the workspace.");
    out
}

/// The one same-session correction of a final message that was a shell command.
pub fn shell_command_correction(command_json: &str) -> String {
    format!(
        "Your final message was a shell command ({command_json}) instead of the JSON report. autocode did not run it. Reply with the JSON report alone, with no command."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::flow::tests::new_state;
    use crate::run::state::AttemptPurpose;

    #[test]
    fn prompts_carry_objective_rules_and_schema() {
        let state = new_state();
        let plan = StagePlan {
            role: Role::Requirements,
            kind: ReportKind::Requirements,
            milestone: None,
            purpose: AttemptPurpose::Fresh,
        };
        let text = stage_prompt(
            &state,
            &plan,
            SandboxMode::ReadOnly,
            EvidenceStyle::Events,
            None,
        );
        assert!(text.contains("do it"));
        assert!(text.contains("You only read in this stage"));
        assert!(text.contains("the builder, a later stage, makes the changes"));
        assert!(text.contains("\"open_questions\""));
        assert!(!text.contains("evidence_ref\": \".autocode"));
        let build = StagePlan {
            role: Role::Builder,
            kind: ReportKind::Build,
            milestone: Some(0),
            purpose: AttemptPurpose::Fresh,
        };
        let text = stage_prompt(
            &state,
            &build,
            SandboxMode::WorkspaceWrite,
            EvidenceStyle::CaptureReceipts,
            None,
        );
        assert!(text.contains("autocode capture --output"));
        let repair = repair_prompt(&["/status: bad".into()], None);
        assert!(repair.contains("/status: bad") && !repair.contains("$schema"));
        let shown = repair_prompt(
            &["/status: bad".into()],
            Some(&serde_json::json!({"status": "x"})),
        );
        assert!(shown.contains("# Your rejected report") && shown.contains("\"status\": \"x\""));
    }

    /// A planner asked to revise sees what autocode measured on the base tree beside the
    /// reviewer's words (measured with a 1.5B model: told only "the check fails on the base
    /// tree, use a more robust method", it kept a failing check marked pass_to_pass).
    #[test]
    fn a_planner_revising_sees_the_base_tree_verdicts() {
        let mut state = new_state();
        crate::run::flow::apply_plan(
            &mut state,
            &serde_json::json!({"summary": "s", "milestones": [{"id": "M1", "title": "t",
                "description": "", "acceptance_criteria": [{"id": "AC1", "text": "hello.txt holds it",
                "check": "test -f hello.txt", "human_review": false, "kind": "pass_to_pass"}]}]}),
        );
        state.verification.base_checks.insert(
            "test -f hello.txt".into(),
            crate::verify::BaseCheck {
                passed: false,
                detail: "exit 1".into(),
                tests: Default::default(),
                test_ids: None,
                reused_from: None,
            },
        );
        state.plan_concerns = vec!["q1: the check fails on the base tree".into()];
        let plan = StagePlan {
            role: Role::Planner,
            kind: ReportKind::Plan,
            milestone: None,
            purpose: AttemptPurpose::Fresh,
        };
        let text = stage_prompt(
            &state,
            &plan,
            SandboxMode::ReadOnly,
            EvidenceStyle::Events,
            None,
        );
        assert!(
            text.contains("this pass_to_pass check FAILS on the base tree (exit 1)"),
            "{text}"
        );
        assert!(text.contains("its kind is fail_to_pass"), "{text}");
    }
}
