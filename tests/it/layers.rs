//! The room's private copy-on-write layers with real processes (`docs/run-lifecycle.md`,
//! "Private layers of HOME and /tmp"): a confined family writes HOME and `/tmp` as a toolchain
//! does (a fetched crate, a cache, a stray temporary file), every write lands in its layer and
//! none in the user's files; a kept layer shows the next launch what the last one wrote, a
//! throwaway one does not; writable paths beneath HOME stay real; hidden paths show nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_autocode");

struct Places {
    _scratch: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    layer: PathBuf,
}

fn places() -> Places {
    let scratch = tempfile::tempdir().expect("scratch");
    let root = std::fs::canonicalize(scratch.path()).expect("canonical");
    let home = root.join("home");
    let ws = root.join("ws");
    std::fs::create_dir_all(home.join(".config/autocode/direct")).expect("home");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(home.join(".gitconfig"), "[user]\n\tname = someone\n").expect("gitconfig");
    std::fs::write(
        home.join(".config/autocode/direct/auth.json"),
        "{\"key\":\"sk-secret\"}",
    )
    .expect("secret");
    Places {
        home,
        ws,
        layer: root.join("layer"),
        _scratch: scratch,
    }
}

/// `autocode supervise` confined in `places.ws` with HOME at `places.home`, running `script`.
fn supervised(places: &Places, extra: &[&str], script: &str) -> Output {
    Command::new(BIN)
        .arg("supervise")
        .arg("--confine")
        .args(extra)
        .args(["--", "sh", "-c", script])
        .env("HOME", &places.home)
        .current_dir(&places.ws)
        .output()
        .expect("autocode supervise")
}

/// Every file beneath `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(dir).expect("beneath").to_owned());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn writes_to_home_and_tmp_land_in_the_layers_and_never_in_the_users_files() {
    let places = places();
    let home_before = files(&places.home);
    let stray = format!("/tmp/autocode-layer-test-{}", std::process::id());
    let layer = places.layer.to_str().expect("utf-8").to_owned();
    let first = supervised(
        &places,
        &["--home-layer", &layer],
        &format!(
            "set -e; mkdir -p ~/.cargo/registry/cache/index && echo crate > ~/.cargo/registry/cache/index/dep-1.0.0.crate; \
             echo cache >> ~/.gitconfig; echo stray > {stray}; cat {stray}; echo built > out.txt; \
             grep -q someone ~/.gitconfig"
        ),
    );
    assert!(first.status.success(), "{first:?}");
    // The user's HOME and /tmp are as they were; the work tree got its file.
    assert_eq!(files(&places.home), home_before);
    assert_eq!(
        std::fs::read_to_string(places.home.join(".gitconfig")).expect("gitconfig"),
        "[user]\n\tname = someone\n"
    );
    assert!(!Path::new(&stray).exists(), "{stray} reached the real /tmp");
    assert_eq!(
        std::fs::read_to_string(places.ws.join("out.txt")).expect("out"),
        "built\n"
    );
    assert!(
        places
            .layer
            .join("upper/.cargo/registry/cache/index/dep-1.0.0.crate")
            .is_file()
    );
    // A kept layer shows the next launch what the last one fetched; a throwaway one does not.
    let again = supervised(
        &places,
        &["--home-layer", &layer],
        "cat ~/.cargo/registry/cache/index/dep-1.0.0.crate",
    );
    assert!(again.status.success(), "{again:?}");
    assert_eq!(String::from_utf8_lossy(&again.stdout), "crate\n");
    let fresh = supervised(&places, &[], "test ! -e ~/.cargo/registry");
    assert!(fresh.status.success(), "{fresh:?}");
}

#[test]
fn writable_paths_beneath_home_stay_real_and_hidden_ones_show_nothing() {
    let places = places();
    let project = places.home.join("src/project");
    std::fs::create_dir_all(&project).expect("project");
    let secrets = places.home.join(".config/autocode");
    let output = Command::new(BIN)
        .args(["supervise", "--writable"])
        .arg(&project)
        .arg("--unreadable")
        .arg(&secrets)
        .args([
            "--",
            "sh",
            "-c",
            "echo real > out.txt && echo layered > ~/in-layer.txt && \
             if cat ~/.config/autocode/direct/auth.json; then echo READ-THE-KEY; fi; \
             ls -A ~/.config/autocode | wc -l",
        ])
        .env("HOME", &places.home)
        .current_dir(&project)
        .output()
        .expect("autocode supervise");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(project.join("out.txt")).expect("out"),
        "real\n",
        "a writable path beneath HOME is the real one"
    );
    assert!(!places.home.join("in-layer.txt").exists());
    assert!(!stdout.contains("READ-THE-KEY"), "{stdout}");
    assert_eq!(
        stdout.trim(),
        "0",
        "autocode's directory shows empty: {stdout}"
    );
}

#[test]
fn the_layers_hold_for_an_ordinary_user() {
    let root = nix::unistd::geteuid().is_root();
    let places = places();
    if root {
        // The scratch folder becomes the ordinary user's, as a HOME and a project would be.
        for dir in [
            places.home.parent().expect("scratch"),
            &places.home,
            &places.ws,
        ] {
            let status = Command::new("chown")
                .args(["-R", "65534:65534"])
                .arg(dir)
                .status()
                .expect("chown");
            assert!(status.success());
        }
    }
    let stray = format!("/tmp/autocode-layer-test-user-{}", std::process::id());
    let output = super::room::autocode_as_ordinary_user(root)
        .args(["supervise", "--confine", "--", "sh", "-c"])
        .arg(format!(
            "set -e; mkdir -p ~/.npm/_cacache && echo entry > ~/.npm/_cacache/index; echo stray > {stray}; \
             echo built > out.txt; cat ~/.npm/_cacache/index"
        ))
        .env("HOME", &places.home)
        .current_dir(&places.ws)
        .output()
        .expect("autocode supervise as an ordinary user");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "entry\n");
    assert!(!places.home.join(".npm").exists(), "{output:?}");
    assert!(!Path::new(&stray).exists());
    assert_eq!(
        std::fs::read_to_string(places.ws.join("out.txt")).expect("out"),
        "built\n"
    );
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("private-views"),
        "{output:?}"
    );
}
