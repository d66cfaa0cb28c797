//! The result's test files made to fail, to see that a check reports them: every file a check's
//! runner could load as a test (a test by its layout or named by a check, or a code file holding
//! tests beside its code) gets, in its own language, a statement that fails when the runner loads
//! it. A check that ran tests on the final tree and still passes over those files does not report
//! the tree's tests: something the work added decides its verdict (a module shadowing the runner
//! or a library it imports, a recipe or script that no longer runs the tests, a runner setting
//! that leaves them out), whatever its name. Pure: the final gate replays the tree
//! (`run::stage_runner::ReplayTree::FinalWithFailingTests`) and judges.

use std::sync::OnceLock;

use regex::Regex;

use super::testfiles::TestMatcher;

/// What each failure says: named so a person reading a replay's output knows who wrote it.
const WHY: &str = "autocode made this test file fail, to see that the check reports its tests";

/// Whether `path` may get a failure (its language has one here) and is a test, or a file that
/// may hold tests beside its code or under names a runner was configured to collect (read with
/// [`with_failure`]).
pub fn may_take_a_failure(path: &str, matcher: &TestMatcher) -> bool {
    match Language::of(path) {
        Some(Language::Rust | Language::Python | Language::Script) => true,
        Some(_) => matcher.is_test(path),
        None => false,
    }
}

/// What the runners of a tree's checks collect beyond its test files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Collected {
    /// Python doctests in code: a check names `doctest` (`python3 -m doctest`, `pytest
    /// --doctest-modules`), or a pytest configuration adds `--doctest-modules`. Otherwise a
    /// module's doctests get no failure: a package's `__init__.py` holding doctests is imported
    /// by its own `setup.py` or build, and a failure there would stop the install of every
    /// `prepare` step instead of a test.
    pub python_doctests: bool,
}

impl Collected {
    /// What `checks` and the tree's test configurations (`configs`: each file's path and text)
    /// collect.
    pub fn of(checks: &[String], configs: &[(String, String)]) -> Collected {
        Collected {
            python_doctests: checks.iter().any(|c| c.contains("doctest"))
                || configs
                    .iter()
                    .any(|(_, text)| text.contains("doctest-modules")),
        }
    }

    /// Whether `path` is a configuration [`Collected::of`] reads.
    pub fn reads(path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        matches!(
            name,
            "pytest.ini" | "pyproject.toml" | "setup.cfg" | "tox.ini"
        )
    }
}

/// `text` (the file at `path`) with a statement that fails when a runner loads it, or `None`
/// when the file holds no test (`is_test`: a test by its layout or named by a check; otherwise
/// a Rust file holds inline tests or doc-tests, a Python module test functions or classes, or
/// doctests that `collected` runs, a script `describe`/`it`/`test` calls).
pub fn with_failure(path: &str, text: &str, is_test: bool, collected: Collected) -> Option<String> {
    let language = Language::of(path)?;
    let holds_tests = is_test
        || match language {
            Language::Rust => {
                !super::testfiles::inline_tests(text).is_empty()
                    || !super::inline::rust_doctests(text).is_empty()
            }
            Language::Python => {
                (collected.python_doctests && !super::inline::python_doctests(text).is_empty())
                    || patterns().python.is_match(text)
            }
            Language::Script => patterns().script.is_match(text),
            _ => false,
        };
    if !holds_tests {
        return None;
    }
    let mut out = text.to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    match language {
        // Before the test crate compiles (an integration test, a unit test build, the doc-tests'
        // collection), whatever test a filter selects.
        Language::Rust if is_test && !path.starts_with("src/") && !path.contains("/src/") => {
            out.push_str(&format!("compile_error!(\"{WHY}\");\n"));
        }
        Language::Rust => {
            out.push_str(&format!(
                "#[cfg(any(test, doctest))]\ncompile_error!(\"{WHY}\");\n"
            ));
        }
        // When the module is imported (every runner imports a test module whole), right after
        // its leading imports: what they load runs first, nothing of the file's own does.
        Language::Python => {
            return Some(after_leading_imports(
                text,
                &format!("raise RuntimeError(\"{WHY}\")\n"),
                python_import,
            ));
        }
        // A package's test binary panics before any test, whatever `-run` selects.
        Language::Go => out.push_str(&format!("\nfunc init() {{ panic(\"{WHY}\") }}\n")),
        // When the file is loaded (node's runner, jest, vitest, mocha), after its imports.
        Language::Script => {
            return Some(after_leading_imports(
                text,
                &format!("throw new Error(\"{WHY}\");\n"),
                script_import,
            ));
        }
        Language::Perl => out.push_str(&format!("\ndie \"{WHY}\\n\";\n")),
        // Before the test compiles, wherever make, CMake or a script builds it.
        Language::CFamily => out.push_str(&format!("#error \"{WHY}\"\n")),
        Language::Ruby => out.push_str(&format!("raise \"{WHY}\"\n")),
        Language::Php if out.trim_end().ends_with("?>") => {
            out.push_str(&format!("<?php throw new \\Exception(\"{WHY}\");\n"));
        }
        Language::Php => out.push_str(&format!("throw new \\Exception(\"{WHY}\");\n")),
        // The file's status when run, and its sourcing shell's when sourced (`bats` sources
        // its file for every test).
        Language::Shell => out.push_str("exit 1\n"),
        // Words that are no statement of these languages: the test does not compile or load.
        Language::Unparsed => out.push_str(&format!("{WHY}\n")),
    }
    Some(out)
}

