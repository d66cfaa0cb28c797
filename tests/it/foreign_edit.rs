//! A change in the work tree during a stage by a process outside the stage's family
//! (`docs/run-lifecycle.md`, "Edits by other processes"): the test, standing in for the person,
//! edits the run's work tree at a point the scripted stage waits for (it reads a FIFO the test
//! opens only then), once per stage kind; it is reported as another process's, never as the
//! stage's, and an honest builder is never flagged.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::run_e2e::{BUILD, CHECK, Finished, Harness, build_report, script_with};

const PERSONS_FILE: &str = "notes-by-the-person.txt";

/// A FIFO outside HOME and `/tmp` (the room shows those through private views, where a FIFO is
/// another pipe).
struct Gate {
    _scratch: tempfile::TempDir,
    fifo: PathBuf,
}

impl Gate {
    fn new() -> Gate {
        let scratch = tempfile::tempdir_in("/var/tmp").expect("scratch");
        let fifo = scratch.path().join("gate");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("fifo");
        Gate {
            _scratch: scratch,
            fifo,
        }
    }

    /// The step a scripted stage waits at.
    fn step(&self) -> Value {
        json!({"run": format!("cat {}", self.fifo.display())})
    }

    /// The person: once the stage opened the gate, writes [`PERSONS_FILE`] in the run's work
    /// tree (the workspace `--in-place`, else the run's worktree), then lets the stage go on.
    fn person(&self, workspace: PathBuf, in_place: bool) -> std::thread::JoinHandle<PathBuf> {
        self.person_writing(workspace, in_place, PERSONS_FILE)
    }

    /// [`Gate::person`] writing `rel` (its directory made first).
    fn person_writing(
        &self,
        workspace: PathBuf,
        in_place: bool,
        rel: &'static str,
    ) -> std::thread::JoinHandle<PathBuf> {
        let fifo = self.fifo.clone();
        std::thread::spawn(move || {
            // Opening for writing waits until the stage opened its end.
            let mut gate = fs::OpenOptions::new()
                .write(true)
                .open(&fifo)
                .expect("gate");
            let tree = work_tree(&workspace, in_place);
            let file = tree.join(rel);
            if let Some(parent) = file.parent() {
                fs::create_dir_all(parent).expect("the person's directory");
            }
            fs::write(file, "mine\n").expect("the person's edit");
            std::io::Write::write_all(&mut gate, b"go\n").expect("go");
            tree
        })
    }
}

fn work_tree(workspace: &Path, in_place: bool) -> PathBuf {
    if in_place {
        return workspace.to_owned();
    }
    fs::read_dir(workspace.join(".autocode/worktrees"))
        .expect("worktrees")
        .flatten()
        .next()
        .expect("the run's work tree")
        .path()
}

/// `steps` with the gate first.
fn gated(gate: &Gate, steps: &Value) -> Value {
    let mut all = vec![gate.step()];
    all.extend(steps.as_array().expect("steps").iter().cloned());
    Value::Array(all)
}

/// The directory of the stage whose name contains `part` (the first such).
fn stage_dir(finished: &Finished, part: &str) -> PathBuf {
    let run_dir = PathBuf::from(finished.json["run_dir"].as_str().expect("run_dir"));
    let mut found: Vec<PathBuf> = fs::read_dir(run_dir.join("stages"))
        .expect("stages")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(part))
        .collect();
    found.sort();
    found.into_iter().next().expect("the stage directory")
}

fn attribution(finished: &Finished) -> Value {
    let text = fs::read_to_string(stage_dir(finished, "builder").join("attribution.json"))
        .expect("attribution.json");
    serde_json::from_str(&text).expect("attribution.json is JSON")
}

