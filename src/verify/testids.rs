//! Which tests a check ran, by name, where its runner's own output names them: libtest (`test
//! a::b ... ok`, by binary), nextest (`PASS [0.01s] crate a::b`), `node --test` (TAP `ok 1 - name`
//! and the spec reporter's `✔ name`), pytest (`-v` lines and the `-rA` summary), unittest `-v`,
//! `go test -v` (`--- PASS: TestX`), and the check-mark lines of jest, vitest and mocha (by the test's own name: a spec reporter's
//! suite titles are not read). The gate
//! compares the ids a check ran on the base tree with those it runs on the result, so a test that
//! is no longer run is found whatever file held it and whatever the count does (`run::gate`).
//!
//! A test that was skipped or ignored did not run, nor did a runner's stand-in for a file or
//! fixture that failed before any test (unittest's `_FailedTest` for a module that did not import
//! or a test named by id that the module or class does not have, and its
//! `setUpModule`/`setUpClass` errors; `node --test`'s failing entry named by the test
//! file's path): the base tree's fail-to-pass check often names a test module that only the
//! work makes importable, and its stand-in is no test the result stopped running. Durations are cut from names. Ids are taken relative to the tree the check
//! ran in (its root is cut from them), and a doc-test's line number is dropped, so code moving in
//! a file does not rename its tests. Runners that print no names by default (pytest and unittest
//! without `-v`, go without `-v`) give no ids: the gate then compares counts (`verify::testcount`).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// At most this many ids are kept per check; a larger suite is compared by its count.
pub const MAX_IDS: usize = 5_000;
/// An id longer than this is cut (with its length kept apart by the cut marker).
const MAX_ID_LEN: usize = 300;

/// The names of the tests one run of a check ran (passed or failed, not skipped).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TestIds(BTreeSet<String>);

impl TestIds {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, id: &str) -> bool {
        self.0.contains(id)
    }

    /// The ids of `self` that `now` does not hold, in order.
    pub fn missing_from<'a>(&'a self, now: &'a TestIds) -> Vec<&'a str> {
        self.0.difference(&now.0).map(String::as_str).collect()
    }
}

impl FromIterator<String> for TestIds {
    fn from_iter<I: IntoIterator<Item = String>>(iter: I) -> Self {
        TestIds(iter.into_iter().collect())
    }
}

struct Patterns {
    cargo_binary: Regex,
    libtest: Regex,
    doctest_line: Regex,
    nextest: Regex,
    tap: Regex,
    tap_subtest: Regex,
    check_mark: Regex,
    duration: Regex,
    pytest_verbose: Regex,
    pytest_summary: Regex,
    unittest_verbose: Regex,
    go_verbose: Regex,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let re = |p: &str| Regex::new(p).expect("a constant regex");
        Patterns {
            cargo_binary: re(r"^\s*(?:Running (?:unittests )?|Doc-tests )(\S+)"),
            libtest: re(r"^test (.+?) \.\.\. (ok|FAILED|ignored.*)$"),
            doctest_line: re(r" \(line \d+\)"),
            nextest: re(r"^\s*(PASS|FAIL|SIGSEGV|SIGABRT|TIMEOUT|LEAK) \[\s*[\d.]+s\] (?:\(\s*\d+/\d+\) )?(\S+) (.+)$"),
            tap: re(r"^(\s*)(not ok|ok) \d+(?: - (.*?))?(?: # (.*))?$"),
            tap_subtest: re(r"^(\s*)# Subtest: (.+)$"),
            check_mark: re(r"^(\s*)(✔|✓|√|✖|✕|×|﹣|-|○)\s+(.+)$"),
            duration: re(r"(?:\s+\(?\d+(?:\.\d+)?\s*(?:ms|s|µs|us)\)?)+$"),
            pytest_verbose: re(r"^(\S+::\S+) (PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\b"),
            pytest_summary: re(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S+::\S+)"),
            unittest_verbose: re(r"^(\w+) \(([\w.]+)\)(?: \.\.\. | ?$)"),
            go_verbose: re(r"^\s*--- (PASS|FAIL|SKIP): (\S+)"),
        }
    })
}

