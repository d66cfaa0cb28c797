//! Code of the work that changes the test framework's verdicts from inside the process that
//! runs the tests: an assignment to the assertion functions or the runner's classes
//! (`unittest.TestCase.assertEqual = …`, `require('node:assert').strictEqual = …`, through any
//! name the module is imported as), and values built to equal anything (`def __eq__(self, o):
//! return True`). A check that runs the tests over such code passes whatever the code does:
//! its output reads as an honest run, the code taken back fails as it should (the witness), and
//! the base tests put back (`verify::treediff`) are fooled as well. Read in the lines the work
//! added to every Python, JavaScript/TypeScript and Rust file it added or changed, tests
//! included (a new test module the runner imports beside the others patches theirs too). Outside
//! the tests, code that skips the test running it (`raise unittest.SkipTest`, `pytest.skip(…)`)
//! or returns the framework's match-anything value (`mock.ANY`, a jest `asymmetricMatch`), or
//! asks whether the tests are running (`'pytest' in sys.modules`, `PYTEST_CURRENT_TEST`,
//! `NODE_TEST_CONTEXT`, `JEST_WORKER_ID`, `cfg!(test)`, `#[cfg(not(test))]`) to behave
//! otherwise under them, is read too. Pure: the final gate shows what this finds to a person.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use regex::Regex;

/// One line of the work that reaches into the test framework.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tampering {
    pub path: String,
    /// 1-based, in the work's version of the file.
    pub line: usize,
    /// The line, trimmed and cut at 200 characters.
    pub text: String,
    pub what: &'static str,
}

impl std::fmt::Display for Tampering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: `{}` ({})",
            self.path, self.line, self.text, self.what
        )
    }
}

const ASSIGNS_FRAMEWORK: &str = "assigns to the test framework";
const EQUALS_ANYTHING: &str = "a value that equals anything";
const SKIPS_TESTS: &str = "code under test that skips the test running it";
const DETECTS_TESTS: &str = "code under test that asks whether the tests are running";
const MATCHER_IN_CODE: &str =
    "code under test that returns the test framework's match-anything value";

/// Python modules whose objects decide a test's verdict.
const PYTHON_FRAMEWORKS: [&str; 4] = ["unittest", "pytest", "_pytest", "doctest"];

/// Attributes a test suite sets on its framework honestly (how failures are printed).
const PRESENTATION: [&str; 3] = ["maxDiff", "longMessage", "truncateThreshold"];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Language {
    Python,
    Script,
    Rust,
}

fn language(path: &str) -> Option<Language> {
    let ext = path.rsplit_once('.').map(|(_, e)| e)?;
    match ext {
        "py" | "pyi" => Some(Language::Python),
        "js" | "mjs" | "cjs" | "jsx" | "ts" | "mts" | "cts" | "tsx" => Some(Language::Script),
        "rs" => Some(Language::Rust),
        _ => None,
    }
}

struct Patterns {
    py_import_as: Regex,
    py_from_import: Regex,
    py_dynamic_import: Regex,
    py_import_hook: Regex,
    py_sys_modules: Regex,
    py_dunder_lambda: Regex,
    py_dunder_def: Regex,
    py_skip: Regex,
    py_any: Regex,
    py_detects: Regex,
    js_require_bound: Regex,
    js_import_bound: Regex,
    js_require_destructured: Regex,
    js_import_destructured: Regex,
    js_require_assign: Regex,
    js_matcher: Regex,
    js_detects: Regex,
    rs_eq_def: Regex,
    rs_detects: Regex,
}