/// Whether `command` runs a test file directly with its interpreter (`python3 tests/check.py`,
/// `node test/run.js`, `perl t/calc.t`; a test by its layout, not merely named), every command
/// of it joined by `&&`: a failure the file is given then fails the check, whatever its output
/// says (a check whose runner prints no summary is asked so only then).
pub fn runs_a_test_directly(command: &str) -> bool {
    use super::shellwords::{Op, split_list, words};
    let parts = split_list(command);
    let layout = TestMatcher::new(&[]);
    parts
        .iter()
        .all(|(op, _, background)| matches!(op, Op::Start | Op::And) && !background)
        && parts.iter().any(|(_, part, _)| {
            let w = words(part);
            let mut args = w
                .iter()
                .skip_while(|x| x.contains('=') && !x.starts_with('-'));
            let Some(program) = args.next() else {
                return false;
            };
            let program = program.rsplit('/').next().unwrap_or(program);
            let interpreter = program == "node"
                || program == "perl"
                || program == "python"
                || program
                    .strip_prefix("python")
                    .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'));
            let script = args.find(|a| !a.starts_with('-'));
            interpreter
                && script.is_some_and(|s| {
                    Language::of(s).is_some() && layout.is_test(s.trim_start_matches("./"))
                })
        })
}

struct Patterns {
    python: Regex,
    script: Regex,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| Patterns {
        python: Regex::new(r"(?m)^\s*(?:async\s+)?def\s+test|^\s*class\s+Test|TestCase\)")
            .expect("pattern"),
        script: Regex::new(r#"(?m)(?:^|[^.\w$])(?:describe|it|test)(?:\.\w+)?\s*\(\s*['"`]"#)
            .expect("pattern"),
    })
}

/// `text` with `failure` inserted after its leading lines that `import_line` reads as imports
/// (blank lines, comments and a leading docstring or directive included), the lines of an
/// import's brackets kept whole.
fn after_leading_imports(
    text: &str,
    failure: &str,
    import_line: fn(&str) -> LeadingLine,
) -> String {
    let mut at = 0usize;
    let mut offset = 0usize;
    let mut depth: i64 = 0;
    let mut continued = false;
    let mut in_docstring: Option<&str> = None;
    let mut first = true;
    for line in text.split_inclusive('\n') {
        let end = offset + line.len();
        offset = end;
        let trimmed = line.trim();
        if let Some(quote) = in_docstring {
            if trimmed.contains(quote) {
                in_docstring = None;
            }
            at = end;
            continue;
        }
        if depth > 0 || continued {
            depth += brackets(line);
            continued = trimmed.ends_with('\\');
            at = end;
            continue;
        }
        let was_first = first;
        if !trimmed.is_empty() && !trimmed.starts_with('#') {
            first = false;
        }
        match import_line(line) {
            LeadingLine::Skipped => {}
            LeadingLine::Import => {
                depth = brackets(line);
                continued = trimmed.ends_with('\\');
                at = end;
            }
            LeadingLine::Docstring(quote) if was_first => {
                let opened = trimmed.find(quote).unwrap_or(0) + quote.len();
                if !trimmed[opened..].contains(quote) {
                    in_docstring = Some(quote);
                }
                at = end;
            }
            LeadingLine::Docstring(_) | LeadingLine::Other => break,
        }
    }
    let mut out = String::with_capacity(text.len() + failure.len() + 1);
    out.push_str(&text[..at]);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(failure);
    out.push_str(&text[at..]);
    out
}

