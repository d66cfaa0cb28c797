//! The manifest rules against honest changes (dependencies, commands, descriptions) and the
//! attacks of the same classes (a script, a runner's settings, a plugin, a dependency that is
//! not the registry's package).

use super::*;

const BASE: &str = r#"{"name": "numfmt", "version": "1.0.0", "scripts": {"test": "node --test"}}"#;

fn npm_test() -> Vec<String> {
    vec!["npm test".to_owned()]
}

#[test]
fn a_dependency_from_the_registry_is_not_a_test_change() {
    // What `npm install --save is-number@7.0.0` writes: reformatted, a new map, a version.
    let added = "{\n  \"name\": \"numfmt\",\n  \"version\": \"1.0.1\",\n  \"scripts\": {\n    \"test\": \"node --test\"\n  },\n  \"dependencies\": {\n    \"is-number\": \"^7.0.0\"\n  }\n}\n";
    assert!(!changes_tests(
        "package.json",
        Some(BASE),
        added,
        &npm_test()
    ));
    let dev = r#"{"name": "numfmt", "scripts": {"test": "node --test", "build": "tsc"}, "devDependencies": {"@types/node": "20.x", "mocha": ">=9 <11"}, "description": "now described"}"#;
    assert!(!changes_tests("package.json", Some(BASE), dev, &npm_test()));
    // Removing a dependency makes nothing pass.
    assert!(!changes_tests(
        "package.json",
        Some(added),
        BASE,
        &npm_test()
    ));
}

#[test]
fn a_dependency_that_is_not_the_registrys_package_is_a_test_change() {
    for spec in [
        "npm:always-pass@1.0.0",
        "file:../fake-mocha",
        "./vendor/mocha",
        "github:someone/mocha",
        "someone/mocha",
        "git+https://example.com/mocha.git",
        "https://example.com/mocha.tgz",
        "link:../mocha",
        "~/mocha",
    ] {
        let new = format!(
            r#"{{"name": "numfmt", "scripts": {{"test": "node --test"}}, "devDependencies": {{"mocha": "{spec}"}}}}"#
        );
        assert!(
            changes_tests("package.json", Some(BASE), &new, &npm_test()),
            "{spec}"
        );
    }
    let not_a_map =
        r#"{"name": "numfmt", "scripts": {"test": "node --test"}, "dependencies": "x"}"#;
    assert!(changes_tests(
        "package.json",
        Some(BASE),
        not_a_map,
        &npm_test()
    ));
}

#[test]
fn a_script_the_checks_reach_is_a_test_change_and_another_is_not() {
    let checks = vec!["cd app && npm run -s test:unit -- --grep x".to_owned()];
    let base = r#"{"scripts": {"test:unit": "npm run build && mocha", "build": "tsc", "lint": "eslint ."}}"#;
    // `lint` is not reached from `test:unit`.
    let lint = r#"{"scripts": {"test:unit": "npm run build && mocha", "build": "tsc", "lint": "eslint src"}}"#;
    assert!(!changes_tests("package.json", Some(base), lint, &checks));
    // `build` is, through `test:unit`; so are its `pre` script and the install hooks.
    for new in [
        r#"{"scripts": {"test:unit": "npm run build && mocha", "build": "true", "lint": "eslint ."}}"#,
        r#"{"scripts": {"test:unit": "mocha || true", "build": "tsc", "lint": "eslint ."}}"#,
        r#"{"scripts": {"test:unit": "npm run build && mocha", "prebuild": "cp x y", "build": "tsc", "lint": "eslint ."}}"#,
        r#"{"scripts": {"test:unit": "npm run build && mocha", "build": "tsc", "lint": "eslint .", "postinstall": "node fix.js"}}"#,
    ] {
        assert!(
            changes_tests("package.json", Some(base), new, &checks),
            "{new}"
        );
    }
    // Runners by pattern, and a script name a check does not spell out, reach everything.
    let all =
        r#"{"scripts": {"test:unit": "run-s build test:*", "build": "tsc", "lint": "eslint ."}}"#;
    let all_lint =
        r#"{"scripts": {"test:unit": "run-s build test:*", "build": "tsc", "lint": "eslint src"}}"#;
    assert!(changes_tests("package.json", Some(all), all_lint, &checks));
    let unknown = vec!["npm run \"$SCRIPT\"".to_owned()];
    assert!(changes_tests("package.json", Some(base), lint, &unknown));
    // yarn and pnpm run a script named by an unknown command.
    let yarn = vec!["yarn lint".to_owned()];
    assert!(changes_tests("package.json", Some(base), lint, &yarn));
}

