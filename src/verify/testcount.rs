//! What a test runner's own output says about how many tests it ran: a replayed check that
//! passes with zero tests run selected nothing, so it cannot show that a criterion holds
//! (`python3 -m unittest -k zzz`, `cargo test no_such_test`, `pytest -k nothing`). The summary
//! lines of the common runners are read from the whole output of a check: unittest, pytest,
//! cargo/libtest and nextest, `node --test` (TAP and spec reporters), go, jest, vitest, mocha,
//! rspec, minitest, phpunit and ctest. A check no runner summary is found in (a script, `grep`,
//! an assertion in `python3 -c`) is [`TestTally::Unknown`]: it is judged by its exit status alone.
//!
//! A runner that started and never reported its end was cut short ([`TestTally::Unfinished`],
//! [`tally_check`]): code under test that ends the process with status 0 (`os._exit(0)` when a
//! test imports it, `std::process::exit(0)` in a tested function) makes the check exit 0 with
//! no verdict on a single test. Seen where the runner always reports: libtest's `running N
//! tests` with no `test result:` after it, a cargo test target that printed no libtest header
//! (a `harness = false` target or a `runner` that did not run the tests), and `unittest`,
//! `pytest` or `mocha` (its own reporter) named by the check and silent about its end. Code
//! that prints a forged summary before it exits is not seen here.
//!
//! A runner that reported failing tests in a check that exited 0 had its exit status changed
//! after its verdict ([`TestTally::FailuresReported`]: an `atexit` hook calling `os._exit(0)`,
//! a node `exit` handler setting `process.exitCode`): its summary's failures are read as the
//! check's, unless the check negates a command (`! pytest test_old.py`).

use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// How many tests a check's output says ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestTally {
    /// No test runner's summary in the output.
    #[default]
    Unknown,
    /// The runners' summaries, summed over every binary, file and package they report.
    Counted(u64),
    /// A runner started and did not report its end (see the module's comment).
    Unfinished,
    /// A runner reported failing tests (the module's comment): whatever the exit status.
    FailuresReported,
    /// The check changed test files of the tree while it ran (`run::replay`'s watch): the tests
    /// it ran are not the tree's.
    TestsRewritten,
}

/// Why a check that exited 0 did not pass: its runner says no test ran.
pub const NO_TEST_RAN: &str = "it exited 0 but its test runner says no test ran (the selection matched nothing): a check that runs no test cannot show that anything holds";

/// Why a check that exited 0 did not pass: its runner reported failing tests.
pub const FAILURES_REPORTED: &str = "it exited 0 but its test runner reported failing tests (its summary counts failures or errors: the exit status was changed after the runner's verdict, by the code under test or a runner setting): a check whose tests failed shows nothing holds";

/// Why a check that exited 0 did not pass: it changed the tree's test files while it ran.
pub const TESTS_REWRITTEN: &str = "it exited 0 but it changed test files of the tree while it ran (written, replaced or removed, by the code under test or a step of the check): the tests it ran are not the tree's, so it cannot show that anything holds";

/// Why a check that exited 0 did not pass: its runner never reported its end.
pub const RUNNER_CUT_SHORT: &str = "it exited 0 but its test runner never reported its end (no summary after it started: the process was ended before the tests' verdicts, by the code under test or a runner setting): a check cut short cannot show that anything holds";

impl TestTally {
    /// Whether a check that exited 0 with this tally shows nothing: its runner said that no
    /// test ran, or was cut short.
    pub fn shows_nothing(self) -> bool {
        self.why_nothing().is_some()
    }

    /// Why a check that exited 0 with this tally shows nothing, if it does.
    pub fn why_nothing(self) -> Option<&'static str> {
        match self {
            TestTally::Counted(0) => Some(NO_TEST_RAN),
            TestTally::Unfinished => Some(RUNNER_CUT_SHORT),
            TestTally::FailuresReported => Some(FAILURES_REPORTED),
            TestTally::TestsRewritten => Some(TESTS_REWRITTEN),
            TestTally::Unknown | TestTally::Counted(_) => None,
        }
    }

    /// `Counted(n)` as `Some(n)`.
    pub fn count(self) -> Option<u64> {
        match self {
            TestTally::Unknown
            | TestTally::Unfinished
            | TestTally::FailuresReported
            | TestTally::TestsRewritten => None,
            TestTally::Counted(n) => Some(n),
        }
    }
}

