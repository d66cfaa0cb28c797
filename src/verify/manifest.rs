//! Manifests that hold a project's dependencies beside its test configuration (`package.json`,
//! `setup.cfg`, `pyproject.toml`, `setup.py`, `Makefile`, `.npmrc`, `Cargo.toml` and
//! `.cargo/config.toml`): whether a change to one changes how the tests run, or only what the
//! project depends on and how it builds.
//!
//! Such a file configures test collection by its name (`testfiles::configures_tests`), so a
//! change to it is put back to the base for the replay of the base tests against the result's
//! code. Adding a dependency the new code imports (`npm install --save is-number`, a line in
//! `install_requires`) changes the file too, and putting it back breaks that code: an honest
//! change would stop for a person. [`changes_tests`] tells the two apart by the file's content,
//! and answers yes whenever it cannot: a file that does not parse, a part it does not know, a
//! dependency that is not fetched from the registry by name and version (an alias, a path, a git
//! or tarball URL could put another package, a fake test runner say, in a real one's place). A
//! `package.json` added where the base had none is read on its own
//! (`added_package_json_changes_tests`). A `Makefile`'s recipes are how `make test` runs the
//! tests and its variables how the code builds (`make`); an `.npmrc`'s settings are where
//! packages come from unless they change how node or a script runs; cargo's manifests are read
//! in `cargo`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::shellwords::{split_list, words};

mod cargo;
mod make;

/// Whether changing the file `path` from `old` (`None`: the base tree has no such file) to `new`
/// (empty when deleted) changes how `checks` run their tests. Files other than the manifests
/// read here, and text that does not parse, do.
pub fn changes_tests(path: &str, old: Option<&str>, new: &str, checks: &[String]) -> bool {
    let base = old.unwrap_or_default();
    match path.rsplit('/').next().unwrap_or(path) {
        "package.json" => match old {
            None => added_package_json_changes_tests(new, checks),
            Some(old) => package_json_changes_tests(old, new, checks),
        },
        "setup.cfg" => setup_cfg_changes_tests(base, new),
        "pyproject.toml" => pyproject_changes_tests(base, new),
        "setup.py" => plugin_lines(base) != plugin_lines(new),
        name if super::testfiles::MAKEFILES.contains(&name) => {
            make::changes_tests(old, new, checks)
        }
        ".npmrc" => npmrc_changes_tests(base, new),
        "Cargo.toml" => match old {
            None => cargo::added_cargo_toml_changes_tests(new),
            Some(old) => cargo::cargo_toml_changes_tests(old, new, checks),
        },
        "config.toml" | "config" if super::testfiles::is_cargo_config(path) => {
            cargo::cargo_config_changes_tests(base, new)
        }
        _ => true,
    }
}

/// `.npmrc` settings that say where packages come from and how the lockfile and the output look:
/// the registry and its credentials (`registry`, `@scope:registry`, `//host/:_authToken`), the
/// cache, saving, peer dependencies, audit and funding messages. Any other setting counts
/// (`node-options` loads code into every node a script starts; `script-shell`,
/// `ignore-scripts` change what a script does).
const NPMRC_DEPENDENCY_KEYS: [&str; 24] = [
    "registry",
    "cache",
    "save",
    "save-exact",
    "save-prefix",
    "package-lock",
    "lockfile-version",
    "legacy-peer-deps",
    "strict-peer-deps",
    "auto-install-peers",
    "engine-strict",
    "fund",
    "audit",
    "audit-level",
    "loglevel",
    "progress",
    "update-notifier",
    "prefer-offline",
    "prefer-online",
    "offline",
    "strict-ssl",
    "cafile",
    "always-auth",
    "color",
];

