//! The catalog self-check: the oracle is only worth something if it can fail. For every case it
//! runs the oracle (1) on the untouched seed, where every check marked `fails_on_seed` must fail,
//! and (2) on the seed plus the files the scripted builder writes (the `write_file` steps of the
//! script's `builder` conversation), which must pass the oracle when the case expects a
//! completion. No agent runs; every process starts through the boundary.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use super::catalog::{ExpectedOutcome, Profile, Scenario};
use super::oracle::{self, OracleCheckResult};
use super::setup::seed_repository;
use crate::scripted_model::{Script, Step};

/// The conversation whose file writes make up a script's intended result.
pub const BUILDER_CONVERSATION: &str = "builder";

#[derive(Debug, Clone, Serialize)]
pub struct SelfCheck {
    pub case: String,
    /// Problems found; empty when the case is sound.
    pub problems: Vec<String>,
    pub on_seed: Vec<OracleCheckResult>,
    pub on_scripted_result: Vec<OracleCheckResult>,
}

/// The `write_file` steps of the script's builder conversation, in order (later writes win).
pub fn scripted_writes(script: &Script) -> Vec<(String, String)> {
    script
        .conversations
        .iter()
        .filter(|c| c.name == BUILDER_CONVERSATION)
        .take(1)
        .flat_map(|c| c.steps.iter())
        .filter_map(|step| match step {
            Step::WriteFile { path, content, .. } => Some((path.clone(), content.clone())),
            _ => None,
        })
        .collect()
}

fn host_env() -> BTreeMap<String, String> {
    std::env::vars()
        .filter(|(k, _)| {
            matches!(
                k.as_str(),
                "PATH" | "HOME" | "CARGO_HOME" | "RUSTUP_HOME" | "RUSTUP_TOOLCHAIN"
            )
        })
        .chain([
            ("GIT_CONFIG_NOSYSTEM".to_owned(), "1".to_owned()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ])
        .collect()
}

/// Checks one case with the script of `profile` (when it has one).
pub async fn self_check(scenario: &Scenario, profile: &Profile) -> SelfCheck {
    let mut problems = Vec::new();
    let env = host_env();
    let timeout = Duration::from_secs(scenario.spec.oracle.timeout_seconds);
    let checks = &scenario.spec.oracle.checks;
    let mut on_seed = Vec::new();
    let mut on_scripted_result = Vec::new();
    let scratch = match tempfile::Builder::new()
        .prefix("autocode-selfcheck-")
        .tempdir()
    {
        Ok(s) => s,
        Err(e) => {
            problems.push(format!("cannot create a scratch folder: {e}"));
            return SelfCheck {
                case: scenario.name.clone(),
                problems,
                on_seed,
                on_scripted_result,
            };
        }
    };
    let seed = scratch.path().join("seed");
    match seed_repository(&scenario.seed_dir(), &seed, &env).await {
        Ok(()) => {
            match oracle::run_oracle(&seed, &scenario.oracle_dir(), checks, timeout, None).await {
                Ok(results) => on_seed = results,
                Err(e) => problems.push(format!("oracle on the seed: {e}")),
            }
        }
        Err(e) => problems.push(format!("seed repository: {e}")),
    }
    for (check, result) in checks.iter().zip(&on_seed) {
        if check.fails_on_seed && result.passed {
            problems.push(format!(
                "oracle check {:?} passes on the seed but is marked fails_on_seed",
                check.name
            ));
        }
    }
    if let Some(path) = scenario.script_path(profile) {
        match Script::load(path) {
            Ok(script) => {
                let result = scratch.path().join("result");
                match seed_repository(&scenario.seed_dir(), &result, &env).await {
                    Ok(()) => {
                        for (rel, content) in scripted_writes(&script) {
                            if let Err(e) = write_relative(&result, &rel, &content) {
                                problems.push(format!("scripted write {rel}: {e}"));
                            }
                        }
                        match oracle::run_oracle(
                            &result,
                            &scenario.oracle_dir(),
                            checks,
                            timeout,
                            None,
                        )
                        .await
                        {
                            Ok(results) => on_scripted_result = results,
                            Err(e) => problems.push(format!("oracle on the scripted result: {e}")),
                        }
                    }
                    Err(e) => problems.push(format!("result repository: {e}")),
                }
                if scenario.spec.expect.outcome == ExpectedOutcome::Complete {
                    for r in on_scripted_result.iter().filter(|r| !r.passed) {
                        problems.push(format!(
                            "the scripted builder's result fails oracle check {:?}: {}",
                            r.name,
                            r.problems.join("; ")
                        ));
                    }
                }
            }
            Err(e) => problems.push(format!("script {}: {e}", path.display())),
        }
    }
    SelfCheck {
        case: scenario.name.clone(),
        problems,
        on_seed,
        on_scripted_result,
    }
}

/// Writes `content` at `rel` under `root`, refusing paths that leave it.
fn write_relative(root: &Path, rel: &str, content: &str) -> Result<(), String> {
    let rel_path = Path::new(rel);
    if rel_path.is_absolute()
        || rel_path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err("the path leaves the workspace".into());
    }
    let path = root.join(rel_path);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(&path, content).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted_model::ScriptSyntax;

    #[test]
    fn writes_come_from_the_first_builder_conversation_only() {
        let text = r#"{"conversation": [
            {"name": "planner", "step": [{"kind": "write_file", "path": "no.txt", "content": "x"}]},
            {"name": "builder", "step": [
                {"kind": "write_file", "path": "a.py", "content": "1"},
                {"kind": "shell", "command": "true"},
                {"kind": "write_file", "path": "b/c.py", "content": "2"}]},
            {"name": "builder", "step": [{"kind": "write_file", "path": "late.py", "content": "3"}]}
        ]}"#;
        let script = Script::parse(text, ScriptSyntax::Json, Path::new("s.json")).unwrap();
        assert_eq!(
            scripted_writes(&script),
            vec![
                ("a.py".to_owned(), "1".to_owned()),
                ("b/c.py".to_owned(), "2".to_owned())
            ]
        );
    }

    #[test]
    fn relative_writes_stay_inside() {
        let dir = tempfile::tempdir().unwrap();
        assert!(write_relative(dir.path(), "../x", "y").is_err());
        assert!(write_relative(dir.path(), "/etc/x", "y").is_err());
        write_relative(dir.path(), "a/b.txt", "y").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b.txt")).unwrap(),
            "y"
        );
    }
}
