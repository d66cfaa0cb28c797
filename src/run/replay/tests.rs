use super::*;

fn env() -> BTreeMap<String, String> {
    [("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())]
        .into_iter()
        .collect()
}

/// A replay reaches a local server outside its family (a test database) only when the
/// user allowed it, as a stage's room does.
#[tokio::test]
async fn a_replay_reaches_an_outside_local_server_only_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("port");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    // A server of its own family (not autocode, not the replay's): it says its port through
    // the FIFO, then answers connections until it is cancelled.
    let server = crate::supervise::spawn(
        crate::supervise::LaunchSpec {
            label: "outside server".into(),
            program: "python3".into(),
            args: vec![
                "-c".into(),
                "import socket, sys\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen(8)\nopen(sys.argv[1], 'w').write(str(s.getsockname()[1]))\nwhile True:\n    s.accept()[0].close()\n".into(),
                fifo.clone().into(),
            ],
            env: env().into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
            cwd: dir.path().to_owned(),
            stdin: crate::supervise::StdinSource::Null,
            stdio: crate::supervise::StdioMode::Captured { limit: 1 << 12 },
            timeout: Some(Duration::from_secs(120)),
            room: None,
        },
        crate::supervise::LaunchOptions::default(),
    )
    .await
    .unwrap();
    // Blocks until the server opened the FIFO and wrote its port.
    let port: u16 = std::fs::read_to_string(&fifo)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let check = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=10)\""
    );
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    let run = |allow: Vec<crate::supervise::net::NetAllow>| {
        let (tree, check) = (tree.clone(), check.clone());
        async move {
            run_checks_in(
                &tree,
                Restore::default(),
                &[check],
                &env(),
                Duration::from_secs(60),
                ReplayConfinement::Room {
                    allow_connect: &allow,
                },
                None,
            )
            .await
            .unwrap()
            .remove(0)
        }
    };
    let refused = run(Vec::new()).await;
    assert!(!refused.passed(), "{refused:?}");
    assert!(refused.output_tail.contains("refused"), "{refused:?}");
    let allowed = run(vec![format!("127.0.0.1:{port}").parse().unwrap()]).await;
    assert!(allowed.passed(), "{allowed:?}");
    server.canceller().cancel();
    let _ = server.finish().await;
}

/// The prepare steps run once, in order, before the checks, which see what they wrote; the
/// first step that fails stops the batch: no later step and no check runs.
#[tokio::test]
async fn prepare_steps_run_once_before_the_checks_and_a_failure_stops_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let run = |prepare: Vec<&str>, checks: Vec<&str>| {
        let prepare: Vec<PrepareStep> = prepare.into_iter().map(PrepareStep::new).collect();
        let checks: Vec<String> = checks.into_iter().map(String::from).collect();
        let tree = dir.path().to_owned();
        async move {
            run_batch_in(
                &tree,
                Restore::default(),
                &prepare,
                &checks,
                &env(),
                Duration::from_secs(30),
                ReplayConfinement::Unconfined,
                None,
                TreeFiles::OnDisk,
            )
            .await
            .unwrap()
        }
    };
    let done = run(
        vec!["echo p1 >> log", "echo p2 >> log"],
        vec!["echo c1 >> log", "test \"$(tr '\\n' , < log)\" = p1,p2,c1,"],
    )
    .await;
    assert_eq!(done.steps.len(), 2);
    assert!(done.checks.iter().all(Replayed::passed), "{done:?}");
    assert_eq!(done.prepared().failure(), None);
    let done = run(
        vec!["echo p1 >> log2", "echo boom; exit 4", "echo p3 >> log2"],
        vec!["echo c >> log2"],
    )
    .await;
    assert_eq!(done.steps.len(), 2);
    assert!(done.checks.is_empty());
    assert_eq!(fs::read_to_string(dir.path().join("log2")).unwrap(), "p1\n");
    let why = done.prepared().failure().unwrap();
    assert!(
        why.contains("`echo boom; exit 4` ended with exit 4"),
        "{why}"
    );
    assert!(why.contains("boom"), "{why}");
}

#[tokio::test]
async fn replays_in_a_copy_without_untracked_leftovers_of_autocode() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    fs::write(ws.join("ok.sh"), "exit 0\n").unwrap();
    fs::create_dir_all(ws.join(".autocode")).unwrap();
    fs::write(ws.join(".autocode/marker"), "x").unwrap();
    let commands = vec![
        "sh ok.sh".to_owned(),
        "test -e .autocode/marker".to_owned(),
        "echo boom >&2; exit 7".to_owned(),
    ];
    let results = replay_checks(
        ws,
        &commands,
        &env(),
        Duration::from_secs(30),
        ReplayConfinement::Unconfined,
    )
    .await
    .unwrap();
    assert!(results[0].passed());
    assert!(!results[1].passed(), "the copy must not contain .autocode/");
    assert_eq!(results[2].exit, Exit::Code(7));
    assert!(results[2].output_tail.contains("boom"));
}