struct Patterns {
    unittest: Regex,
    unittest_none: Regex,
    unittest_stand_in: Regex,
    unittest_failed: Regex,
    unittest_failed_field: Regex,
    pytest_summary: Regex,
    pytest_count: Regex,
    pytest_none: Regex,
    cargo: Regex,
    nextest: Regex,
    node: Regex,
    go_run: Regex,
    go_ok: Regex,
    go_none: Regex,
    jest: Regex,
    jest_none: Regex,
    vitest: Regex,
    mocha: Regex,
    rspec: Regex,
    minitest: Regex,
    phpunit: Regex,
    phpunit_none: Regex,
    ctest: Regex,
    ctest_none: Regex,
    cargo_target: Regex,
    libtest_result: Regex,
    pytest_progress_end: Regex,
    pytest_sugar: Regex,
    failures: Vec<Regex>,
    pytest_failed: Regex,
    /// Tests a runner counted among those it ran but skipped (ignored, todo).
    unittest_skipped: Regex,
    libtest_ignored: Regex,
    node_skipped: Regex,
    jest_skipped: Regex,
    vitest_skipped: Regex,
    go_skipped: Regex,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let re = |p: &str| Regex::new(p).expect("a constant regex");
        Patterns {
            unittest: re(r"(?m)^Ran (\d+) tests? in "),
            unittest_none: re(r"(?m)^NO TESTS RAN\b"),
            unittest_failed: re(r"(?m)^FAILED \(([^)\n]*)\)"),
            unittest_failed_field: re(r"(failures|errors|unexpected successes)=(\d+)"),
            unittest_stand_in: re(
                r"(?m)^ERROR: \w+ \(unittest\.loader\.(?:_FailedTest|ModuleImportFailure)\b",
            ),
            pytest_summary: re(r"(?m)^=*\s*(.*\b\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)\b.*) in \d+(?:\.\d+)?s"),
            pytest_count: re(r"(\d+) (passed|failed|xfailed|xpassed)\b"),
            pytest_none: re(r"(?m)^=*\s*no tests ran\b"),
            cargo: re(r"(?m)^running (\d+) tests?$"),
            nextest: re(r"(?m)^\s*Summary \[.*\] (\d+) tests? run"),
            node: re(r"(?m)^(?:#|ℹ) tests (\d+)$"),
            go_run: re(r"(?m)^=== RUN\s+([^/\s]+)$"),
            go_ok: re(r"(?m)^ok  \t\S+\t(.*)$"),
            go_none: re(r"(?m)(\[no test files\]|no tests to run)"),
            jest: re(r"(?m)^Tests:\s+.*?(\d+) total"),
            jest_none: re(r"(?m)^No tests found, exiting with code \d+"),
            vitest: re(r"(?m)^\s*Tests\s+.*\((\d+)\)\s*$"),
            mocha: re(r"(?m)^\s*(\d+) (passing|failing)\b"),
            rspec: re(r"(?m)^(\d+) examples?, \d+ failures?"),
            minitest: re(r"(?m)^(\d+) runs, \d+ assertions"),
            phpunit: re(r"(?m)^(?:OK \((\d+) tests?|Tests: (\d+),)"),
            phpunit_none: re(r"(?m)^No tests executed!"),
            ctest: re(r"(?m)tests passed, \d+ tests failed out of (\d+)"),
            ctest_none: re(r"(?m)^No tests were found!!!"),
            // cargo's line before each test target it runs.
            cargo_target: re(r"(?m)^\s+Running (?:unittests )?(\S+) \(\S+\)$"),
            libtest_result: re(r"(?m)^test result: "),
            pytest_progress_end: re(r"(?m)\[100%\]\s*$"),
            // pytest-sugar's end, in place of the summary line.
            pytest_sugar: re(r"(?m)^Results \(\d+(?:\.\d+)?s\):\s*$"),
            // Each runner's own words for a run with failing tests.
            failures: vec![
                re(r"(?m)^test result: FAILED\."),
                re(r"(?m)^\s*Summary \[.*\] \d+ tests? run: .*\b[1-9]\d* failed"),
                re(r"(?m)^(?:#|ℹ) fail [1-9]"),
                re(r"(?m)^--- FAIL: "),
                re(r"(?m)^Tests:\s+.*\b[1-9]\d* failed"),
                re(r"(?m)^\s*Tests\s+[1-9]\d* failed"),
                re(r"(?m)^\s*[1-9]\d* failing\b"),
                re(r"(?m)^\d+ examples?, [1-9]\d* failures?"),
                re(r"(?m)^\d+ runs, \d+ assertions, (?:[1-9]\d* failures|\d+ failures, [1-9]\d* errors)"),
                re(r"(?m)^FAILURES!$"),
                re(r"(?m)tests passed, [1-9]\d* tests? failed out of \d+"),
            ],
            pytest_failed: re(r"\b[1-9]\d* (?:failed|errors?)\b"),
            unittest_skipped: re(r"(?m)^(?:OK|FAILED) \(.*\bskipped=(\d+)"),
            libtest_ignored: re(r"(?m)^test result: \w+\. \d+ passed; \d+ failed; (\d+) ignored;"),
            node_skipped: re(r"(?m)^(?:#|ℹ) (?:skip|skipped|todo) (\d+)$"),
            jest_skipped: re(r"(?m)^Tests:\s+.*?\b(\d+) (?:skipped|todo)\b"),
            vitest_skipped: re(r"(?m)^\s*Tests\s+.*?\b(\d+) (?:skipped|todo)\b.*\(\d+\)\s*$"),
            go_skipped: re(r"(?m)^--- SKIP: [^/\s]+ "),
        }
    })
}

