//! Tests of `verify::testids`.

use std::path::Path;

use super::*;

fn ids(output: &str) -> Vec<String> {
    collect(output, Path::new("/tmp/vtree-1"))
        .map(|ids| ids.0.into_iter().collect())
        .unwrap_or_default()
}

#[test]
fn libtest_ids_are_named_by_binary_without_ignored_tests_or_doc_test_lines() {
    let output = "   Compiling ct v0.1.0 (/tmp/vtree-1)\n     Running unittests src/lib.rs (target/debug/deps/ct-c4066ebb79ee0019)\n\nrunning 3 tests\ntest more::b ... ignored\ntest tests::it_works ... ok\ntest more::a ... FAILED\n\n     Running tests/i.rs (target/debug/deps/i-d737cabfea6ec851)\n\nrunning 1 test\ntest it_works ... ok\n\n   Doc-tests ct\n\nrunning 1 test\ntest src/lib.rs - f (line 15) ... ok\n";
    assert_eq!(
        ids(output),
        [
            "ct src/lib.rs - f",
            "src/lib.rs more::a",
            "src/lib.rs tests::it_works",
            "tests/i.rs it_works"
        ]
    );
}

#[test]
fn node_tap_and_spec_name_nested_tests_and_leave_out_skipped_ones() {
    let tap = "TAP version 13\n# Subtest: adds\nok 1 - adds\n  ---\n  duration_ms: 1.5701\n  ...\n# Subtest: group\n    # Subtest: inner one\n    ok 1 - inner one\n      ---\n      duration_ms: 0.212113\n      ...\n    # Subtest: inner two\n    not ok 2 - inner two\n      ---\n      ...\n    1..2\nok 2 - group\n# Subtest: skipped\nok 3 - skipped # SKIP\n1..3\n# tests 5\n";
    assert_eq!(
        ids(tap),
        ["adds", "group", "group > inner one", "group > inner two"]
    );
    let spec = "✔ adds (1.928866ms)\n▶ group\n  ✔ inner one (0.194538ms)\n  ✖ inner two (0.276509ms)\n✔ group (0.996638ms)\n﹣ skipped (0.205834ms) # SKIP\nℹ tests 5\n";
    assert_eq!(ids(spec), ["adds", "group", "inner one", "inner two"]);
}

#[test]
fn python_runners_name_tests_when_verbose() {
    let unittest = "test_one (test_u.TestA.test_one)\nDocstring here. ... ok\ntest_three (test_u.TestA.test_three) ... skipped 'no'\ntest_two (test_u.TestA.test_two) ... ok\ntest_old (test_u.TestB) ... FAIL\n\n----------------------------------------------------------------------\nRan 4 tests in 0.000s\n";
    assert_eq!(
        ids(unittest),
        [
            "test_u.TestA.test_one",
            "test_u.TestA.test_two",
            "test_u.TestB.test_old"
        ]
    );
    let pytest = "tests/test_a.py::test_x PASSED                       [ 50%]\ntests/test_a.py::test_y[1-2] FAILED                 [100%]\n/tmp/vtree-1/tests/test_b.py::test_z SKIPPED (no)\n=== short test summary info ===\nPASSED tests/test_c.py::test_w\n";
    assert_eq!(
        ids(pytest),
        [
            "tests/test_a.py::test_x",
            "tests/test_a.py::test_y[1-2]",
            "tests/test_c.py::test_w"
        ]
    );
}

#[test]
fn go_nextest_and_check_mark_reporters() {
    assert_eq!(
        ids(
            "=== RUN   TestA\n--- PASS: TestA (0.00s)\n    --- PASS: TestA/sub (0.00s)\n--- SKIP: TestB (0.00s)\nok  \tv\t0.01s\n"
        ),
        ["TestA", "TestA/sub"]
    );
    assert_eq!(
        ids(
            "        PASS [   0.004s] ct tests::it_works\n        FAIL [   0.010s] (2/3) ct::i it_fails\n"
        ),
        ["ct tests::it_works", "ct::i it_fails"]
    );
    assert_eq!(
        ids(
            "  vowels\n    ✓ counts vowels (3 ms)\n    ✕ ignores digits (1 ms)\n    ○ skipped later\n    - pending one\n"
        ),
        ["counts vowels", "ignores digits"]
    );
    // vitest's default reporter: a file line with its count and time; tape's `# time=` directive.
    assert_eq!(
        ids(
            " ✓ src/a.test.ts (3 tests) 2ms\nok 1 - adds # time=0.45ms\nok 2 - later # TODO not yet\n"
        ),
        ["adds", "src/a.test.ts (3 tests)"]
    );
}

#[test]
fn the_tree_root_is_cut_so_two_trees_give_the_same_ids() {
    let output = |root: &str| {
        format!("ok 1 - {root}/test/a.test.mjs\n# Subtest: {root}/b\nok 2 - {root}/b\n")
    };
    let a = collect(&output("/tmp/vtree-1"), Path::new("/tmp/vtree-1")).unwrap();
    let b = collect(&output("/run/x/tree"), Path::new("/run/x/tree/")).unwrap();
    assert_eq!(a, b);
    assert!(a.contains("test/a.test.mjs"));
}

#[test]
fn output_that_names_no_test_gives_no_ids() {
    for output in [
        "",
        "hello\n",
        "Ran 3 tests in 0.001s\n\nOK\n",
        "...\n3 passed in 0.01s\n",
    ] {
        assert_eq!(collect(output, Path::new("/t")), None, "{output}");
    }
}

#[test]
fn missing_ids_are_those_of_the_base_no_longer_run() {
    let base: TestIds = ["a", "b", "c"].map(String::from).into_iter().collect();
    let now: TestIds = ["a", "c", "d"].map(String::from).into_iter().collect();
    assert_eq!(base.missing_from(&now), ["b"]);
    assert!(now.missing_from(&now).is_empty());
}

#[test]
fn stand_ins_for_what_failed_before_any_test_are_not_tests() {
    // unittest: a module that did not import (the base tree's fail-to-pass check naming a test
    // module the work adds), and module and class fixtures that raised.
    let unittest = "test_textstats (unittest.loader._FailedTest.test_textstats) ... ERROR\nsetUpModule (test_a) ... ERROR\nsetUpClass (test_b.B) ... ERROR\ntest_old (test_u.TestB) ... ok\n\nRan 2 tests in 0.000s\n";
    assert_eq!(ids(unittest), ["test_u.TestB.test_old"]);
    // node --test: a test file that threw while loading is a failing entry named by its path.
    let tap = "TAP version 13\n# Subtest: /tmp/vtree-1/test/x.test.js\nnot ok 1 - /tmp/vtree-1/test/x.test.js\n  ---\n  failureType: 'testCodeFailure'\n  ...\n# Subtest: b\nok 2 - b\n1..2\n";
    assert_eq!(ids(tap), ["b"]);
    let spec = "✖ /tmp/vtree-1/test/x.test.js (130.03ms)\n  'test failed'\n✔ b (1.75ms)\n";
    assert_eq!(ids(spec), ["b"]);
    // A passing test that happens to be named by a path is still a test.
    assert_eq!(ids("ok 1 - routes/users.js\n"), ["routes/users.js"]);
}
