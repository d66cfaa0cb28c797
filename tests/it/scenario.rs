//! The scenario harness end to end: the real catalog loads and its oracles can fail, real Codex
//! runs against the scripted model through the in-process engine, verdicts, result folders and
//! the merged scorecard (including a FALSE_COMPLETE the harness must flag), and two shards of a
//! job list merged into the same scorecard as the unsharded run.

use std::path::{Path, PathBuf};

use autocode::scenario::catalog::{self, ExpectedOutcome, Job, Profile, Scenario};
use autocode::scenario::result::{self, RESULT_FILE};
use autocode::scenario::runner::{self, HarnessConfig};
use autocode::scenario::selfcheck;
use autocode::scenario::setup::copy_tree;
use autocode::scenario::stats;
use autocode::scenario::verdict::{RunEnding, Verdict};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn catalog() -> Vec<Scenario> {
    catalog::load_catalog(&root().join("scenarios")).unwrap()
}

fn cli_bin() -> PathBuf {
    let dir = root().join("tests/clis/node_modules/.bin");
    assert!(
        dir.join("codex").exists(),
        "codex is missing: install the pinned CLIs with `npm install --prefix tests/clis`"
    );
    dir
}

fn harness(out: &Path) -> HarnessConfig {
    HarnessConfig {
        out: out.to_owned(),
        cli_bin_dir: cli_bin(),
        authorize_live: false,
        env: std::env::vars().collect(),
    }
}

#[test]
fn the_real_project_catalog_loads_and_each_case_names_its_source() {
    let cases = catalog::load_catalog(&root().join("scenarios-real")).unwrap();
    assert!(cases.len() >= 10, "only {} cases", cases.len());
    for case in &cases {
        assert!(case.name.starts_with("real-"), "{}", case.name);
        let source = std::fs::read_to_string(case.dir.join("SOURCE.md")).unwrap_or_default();
        assert!(
            source.to_lowercase().contains("licen"),
            "{}: SOURCE.md names the project and its licence",
            case.name
        );
        assert!(
            case.scripts.contains_key(&Profile::ScriptedCodex),
            "{}",
            case.name
        );
    }
}