/// How a leading line of a file reads, for [`after_leading_imports`].
enum LeadingLine {
    /// Blank, a comment, a directive: passed over.
    Skipped,
    /// An import (the lines of its brackets follow).
    Import,
    /// The opening of a docstring with this quote (only as the first statement).
    Docstring(&'static str),
    /// Anything else: the failure goes before it.
    Other,
}

fn python_import(line: &str) -> LeadingLine {
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return LeadingLine::Skipped;
    }
    // `sys.path.insert(0, …)` before an import is how a script finds the code it tests.
    if line.starts_with("import ") || line.starts_with("from ") || line.starts_with("sys.path.") {
        return LeadingLine::Import;
    }
    let unprefixed = trimmed.trim_start_matches(['r', 'u', 'R', 'U']);
    for quote in ["\"\"\"", "'''"] {
        if unprefixed.starts_with(quote) {
            return LeadingLine::Docstring(quote);
        }
    }
    LeadingLine::Other
}

fn script_import(line: &str) -> LeadingLine {
    let trimmed = line.trim().trim_end_matches(';');
    if trimmed.is_empty()
        || trimmed.starts_with("//")
        || trimmed.starts_with("#!")
        || trimmed == "'use strict'"
        || trimmed == "\"use strict\""
    {
        return LeadingLine::Skipped;
    }
    let require = trimmed.contains("require(")
        && ["const ", "let ", "var ", "require("]
            .iter()
            .any(|p| trimmed.starts_with(p));
    if line.starts_with("import ") || line.starts_with("import{") || require {
        return LeadingLine::Import;
    }
    LeadingLine::Other
}

/// Opening brackets less closing ones in `line` (strings and comments not told apart).
fn brackets(line: &str) -> i64 {
    line.chars()
        .map(|c| match c {
            '(' | '[' | '{' => 1,
            ')' | ']' | '}' => -1,
            _ => 0,
        })
        .sum()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    Rust,
    Python,
    Go,
    /// JavaScript and TypeScript.
    Script,
    Perl,
    /// C, C++, Objective-C and their headers.
    CFamily,
    Ruby,
    Php,
    /// Shell scripts and bats files.
    Shell,
    /// Java, Kotlin, Scala, Groovy, C#, F#, Swift, Dart, Elixir, Lua: a line of words fails them.
    Unparsed,
}

