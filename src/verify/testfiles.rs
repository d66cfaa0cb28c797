//! Which files are tests: by a common layout or a test runner's own default discovery patterns,
//! by being named as a test by a check ([`TestMatcher`]), by holding inline tests (a Rust file's
//! `#[cfg(test)]` module or `#[test]` items, [`inline_tests`]), or by changing what the runners
//! collect (a file or package added beside an existing test module with the same name, a
//! `conftest.py`, `sitecustomize.py`, `.pth` file or a runner's configuration: [`shadows_tests`];
//! a module named as a test framework's: [`is_a_test_framework`]).

use std::collections::HashSet;

use super::shellwords::{split_list, words};

/// Whether `path` (relative, `/`-separated) looks like a test in a common layout, or is named by
/// one of `checks`. Asking about many paths, build a [`TestMatcher`] once.
pub fn looks_like_test(path: &str, checks: &[String]) -> bool {
    TestMatcher::new(checks).is_test(path)
}

/// Whether `path` looks like a test in a common layout or by a runner's own default discovery
/// patterns (its name, extension and directories): unittest's `test*.py` and packages, pytest's
/// `test_*.py`/`*_test.py`, node's `**/*.test.?(c|m)js`, `*-test`, `*_test`, `test-*`, `test.js`
/// and `test/**`, jest's `__tests__`, go's `_test.go`, Rust's `tests/` and `benches/`.
pub fn test_by_layout(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let dirs: Vec<&str> = path.split('/').collect();
    let dirs = &dirs[..dirs.len().saturating_sub(1)];
    let in_dir = |d: &str| dirs.contains(&d);
    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or_default();
    let stem = name.rsplit_once('.').map(|(s, _)| s).unwrap_or(name);
    match ext {
        "py" => {
            name.starts_with("test")
                || stem.ends_with("_test")
                || name == "conftest.py"
                || dirs.iter().any(|d| d.starts_with("test"))
        }
        "rs" => in_dir("tests") || in_dir("benches"),
        "go" => stem.ends_with("_test") || in_dir("testdata"),
        "js" | "ts" | "jsx" | "tsx" | "mjs" | "cjs" | "mts" | "cts" => {
            stem.ends_with(".test")
                || stem.ends_with("-test")
                || stem.ends_with("_test")
                || stem.ends_with(".spec")
                || stem == "test"
                || stem.starts_with("test-")
                || in_dir("__tests__")
                || in_dir("test")
                || in_dir("tests")
        }
        "java" | "kt" | "kts" | "scala" | "groovy" => {
            path.contains("src/test/")
                || stem.ends_with("Test")
                || stem.ends_with("Tests")
                || stem.ends_with("IT")
        }
        // C and C++ (`tests/test_x.c`, googletest's `x_unittest.cc`), Ruby (rspec's `spec/`,
        // minitest's `test/`), PHP (phpunit's `tests/`, `*Test.php`), .NET (`*Tests.cs`, a
        // `X.Tests` project), Swift (`Tests/`), shell (`*.bats`, `t/`), Perl's `t/*.t`, and the
        // `test/` directories of Dart, Elixir, Haskell, Lua, Zig.
        "c" | "h" | "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" | "m" | "mm" => {
            in_dir("test")
                || in_dir("tests")
                || stem.starts_with("test_")
                || stem.ends_with("_test")
                || stem.ends_with("_tests")
                || stem.ends_with("_unittest")
        }
        "rb" => {
            in_dir("spec")
                || in_dir("test")
                || stem.ends_with("_spec")
                || stem.ends_with("_test")
                || stem.starts_with("test_")
        }
        "php" => in_dir("tests") || in_dir("test") || stem.ends_with("Test"),
        "cs" | "fs" | "vb" => {
            stem.ends_with("Test")
                || stem.ends_with("Tests")
                || dirs
                    .iter()
                    .any(|d| d.ends_with(".Tests") || d.ends_with(".Test") || *d == "tests")
        }
        "swift" => in_dir("Tests") || stem.ends_with("Tests"),
        "bats" => true,
        "sh" | "bash" | "t" => in_dir("t") || in_dir("test") || in_dir("tests"),
        "dart" | "ex" | "exs" | "hs" | "lua" | "zig" => {
            in_dir("test") || in_dir("tests") || in_dir("spec") || stem.ends_with("_test")
        }
        _ => in_dir("testdata") || in_dir("fixtures"),
    }
}

