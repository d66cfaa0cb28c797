//! Tests of `run::integrity`.
use super::*;

#[test]
fn key_dir_follows_xdg_state_home_only_when_absolute() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    };
    assert_eq!(
        key_dir_from(env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])).unwrap(),
        PathBuf::from("/s/autocode")
    );
    assert_eq!(
        key_dir_from(env(&[("XDG_STATE_HOME", "rel"), ("HOME", "/h")])).unwrap(),
        PathBuf::from("/h/.local/state/autocode")
    );
    assert!(matches!(key_dir_from(env(&[])), Err(KeyError::NoHome)));
}

#[test]
fn the_key_is_created_0600_in_a_0700_dir_and_then_reused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("state/autocode");
    let key = load_or_create_key(&dir).unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(KEY_FILE)), 0o600);
    assert_eq!(fs::metadata(dir.join(KEY_FILE)).unwrap().len(), 32);
    assert_eq!(load_or_create_key(&dir).unwrap(), key);
    // Nothing but the key is left behind.
    let names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![OsString::from(KEY_FILE)]);
}

#[test]
fn an_exposed_or_short_key_is_refused_and_an_open_dir_is_closed() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("autocode");
    load_or_create_key(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    let key = dir.join(KEY_FILE);
    fs::set_permissions(&key, fs::Permissions::from_mode(0o644)).unwrap();
    assert!(matches!(
        load_or_create_key(&dir),
        Err(KeyError::Exposed { .. })
    ));
    assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(&key, b"short").unwrap();
    assert!(matches!(
        load_or_create_key(&dir),
        Err(KeyError::WrongLength { len: 5, .. })
    ));
    fs::remove_file(&key).unwrap();
    std::os::unix::fs::symlink("/dev/null", &key).unwrap();
    assert!(matches!(
        load_or_create_key(&dir),
        Err(KeyError::WrongKind { .. })
    ));
}

#[test]
fn concurrent_creators_end_with_one_key() {
    for _ in 0..20 {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("autocode");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let keys: Vec<TagKey> = (0..8)
            .map(|_| {
                let dir = dir.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    load_or_create_key(&dir).unwrap()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        assert!(keys.windows(2).all(|w| w[0] == w[1]));
        let on_disk = read_key(&dir.join(KEY_FILE)).unwrap().unwrap();
        assert_eq!(keys[0], on_disk);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
    }
}

#[test]
fn a_key_dir_not_yet_created_resolves_through_its_existing_ancestors() {
    let root = tempfile::tempdir().unwrap();
    let real = fs::canonicalize(root.path()).unwrap();
    std::os::unix::fs::symlink(&real, real.join("link")).unwrap();
    assert_eq!(
        resolved(&real.join("link/state/autocode")),
        real.join("state/autocode")
    );
    assert!(resolved(&real.join("link/state")).starts_with(&real));
}

#[test]
fn contexts_name_the_place_below_the_runs_dir() {
    assert_eq!(
        context_for(Path::new("/w/.autocode/runs/r1/run.json")),
        "r1/run.json"
    );
    assert_eq!(
        context_for(Path::new(
            "/w/.autocode/runs/r1/stages/004-builder-1/report.json"
        )),
        "r1/stages/004-builder-1/report.json"
    );
    assert_eq!(
        context_for(Path::new("/tmp/x/receipt.json")),
        "receipt.json"
    );
}