/// Whether an `.npmrc` change touches a setting other than where packages come from
/// ([`NPMRC_DEPENDENCY_KEYS`]).
fn npmrc_changes_tests(old: &str, new: &str) -> bool {
    let settings = |text: &str| -> BTreeMap<String, String> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
            .map(|l| match l.split_once('=') {
                Some((k, v)) => (k.trim().to_owned(), v.trim().to_owned()),
                None => (l.to_owned(), String::new()),
            })
            .collect()
    };
    let (old, new) = (settings(old), settings(new));
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    keys.into_iter().any(|k| {
        old.get(k) != new.get(k)
            && !(NPMRC_DEPENDENCY_KEYS.contains(&k.as_str())
                || k.starts_with("//")
                || (k.starts_with('@') && k.ends_with(":registry"))
                || k.starts_with("fetch-"))
    })
}

/// Whether a `package.json` the work added where the base tree had none changes how `checks` run
/// the base's tests. No base test ran through it (`npm test` could not run on the base), so
/// putting the base back (removing it) restores no test: it only takes the project's manifest
/// away, and an honest new node project would always stop. It counts when a script the checks
/// reach cannot fail (`exit 0`, `node --test || true`: `verify::vacuous_check`) or runs as its
/// program a file that is not a test (the witness takes such a file away with the code, so only
/// here can a runner that prints a pass be seen), when a dependency is not the registry's
/// package (a fake runner), or when it does not parse.
fn added_package_json_changes_tests(new: &str, checks: &[String]) -> bool {
    let Ok(Value::Object(new)) = serde_json::from_str::<Value>(new) else {
        return true;
    };
    let empty = Map::new();
    if DEPENDENCY_MAPS
        .iter()
        .any(|map| dependencies_change_tests(None, new.get(*map)))
    {
        return true;
    }
    let Some(scripts) = new.get("scripts").map_or(Some(&empty), Value::as_object) else {
        return true;
    };
    let Some(reached) = scripts_named_by(checks).and_then(|named| reachable(scripts, &named))
    else {
        return true;
    };
    reached.iter().any(|name| {
        scripts.get(name).is_some_and(|text| {
            text.as_str().is_none_or(|text| {
                super::vacuous_check(text).is_some() || runs_a_file_not_a_test(text, checks)
            })
        })
    })
}

