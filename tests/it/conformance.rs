//! `autocode conformance`: the scripted probe and its fault variants through the real CLIs
//! (Codex, Claude Code, OpenCode), a TOML-registered `opencode_events` tool and a `report_file`
//! test tool; the matrix rendering; the command's refusals.
//!
//! The real CLIs come from `tests/clis` (`npm ci --prefix tests/clis`); a missing one FAILS its
//! test with that instruction, never skips. Each test runs the binary in its own throwaway
//! config home, so tests run in parallel.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_autocode");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn require_cli(name: &str) {
    let path = Path::new(ROOT)
        .join("tests/clis/node_modules/.bin")
        .join(name);
    assert!(
        path.exists(),
        "{name} is missing ({}): install the pinned CLIs with `npm ci --prefix tests/clis` \
         (if npm refuses the lock's platform packages: `npm install --prefix tests/clis`)",
        path.display()
    );
}

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    /// A throwaway config home holding the conformance fixtures' provider TOMLs.
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        let providers = dir.path().join("config/autocode/providers");
        std::fs::create_dir_all(&providers).unwrap();
        let fixtures = Path::new(ROOT).join("tests/fixtures/conformance/providers");
        for entry in std::fs::read_dir(fixtures).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), providers.join(entry.file_name())).unwrap();
        }
        Home { dir }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        let path = format!(
            "{}:{}",
            Path::new(ROOT)
                .join("tests/fixtures/conformance/bin")
                .display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.args(args)
            .current_dir(ROOT)
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.dir.path())
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("TMPDIR", self.dir.path());
        cmd
    }

    /// Runs autocode; a scripted conformance gets the pinned CLIs' directory (`--clis-dir`),
    /// as the command only looks on PATH otherwise.
    fn run(&self, args: &[&str]) -> Output {
        let mut args = args.to_vec();
        let pinned = Path::new(ROOT).join("tests/clis/node_modules/.bin");
        let pinned = pinned.display().to_string();
        if args.first() == Some(&"conformance") && args.contains(&"--scripted") {
            args.extend(["--clis-dir", &pinned]);
        }
        self.command(&args).output().unwrap()
    }
}

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stderr\n{}\n--- stdout (head)\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
            .chars()
            .take(4000)
            .collect::<String>()
    )
}

/// Runs a scripted conformance and returns its JSON summary, asserting it passed.
fn passing(home: &Home, args: &[&str]) -> Value {
    let mut full = vec!["conformance", "--scripted", "--json"];
    full.extend_from_slice(args);
    let out = home.run(&full);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["passed"], true, "{}", describe(&out));
    summary
}

fn variant<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["variant"] == name)
        .unwrap_or_else(|| panic!("no variant {name} in {summary}"))
}

fn step_names(v: &Value) -> Vec<String> {
    v["probe"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap().to_owned())
        .collect()
}

/// The clean probe ran every step; every fault was caught by one of its expected problems.
fn assert_full_conformance(summary: &Value, faults: usize) {
    let variants = summary["variants"].as_array().unwrap();
    assert_eq!(variants.len(), faults + 1, "{summary}");
    let clean = variant(summary, "clean");
    assert_eq!(step_names(clean), ["build", "check", "resume"]);
    let sessions: Vec<&Value> = clean["probe"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["session"])
        .collect();
    assert_ne!(sessions[0], sessions[1], "the check is a fresh session");
    assert_eq!(sessions[1], sessions[2], "the resume keeps the session");
    for v in variants {
        assert_eq!(v["passed"], true, "{v}");
        if v["variant"] != "clean" && v["variant"] != "rate_limit_then_success" {
            let named = v["named"].as_array().unwrap();
            let expected = v["expected"].as_array().unwrap();
            assert!(
                named.iter().any(|n| expected.contains(n)),
                "{}: named {named:?}, expected one of {expected:?}",
                v["variant"]
            );
        }
    }
    if let Some(recovered) = variants
        .iter()
        .find(|v| v["variant"] == "rate_limit_then_success")
    {
        assert_eq!(step_names(recovered), ["build", "check", "resume"]);
    }
}

