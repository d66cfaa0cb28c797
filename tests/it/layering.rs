//! The module layering `docs/architecture.md` states, held against the source: `verify` judges
//! texts, trees and check output and imports nothing of the run engine.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The non-test lines of a source file: up to its first `#[cfg(test)]`; a `tests.rs` has none.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return Vec::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .enumerate()
        .take_while(|(_, line)| line.trim() != "#[cfg(test)]")
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .map(|(n, line)| (n + 1, line.to_owned()))
        .collect()
}

#[test]
fn verify_imports_nothing_of_the_run_engine() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/verify");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() >= 6, "{files:?}");
    let engine = regex::Regex::new(r"crate::run\b|autocode::run\b|super::super::").unwrap();
    assert!(engine.is_match("use crate::run::state::RunState;"));
    assert!(!engine.is_match("use crate::verify::testcount::TestTally;"));
    let mut offenders = Vec::new();
    for file in &files {
        for (number, line) in code_lines(file) {
            if engine.is_match(&line) {
                offenders.push(format!("{}:{number}: {}", file.display(), line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "verify must not reach into the run engine:\n{}",
        offenders.join("\n")
    );
}