/// Extensions of the files a script runs directly (`node tools/run.js`, `sh ci/check.sh`).
const SCRIPT_EXTENSIONS: [&str; 8] = [".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".sh", ".py"];

/// Interpreters whose first argument (options skipped) is the program they run.
const INTERPRETERS: [&str; 9] = [
    "node", "sh", "bash", "python", "python3", "tsx", "ts-node", "bun", "deno",
];

/// Whether a script runs a file of the tree that is not a test by its layout or by a check's
/// naming, as its program (`node tools/run.js`, `./ci/check.sh`: the work's own runner, which
/// could print a pass whatever the code does; `node test.js`, `node test/all.mjs` are tests, and
/// a file given to a runner as an option's value, `jest --config jest.config.js`, is not run).
fn runs_a_file_not_a_test(script: &str, checks: &[String]) -> bool {
    split_list(script).iter().any(|(_, command, _)| {
        // Assignments and `env` before the program (`NODE_ENV=test node run.js`) run nothing.
        let words: Vec<String> = words(command)
            .into_iter()
            .skip_while(|w| w == "env" || (w.contains('=') && !w.starts_with('-')))
            .collect();
        let Some(first) = words.first() else {
            return false;
        };
        let tool = first.rsplit('/').next().unwrap_or(first);
        let program = if INTERPRETERS.contains(&tool) {
            words[1..]
                .iter()
                .find(|w| !w.starts_with('-') && w.as_str() != "run")
        } else {
            Some(first)
        };
        program.is_some_and(|word| {
            let path = word.trim_start_matches("./");
            (path.contains('/') || SCRIPT_EXTENSIONS.iter().any(|ext| path.ends_with(ext)))
                && !super::testfiles::looks_like_test(path, checks)
        })
    })
}

/// `package.json` fields that describe the package and change nothing about how its code or its
/// tests run.
const DESCRIPTIVE_FIELDS: [&str; 19] = [
    "name",
    "version",
    "description",
    "keywords",
    "author",
    "contributors",
    "maintainers",
    "license",
    "licenses",
    "homepage",
    "repository",
    "bugs",
    "funding",
    "private",
    "engines",
    "os",
    "cpu",
    "publishConfig",
    "files",
];

/// `package.json` dependency maps: a change of one of their entries to another version from the
/// registry is the project's choice of what it depends on, not a test change.
const DEPENDENCY_MAPS: [&str; 5] = [
    "dependencies",
    "devDependencies",
    "optionalDependencies",
    "peerDependencies",
    "peerDependenciesMeta",
];

/// Scripts the package manager runs on its own when installing (a milestone's `npm ci` or `npm
/// install` runs them in every replay) or around `npm test`.
const LIFECYCLE_SCRIPTS: [&str; 11] = [
    "preinstall",
    "install",
    "postinstall",
    "prepublish",
    "preprepare",
    "prepare",
    "postprepare",
    "dependencies",
    "pretest",
    "test",
    "posttest",
];

/// Commands that run other scripts by pattern or list: a script that calls one may reach any.
const SCRIPT_RUNNERS: [&str; 7] = [
    "npm-run-all",
    "run-s",
    "run-p",
    "concurrently",
    "turbo",
    "nx",
    "lerna",
];

fn package_json_changes_tests(old: &str, new: &str, checks: &[String]) -> bool {
    let (Ok(Value::Object(old)), Ok(Value::Object(new))) = (
        serde_json::from_str::<Value>(old),
        serde_json::from_str::<Value>(new),
    ) else {
        return true;
    };
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for key in keys {
        let (a, b) = (old.get(key.as_str()), new.get(key.as_str()));
        if a == b || DESCRIPTIVE_FIELDS.contains(&key.as_str()) {
            continue;
        }
        let touches = match key.as_str() {
            "scripts" => scripts_change_tests(a, b, checks),
            map if DEPENDENCY_MAPS.contains(&map) => dependencies_change_tests(a, b),
            // Anything else (a runner's configuration, `type`, `main`, `exports`, `overrides`,
            // `workspaces`, `packageManager`...) may change what the tests run.
            _ => true,
        };
        if touches {
            return true;
        }
    }
    false
}

/// A JSON object.
type Object = Map<String, Value>;

/// Two values of one field as objects, an absent one as `empty`; `None` when one is something
/// else.
fn objects<'a>(
    old: Option<&'a Value>,
    new: Option<&'a Value>,
    empty: &'a Object,
) -> Option<(&'a Object, &'a Object)> {
    let object = |v: Option<&'a Value>| match v {
        None => Some(empty),
        Some(v) => v.as_object(),
    };
    Some((object(old)?, object(new)?))
}

/// Whether two `scripts` maps differ in a script the checks can reach (named by a check, run by
/// the package manager around it or on install, or named by a reachable script).
fn scripts_change_tests(old: Option<&Value>, new: Option<&Value>, checks: &[String]) -> bool {
    let empty = Map::new();
    let Some((old, new)) = objects(old, new, &empty) else {
        return true;
    };
    let Some(named) = scripts_named_by(checks) else {
        return true;
    };
    let (Some(reach_old), Some(reach_new)) = (reachable(old, &named), reachable(new, &named))
    else {
        return true;
    };
    reach_old
        .union(&reach_new)
        .any(|name| old.get(name) != new.get(name))
}