fn sum(re: &Regex, output: &str) -> Option<u64> {
    let mut found = false;
    let mut total = 0u64;
    for c in re.captures_iter(output) {
        found = true;
        let n = c
            .iter()
            .skip(1)
            .flatten()
            .find_map(|m| m.as_str().parse::<u64>().ok())
            .unwrap_or(0);
        total = total.saturating_add(n);
    }
    found.then_some(total)
}

/// How many tests `output` (a check's stdout and stderr) says ran, skipped ones left out.
pub fn tally(output: &str) -> TestTally {
    let p = patterns();
    let mut counts: Vec<u64> = Vec::new();
    let mut add = |n: Option<u64>| {
        if let Some(n) = n {
            counts.push(n);
        }
    };
    // A skipped test is counted among those a runner ran; it shows nothing.
    let less = |n: Option<u64>, skipped: &Regex| {
        n.map(|n| n.saturating_sub(sum(skipped, output).unwrap_or(0)))
    };
    // unittest counts its stand-in for a name it could not load (`_FailedTest`) among the tests
    // it ran; no test ran in it (`verify::testids` leaves it out too).
    let stand_ins = unittest_errors(output).1;
    add(less(sum(&p.unittest, output), &p.unittest_skipped).map(|n| n.saturating_sub(stand_ins)));
    if p.unittest_none.is_match(output) {
        add(Some(0));
    }
    let mut pytest: Option<u64> = None;
    for summary in p.pytest_summary.captures_iter(output) {
        // libtest's `test result: ok. 2 passed; …; finished in 0.00s` is cargo's, counted below.
        if summary[0].contains("test result:") {
            continue;
        }
        let n: u64 = p
            .pytest_count
            .captures_iter(&summary[1])
            .filter_map(|c| c[1].parse::<u64>().ok())
            .sum();
        pytest = Some(pytest.unwrap_or(0).saturating_add(n));
    }
    if pytest.is_none() && p.pytest_none.is_match(output) {
        pytest = Some(0);
    }
    add(pytest);
    // nextest prints its own summary; libtest's `running N tests` lines are cargo test's.
    match sum(&p.nextest, output) {
        Some(n) => add(Some(n)),
        None => add(less(sum(&p.cargo, output), &p.libtest_ignored)),
    }
    add(less(sum(&p.node, output), &p.node_skipped));
    // go: `=== RUN` lines under -v; otherwise a package line either says it ran nothing or
    // that it passed (then at least one test ran, the count unknown).
    let go_runs = p.go_run.captures_iter(output).count() as u64;
    if go_runs > 0 {
        let skipped = p.go_skipped.find_iter(output).count() as u64;
        add(Some(go_runs.saturating_sub(skipped)));
    } else {
        let ran_something = p
            .go_ok
            .captures_iter(output)
            .any(|c| !p.go_none.is_match(&c[1]));
        if ran_something {
            // At least one test ran; without -v go does not say how many.
            add(Some(1));
        } else if p.go_none.is_match(output) {
            add(Some(0));
        }
    }
    add(less(sum(&p.jest, output), &p.jest_skipped));
    if p.jest_none.is_match(output) || output.contains("No test files found, exiting with code") {
        add(Some(0));
    }
    add(less(sum(&p.vitest, output), &p.vitest_skipped));
    add(sum(&p.mocha, output));
    add(sum(&p.rspec, output));
    add(sum(&p.minitest, output));
    add(sum(&p.phpunit, output));
    if p.phpunit_none.is_match(output) {
        add(Some(0));
    }
    add(sum(&p.ctest, output));
    if p.ctest_none.is_match(output) {
        add(Some(0));
    }
    if counts.is_empty() {
        TestTally::Unknown
    } else {
        TestTally::Counted(counts.iter().fold(0u64, |a, b| a.saturating_add(*b)))
    }
}