/// The tests `output` (a check's stdout and stderr, run in `root`) names as run, or `None` when
/// no runner named any (or more than [`MAX_IDS`]).
pub fn collect(output: &str, root: &Path) -> Option<TestIds> {
    let p = patterns();
    let root = root.to_string_lossy();
    let root = root.trim_end_matches('/');
    let mut ids: BTreeSet<String> = BTreeSet::new();
    let mut add = |id: String| {
        let mut id = if root.is_empty() {
            id
        } else {
            id.replace(&format!("{root}/"), "").replace(root, ".")
        };
        if id.len() > MAX_ID_LEN {
            let mut cut = MAX_ID_LEN;
            while !id.is_char_boundary(cut) {
                cut -= 1;
            }
            let len = id.len();
            id.truncate(cut);
            id.push_str(&format!("…({len} bytes)"));
        }
        ids.insert(id);
    };
    let mut binary = String::new();
    // Nesting for TAP subtests and spec reporters: (indent, name) of the enclosing tests.
    let mut tap_parents: Vec<(usize, String)> = Vec::new();
    let mut pending_unittest: Option<String> = None;
    for line in output.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(c) = p.cargo_binary.captures(line) {
            binary = c[1].to_owned();
            continue;
        }
        if let Some(c) = p.libtest.captures(line) {
            if !c[2].starts_with("ignored") {
                let name = p.doctest_line.replace(&c[1], "");
                add(if binary.is_empty() {
                    name.into_owned()
                } else {
                    format!("{binary} {name}")
                });
            }
            continue;
        }
        if let Some(c) = p.nextest.captures(line) {
            add(format!("{} {}", &c[2], c[3].trim()));
            continue;
        }
        if let Some(c) = p.tap_subtest.captures(line) {
            let indent = c[1].len();
            tap_parents.retain(|(i, _)| *i < indent);
            tap_parents.push((indent, c[2].trim().to_owned()));
            continue;
        }
        if let Some(c) = p.tap.captures(line) {
            let indent = c[1].len();
            tap_parents.retain(|(i, _)| *i < indent);
            // A directive after ` # `: SKIP and TODO did not run; others (`time=3ms`) are not
            // part of the name.
            let skipped = c.get(4).is_some_and(|d| {
                let d = d.as_str().trim_start().to_ascii_uppercase();
                d.starts_with("SKIP") || d.starts_with("TODO")
            });
            if let Some(name) = c
                .get(3)
                .map(|m| m.as_str().trim())
                .filter(|n| !n.is_empty())
                && !skipped
                && !(&c[2] == "not ok" && names_a_script_file(name))
            {
                let mut path: Vec<&str> = tap_parents.iter().map(|(_, n)| n.as_str()).collect();
                path.push(name);
                add(path.join(" > "));
            }
            continue;
        }
        if let Some(c) = p.pytest_verbose.captures(line).or_else(|| {
            p.pytest_summary
                .captures(line)
                .filter(|c| c.get(2).is_some())
        }) {
            // Either order: `id OUTCOME` (-v) or `OUTCOME id` (-rA).
            let (id, outcome) = if c[1].contains("::") {
                (&c[1], &c[2])
            } else {
                (&c[2], &c[1])
            };
            if outcome != "SKIPPED" {
                add(id.to_owned());
            }
            continue;
        }
        if let Some(c) = p.go_verbose.captures(line) {
            if &c[1] != "SKIP" {
                add(c[2].to_owned());
            }
            continue;
        }
        if let Some(c) = p.unittest_verbose.captures(line) {
            // 3.11+: `name (module.Class.name)`; before: `name (module.Class)`.
            let (name, qualified) = (&c[1], &c[2]);
            let id = if qualified.ends_with(&format!(".{name}")) {
                qualified.to_owned()
            } else {
                format!("{qualified}.{name}")
            };
            if unittest_stand_in(name, qualified) {
                continue;
            }
            if line.contains(" ... ") {
                if !line.contains(" ... skipped") {
                    add(id);
                }
            } else {
                // A docstring line follows before ` ... outcome`.
                pending_unittest = Some(id);
            }
            continue;
        }
        if let Some(id) = pending_unittest.take() {
            if line.contains(" ... ") && !line.contains(" ... skipped") {
                add(id);
            }
            continue;
        }
        if let Some(c) = p.check_mark.captures(line) {
            let mark = &c[2];
            let name = p.duration.replace(c[3].trim(), "").into_owned();
            // `-` and `○` are skipped tests (mocha pending, jest skipped); `﹣` is node's skip.
            let failed_file = matches!(mark, "✖" | "✕" | "×") && names_a_script_file(&name);
            if !matches!(mark, "﹣" | "-" | "○") && !name.ends_with("# SKIP") && !failed_file {
                add(name);
            }
        }
    }
    (!ids.is_empty() && ids.len() <= MAX_IDS).then_some(TestIds(ids))
}

/// unittest's stand-ins for what failed before a test ran: a module that did not import or a
/// test named by id that is not there (`unittest.loader._FailedTest`, `ModuleImportFailure`
/// before 3.5) and the module's and class's fixtures (`setUpModule (test_a) ... ERROR`).
fn unittest_stand_in(name: &str, qualified: &str) -> bool {
    qualified.starts_with("unittest.loader.")
        || matches!(
            name,
            "setUpModule" | "tearDownModule" | "setUpClass" | "tearDownClass"
        )
}

/// Whether a failing entry's name is a script's path (`test/x.test.js`, the tree's root cut or
/// not): `node --test` names a test file that failed outside any test by its path.
fn names_a_script_file(name: &str) -> bool {
    const SCRIPTS: [&str; 8] = [".js", ".cjs", ".mjs", ".ts", ".cts", ".mts", ".jsx", ".tsx"];
    !name.contains(char::is_whitespace) && SCRIPTS.iter().any(|ext| name.ends_with(ext))
}

#[cfg(test)]
mod tests;
