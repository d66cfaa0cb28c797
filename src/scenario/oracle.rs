//! The oracle runner: the case's hidden checks, run by the harness after the run on a copy of the
//! result tree, never visible to agents.
//!
//! Invariants: the checks run through `crate::supervise::run` (the one way to start a process),
//! from the root of a fresh copy of the tree (the files a snapshot covers: tracked and untracked
//! non-ignored, never `.git/` or `.autocode/`), with `$ORACLE_DIR` pointing at a fresh copy of the
//! case's `oracle/` folder and a complete, minimal environment. Each check's output is kept in
//! the result folder. The judgement of one check ([`judge`]) is pure.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::catalog::OracleCheck;
use super::verdict::OracleSummary;
use crate::run::replay::{self, ReplayError};
use crate::supervise::{self, Exit, LaunchSpec, StdinSource, StdioMode};

/// Output kept per check (each stream).
const OUTPUT_LIMIT: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    #[error("cannot prepare the oracle copy: {0}")]
    Copy(#[from] ReplayError),
    #[error("cannot prepare the oracle folder {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot launch oracle check {name:?}: {source}")]
    Launch {
        name: String,
        #[source]
        source: supervise::LaunchError,
    },
}

/// One check's outcome, as `result.json` keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OracleCheckResult {
    pub name: String,
    pub command: String,
    pub expected_exit: i32,
    /// The exit code; `None` when killed by a signal or the timeout.
    pub exit: Option<i32>,
    pub timed_out: bool,
    pub passed: bool,
    /// Why it failed, empty when it passed.
    pub problems: Vec<String>,
    pub duration_ms: u64,
    /// The check's stdout and stderr, relative to the result folder.
    #[serde(default)]
    pub output_file: Option<String>,
}

/// Judges one check from its exit and output (pure).
pub fn judge(check: &OracleCheck, exit: Exit, stdout: &str, stderr: &str) -> Vec<String> {
    let mut problems = Vec::new();
    match exit {
        Exit::Code(code) if code == check.exit_code => {}
        Exit::Code(code) => {
            problems.push(format!("exit code {code}, expected {}", check.exit_code))
        }
        Exit::Signal(signal) => problems.push(format!("killed by signal {signal}")),
        Exit::TimedOut => problems.push("timed out".into()),
    }
    for needle in &check.stdout_contains {
        if !stdout.contains(needle.as_str()) {
            problems.push(format!("stdout lacks {needle:?}"));
        }
    }
    for needle in &check.output_excludes {
        if stdout.contains(needle.as_str()) || stderr.contains(needle.as_str()) {
            problems.push(format!("output contains {needle:?}"));
        }
    }
    problems
}

/// The summary the verdict needs.
pub fn summarize(results: &[OracleCheckResult]) -> OracleSummary {
    if results.is_empty() {
        OracleSummary::Unavailable
    } else if results.iter().all(|r| r.passed) {
        OracleSummary::Passed
    } else {
        OracleSummary::Failed
    }
}

/// The host's Rust toolchain variables, so `cargo` works under a throwaway HOME:
/// `CARGO_HOME`/`RUSTUP_HOME` as set, else `$HOME/.cargo`/`$HOME/.rustup` when they exist.
pub fn toolchain_env(host: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let home = host.get("HOME").map(PathBuf::from);
    for (name, fallback) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
        let value = host
            .get(name)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(fallback)));
        if let Some(value) = value.filter(|p| p.exists()) {
            env.insert(name.to_owned(), value.display().to_string());
        }
    }
    if let Some(toolchain) = host.get("RUSTUP_TOOLCHAIN") {
        env.insert("RUSTUP_TOOLCHAIN".to_owned(), toolchain.clone());
    }
    // What a real user's shell carries for reaching the registries: certificate bundles (a
    // network behind a TLS-inspecting proxy has its own CA: uv, cargo, pip and node each read
    // a different variable), proxies and module proxies. A run passes them to its agents
    // (the agents' environment policy keeps them), so the harness does too.
    for name in REGISTRY_VARIABLES {
        for name in [name.to_owned(), name.to_ascii_lowercase()] {
            if let Some(value) = host.get(&name) {
                env.insert(name, value.clone());
            }
        }
    }
    env
}