/// The scripts reachable in `scripts` from `named` and the lifecycle scripts, each with its `pre`
/// and `post` scripts; `None` when a script runs others by pattern (any may be reached).
fn reachable(scripts: &Map<String, Value>, named: &BTreeSet<String>) -> Option<BTreeSet<String>> {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut todo: Vec<String> = named
        .iter()
        .cloned()
        .chain(LIFECYCLE_SCRIPTS.iter().map(|s| (*s).to_owned()))
        .collect();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        for around in [format!("pre{name}"), format!("post{name}")] {
            if scripts.contains_key(&around) {
                todo.push(around);
            }
        }
        let Some(text) = scripts.get(&name) else {
            continue;
        };
        let text = text.as_str()?;
        // A name built at run time may be any script; a glob (`run-s test:*`) is a pattern
        // runner's, below.
        if text.contains('$') {
            return None;
        }
        let tokens: Vec<&str> = text
            .split(|c: char| {
                !(c.is_alphanumeric() || matches!(c, ':' | '_' | '-' | '.' | '@' | '/'))
            })
            .filter(|t| !t.is_empty())
            .collect();
        if tokens.iter().any(|t| SCRIPT_RUNNERS.contains(t)) {
            return None;
        }
        todo.extend(
            tokens
                .iter()
                .filter(|t| scripts.contains_key(**t))
                .map(|t| (*t).to_owned()),
        );
    }
    Some(seen)
}

/// Package managers whose commands run `package.json` scripts.
const PACKAGE_MANAGERS: [&str; 4] = ["npm", "yarn", "pnpm", "bun"];

/// npm's commands that run a script of the same name.
const NPM_SCRIPT_COMMANDS: [&str; 4] = ["start", "stop", "restart", "test"];

/// Options of the package managers that take the next word as their value.
const VALUE_OPTIONS: [&str; 6] = ["--prefix", "-C", "--dir", "--cwd", "--filter", "-w"];

/// `command` followed by the text of each `package.json` script it runs through a package
/// manager (`npm test` → `scripts.test`), a line each: the commands a check really runs, for
/// reading which test runner it starts (`verify::testcount`). The command alone when it runs no
/// script or `package_json` is absent or does not parse.
pub fn with_scripts_run(command: &str, package_json: Option<&str>) -> String {
    let mut out = command.to_owned();
    let Some(scripts) = package_json
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .and_then(|v| v.get("scripts").and_then(Value::as_object).cloned())
    else {
        return out;
    };
    for name in scripts_named_by(&[command.to_owned()]).unwrap_or_default() {
        if let Some(text) = scripts.get(&name).and_then(Value::as_str) {
            out.push('\n');
            out.push_str(text);
        }
    }
    out
}

/// The script names `checks` run through a package manager (`npm test`, `npm run build`, `yarn
/// lint`, `pnpm run e2e`, `bun run x`); `None` when one cannot be read (`npm run "$s"`, `npm run`
/// alone).
fn scripts_named_by(checks: &[String]) -> Option<BTreeSet<String>> {
    let mut named = BTreeSet::new();
    for check in checks {
        for (_, command, _) in split_list(check) {
            let words = words(&command);
            for (at, word) in words.iter().enumerate() {
                let tool = word.rsplit('/').next().unwrap_or(word);
                if !PACKAGE_MANAGERS.contains(&tool) {
                    continue;
                }
                let mut rest = words[at + 1..].iter();
                let mut args: Vec<&str> = Vec::new();
                while let Some(w) = rest.next() {
                    if VALUE_OPTIONS.contains(&w.as_str()) {
                        rest.next();
                    } else if !w.starts_with('-') {
                        args.push(w);
                    }
                }
                let script = match (tool, args.first().copied()) {
                    (_, None) => continue,
                    (_, Some("run" | "run-script" | "rum" | "urn")) => match args.get(1) {
                        Some(name) => *name,
                        None => return None,
                    },
                    ("npm", Some("t" | "tst")) => "test",
                    ("npm", Some(c)) if NPM_SCRIPT_COMMANDS.contains(&c) => c,
                    // Any other npm command runs no script of the package (`npm ci`, `npm
                    // install` run the lifecycle scripts, always reachable); yarn, pnpm and bun
                    // run a script named by an unknown command, so the word counts as one.
                    ("npm", Some(_)) => continue,
                    (_, Some(c)) => c,
                };
                if script.contains('$') || script.contains('*') {
                    return None;
                }
                named.insert(script.to_owned());
            }
        }
    }
    Some(named)
}