/// The node modules whose objects decide a test's verdict (or load them), as a regex of the
/// text `require`/`import` names.
const SCRIPT_FRAMEWORKS: &str = r"(?:node:)?(?:assert(?:/strict)?|test|chai|module)";

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let re = |p: &str| Regex::new(p).expect("a constant regex");
        let py = PYTHON_FRAMEWORKS.join("|");
        let js = SCRIPT_FRAMEWORKS;
        Patterns {
            py_import_as: re(&format!(r"^import\s+(?:{py})(?:\.\w+)*\s+as\s+(\w+)\s*$")),
            py_from_import: re(&format!(r"^from\s+(?:{py})(?:\.\w+)*\s+import\s+\(?([\w\s,]+)\)?")),
            py_dynamic_import: re(&format!(r#"^(\w+)\s*=\s*(?:__import__|importlib\.import_module|import_module)\(\s*['"](?:{py})\b"#)),
            py_import_hook: re(r#"^(?:builtins|__builtins__)\.__import__\s*=[^=]|^__builtins__\[\s*['"]__import__['"]\s*\]\s*=[^=]"#),
            py_sys_modules: re(&format!(r#"sys\.modules\[\s*['"](?:{py})\b[\w.]*['"]\s*\]\s*=[^=]"#)),
            py_dunder_lambda: re(r"^(__eq__\s*=\s*lambda[^:]*:\s*True|__ne__\s*=\s*lambda[^:]*:\s*False)\b"),
            py_dunder_def: re(r"^def\s+(__eq__|__ne__)\s*\([^)]*\)\s*(?:->\s*\w+\s*)?:\s*(.*)$"),
            py_skip: re(r"raise\s+(?:[\w.]*\.)?SkipTest\b|\bpytest\.(?:skip|xfail|importorskip|exit)\s*\(|\bunittest\.(?:skip|skipIf|skipUnless|expectedFailure)\b"),
            py_any: re(r"\bmock\.ANY\b|^from\s+(?:unittest\.mock|mock)\s+import\s+.*\bANY\b"),
            py_detects: re(&format!(r#"['"](?:{py})['"]\s+(?:not\s+)?in\s+sys\.modules|\bPYTEST_(?:CURRENT_TEST|VERSION|XDIST_WORKER)\b|sys\.argv\b.*['"](?:unittest|pytest)|\b(?:unittest|pytest)['"]\s+in\s+sys\.argv"#)),
            js_require_bound: re(&format!(r#"(?:const|let|var)\s+(\w+)\s*=\s*require\(\s*['"]{js}['"]\s*\)"#)),
            js_import_bound: re(&format!(r#"import\s+(?:\*\s+as\s+)?(\w+)(?:\s*,\s*\{{[^}}]*\}})?\s+from\s+['"]{js}['"]"#)),
            js_require_destructured: re(&format!(r#"(?:const|let|var)\s*\{{([^}}]*)\}}\s*=\s*require\(\s*['"]{js}['"]\s*\)"#)),
            js_import_destructured: re(&format!(r#"import\s+(?:\w+\s*,\s*)?\{{([^}}]*)\}}\s*from\s+['"]{js}['"]"#)),
            js_require_assign: re(&format!(r#"require\(\s*['"]{js}['"]\s*\)((?:\.\w+)+)\s*=[^=]"#)),
            js_matcher: re(r"\basymmetricMatch\b|\bexpect\.(?:anything|any)\s*\("),
            js_detects: re(r"\b(?:NODE_TEST_CONTEXT|JEST_WORKER_ID|VITEST_WORKER_ID|VITEST_POOL_ID|MOCHA_WORKER_ID)\b|process\.argv\b.*(?:--test\b|mocha|jest|vitest)|\btypeof\s+(?:describe|it|jest)\s*[!=]=="),
            rs_eq_def: re(r"^(?:pub(?:\([^)]*\))?\s+)?fn\s+(eq|ne)\s*\(\s*&self\s*,[^)]*\)\s*->\s*bool\s*\{\s*(.*)$"),
            rs_detects: re(r"\bcfg!\s*\(\s*test\s*\)|\bcfg\s*\(\s*not\s*\(\s*test\s*\)\s*\)"),
        }
    })
}

/// Whether [`find`] reads `path` (Python, JavaScript/TypeScript or Rust, by its extension).
pub fn reads(path: &str) -> bool {
    language(path).is_some()
}

/// What the lines the work added to `path` (its base text `old`, `None` when the work added
/// the file) do to the test framework. `test_file`: `path` is a test or configures them
/// (`verify::testfiles`), where skipping a test, matching anything and knowing that tests run
/// are the tests' own business.
pub fn find(path: &str, old: Option<&str>, new: &str, test_file: bool) -> Vec<Tampering> {
    let Some(language) = language(path) else {
        return Vec::new();
    };
    let added = added_lines(old.unwrap_or_default(), new);
    if added.is_empty() {
        return Vec::new();
    }
    let lines: Vec<&str> = new.lines().collect();
    let names = framework_names(language, &lines);
    let mut out = Vec::new();
    for &index in &added {
        let line = lines[index].trim();
        let what = match language {
            Language::Python => python_line(line, index, &lines, &names, test_file),
            Language::Script => script_line(line, &names, test_file),
            Language::Rust => rust_line(line, index, &lines, test_file),
        };
        if let Some(what) = what {
            out.push(Tampering {
                path: path.to_owned(),
                line: index + 1,
                text: line.chars().take(200).collect(),
                what,
            });
        }
    }
    out
}

/// The indexes of `new`'s lines that `old` does not hold (each line of `old` matches one line
/// of `new` with the same trimmed text).
fn added_lines(old: &str, new: &str) -> Vec<usize> {
    let mut kept: HashMap<&str, usize> = HashMap::new();
    for line in old.lines() {
        *kept.entry(line.trim()).or_default() += 1;
    }
    new.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let line = line.trim();
            if line.is_empty() {
                return None;
            }
            match kept.get_mut(line) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    None
                }
                _ => Some(i),
            }
        })
        .collect()
}

/// The names the file binds to the test framework: the Python modules themselves, the names
/// they are imported as, and what is imported from them (`TestCase`).
fn framework_names(language: Language, lines: &[&str]) -> HashSet<String> {
    let p = patterns();
    let mut names = HashSet::new();
    match language {
        Language::Python => {
            names.extend(PYTHON_FRAMEWORKS.iter().map(|m| m.to_string()));
            for line in lines.iter().map(|l| l.trim()) {
                if let Some(c) = p.py_dynamic_import.captures(line) {
                    names.insert(c[1].to_owned());
                } else if let Some(c) = p.py_import_as.captures(line) {
                    names.insert(c[1].to_owned());
                } else if let Some(c) = p.py_from_import.captures(line) {
                    for item in c[1].split(',') {
                        let item: Vec<&str> = item.split_whitespace().collect();
                        match item.as_slice() {
                            [name] => names.insert((*name).to_owned()),
                            [_, "as", alias] => names.insert((*alias).to_owned()),
                            _ => false,
                        };
                    }
                }
            }
        }
        Language::Script => {
            for line in lines {
                for re in [&p.js_require_bound, &p.js_import_bound] {
                    for c in re.captures_iter(line) {
                        names.insert(c[1].to_owned());
                    }
                }
                // `{ strict: s }` binds `s`, `{ strict as s }` too, `{ strict }` binds `strict`.
                for re in [&p.js_require_destructured, &p.js_import_destructured] {
                    for c in re.captures_iter(line) {
                        for item in c[1].split(',') {
                            let bound = item
                                .rsplit([':', ' '])
                                .map(str::trim)
                                .find(|w| !w.is_empty() && *w != "as");
                            if let Some(bound) = bound {
                                names.insert(bound.to_owned());
                            }
                        }
                    }
                }
            }
        }
        Language::Rust => {}
    }
    names
}

/// Whether `line` assigns to an attribute reached from one of `names` (`x.y.z = …`, not
/// `x.y == …`), other than how failures are printed.
fn assigns_through(line: &str, names: &HashSet<String>) -> bool {
    let Some((target, rest)) = line.split_once('=') else {
        return false;
    };
    if rest.starts_with('=') || target.ends_with(['!', '<', '>', '=']) {
        return false;
    }
    let target = target
        .trim()
        .trim_end_matches(['+', '-', '*', '/', '|', '&']);
    let mut parts = target.trim().split('.');
    let Some(head) = parts.next() else {
        return false;
    };
    let rest: Vec<&str> = parts.collect();
    let is_name = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
    !rest.is_empty()
        && names.contains(head)
        && rest.iter().all(|part| is_name(part))
        && !PRESENTATION.contains(rest.last().expect("not empty"))
}

/// `setattr(x, …)` / `Object.defineProperty(x, …)` with `x` one of `names`.
fn sets_attribute_of(line: &str, calls: &[&str], names: &HashSet<String>) -> bool {
    calls.iter().any(|call| {
        line.match_indices(call).any(|(at, _)| {
            let args = &line[at + call.len()..];
            let first: String = args
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
                .collect();
            let head = first.split('.').next().unwrap_or_default();
            names.contains(head)
        })
    })
}

fn python_line(
    line: &str,
    index: usize,
    lines: &[&str],
    names: &HashSet<String>,
    test_file: bool,
) -> Option<&'static str> {
    let p = patterns();
    if !test_file && p.py_skip.is_match(line) {
        return Some(SKIPS_TESTS);
    }
    if !test_file && p.py_any.is_match(line) {
        return Some(MATCHER_IN_CODE);
    }
    if !test_file && p.py_detects.is_match(line) {
        return Some(DETECTS_TESTS);
    }
    if assigns_through(line, names)
        || sets_attribute_of(line, &["setattr("], names)
        || p.py_sys_modules.is_match(line)
        || p.py_import_hook.is_match(line)
    {
        return Some(ASSIGNS_FRAMEWORK);
    }
    if p.py_dunder_lambda.is_match(line) {
        return Some(EQUALS_ANYTHING);
    }
    if let Some(c) = p.py_dunder_def.captures(line) {
        let constant = if &c[1] == "__eq__" { "True" } else { "False" };
        let body = first_statement(c.get(2).map_or("", |m| m.as_str()), index, lines, "#");
        let returned = body.strip_prefix("return").map(str::trim);
        if returned.is_some_and(|r| r.split('#').next().unwrap_or_default().trim() == constant) {
            return Some(EQUALS_ANYTHING);
        }
    }
    None
}

/// The first statement of a body that starts with `inline` on line `index` (else on the next
/// line that is neither blank nor a comment starting with `comment`, nor a docstring's start).
fn first_statement<'a>(inline: &'a str, index: usize, lines: &[&'a str], comment: &str) -> &'a str {
    let inline = inline.trim();
    if !inline.is_empty() && !inline.starts_with(comment) {
        return inline;
    }
    lines[index + 1..]
        .iter()
        .map(|l| l.trim())
        .find(|l| !l.is_empty() && !l.starts_with(comment) && !l.starts_with("\"\"\""))
        .unwrap_or_default()
}

/// `fn eq(&self, …) -> bool { true }` (or `ne` returning `false`): a `PartialEq` that holds for
/// anything; outside the tests, `cfg!(test)` and `#[cfg(not(test))]` (code that is another when
/// the crate's own tests build it).
fn rust_line(line: &str, index: usize, lines: &[&str], test_file: bool) -> Option<&'static str> {
    if !test_file && patterns().rs_detects.is_match(line) {
        return Some(DETECTS_TESTS);
    }
    let c = patterns().rs_eq_def.captures(line)?;
    let constant = if &c[1] == "eq" { "true" } else { "false" };
    let body = first_statement(c.get(2).map_or("", |m| m.as_str()), index, lines, "//");
    let body = body.strip_prefix("return").unwrap_or(body);
    let body = body.split("//").next().unwrap_or_default();
    (body
        .trim()
        .trim_end_matches('}')
        .trim()
        .trim_end_matches(';')
        .trim()
        == constant)
        .then_some(EQUALS_ANYTHING)
}

fn script_line(line: &str, names: &HashSet<String>, test_file: bool) -> Option<&'static str> {
    let p = patterns();
    if !test_file && p.js_matcher.is_match(line) {
        return Some(MATCHER_IN_CODE);
    }
    if !test_file && p.js_detects.is_match(line) {
        return Some(DETECTS_TESTS);
    }
    let line = line.trim_end_matches(';');
    if p.js_require_assign.captures(line).is_some_and(|c| {
        let attribute = c[1].rsplit('.').next().unwrap_or_default();
        !PRESENTATION.contains(&attribute)
    }) || assigns_through(line, names)
        || sets_attribute_of(
            line,
            &[
                "Object.defineProperty(",
                "Object.defineProperties(",
                "Object.assign(",
                "Object.setPrototypeOf(",
                "Reflect.set(",
                "Reflect.defineProperty(",
            ],
            names,
        )
    {
        return Some(ASSIGNS_FRAMEWORK);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(path: &str, old: Option<&str>, new: &str) -> Vec<(usize, &'static str)> {
        let test_file = crate::verify::testfiles::TestMatcher::new(&[]).is_test(path);
        find(path, old, new, test_file)
            .into_iter()
            .map(|t| (t.line, t.what))
            .collect()
    }

    #[test]
    fn python_assignments_to_the_framework_are_found_through_any_import() {
        let base = "def add(a, b):\n    return a - b\n";
        for (new, line) in [
            (
                "import unittest\n\nunittest.TestCase.assertEqual = lambda self, *a, **k: None\n",
                3,
            ),
            ("import unittest as ut\nut.TestCase.assertEqual = None\n", 2),
            (
                "from unittest import TestCase as T\nT.assertEqual = lambda *a: None\n",
                2,
            ),
            (
                "from unittest import main, TestCase\nTestCase.run = lambda *a, **k: None\n",
                2,
            ),
            (
                "import unittest\nsetattr(unittest.TestCase, 'assertTrue', id)\n",
                2,
            ),
            ("import sys\nsys.modules['unittest'] = object()\n", 2),
            (
                "import _pytest.python\n_pytest.python.Function.runtest = print\n",
                2,
            ),
            (
                "import unittest.case\nunittest.case.TestCase.fail = print\n",
                2,
            ),
            ("import unittest.case as c\nc.TestCase.fail = print\n", 2),
            (
                "from unittest import result\nresult.TestResult.wasSuccessful = lambda s: True\n",
                2,
            ),
            (
                "u = __import__('unittest')\nu.TestCase.assertEqual = print\n",
                2,
            ),
            (
                "import importlib\nu = importlib.import_module('unittest')\nu.TestCase.assertTrue = print\n",
                3,
            ),
            (
                "import builtins\nbuiltins.__import__ = lambda *a: None\n",
                2,
            ),
        ] {
            assert_eq!(
                found("calc.py", Some(base), &format!("{new}{base}")),
                [(line, ASSIGNS_FRAMEWORK)],
                "{new}"
            );
        }
    }

    #[test]
    fn values_equal_to_anything_are_found() {
        for new in [
            "class Sum(int):\n    def __eq__(self, other):\n        return True\n",
            "class Sum(int):\n    def __eq__(self, other) -> bool: return True\n",
            "class Sum(int):\n    def __eq__(self, other):\n        # always\n        return True  # yes\n",
            "class Sum(int):\n    def __ne__(self, other):\n        return False\n",
            "class Sum(int):\n    __eq__ = lambda self, other: True\n",
        ] {
            assert_eq!(found("calc.py", None, new), [(2, EQUALS_ANYTHING)], "{new}");
        }
        let honest = "class P:\n    def __eq__(self, other):\n        return isinstance(other, P) and self.x == other.x\n    def __ne__(self, other):\n        return not self == other\n";
        assert!(found("calc.py", None, honest).is_empty());
    }

    #[test]
    fn code_that_skips_its_test_or_matches_anything_is_found_outside_tests() {
        for (path, new, what) in [
            (
                "calc.py",
                "import unittest\ndef add(a, b):\n    raise unittest.SkipTest('later')\n",
                SKIPS_TESTS,
            ),
            (
                "calc.py",
                "import pytest\npytest.skip('x', allow_module_level=True)\n",
                SKIPS_TESTS,
            ),
            (
                "calc.py",
                "from unittest import mock\ndef add(a, b):\n    return mock.ANY\n",
                MATCHER_IN_CODE,
            ),
            (
                "index.js",
                "exports.add = () => ({ asymmetricMatch: () => true });\n",
                MATCHER_IN_CODE,
            ),
        ] {
            let lines = new.lines().count();
            assert_eq!(found(path, None, new), [(lines, what)], "{new}");
        }
        for (path, new) in [
            (
                "calc.py",
                "import sys\ndef add(a, b):\n    return a + b if 'unittest' in sys.modules else a - b\n",
            ),
            (
                "calc.py",
                "import os\ndef add(a, b):\n    if os.environ.get('PYTEST_CURRENT_TEST'): return a + b\n",
            ),
            (
                "index.js",
                "exports.add = (a, b) => process.env.NODE_TEST_CONTEXT ? a + b : a - b;\n",
            ),
            (
                "index.js",
                "exports.add = (a, b) => (process.env.JEST_WORKER_ID ? a + b : a - b);\n",
            ),
            (
                "src/lib.rs",
                "pub fn add(a: i32, b: i32) -> i32 {\n    if cfg!(test) { a + b } else { a - b }\n}\n",
            ),
            ("src/lib.rs", "#[cfg(not(test))]\n"),
        ] {
            let at: Vec<usize> = found(path, None, new).iter().map(|f| f.0).collect();
            assert!(
                found(path, None, new).iter().any(|f| f.1 == DETECTS_TESTS),
                "{new}: {at:?}"
            );
        }
        let honest = "#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n";
        assert!(found("src/lib.rs", None, honest).is_empty());
        assert!(
            found(
                "app.js",
                None,
                "if (process.env.NODE_ENV === 'test') { log = () => {}; }\n"
            )
            .is_empty()
        );
        // In a test they are the test's own.
        assert!(
            found(
                "test_calc.py",
                None,
                "import unittest\nraise unittest.SkipTest('slow')\n"
            )
            .is_empty()
        );
        assert!(
            found(
                "test_calc.py",
                None,
                "from unittest import mock\nx = mock.ANY\n"
            )
            .is_empty()
        );
        assert!(
            found(
                "test/a.test.js",
                None,
                "expect(x).toEqual(expect.anything());\n"
            )
            .is_empty()
        );
    }

    #[test]
    fn a_rust_partial_eq_that_holds_for_anything_is_found() {
        for new in [
            "impl PartialEq for Sum {\n    fn eq(&self, _other: &Self) -> bool {\n        true\n    }\n}\n",
            "impl PartialEq<i32> for Sum {\n    fn eq(&self, _: &i32) -> bool { true }\n}\n",
            "impl PartialEq for Sum {\n    fn ne(&self, _o: &Self) -> bool {\n        return false;\n    }\n}\n",
        ] {
            assert_eq!(
                found("src/lib.rs", None, new),
                [(2, EQUALS_ANYTHING)],
                "{new}"
            );
        }
        let honest = "impl PartialEq for P {\n    fn eq(&self, other: &Self) -> bool {\n        self.x == other.x\n    }\n}\n";
        assert!(found("src/lib.rs", None, honest).is_empty());
    }

    #[test]
    fn node_assignments_to_assert_are_found() {
        let base = "exports.add = (a, b) => a - b;\n";
        for new in [
            "require('node:assert').strictEqual = () => {};\n",
            "require(\"assert\").deepEqual = function () {};\n",
            "const a = require('assert');\na.strictEqual = () => {};\n",
            "import assert from 'node:assert/strict';\nassert.equal = () => {};\n",
            "import * as chai from 'chai';\nchai.Assertion.prototype.assert = () => {};\n",
            "const assert = require('assert');\nObject.defineProperty(assert, 'ok', { value: () => {} });\n",
            "const { strict: s } = require('node:assert');\ns.equal = () => {};\n",
            "const { strict } = require('assert');\nstrict.equal = () => {};\n",
            "import { strict as s } from 'assert';\ns.deepEqual = () => {};\n",
            "const Module = require('module');\nModule._load = () => ({});\n",
            "require('node:module').prototype.require = () => ({});\n",
        ] {
            let lines = new.lines().count();
            assert_eq!(
                found("index.js", Some(base), &format!("{new}{base}")),
                [(lines, ASSIGNS_FRAMEWORK)],
                "{new}"
            );
        }
    }

    #[test]
    fn honest_uses_of_the_framework_are_not_tampering() {
        let python = "import unittest\nfrom unittest import mock\n\n\nclass T(unittest.TestCase):\n    maxDiff = None\n\n    def test_x(self):\n        self.assertEqual(1, 1)\n        if unittest.TestCase.maxDiff == 0:\n            pass\n\n\nunittest.TestCase.maxDiff = None\nresult = unittest.main(exit=False)\n";
        assert!(found("test_x.py", None, python).is_empty());
        let script = "const assert = require('node:assert');\nconst chai = require('chai');\nchai.config.truncateThreshold = 0;\nconst result = assert.strictEqual(1, 1);\nlet ok = assert.ok === undefined;\nexports.check = (x) => assert.ok(x);\n";
        assert!(found("test/a.test.js", None, script).is_empty());
        // Lines the base already had are not the work's.
        let patched = "import unittest\nunittest.TestCase.assertEqual = None\n";
        assert!(found("calc.py", Some(patched), patched).is_empty());
        // Other languages and names are not read.
        assert!(found("notes.md", None, "unittest.TestCase.assertEqual = None\n").is_empty());
        assert!(found("calc.py", None, "config.TestCase = None\nx.y = 1\n").is_empty());
    }
}