/// How many tests a check's whole output says ran, and whether a runner it started was cut
/// short (the module's comment). `output_whole` is false when the output was cut at a capture
/// limit: an end that is missing may only be beyond it, so nothing is read as cut short.
pub fn tally_check(command: &str, output: &str, output_whole: bool) -> TestTally {
    let counted = tally(output);
    if failures_reported(command, output) {
        TestTally::FailuresReported
    } else if output_whole && cut_short(command, output) {
        TestTally::Unfinished
    } else {
        counted
    }
}

/// Whether a runner's summary in `output` counts failing tests, in a check that does not ask
/// for a failure (`! pytest test_old.py`: its exit status is the negation's).
fn failures_reported(command: &str, output: &str) -> bool {
    if negates_a_command(command) {
        return false;
    }
    let p = patterns();
    unittest_failures(output)
        || p.failures.iter().any(|re| re.is_match(output))
        || p.pytest_summary.captures_iter(output).any(|summary| {
            !summary[0].contains("test result:") && p.pytest_failed.is_match(&summary[1])
        })
}

/// Whether unittest's `FAILED (failures=…, errors=…)` lines count a failing test: its errors
/// for names it could not load (`_FailedTest`) are not tests (`tally` leaves them out too).
fn unittest_failures(output: &str) -> bool {
    let (failing, stand_ins, errors) = unittest_errors(output);
    failing > 0 || errors > stand_ins
}

/// unittest's failing tests (failures and unexpected successes), its stand-ins for names it
/// could not load, and its errors, summed over the `FAILED (…)` lines of `output`. The stand-ins
/// are read only when there are no more of them than errors: output that names more is not
/// unittest's own (code printing stand-in lines to hide its errors), and none is taken.
fn unittest_errors(output: &str) -> (u64, u64, u64) {
    let p = patterns();
    let (mut failing, mut errors) = (0u64, 0u64);
    for line in p.unittest_failed.captures_iter(output) {
        for field in p.unittest_failed_field.captures_iter(&line[1]) {
            let n: u64 = field[2].parse().unwrap_or(u64::MAX);
            match &field[1] {
                "errors" => errors = errors.saturating_add(n),
                _ => failing = failing.saturating_add(n),
            }
        }
    }
    let stand_ins = p.unittest_stand_in.find_iter(output).count() as u64;
    let stand_ins = if stand_ins <= errors { stand_ins } else { 0 };
    (failing, stand_ins, errors)
}

/// Whether `command` negates one of its commands (`! pytest test_old.py`): its exit status is
/// the negation's, so a failing runner is what it asks for.
pub fn negates_a_command(command: &str) -> bool {
    super::shellwords::split_list(command)
        .iter()
        .any(|(_, part, _)| part.starts_with('!'))
}