/// Whether two values of a dependency map differ in an entry that now names something other
/// than a version of the package from the registry.
fn dependencies_change_tests(old: Option<&Value>, new: Option<&Value>) -> bool {
    let empty = Map::new();
    let Some((old, new)) = objects(old, new, &empty) else {
        return true;
    };
    let from_the_registry = |spec: &Value| match spec {
        Value::String(s) => from_registry(s),
        // `peerDependenciesMeta` holds objects: only their `optional` flag.
        Value::Object(m) => m.iter().all(|(k, v)| k == "optional" && v.is_boolean()),
        _ => false,
    };
    new.iter()
        .any(|(name, spec)| old.get(name) != Some(spec) && !from_the_registry(spec))
}

/// Whether a dependency spec names versions of the package itself from the registry (`^7.0.0`,
/// `1.x`, `>=1 <2 || 3`, `latest`), not an alias (`npm:other@1`), a path, or a git, GitHub or
/// tarball address.
fn from_registry(spec: &str) -> bool {
    let spec = spec.trim();
    !spec.contains(':')
        && !spec.contains('/')
        && !spec.contains('\\')
        && !spec.starts_with('.')
        && spec
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " ^~<>=|.-+*_".contains(c))
}

/// The `[tool.*]` tables of `pyproject.toml` whose settings run no test (linters, formatters,
/// build tools). What else a change may leave without being a test change: `[build-system]`,
/// `[project]` but its `entry-points` (a `pytest11` entry point loads a pytest plugin into every
/// run) and its dependencies from the index (read one by one), Poetry's dependencies from the
/// index and its description.
const PYPROJECT_CODE_TOOLS: [&str; 14] = [
    "black",
    "isort",
    "ruff",
    "mypy",
    "pyright",
    "pylint",
    "codespell",
    "pydocstyle",
    "bumpversion",
    "towncrier",
    "setuptools",
    "setuptools_scm",
    "cibuildwheel",
    "maturin",
];

/// Poetry's keys that name dependencies (read one by one).
const POETRY_DEPENDENCY_KEYS: [&str; 3] = ["dependencies", "dev-dependencies", "group"];
/// Poetry's keys that say what the package is and installs: its description, its files, its
/// console scripts (a command the project gains is code, not a test runner's plugin).
const POETRY_PACKAGE_KEYS: [&str; 15] = [
    "scripts",
    "name",
    "version",
    "description",
    "authors",
    "maintainers",
    "license",
    "readme",
    "homepage",
    "repository",
    "documentation",
    "keywords",
    "classifiers",
    "packages",
    "include",
];

fn pyproject_changes_tests(old: &str, new: &str) -> bool {
    let (Ok(old), Ok(new)) = (old.parse::<toml::Table>(), new.parse::<toml::Table>()) else {
        return true;
    };
    let empty = toml::Table::new();
    let table = |t: &toml::Table, key: &str| -> Option<toml::Table> {
        match t.get(key) {
            None => Some(empty.clone()),
            Some(toml::Value::Table(t)) => Some(t.clone()),
            Some(_) => None,
        }
    };
    for key in keys_of(&old, &new) {
        if old.get(&key) == new.get(&key) {
            continue;
        }
        let touches = match key.as_str() {
            "build-system" => false,
            "dependency-groups" => pep508_lists_change_tests(old.get(&key), new.get(&key)),
            "project" => {
                let (Some(a), Some(b)) = (table(&old, "project"), table(&new, "project")) else {
                    return true;
                };
                keys_of(&a, &b).into_iter().any(|k| {
                    a.get(&k) != b.get(&k)
                        && match k.as_str() {
                            "dependencies" | "optional-dependencies" => {
                                pep508_lists_change_tests(a.get(&k), b.get(&k))
                            }
                            "entry-points" => true,
                            _ => false,
                        }
                })
            }
            "tool" => {
                let (Some(a), Some(b)) = (table(&old, "tool"), table(&new, "tool")) else {
                    return true;
                };
                keys_of(&a, &b).into_iter().any(|tool| {
                    a.get(&tool) != b.get(&tool)
                        && match tool.as_str() {
                            t if PYPROJECT_CODE_TOOLS.contains(&t) => false,
                            "poetry" => poetry_changes_tests(a.get(&tool), b.get(&tool)),
                            // pytest, coverage, tox, hatch's environments and scripts, uv's
                            // sources, pdm's scripts, and every tool not named above.
                            _ => true,
                        }
                })
            }
            _ => true,
        };
        if touches {
            return true;
        }
    }
    false
}

