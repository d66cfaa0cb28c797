use super::*;

const BASE: &str = "CC = gcc\nCFLAGS = -Wall\nSRC = calc.c test_calc.c\nTEST_BIN = test_calc\n\n\
test_calc: $(SRC) calc.h\n\t$(CC) $(CFLAGS) -o $@ $(SRC)\n\n\
test: $(TEST_BIN)\n\t./$(TEST_BIN)\n\n\
install: test_calc\n\tcp test_calc /usr/local/bin\n\n.PHONY: test install\n";

fn checks(c: &[&str]) -> Vec<String> {
    c.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_reached_recipe_changed_is_a_test_change() {
    let make_test = checks(&["make test"]);
    for new in [
        // The test target's recipe prints a pass.
        BASE.replace("\t./$(TEST_BIN)\n", "\t@echo all tests passed\n"),
        // Its prerequisite's recipe writes a fake binary.
        BASE.replace(
            "\t$(CC) $(CFLAGS) -o $@ $(SRC)\n",
            "\tprintf '#!/bin/sh\\nexit 0\\n' > $@ && chmod +x $@\n",
        ),
        // The variable its recipe runs names another program.
        BASE.replace(
            "TEST_BIN = test_calc\n",
            "TEST_BIN = test_calc\nTEST_BIN = true\n",
        ),
        // More words on the link line, one of them a command.
        BASE.replace("-o $@ $(SRC)\n", "-o $@ $(SRC) && cp /bin/true $@\n"),
        BASE.replace(
            "CFLAGS = -Wall\n",
            "CFLAGS = -Wall\nEXTRA = ; cp /bin/true test_calc\n",
        )
        .replace("-o $@ $(SRC)\n", "-o $@ $(SRC) $(EXTRA)\n"),
        // `assert` turned off.
        BASE.replace("CFLAGS = -Wall", "CFLAGS = -Wall -DNDEBUG"),
        // The test target's recipe gains a flag: it runs the tests, any change counts.
        BASE.replace("\t./$(TEST_BIN)\n", "\t./$(TEST_BIN) --quick\n"),
        // A pattern rule's recipe.
        format!("{BASE}\n%.o: %.c\n\ttouch $@\n"),
        // The test target's recipe goes elsewhere through `$(MAKE)`, whose target prints.
        BASE.replace("\t./$(TEST_BIN)\n", "\t$(MAKE) quick\n") + "quick:\n\t@echo ok\n",
    ] {
        assert!(changes_tests(Some(BASE), &new, &make_test), "{new}");
    }
    // `make` alone builds the first target: its recipe counts.
    let default = BASE.replace(
        "\t$(CC) $(CFLAGS) -o $@ $(SRC)\n",
        "\t$(CC) $(CFLAGS) -o $@ $(SRC) || true\n",
    );
    assert!(changes_tests(
        Some(BASE),
        &default,
        &checks(&["make && ./test_calc"])
    ));
}

#[test]
fn sources_flags_new_rules_and_other_targets_are_not() {
    let make_test = checks(&["make -s test", "make check"]);
    for new in [
        // A new source in the list the compile recipe uses, and its own rule.
        BASE.replace(
            "SRC = calc.c test_calc.c",
            "SRC = calc.c util.c test_calc.c",
        ) + "\nutil.o: util.c util.h\n\t$(CC) $(CFLAGS) -c util.c\n",
        // Flags and libraries, in a variable and on the link line.
        BASE.replace("CFLAGS = -Wall", "CFLAGS = -Wall -O2\nLDLIBS = -lm")
            .replace("-o $@ $(SRC)\n", "-o $@ $(SRC) $(LDLIBS) -I.\n"),
        // A target no check reaches.
        BASE.replace(
            "cp test_calc /usr/local/bin",
            "install -m 755 test_calc /usr/local/bin",
        ),
        // Comments and layout.
        format!("# build and test calc\n{BASE}\n"),
        // A new goal the checks name, with its own variable and test program
        // (`scenarios-real/real-c-make`).
        BASE.replace(".PHONY: test install", ".PHONY: test install check")
            + "\nCHECK_BIN = integer_test\n\ncheck: $(CHECK_BIN)\n\t./$(CHECK_BIN)\n\n\
$(CHECK_BIN): calc.c integer_test.c calc.h\n\t$(CC) $(CFLAGS) -o $@ calc.c integer_test.c\n",
    ] {
        assert!(!changes_tests(Some(BASE), &new, &make_test), "{new}");
    }
}

#[test]
fn a_new_projects_makefile_counts_only_when_its_recipe_cannot_fail() {
    let make_test = checks(&["make test"]);
    assert!(!changes_tests(None, BASE, &make_test));
    let vacuous = BASE.replace("\t./$(TEST_BIN)\n", "\t@echo 3 tests passed\n");
    assert!(changes_tests(None, &vacuous, &make_test));
}

#[test]
fn the_real_cjson_makefile_parses_as_make_reads_it() {
    let text = "CJSON_TEST = cJSON_test\nCJSON_TEST_SRC = cJSON.c test.c\nCC = gcc -std=c89\n\
ifeq (Darwin, $(uname))\n\tSHARED = dylib\nendif\n\
.PHONY: all tests\n\nall: shared static tests\n\ntests: $(CJSON_TEST)\n\ntest: tests\n\t./$(CJSON_TEST)\n\n\
.c.o:\n\t$(CC) -c $(R_CFLAGS) $<\n\n\
$(CJSON_TEST): $(CJSON_TEST_SRC) cJSON.h\n\t$(CC) $(R_CFLAGS) $(CJSON_TEST_SRC)  -o $@ $(LDLIBS) -I.\n";
    let m = parse(text);
    assert_eq!(m.default_goal.as_deref(), Some("all"));
    assert!(m.patterns.contains_key(".c.o"));
    let goals: BTreeSet<String> = ["test".to_owned()].into();
    let r = reached(&m, &goals);
    assert!(r.contains("tests") && r.contains("cJSON_test"));
    // A variable's value is what follows its operator.
    assert!(r.iter().all(|t| !t.contains('=')), "{r:?}");
    assert_eq!(m.rules["cJSON_test"].recipe.len(), 1);
}

#[test]
fn the_real_c_make_cases_new_check_target_is_not_a_test_change() {
    // `scenarios-real/real-c-make`: cJSON's Makefile gains a `check` goal, its variable and its
    // test program's rule; the base's recipes are untouched.
    let old = include_str!("../../../../scenarios-real/real-c-make/seed/Makefile");
    let script: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../scenarios-real/real-c-make/scripts/scripted-codex.json"
    ))
    .unwrap();
    let new = script["conversation"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "builder")
        .flat_map(|c| c["step"].as_array().unwrap())
        .find(|s| s["kind"] == "write_file" && s["path"] == "Makefile")
        .and_then(|s| s["content"].as_str())
        .unwrap();
    let c = checks(&["make -s test", "make -s check", "make check", "make test"]);
    assert!(!changes_tests(Some(old), new, &c));
    // The same file with the test goal's recipe printing a pass is one.
    let faked = new.replace("\t./$(CJSON_TEST)\n", "\t@echo ok\n");
    assert!(changes_tests(Some(old), &faked, &c));
}