fn cut_short(command: &str, output: &str) -> bool {
    let p = patterns();
    let headers = p.cargo.find_iter(output).count();
    let results = p.libtest_result.find_iter(output).count();
    // A `benches/` target run in test mode (criterion's own harness) prints no libtest header.
    let targets = p
        .cargo_target
        .captures_iter(output)
        .filter(|c| !c[1].starts_with("benches/") && !c[1].contains("/benches/"))
        .count();
    if headers > results || targets > headers {
        return true;
    }
    runners_named(command)
        .into_iter()
        .any(|runner| match runner {
            Runner::Unittest => !p.unittest.is_match(output) && !p.unittest_none.is_match(output),
            Runner::Pytest => {
                !p.pytest_summary.is_match(output)
                    && !p.pytest_none.is_match(output)
                    && !p.pytest_progress_end.is_match(output)
                    && !p.pytest_sugar.is_match(output)
            }
            Runner::Mocha => !p.mocha.is_match(output),
        })
}

/// A test runner whose end is always in its output (mocha's with its own reporter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runner {
    Unittest,
    Pytest,
    Mocha,
}

/// The test runners a check runs with their output left to the check's own (not piped into
/// another command, not redirected), and asked to run tests (not `--collect-only`, `--help`,
/// `--version`, pytest's terminal reporter turned off, mocha with another reporter).
fn runners_named(command: &str) -> Vec<Runner> {
    use super::shellwords::{Op, split_list, words};
    let list = split_list(command);
    let mut out = Vec::new();
    for (i, (_, part, _)) in list.iter().enumerate() {
        if list.get(i + 1).is_some_and(|(op, _, _)| *op == Op::Pipe) {
            continue;
        }
        let w = words(part);
        if w.iter().any(|w| w.contains('>')) {
            continue;
        }
        let Some(start) = w.iter().position(|w| {
            let name = w.rsplit('/').next().unwrap_or(w);
            name.starts_with("python") || matches!(name, "pytest" | "py.test" | "mocha" | "_mocha")
        }) else {
            continue;
        };
        // Before it: assignments, `env`, or a runner of tools (`uv run`, `poetry run`, ...).
        let prefix_ok = w[..start].iter().all(|x| {
            x.contains('=')
                || x.starts_with('-')
                || matches!(
                    x.as_str(),
                    "env"
                        | "uv"
                        | "poetry"
                        | "pipenv"
                        | "pdm"
                        | "rye"
                        | "hatch"
                        | "run"
                        | "exec"
                        | "npx"
                        | "yarn"
                        | "pnpm"
                )
        });
        if !prefix_ok {
            continue;
        }
        let name = w[start].rsplit('/').next().unwrap_or(&w[start]);
        let args = &w[start + 1..];
        let runner = match name {
            "pytest" | "py.test" => Some((Runner::Pytest, args)),
            "mocha" | "_mocha" => Some((Runner::Mocha, args)),
            _ => python_module(args).and_then(|(module, rest)| match module {
                "pytest" => Some((Runner::Pytest, rest)),
                "unittest" => Some((Runner::Unittest, rest)),
                _ => None,
            }),
        };
        let Some((runner, rest)) = runner else {
            continue;
        };
        let runs_no_test = rest.iter().enumerate().any(|(j, a)| {
            matches!(
                a.as_str(),
                "--co"
                    | "--collect-only"
                    | "-h"
                    | "--help"
                    | "--version"
                    | "-V"
                    | "--fixtures"
                    | "--markers"
            ) || (a == "-p" && rest.get(j + 1).is_some_and(|n| n == "no:terminal"))
                || a == "-pno:terminal"
                || (runner == Runner::Mocha && mocha_reports_otherwise(a, rest.get(j + 1)))
        });
        if !runs_no_test {
            out.push(runner);
        }
    }
    out
}

/// Mocha's reporters that end with `N passing`.
const MOCHA_PASSING_REPORTERS: [&str; 7] =
    ["spec", "dot", "list", "min", "progress", "nyan", "landing"];

/// Whether mocha's argument `arg` (followed by `next`) asks for a reporter that does not end
/// with `N passing` (`--reporter json`), or for no run (`--list-files`).
fn mocha_reports_otherwise(arg: &str, next: Option<&String>) -> bool {
    let reporter = match arg {
        "-R" | "--reporter" => next.map(String::as_str),
        _ => arg.strip_prefix("--reporter="),
    };
    arg == "--list-files" || reporter.is_some_and(|r| !MOCHA_PASSING_REPORTERS.contains(&r))
}