/// The keys of two tables, each once, in order.
fn keys_of(a: &toml::Table, b: &toml::Table) -> BTreeSet<String> {
    a.keys().chain(b.keys()).cloned().collect()
}

/// Whether two values that hold PEP 508 requirements (a list, or a table of lists) differ in a
/// requirement that is not fetched from the index by name and version: a direct reference
/// (`pytest @ file:///...`, `@ git+https://...`) could put another package in a runner's place.
/// A table entry that is not a string (`{include-group = "test"}`) must be unchanged.
fn pep508_lists_change_tests(old: Option<&toml::Value>, new: Option<&toml::Value>) -> bool {
    fn requirements(v: Option<&toml::Value>, out: &mut BTreeSet<String>) -> bool {
        match v {
            None => true,
            Some(toml::Value::String(s)) => {
                out.insert(s.clone());
                true
            }
            Some(toml::Value::Array(items)) => items.iter().all(|i| requirements(Some(i), out)),
            Some(toml::Value::Table(t)) => t.iter().all(|(key, v)| {
                if key == "include-group" {
                    out.insert(format!("include-group={v}"));
                    true
                } else {
                    requirements(Some(v), out)
                }
            }),
            Some(_) => false,
        }
    }
    let (mut before, mut after) = (BTreeSet::new(), BTreeSet::new());
    if !requirements(old, &mut before) || !requirements(new, &mut after) {
        return true;
    }
    after
        .difference(&before)
        .any(|r| r.contains('@') || r.starts_with("include-group="))
}

/// Whether two `[tool.poetry]` tables differ in more than their dependencies from the index and
/// their description: plugins (entry points), sources and any other key count.
fn poetry_changes_tests(old: Option<&toml::Value>, new: Option<&toml::Value>) -> bool {
    let empty = toml::Table::new();
    let (Some(a), Some(b)) = (
        old.map_or(Some(&empty), toml::Value::as_table),
        new.map_or(Some(&empty), toml::Value::as_table),
    ) else {
        return true;
    };
    keys_of(a, b).into_iter().any(|k| {
        a.get(&k) != b.get(&k)
            && !POETRY_PACKAGE_KEYS.contains(&k.as_str())
            && (!POETRY_DEPENDENCY_KEYS.contains(&k.as_str())
                || poetry_dependencies_change_tests(a.get(&k), b.get(&k)))
    })
}

/// Poetry dependencies (`name = "^1.2"`, `name = {version = "^1.2", extras = [...]}`, groups of
/// them): a changed entry that names a path, a git repository or a URL counts.
fn poetry_dependencies_change_tests(old: Option<&toml::Value>, new: Option<&toml::Value>) -> bool {
    const FROM_ELSEWHERE: [&str; 4] = ["path", "git", "url", "source"];
    fn changed_from_elsewhere(old: Option<&toml::Value>, new: &toml::Value) -> bool {
        if old == Some(new) {
            return false;
        }
        match new {
            toml::Value::String(_) => false,
            toml::Value::Table(t) => t.iter().any(|(k, v)| {
                FROM_ELSEWHERE.contains(&k.as_str())
                    || match v {
                        toml::Value::Table(_) | toml::Value::Array(_) => changed_from_elsewhere(
                            old.and_then(|o| o.as_table()).and_then(|o| o.get(k)),
                            v,
                        ),
                        _ => false,
                    }
            }),
            toml::Value::Array(items) => items.iter().any(|i| changed_from_elsewhere(None, i)),
            _ => true,
        }
    }
    match new {
        None => false,
        Some(new) => changed_from_elsewhere(old, new),
    }
}