#[test]
fn codex_passes_the_probe_and_catches_every_fault() {
    require_cli("codex");
    let home = Home::new();
    let summary = passing(&home, &["--provider", "codex"]);
    assert_eq!(summary["transport"], "codex_events");
    assert!(
        summary["version"]
            .as_str()
            .unwrap_or_default()
            .contains("0.169.0")
    );
    assert_full_conformance(&summary, 14);
}

#[test]
fn claude_passes_the_probe_and_catches_every_fault() {
    require_cli("claude");
    let home = Home::new();
    let summary = passing(&home, &["--provider", "claude"]);
    assert_eq!(summary["transport"], "claude_events");
    assert_full_conformance(&summary, 14);
    // Claude Code refuses a schema-invalid StructuredOutput itself; that is still a schema
    // problem, not a missing report.
    let malformed = variant(&summary, "malformed_report");
    assert_eq!(malformed["named"], serde_json::json!(["report_schema"]));
}

#[test]
fn opencode_passes_the_probe_and_catches_sampled_faults() {
    // OpenCode takes 5-35 s a stage, so only a sample of the faults runs here; the whole set
    // runs with `autocode conformance --provider opencode --scripted`.
    require_cli("opencode");
    let home = Home::new();
    let summary = passing(
        &home,
        &[
            "--provider",
            "opencode",
            "--fault",
            "clean",
            "--fault",
            "forged_evidence",
            "--fault",
            "unauthorized",
        ],
    );
    assert_eq!(summary["transport"], "opencode_events");
    assert_full_conformance(&summary, 2);
    assert_eq!(
        variant(&summary, "forged_evidence")["named"],
        serde_json::json!(["evidence_forged"])
    );
}

#[test]
fn a_toml_tool_around_opencode_run_passes_the_probe() {
    require_cli("opencode");
    let home = Home::new();
    let summary = passing(&home, &["--provider", "ocwrap", "--clean-only"]);
    assert_eq!(summary["engine"], "ocwrap");
    assert_eq!(summary["transport"], "opencode_events");
    let clean = variant(&summary, "clean");
    assert_eq!(step_names(clean), ["build", "check", "resume"]);
}

#[test]
fn a_report_file_tool_passes_with_capture_receipts_and_is_caught_lying() {
    let home = Home::new();
    let summary = passing(&home, &["--provider", "probetool"]);
    assert_eq!(summary["transport"], "report_file");
    assert_eq!(summary["version"], "probe-tool 1.0.0");
    let variants = summary["variants"].as_array().unwrap();
    assert_eq!(
        variants.len(),
        1,
        "report-file tools get the clean probe only"
    );
    let clean = variant(&summary, "clean");
    assert_eq!(step_names(clean), ["build", "check"]);
    assert!(
        clean["probe"]["notes"][0]
            .as_str()
            .unwrap()
            .contains("keeps no sessions")
    );

    let out = home
        .command(&[
            "conformance",
            "--scripted",
            "--json",
            "--provider",
            "probetool",
        ])
        .env("PROBE_TOOL_FAULT", "wrong_nonce")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["passed"], false);
    assert_eq!(
        variant(&summary, "clean")["named"],
        serde_json::json!(["nonce_mismatch"])
    );

    // A receipt the tool wrote itself, with the capture context it was given, is refused: the
    // ledger shows no `autocode capture` that wrote it.
    let out = home
        .command(&[
            "conformance",
            "--scripted",
            "--json",
            "--provider",
            "probetool",
        ])
        .env("PROBE_TOOL_FAULT", "own_receipt")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["passed"], false, "{summary:#}");
    assert!(
        summary
            .to_string()
            .contains("no `autocode capture` that wrote this receipt"),
        "{summary:#}"
    );
}