#[test]
fn an_added_package_json_counts_only_when_its_test_script_cannot_fail() {
    let npm = vec!["npm test".to_owned()];
    let honest = r#"{"name": "wc", "bin": {"wc": "cli.js"}, "scripts": {"test": "node --test", "lint": "exit 0"}, "devDependencies": {"mocha": "^10"}}"#;
    assert!(!added_package_json_changes_tests(honest, &npm));
    for runs in [
        "node test.js",
        "node test/all.mjs",
        "mocha 'test/**/*.spec.js'",
        "node --test",
        "jest --config jest.config.js",
        "mocha --require ./setup.js",
        "node --test --experimental-test-coverage",
        "NODE_ENV=test node --test",
    ] {
        let new = format!(r#"{{"scripts": {{"test": "{runs}"}}}}"#);
        assert!(!added_package_json_changes_tests(&new, &npm), "{runs}");
    }
    for new in [
        r#"{"name": "wc", "scripts": {"test": "exit 0"}}"#,
        r#"{"name": "wc", "scripts": {"test": "node --test || true"}}"#,
        r#"{"name": "wc", "scripts": {"pretest": "node build.js", "test": "npm run unit", "unit": "echo ok"}}"#,
        r#"{"name": "wc", "scripts": {"test": "mocha"}, "devDependencies": {"mocha": "file:./fake"}}"#,
        r#"{"name": "wc", "scripts": {"test": 1}}"#,
        r#"{"name": "wc", "scripts": {"test": "node tools/run.js"}}"#,
        r#"{"name": "wc", "scripts": {"test": "sh ./ci.sh && node --test"}}"#,
        r#"{"name": "wc", "scripts": {"test": "./tools/run"}}"#,
        r#"{"name": "wc", "scripts": {"test": "NODE_ENV=test env CI=1 node tools/run.js"}}"#,
        r#"{"name": "wc", "scripts": {"test": "node --no-warnings tools/run.mjs"}}"#,
        "not json",
    ] {
        assert!(added_package_json_changes_tests(new, &npm), "{new}");
    }
}

#[test]
fn runner_configuration_and_unknown_fields_are_test_changes() {
    for new in [
        r#"{"name": "numfmt", "version": "1.0.0", "scripts": {"test": "node --test"}, "jest": {"testMatch": ["x"]}}"#,
        r#"{"name": "numfmt", "version": "1.0.0", "scripts": {"test": "node --test"}, "type": "module"}"#,
        r#"{"name": "numfmt", "version": "1.0.0", "scripts": {"test": "node --test"}, "overrides": {"mocha": "9.0.0"}}"#,
        r#"["not", "an", "object"]"#,
        "{ not json",
    ] {
        assert!(
            changes_tests("package.json", Some(BASE), new, &npm_test()),
            "{new}"
        );
    }
    assert!(changes_tests("other.json", Some(BASE), BASE, &npm_test()));
}

#[test]
fn pyproject_dependencies_and_tool_settings_are_not_test_changes() {
    let base = "[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"slug\"\nversion = \"1.0\"\ndependencies = [\"six==1.16.0\"]\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\n";
    // `uv add text-unidecode`, `uv add --dev pytest`, a version, a linter's settings.
    let honest = "[build-system]\nrequires = [\"setuptools>=68\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"slug\"\nversion = \"1.1\"\ndescription = \"Slugs\"\ndependencies = [\"six==1.16.0\", \"text-unidecode>=1.3; python_version >= '3.8'\"]\n\n[dependency-groups]\ndev = [\"pytest>=8\"]\n\n[tool.ruff]\nline-length = 100\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\n";
    assert!(!changes_tests("pyproject.toml", Some(base), honest, &[]));
    // A new project's manifest without test settings.
    assert!(!changes_tests(
        "pyproject.toml",
        None,
        base.split("[tool").next().unwrap(),
        &[]
    ));
    let poetry = "[tool.poetry]\nname = \"slug\"\nversion = \"1.0\"\n\n[tool.poetry.dependencies]\npython = \"^3.9\"\n";
    let poetry_add = "[tool.poetry]\nname = \"slug\"\nversion = \"1.0\"\n\n[tool.poetry.dependencies]\npython = \"^3.9\"\nrequests = {version = \"^2.31\", extras = [\"socks\"]}\n\n[tool.poetry.group.test.dependencies]\npytest = \"^8\"\n";
    assert!(!changes_tests(
        "pyproject.toml",
        Some(poetry),
        poetry_add,
        &[]
    ));
    let poetry_cli = format!("{poetry}\n[tool.poetry.scripts]\nslug = \"slug:main\"\n");
    assert!(!changes_tests(
        "pyproject.toml",
        Some(poetry),
        &poetry_cli,
        &[]
    ));
    let project_cli = format!("{base}\n[project.scripts]\nslug = \"slug:main\"\n");
    assert!(!changes_tests(
        "pyproject.toml",
        Some(base),
        &project_cli,
        &[]
    ));
    for new in [
        // The runner's settings, a plugin loaded through them or an entry point.
        base.replace("addopts = \"-q\"", "addopts = \"-q -p fakeplugin\""),
        format!("{base}\n[project.entry-points.pytest11]\nfake = \"fakeplugin\"\n"),
        format!("{base}\n[tool.coverage.report]\nfail_under = 0\n"),
        format!("{base}\n[tool.hatch.envs.default.scripts]\ntest = \"true\"\n"),
        // A runner from somewhere other than the index.
        base.replace(
            "[\"six==1.16.0\"]",
            "[\"six==1.16.0\", \"pytest @ file:///tmp/fake-pytest\"]",
        ),
        format!("{base}\n[tool.uv.sources]\npytest = {{ path = \"vendor/pytest\" }}\n"),
        "not = [toml".to_owned(),
    ] {
        assert!(
            changes_tests("pyproject.toml", Some(base), &new, &[]),
            "{new}"
        );
    }
    let poetry_path = poetry_add.replace("pytest = \"^8\"", "pytest = {path = \"vendor/pytest\"}");
    assert!(changes_tests(
        "pyproject.toml",
        Some(poetry),
        &poetry_path,
        &[]
    ));
    let poetry_plugin =
        format!("{poetry}\n[tool.poetry.plugins.pytest11]\nfake = \"fakeplugin\"\n");
    assert!(changes_tests(
        "pyproject.toml",
        Some(poetry),
        &poetry_plugin,
        &[]
    ));
}

#[test]
fn a_setup_py_change_counts_only_where_it_registers_a_pytest_plugin() {
    let base = "from setuptools import setup\n\nsetup(name='slug', py_modules=['slug'])\n";
    let deps = "from setuptools import setup\n\nsetup(\n    name='slug',\n    py_modules=['slug'],\n    install_requires=['text-unidecode==1.3'],\n    entry_points={'console_scripts': ['slug=slug:main']},\n)\n";
    assert!(!changes_tests("setup.py", Some(base), deps, &[]));
    assert!(!changes_tests("setup.py", None, base, &[]));
    let plugin = deps.replace(
        "'console_scripts'",
        "'pytest11': ['fake = fakeplugin'], 'console_scripts'",
    );
    assert!(changes_tests("setup.py", Some(base), &plugin, &[]));
    assert!(changes_tests("setup.py", Some(&plugin), deps, &[]));
}

#[test]
fn setup_cfg_dependencies_and_metadata_are_not_test_changes() {
    let base = "[metadata]\nname = slug\nversion = 1.0\n\n[options]\npy_modules = slug\ninstall_requires =\n    six\n\n[tool:pytest]\naddopts = -q\n";
    let deps = "[metadata]\nname = slug\nversion = 1.1\ndescription = Slugs\n\n[options]\npy_modules = slug\ninstall_requires =\n    six\n    text-unidecode==1.3\n\n[options.extras_require]\ndev = pytest\n\n[flake8]\nmax-line-length = 100\n\n[tool:pytest]\naddopts = -q\n";
    assert!(!changes_tests("setup.cfg", Some(base), deps, &[]));
    // A command the project gains.
    let cli = format!("{base}\n[options.entry_points]\nconsole_scripts =\n    slug = slug:main\n");
    assert!(!changes_tests("setup.cfg", Some(base), &cli, &[]));
    for new in [
        "[metadata]\nname = slug\n\n[options]\npy_modules = slug\ninstall_requires =\n    six\n\n[tool:pytest]\naddopts = -q -p fakeplugin\n",
        "[metadata]\nname = slug\n\n[options]\npy_modules = slug\ninstall_requires =\n    six\n\n[tool:pytest]\naddopts = -q\n\n[options.entry_points]\npytest11 =\n    fake = fakeplugin\n",
        "[metadata]\nname = slug\n\n[options]\npy_modules = slug\ntest_suite = other\ninstall_requires =\n    six\n\n[tool:pytest]\naddopts = -q\n",
        "no section = here\n",
        "[metadata]\nthis line has no value\n",
    ] {
        assert!(changes_tests("setup.cfg", Some(base), new, &[]), "{new}");
    }
}

#[test]
fn an_npmrc_counts_unless_it_only_says_where_packages_come_from() {
    let base = "registry=https://registry.npmjs.org/\n";
    for new in [
        "registry=https://registry.npmjs.org/\nnode-options=--require ./lib/boot.js\n",
        "registry=https://registry.npmjs.org/\nscript-shell=./tools/sh\n",
        "registry=https://registry.npmjs.org/\nignore-scripts=true\n",
    ] {
        assert!(
            changes_tests(".npmrc", Some(base), new, &npm_test()),
            "{new}"
        );
        assert!(changes_tests(".npmrc", None, new, &npm_test()), "{new}");
    }
    for new in [
        "registry=https://registry.example.org/\n",
        "registry=https://registry.npmjs.org/\n; saved exactly\nsave-exact=true\nfund=false\n",
        "registry=https://registry.npmjs.org/\n@acme:registry=https://npm.acme.dev/\n//npm.acme.dev/:_authToken=${NPM_TOKEN}\nfetch-retries=5\n",
    ] {
        assert!(
            !changes_tests(".npmrc", Some(base), new, &npm_test()),
            "{new}"
        );
    }
}

#[test]
fn a_check_reads_as_the_scripts_it_runs() {
    let pkg = r#"{"scripts": {"test": "mocha --exit", "lint": "eslint ."}}"#;
    assert_eq!(
        with_scripts_run("npm test", Some(pkg)),
        "npm test\nmocha --exit"
    );
    assert_eq!(
        with_scripts_run("npm run lint && npm t", Some(pkg)),
        "npm run lint && npm t\neslint .\nmocha --exit"
    );
    assert_eq!(with_scripts_run("make test", Some(pkg)), "make test");
    assert_eq!(with_scripts_run("npm test", None), "npm test");
    assert_eq!(with_scripts_run("npm test", Some("{not json")), "npm test");
}