#[tokio::test]
async fn a_copy_with_an_escaping_symlink_or_a_fifo_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("real.py"), "ok\n").unwrap();
    for (name, target) in [
        ("abs.py", outside.path().join("real.py")),
        ("up.py", Path::new("../elsewhere/real.py").to_owned()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("keep.txt"), "x").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(name)).unwrap();
        let err = replay_checks(
            dir.path(),
            &["true".to_owned()],
            &env(),
            Duration::from_secs(30),
            ReplayConfinement::Unconfined,
        )
        .await
        .unwrap_err();
        match err {
            ReplayError::NotClosed { paths } => {
                assert!(paths[0].contains(name), "{paths:?}")
            }
            other => panic!("{other}"),
        }
    }
    // The same link already in the base tree is left out of the copy without failing.
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path().join("real.py"), dir.path().join("old.py")).unwrap();
    let mut base = tempfile::tempdir().unwrap().path().to_owned();
    base.push("base");
    let saved = save_tree(dir.path(), &base, &env()).await.unwrap();
    assert_eq!(saved.unclosed.len(), 1);
    let results = replay_checks_restoring(
        dir.path(),
        Restore::default(),
        &saved.unclosed,
        &[],
        &["test ! -e old.py".to_owned()],
        &env(),
        Duration::from_secs(30),
        ReplayConfinement::Unconfined,
    )
    .await
    .unwrap()
    .checks;
    assert!(results[0].passed(), "the link is not in the copy");
    let dir = tempfile::tempdir().unwrap();
    nix::unistd::mkfifo(&dir.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let err = replay_checks(
        dir.path(),
        &["true".to_owned()],
        &env(),
        Duration::from_secs(30),
        ReplayConfinement::Unconfined,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("`pipe` is a FIFO"), "{err}");
}

#[tokio::test]
async fn relative_links_inside_the_tree_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("lib")).unwrap();
    fs::write(dir.path().join("lib/real.txt"), "hello\n").unwrap();
    std::os::unix::fs::symlink("lib/real.txt", dir.path().join("link.txt")).unwrap();
    std::os::unix::fs::symlink("../link.txt", dir.path().join("lib/back.txt")).unwrap();
    let results = replay_checks(
        dir.path(),
        &["grep -q hello link.txt && grep -q hello lib/back.txt && test -L link.txt".to_owned()],
        &env(),
        Duration::from_secs(30),
        ReplayConfinement::Unconfined,
    )
    .await
    .unwrap();
    assert!(results[0].passed(), "{}", results[0].output_tail);
    assert!(stays_inside("a/b.txt", Path::new("../c.txt")));
    assert!(!stays_inside("a/b.txt", Path::new("../../c.txt")));
    assert!(!stays_inside("b.txt", Path::new("/etc/passwd")));
    assert!(!stays_inside("a/b.txt", Path::new("x/../../../c")));
}

#[tokio::test]
async fn restored_files_replace_the_copy() {
    let work = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    fs::write(work.path().join("t.sh"), "exit 0\n").unwrap();
    fs::write(base.path().join("t.sh"), "exit 3\n").unwrap();
    let files = vec!["t.sh".to_owned()];
    let results = replay_checks_restoring(
        work.path(),
        Restore {
            from: Some(base.path()),
            files: &files,
            stand_ins: false,
        },
        &[],
        &[],
        &["sh t.sh".to_owned()],
        &env(),
        Duration::from_secs(30),
        ReplayConfinement::Unconfined,
    )
    .await
    .unwrap()
    .checks;
    assert_eq!(results[0].exit, Exit::Code(3));
}

/// Outside git the witness's copy has the base code files back, with a stand-in for each
/// function the result adds (`verify::standins`): a check naming it passes there, one calling
/// it fails; a file the work added comes back as its stand-ins alone.
#[tokio::test]
async fn the_witness_copy_has_the_added_names_standing_in() {
    let work = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    fs::write(
        base.path().join("m.py"),
        "def shout(s):\n    return s.upper()\n",
    )
    .unwrap();
    fs::write(
        work.path().join("m.py"),
        "def shout(s):\n    return s.upper()\n\n\ndef title(s):\n    return s.title()\n",
    )
    .unwrap();
    fs::write(
        work.path().join("n.py"),
        "def slug(s):\n    return s.lower()\n",
    )
    .unwrap();
    let files = vec!["m.py".to_owned(), "n.py".to_owned()];
    let checks = [
        "python3 -c 'from m import shout, title; from n import slug; assert callable(title) and callable(slug) and shout(\"a\") == \"A\"'",
        "python3 -c 'from m import title; title(\"a\")'",
        "python3 -c 'from n import slug; slug(\"A\")'",
    ]
    .map(str::to_owned);
    let results = replay_checks_restoring(
        work.path(),
        Restore {
            from: Some(base.path()),
            files: &files,
            stand_ins: true,
        },
        &[],
        &[],
        &checks,
        &env(),
        Duration::from_secs(30),
        ReplayConfinement::Unconfined,
    )
    .await
    .unwrap()
    .checks;
    assert!(results[0].passed(), "{}", results[0].output_tail);
    for failed in &results[1..] {
        assert!(!failed.passed(), "{}", failed.output_tail);
        assert!(
            failed.output_tail.contains("AutocodeStandIn"),
            "{}",
            failed.output_tail
        );
    }
}

