//! Cargo's manifests as test changes: `Cargo.toml` holds the crate's dependencies beside what
//! `cargo test` builds and runs (its `[[test]]` targets, `harness`, `autotests`, profiles,
//! patches), and `.cargo/config.toml` says how cargo runs at all (a `runner` that runs the test
//! binaries, `rustflags`, `[env]`). A registry dependency added for new code is not a test
//! change (putting the base manifest back would leave that code unbuildable); what decides how
//! the tests build and run is.

use std::collections::BTreeSet;

use toml::{Table, Value};

use super::keys_of;

/// `[package]` keys that change which targets `cargo test` finds or how it builds them.
const PACKAGE_TEST_KEYS: [&str; 6] = [
    "autotests",
    "autobins",
    "autoexamples",
    "autolib",
    "autobenches",
    "build",
];

/// Keys of a dependency's table that keep it the registry's package by its own name.
const REGISTRY_DEPENDENCY_KEYS: [&str; 6] = [
    "version",
    "features",
    "default-features",
    "default_features",
    "optional",
    "workspace",
];

/// Keys of a `[lib]` or `[[bin]]` target that decide whether and how its tests run.
const TARGET_TEST_KEYS: [&str; 3] = ["test", "harness", "doctest"];

/// Whether changing `Cargo.toml` from `old` to `new` (either empty when absent) changes how
/// `checks` build and run the tests. Text that does not parse does.
pub(super) fn cargo_toml_changes_tests(old: &str, new: &str, checks: &[String]) -> bool {
    a_table_changes(old, new, |key, a, b| {
        match key {
            "package" => tables(a, b)
                .is_none_or(|(a, b)| PACKAGE_TEST_KEYS.iter().any(|k| a.get(*k) != b.get(*k))),
            "dependencies" | "dev-dependencies" | "build-dependencies" => {
                dependencies_change_tests(a, b)
            }
            "target" => tables(a, b).is_none_or(|(a, b)| {
                keys_of(&a, &b).into_iter().any(|platform| {
                    let (pa, pb) = (a.get(&platform), b.get(&platform));
                    pa != pb
                        && tables(pa, pb).is_none_or(|(pa, pb)| {
                            keys_of(&pa, &pb).into_iter().any(|k| {
                                pa.get(&k) != pb.get(&k)
                                    && (!k.ends_with("dependencies")
                                        || dependencies_change_tests(pa.get(&k), pb.get(&k)))
                            })
                        })
                })
            }),
            "lib" => tables(a, b)
                .is_none_or(|(a, b)| TARGET_TEST_KEYS.iter().any(|k| a.get(*k) != b.get(*k))),
            "bin" | "example" => bin_targets_change_tests(a, b),
            "profile" => tables(a, b).is_none_or(|(a, b)| {
                let release = checks
                    .iter()
                    .any(|c| c.contains("--release") || c.split_whitespace().any(|w| w == "-r"));
                keys_of(&a, &b)
                    .into_iter()
                    .any(|p| a.get(&p) != b.get(&p) && (p != "release" || release))
            }),
            "workspace" => tables(a, b).is_none_or(|(a, b)| {
                keys_of(&a, &b).into_iter().any(|k| {
                    a.get(&k) != b.get(&k)
                        && match k.as_str() {
                            "dependencies" => dependencies_change_tests(a.get(&k), b.get(&k)),
                            "package" | "metadata" | "lints" | "resolver" => false,
                            _ => true,
                        }
                })
            }),
            "features" | "lints" | "badges" => false,
            // `[[test]]`, `[[bench]]`, `[patch]`, `[replace]`, `cargo-features` and what
            // is not known.
            _ => true,
        }
    })
}

/// `.cargo/config.toml` tables that say where crates come from and how cargo talks to people,
/// not how it builds or runs anything.
const CONFIG_QUIET_TABLES: [&str; 8] = [
    "net",
    "http",
    "term",
    "cargo-new",
    "registries",
    "registry",
    "alias",
    "future-incompat-report",
];

/// `[build]` keys that change where or how much cargo builds, not what.
const CONFIG_QUIET_BUILD_KEYS: [&str; 3] = ["jobs", "target-dir", "incremental"];

