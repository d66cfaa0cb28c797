//! CLI transcripts of the foundation commands, run through the built binary.
//!
//! Every invocation starts `autocode` with `env_clear()` and an explicit environment: `HOME` and
//! `XDG_CONFIG_HOME` inside a per-test temporary directory, and `PATH` = a temporary bin dir of
//! fake tools (symlinks to the scripts in `tests/fixtures/cli/bin/`) followed by `/usr/bin:/bin`.
//! Nothing depends on the real `$HOME` or on agent CLIs installed on the machine. The cwd is a
//! neutral directory inside the sandbox unless a test says otherwise.
//!
//! JSON transcripts are insta snapshots after [`redact`], the one helper that replaces the
//! sandbox path with `[TMP]` and machine-dependent values (kernel release and capabilities,
//! durations, pids) with fixed markers. Nothing waits on a sleep.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_autocode");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cli");
const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// The fake tools every sandbox puts on PATH (`gocode` is deliberately absent).
const FAKE_TOOLS: [&str; 5] = ["kilo", "opencode", "codex", "claude", "mytool"];

/// A temporary home with its own XDG config dir, bin dir and neutral working directory.
struct Sandbox {
    _dir: tempfile::TempDir,
    /// The canonical sandbox root (what `[TMP]` stands for).
    root: PathBuf,
    /// Extra variables for every invocation (on top of HOME, XDG_CONFIG_HOME and PATH).
    env: BTreeMap<String, String>,
}

/// One finished invocation.
#[derive(Debug)]
struct Transcript {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Transcript {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    fn assert_code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.code, expected,
            "exit code; stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let root = dir
            .path()
            .canonicalize()
            .expect("canonicalize the temporary directory");
        for sub in ["home", "xdg/autocode/providers", "bin", "elsewhere"] {
            std::fs::create_dir_all(root.join(sub)).expect("create sandbox dirs");
        }
        for tool in FAKE_TOOLS {
            let script = Path::new(FIXTURES).join("bin").join(tool);
            let mode = std::fs::metadata(&script)
                .unwrap_or_else(|e| panic!("{}: {e}", script.display()))
                .permissions()
                .mode();
            assert!(
                mode & 0o111 != 0,
                "{} must be executable (git keeps the mode)",
                script.display()
            );
            // A symlink, not a copy: a script written by this multi-threaded harness could be
            // held open for writing by another test's forked child and fail with ETXTBSY.
            std::os::unix::fs::symlink(&script, root.join("bin").join(tool))
                .expect("link a fake tool");
        }
        Sandbox {
            _dir: dir,
            root,
            env: BTreeMap::new(),
        }
    }

    fn user_providers(&self) -> PathBuf {
        self.root.join("xdg/autocode/providers")
    }

    /// Installs `tests/fixtures/cli/providers/<name>.toml` as a user provider.
    fn install_provider(&self, name: &str) -> PathBuf {
        let from = Path::new(FIXTURES)
            .join("providers")
            .join(format!("{name}.toml"));
        let to = self.user_providers().join(format!("{name}.toml"));
        std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        to
    }

