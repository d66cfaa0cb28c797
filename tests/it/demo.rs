//! `autocode demo` end to end: the whole pipeline, requirements to COMPLETE, through the real
//! pinned CLIs against the scripted model. Missing CLIs fail with the install command.

use std::path::Path;
use std::process::Command;

fn demo(cli: &str) -> serde_json::Value {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clis/node_modules/.bin")
        .join(cli);
    assert!(
        bin.exists(),
        "{} is missing: install the pinned CLIs with `npm ci --prefix tests/clis`",
        bin.display()
    );
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_autocode"))
        .args(["demo", "--provider", cli, "--json", "--clis-dir"])
        .arg(bin.parent().unwrap())
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "demo with {cli} did not complete:\n{stderr}"
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["outcome"], "complete", "{summary}");
    assert_eq!(summary["stages"], 6, "{summary}");
    assert!(stderr.contains("evidence 004-builder-1"), "{stderr}");
    // The stage table is printed once, and the temporary workspace is named with its removal.
    let table_rows = stderr
        .lines()
        .filter(|l| l.trim_start().starts_with("004-builder-1"))
        .count();
    assert_eq!(table_rows, 1, "{stderr}");
    assert!(stderr.contains("remove them with: rm -rf "), "{stderr}");
    // It ends as a real run does: what was produced, and what to do next.
    assert!(
        stderr.contains("produced: 1 commit(s) on autocode/") && stderr.contains("hello.txt"),
        "{stderr}"
    );
    assert!(
        stderr.contains("next: in a git repository of yours"),
        "{stderr}"
    );
    // The CLI's path and version are named.
    assert!(
        stderr.contains(&format!("autocode demo: {}", bin.display())),
        "{stderr}"
    );
    // Every stage's family was proven gone, and the tester's check was verified as evidence.
    let run_dir = Path::new(summary["run_dir"].as_str().unwrap());
    for stage in std::fs::read_dir(run_dir.join("stages")).unwrap() {
        let stage = stage.unwrap().path();
        let receipt: serde_json::Value =
            serde_json::from_slice(&std::fs::read(stage.join("supervision.json")).unwrap())
                .unwrap();
        assert_eq!(receipt["verified"], true, "{}", stage.display());
    }
    let evidence: serde_json::Value = serde_json::from_slice(
        &std::fs::read(run_dir.join("stages/005-tester-1/evidence.json")).unwrap(),
    )
    .unwrap();
    assert!(evidence["checks"][0]["problem"].is_null(), "{evidence}");
    // The user's workspace itself was not touched: the work happened in the run's worktree.
    let workspace = run_dir
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap();
    assert!(!workspace.join("hello.txt").exists());
    let work_tree = Path::new(summary["work_tree"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(work_tree.join("hello.txt")).unwrap(),
        "hello, world\n"
    );
    let _ = std::fs::remove_dir_all(workspace.parent().unwrap());
    summary
}

#[test]
fn demo_completes_with_codex() {
    demo("codex");
}

#[test]
fn demo_completes_with_claude() {
    demo("claude");
}

/// The pinned agent CLIs run unchanged under the boundary, and their families are proven gone.
#[test]
fn agent_clis_report_their_versions_under_the_boundary() {
    let bin_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clis/node_modules/.bin");
    let threads: Vec<_> = [
        ("opencode", "1.18.33"),
        ("codex", "0.169.0"),
        ("claude", "2.1.328"),
    ]
    .into_iter()
    .map(|(cli, version)| {
        let bin = bin_dir.join(cli);
        std::thread::spawn(move || {
            assert!(
                bin.exists(),
                "{} is missing: install the pinned CLIs with `npm ci --prefix tests/clis`",
                bin.display()
            );
            let home = tempfile::tempdir().unwrap();
            let out = Command::new(env!("CARGO_BIN_EXE_autocode"))
                .arg("supervise")
                .arg("--json")
                .arg("--")
                .arg(&bin)
                .arg("--version")
                .env("HOME", home.path())
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{cli}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.contains(version), "{cli} printed {stdout}");
            let receipt_start = stdout.find("{\n").or_else(|| stdout.find('{')).unwrap();
            let receipt: serde_json::Value =
                serde_json::from_str(&stdout[receipt_start..]).unwrap();
            assert_eq!(receipt["verified"], true, "{cli}: {receipt}");
        })
    })
    .collect();
    for t in threads {
        t.join().unwrap();
    }
}