impl Language {
    fn of(path: &str) -> Option<Language> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let ext = name.rsplit_once('.').map(|(_, e)| e)?;
        match ext {
            "rs" => Some(Language::Rust),
            "py" => Some(Language::Python),
            "go" if name.ends_with("_test.go") => Some(Language::Go),
            "js" | "mjs" | "cjs" | "ts" | "mts" | "cts" | "jsx" | "tsx"
                if !name.ends_with(".d.ts") =>
            {
                Some(Language::Script)
            }
            "t" => Some(Language::Perl),
            "c" | "h" | "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" | "m" | "mm" => {
                Some(Language::CFamily)
            }
            "rb" => Some(Language::Ruby),
            "php" => Some(Language::Php),
            "sh" | "bash" | "bats" => Some(Language::Shell),
            "java" | "kt" | "kts" | "scala" | "groovy" | "cs" | "fs" | "swift" | "dart" | "ex"
            | "exs" | "lua" => Some(Language::Unparsed),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Collected = Collected {
        python_doctests: true,
    };

    #[test]
    fn test_files_of_each_language_fail_when_loaded() {
        let m = TestMatcher::new(&[]);
        for (path, text, failure) in [
            ("tests/test_calc.py", "x = 1\n", "raise RuntimeError"),
            ("calc_test.go", "package calc\n", "func init() { panic"),
            ("test/calc.test.js", "x = 1\n", "throw new Error"),
            ("src/calc.spec.ts", "x = 1\n", "throw new Error"),
            ("t/calc.t", "ok(1);\n", "die \""),
            ("tests/cli.rs", "#[test]\nfn t() {}\n", "compile_error!"),
        ] {
            assert!(may_take_a_failure(path, &m), "{path}");
            let made = with_failure(path, text, true, ALL).unwrap();
            assert!(made.contains(failure), "{path}: {made}");
            assert!(made.contains(text), "{path}");
            assert!(made.contains(WHY), "{path}");
        }
        // Code that may hold tests is read; other files are not.
        assert!(may_take_a_failure("src/lib.rs", &m));
        assert!(may_take_a_failure("calc.py", &m));
        assert!(may_take_a_failure("src/calc.js", &m));
        assert!(!may_take_a_failure("calc.go", &m));
        assert!(!may_take_a_failure("types/index.d.ts", &m));
        assert!(!may_take_a_failure("Makefile", &m));
        assert!(!may_take_a_failure("tests/data.json", &m));
        assert_eq!(
            with_failure("src/calc.js", "export const f = () => 1;\n", false, ALL),
            None
        );
        assert_eq!(
            with_failure("src/re.js", "const ok = /a/.test('a');\n", false, ALL),
            None
        );
        assert!(
            with_failure(
                "checks/calc.js",
                "describe('calc', () => {});\n",
                false,
                ALL
            )
            .is_some()
        );
        assert!(with_failure("check_calc.py", "def test_add():\n    pass\n", false, ALL).is_some());
        assert!(
            with_failure(
                "checks.py",
                "class Calc(unittest.TestCase):\n    pass\n",
                false,
                ALL
            )
            .is_some()
        );
        // Tests of other languages fail to compile, raise or exit 1; their code is left alone.
        for (path, text, failure) in [
            (
                "tests/test_calc.c",
                "int main(void) { return 0; }\n",
                "#error \"",
            ),
            ("spec/calc_spec.rb", "describe Calc do\nend\n", "raise \""),
            (
                "tests/CalcTest.php",
                "<?php\nclass CalcTest {}\n",
                "throw new \\Exception",
            ),
            (
                "tests/CalcTest.php",
                "<?php class CalcTest {} ?>\n",
                "<?php throw new",
            ),
            ("test/calc.bats", "@test \"adds\" { true; }\n", "exit 1"),
            ("src/test/java/CalcTest.java", "class CalcTest {}\n", WHY),
        ] {
            assert!(may_take_a_failure(path, &m), "{path}");
            let made = with_failure(path, text, true, ALL).unwrap();
            assert!(
                made.starts_with(text) && made.contains(failure),
                "{path}: {made}"
            );
        }
        assert!(!may_take_a_failure("src/calc.c", &m));
        assert!(!may_take_a_failure("tests/fixtures/data.json", &m));
    }

    #[test]
    fn a_test_file_run_by_its_interpreter_is_read() {
        for command in [
            "python3 tests/check_calc.py",
            "cd web && node test/run.js",
            "PYTHONPATH=src python3.11 -u test_calc.py",
            "perl -Ilib t/calc.t",
        ] {
            assert!(runs_a_test_directly(command), "{command}");
        }
        for command in [
            "python3 cli.py square 3",
            "python3 tests/check_calc.py; git diff --exit-code",
            "python3 tests/check_calc.py || true",
            "python3 tests/check_calc.py | tee log",
            "python3 -m pytest",
            "bash tests/run.sh",
        ] {
            assert!(!runs_a_test_directly(command), "{command}");
        }
    }

    #[test]
    fn code_gets_a_failure_only_where_it_holds_tests() {
        let rust = "pub fn f() -> u8 { 1 }\n";
        assert_eq!(with_failure("src/lib.rs", rust, false, ALL), None);
        let inline =
            format!("{rust}#[cfg(test)]\nmod tests {{\n    #[test]\n    fn t() {{}}\n}}\n");
        let made = with_failure("src/lib.rs", &inline, false, ALL).unwrap();
        assert!(made.ends_with(&format!(
            "}}\n#[cfg(any(test, doctest))]\ncompile_error!(\"{WHY}\");\n"
        )));
        let doc = format!("/// ```\n/// assert_eq!(c::f(), 1);\n/// ```\n{rust}");
        assert!(with_failure("src/lib.rs", &doc, false, ALL).is_some());
        // An integration test fails whatever cfg it is built with.
        let made = with_failure("tests/it.rs", "#[test]\nfn t() {}", true, ALL).unwrap();
        assert!(made.ends_with(&format!("fn t() {{}}\ncompile_error!(\"{WHY}\");\n")));

        let py = "def f():\n    return 1\n";
        // A module's doctests get a failure only where a check or a configuration runs them.
        let documented = "def f():\n    \"\"\"\n    >>> f()\n    1\n    \"\"\"\n    return 1\n";
        assert_eq!(
            with_failure("pkg/__init__.py", documented, false, Collected::default()),
            None
        );
        assert!(Collected::of(&["python3 -m doctest -v calc.py".to_owned()], &[]).python_doctests);
        let config = (
            "pytest.ini".to_owned(),
            "[pytest]\naddopts = --doctest-modules\n".to_owned(),
        );
        assert!(Collected::of(&["pytest".to_owned()], &[config]).python_doctests);
        assert!(!Collected::of(&["pytest".to_owned()], &[]).python_doctests);
        assert_eq!(with_failure("calc.py", py, false, ALL), None);
        let doctest = "\"\"\"Calc.\n\n>>> f()\n1\n\"\"\"\nimport os\n\ndef f():\n    return 1\n";
        assert_eq!(
            with_failure("calc.py", doctest, false, ALL).unwrap(),
            format!(
                "\"\"\"Calc.\n\n>>> f()\n1\n\"\"\"\nimport os\nraise RuntimeError(\"{WHY}\")\n\ndef f():\n    return 1\n"
            )
        );
    }

    #[test]
    fn the_failure_comes_after_what_the_file_imports_and_before_its_own_code() {
        let text = "#!/usr/bin/env python3\n\"\"\"Tests.\"\"\"\nfrom __future__ import annotations\nimport unittest\nfrom calc import (\n    add,\n    sub,\n)\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\nif __name__ == '__main__':\n    unittest.main()\n";
        let made = with_failure("test_calc.py", text, true, ALL).unwrap();
        let raise = made.find("raise RuntimeError").unwrap();
        assert!(raise > made.find("    sub,\n)\n").unwrap());
        assert!(raise < made.find("class T").unwrap());
        // A script's path set-up is part of its imports.
        let script =
            "import sys\nsys.path.insert(0, '.')\nimport calc\n\nassert calc.add(2, 3) == 5\n";
        let made = with_failure("tests/check_calc.py", script, true, ALL).unwrap();
        let raise = made.find("raise").unwrap();
        assert!(raise > made.find("import calc").unwrap() && raise < made.find("assert").unwrap());
        // A script that ends itself early still fails first.
        let early = "import sys\nsys.exit(0)\n";
        let made = with_failure("test_x.py", early, true, ALL).unwrap();
        assert!(made.find("raise").unwrap() < made.find("sys.exit").unwrap());
        // A file without a final newline keeps its last line whole.
        assert_eq!(
            with_failure("test_y.py", "import os", true, ALL).unwrap(),
            format!("import os\nraise RuntimeError(\"{WHY}\")\n")
        );
        let js = "'use strict';\n// the calc\nconst assert = require('node:assert');\nimport {\n  add,\n} from './calc.js';\ntest('adds', () => assert.equal(add(2, 3), 5));\nprocess.exit(0);\n";
        let made = with_failure("test/calc.test.js", js, true, ALL).unwrap();
        let throw = made.find("throw new Error").unwrap();
        assert!(throw > made.find("} from './calc.js';").unwrap());
        assert!(throw < made.find("test('adds'").unwrap());
    }
}