#[test]
fn the_catalog_has_every_required_case_with_a_codex_script() {
    let cases = catalog();
    assert!(cases.len() >= 14, "only {} cases", cases.len());
    for required in [
        "greenfield-python-cli",
        "bugfix-hidden-tests",
        "feature-with-docs",
        "rust-crate-change",
        "builder-claims-untested",
        "tester-phantom-event",
        "tester-failing-as-passing",
        "tester-stale-evidence",
        "planner-edits-file",
        "builder-daemon",
        "final-message-shell-command",
        "report-cut-by-output-cap",
        "rate-limit-storm",
        "reviewer-complete-unverified",
        "hostile-repo",
        "verify-human-review",
        "verify-vacuous-check",
        "verify-prompt-injection",
        "verify-gutted-tests",
        "verify-dropped-requirement",
        "verify-escaping-symlink",
        "verify-honest-guards",
    ] {
        let case = cases
            .iter()
            .find(|c| c.name == required)
            .unwrap_or_else(|| panic!("missing case {required}"));
        assert!(case.supports(&Profile::ScriptedCodex), "{required}");
    }
    // Every bug-fix-like case proves its oracle can fail on the seed.
    for name in [
        "bugfix-hidden-tests",
        "rust-crate-change",
        "feature-with-docs",
    ] {
        let case = cases.iter().find(|c| c.name == name).unwrap();
        assert!(
            case.spec.oracle.checks.iter().any(|c| c.fails_on_seed),
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_oracle_fails_on_its_seed_and_accepts_the_scripted_result() {
    let cases = catalog();
    let mut problems = Vec::new();
    for case in &cases {
        let check = selfcheck::self_check(case, &Profile::ScriptedCodex).await;
        assert_eq!(
            check.on_seed.len(),
            case.spec.oracle.checks.len(),
            "{}",
            case.name
        );
        problems.extend(check.problems.iter().map(|p| format!("{}: {p}", case.name)));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_check_flags_an_oracle_that_cannot_fail() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lazy-oracle");
    copy_tree(&root().join("scenarios/bugfix-hidden-tests"), &dir).unwrap();
    let spec = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
    // An oracle that only runs the seed's own passing tests cannot tell a fix from no fix.
    let lazy = spec.replace(
        "command = \"PYTHONPATH=. python3 \\\"$ORACLE_DIR/test_hidden.py\\\"\"",
        "command = \"python3 -m unittest -q test_stats\"",
    );
    assert_ne!(lazy, spec);
    std::fs::write(dir.join("scenario.toml"), lazy).unwrap();
    let case = catalog::load_case(&dir).unwrap();
    let check = selfcheck::self_check(&case, &Profile::ScriptedCodex).await;
    assert!(
        check
            .problems
            .iter()
            .any(|p| p.contains("passes on the seed")),
        "{:?}",
        check.problems
    );
}

async fn run_case(case: &Scenario, out: &Path) -> result::ScenarioResult {
    let job = Job {
        scenario: case,
        profile: Profile::ScriptedCodex,
        repeat: 0,
    };
    runner::run_job(&job, &harness(out)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_codex_runs_give_pass_and_honest_stop_and_stats_merge_them() {
    let cases = catalog();
    let find = |name: &str| cases.iter().find(|c| c.name == name).unwrap();
    let first_out = tempfile::tempdir().unwrap();
    let second_out = tempfile::tempdir().unwrap();

    // A misbehaving builder repaired in the same session: PASS.
    let repaired = run_case(find("builder-claims-untested"), first_out.path()).await;
    assert_eq!(repaired.verdict, Verdict::Pass, "{repaired:#?}");
    assert!(
        repaired.stages >= 7,
        "the rejected attempt counts: {repaired:#?}"
    );
    assert!(repaired.oracle.iter().all(|c| c.passed));
    let dir = result::result_dir(
        first_out.path(),
        "builder-claims-untested",
        "scripted-codex",
        0,
    );
    assert!(dir.join(RESULT_FILE).is_file());
    assert!(
        dir.join("run/run.json").is_file(),
        "the run directory is kept"
    );
    assert!(dir.join("model-requests.jsonl").is_file());
    let oracle_log = repaired.oracle[0].output_file.as_deref().unwrap();
    assert!(dir.join(oracle_log).is_file());

    // A check that passes only in the agent's tree: only the replay catches it; honest stop.
    let stopped = run_case(find("tester-failing-as-passing"), second_out.path()).await;
    assert_eq!(stopped.verdict, Verdict::HonestStop, "{stopped:#?}");
    assert!(matches!(stopped.ending, RunEnding::Paused { .. }));
    assert!(
        stopped.oracle.iter().any(|c| !c.passed),
        "the oracle agrees the result is broken"
    );

    let found =
        stats::collect(&[first_out.path().to_owned(), second_out.path().to_owned()]).unwrap();
    let results: Vec<_> = found.into_iter().map(|(_, r)| r).collect();
    let merged = stats::merge(&results);
    assert_eq!(merged.total.runs, 2);
    assert_eq!((merged.total.passes, merged.total.honest_stops), (1, 1));
    assert_eq!(merged.false_complete, 0);
    assert!(merged.total.median_wall_ms.is_some_and(|ms| ms > 0.0));
    assert!(merged.total.total_tokens > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_the_oracle_refutes_is_a_false_complete() {
    // The same scripted run, with a stricter hidden requirement the agents never saw.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("strict-greenfield");
    copy_tree(&root().join("scenarios/greenfield-python-cli"), &dir).unwrap();
    let mut spec = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
    spec.push_str(
        "\n[[oracle.check]]\nname = \"a man page exists\"\ncommand = \"test -f wordfreq.1\"\n",
    );
    std::fs::write(dir.join("scenario.toml"), spec).unwrap();
    let case = catalog::load_case(&dir).unwrap();
    assert_eq!(case.spec.expect.outcome, ExpectedOutcome::Complete);
    let out = tempfile::tempdir().unwrap();
    let result = run_case(&case, out.path()).await;
    assert_eq!(result.ending, RunEnding::Complete, "{result:#?}");
    assert_eq!(result.verdict, Verdict::FalseComplete, "{result:#?}");
    let merged = stats::merge(std::slice::from_ref(&result));
    assert_eq!(merged.false_complete, 1);
    let junit = stats::render_junit(&[result]);
    assert!(junit.contains("failures=\"1\"") && junit.contains("FALSE_COMPLETE"));
}

/// `autocode ARGS…` from the repository root; (exit code, stdout, stderr).
fn autocode(args: &[&str]) -> (Option<i32>, String, String) {
    autocode_with_path(args, &std::env::var("PATH").unwrap_or_default())
}

/// `autocode ARGS…` with `PATH` set to `path`.
fn autocode_with_path(args: &[&str], path: &str) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_autocode"))
        .args(args)
        .current_dir(root())
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("autocode runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A `--tag` no selected case carries runs nothing and says so (a usage error), so a misspelt
/// tag in CI cannot pass as an empty scorecard.
#[test]
fn a_tag_no_case_carries_is_a_usage_error() {
    let out = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = autocode(&[
        "scenario",
        "run",
        "--all",
        "--tag",
        "every-cli-misspelt",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("no selected case carries the tag every-cli-misspelt"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

/// `scenario run` of the equivalence test's jobs into `out`, optionally one shard of them.
fn run_jobs(out: &Path, no_clis: &Path, shard: Option<&str>) {
    let mut args = vec![
        "scenario",
        "run",
        "hostile-repo",
        "--profile",
        "scripted-claude",
        "--profile",
        "scripted-codex",
        "--repeat",
        "3",
        "--cli-bin",
        no_clis.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ];
    if let Some(shard) = shard {
        args.extend(["--shard", shard]);
    }
    // The scripted profiles look in `--cli-bin` first and then on `PATH`: a `PATH` without the
    // directories that hold the CLIs keeps them missing on a machine that has them installed.
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(
        std::env::split_paths(&path)
            .filter(|dir| !["codex", "claude"].iter().any(|cli| dir.join(cli).exists())),
    )
    .unwrap();
    let (code, stdout, stderr) = autocode_with_path(&args, path.to_str().unwrap());
    // The missing `codex` makes ERRORs on a scripted profile: the scorecard is written, and the
    // command fails (a scorecard that could not measure is no pass).
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
}

/// The merged `scenario stats --json` of `outs`, the total moved to the end of the rows, without
/// the wall-clock medians (they differ from run to run; everything else is a function of the
/// verdicts and the runs' records).
fn merged_stats(outs: &[&Path]) -> serde_json::Value {
    let mut args = vec!["scenario", "stats", "--json"];
    for out in outs {
        args.extend(["--out", out.to_str().unwrap()]);
    }
    let (code, stdout, stderr) = autocode(&args);
    assert_eq!(
        code,
        Some(1),
        "ERRORs on a scripted profile: {stdout}\n{stderr}"
    );
    let mut stats: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let object = stats.as_object_mut().unwrap();
    let total = object.remove("total").unwrap();
    let rows = object
        .get_mut("rows")
        .and_then(|r| r.as_array_mut())
        .unwrap();
    rows.push(total);
    for row in rows.iter_mut() {
        row.as_object_mut().unwrap().remove("median_wall_ms");
    }
    stats
}

/// (case, profile, repetition) of every result under `out`.
fn jobs_in(out: &Path) -> Vec<(String, String, u32)> {
    stats::collect(&[out.to_owned()])
        .map(|found| {
            found
                .into_iter()
                .map(|(_, r)| (r.case, r.profile, r.repeat))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn two_shards_merged_equal_the_unsharded_run() {
    // Real harness runs that never reach an agent, so no real CLI and no model is involved:
    // --cli-bin holds only a fake `claude` that answers `--version` (what the run's preflight
    // asks); hostile-repo on scripted-claude stops at autocode's billing-route check before any
    // launch, and on scripted-codex the preflight refuses the missing `codex`. Six jobs, two
    // verdicts.
    let tmp = tempfile::tempdir().unwrap();
    let no_clis = tmp.path().join("no-clis");
    std::fs::create_dir_all(&no_clis).unwrap();
    let claude = no_clis.join("claude");
    std::fs::write(
        &claude,
        "#!/bin/sh\ncase \"$1\" in --version) echo '2.1.328 (Claude Code)' ;; *) exit 64 ;; esac\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &claude,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    let whole = tmp.path().join("whole");
    let first = tmp.path().join("shard-1");
    let second = tmp.path().join("shard-2");
    run_jobs(&whole, &no_clis, None);
    run_jobs(&first, &no_clis, Some("1/2"));
    run_jobs(&second, &no_clis, Some("2/2"));

    // The shards split the jobs: each has some, none twice, together all of them.
    let (mut all, one, two) = (jobs_in(&whole), jobs_in(&first), jobs_in(&second));
    assert_eq!(all.len(), 6, "{all:?}");
    assert_eq!((one.len(), two.len()), (3, 3), "{one:?} {two:?}");
    let mut union: Vec<_> = one.iter().chain(two.iter()).cloned().collect();
    union.sort();
    all.sort();
    assert_eq!(union, all);

    let unsharded = merged_stats(&[&whole]);
    let merged = merged_stats(&[&first, &second]);
    assert_eq!(merged, unsharded);
    let rows = unsharded["rows"].as_array().unwrap();
    let (total, rows) = rows.split_last().unwrap();
    assert_eq!(total["runs"], 6);
    let verdicts = [
        "passes",
        "false_completes",
        "honest_stops",
        "wrong_stops",
        "errors",
    ];
    let kinds = verdicts
        .iter()
        .filter(|v| total[**v].as_u64().unwrap() > 0)
        .count();
    assert!(kinds >= 2, "the jobs give more than one verdict: {total}");
    // Each (case, profile) row has its three repeats and an interval over them.
    for row in rows {
        assert_eq!(row["runs"], 3, "{row}");
        assert!(row["pass_interval"]["high"].as_f64().is_some(), "{row}");
    }
}

/// `--exclude-tag gate-only` (how the README's test command runs the slowest CLI) keeps every
/// case whose outcome can depend on the CLI: the honest heredoc case, every misbehaving stage
/// that is not only a gate's, and every case of another kind.
#[test]
fn excluding_gate_only_cases_keeps_the_ones_a_cli_can_change() {
    let cases = catalog();
    let all: Vec<&autocode::scenario::catalog::Scenario> = cases.iter().collect();
    let (kept, left_out) =
        autocode::scenario::catalog::without_tags(all, &["gate-only".to_owned()]);
    assert!(!left_out.is_empty());
    assert_eq!(kept.len() + left_out.len(), cases.len());
    for name in &left_out {
        assert!(
            name.starts_with("verify-") || name.starts_with("coverage-"),
            "{name} is tagged gate-only"
        );
    }
    for name in [
        "honest-heredoc-node",
        "evidence-shell-quoting",
        "tester-phantom-event",
    ] {
        assert!(kept.iter().any(|c| c.name == name), "{name} left out");
    }
}

/// `--tag every-cli` (how the README's test command runs OpenCode, whose own start-up costs
/// seconds of CPU a stage) keeps the cases that turn on a CLI's own conduct: its stream and
/// shell, its HOME and configuration, its limits, and an honest run and a blocked one. None of
/// them is gate-only: those run on two transports only.
#[test]
fn the_every_cli_tag_keeps_the_cases_a_cli_s_conduct_decides() {
    let cases = catalog();
    let all: Vec<&autocode::scenario::catalog::Scenario> = cases.iter().collect();
    let (kept, left_out) = autocode::scenario::catalog::with_tags(all, &["every-cli".to_owned()]);
    assert_eq!(kept.len() + left_out.len(), cases.len());
    assert!(!left_out.is_empty());
    for case in &kept {
        assert!(
            !case.spec.tags.iter().any(|t| t == "gate-only"),
            "{} is gate-only and every-cli",
            case.name
        );
    }
    for name in [
        "tester-stream-injection",
        "tester-phantom-event",
        "evidence-shell-quoting",
        "honest-heredoc-node",
        "builder-plants-agent-config",
        "builder-writes-home",
        "tester-writes-home",
        "planner-edits-file",
        "rate-limit-storm",
        "report-cut-by-output-cap",
        "builder-daemon",
        "feature-with-docs",
        "builder-reports-blocked",
    ] {
        assert!(kept.iter().any(|c| c.name == name), "{name} left out");
    }
}