/// A check that rewrites a test file of the tree while it runs shows nothing, even when it
/// exits 0, and so does every check after it in the batch (the tests it runs are the
/// rewritten ones); one that only reads the tests, or writes files the tree does not hold,
/// passes.
#[tokio::test]
async fn a_check_that_rewrites_a_test_of_the_tree_shows_nothing() {
    let work = tempfile::tempdir().unwrap();
    fs::create_dir_all(work.path().join("tests")).unwrap();
    fs::write(work.path().join("tests/test_a.sh"), "exit 1\n").unwrap();
    let rewrite = "echo 'exit 0' > tests/test_a.sh && sh tests/test_a.sh".to_owned();
    let honest = "mkdir -p tests/out && echo ok > tests/out/log && cat tests/test_a.sh".to_owned();
    let results = replay_checks(
        work.path(),
        &[rewrite, honest.clone()],
        &env(),
        Duration::from_secs(30),
        ReplayConfinement::Unconfined,
    )
    .await
    .unwrap();
    assert_eq!(results[0].exit, Exit::Code(0));
    assert_eq!(
        results[0].tests,
        crate::verify::testcount::TestTally::TestsRewritten
    );
    assert!(results[0].output_tail.contains("tests/test_a.sh"));
    assert_eq!(results[1].exit, Exit::Code(0));
    assert!(results[1].tests.shows_nothing(), "{:?}", results[1]);
    let results = replay_checks(
        work.path(),
        &[honest],
        &env(),
        Duration::from_secs(30),
        ReplayConfinement::Unconfined,
    )
    .await
    .unwrap();
    assert_eq!(results[0].exit, Exit::Code(0));
    assert!(!results[0].tests.shows_nothing(), "{:?}", results[0]);
}

#[test]
fn tails_respect_char_boundaries() {
    assert_eq!(tail("abc", 5), "abc");
    assert_eq!(tail("ééé", 3), "…é");
}

#[test]
fn the_trees_own_environments_come_after_every_other_path_entry() {
    let tree = Path::new("/v/tree");
    assert_eq!(
        local_bins(tree, &TreeFiles::Listed(vec!["src/a.py".into()])),
        [
            "/v/tree/.venv/bin",
            "/v/tree/venv/bin",
            "/v/tree/node_modules/.bin"
        ]
    );
    // What the tree holds was not made by a `prepare` step: a committed `.venv/bin/pytest` is
    // never looked up.
    let held = TreeFiles::Listed(vec![".venv/bin/pytest".into(), "node_modules.txt".into()]);
    assert_eq!(
        local_bins(tree, &held),
        ["/v/tree/venv/bin", "/v/tree/node_modules/.bin"]
    );
    assert!(local_bins(Path::new("/v/a:b"), &held).is_empty());
    let on_disk = tempfile::tempdir().unwrap();
    fs::create_dir(on_disk.path().join("node_modules")).unwrap();
    let bins = local_bins(on_disk.path(), &TreeFiles::OnDisk);
    assert_eq!(bins.len(), 2);
    assert!(bins.iter().all(|b| !b.contains("node_modules")));
}

#[tokio::test]
async fn a_check_finds_what_prepare_installed_in_the_trees_environment() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run_batch_in(
        dir.path(),
        Restore::default(),
        &[PrepareStep::new(
            "mkdir -p .venv/bin && printf '#!/bin/sh\\necho venv-tool ran\\n' > .venv/bin/venv-tool && chmod +x .venv/bin/venv-tool",
        )],
        &["venv-tool".into(), "command -v sh | grep -v '\\.venv'".into()],
        &env(),
        Duration::from_secs(30),
        ReplayConfinement::Unconfined,
        None,
        TreeFiles::OnDisk,
    )
    .await
    .unwrap();
    assert!(ran.checks.iter().all(|c| c.passed()), "{:?}", ran.checks);
    assert!(ran.checks[0].output_tail.contains("venv-tool ran"));
}