    /// Writes `text` to `rel` under the sandbox root.
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent dir");
        }
        std::fs::write(&path, text).expect("write sandbox file");
        path
    }

    fn set(&mut self, name: &str, value: &str) -> &mut Self {
        self.env.insert(name.to_owned(), value.to_owned());
        self
    }

    fn path_var(&self) -> String {
        format!("{}:/usr/bin:/bin", self.root.join("bin").display())
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .env_clear()
            .env("HOME", self.root.join("home"))
            .env("XDG_CONFIG_HOME", self.root.join("xdg"))
            .env("PATH", self.path_var())
            .envs(&self.env)
            .current_dir(self.root.join("elsewhere"))
            .stdin(Stdio::null());
        command
    }

    fn run(&self, args: &[&str]) -> Transcript {
        self.run_command(self.command(args))
    }

    fn run_in(&self, cwd: &Path, args: &[&str]) -> Transcript {
        let mut command = self.command(args);
        command.current_dir(cwd);
        self.run_command(command)
    }

    fn run_command(&self, mut command: Command) -> Transcript {
        let output = command.output().expect("run autocode");
        Transcript {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// [`redact`] with this sandbox's root.
    fn redact(&self, value: Value) -> Value {
        redact(value, &self.root)
    }
}

/// The one redaction helper for transcripts, in the style of uv's `uv_snapshot!` filters.
///
/// - every occurrence of the sandbox root in a string becomes `[TMP]`;
/// - `kernel` becomes `[KERNEL]`; every value inside a `boundary` object (the kernel's
///   capabilities, which differ between kernels) becomes `[KERNEL_DEPENDENT]`, keeping the keys,
///   and so does `room_missing` (what the kernel lacks for the agent's room);
/// - `*_ms` / `*_secs` values become `[DURATION]`;
/// - pids (`*_pid`, `*_sid`, `*_pgid`, `sessions`, `groups`, `killed`) become `[PID]`, keeping
///   the length of lists.
fn redact(value: Value, root: &Path) -> Value {
    fn walk(key: Option<&str>, value: Value, root: &str) -> Value {
        let marker = |m: &str| Value::String(m.to_owned());
        match key {
            Some("kernel") => return marker("[KERNEL]"),
            Some(k) if k.ends_with("_ms") || k.ends_with("_secs") => {
                return marker("[DURATION]");
            }
            Some(k)
                if k.ends_with("_pid")
                    || k.ends_with("_sid")
                    || k.ends_with("_pgid")
                    || matches!(k, "pid" | "sessions" | "groups" | "killed") =>
            {
                return pids(value);
            }
            Some("room_missing" | "foreign_edit_watch_missing") => {
                return marker("[KERNEL_DEPENDENT]");
            }
            Some("boundary") => {
                if let Value::Object(map) = value {
                    return Value::Object(
                        map.into_iter()
                            .map(|(k, _)| (k, marker("[KERNEL_DEPENDENT]")))
                            .collect(),
                    );
                }
            }
            _ => {}
        }
        match value {
            Value::String(text) => Value::String(text.replace(root, "[TMP]")),
            Value::Array(items) => items.into_iter().map(|v| walk(None, v, root)).collect(),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| {
                        let v = walk(Some(&k), v, root);
                        (k, v)
                    })
                    .collect(),
            ),
            other => other,
        }
    }
    fn pids(value: Value) -> Value {
        match value {
            Value::Number(_) => Value::String("[PID]".to_owned()),
            Value::Array(items) => items.into_iter().map(pids).collect(),
            other => other,
        }
    }
    walk(None, value, &root.to_string_lossy())
}

/// The `status`-flattened rows of `providers list --json`, by name.
fn rows_by_name(list: &Value) -> BTreeMap<String, Value> {
    list.as_array()
        .expect("providers list --json is an array")
        .iter()
        .map(|row| {
            (
                row["name"].as_str().unwrap_or_default().to_owned(),
                row.clone(),
            )
        })
        .collect()
}

fn names(list: &Value) -> Vec<String> {
    rows_by_name(list).into_keys().collect()
}