/// Whether changing `.cargo/config.toml` (or `.cargo/config`) from `old` to `new` changes how the
/// tests build or run: any table but the quiet ones (a `[target.*] runner` runs the test
/// binaries, `rustflags` and `[env]` change what they are). Text that does not parse does.
pub(super) fn cargo_config_changes_tests(old: &str, new: &str) -> bool {
    a_table_changes(old, new, |key, a, b| match key {
        k if CONFIG_QUIET_TABLES.contains(&k) => false,
        "build" => tables(a, b).is_none_or(|(a, b)| {
            keys_of(&a, &b)
                .into_iter()
                .any(|k| a.get(&k) != b.get(&k) && !CONFIG_QUIET_BUILD_KEYS.contains(&k.as_str()))
        }),
        _ => true,
    })
}

/// Whether two dependency tables differ in an entry that now names something other than the
/// registry's package of that name: a `git` repository, another registry, a `package` rename,
/// or a `path` in place of a dependency the base had (a fake of the crate the tests use). A new
/// dependency on a crate of the tree (`path` alone) is the code's own.
fn dependencies_change_tests(old: Option<&Value>, new: Option<&Value>) -> bool {
    let Some((old, new)) = tables(old, new) else {
        return true;
    };
    keys_of(&old, &new).into_iter().any(|name| {
        let (before, after) = (old.get(&name), new.get(&name));
        before != after
            && match after {
                None | Some(Value::String(_)) => false,
                Some(Value::Table(t)) => t.keys().any(|k| {
                    !REGISTRY_DEPENDENCY_KEYS.contains(&k.as_str())
                        && (k != "path" || before.is_some())
                }),
                Some(_) => true,
            }
    })
}

/// Whether a `Cargo.toml` the work added where the base had none changes how the base's tests
/// run: no base test ran through it, so only what could make a test pass that should not counts
/// (a target run without libtest, `harness = false`; `[patch]` or `[replace]`; a dependency
/// from git or another registry, or renamed).
pub(super) fn added_cargo_toml_changes_tests(new: &str) -> bool {
    let Ok(new) = new.parse::<Table>() else {
        return true;
    };
    let no_harness = |v: &Value| match v {
        Value::Table(t) => t.get("harness") == Some(&Value::Boolean(false)),
        Value::Array(a) => a
            .iter()
            .any(|t| t.get("harness") == Some(&Value::Boolean(false))),
        _ => false,
    };
    let empty = Value::Table(Table::new());
    new.contains_key("patch")
        || new.contains_key("replace")
        || ["lib", "bin", "test", "example"]
            .iter()
            .any(|k| new.get(*k).is_some_and(no_harness))
        || ["dependencies", "dev-dependencies", "build-dependencies"]
            .iter()
            .any(|k| dependencies_change_tests(Some(&empty), new.get(*k)))
}

/// Whether two `[[bin]]` (or `[[example]]`) lists differ in whether or how a target's tests run
/// (its `test`, `harness`, `doctest`), by target name; a target added or removed with none of
/// them set does not count.
fn bin_targets_change_tests(old: Option<&Value>, new: Option<&Value>) -> bool {
    let settings = |v: Option<&Value>| -> Option<BTreeSet<(String, String)>> {
        let mut out = BTreeSet::new();
        let Some(v) = v else { return Some(out) };
        for target in v.as_array()? {
            let t = target.as_table()?;
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
            for k in TARGET_TEST_KEYS {
                if let Some(value) = t.get(k) {
                    out.insert((format!("{name}.{k}"), value.to_string()));
                }
            }
        }
        Some(out)
    };
    match (settings(old), settings(new)) {
        (Some(a), Some(b)) => a != b,
        _ => true,
    }
}

/// Two values as tables, an absent one as empty; `None` when one is something else.
fn tables(a: Option<&Value>, b: Option<&Value>) -> Option<(Table, Table)> {
    let table = |v: Option<&Value>| match v {
        None => Some(Table::new()),
        Some(Value::Table(t)) => Some(t.clone()),
        Some(_) => None,
    };
    Some((table(a)?, table(b)?))
}

/// Whether two TOML texts differ in a top-level table that `touches` says bears on the tests
/// (given its key and both values, only when they differ). Text that does not parse does.
fn a_table_changes(
    old: &str,
    new: &str,
    touches: impl Fn(&str, Option<&Value>, Option<&Value>) -> bool,
) -> bool {
    let (Ok(old), Ok(new)) = (old.parse::<Table>(), new.parse::<Table>()) else {
        return true;
    };
    keys_of(&old, &new).into_iter().any(|key| {
        let (a, b) = (old.get(&key), new.get(&key));
        a != b && touches(&key, a, b)
    })
}

#[cfg(test)]
mod tests;
