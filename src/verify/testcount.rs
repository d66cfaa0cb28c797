//! What a test runner's own output says about how many tests it ran: a replayed check that
//! passes with zero tests run selected nothing, so it cannot show that a criterion holds
//! (`python3 -m unittest -k zzz`, `cargo test no_such_test`, `pytest -k nothing`). The summary
//! lines of the common runners are read from the whole output of a check: unittest, pytest,
//! cargo/libtest and nextest, `node --test` (TAP and spec reporters), go, jest, vitest, mocha,
//! rspec, minitest, phpunit and ctest. A check no runner summary is found in (a script, `grep`,
//! an assertion in `python3 -c`) is [`TestTally::Unknown`]: it is judged by its exit status alone.

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
}

impl TestTally {
    /// Whether a runner said that no test ran.
    pub fn none_ran(self) -> bool {
        self == TestTally::Counted(0)
    }

    /// `Counted(n)` as `Some(n)`.
    pub fn count(self) -> Option<u64> {
        match self {
            TestTally::Unknown => None,
            TestTally::Counted(n) => Some(n),
        }
    }
}

struct Patterns {
    unittest: Regex,
    unittest_none: Regex,
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
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let re = |p: &str| Regex::new(p).expect("a constant regex");
        Patterns {
            unittest: re(r"(?m)^Ran (\d+) tests? in "),
            unittest_none: re(r"(?m)^NO TESTS RAN\b"),
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

/// How many tests `output` (a check's stdout and stderr) says ran.
pub fn tally(output: &str) -> TestTally {
    let p = patterns();
    let mut counts: Vec<u64> = Vec::new();
    let mut add = |n: Option<u64>| {
        if let Some(n) = n {
            counts.push(n);
        }
    };
    add(sum(&p.unittest, output));
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
        None => add(sum(&p.cargo, output)),
    }
    add(sum(&p.node, output));
    // go: `=== RUN` lines under -v; otherwise a package line either says it ran nothing or
    // that it passed (then at least one test ran, the count unknown).
    let go_runs = p.go_run.captures_iter(output).count() as u64;
    if go_runs > 0 {
        add(Some(go_runs));
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
    add(sum(&p.jest, output));
    if p.jest_none.is_match(output) || output.contains("No test files found, exiting with code") {
        add(Some(0));
    }
    add(sum(&p.vitest, output));
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

#[cfg(test)]
mod tests {
    use super::*;

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
            assert!(tally(output).none_ran());
        }
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
}