fn ignored_paths(doctor: &Value, root: &Path) -> Vec<(String, String)> {
    doctor["ignored_configs"]
        .as_array()
        .expect("ignored_configs is an array")
        .iter()
        .map(|i| {
            let path = i["path"].as_str().unwrap_or_default();
            let rel = Path::new(path)
                .strip_prefix(root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| path.to_owned());
            (rel, i["reason"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Snapshot transcripts

#[test]
fn providers_list_json_transcript() {
    let sandbox = Sandbox::new();
    let list = sandbox.run(&["providers", "list", "--json"]);
    list.assert_code(0);
    assert!(list.stderr.is_empty(), "stderr: {}", list.stderr);
    let json = list.json();
    let rows = rows_by_name(&json);
    // The fakes answered `--version`; gocode is not on PATH.
    assert_eq!(rows["kilocode"]["version"], "7.1.2");
    assert_eq!(rows["codex_receipts"]["version"], "codex-cli 0.169.0");
    assert_eq!(rows["gocode"]["executable"], Value::Null);
    insta::assert_json_snapshot!("providers_list", sandbox.redact(json));
}

#[test]
fn providers_show_kilocode_json_transcript() {
    let sandbox = Sandbox::new();
    let show = sandbox.run(&["providers", "show", "kilocode", "--json"]);
    show.assert_code(0);
    let json = show.json();
    assert_eq!(json["source"], "bundled:providers/kilocode.toml");
    insta::assert_json_snapshot!("providers_show_kilocode", sandbox.redact(json));
}

#[test]
fn doctor_json_transcript() {
    let mut sandbox = Sandbox::new();
    // A credential-looking variable is withheld from agents, and named (never its value).
    sandbox.set("GITHUB_TOKEN", "ghp_fake_value_never_printed");
    let doctor = sandbox.run(&["doctor", "--provider", "kilocode", "--json"]);
    doctor.assert_code(0);
    assert!(!doctor.stdout.contains("ghp_fake_value_never_printed"));
    let json = doctor.json();
    assert_eq!(json["ok"], true);
    // `kilo auth list` prints colour codes; the routes still pass.
    assert_eq!(json["auth"]["ok"], true);
    assert_eq!(json["withheld_env"][0]["name"], "GITHUB_TOKEN");
    insta::assert_json_snapshot!("doctor_kilocode", sandbox.redact(json));
}

#[test]
fn redaction_replaces_machine_dependent_values_only() {
    let root = Path::new("/tmp/.tmpAbC");
    let raw = serde_json::json!({
        "executable": "/tmp/.tmpAbC/bin/kilo",
        "version": "7.1.2",
        "boundary": { "kernel": "6.18.44", "user_notification": true },
        "root_pid": 4242,
        "killed": [1, 2],
        "run_ms": 2.5,
        "verified": true,
        "nested": [{ "path": "/elsewhere/tmp/.tmpAbC" }],
    });
    let redacted = redact(raw, root);
    assert_eq!(
        redacted,
        serde_json::json!({
            "executable": "[TMP]/bin/kilo",
            "version": "7.1.2",
            "boundary": { "kernel": "[KERNEL_DEPENDENT]", "user_notification": "[KERNEL_DEPENDENT]" },
            "root_pid": "[PID]",
            "killed": ["[PID]", "[PID]"],
            "run_ms": "[DURATION]",
            "verified": true,
            "nested": [{ "path": "/elsewhere[TMP]" }],
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Configuration errors and usage errors

#[test]
fn malformed_provider_file_is_a_one_screen_located_error() {
    let sandbox = Sandbox::new();
    sandbox.install_provider("broken");
    for args in [
        &["providers", "show", "broken"][..],
        &["models", "--provider", "broken"],
        &["doctor", "--provider", "broken", "--json"],
    ] {
        let out = sandbox.run(args);
        out.assert_code(2);
        assert!(out.stdout.is_empty(), "{args:?} stdout: {}", out.stdout);
        let stderr = sandbox.redact(Value::String(out.stderr.clone()));
        let stderr = stderr.as_str().unwrap_or_default();
        assert!(
            stderr.starts_with(
                "error: [TMP]/xdg/autocode/providers/broken.toml:5:10: key `output`: "
            ),
            "{args:?}: {stderr}"
        );
        assert!(stderr.lines().count() <= 24, "more than a screen: {stderr}");
        assert!(stderr.lines().all(|l| l.chars().count() <= 200), "{stderr}");
    }
    let out = sandbox.run(&["providers", "show", "broken"]);
    let stderr = sandbox.redact(Value::String(out.stderr));
    insta::assert_snapshot!(
        "malformed_provider_stderr",
        stderr.as_str().unwrap_or_default()
    );
    // The listing still works and reports the broken file as a row with the same location.
    let list = sandbox.run(&["providers", "list", "--json"]);
    list.assert_code(0);
    let broken = &rows_by_name(&list.json())["broken"];
    assert_eq!(broken["status"], "error");
    assert!(
        broken["message"]
            .as_str()
            .unwrap_or_default()
            .contains("broken.toml:5:10: key `output`"),
        "{broken}"
    );
}

#[test]
fn usage_errors_exit_2_with_nothing_on_stdout() {
    let sandbox = Sandbox::new();
    for args in [
        &["providers", "show", "nope"][..],
        &["providers", "show", "nope", "--json"],
        &["doctor", "--provider", "nope"],
        &["models", "--provider", "nope"],
        &["connections", "check", "--provider", "nope"],
        &["providers", "list", "--bogus"],
        &["doctor", "--bogus"],
        &["no-such-command"],
        &["explain", "NOT_A_PAUSE_CODE"],
        &["supervise", "--timeout", "-1", "--", "true"],
    ] {
        let out = sandbox.run(args);
        out.assert_code(2);
        assert!(out.stdout.is_empty(), "{args:?} stdout: {}", out.stdout);
        assert!(
            out.stderr.contains("error"),
            "{args:?} stderr: {}",
            out.stderr
        );
    }
    let unknown = sandbox.run(&["providers", "show", "nope"]);
    assert!(
        unknown.stderr.contains("unknown provider `nope`")
            && unknown.stderr.contains("kilocode")
            && unknown.stderr.contains("hint: "),
        "{}",
        unknown.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// doctor

#[test]
fn doctor_fails_when_the_executable_is_missing() {
    let sandbox = Sandbox::new();
    let doctor = sandbox.run(&["doctor", "--provider", "gocode", "--json"]);
    doctor.assert_code(1);
    let json = doctor.json();
    assert_eq!(json["ok"], false);
    assert_eq!(json["executable"], Value::Null);
    assert_eq!(
        json["problems"],
        serde_json::json!(["`gocode` is not installed (not on PATH)"])
    );
    // The human form says the same.
    let text = sandbox.run(&["doctor", "--provider", "gocode"]);
    text.assert_code(1);
    assert!(
        text.stdout.contains("FAIL gocode: not installed"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.lines().last() == Some("not ready"),
        "{}",
        text.stdout
    );
}

#[test]
fn doctor_fails_when_the_auth_check_fails() {
    let mut sandbox = Sandbox::new();
    sandbox.set("FAKE_KILO_OPENAI_LOGIN", "api");
    let doctor = sandbox.run(&["doctor", "--provider", "kilocode", "--json"]);
    doctor.assert_code(1);
    let json = doctor.json();
    assert_eq!(json["auth"]["ok"], false);
    let openai = json["auth"]["routes"]
        .as_array()
        .and_then(|routes| routes.iter().find(|r| r["models"] == "openai/"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(openai["outcome"], "mismatch", "{openai}");
    assert_eq!(openai["found"], serde_json::json!(["api"]));
    assert!(
        json["problems"].as_array().is_some_and(|p| p
            .iter()
            .any(|p| p.as_str() == Some("the [auth] check failed (see auth)"))),
        "{json}"
    );

    // A variable the provider forbids is withheld from its agents (and its probes), so the
    // check passes; doctor names it, never its value.
    let mut sandbox = Sandbox::new();
    sandbox.set("OPENAI_BASE_URL", "https://forbidden.invalid/v1");
    let doctor = sandbox.run(&["doctor", "--provider", "kilocode", "--json"]);
    doctor.assert_code(0);
    let json = doctor.json();
    assert_eq!(
        json["withheld_env"],
        serde_json::json!([{"name": "OPENAI_BASE_URL", "reason": "forbidden_by_provider"}])
    );
    assert_eq!(json["auth"]["forbidden_env"], serde_json::json!([]));
    assert!(!doctor.stdout.contains("forbidden.invalid"));
}

#[test]
fn doctor_passes_for_the_default_provider_when_all_is_well() {
    let sandbox = Sandbox::new();
    let doctor = sandbox.run(&["doctor"]);
    doctor.assert_code(0);
    assert!(
        doctor.stdout.starts_with("provider opencode (builtin)"),
        "{}",
        doctor.stdout
    );
    assert!(doctor.stdout.contains("1.18.33"), "{}", doctor.stdout);
    assert_eq!(
        doctor.stdout.lines().last(),
        Some("ready"),
        "{}",
        doctor.stdout
    );
}

// ---------------------------------------------------------------------------------------------
// What autocode reads, and what it never reads

#[test]
fn hostile_workspace_changes_nothing_autocode_loads() {
    let mut sandbox = Sandbox::new();
    // A relative PATH entry would find the workspace's `opencode`; it must be skipped.
    let path = format!(".:{}", sandbox.path_var());
    sandbox.set("PATH", &path);
    sandbox.install_provider("mytool");
    let evil = std::fs::read_to_string(Path::new(REPO).join("providers/kilocode.toml"))
        .expect("read the bundled kilocode file")
        .replace("\"kilo\"", "\"/bin/false\"");
    let renamed = |name: &str| evil.replace("name = \"kilocode\"", &format!("name = \"{name}\""));
    sandbox.write("ws/.autocode/providers/x.toml", &renamed("x"));
    sandbox.write("ws/.autocode/providers/kilocode.toml", &evil);
    sandbox.write("ws/.autocode/providers/mytool.toml", &renamed("mytool"));
    sandbox.write("ws/opencode.toml", &renamed("opencode"));
    sandbox.write("ws/claude.toml", &renamed("claude"));
    sandbox.write("ws/providers/gocode.toml", &renamed("gocode"));
    sandbox.write("ws/.autocode/config.toml", "default_provider = \"x\"\n");
    let hostile_tool = sandbox.write("ws/opencode", "#!/bin/sh\necho hostile\n");
    std::fs::set_permissions(&hostile_tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let workspace = sandbox.root.join("ws");
    let nested = workspace.join(".autocode/providers");

    let outside = sandbox.run(&["providers", "list", "--json"]);
    outside.assert_code(0);
    for cwd in [&workspace, &nested] {
        let inside = sandbox.run_in(cwd, &["providers", "list", "--json"]);
        inside.assert_code(0);
        assert_eq!(inside.stdout, outside.stdout, "cwd {}", cwd.display());
    }
    let json = outside.json();
    assert_eq!(
        names(&json),
        [
            "autocode",
            "claude",
            "codex",
            "codex_receipts",
            "gocode",
            "kilocode",
            "mytool",
            "opencode"
        ]
    );
    let rows = rows_by_name(&json);
    assert_eq!(
        rows["opencode"]["executable"],
        Value::String(sandbox.root.join("bin/opencode").display().to_string())
    );
    assert_eq!(
        rows["kilocode"]["source"],
        "bundled:providers/kilocode.toml"
    );

    // Inside the workspace, its files select nothing.
    let show_x = sandbox.run_in(&workspace, &["providers", "show", "x"]);
    show_x.assert_code(2);
    let show = |name: &str| {
        let out = sandbox.run_in(&workspace, &["providers", "show", name, "--json"]);
        out.assert_code(0);
        out.json()
    };
    assert_eq!(show("opencode")["kind"], "builtin");
    assert_eq!(show("gocode")["kind"], "bundled");
    assert_eq!(show("kilocode")["config"]["command"][0], "kilo");
    assert_eq!(show("mytool")["config"]["command"][0], "mytool");

    // doctor names every ignored file, from --workspace and from the cwd alike.
    let by_flag = sandbox.run(&[
        "doctor",
        "--json",
        "--workspace",
        &workspace.to_string_lossy(),
    ]);
    by_flag.assert_code(0);
    let by_flag = by_flag.json();
    let expected: Vec<(String, String)> = [
        "ws/.autocode/providers/kilocode.toml",
        "ws/.autocode/providers/mytool.toml",
        "ws/.autocode/providers/x.toml",
        "ws/claude.toml",
        "ws/opencode.toml",
        "ws/providers/gocode.toml",
    ]
    .iter()
    .map(|p| ((*p).to_owned(), "inside_workspace".to_owned()))
    .collect();
    assert_eq!(ignored_paths(&by_flag, &sandbox.root), expected);
    assert_eq!(by_flag["default_provider"]["source"]["kind"], "fallback");
    assert_eq!(by_flag["version"], "1.18.33");
    let by_cwd = sandbox.run_in(&workspace, &["doctor", "--json"]);
    by_cwd.assert_code(0);
    assert_eq!(ignored_paths(&by_cwd.json(), &sandbox.root), expected);
    let text = sandbox.run(&["doctor", "--workspace", &workspace.to_string_lossy()]);
    assert!(
        text.stdout.contains(&format!(
            "ignored: {} (config files inside a workspace are never loaded)",
            workspace.join("claude.toml").display()
        )),
        "{}",
        text.stdout
    );
}

#[test]
fn providers_list_human_text_names_missing_tools_and_broken_files() {
    let sandbox = Sandbox::new();
    sandbox.install_provider("broken");
    let out = sandbox.run(&["providers", "list"]);
    out.assert_code(0);
    let text = sandbox.redact(Value::String(out.stdout.clone()));
    let text = text.as_str().unwrap_or_default();
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("NAME") && first.contains("VERSION"),
        "{text}"
    );
    let row = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row for {name}: {text}"))
            .to_owned()
    };
    assert!(row("gocode").ends_with("gocode: not installed"), "{text}");
    assert!(row("kilocode").contains("7.1.2"), "{text}");
    assert!(row("kilocode").ends_with("[TMP]/bin/kilo"), "{text}");
    assert!(
        text.contains("  error: [TMP]/xdg/autocode/providers/broken.toml:5:10: key `output`"),
        "{text}"
    );
}

#[test]
fn config_home_defaults_to_home_dot_config() {
    let sandbox = Sandbox::new();
    let dir = sandbox.root.join("home/.config/autocode/providers");
    std::fs::create_dir_all(&dir).expect("create the HOME config dir");
    std::fs::copy(
        Path::new(FIXTURES).join("providers/mytool.toml"),
        dir.join("mytool.toml"),
    )
    .expect("install mytool under HOME");
    // Unset, and relative (invalid per XDG), both fall back to $HOME/.config.
    for xdg in [None, Some("relative/xdg")] {
        let mut command = sandbox.command(&["providers", "show", "mytool", "--json"]);
        match xdg {
            None => command.env_remove("XDG_CONFIG_HOME"),
            Some(value) => command.env("XDG_CONFIG_HOME", value),
        };
        let out = sandbox.run_command(command);
        out.assert_code(0);
        assert_eq!(
            out.json()["source"],
            Value::String(dir.join("mytool.toml").display().to_string()),
            "XDG_CONFIG_HOME={xdg:?}"
        );
    }
    // With XDG_CONFIG_HOME set, the HOME copy is not read.
    sandbox.run(&["providers", "show", "mytool"]).assert_code(2);
    // Neither set: a configuration error, nothing started.
    let mut command = sandbox.command(&["providers", "list"]);
    command.env_remove("XDG_CONFIG_HOME").env_remove("HOME");
    let out = sandbox.run_command(command);
    out.assert_code(2);
    assert!(out.stderr.contains("XDG_CONFIG_HOME"), "{}", out.stderr);
}

#[test]
fn reserved_names_in_the_user_providers_dir_are_never_read() {
    let sandbox = Sandbox::new();
    // Broken on purpose: reading either file would fail loudly.
    sandbox.write(
        "xdg/autocode/providers/opencode.toml",
        "this is = = not toml",
    );
    sandbox.write("xdg/autocode/providers/claude.toml", "name = [");
    let list = sandbox.run(&["providers", "list", "--json"]);
    list.assert_code(0);
    let json = list.json();
    let rows = json.as_array().expect("array");
    assert_eq!(rows.iter().filter(|r| r["name"] == "opencode").count(), 1);
    assert!(rows.iter().all(|r| r["status"] == "ok"), "{json}");
    for name in ["opencode", "claude"] {
        let show = sandbox.run(&["providers", "show", name, "--json"]);
        show.assert_code(0);
        assert_eq!(show.json()["kind"], "builtin");
    }
    let doctor = sandbox.run(&["doctor", "--json"]);
    doctor.assert_code(0);
    let doctor = doctor.json();
    assert_eq!(
        ignored_paths(&doctor, &sandbox.root),
        [
            (
                "xdg/autocode/providers/opencode.toml".to_owned(),
                "reserved_name".to_owned()
            ),
            (
                "xdg/autocode/providers/claude.toml".to_owned(),
                "reserved_name".to_owned()
            ),
        ]
    );
    assert!(
        doctor["ignored_configs"][1]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("built-in"),
        "{doctor}"
    );
}

#[test]
fn default_provider_comes_from_env_then_config_file_then_fallback() {
    let mut sandbox = Sandbox::new();
    let default_of = |sandbox: &Sandbox| {
        let doctor = sandbox.run(&["doctor", "--json"]);
        doctor.assert_code(0);
        let json = doctor.json();
        (
            json["provider"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            json["default_provider"]["source"]["kind"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    assert_eq!(default_of(&sandbox), ("opencode".into(), "fallback".into()));

    let config = sandbox.write(
        "xdg/autocode/config.toml",
        "some_other_setting = true\ndefault_provider = \"kilocode\"\n",
    );
    assert_eq!(
        default_of(&sandbox),
        ("kilocode".into(), "config_file".into())
    );
    let doctor = sandbox.run(&["doctor", "--json"]).json();
    assert_eq!(
        doctor["default_provider"]["source"]["path"],
        Value::String(config.display().to_string())
    );
    // `models` without --provider uses the same default.
    let models = sandbox.run(&["models", "--json"]);
    models.assert_code(0);
    assert_eq!(models.json()["provider"], "kilocode");

    sandbox.set("AUTOCODE_PROVIDER", "codex");
    assert_eq!(default_of(&sandbox), ("codex".into(), "env".into()));
    let models = sandbox.run(&["models", "--json"]);
    models.assert_code(0);
    assert_eq!(
        models.json(),
        serde_json::json!({
            "provider": "codex",
            "source": "static",
            "models": ["gpt-6-astra", "gpt-6-terra", "gpt-6-sol", "gpt-6-luna"],
        })
    );

    // A malformed default is a located configuration error.
    sandbox.set("AUTOCODE_PROVIDER", "");
    sandbox.write("xdg/autocode/config.toml", "\ndefault_provider = 3\n");
    let bad = sandbox.run(&["doctor"]);
    bad.assert_code(2);
    assert!(
        bad.stderr
            .contains("config.toml:2:20: key `default_provider`"),
        "{}",
        bad.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// models and connections

#[test]
fn models_from_a_user_command_are_stripped_of_ansi() {
    let sandbox = Sandbox::new();
    sandbox.install_provider("mytool");
    let text = sandbox.run(&["models", "--provider", "mytool"]);
    text.assert_code(0);
    assert_eq!(text.stdout, "vendor/model-a\nvendor/model-b\n");
    let json = sandbox.run(&["models", "--provider", "mytool", "--json"]);
    json.assert_code(0);
    assert_eq!(
        json.json(),
        serde_json::json!({
            "provider": "mytool",
            "source": "command",
            "models": ["vendor/model-a", "vendor/model-b"],
        })
    );
    // The bundled kilocode listing is coloured too.
    let kilo = sandbox.run(&["models", "--provider", "kilocode"]);
    kilo.assert_code(0);
    assert_eq!(
        kilo.stdout,
        "openai/gpt-5.6-sol\nopenai/gpt-5.6-terra\nzhipuai-coding-plan/glm-5.3\n"
    );
    assert!(!kilo.stdout.contains('\u{1b}'));
}

#[test]
fn connections_check_maps_the_status_exit_and_never_prints_its_output() {
    let cases = [
        (
            "0",
            0,
            serde_json::json!({"provider": "mytool", "status": "present"}),
        ),
        (
            "1",
            1,
            serde_json::json!({"provider": "mytool", "status": "sign_in_required"}),
        ),
        (
            "7",
            1,
            serde_json::json!({
                "provider": "mytool",
                "status": "check_failed",
                "exit": {"kind": "code", "value": 7},
            }),
        ),
    ];
    for (status_exit, expected_code, expected_json) in cases {
        let mut sandbox = Sandbox::new();
        sandbox.install_provider("mytool");
        sandbox.set("FAKE_MYTOOL_STATUS", status_exit);
        let json = sandbox.run(&["connections", "check", "--provider", "mytool", "--json"]);
        json.assert_code(expected_code);
        assert_eq!(json.json(), expected_json);
        let text = sandbox.run(&["connections", "check", "--provider", "mytool"]);
        text.assert_code(expected_code);
        for out in [&json, &text] {
            assert!(
                !out.stdout.contains("must-not-leak") && !out.stderr.contains("must-not-leak"),
                "the status command's output leaked: {out:?}"
            );
        }
        if status_exit == "1" {
            assert!(
                text.stdout
                    .contains("autocode connections login --provider mytool"),
                "{}",
                text.stdout
            );
        }
    }
}

#[test]
fn connections_list_names_each_providers_commands() {
    let sandbox = Sandbox::new();
    sandbox.install_provider("mytool");
    let list = sandbox.run(&["connections", "list", "--json"]);
    list.assert_code(0);
    let json = list.json();
    let rows = rows_by_name(&json);
    assert_eq!(
        rows["mytool"]["status_command"],
        serde_json::json!(["mytool", "status"])
    );
    assert_eq!(
        rows["mytool"]["login_command"],
        serde_json::json!(["mytool", "login"])
    );
    assert_eq!(rows["opencode"]["status_command"], Value::Null);
    // A provider without a status command is unchecked, which is not a failure.
    let check = sandbox.run(&["connections", "check", "--provider", "opencode", "--json"]);
    check.assert_code(0);
    assert_eq!(check.json()["status"], "unchecked");
}

// ---------------------------------------------------------------------------------------------
// explain, events, supervise

#[test]
fn explain_a_code_all_codes_and_unknown_codes() {
    let sandbox = Sandbox::new();
    let one = sandbox.run(&["explain", "paused_rate_limit", "--json"]);
    one.assert_code(0);
    let json = one.json();
    assert_eq!(json["code"], "PAUSED_RATE_LIMIT");
    assert!(
        json["explanation"]
            .as_str()
            .is_some_and(|s| s.contains("429")),
        "{json}"
    );
    assert!(
        json["next_step"]
            .as_str()
            .is_some_and(|s| s.contains("autocode resume")),
        "{json}"
    );
    let text = sandbox.run(&["explain", "PAUSED_RATE_LIMIT"]);
    text.assert_code(0);
    assert!(
        text.stdout.starts_with("PAUSED_RATE_LIMIT\n"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("\n  next: autocode resume"),
        "{}",
        text.stdout
    );

    let all = sandbox.run(&["explain", "--json"]);
    all.assert_code(0);
    let all = all.json();
    let codes = all.as_array().expect("explain --json lists every code");
    assert!(codes.len() > 1);
    assert!(codes.iter().any(|c| c["code"] == "PAUSED_RATE_LIMIT"));
    let mut names: Vec<&str> = codes.iter().filter_map(|c| c["code"].as_str()).collect();
    assert_eq!(names.len(), codes.len());
    assert!(
        names
            .iter()
            .all(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_uppercase() || c == '_')),
        "{names:?}"
    );
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), codes.len(), "duplicate codes");
    // Every listed code explains itself alone, too.
    for name in names {
        sandbox.run(&["explain", name]).assert_code(0);
    }

    let unknown = sandbox.run(&["explain", "PAUSED_NOT_A_THING", "--json"]);
    unknown.assert_code(2);
    assert!(unknown.stdout.is_empty());
    assert!(
        unknown.stderr.contains("unknown pause code") && unknown.stderr.contains("hint: "),
        "{}",
        unknown.stderr
    );
}

#[test]
fn events_normalize_reads_the_failed_command_exit_code() {
    let sandbox = Sandbox::new();
    let fixture = Path::new(REPO).join("tests/fixtures/real-clis/codex/failcmd/stdout.jsonl");
    let out = sandbox.run(&[
        "events",
        "normalize",
        "--transport",
        "codex",
        "--json",
        &fixture.to_string_lossy(),
    ]);
    out.assert_code(0);
    let json = out.json();
    let finished: Vec<&Value> = json["events"]
        .as_array()
        .expect("events array")
        .iter()
        .filter(|e| e["type"] == "command_finished")
        .collect();
    assert_eq!(finished.len(), 1, "{json}");
    assert_eq!(finished[0]["exit_code"], 3);
    assert_eq!(finished[0]["status"], "failed");
    assert!(
        finished[0]["command"]
            .as_str()
            .is_some_and(|c| c.contains("ls /nonexistent-dir-xyz; exit 3")),
        "{}",
        finished[0]
    );

    let missing = sandbox.run(&[
        "events",
        "normalize",
        "--transport",
        "codex",
        "/nonexistent/stream.jsonl",
    ]);
    missing.assert_code(2);
    let bad_transport = sandbox.run(&[
        "events",
        "normalize",
        "--transport",
        "gemini",
        &fixture.to_string_lossy(),
    ]);
    bad_transport.assert_code(2);
}

/// Alive = present in /proc and not a zombie.
fn alive(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = stat.get(stat.rfind(')')? + 1..)?;
            rest.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

#[test]
fn supervise_json_receipt_of_a_setsid_daemon_is_verified() {
    let sandbox = Sandbox::new();
    let out = sandbox.run(&[
        "supervise",
        "--json",
        "--",
        "sh",
        "-c",
        "setsid sleep 100 & true",
    ]);
    out.assert_code(0);
    let last = out.stdout.lines().last().unwrap_or_default();
    let receipt: Value =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("no receipt ({e}): {out:?}"));
    assert_eq!(receipt["verified"], true, "{receipt}");
    assert_eq!(receipt["ended_by"], "root_exit", "{receipt}");
    assert_eq!(receipt["keeper_lost"], false, "{receipt}");
    let killed: Vec<i64> = receipt["killed"]
        .as_array()
        .map(|pids| pids.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    assert!(!killed.is_empty(), "the daemon was not killed: {receipt}");
    for pid in killed {
        assert!(!alive(pid), "pid {pid} survived: {receipt}");
    }
    // The same receipt, redacted, has no machine-dependent value left.
    let redacted = sandbox.redact(receipt);
    assert_eq!(redacted["root_pid"], "[PID]");
    assert_eq!(redacted["run_ms"], "[DURATION]");
    assert_eq!(redacted["kernel"], "[KERNEL]");
}

// ---------------------------------------------------------------------------------------------
// The README's test command is what CI runs

/// The first line after `# Run the tests` inside the README's fenced blocks.
fn readme_test_command(readme: &str) -> Option<String> {
    let mut in_fence = false;
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if in_fence && line.trim_start().starts_with("# Run the tests") {
            return lines
                .next()
                .filter(|l| !l.trim_start().starts_with("```"))
                .map(|l| l.trim().to_owned());
        }
    }
    None
}

/// The last command line of a shell script (comments and blank lines skipped).
fn last_script_command(script: &str) -> Option<String> {
    script
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
}

#[test]
fn readme_test_command_is_what_ci_runs() {
    let readme = std::fs::read_to_string(Path::new(REPO).join("README.md")).expect("README.md");
    let ci = std::fs::read_to_string(Path::new(REPO).join(".ci/run")).expect(".ci/run");
    let documented = readme_test_command(&readme).expect("README has a `# Run the tests` line");
    let run = last_script_command(&ci).expect(".ci/run runs a command");
    assert_eq!(documented, run);
    assert!(documented.contains("cargo test"), "{documented}");
    // Nothing after the command can change the outcome: it is the script's last statement and
    // the script stops at the first error.
    assert!(ci.lines().any(|l| l.trim() == "set -euo pipefail"), "{ci}");
}

#[test]
fn readme_parsers_find_the_right_lines() {
    let readme = "# Run the tests\nnot this\n```sh\n# Build\ncargo build\n\n# Run the tests (via ci)\nmake test\n```\n";
    assert_eq!(readme_test_command(readme).as_deref(), Some("make test"));
    assert_eq!(readme_test_command("no fence\n# Run the tests\nx\n"), None);
    let script = "#!/bin/sh\nset -e\ncd x\n\n# comment\nmake test\n# trailing comment\n\n";
    assert_eq!(last_script_command(script).as_deref(), Some("make test"));
}

#[test]
fn sandboxed_invocations_see_only_the_given_environment() {
    // `autocode supervise` hands the command autocode's own environment: under the sandbox that
    // is exactly HOME, PATH and XDG_CONFIG_HOME, so no test leans on the real user's variables.
    let sandbox = Sandbox::new();
    let out = sandbox.run(&["supervise", "--", "env"]);
    out.assert_code(0);
    let mut seen: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, ["HOME", "PATH", "XDG_CONFIG_HOME"], "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&format!("HOME={}/home\n", sandbox.root.display()))
    );
}

#[test]
fn an_objective_file_must_be_a_regular_file_and_nothing_is_created_otherwise() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.root.join("elsewhere");
    let zero = sandbox.root.join("objective.md");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let transcript = sandbox.run_in(
        &workspace,
        &[
            "--provider",
            "codex",
            "--objective-file",
            zero.to_str().unwrap(),
        ],
    );
    transcript.assert_code(2);
    assert!(
        transcript
            .stderr
            .contains("not a regular file (a character device)"),
        "{}",
        transcript.stderr
    );
    assert!(!workspace.join(".autocode").exists());
    // Exactly one of the argument and the file.
    let both = sandbox.run_in(
        &workspace,
        &["run", "do this thing", "--objective-file", "x"],
    );
    both.assert_code(2);
    let neither = sandbox.run_in(&workspace, &["run"]);
    neither.assert_code(2);
}