/// The lines of a `setup.py` that name pytest's plugin entry point group (`pytest11`): a plugin
/// registered there is loaded into every pytest run once the project is installed. `setup.py` is
/// code, so the rest of a change to it (dependencies, commands, metadata) is not a test change; a
/// registration that hides the group's name is not seen here (the witness replay, which takes the
/// code back, and the reviewers are what remain).
fn plugin_lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|line| line.contains("pytest11"))
        .collect()
}

/// `setup.cfg` sections that say what the project is and what it installs (its metadata, its
/// dependencies, which packages and data it ships) and the settings of tools that do not run
/// tests.
const DESCRIPTIVE_SECTIONS: [&str; 13] = [
    "metadata",
    "options.extras_require",
    "options.packages.find",
    "options.package_data",
    "options.exclude_package_data",
    "options.data_files",
    "bdist_wheel",
    "sdist",
    "egg_info",
    "flake8",
    "pycodestyle",
    "pydocstyle",
    "isort",
];

/// Entry point groups that install commands.
const CONSOLE_GROUPS: [&str; 2] = ["console_scripts", "gui_scripts"];

/// The keys of two maps, each once, in order.
fn keys_of_maps<'a>(
    a: &'a BTreeMap<String, String>,
    b: &'a BTreeMap<String, String>,
) -> BTreeSet<&'a String> {
    a.keys().chain(b.keys()).collect()
}

/// Keys of `setup.cfg`'s `[options]` that belong to the tests (setuptools' own `test` command).
const TEST_OPTIONS: [&str; 2] = ["tests_require", "test_suite"];

fn setup_cfg_changes_tests(old: &str, new: &str) -> bool {
    let (Some(old), Some(new)) = (ini_sections(old), ini_sections(new)) else {
        return true;
    };
    let empty = BTreeMap::new();
    let names: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    names.into_iter().any(|section| {
        let (a, b) = (
            old.get(section).unwrap_or(&empty),
            new.get(section).unwrap_or(&empty),
        );
        if a == b
            || DESCRIPTIVE_SECTIONS.contains(&section.as_str())
            || section.starts_with("mypy")
            || section.starts_with("pylint")
        {
            return false;
        }
        match section.as_str() {
            "options" => TEST_OPTIONS.iter().any(|k| a.get(*k) != b.get(*k)),
            // The commands the project installs are code; any other group (`pytest11` loads a
            // pytest plugin into every run) counts.
            "options.entry_points" => keys_of_maps(a, b)
                .into_iter()
                .any(|k| !CONSOLE_GROUPS.contains(&k.as_str()) && a.get(k) != b.get(k)),
            _ => true,
        }
    })
}

/// The sections of an INI file as Python's `configparser` reads them (keys lower-cased, values
/// with their continuation lines); `None` when a line is neither a section, a key, a comment nor
/// a continuation.
fn ini_sections(text: &str) -> Option<BTreeMap<String, BTreeMap<String, String>>> {
    let mut sections: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut section: Option<String> = None;
    let mut key: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            let (Some(s), Some(k)) = (&section, &key) else {
                return None;
            };
            let value = sections.get_mut(s)?.get_mut(k)?;
            value.push('\n');
            value.push_str(trimmed);
            continue;
        }
        if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            section = Some(name.trim().to_owned());
            sections.entry(name.trim().to_owned()).or_default();
            key = None;
            continue;
        }
        let split = trimmed.find(['=', ':'])?;
        let name = trimmed[..split].trim().to_lowercase();
        let value = trimmed[split + 1..].trim().to_owned();
        sections
            .get_mut(section.as_ref()?)?
            .insert(name.clone(), value);
        key = Some(name);
    }
    Some(sections)
}

#[cfg(test)]
mod tests;