/// The module `python -m MODULE` runs and the arguments after it, if the interpreter runs one.
fn python_module(args: &[String]) -> Option<(&str, &[String])> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-m" => return args.get(i + 1).map(|m| (m.as_str(), &args[i + 2..])),
            "-W" | "-X" => i += 2,
            "-c" => return None,
            _ if a.starts_with("-m") => return Some((&a[2..], &args[i + 1..])),
            _ if a.starts_with('-') => i += 1,
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_tests_are_not_counted_as_run() {
        for (output, n) in [
            (
                "s\n----------------------------------------------------------------------\nRan 1 test in 0.000s\n\nOK (skipped=1)\n",
                0,
            ),
            (
                ".s\n----------------------------------------------------------------------\nRan 2 tests in 0.000s\n\nOK (skipped=1)\n",
                1,
            ),
            (
                "running 1 test\ntest adds ... ignored\n\ntest result: ok. 0 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s\n",
                0,
            ),
            (
                "# tests 2\n# suites 0\n# pass 0\n# fail 0\n# cancelled 0\n# skipped 0\n# skip 1\n# todo 1\n",
                0,
            ),
            ("Tests:       1 skipped, 1 passed, 2 total\n", 1),
            (" Tests  1 passed | 2 skipped (3)\n", 1),
            (
                "=== RUN   TestA\n--- SKIP: TestA (0.00s)\n=== RUN   TestB\n--- PASS: TestB (0.00s)\nPASS\n",
                1,
            ),
        ] {
            assert_eq!(tally(output), TestTally::Counted(n), "{output}");
        }
    }

    #[test]
    fn runners_that_ran_nothing_say_so() {
        for output in [
            "\n----------------------------------------------------------------------\nRan 0 tests in 0.000s\n\nOK\n",
            "\n----------------------------------------------------------------------\nRan 0 tests in 0.000s\n\nNO TESTS RAN\n",
            "collected 3 items / 3 deselected / 0 selected\n\n============================ 3 deselected in 0.01s =============================\n",
            "no tests ran in 0.01s\n",
            "============================ no tests ran in 0.00s =============================\n",
            "   Compiling v v0.1.0\n    Finished test\n     Running unittests src/lib.rs (target/debug/deps/v-1)\n\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 3 filtered out; finished in 0.00s\n\n   Doc-tests v\n\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n",
            "TAP version 13\n1..0\n# tests 0\n# suites 0\n# pass 0\n# fail 0\n",
            "ℹ tests 0\nℹ suites 0\nℹ pass 0\n",
            "?   \texample.com/v\t[no test files]\n",
            "testing: warning: no tests to run\nPASS\nok  \texample.com/v\t0.002s [no tests to run]\n",
            "No tests found, exiting with code 0\nRun with `--passWithNoTests` to exit with code 0\n",
            "No test files found, exiting with code 0\n",
            "\n\n  0 passing (1ms)\n\n",
            "No tests executed!\n",
            "No tests were found!!!\n",
        ] {
            assert_eq!(tally(output), TestTally::Counted(0), "{output}");
            assert!(tally(output).shows_nothing());
        }
    }

    #[test]
    fn unittest_stand_ins_for_names_it_could_not_load_are_not_tests() {
        let by_id = "E\n======================================================================\nERROR: test_century (unittest.loader._FailedTest.test_century)\n----------------------------------------------------------------------\nAttributeError: type object 'Leap' has no attribute 'test_century'\n\n----------------------------------------------------------------------\nRan 1 test in 0.000s\n\nFAILED (errors=1)\n";
        assert_eq!(tally(by_id), TestTally::Counted(0));
        let beside = ".E\n======================================================================\nERROR: test_nope (unittest.loader._FailedTest.test_nope)\n----------------------------------------------------------------------\nImportError: Failed to import test module: test_nope\n\n----------------------------------------------------------------------\nRan 2 tests in 0.000s\n\nFAILED (errors=1)\n";
        assert_eq!(tally(beside), TestTally::Counted(1));
        // Failing for a stand-in only is no failing test; a real error or failure beside it is.
        let check = "python3 -m unittest -v test_cal.Leap.test_century";
        assert_eq!(tally_check(check, by_id, true), TestTally::Counted(0));
        assert_eq!(
            tally_check(check, &by_id.replace("errors=1", "errors=2"), true),
            TestTally::FailuresReported
        );
        // More stand-in lines than errors are not unittest's: none is taken.
        let forged = by_id.replace(
            "Ran 1 test",
            &format!(
                "{}Ran 1 test",
                by_id.lines().nth(2).unwrap().to_owned() + "\n"
            ),
        );
        assert_eq!(
            tally_check(check, &forged, true),
            TestTally::FailuresReported
        );
        assert_eq!(
            tally_check(
                check,
                &by_id.replace("errors=1", "failures=1, errors=1"),
                true
            ),
            TestTally::FailuresReported
        );
    }

    #[test]
    fn runners_that_ran_tests_are_counted() {
        let cases: [(&str, u64); 13] = [
            ("ok  \texample.com/v\t0.002s\n", 1),
            (
                "...\n----------------------------------------------------------------------\nRan 3 tests in 0.001s\n\nOK\n",
                3,
            ),
            (
                "..                                                                       [100%]\n2 passed in 0.01s\n",
                2,
            ),
            (
                "========================= 1 failed, 4 passed, 2 skipped in 0.12s =========================\n",
                5,
            ),
            (
                "running 2 tests\ntest a ... ok\ntest b ... ok\n\ntest result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n   Doc-tests v\n\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n",
                2,
            ),
            (
                "     Summary [   0.010s] 7 tests run: 7 passed, 0 skipped\n",
                7,
            ),
            ("# tests 4\n# pass 4\n", 4),
            (
                "=== RUN   TestVowels\n--- PASS: TestVowels (0.00s)\n=== RUN   TestVowels/upper\nPASS\nok  \tv\t0.002s\n",
                1,
            ),
            ("Tests:       1 failed, 5 passed, 6 total\n", 6),
            (" Test Files  1 passed (1)\n      Tests  3 passed (3)\n", 3),
            ("  2 passing (4ms)\n  1 failing\n", 3),
            ("5 examples, 0 failures\n", 5),
            ("100% tests passed, 0 tests failed out of 9\n", 9),
        ];
        for (output, n) in cases {
            assert_eq!(tally(output), TestTally::Counted(n), "{output}");
        }
    }

    #[test]
    fn other_output_is_unknown() {
        for output in [
            "",
            "hello\n",
            "Traceback (most recent call last):\nAssertionError\n",
            "3 passed the vibe check\n",
        ] {
            assert_eq!(tally(output), TestTally::Unknown, "{output}");
        }
    }

    #[test]
    fn a_runner_cut_short_shows_nothing() {
        let libtest_cut = "   Compiling calc v0.1.0\n     Running tests/add.rs (target/debug/deps/add-1)\n\nrunning 1 test\n";
        let no_header = "   Compiling calc v0.1.0\n    Finished `test` profile\n     Running tests/add.rs (target/debug/deps/add-1)\n";
        let unittest_silent = "";
        let pytest_silent = "============================= test session starts ==============================\ncollected 0 items / 1 error\n";
        for (command, output) in [
            ("cargo test --offline --test add", libtest_cut),
            ("cargo test --offline --test add", no_header),
            ("python3 -m unittest test_calc", unittest_silent),
            (
                "cd sub && .venv/bin/python -X dev -m pytest -q",
                pytest_silent,
            ),
            ("uv run --with pytest pytest tests", ""),
            ("npx mocha test/", ""),
            ("./node_modules/.bin/mocha --exit", "\n"),
            ("npx mocha --check-leaks --reporter dot test/kib.js", ""),
            (
                "PYTHONPATH=src python3 -munittest discover -s tests",
                "...\n",
            ),
        ] {
            let t = tally_check(command, output, true);
            assert_eq!(t, TestTally::Unfinished, "{command}: {output}");
            assert_eq!(t.why_nothing(), Some(RUNNER_CUT_SHORT));
            // An end that may lie beyond the capture limit is not read as missing.
            assert_ne!(tally_check(command, output, false), TestTally::Unfinished);
        }
    }

    #[test]
    fn a_runner_that_reported_its_end_is_not_cut_short() {
        let cargo_ok = "     Running unittests src/lib.rs (target/debug/deps/calc-1)\n\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n     Running tests/add.rs (target/debug/deps/add-2)\n\nrunning 1 test\ntest adds ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n   Doc-tests calc\n\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
        let criterion = "     Running tests/add.rs (target/debug/deps/add-2)\n\nrunning 1 test\ntest adds ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n     Running benches/speed.rs (target/debug/deps/speed-3)\nTesting add\nSuccess\n";
        let unittest = "..\n----------------------------------------------------------------------\nRan 2 tests in 0.001s\n\nOK\n";
        let pytest_qq =
            ".                                                                        [100%]\n";
        for (command, output, tally) in [
            ("cargo test --offline", cargo_ok, TestTally::Counted(1)),
            ("cargo test --all-targets", criterion, TestTally::Counted(1)),
            (
                "cargo test --workspace --all-targets",
                &criterion.replace("benches/speed.rs", "crates/core/benches/speed.rs"),
                TestTally::Counted(1),
            ),
            (
                "pytest",
                "test_slug.py ✓                                100% ██████████\n\nResults (0.03s):\n       1 passed\n",
                TestTally::Unknown,
            ),
            (
                "python3 -m unittest -q test_calc",
                unittest,
                TestTally::Counted(2),
            ),
            (
                ".venv/bin/python -m pytest -qq",
                pytest_qq,
                TestTally::Unknown,
            ),
            // Output the check hides or hands to another command is not the runner's to show.
            (
                "python3 -m unittest test_calc 2>/dev/null",
                "",
                TestTally::Unknown,
            ),
            ("python3 -m pytest -q | tail -1", "", TestTally::Unknown),
            (
                "python3 -m pytest --collect-only -q",
                "3 tests collected in 0.01s\n",
                TestTally::Unknown,
            ),
            ("python3 -c 'import calc'", "", TestTally::Unknown),
            ("python3 tools/check.py", "", TestTally::Unknown),
            (
                "npx mocha",
                "\n\n  2 passing (4ms)\n\n",
                TestTally::Counted(2),
            ),
            ("npx mocha --reporter json", "{}", TestTally::Unknown),
            ("npx mocha -R tap", "", TestTally::Unknown),
            ("make test", "", TestTally::Unknown),
        ] {
            assert_eq!(
                tally_check(command, output, true),
                tally,
                "{command}: {output}"
            );
        }
    }

    #[test]
    fn failures_a_runner_reported_are_read_whatever_the_exit_status() {
        for output in [
            "F                                                                        [100%]\n=========================== short test summary info ============================\nFAILED test_calc.py::test_add - assert -1 == 3\n1 failed in 0.03s\n",
            "========================= 1 failed, 4 passed in 0.12s =========================\n",
            "1 error in 0.05s\n",
            "F\n======================================================================\nFAIL: test_add (test_calc.AddTest)\n----------------------------------------------------------------------\nRan 1 test in 0.000s\n\nFAILED (failures=1)\n",
            "running 1 test\ntest adds ... FAILED\n\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n",
            "# tests 2\n# pass 1\n# fail 1\n",
            "  1 passing (3ms)\n  1 failing\n",
            "Tests:       1 failed, 5 passed, 6 total\n",
            "3 examples, 1 failure\n",
        ] {
            let t = tally_check("the check", output, true);
            assert_eq!(t, TestTally::FailuresReported, "{output}");
            assert_eq!(t.why_nothing(), Some(FAILURES_REPORTED));
        }
        // A check that asks for the failure.
        assert_ne!(
            tally_check(
                "! python3 -m pytest -q test_old.py",
                "1 failed in 0.03s\n",
                true
            ),
            TestTally::FailuresReported
        );
        // Expected failures, skips and passes are not failures.
        for output in [
            "2 passed, 1 xfailed in 0.04s\n",
            "Ran 3 tests in 0.001s\n\nOK (expected failures=1)\n",
            "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n",
            "# tests 2\n# pass 2\n# fail 0\n",
            "  2 passing (3ms)\n",
            "5 examples, 0 failures\n",
            "100% tests passed, 0 tests failed out of 9\n",
        ] {
            assert_ne!(
                tally_check("the check", output, true),
                TestTally::FailuresReported,
                "{output}"
            );
        }
    }
}