fn status_text(harness: &Harness) -> String {
    let ws = harness.workspace().display().to_string();
    let out = harness
        .command(&["status", "--workspace", &ws])
        .output()
        .expect("status");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A judging stage of `role` waits at the gate while the person edits: the pause says another
/// process changed the tree, never that the stage did.
fn a_judge_is_not_blamed(role: &str) {
    let gate = Gate::new();
    let happy = script_with(&[]);
    let steps = &happy[role][0];
    let harness = Harness::new(script_with(&[(role, json!([gated(&gate, steps)]))]));
    let person = gate.person(harness.workspace(), false);
    let finished = harness.run(&["--yes"]);
    person.join().expect("the person's thread");
    finished.assert_paused("PAUSED_DISCOVERY_WRITE");
    let reason = finished.json["pause"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("room could not write there")
            && reason.contains("another process")
            && reason.contains(PERSONS_FILE),
        "{role}: {reason}"
    );
    assert!(
        !reason.contains(&format!("the {role} changed")),
        "{role}: {reason}"
    );
}

#[test]
fn an_edit_during_the_requirements_stage_is_not_blamed_on_it() {
    a_judge_is_not_blamed("requirements");
}

#[test]
fn an_edit_during_the_planner_stage_is_not_blamed_on_it() {
    a_judge_is_not_blamed("planner");
}

#[test]
fn an_edit_during_the_plan_reviewer_stage_is_not_blamed_on_it() {
    a_judge_is_not_blamed("plan_reviewer");
}

#[test]
fn an_edit_during_the_tester_stage_is_not_blamed_on_it() {
    a_judge_is_not_blamed("tester");
}

#[test]
fn an_edit_during_the_completion_reviewer_stage_is_not_blamed_on_it() {
    a_judge_is_not_blamed("completion_reviewer");
}

/// The builder writes hello.txt after the person wrote their file: only the person's is named,
/// the stage's result is not taken, and the run resumes once the person has looked.
fn a_persons_edit_during_the_builder(in_place: bool) {
    let gate = Gate::new();
    let builder = json!([
        [gate.step(), {"run": BUILD}, {"run": CHECK}, build_report()],
        [{"run": BUILD}, {"run": CHECK}, build_report()]
    ]);
    let harness = Harness::new(script_with(&[("builder", builder)]));
    let person = gate.person(harness.workspace(), in_place);
    let args: &[&str] = if in_place {
        &["--yes", "--in-place"]
    } else {
        &["--yes"]
    };
    let finished = harness.run(args);
    let root = nix::unistd::geteuid().is_root();
    let tree = person.join().expect("the person's thread");
    if !root {
        // An ordinary user cannot watch the work tree's mount: nothing is claimed either way,
        // and the record and `status` say so.
        finished.assert_complete();
        let record = attribution(&finished);
        assert_eq!(record["attribution"], "unavailable", "{record}");
        assert!(
            status_text(&harness).contains("could not be told apart"),
            "{}",
            status_text(&harness)
        );
        return;
    }
    finished.assert_paused("PAUSED_FOREIGN_EDIT");
    let reason = finished.json["pause"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("another process") && reason.contains(PERSONS_FILE),
        "{reason}"
    );
    assert!(
        !reason.contains("hello.txt"),
        "the builder's own write: {reason}"
    );
    assert_eq!(reason.contains("your workspace"), in_place, "{reason}");
    let record = attribution(&finished);
    assert_eq!(record["attribution"], "watched", "{record}");
    let paths: Vec<&str> = record["foreign"]
        .as_array()
        .expect("foreign")
        .iter()
        .filter_map(|w| w["path"].as_str())
        .collect();
    assert_eq!(paths, [PERSONS_FILE], "{record}");
    // Not committed as the agent's work: the run's branch holds no commit of the stage.
    if !in_place {
        let log = std::process::Command::new("git")
            .args(["log", "--format=%s", "--all", "--", PERSONS_FILE])
            .current_dir(&tree)
            .output()
            .expect("git log");
        assert!(log.stdout.is_empty(), "{log:?}");
    }
    // The person looked; the builder runs again on the tree as it is, and the run completes.
    let attempt = finished.json["pause"]["attempt"]
        .as_str()
        .expect("the paused attempt")
        .to_owned();
    let resumed = harness.resume(&["--abandon-stage", &attempt]);
    resumed.assert_complete();
}

#[test]
fn a_persons_edit_during_the_builder_stage_is_reported_as_theirs() {
    a_persons_edit_during_the_builder(false);
}

#[test]
fn a_persons_edit_in_their_checkout_during_an_in_place_builder_is_reported_as_theirs() {
    a_persons_edit_during_the_builder(true);
}

#[test]
fn an_honest_builder_is_never_flagged() {
    // Its writes through child processes, an interpreter, git, moves and removals, in the
    // tree and its subdirectories.
    let builder = json!([[
        {"run": "mkdir -p src/deep && sh -c 'echo one > src/deep/a.txt' && cp src/deep/a.txt src/b.txt && mv src/b.txt src/c.txt && rm -r src/deep"},
        {"run": "python3 -c \"open('gen.py','w').write('x = 1\\n')\" && git status --short; git diff --stat; true"},
        {"run": BUILD}, {"run": CHECK}, build_report()
    ]]);
    for in_place in [false, true] {
        let harness = Harness::new(script_with(&[("builder", builder.clone())]));
        let args: &[&str] = if in_place {
            &["--yes", "--in-place"]
        } else {
            &["--yes"]
        };
        let finished = harness.run(args);
        finished.assert_complete();
        let record = attribution(&finished);
        if nix::unistd::geteuid().is_root() {
            assert_eq!(record["attribution"], "watched", "{record}");
            assert_eq!(record["foreign"], json!([]), "{record}");
            assert!(!status_text(&harness).contains("could not be told apart"));
        } else {
            assert_eq!(record["attribution"], "unavailable", "{record}");
        }
    }
}

#[test]
fn an_unconfined_builder_says_edits_could_not_be_told_apart() {
    let gate = Gate::new();
    let builder = json!([[gate.step(), {"run": BUILD}, {"run": CHECK}, build_report()]]);
    let harness = Harness::new(script_with(&[("builder", builder)]));
    let person = gate.person(harness.workspace(), false);
    let finished = harness.run(&["--yes", "--unconfined"]);
    person.join().expect("the person's thread");
    // Nothing is claimed either way: the run goes on, and says so.
    finished.assert_complete();
    let record = attribution(&finished);
    assert_eq!(record["attribution"], "unavailable", "{record}");
    assert!(
        record["why"]
            .as_str()
            .unwrap_or_default()
            .contains("unconfined"),
        "{record}"
    );
    let status = status_text(&harness);
    assert!(
        status
            .contains("edits by other processes during this builder stage could not be told apart"),
        "{status}"
    );
}

#[test]
fn a_persons_write_that_git_ignores_is_recorded_not_held_against_the_builder() {
    // A build of the person's own in the tree writes where git ignores: nothing of it can be
    // committed as the agent's work, so the stage goes on.
    let gate = Gate::new();
    let builder = json!([[gate.step(), {"run": BUILD}, {"run": CHECK}, build_report()]]);
    let harness = Harness::new(script_with(&[("builder", builder)]));
    let exclude = harness.workspace().join(".git/info/exclude");
    let mut text = fs::read_to_string(&exclude).unwrap_or_default();
    text.push_str("scratch/\n");
    fs::write(&exclude, text).expect("exclude");
    let person = gate.person_writing(harness.workspace(), false, "scratch/build.log");
    let finished = harness.run(&["--yes"]);
    person.join().expect("the person's thread");
    finished.assert_complete();
    let record = attribution(&finished);
    if nix::unistd::geteuid().is_root() {
        assert_eq!(record["attribution"], "watched", "{record}");
        assert_eq!(record["foreign"], json!([]), "{record}");
        assert_eq!(
            record["ignored"][0]["path"], "scratch/build.log",
            "{record}"
        );
    } else {
        assert_eq!(record["attribution"], "unavailable", "{record}");
    }
}

/// The same run as an ordinary user (root's tests drop to `nobody` through `setpriv`): the
/// work tree's mount cannot be watched, so the person's edit is not claimed either way, and the
/// builder's record and `status` say edits could not be told apart.
#[test]
fn an_ordinary_users_builder_says_edits_could_not_be_told_apart() {
    if !nix::unistd::geteuid().is_root() {
        // Already an ordinary user: `a_persons_edit_during_the_builder_stage_is_reported_as_theirs`
        // takes this path itself.
        return;
    }
    let gate = Gate::new();
    let builder = json!([[gate.step(), {"run": BUILD}, {"run": CHECK}, build_report()]]);
    let harness = Harness::new(script_with(&[("builder", builder)]));
    let root = harness
        .home()
        .parent()
        .expect("the harness root")
        .to_owned();
    let gate_dir = gate.fifo.parent().expect("the gate's directory").to_owned();
    for dir in [&root, &gate_dir] {
        let status = std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(dir)
            .status()
            .expect("chown");
        assert!(status.success());
    }
    let person = gate.person(harness.workspace(), false);
    let finished = super::run_e2e::finish(as_nobody(&harness.run_command(&["--yes"])));
    person.join().expect("the person's thread");
    finished.assert_complete();
    let record = attribution(&finished);
    assert_eq!(record["attribution"], "unavailable", "{record}");
    assert!(
        record["why"]
            .as_str()
            .unwrap_or_default()
            .contains("CAP_SYS_ADMIN"),
        "{record}"
    );
    let ws = harness.workspace().display().to_string();
    let out = as_nobody(&harness.command(&["status", "--workspace", &ws]))
        .output()
        .expect("status");
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(
        status
            .contains("edits by other processes during this builder stage could not be told apart"),
        "{status}"
    );
}

/// `command` run as `nobody`, without root's groups.
fn as_nobody(command: &std::process::Command) -> std::process::Command {
    let mut wrapped = std::process::Command::new("setpriv");
    wrapped
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(command.get_program())
        .args(command.get_args())
        .env_clear()
        .stdin(std::process::Stdio::null());
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (key, value) in command.get_envs() {
        if let Some(value) = value {
            wrapped.env(key, value);
        }
    }
    wrapped
}

#[test]
fn doctor_says_whether_a_persons_edits_can_be_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let expected = autocode::run::runner::foreign_edit_watch_missing(dir.path());
    let out = doctor_json(dir.path());
    assert_eq!(
        out["room"]["foreign_edit_watch_missing"],
        serde_json::to_value(&expected).unwrap(),
        "{out}"
    );
}

fn doctor_json(workspace: &Path) -> Value {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_autocode"))
        .args(["doctor", "--provider", "codex", "--json", "--workspace"])
        .arg(workspace)
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json: {e}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}