/// The variables [`toolchain_env`] passes as the host has them (each also in lower case).
const REGISTRY_VARIABLES: [&str; 17] = [
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NIX_SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "PIP_CERT",
    "CARGO_HTTP_CAINFO",
    "UV_NATIVE_TLS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "GOPROXY",
    "GOFLAGS",
    "PIP_INDEX_URL",
    "UV_INDEX_URL",
];

/// The environment of oracle checks: nothing inherited but the tool paths.
fn oracle_env(oracle_dir: &Path, scratch: &Path) -> BTreeMap<String, String> {
    let host: BTreeMap<String, String> = std::env::vars().collect();
    let mut env = toolchain_env(&host);
    if let Some(path) = host.get("PATH") {
        env.insert("PATH".to_owned(), path.clone());
    }
    env.insert("HOME".into(), scratch.join("home").display().to_string());
    env.insert(
        "CARGO_TARGET_DIR".into(),
        scratch.join("target").display().to_string(),
    );
    env.insert("LANG".into(), "C.UTF-8".into());
    env.insert("PYTHONDONTWRITEBYTECODE".into(), "1".into());
    env.insert("ORACLE_DIR".into(), oracle_dir.display().to_string());
    env
}

/// Runs every check of `checks` on a copy of `tree`. Output files go to `log_dir` (when given)
/// as `NN-<check>.log`; `log_base` is the folder the recorded paths are relative to.
pub async fn run_oracle(
    tree: &Path,
    case_oracle_dir: &Path,
    checks: &[OracleCheck],
    timeout: Duration,
    log_dir: Option<(&Path, &Path)>,
) -> Result<Vec<OracleCheckResult>, OracleError> {
    let scratch = tempfile::Builder::new()
        .prefix("autocode-oracle-")
        .tempdir()
        .map_err(|source| OracleError::Io {
            path: std::env::temp_dir(),
            source,
        })?;
    let tree_copy = scratch.path().join("tree");
    let oracle_copy = scratch.path().join("oracle");
    for dir in [&tree_copy, &oracle_copy, &scratch.path().join("home")] {
        std::fs::create_dir_all(dir).map_err(|source| OracleError::Io {
            path: dir.clone(),
            source,
        })?;
    }
    let path_env: BTreeMap<String, String> = std::env::var("PATH")
        .map(|p| [("PATH".to_owned(), p)].into_iter().collect())
        .unwrap_or_default();
    replay::clean_copy(tree, &tree_copy, &path_env).await?;
    if case_oracle_dir.is_dir() {
        replay::clean_copy(case_oracle_dir, &oracle_copy, &path_env).await?;
    }
    let env = oracle_env(&oracle_copy, scratch.path());
    let mut results = Vec::with_capacity(checks.len());
    for (index, check) in checks.iter().enumerate() {
        let started = Instant::now();
        let spec = LaunchSpec {
            label: format!("scenario oracle: {}", check.name),
            program: OsString::from("sh"),
            args: vec![OsString::from("-c"), OsString::from(&check.command)],
            env: env
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
            cwd: tree_copy.clone(),
            stdin: StdinSource::Null,
            stdio: StdioMode::Captured {
                limit: OUTPUT_LIMIT,
            },
            timeout: Some(timeout),
            room: None,
        };
        let finished = supervise::run(spec)
            .await
            .map_err(|source| OracleError::Launch {
                name: check.name.clone(),
                source,
            })?;
        let stdout = String::from_utf8_lossy(&finished.stdout);
        let stderr = String::from_utf8_lossy(&finished.stderr);
        let problems = judge(check, finished.exit, &stdout, &stderr);
        let output_file = match log_dir {
            Some((dir, base)) => {
                let path = dir.join(format!("{:02}-{}.log", index + 1, file_safe(&check.name)));
                let text = format!(
                    "$ {}\n# exit: {:?}\n# --- stdout\n{stdout}\n# --- stderr\n{stderr}",
                    check.command, finished.exit
                );
                crate::store::write_atomic(&path, text.as_bytes()).map_err(|e| {
                    OracleError::Io {
                        path: path.clone(),
                        source: std::io::Error::other(e.to_string()),
                    }
                })?;
                path.strip_prefix(base)
                    .ok()
                    .map(|p| p.display().to_string())
            }
            None => None,
        };
        results.push(OracleCheckResult {
            name: check.name.clone(),
            command: check.command.clone(),
            expected_exit: check.exit_code,
            exit: match finished.exit {
                Exit::Code(code) => Some(code),
                _ => None,
            },
            timed_out: finished.exit == Exit::TimedOut,
            passed: problems.is_empty(),
            problems,
            duration_ms: started.elapsed().as_millis() as u64,
            output_file,
        });
    }
    Ok(results)
}

fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(48)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(exit_code: i32, contains: &[&str], excludes: &[&str]) -> OracleCheck {
        OracleCheck {
            name: "c".into(),
            command: "true".into(),
            exit_code,
            stdout_contains: contains.iter().map(|s| s.to_string()).collect(),
            output_excludes: excludes.iter().map(|s| s.to_string()).collect(),
            fails_on_seed: false,
        }
    }

    #[test]
    fn judge_checks_exit_and_output() {
        assert!(judge(&check(0, &["ok"], &[]), Exit::Code(0), "all ok", "").is_empty());
        assert_eq!(
            judge(&check(0, &[], &[]), Exit::Code(1), "", ""),
            vec!["exit code 1, expected 0".to_owned()]
        );
        assert!(judge(&check(2, &[], &[]), Exit::Code(2), "", "").is_empty());
        assert_eq!(
            judge(&check(0, &["ok"], &[]), Exit::Code(0), "", "").len(),
            1
        );
        assert_eq!(
            judge(
                &check(0, &[], &["Traceback"]),
                Exit::Code(0),
                "",
                "Traceback"
            )
            .len(),
            1
        );
        assert_eq!(judge(&check(0, &[], &[]), Exit::TimedOut, "", "").len(), 1);
        assert_eq!(judge(&check(0, &[], &[]), Exit::Signal(9), "", "").len(), 1);
    }

    #[test]
    fn summary_needs_every_check() {
        let r = |passed| OracleCheckResult {
            name: "n".into(),
            command: "c".into(),
            expected_exit: 0,
            exit: Some(0),
            timed_out: false,
            passed,
            problems: vec![],
            duration_ms: 1,
            output_file: None,
        };
        assert_eq!(summarize(&[]), OracleSummary::Unavailable);
        assert_eq!(summarize(&[r(true), r(true)]), OracleSummary::Passed);
        assert_eq!(summarize(&[r(true), r(false)]), OracleSummary::Failed);
    }

    #[tokio::test]
    async fn runs_on_a_copy_with_the_oracle_folder() {
        let case = tempfile::tempdir().unwrap();
        let tree = case.path().join("tree");
        let oracle = case.path().join("oracle");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::create_dir_all(&oracle).unwrap();
        std::fs::write(tree.join("answer.txt"), "42\n").unwrap();
        std::fs::write(oracle.join("expected.txt"), "42\n").unwrap();
        let mut checks = vec![check(0, &["same"], &[]), check(0, &[], &[])];
        checks[0].command = "cmp answer.txt \"$ORACLE_DIR/expected.txt\" && echo same".into();
        checks[1].name = "writes stay in the copy".into();
        checks[1].command = "echo changed > answer.txt && exit 3".into();
        let logs = case.path().join("out");
        let results = run_oracle(
            &tree,
            &oracle,
            &checks,
            Duration::from_secs(30),
            Some((&logs, case.path())),
        )
        .await
        .unwrap();
        assert!(results[0].passed, "{:?}", results[0]);
        assert!(!results[1].passed);
        assert_eq!(results[1].exit, Some(3));
        assert_eq!(
            std::fs::read_to_string(tree.join("answer.txt")).unwrap(),
            "42\n"
        );
        let log = results[0].output_file.as_deref().unwrap();
        assert!(
            std::fs::read_to_string(case.path().join(log))
                .unwrap()
                .contains("same")
        );
    }
}
