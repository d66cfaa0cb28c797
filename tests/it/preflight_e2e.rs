//! Preflight and automatic routes, end to end through the real binary.
//!
//! Each test gets a temporary HOME whose `$XDG_CONFIG_HOME/autocode/providers/` registers fake
//! providers (TOML tools over the scripted fake agent of `run_e2e`, planning and building on
//! the `alpha` family or reviewing on `beta`), a bin directory of fake tool commands (each one
//! answers `--version`, `models` and `status` the way the test wants: a missing command is an
//! uninstalled tool, `status` exit 1 is signed out) and a seeded git workspace.
//!
//! Every preflight failure must exit 2 and leave nothing behind: no `.autocode/runs`, no extra
//! worktree, no `autocode/*` branch, no agent launched. Automatic routes must put the verifiers
//! on the other family's provider, print the routes, and launch them there; an explicit role
//! flag wins; `--no-auto-select` keeps the fixed routes (and so is refused). The pause messages
//! that name their log file or what changed in the transport are checked here too.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::run_e2e::{Finished, finish, git, script_with};

const BIN: &str = env!("CARGO_BIN_EXE_autocode");

/// Routes on one family only: every verifier checks its own family.
const ALPHA_ONLY: &str = r#"glm = { model = "alpha-large" }
requirements = { model = "alpha-large" }
plan_reviewer = { model = "alpha-large" }
terra = { model = "alpha-large" }
sol = { model = "alpha-large" }
completion = { model = "alpha-large" }
astra = { model = "alpha-large" }
"#;

/// The other family, for every role.
const BETA_ONLY: &str = r#"glm = { model = "beta-large" }
requirements = { model = "beta-large" }
plan_reviewer = { model = "beta-large" }
terra = { model = "beta-large" }
sol = { model = "beta-large" }
completion = { model = "beta-large" }
astra = { model = "beta-large" }
"#;

/// Independent on their own: building on alpha, verifying on beta.
const DUO: &str = r#"glm = { model = "alpha-large" }
requirements = { model = "alpha-large" }
plan_reviewer = { model = "beta-large" }
terra = { model = "alpha-large" }
sol = { model = "beta-large" }
completion = { model = "beta-large" }
astra = { model = "alpha-large" }
"#;

const SIGNED_IN: i32 = 0;
const SIGNED_OUT: i32 = 1;

struct Bench {
    root: tempfile::TempDir,
    python: PathBuf,
}

