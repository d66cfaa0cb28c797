//! Tests of `run::confine`.

use super::*;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn the_state_key_directory_follows_xdg() {
    assert_eq!(
        state_key_dir(&env(&[("HOME", "/h"), ("XDG_STATE_HOME", "/s")])),
        Some(PathBuf::from("/s/autocode"))
    );
    assert_eq!(
        state_key_dir(&env(&[("HOME", "/h"), ("XDG_STATE_HOME", "rel")])),
        Some(PathBuf::from("/h/.local/state/autocode"))
    );
    assert_eq!(state_key_dir(&env(&[])), None);
}

fn input<'a>(
    role: Role,
    ws: &'a Path,
    isolation: &'a Isolation,
    cwd: &'a Path,
    templates: &'a [String],
    env: &'a BTreeMap<String, String>,
) -> StageRoomInput<'a> {
    StageRoomInput {
        role,
        work_tree: ws,
        isolation,
        cwd,
        tmpdir: Path::new("/tmp/stage"),
        outbox: Path::new("/run/outbox"),
        overlay: None,
        provider_templates: templates,
        allow_connect: &[],
        env,
        workspace: ws,
        layers: Vec::new(),
    }
}

#[test]
fn each_role_gets_its_room() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("wt");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join(".git"), "gitdir: /repo/.git/worktrees/x\n").unwrap();
    let e = env(&[("HOME", "/h")]);
    let templates = vec!["~/.tool/".to_owned(), "$UNSET".to_owned()];
    let wt = Isolation::Worktree {
        path: ws.clone(),
        branch: "b".into(),
    };
    let (room, record) = stage_room(&input(Role::Builder, &ws, &wt, &ws, &templates, &e), true);
    let room = room.unwrap();
    assert_eq!(
        room.writable,
        vec![
            ws.clone(),
            PathBuf::from("/tmp/stage"),
            PathBuf::from("/run/outbox"),
            PathBuf::from("/h/.tool")
        ]
    );
    assert_eq!(
        room.unreadable[0],
        PathBuf::from("/h/.local/state/autocode")
    );
    assert_eq!(record.provider_writable.len(), 2);
    let (room, _) = stage_room(&input(Role::Planner, &ws, &wt, &ws, &templates, &e), true);
    assert!(
        !room.unwrap().writable.contains(&ws),
        "read-only roles get no worktree"
    );
    let copy = dir.path().join("copy");
    let (room, record) = stage_room(&input(Role::Tester, &ws, &wt, &copy, &templates, &e), true);
    let room = room.unwrap();
    assert!(room.writable.contains(&copy) && !room.writable.contains(&ws));
    assert_eq!(record.worktree_access, WorktreeAccess::Copy);
    let (room, record) = stage_room(&input(Role::Builder, &ws, &wt, &ws, &templates, &e), false);
    assert!(room.is_none() && !record.confined && record.writable.is_empty());
}

#[test]
fn an_in_place_builder_gets_the_workspace_but_not_its_git_or_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    for d in [".git", ".autocode", "src"] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    let e = env(&[]);
    let (room, record) = stage_room(
        &input(Role::Builder, ws, &Isolation::InPlace, ws, &[], &e),
        true,
    );
    let room = room.unwrap();
    assert!(room.writable.contains(&ws.to_owned()));
    assert!(
        room.writable.contains(&ws.join(EVIDENCE_DIR)),
        "capture receipts"
    );
    assert!(ws.join(EVIDENCE_DIR).is_dir());
    assert_eq!(room.read_only, vec![ws.join(".git"), ws.join(".autocode")]);
    assert_eq!(record.read_only, room.read_only);
    let wt = Isolation::Worktree {
        path: ws.to_owned(),
        branch: "b".into(),
    };
    let (room, _) = stage_room(&input(Role::Builder, ws, &wt, ws, &[], &e), true);
    assert!(room.unwrap().read_only.is_empty());
}