#[test]
fn write_matrix_renders_the_table_between_the_markers() {
    let home = Home::new();
    let dir = home.dir.path();
    let matrix: PathBuf = dir.join("matrix.json");
    let doc: PathBuf = dir.join("providers.md");
    std::fs::write(
        &matrix,
        r#"{"format_version": 1, "entries": [{"engine": "codex", "version": "0.169.0",
            "transport": "codex_events", "result": "pass", "date": "2026-11-29",
            "commit": "0123456789abcdef0123", "note": "scripted"}]}"#,
    )
    .unwrap();
    std::fs::write(
        &doc,
        "# P\n\n<!-- conformance-matrix:start -->\nold table\n<!-- conformance-matrix:end -->\ntail\n",
    )
    .unwrap();
    let out = home.run(&[
        "conformance",
        "--write-matrix",
        "--matrix",
        matrix.to_str().unwrap(),
        "--providers-doc",
        doc.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        std::fs::read_to_string(&doc).unwrap(),
        "# P\n\n<!-- conformance-matrix:start -->\n\
         | engine | version | transport | result | date | commit | note |\n\
         |---|---|---|---|---|---|---|\n\
         | codex | 0.169.0 | codex_events | pass | 2026-11-29 | 0123456789ab | scripted |\n\
         <!-- conformance-matrix:end -->\ntail\n"
    );
}

#[test]
fn the_command_refuses_what_it_cannot_do_safely() {
    let home = Home::new();
    let out = home.run(&["conformance", "--provider", "codex"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--scripted"));
    let out = home.run(&[
        "conformance",
        "--provider",
        "codex",
        "--live",
        "--model",
        "m",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--i-authorize-spend"));
    let out = home.run(&[
        "conformance",
        "--provider",
        "codex",
        "--scripted",
        "--fault",
        "bogus",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown fault"));
}

#[test]
fn doctor_says_untested_for_a_version_the_matrix_does_not_list() {
    let home = Home::new();
    let out = home.run(&["doctor", "--provider", "probetool", "--json"]);
    let doctor: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doctor["version"], "probe-tool 1.0.0", "{}", describe(&out));
    assert_eq!(
        doctor["conformance"],
        serde_json::json!({"status": "untested"})
    );
    let text = home.run(&["doctor", "--provider", "probetool"]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("conformance: untested")
            || String::from_utf8_lossy(&text.stderr).contains("conformance: untested"),
        "{}",
        describe(&text)
    );
}

#[test]
fn record_writes_the_verdict_into_the_matrix_and_doctor_reads_the_shipped_one() {
    let home = Home::new();
    let matrix = home.dir.path().join("matrix.json");
    std::fs::write(&matrix, "{\"format_version\": 1, \"entries\": []}\n").unwrap();
    let out = home.run(&[
        "conformance",
        "--scripted",
        "--provider",
        "probetool",
        "--record",
        "--matrix",
        matrix.to_str().unwrap(),
        "--note",
        "test tool",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let written: Value = serde_json::from_slice(&std::fs::read(&matrix).unwrap()).unwrap();
    let entries = written["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{written}");
    let entry = &entries[0];
    assert_eq!(entry["engine"], "probetool");
    assert_eq!(entry["version"], "1.0.0");
    assert_eq!(entry["transport"], "report_file");
    assert_eq!(entry["result"], "pass");
    assert_eq!(entry["note"], "test tool");
    let commit = entry["commit"].as_str().unwrap();
    assert!(
        commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit()),
        "{commit}"
    );
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    assert_eq!(entry["date"], today.as_str());

    // The shipped matrix lists the pinned Codex: doctor says it passed.
    require_cli("codex");
    let out = home
        .command(&["doctor", "--provider", "codex", "--json"])
        .env(
            "PATH",
            format!(
                "{}:{}",
                Path::new(ROOT)
                    .join("tests/clis/node_modules/.bin")
                    .display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .output()
        .unwrap();
    let doctor: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doctor["conformance"]["status"],
        "pass",
        "{}",
        describe(&out)
    );
}

/// The CLI qualified is the one on PATH (as a run would use), named with its path and version,
/// not the pinned copy of the source tree.
#[test]
fn conformance_qualifies_the_cli_on_path_and_names_it() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    let bin = home.dir.path().join("newer-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let codex = bin.join("codex");
    std::fs::write(
        &codex,
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'codex-cli 9.9.9-newer' && exit 0\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = home
        .command(&[
            "conformance",
            "--provider",
            "codex",
            "--scripted",
            "--clean-only",
        ])
        .env("PATH", path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&codex.display().to_string()),
        "{}",
        describe(&out)
    );
    assert!(stderr.contains("9.9.9-newer"), "{}", describe(&out));
    assert!(!stderr.contains("tests/clis"), "{}", describe(&out));
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
}