/// Test runners: a file or module right after one of these (options skipped) is a test.
const TEST_RUNNERS: [&str; 10] = [
    "unittest", "pytest", "py.test", "bats", "prove", "mocha", "jest", "vitest", "tap", "ava",
];

/// Which paths the checks of a plan name as tests, parsed once: a reviewer's prompt and the
/// changed-test gate ask about every changed path against every check of the plan, and a long
/// plan makes both lists long (a lookup per path, not a pass over the checks).
///
/// A check names `path` as a test with a word (a path, or a Python module such as
/// `test_vowels` or `pkg.test_x`) that reads as a test (`test`, `spec` or `check` in the file's
/// name) or that a test runner is given. Code passed with `-c`/`-e` names nothing: the program
/// under test (`python3 greet.py`, `from stats import median`) is not a test.
#[derive(Debug, Clone, Default)]
pub struct TestMatcher {
    /// Every word of every command (options given to `-c`/`-e` and runner names left out).
    words: HashSet<String>,
    /// The words that follow a test runner in their command.
    after_runner: HashSet<String>,
}

impl TestMatcher {
    pub fn new(checks: &[String]) -> TestMatcher {
        let mut matcher = TestMatcher::default();
        for check in checks {
            for (_, command, _) in split_list(check) {
                let mut after_runner = false;
                let mut skip_next = false;
                for word in words(&command) {
                    if skip_next {
                        skip_next = false;
                        continue;
                    }
                    if word == "-c" || word == "-e" {
                        skip_next = true;
                        continue;
                    }
                    let w = word.trim_start_matches("./");
                    let w = w.split("::").next().unwrap_or(w);
                    if TEST_RUNNERS.contains(&w) {
                        after_runner = true;
                        continue;
                    }
                    if w.is_empty() {
                        continue;
                    }
                    if after_runner {
                        matcher.after_runner.insert(w.to_owned());
                    }
                    matcher.words.insert(w.to_owned());
                }
            }
        }
        matcher
    }

    /// Whether `path` looks like a test by its layout or is named as one by a check.
    pub fn is_test(&self, path: &str) -> bool {
        test_by_layout(path) || self.named(path)
    }

    fn named(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path).to_lowercase();
        let test_like = ["test", "spec", "check"].iter().any(|t| name.contains(t));
        let words = if test_like {
            &self.words
        } else {
            &self.after_runner
        };
        let module = path
            .strip_suffix("/__init__.py")
            .or_else(|| path.strip_suffix(".py"))
            .map(|p| p.replace('/', "."));
        words.contains(path) || module.is_some_and(|m| !m.is_empty() && words.contains(&m))
    }
}

/// Files that change what the test runners collect or how they run, whatever their layout.
const COLLECTION_FILES: [&str; 10] = [
    "conftest.py",
    "pyproject.toml",
    "setup.py",
    "sitecustomize.py",
    "usercustomize.py",
    "pytest.ini",
    "tox.ini",
    "setup.cfg",
    ".mocharc.json",
    ".mocharc.yml",
];

/// Whether `path` configures test collection: [`COLLECTION_FILES`], a `.pth` file, or a jest,
/// vitest, mocha or ava configuration; when a check runs a package manager (`npm`, `npx`,
/// `yarn`, `pnpm`, `bun`), `package.json` too (its `scripts.test` is what `npm test` runs) and
/// the package managers' own settings (`.npmrc`'s `node-options` loads code into every node the
/// check starts); a `Makefile` when a check runs `make` (its recipes are how `make test` runs
/// the tests); `Cargo.toml` and `.cargo/config.toml` when a check runs `cargo`.
pub fn configures_tests(path: &str, checks: &[String]) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let runs = |programs: &[&str]| {
        checks.iter().any(|c| {
            split_list(c).iter().any(|(_, part, _)| {
                let w = words(part);
                let program = w.iter().find(|x| !x.contains('='));
                program.is_some_and(|p| programs.contains(&p.rsplit('/').next().unwrap_or(p)))
            })
        })
    };
    COLLECTION_FILES.contains(&name)
        || is_a_test_framework(path)
        || name.ends_with(".pth")
        || ["jest.config.", "vitest.config.", ".mocharc.", "ava.config."]
            .iter()
            .any(|p| name.starts_with(p))
        || (matches!(
            name,
            "package.json" | ".npmrc" | ".yarnrc" | ".yarnrc.yml" | "bunfig.toml" | ".pnpmfile.cjs"
        ) && runs(&["npm", "npx", "yarn", "pnpm", "bun"]))
        || (MAKEFILES.contains(&name) && runs(&["make", "gmake"]))
        || ((name == "Cargo.toml" || is_cargo_config(path)) && runs(&["cargo"]))
}