impl Bench {
    fn new() -> Bench {
        let root = tempfile::tempdir().expect("tempdir");
        let python = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3");
        let python = PathBuf::from(String::from_utf8_lossy(&python.stdout).trim());
        let bench = Bench { root, python };
        for dir in [
            bench.home(),
            bench.workspace(),
            bench.bin(),
            bench.providers(),
        ] {
            fs::create_dir_all(dir).expect("mkdir");
        }
        bench.set_script(script_with(&[]));
        let ws = bench.workspace();
        git(&ws, &["init", "-q"]);
        fs::write(ws.join("README.md"), "seed\n").expect("seed");
        git(&ws, &["add", "-A"]);
        git(&ws, &["commit", "-qm", "seed"]);
        bench
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    fn workspace(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    fn bin(&self) -> PathBuf {
        self.root.path().join("bin")
    }

    fn providers(&self) -> PathBuf {
        self.home().join(".config/autocode/providers")
    }

    fn script(&self) -> PathBuf {
        self.root.path().join("script.json")
    }

    fn state(&self) -> PathBuf {
        self.root.path().join("script.json.state")
    }

    fn set_script(&self, script: Value) {
        fs::write(self.script(), serde_json::to_vec(&script).expect("json")).expect("script");
    }

    /// A fake tool command on PATH: `--version` prints `NAME 1.0`, `models` lists `models`,
    /// `status` exits with `status_exit`.
    fn tool(&self, name: &str, models: &[&str], status_exit: i32) {
        let path = self.bin().join(name);
        let models: String = models.iter().map(|m| format!("{m}\\n")).collect();
        fs::write(
            &path,
            format!(
                "#!/bin/sh\ncase \"$1\" in\n  --version) echo \"{name} 1.0\" ;;\n  models) printf '{models}' ;;\n  status) exit {} ;;\n  *) exit 64 ;;\nesac\n",
                status_exit
            ),
        )
        .expect("tool");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// A command on PATH that runs `body` (a `sh` script).
    fn script_tool(&self, name: &str, body: &str) {
        let path = self.bin().join(name);
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("tool");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// Registers provider `name` over the fake agent; `program` answers its probes.
    fn provider(&self, name: &str, program: &str, roles: &str) {
        let command = [
            self.python.display().to_string(),
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fake_agent/fake_agent.py")
                .display()
                .to_string(),
            "--script".into(),
            self.script().display().to_string(),
            "--role".into(),
            "{role}".into(),
            "--workspace".into(),
            "{workspace}".into(),
            "--model".into(),
            "{model}".into(),
        ];
        let toml = format!(
            "name = \"{name}\"\ncommand = {}\nresume = [\"--session\", \"{{session}}\"]\nprompt = \"stdin\"\noutput = \"opencode_events\"\nversion_command = [\"{program}\", \"--version\"]\nmodels_command = [\"{program}\", \"models\"]\n\n[roles]\n{roles}\n[connection]\nstatus_command = [\"{program}\", \"status\"]\nlogin_command = [\"{program}\", \"login\"]\n\n[confine]\nwritable = [{}]\n",
            serde_json::to_string(&command).expect("argv"),
            serde_json::to_string(&format!("{}/", self.state().display())).expect("path"),
        );
        fs::write(self.providers().join(format!("{name}.toml")), toml).expect("provider");
    }

    fn command(&self, args: &[&str]) -> Command {
        let home = self.home();
        let mut command = Command::new(BIN);
        command
            .args(args)
            .current_dir(self.root.path())
            .env_clear()
            // The fake tools, then the system's own directories (git, grep, sh).
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", self.bin().display()),
            )
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("LANG", "C.UTF-8")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null());
        command
    }

    /// `autocode run OBJECTIVE --workspace WS --json EXTRA...`
    fn run(&self, extra: &[&str]) -> Finished {
        let ws = self.workspace().display().to_string();
        let mut args = vec![
            "run",
            "Create hello.txt containing hello",
            "--workspace",
            &ws,
            "--json",
            "--yes",
        ];
        args.extend_from_slice(extra);
        finish(self.command(&args))
    }

    fn resume(&self, extra: &[&str]) -> Finished {
        let ws = self.workspace().display().to_string();
        let mut args = vec!["resume", "--workspace", &ws, "--json"];
        args.extend_from_slice(extra);
        finish(self.command(&args))
    }

    fn calls(&self) -> Vec<Value> {
        fs::read_to_string(self.state().join("calls.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("calls.jsonl line"))
            .collect()
    }

    /// The models each role was launched with, in call order.
    fn models_of(&self, role: &str) -> Vec<String> {
        self.calls()
            .iter()
            .filter(|c| c["role"] == role)
            .map(|c| c["model"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    fn git_out(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(self.workspace())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A refused start: exit 2, the problem and its fix on stderr, and nothing created.
    fn assert_refused(&self, finished: &Finished, needles: &[&str]) {
        assert_eq!(finished.code, Some(2), "{finished:?}");
        assert!(finished.stderr.contains("preflight failed"), "{finished:?}");
        assert!(finished.stderr.contains("fix:"), "{finished:?}");
        for needle in needles {
            assert!(finished.stderr.contains(needle), "{needle:?}: {finished:?}");
        }
        assert!(
            !self.workspace().join(".autocode/runs").exists(),
            "a run directory was created: {finished:?}"
        );
        let worktrees = self.git_out(&["worktree", "list", "--porcelain"]);
        assert_eq!(
            worktrees
                .lines()
                .filter(|l| l.starts_with("worktree "))
                .count(),
            1,
            "a worktree was created: {worktrees}"
        );
        assert_eq!(
            self.git_out(&["branch", "--list", "autocode/*"]).trim(),
            "",
            "a run branch was created"
        );
        assert!(self.calls().is_empty(), "an agent was launched");
    }
}

#[test]
fn a_missing_executable_is_refused_with_nothing_created() {
    let bench = Bench::new();
    // `duotool` is not on PATH.
    bench.provider("duo", "duotool", DUO);
    let finished = bench.run(&["--provider", "duo"]);
    bench.assert_refused(
        &finished,
        &[
            "`duotool` is not installed (not on PATH)",
            "install duotool",
        ],
    );
}

#[test]
fn the_default_provider_missing_is_refused_before_anything_exists() {
    let bench = Bench::new();
    // No --provider: the fallback default (opencode) is not installed on this PATH... unless
    // the machine has one in a system directory; then there is nothing to refuse here.
    if [
        "/usr/local/bin/opencode",
        "/usr/bin/opencode",
        "/bin/opencode",
    ]
    .iter()
    .any(|p| Path::new(p).exists())
    {
        return;
    }
    let finished = bench.run(&[]);
    bench.assert_refused(
        &finished,
        &["`opencode` is not installed", "default provider"],
    );
}

#[test]
fn a_failing_sign_in_status_is_refused_with_the_login_command() {
    let bench = Bench::new();
    bench.tool("duotool", &["alpha-large", "beta-large"], SIGNED_OUT);
    bench.provider("duo", "duotool", DUO);
    let finished = bench.run(&["--provider", "duo"]);
    bench.assert_refused(
        &finished,
        &[
            "duo is not signed in (`duotool status` exit 1)",
            "duotool login",
        ],
    );
}

#[test]
fn a_model_the_tool_does_not_offer_is_refused() {
    let bench = Bench::new();
    bench.tool("duotool", &["alpha-large"], SIGNED_IN);
    bench.provider("duo", "duotool", DUO);
    let finished = bench.run(&["--provider", "duo"]);
    bench.assert_refused(
        &finished,
        &[
            "duo does not offer beta-large",
            "--plan-reviewer-model / --tester-model / --completion-model",
        ],
    );
    // `doctor` runs the very same checks and says the same.
    let doctor = finish(bench.command(&["doctor", "--provider", "duo", "--json"]));
    assert_eq!(doctor.code, Some(1), "{doctor:?}");
    assert_eq!(doctor.json["ok"], false, "{doctor:?}");
    assert!(
        doctor.json["problems"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p
                .as_str()
                .is_some_and(|p| p.contains("duo does not offer beta-large")))),
        "{doctor:?}"
    );
}

#[test]
fn one_family_only_is_refused_explaining_single_model() {
    let bench = Bench::new();
    bench.tool("alphatool", &["alpha-large"], SIGNED_IN);
    bench.provider("alpha", "alphatool", ALPHA_ONLY);
    let finished = bench.run(&["--provider", "alpha"]);
    bench.assert_refused(
        &finished,
        &[
            "verifier independence cannot be met",
            "tester (alpha-large) checks builder (alpha-large)",
            "--single-model",
        ],
    );
    // doctor agrees: not ready.
    let doctor = finish(bench.command(&["doctor", "--provider", "alpha", "--json"]));
    assert_eq!(doctor.code, Some(1), "{doctor:?}");
    assert_eq!(
        doctor.json["preflight"]["independence"]["state"], "violated",
        "{doctor:?}"
    );
    // --single-model waives independence knowingly: the run starts and completes.
    let waived = bench.run(&["--provider", "alpha", "--single-model", "alpha-large"]);
    waived.assert_complete();
}

/// Two installed, signed-in providers of different families.
fn two_families() -> Bench {
    let bench = Bench::new();
    bench.tool("alphatool", &["alpha-large", "alpha-small"], SIGNED_IN);
    bench.tool("betatool", &["beta-large"], SIGNED_IN);
    bench.provider("alpha", "alphatool", ALPHA_ONLY);
    bench.provider("beta", "betatool", BETA_ONLY);
    bench
}

#[test]
fn automatic_routes_put_the_verifiers_on_the_other_family() {
    let bench = two_families();
    let finished = bench.run(&["--provider", "alpha"]);
    finished.assert_complete();
    // The routes were printed before the first stage.
    let routes_at = finished
        .stderr
        .find("automatic routes")
        .unwrap_or_else(|| panic!("no routes printed: {finished:?}"));
    assert!(
        finished.stderr[routes_at..]
            .lines()
            .any(|l| l.trim_start().starts_with("tester ") && l.ends_with("beta/beta-large")),
        "{finished:?}"
    );
    for role in ["plan_reviewer", "tester", "completion_reviewer"] {
        let models = bench.models_of(role);
        assert!(!models.is_empty(), "{role} never ran");
        assert!(
            models.iter().all(|m| m == "beta-large"),
            "{role}: {models:?}"
        );
    }
    for role in ["requirements", "planner", "builder"] {
        let models = bench.models_of(role);
        assert!(
            models.iter().all(|m| m == "alpha-large"),
            "{role}: {models:?}"
        );
    }
    // The run records where each role runs.
    let status = finish(bench.command(&[
        "status",
        "--workspace",
        &bench.workspace().display().to_string(),
        "--json",
    ]));
    assert_eq!(status.json["provider"], "alpha", "{status:?}");
    assert_eq!(status.json["routes"]["tester"]["provider"], "beta");
    assert_eq!(status.json["routes"]["builder"]["provider"], "alpha");
    // doctor shows the same routes and calls the machine ready.
    let doctor = finish(bench.command(&["doctor", "--provider", "alpha", "--json"]));
    assert_eq!(doctor.code, Some(0), "{doctor:?}");
    assert_eq!(doctor.json["preflight"]["auto_routes"]["provider"], "beta");
    // A resume of the complete run launches nothing.
    let calls = bench.calls().len();
    assert_eq!(bench.resume(&[]).code, Some(0));
    assert_eq!(bench.calls().len(), calls);
}

#[test]
fn a_signed_out_second_provider_is_not_chosen() {
    let bench = two_families();
    bench.tool("betatool", &["beta-large"], SIGNED_OUT);
    let finished = bench.run(&["--provider", "alpha"]);
    bench.assert_refused(
        &finished,
        &[
            "verifier independence cannot be met",
            "beta (beta is not signed in",
        ],
    );
}

#[test]
fn an_explicit_role_flag_wins_over_automatic_routes() {
    // The tester named on the builder's family: the flag is not overridden, so the run is
    // refused, and the fix names the flag.
    let bench = two_families();
    let finished = bench.run(&["--provider", "alpha", "--tester-model", "alpha-small"]);
    bench.assert_refused(&finished, &["your --tester-model puts a verifier"]);

    // A tester named on a third family stays exactly where the flag put it (on alpha's tool);
    // the other verifiers move.
    let bench = two_families();
    bench.tool("alphatool", &["alpha-large", "gamma-large"], SIGNED_IN);
    let finished = bench.run(&["--provider", "alpha", "--tester-model", "gamma-large"]);
    finished.assert_complete();
    assert!(
        bench.models_of("tester").iter().all(|m| m == "gamma-large"),
        "{:?}",
        bench.calls()
    );
    assert!(
        bench
            .models_of("completion_reviewer")
            .iter()
            .all(|m| m == "beta-large")
    );
    assert!(
        bench
            .models_of("plan_reviewer")
            .iter()
            .all(|m| m == "beta-large")
    );
}

#[test]
fn no_auto_select_keeps_the_fixed_routes_and_is_refused() {
    let bench = two_families();
    let finished = bench.run(&["--provider", "alpha", "--no-auto-select"]);
    bench.assert_refused(
        &finished,
        &[
            "verifier independence cannot be met",
            "drop --no-auto-select",
        ],
    );
}

#[test]
fn a_transport_change_names_what_changed_old_and_new() {
    let bench = Bench::new();
    bench.tool("duotool", &["alpha-large", "beta-large"], SIGNED_IN);
    bench.provider("duo", "duotool", DUO);
    // The requirements stage ends without an answer: the run pauses at its first stage.
    bench.set_script(script_with(&[(
        "requirements",
        serde_json::json!([[{"exit": 2}]]),
    )]));
    let paused = bench.run(&["--provider", "duo"]);
    paused.assert_paused("PAUSED_PROVIDER_UNCERTAIN");
    // The message names the stage log it refers to, and the file is there.
    let reason = paused.json["pause"]["reason"].as_str().unwrap_or_default();
    let log = reason
        .split("stage log: ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no stage log named: {reason}"));
    assert!(
        log.ends_with("stages/001-requirements-1/stderr.log"),
        "{reason}"
    );
    assert!(Path::new(log).is_file(), "{log}");
    // The tool is upgraded: the resume pauses and says from which version to which.
    let path = bench.bin().join("duotool");
    let text = fs::read_to_string(&path)
        .unwrap()
        .replace("duotool 1.0", "duotool 2.0");
    fs::write(&path, text).unwrap();
    let changed = bench.resume(&["--abandon-stage", "001-requirements-1"]);
    changed.assert_paused("PAUSED_TRANSPORT_CHANGED");
    let reason = changed.json["pause"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("duo: version duotool 1.0 -> duotool 2.0"),
        "{changed:?}"
    );
}

/// A run saved by an autocode without preflight: paused at the cross-model guard before any
/// stage, with same-family routes, no transport identity, no attempt, no worktree.
#[test]
fn a_saved_same_family_run_stays_paused_whatever_the_flags() {
    use super::run_e2e::{Harness, only_run_dir};
    let harness = Harness::new(script_with(&[(
        "requirements",
        serde_json::json!([[{"exit": 2}]]),
    )]));
    harness
        .run(&["--yes", "--in-place"])
        .assert_paused("PAUSED_PROVIDER_UNCERTAIN");
    let dir = only_run_dir(&harness);
    super::run_integrity::retag(&harness, &dir, |state| {
        state["routes"]["tester"]["model"] = serde_json::json!("alpha-small");
        state["attempts"] = serde_json::json!([]);
        state["transport_identities"] = serde_json::json!({});
        state["pause"]["code"] = serde_json::json!("PAUSED_CROSS_MODEL");
        state["pause"]["attempt"] = Value::Null;
    });
    let calls = harness.calls().len();
    for flags in [&[][..], &["--accept-transport-change"][..]] {
        let resumed = harness.resume(flags);
        // Independence first: no phantom transport change, and no launch.
        resumed.assert_paused("PAUSED_CROSS_MODEL");
        assert!(
            resumed
                .stderr
                .contains("tester (alpha-small) checks builder (alpha-large)"),
            "{resumed:?}"
        );
        assert_eq!(
            harness.calls().len(),
            calls,
            "an agent was launched: {flags:?}"
        );
    }
}

#[test]
fn a_logged_out_claude_code_is_refused_before_launch() {
    let bench = two_families();
    bench.script_tool(
        "claude",
        r#"case "$*" in
  --version) echo "2.1.328 (Claude Code)" ;;
  "auth status --json") echo '{"loggedIn": false, "authMethod": "none"}'; exit 1 ;;
  *) echo "an agent was launched" >&2; exit 64 ;;
esac"#,
    );
    let finished = bench.run(&["--provider", "claude"]);
    bench.assert_refused(
        &finished,
        &[
            "claude login: Claude Code is not logged in",
            "run `claude auth login` with a Claude subscription, then try again",
        ],
    );
}
