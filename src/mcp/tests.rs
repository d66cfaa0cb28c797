//! Tests of `mcp`.

use super::*;

fn parse(argv: Vec<OsString>) -> crate::cli::Command {
    let mut full = vec![OsString::from("autocode")];
    full.extend(argv);
    <crate::cli::Cli as clap::Parser>::try_parse_from(full)
        .expect("the argv parses")
        .command
}

#[test]
fn a_callers_objective_and_values_are_never_read_as_flags() {
    let p = StartRun {
        objective: "--unconfined --in-place".into(),
        workspace: "/ws".into(),
        provider: Some("--unconfined".into()),
        models: Some(BTreeMap::from([("builder".to_owned(), "-x".to_owned())])),
        yes: Some(true),
        max_usd: Some(1.5),
        max_minutes: None,
        max_tokens: None,
    };
    let crate::cli::Command::Exec(args) = parse(exec_argv(p, Path::new("/ws")).expect("argv"))
    else {
        panic!("exec")
    };
    assert_eq!(args.objective.as_deref(), Some("--unconfined --in-place"));
    assert!(!args.unconfined && !args.in_place);
    assert_eq!(args.provider.as_deref(), Some("--unconfined"));
    assert_eq!(args.builder_model.as_deref(), Some("-x"));
    assert!(args.yes);
    assert_eq!(args.budgets.max_usd, Some(1.5));
    let bad = StartRun {
        objective: "x".into(),
        workspace: "/ws".into(),
        provider: None,
        models: Some(BTreeMap::from([("boss".to_owned(), "m".to_owned())])),
        yes: None,
        max_usd: None,
        max_minutes: None,
        max_tokens: None,
    };
    assert!(exec_argv(bad, Path::new("/ws")).is_err());
}

#[test]
fn decision_values_that_look_like_flags_stay_values() {
    let crate::cli::Command::Resume(args) = parse(vec![
        "resume".into(),
        "20260101-000000-abcdef".into(),
        "--jsonl".into(),
        "--answer=Q1=--yes".into(),
        "--reject=--accept-test-changes".into(),
        "--because=-rf".into(),
    ]) else {
        panic!("resume")
    };
    assert_eq!(args.answer, [("Q1".to_owned(), "--yes".to_owned())]);
    assert!(!args.yes && !args.accept_test_changes);
    assert_eq!(args.reject.as_deref(), Some("--accept-test-changes"));
    assert_eq!(args.because.as_deref(), Some("-rf"));
}