/// Whether `path` is a module of a test framework by its name: Python's `unittest`, `pytest`,
/// `doctest`, `nose`, `hypothesis` (a module or a package of that name, at any depth: its
/// directory may be on `sys.path`), Perl's `Test::More`, `Test::Simple`, `Test::Builder`,
/// `Test2::…`. A test file imports the framework by that name, so one the work adds is
/// imported instead of the real one (its assertions may pass whatever they compare) wherever
/// its directory comes first: what the runners run changes, as with a `conftest.py`.
pub fn is_a_test_framework(path: &str) -> bool {
    const PYTHON: [&str; 8] = [
        "unittest",
        "pytest",
        "_pytest",
        "doctest",
        "pluggy",
        "nose",
        "nose2",
        "hypothesis",
    ];
    let parts: Vec<&str> = path.split('/').collect();
    let (dirs, name) = parts.split_at(parts.len().saturating_sub(1));
    let name = name.first().copied().unwrap_or_default();
    if let Some(stem) = name.strip_suffix(".py") {
        // A package of that name is its `__init__.py` (the modules of a test directory called
        // `unittest/` are tests either way).
        let package = stem == "__init__" && dirs.last().is_some_and(|d| PYTHON.contains(d));
        return PYTHON.contains(&stem) || package || dirs.contains(&"_pytest");
    }
    if name.ends_with(".pm") {
        let test_dir = dirs.iter().rposition(|d| *d == "Test" || *d == "Test2");
        return match test_dir {
            Some(i) if dirs[i] == "Test2" => true,
            Some(i) => {
                let below = &dirs[i + 1..];
                below.is_empty()
                    && matches!(name, "More.pm" | "Simple.pm" | "Builder.pm" | "Harness.pm")
                    || below.first() == Some(&"Builder")
            }
            None => false,
        };
    }
    false
}

/// The names GNU make reads a directory's rules from.
pub const MAKEFILES: [&str; 3] = ["GNUmakefile", "makefile", "Makefile"];

/// Whether `path` is cargo's configuration of a directory (`.cargo/config.toml`, or
/// `.cargo/config`, its older name).
pub fn is_cargo_config(path: &str) -> bool {
    [".cargo/config.toml", ".cargo/config"]
        .iter()
        .any(|c| path == *c || path.ends_with(&format!("/{c}")))
}

/// The Python module name a path provides (`pkg/test_x.py` → `test_x`, `test_x/__init__.py` →
/// `test_x`), if it is Python.
fn python_module(path: &str) -> Option<&str> {
    let module_path = path
        .strip_suffix("/__init__.py")
        .or_else(|| path.strip_suffix(".py"))?;
    module_path.rsplit('/').next().filter(|m| !m.is_empty())
}

/// Whether `added` (a path the work added) shadows a test module of the base tree: a Python
/// module or package with the name of a base test module (`test_vowels/__init__.py` beside
/// `test_vowels.py`: the package is imported instead), or a node file with the name of a base
/// test in another extension (`test-vowels.cjs` beside `test-vowels.mjs`).
pub fn shadows_tests(added: &str, base_paths: &[String], matcher: &TestMatcher) -> bool {
    if let Some(module) = python_module(added) {
        return base_paths
            .iter()
            .any(|b| b != added && matcher.is_test(b) && python_module(b) == Some(module));
    }
    let stem_of = |p: &str| -> Option<String> {
        let (stem, ext) = p.rsplit_once('.')?;
        matches!(ext, "js" | "mjs" | "cjs" | "ts" | "mts" | "cts").then(|| stem.to_owned())
    };
    match stem_of(added) {
        Some(stem) => base_paths
            .iter()
            .any(|b| b != added && matcher.is_test(b) && stem_of(b).as_deref() == Some(&stem)),
        None => false,
    }
}