#[test]
fn a_builders_git_writes_go_to_layers_over_the_worktrees_metadata_and_objects() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let meta = repo.join(".git/worktrees/run-1");
    std::fs::create_dir_all(&meta).unwrap();
    std::fs::create_dir_all(repo.join(".git/objects")).unwrap();
    std::fs::write(meta.join("commondir"), "../..\n").unwrap();
    let wt = repo.join(".autocode/worktrees/run-1");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", meta.display())).unwrap();
    let worktree = Isolation::Worktree {
        path: wt.clone(),
        branch: "b".into(),
    };
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap();
    assert_eq!(
        git_scratch_dirs(&wt, &worktree),
        [canonical(&meta), canonical(&repo.join(".git/objects"))]
    );
    // In place: the work tree's own `.git`; a layer over it replaces its read-only hole.
    std::fs::create_dir_all(repo.join(".autocode")).unwrap();
    assert_eq!(
        git_scratch_dirs(&repo, &Isolation::InPlace),
        [canonical(&repo.join(".git"))]
    );
    let e = env(&[]);
    let mut with_layer = input(Role::Builder, &repo, &Isolation::InPlace, &repo, &[], &e);
    with_layer.layers = vec![crate::supervise::Overlay {
        dir: canonical(&repo.join(".git")),
        lower: canonical(&repo.join(".git")),
        upper: dir.path().join("upper"),
        work: dir.path().join("work"),
    }];
    let (room, _) = stage_room(&with_layer, true);
    assert_eq!(room.unwrap().read_only, vec![repo.join(".autocode")]);
    // Not a git work tree: nothing to layer.
    assert!(git_scratch_dirs(dir.path(), &worktree).is_empty());
}

#[test]
fn a_planted_git_entry_is_quarantined_and_the_link_put_back() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let quarantine = dir.path().join("stage/quarantine");
    // A workspace without git: a repository the builder creates is moved away.
    let before = GitLink::read(&ws);
    assert_eq!(before.restore_after(&ws, Role::Builder, &quarantine), None);
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/hooks/post-checkout"), "evil").unwrap();
    let why = before
        .restore_after(&ws, Role::Builder, &quarantine)
        .unwrap();
    assert!(why.contains("moved to"), "{why}");
    assert!(!ws.join(".git").exists());
    assert!(quarantine.join("dot-git/hooks/post-checkout").exists());
    // A worktree's link rewritten to a planted repository: the link comes back.
    std::fs::write(ws.join(".git"), "gitdir: /repo/.git/worktrees/x\n").unwrap();
    let before = GitLink::read(&ws);
    std::fs::write(ws.join(".git"), "gitdir: planted\n").unwrap();
    let quarantine = dir.path().join("stage2/quarantine");
    assert!(
        before
            .restore_after(&ws, Role::Builder, &quarantine)
            .is_some()
    );
    assert_eq!(GitLink::read(&ws), before);
    assert_eq!(
        std::fs::read_to_string(quarantine.join("dot-git")).unwrap(),
        "gitdir: planted\n"
    );
}

#[test]
fn a_writable_entry_is_checked_after_expansion() {
    let scratch = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(scratch.path()).unwrap();
    let home = root.join("home");
    let ws = root.join("ws");
    for dir in [".ssh", ".tool", ".config/autocode", ".local/state/autocode"] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::os::unix::fs::symlink(&home, root.join("home-link")).unwrap();
    std::os::unix::fs::symlink(home.join(".ssh"), home.join(".tool/keys")).unwrap();
    let e = env(&[("HOME", home.to_str().unwrap())]);
    let refused = |path: &Path| refused_grant(path, &e, Some(&ws));
    for path in [
        Path::new("/"),
        root.as_path(),
        &home,
        &root.join("home-link"),
        &home.join(".ssh"),
        &home.join(".tool/keys"),
        &home.join(".config/autocode"),
        &home.join(".config"),
        &home.join(".local/state/autocode/key"),
        &ws.join(".git"),
        &ws.join(".autocode/runs"),
        &ws,
    ] {
        assert!(refused(path).is_some(), "{} was granted", path.display());
    }
    assert!(refused(&home.join(".tool")).is_none());
    assert!(refused(&root.join("elsewhere")).is_none());
    let why = refused(&root.join("home-link")).unwrap();
    assert!(why.contains("through a symlink"), "{why}");
    // Expansion first: `${NOPE:-/}` is the root.
    let entries = provider_writable_in(&["${NOPE:-/}".to_owned()], &e, Some(&ws));
    assert!(entries[0].refused.is_some() && entries[0].granted().is_none());
}

#[test]
fn git_links_are_compared() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(GitLink::read(dir.path()), GitLink::Absent);
    std::fs::write(dir.path().join(".git"), "gitdir: a").unwrap();
    let before = GitLink::read(dir.path());
    std::fs::write(dir.path().join(".git"), "gitdir: b").unwrap();
    assert_ne!(before, GitLink::read(dir.path()));
}
