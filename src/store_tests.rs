//! Tests of `store`.
use super::*;
use serde::Deserialize;

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Doc {
    format_version: u64,
    name: String,
}

/// A workspace whose `.autocode/` (or something in it) a cloned repository planted as a
/// link to `outside`.
fn planted(link_at: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    fs::create_dir_all(&ws).unwrap();
    fs::create_dir_all(&outside).unwrap();
    let link = ws.join(link_at);
    fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(outside.join("target"), &link).unwrap();
    (dir, ws, outside)
}

fn refused_naming(result: Result<impl std::fmt::Debug, StoreError>, link: &Path) {
    match result {
        Err(StoreError::Link { path }) => assert_eq!(path, link),
        other => panic!("expected a refused link at {}: {other:?}", link.display()),
    }
}

#[test]
fn nothing_below_autocode_is_followed_through_a_planted_link() {
    // The lock file itself a link (the in-place lock, a run's lock).
    let (_d, ws, outside) = planted(".autocode/in-place.lock");
    let lock = ws.join(".autocode/in-place.lock");
    refused_naming(RunLock::acquire(&lock), &lock);
    refused_naming(append_json_line(&lock, &1), &lock);
    refused_naming(write_json(&lock, &1), &lock);
    // Even a read: the link's target (made now) is never read through it.
    fs::write(outside.join("target"), "7").unwrap();
    let read = read_json::<u64>(&lock).unwrap_err().to_string();
    assert!(read.contains("symbolic link"), "{read}");
    fs::remove_file(outside.join("target")).unwrap();
    assert!(!outside.join("target").exists(), "nothing made outside");
    // `.autocode` a link: nothing is created through it.
    let (_d, ws, outside) = planted(".autocode");
    let dot = ws.join(".autocode");
    refused_naming(RunLock::acquire(&dot.join("runs/r1/lock")), &dot);
    refused_naming(write_json(&dot.join("runs/r1/run.json"), &1), &dot);
    refused_naming(create_owned_dir(&dot.join("worktrees")), &dot);
    // A directory further down a link.
    let (_d, ws, outside2) = planted(".autocode/runs");
    let runs = ws.join(".autocode/runs");
    refused_naming(RunLock::acquire(&runs.join("r1/lock")), &runs);
    refused_naming(write_private(&runs.join("r1/key"), b"k"), &runs);
    for dir in [outside, outside2] {
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0, "{}", dir.display());
    }
    // Real directories work, and a link above `.autocode` (the user's own path) is followed.
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join("via")).unwrap();
    let lock = dir.path().join("via/.autocode/runs/r1/lock");
    let held = RunLock::acquire(&lock).unwrap();
    write_json(&dir.path().join("via/.autocode/runs/r1/run.json"), &1).unwrap();
    assert!(real.join(".autocode/runs/r1/run.json").is_file());
    drop(held);
}

#[test]
fn a_private_write_replaces_whole_with_mode_0600_and_leaves_no_temporary() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secret.json");
    fs::write(&path, b"old, world-readable").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    // Threads writing the same path at once each rename a whole file of their own.
    std::thread::scope(|scope| {
        for n in 0..8u8 {
            let path = &path;
            scope.spawn(move || write_private(path, &[b'a' + n; 4096]).unwrap());
        }
    });
    let bytes = fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 4096);
    assert!(bytes.iter().all(|b| *b == bytes[0]), "one writer's bytes");
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn an_atomic_write_to_what_is_not_a_regular_file_writes_into_it() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read(fifo).unwrap())
    };
    write_atomic(&fifo, b"data\n").unwrap();
    assert_eq!(reader.join().unwrap(), b"data\n");
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn atomic_write_replaces_and_leaves_no_temp() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/run.json");
    write_json(
        &path,
        &Doc {
            format_version: 1,
            name: "a".into(),
        },
    )
    .unwrap();
    write_json(
        &path,
        &Doc {
            format_version: 1,
            name: "b".into(),
        },
    )
    .unwrap();
    let doc: Doc = read_versioned_json(&path, 1).unwrap();
    assert_eq!(doc.name, "b");
    let names: Vec<_> = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("run.json")]);
}

