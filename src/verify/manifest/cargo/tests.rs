use super::*;

const BASE: &str = "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nserde = \"1\"\n\n[dev-dependencies]\npretty_assertions = \"1\"\n";

fn cargo_test() -> Vec<String> {
    vec!["cargo test --offline".to_owned()]
}

#[test]
fn registry_dependencies_metadata_and_new_crates_of_the_tree_are_not_test_changes() {
    for new in [
        format!("{BASE}itoa = \"1.0.11\"\n").replace(
            "[dev-dependencies]\n",
            "[dev-dependencies]\nproptest = { version = \"1\", default-features = false }\n",
        ),
        BASE.replace(
            "serde = \"1\"",
            "serde = { version = \"1\", features = [\"derive\"] }\nbytes = \"1\"",
        ),
        BASE.replace(
            "version = \"0.1.0\"",
            "version = \"0.2.0\"\ndescription = \"sums\"\nlicense = \"MIT\"",
        ),
        BASE.replace(
            "[dependencies]\n",
            "[dependencies]\ncalc-core = { path = \"core\" }\n",
        ),
        format!(
            "{BASE}\n[features]\ndefault = [\"std\"]\nstd = []\n\n[profile.release]\nlto = true\n"
        ),
        format!("{BASE}\n[[bin]]\nname = \"calc\"\npath = \"src/main.rs\"\n"),
    ] {
        assert!(
            !cargo_toml_changes_tests(BASE, &new, &cargo_test()),
            "{new}"
        );
    }
}

#[test]
fn what_cargo_test_builds_and_runs_is_a_test_change() {
    for new in [
        format!("{BASE}\n[[test]]\nname = \"add\"\npath = \"support/add.rs\"\nharness = false\n"),
        BASE.replace(
            "edition = \"2021\"",
            "edition = \"2021\"\nautotests = false",
        ),
        format!("{BASE}\n[lib]\ntest = false\n"),
        format!("{BASE}\n[[bin]]\nname = \"calc\"\nharness = false\n"),
        format!("{BASE}\n[profile.test]\ndebug-assertions = false\n"),
        format!("{BASE}\n[patch.crates-io]\npretty_assertions = {{ path = \"fake\" }}\n"),
        BASE.replace(
            "pretty_assertions = \"1\"",
            "pretty_assertions = { path = \"vendor/pa\" }",
        ),
        BASE.replace(
            "pretty_assertions = \"1\"",
            "pretty_assertions = { git = \"https://example.com/pa\" }",
        ),
        BASE.replace(
            "pretty_assertions = \"1\"",
            "pretty_assertions = { package = \"fake-pa\", version = \"1\" }",
        ),
        format!("{BASE}\n[workspace]\nmembers = [\"core\"]\n"),
        "[package\nname = \"calc\"\n".to_owned(),
    ] {
        assert!(cargo_toml_changes_tests(BASE, &new, &cargo_test()), "{new}");
    }
    // The release profile counts when a check builds with it.
    let release = format!("{BASE}\n[profile.release]\ndebug-assertions = false\n");
    assert!(cargo_toml_changes_tests(
        BASE,
        &release,
        &["cargo test --release".to_owned()]
    ));
}

#[test]
fn an_added_cargo_toml_counts_only_for_what_could_fake_a_pass() {
    assert!(!added_cargo_toml_changes_tests(BASE));
    assert!(!added_cargo_toml_changes_tests(&format!(
        "{BASE}\n[[test]]\nname = \"integration\"\npath = \"tests/integration.rs\"\n"
    )));
    assert!(added_cargo_toml_changes_tests(&format!(
        "{BASE}\n[[test]]\nname = \"add\"\npath = \"support/add.rs\"\nharness = false\n"
    )));
    assert!(added_cargo_toml_changes_tests(&format!(
        "{BASE}\n[patch.crates-io]\nserde = {{ path = \"fake\" }}\n"
    )));
}

#[test]
fn cargo_config_counts_unless_it_is_about_the_network_and_the_terminal() {
    let base = "[net]\noffline = true\n";
    for new in [
        "[net]\noffline = true\n\n[target.x86_64-unknown-linux-gnu]\nrunner = \"true\"\n",
        "[net]\noffline = true\n\n[build]\nrustflags = [\"--cfg\", \"skip_slow\"]\n",
        "[net]\noffline = true\n\n[build]\nrustc-wrapper = \"./tools/rustc\"\n",
        "[net]\noffline = true\n\n[env]\nCALC_FAKE = \"1\"\n",
        "[net]\noffline = true\n\n[source.crates-io]\nreplace-with = \"vendored\"\n",
        "not toml [",
    ] {
        assert!(cargo_config_changes_tests(base, new), "{new}");
    }
    for new in [
        "[net]\noffline = false\nretry = 5\n",
        "[net]\noffline = true\n\n[build]\njobs = 2\ntarget-dir = \"out\"\n\n[term]\ncolor = \"never\"\n\n[alias]\nt = \"test\"\n",
    ] {
        assert!(!cargo_config_changes_tests(base, new), "{new}");
    }
}