/// The inline test items of a Rust source: each `#[cfg(test)]` item and each `#[test]` function,
/// as its text (attribute to closing brace), in order. Braces inside strings and comments are
/// not told apart from code: a best effort that errs towards longer items.
pub fn inline_tests(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = 0usize;
    while from < source.len() {
        let next = ["#[cfg(test)]", "#[test]", "#[tokio::test"]
            .iter()
            .filter_map(|m| source[from..].find(m).map(|p| p + from))
            .min();
        let Some(start) = next else {
            break;
        };
        let Some(open) = source[start..].find('{').map(|p| p + start) else {
            break;
        };
        let mut depth = 0i64;
        let mut end = source.len();
        for (i, c) in source[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push(source[start..end].to_owned());
        from = end;
    }
    out
}

/// Whitespace collapsed.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether the work removed or altered an inline test of a Rust source (`base` → `now`): every
/// `#[test]` function of the base, and the header of every `#[cfg(test)]` item holding them,
/// must still be in the source unchanged (new tests may be added).
pub fn inline_tests_changed(base: &str, now: &str) -> bool {
    let now = flat(now);
    let mut wanted: Vec<String> = Vec::new();
    for item in inline_tests(base) {
        match item.strip_prefix("#[cfg(test)]") {
            Some(rest) if !inline_tests(rest).is_empty() => {
                let header = item.split('{').next().unwrap_or_default();
                wanted.push(header.to_owned());
                wanted.extend(inline_tests(rest));
            }
            _ => wanted.push(item),
        }
    }
    wanted.iter().any(|w| !now.contains(&flat(w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_layouts_are_recognised() {
        let checks = vec!["python3 -m unittest -q pkg.check_all".to_owned()];
        for path in [
            "test_vowels.py",
            "vowels_test.py",
            "tests/helpers.py",
            "tests/it/run.rs",
            "pkg/x_test.go",
            "src/app.test.ts",
            "web/__tests__/a.js",
            "src/test/java/AppTest.java",
            "src/main/java/FooTest.java",
            "pkg/check_all.py",
            "tests/test_calc.c",
            "src/calc_unittest.cc",
            "test/helpers.h",
            "spec/models/user_spec.rb",
            "test/user_test.rb",
            "tests/Unit/CartTest.php",
            "App.Tests/CartTests.cs",
            "Tests/AppTests/CartTests.swift",
            "test/cli.bats",
            "t/basic.t",
            "tests/run.sh",
            "test/widget_test.dart",
        ] {
            assert!(looks_like_test(path, &checks), "{path}");
        }
        for path in [
            "vowels.py",
            "src/lib.rs",
            "main.go",
            "src/app.ts",
            "README.md",
            "src/calc.c",
            "include/calc.h",
            "lib/user.rb",
            "src/Cart.php",
            "App/Cart.cs",
            "Sources/App/Cart.swift",
            "scripts/build.sh",
            "lib/widget.dart",
        ] {
            assert!(!looks_like_test(path, &checks), "{path}");
        }
        // The program a check runs, or imports in its code, is not a test.
        let checks = vec![
            "python3 greet.py --shout ada | grep -q 'HELLO, ADA'".to_owned(),
            "python3 -c 'from stats import median; assert median([1]) == 1'".to_owned(),
            "pytest -q suite/acceptance.py".to_owned(),
            "sh verify_check.sh".to_owned(),
        ];
        assert!(!looks_like_test("greet.py", &checks));
        assert!(!looks_like_test("stats.py", &checks));
        assert!(looks_like_test("suite/acceptance.py", &checks));
        assert!(looks_like_test("verify_check.sh", &checks));
    }

    #[test]
    fn runner_default_patterns_and_packages_are_tests() {
        for path in [
            "test-vowels.mjs",
            "src/vowels-test.cjs",
            "src/vowels_test.js",
            "test.js",
            "lib/test/helpers.mjs",
            "tests.py",
            "testing_vowels.py",
            "test_vowels/__init__.py",
            "test_vowels/test_upper.py",
        ] {
            assert!(looks_like_test(path, &[]), "{path}");
        }
        for path in ["vowels.mjs", "contest.py", "src/latest.js"] {
            assert!(!looks_like_test(path, &[]), "{path}");
        }
        let checks = vec!["python3 -m unittest -q test_vowels".to_owned()];
        let matcher = TestMatcher::new(&checks);
        let base = vec![
            "test_vowels.py".to_owned(),
            "vowels.py".to_owned(),
            "t/test-a.mjs".to_owned(),
        ];
        assert!(shadows_tests("test_vowels/__init__.py", &base, &matcher));
        assert!(shadows_tests("lib/test_vowels.py", &base, &matcher));
        assert!(shadows_tests("t/test-a.cjs", &base, &matcher));
        assert!(!shadows_tests("vowels/__init__.py", &base, &matcher));
        assert!(!shadows_tests("test_consonants.py", &base, &matcher));
        assert!(configures_tests("sub/conftest.py", &[]));
        // A module of a test framework, added where a test file would import it.
        for path in [
            "unittest.py",
            "lib/pytest/__init__.py",
            "_pytest/main.py",
            "src/doctest.py",
            "lib/Test/More.pm",
            "lib/Test/Builder/Module.pm",
            "lib/Test2/V0.pm",
        ] {
            assert!(configures_tests(path, &[]), "{path}");
        }
        for path in [
            "unittest_helpers.py",
            "tests/test_unittest.py",
            "tests/unittest/test_calc.py",
            "lib/Test/Calc.pm",
            "lib/My/More.pm",
        ] {
            assert!(!configures_tests(path, &[]), "{path}");
        }
        assert!(configures_tests("x.pth", &[]));
        assert!(!configures_tests("package.json", &[]));
        assert!(configures_tests("package.json", &["npm test".to_owned()]));
        assert!(configures_tests(
            "package.json",
            &["CI=1 npx jest".to_owned()]
        ));
        assert!(configures_tests(".npmrc", &["npm test".to_owned()]));
        assert!(!configures_tests(
            ".npmrc",
            &["python3 -m pytest".to_owned()]
        ));
        assert!(configures_tests("Makefile", &["make -s test".to_owned()]));
        assert!(configures_tests(
            "sub/GNUmakefile",
            &["cd sub && make".to_owned()]
        ));
        assert!(!configures_tests("Makefile", &["cargo test".to_owned()]));
        assert!(configures_tests(
            "Cargo.toml",
            &["cargo test --offline".to_owned()]
        ));
        assert!(configures_tests(
            ".cargo/config.toml",
            &["cargo test".to_owned()]
        ));
        assert!(configures_tests(
            "crates/a/.cargo/config",
            &["cargo test".to_owned()]
        ));
        assert!(!configures_tests("config.toml", &["cargo test".to_owned()]));
        assert!(!configures_tests("Cargo.toml", &["make test".to_owned()]));
    }

    #[test]
    fn inline_rust_tests_removed_or_altered_are_found() {
        let base = "pub fn f() -> u8 { 0 }\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn one() { assert_eq!(f(), 1); }\n}\n";
        let honest = "pub fn f() -> u8 { 1 }\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn one() { assert_eq!(f(), 1); }\n    #[test]\n    fn two() { assert!(f() > 0); }\n}\n";
        let gutted = "pub fn f() -> u8 { 1 }\n\n#[cfg(test)]\nmod tests {}\n";
        let altered = "pub fn f() -> u8 { 2 }\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn one() { assert_eq!(f(), 2); }\n}\n";
        assert_eq!(inline_tests(base).len(), 1);
        assert!(!inline_tests_changed(base, honest));
        assert!(!inline_tests_changed(base, base));
        assert!(inline_tests_changed(base, gutted));
        assert!(inline_tests_changed(base, altered));
        assert!(inline_tests_changed(base, "pub fn f() -> u8 { 1 }\n"));
        assert!(!inline_tests_changed(
            "pub fn f() {}\n",
            "pub fn f() {}\n#[test]\nfn t() {}\n"
        ));
    }
}