#[test]
fn version_is_checked_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    write_json(
        &path,
        &Doc {
            format_version: 7,
            name: "x".into(),
        },
    )
    .unwrap();
    let err = read_versioned_json::<Doc>(&path, 1).unwrap_err();
    assert!(matches!(
        err,
        StoreError::Version {
            found: 7,
            expected: 1,
            ..
        }
    ));
    fs::write(&path, b"{ torn").unwrap();
    assert!(matches!(
        read_json::<Doc>(&path),
        Err(StoreError::Parse { .. })
    ));
}

#[test]
fn appends_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("activity.jsonl");
    append_json_line(&path, &serde_json::json!({"n": 1})).unwrap();
    append_json_line(&path, &serde_json::json!({"n": 2})).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "{\"n\":1}\n{\"n\":2}\n");
}

#[test]
fn a_second_lock_is_refused_until_the_first_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lock");
    let first = RunLock::acquire(&path).unwrap();
    assert!(matches!(
        RunLock::acquire(&path),
        Err(StoreError::Busy { .. })
    ));
    drop(first);
    RunLock::acquire(&path).unwrap();
}

fn key(byte: u8) -> TagKey {
    TagKey::from_bytes([byte; 32])
}

#[test]
fn a_tagged_document_reads_back_and_stays_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let doc = Doc {
        format_version: 1,
        name: "a \"quoted\" }\n name".into(),
    };
    write_tagged_json(&path, &doc, &key(1), "r/run.json").unwrap();
    let back: Doc = read_tagged_versioned_json(&path, 1, &key(1), "r/run.json").unwrap();
    assert_eq!(back, doc);
    // Still one JSON document anyone can read; the tag is its last member.
    let text = fs::read_to_string(&path).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let tag = value["integrity"].as_str().unwrap();
    assert!(
        tag.starts_with("hmac-sha256:") && tag.len() == 12 + 64,
        "{tag}"
    );
    assert!(text.ends_with("\"\n}\n"), "{text}");
}

#[test]
fn changing_any_single_byte_breaks_the_tag() {
    let doc = serde_json::to_vec_pretty(&serde_json::json!({"phase": "build", "n": 1})).unwrap();
    let sealed = seal(&key(2), "ctx", &doc).unwrap();
    assert!(unseal(&key(2), "ctx", &sealed).is_ok());
    for i in 0..sealed.len() {
        for flip in [0x01u8, 0x20, 0x80] {
            let mut bad = sealed.clone();
            bad[i] ^= flip;
            assert!(
                unseal(&key(2), "ctx", &bad).is_err(),
                "byte {i} ^ {flip:#x} still verifies"
            );
        }
    }
    // Another key, another context, a stripped tag.
    assert_eq!(unseal(&key(3), "ctx", &sealed), Err(TagProblem::Mismatch));
    assert_eq!(unseal(&key(2), "other", &sealed), Err(TagProblem::Mismatch));
    assert_eq!(unseal(&key(2), "ctx", &doc), Err(TagProblem::Untagged));
    let mut appended = sealed.clone();
    appended.extend_from_slice(b" ");
    assert_eq!(unseal(&key(2), "ctx", &appended), Err(TagProblem::Mismatch));
    // Re-serialized by something else, with the old tag kept: changed, not untagged.
    let value: serde_json::Value = serde_json::from_slice(&sealed).unwrap();
    let reserialized = serde_json::to_vec(&value).unwrap();
    assert_eq!(
        unseal(&key(2), "ctx", &reserialized),
        Err(TagProblem::Mismatch)
    );
}

#[test]
fn only_non_empty_objects_are_sealed() {
    assert!(seal(&key(1), "c", b"{}").is_none());
    assert!(seal(&key(1), "c", b"[1]").is_none());
    assert!(seal(&key(1), "c", b"\"x\"").is_none());
    assert!(seal(&key(1), "c", b"{\"a\":1}").is_some());
}

#[test]
fn a_rewritten_document_is_refused_and_an_untagged_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let doc = Doc {
        format_version: 1,
        name: "building".into(),
    };
    write_tagged_json(&path, &doc, &key(1), "c").unwrap();
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, text.replace("building", "complete")).unwrap();
    assert!(matches!(
        read_tagged_json::<Doc>(&path, &key(1), "c"),
        Err(StoreError::TagMismatch { .. })
    ));
    write_json(&path, &doc).unwrap();
    assert!(matches!(
        read_tagged_json::<Doc>(&path, &key(1), "c"),
        Err(StoreError::Untagged { .. })
    ));
    assert_eq!(format!("{:?}", key(9)), "TagKey(..)");
}
