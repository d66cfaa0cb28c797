//! The operator's side of a run, through the real binary and the scripted fake agent
//! (`run_e2e`'s harness): live progress on a pseudo-terminal, `-q`, a closed stderr, an agent's
//! escape sequences, files that are FIFOs or links to `/dev/zero` wherever autocode reads a file
//! someone else can write, and the peak memory of a stage that prints one enormous line.
//!
//! No sleep is used as synchronization: processes are waited on with a bound (a hang fails the
//! test instead of hanging it).

use std::fs;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::run_e2e::{Harness, finish, plan_ok, script_with};

/// Waits for `child` at most `limit`; kills it and fails the test past that (a hang).
fn wait_bounded(child: &mut Child, what: &str, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}: it hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `command` to its end with a bound; (exit code, stdout, stderr).
fn output_bounded(mut command: Command, what: &str) -> (Option<i32>, String, String) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn autocode");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let status = wait_bounded(&mut child, what, Duration::from_secs(120));
    (
        status.code(),
        out.join().expect("stdout reader"),
        err.join().expect("stderr reader"),
    )
}

fn assert_no_control_sequences(text: &str) {
    for (i, c) in text.char_indices() {
        assert!(
            !c.is_control() || c == '\n' || c == '\t',
            "control character {c:?} at byte {i} reached the terminal: {text:?}"
        );
    }
}

/// The ids of the stages of a run that goes well, in order.
const STAGES: [&str; 6] = [
    "001-requirements-1",
    "002-planner-1",
    "003-plan_reviewer-1",
    "004-builder-1",
    "005-tester-1",
    "006-completion_reviewer-1",
];

/// Everything written to a pseudo-terminal's slave side until every writer closed it.
fn run_on_a_pty(mut command: Command, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let winsize = nix::pty::Winsize {
        ws_row: 40,
        ws_col: 200,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&winsize), None).expect("openpty");
    let slave: OwnedFd = pty.slave;
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(slave))
        .spawn()
        .expect("spawn autocode on a pty");
    // The parent's copy of the slave is gone (moved into the command, dropped with it), so the
    // master reads EOF (EIO) once autocode and its children close their copies.
    drop(command);
    let mut master = fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut buf = [0u8; 1 << 16];
        loop {
            match master.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
            }
        }
        bytes
    });
    let status = wait_bounded(&mut child, "autocode on a pty", Duration::from_secs(120));
    let bytes = reader.join().expect("pty reader");
    (status.code(), String::from_utf8_lossy(&bytes).into_owned())
}

fn run_plain_command(harness: &Harness, extra: &[&str]) -> Command {
    let ws = harness.workspace().display().to_string();
    let mut args = vec![
        "run",
        "Create hello.txt containing hello",
        "--workspace",
        &ws,
        "--provider",
        "fake",
        "--yes",
    ];
    args.extend_from_slice(extra);
    harness.command(&args)
}

#[test]
fn a_terminal_shows_live_lines_redrawn_in_place_then_permanent_stage_lines() {
    let harness = Harness::new(script_with(&[]));
    let (code, screen) = run_on_a_pty(
        run_plain_command(&harness, &[]),
        &[("TERM", "xterm-256color")],
    );
    assert_eq!(code, Some(0), "{screen}");
    // indicatif redraws the live lines in place: clear-line sequences.
    assert!(screen.contains("\u{1b}[2K"), "no redraw: {screen:?}");
    let lines: Vec<&str> = screen.split(['\n', '\r']).collect();
    for stage in STAGES {
        // A live line while it ran (elapsed and tokens, no outcome yet) ...
        assert!(
            lines
                .iter()
                .any(|l| l.contains(stage) && l.contains(" tok") && !l.contains("accepted")),
            "no live line for {stage}: {screen:?}"
        );
        // ... and its permanent line once it finished, the outcome in colour.
        let permanent: Vec<&&str> = lines
            .iter()
            .filter(|l| l.contains(stage) && l.contains("accepted"))
            .collect();
        assert_eq!(permanent.len(), 1, "{stage}: {screen:?}");
        assert!(
            permanent[0].contains("\u{1b}[1m\u{1b}[32maccepted")
                || permanent[0].contains("\u{1b}[32m\u{1b}[1maccepted")
                || permanent[0].contains("\u{1b}[1;32maccepted"),
            "{:?}",
            permanent[0]
        );
    }
    assert!(screen.contains("COMPLETE"), "{screen:?}");
    // What the builder's lines looked like (shown with --nocapture).
    for line in lines.iter().filter(|l| l.contains("004-builder-1")) {
        println!("{line:?}");
    }

    // NO_COLOR: the same live lines, no colour.
    let harness = Harness::new(script_with(&[]));
    let (code, screen) = run_on_a_pty(
        run_plain_command(&harness, &[]),
        &[("TERM", "xterm-256color"), ("NO_COLOR", "1")],
    );
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("\u{1b}[2K"), "{screen:?}");
    assert!(!screen.contains("\u{1b}[32m"), "colour despite NO_COLOR");
    assert!(!screen.contains("\u{1b}[1m\u{1b}[32m"), "{screen:?}");
}

#[test]
fn without_a_terminal_plain_end_lines_start_lines_with_verbose_and_quiet_prints_only_the_outcome() {
    for (args, starts) in [(&[][..], 0), (&["-v"][..], 1)] {
        let harness = Harness::new(script_with(&[]));
        let (code, _, stderr) = output_bounded(run_plain_command(&harness, args), "plain run");
        assert_eq!(code, Some(0), "{stderr}");
        assert_no_control_sequences(&stderr);
        for stage in STAGES {
            let started = stderr
                .lines()
                .filter(|l| l.starts_with(&format!("started {stage} on fake/")))
                .count();
            let ended = stderr
                .lines()
                .filter(|l| l.starts_with(stage) && l.ends_with(" accepted"))
                .count();
            assert_eq!((started, ended), (starts, 1), "{stage} {args:?}: {stderr}");
        }
    }

    let harness = Harness::new(script_with(&[]));
    let (code, stdout, stderr) = output_bounded(run_plain_command(&harness, &["-q"]), "quiet run");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("COMPLETE"), "{stderr}");
    for stage in STAGES {
        assert!(!stderr.contains(stage), "-q printed a stage line: {stderr}");
    }
    assert!(!stderr.contains("run directory"), "{stderr}");
}

#[test]
fn a_closed_stderr_neither_panics_nor_leaves_the_run_unrecorded() {
    // A pipe whose reader is gone (`autocode … 2>&1 | head -1`): every write fails with EPIPE.
    let harness = Harness::new(script_with(&[]));
    let mut child = harness
        .run_command(&["--yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stderr.take());
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let status = wait_bounded(
        &mut child,
        "run with a broken stderr",
        Duration::from_secs(120),
    );
    let json: Value = serde_json::from_str(reader.join().expect("reader").trim()).expect("json");
    assert_eq!(status.code(), Some(0), "{json}");
    assert_eq!(json["outcome"], "complete");
    let status = harness.status();
    assert!(status.json["completed_at"].is_string(), "{status:?}");

    // A closed descriptor 2 (`2>&-`), on a run that pauses: exit 3, the pause recorded.
    let planner = json!([[{"write": "notes.md", "content": "my plan\n"},
                         {"report": plan_ok()[0]["report"].clone()}]]);
    let harness = Harness::new(script_with(&[("planner", planner)]));
    // Unconfined, so the write happens and the snapshot comparison stops it.
    let inner = harness.run_command(&["--yes", "--unconfined"]);
    let mut closed = Command::new("sh");
    closed
        .arg("-c")
        .arg("exec \"$0\" \"$@\" 2>&-")
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(inner.get_current_dir().expect("cwd"))
        .env_clear()
        .envs(
            inner
                .get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        );
    let finished = finish(closed);
    assert_eq!(finished.code, Some(3), "{finished:?}");
    assert_eq!(
        finished.pause_code(),
        Some("PAUSED_DISCOVERY_WRITE"),
        "{finished:?}"
    );
    let status = harness.status();
    assert_eq!(
        status.json["pause"]["code"], "PAUSED_DISCOVERY_WRITE",
        "{status:?}"
    );
}

/// Text full of escape sequences: a window title, cursor moves, an 8-bit CSI, a bell, a
/// carriage return that would overwrite the line.
const HOSTILE: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2K\u{1b}[1Aanswer \u{9b}31mthis\roverwritten";

#[test]
fn an_agents_escape_sequences_reach_the_terminal_stripped() {
    let requirements = json!([[{"report": {
        "summary": format!("summary {HOSTILE}"),
        "goals": ["hello.txt exists and contains hello"],
        "constraints": [],
        "acceptance_criteria": [{"id": "AC1", "text": "hello.txt contains exactly hello",
                                "covers": ["Create hello.txt containing hello"]}],
        "open_questions": [{"id": "Q1", "question": format!("which greeting? {HOSTILE}"),
                            "proposed_default": format!("hello {HOSTILE}")}]
    }}]]);
    let harness = Harness::new(script_with(&[("requirements", requirements)]));
    let ws = harness.workspace().display().to_string();
    let objective = format!("Create hello.txt containing hello {HOSTILE}");
    let mut command = harness.run_objective_command(&objective, &[]);
    command.stdin(Stdio::null());
    let (code, stdout, stderr) = output_bounded(command, "hostile run");
    assert_eq!(code, Some(3), "{stderr}");
    // The person sees the question, stripped; the data keeps it, escaped as JSON escapes it.
    assert!(stderr.contains("which greeting?"), "{stderr}");
    assert!(stderr.contains("]0;pwned"), "{stderr}");
    assert_no_control_sequences(&stderr);
    assert!(
        !stdout
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "raw control characters in --json: {stdout:?}"
    );
    let json: Value = serde_json::from_str(stdout.trim()).expect("json");
    assert_eq!(json["pause"]["code"], "WAITING_FOR_USER");
    assert!(
        json["pause"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains(HOSTILE)),
        "{json}"
    );
    // `status` shows the same pause on stdout for people: stripped too.
    let (code, stdout, stderr) =
        output_bounded(harness.command(&["status", "--workspace", &ws]), "status");
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stdout.contains("which greeting?"), "{stdout}");
    assert_no_control_sequences(&stdout);
    assert_no_control_sequences(&stderr);
}

/// Makes `path` a FIFO (nobody writes it: a blocking open would hang) or a link to
/// `/dev/zero` (a whole read would never end).
fn make_hostile(path: &Path, fifo: bool) {
    let _ = fs::remove_file(path);
    if fifo {
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    } else {
        std::os::unix::fs::symlink("/dev/zero", path).expect("symlink");
    }
}

fn kind_word(fifo: bool) -> &'static str {
    if fifo { "a FIFO" } else { "a character device" }
}

#[test]
fn fifos_and_dev_zero_in_every_configurable_path_are_clear_errors() {
    for fifo in [true, false] {
        // The provider's TOML.
        let harness = Harness::new(script_with(&[]));
        let toml = harness.home().join(".config/autocode/providers/fake.toml");
        make_hostile(&toml, fifo);
        let (code, _, stderr) = output_bounded(
            run_plain_command(&harness, &[]),
            "run with a hostile provider TOML",
        );
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(kind_word(fifo)), "{stderr}");
        assert!(stderr.contains("fake.toml"), "{stderr}");
        let (_, stdout, stderr) = output_bounded(
            harness.command(&["providers", "list"]),
            "providers list with a hostile TOML",
        );
        assert!(
            format!("{stdout}{stderr}").contains(kind_word(fifo)),
            "{stdout}{stderr}"
        );

        // config.toml (read for the default provider).
        let harness = Harness::new(script_with(&[]));
        make_hostile(&harness.home().join(".config/autocode/config.toml"), fifo);
        let ws = harness.workspace().display().to_string();
        let (code, _, stderr) = output_bounded(
            harness.command(&["run", "objective", "--workspace", &ws, "--yes"]),
            "run with a hostile config.toml",
        );
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(kind_word(fifo)), "{stderr}");
        assert!(stderr.contains("config.toml"), "{stderr}");

        // run.json of a finished run.
        let harness = Harness::new(script_with(&[]));
        let done = harness.run(&["--yes"]);
        done.assert_complete();
        let run_json = Path::new(done.json["run_dir"].as_str().expect("run_dir")).join("run.json");
        make_hostile(&run_json, fifo);
        for args in [
            vec!["status", "--workspace", &ws_of(&harness)],
            vec!["resume", "--workspace", &ws_of(&harness)],
        ] {
            let (code, _, stderr) = output_bounded(harness.command(&args), "hostile run.json");
            assert_ne!(code, Some(0), "{args:?}: {stderr}");
            // Below .autocode/ a link is refused as a link, before what it points at matters.
            let why = if fifo {
                kind_word(fifo)
            } else {
                "symbolic link"
            };
            assert!(stderr.contains(why), "{args:?}: {stderr}");
        }
    }
}

fn ws_of(harness: &Harness) -> String {
    harness.workspace().display().to_string()
}

#[test]
fn a_report_file_that_is_a_fifo_or_dev_zero_is_no_report() {
    for fifo in [true, false] {
        let harness = Harness::new(script_with(&[]));
        // A report-file tool whose "report" is a FIFO or a link to /dev/zero.
        let make = if fifo {
            "import os,sys; os.mkfifo(sys.argv[1])"
        } else {
            "import os,sys; os.symlink('/dev/zero', sys.argv[1])"
        };
        let toml = format!(
            "name = \"hostile\"\ncommand = [\"python3\", \"-c\", {}, \"{{report}}\"]\nprompt = \"stdin\"\noutput = \"report_file\"\n\n[roles]\nglm = {{ model = \"alpha-large\" }}\nrequirements = {{ model = \"alpha-large\" }}\nplan_reviewer = {{ model = \"beta-large\" }}\nterra = {{ model = \"alpha-large\" }}\nsol = {{ model = \"beta-large\" }}\ncompletion = {{ model = \"beta-large\" }}\nastra = {{ model = \"alpha-large\" }}\n",
            serde_json::to_string(make).expect("string")
        );
        fs::write(
            harness
                .home()
                .join(".config/autocode/providers/hostile.toml"),
            toml,
        )
        .expect("write hostile.toml");
        let ws = ws_of(&harness);
        let finished = finish(harness.command(&[
            "run",
            "objective",
            "--workspace",
            &ws,
            "--provider",
            "hostile",
            "--yes",
            "--json",
        ]));
        assert_eq!(finished.code, Some(3), "{finished:?}");
        assert_eq!(
            finished.pause_code(),
            Some("PAUSED_INVALID_OUTPUT"),
            "{finished:?}"
        );
    }
}

/// The live stream reader drops an over-long line without holding it: autocode's peak RSS
/// stays under 64 MiB while a builder prints one line of `AUTOCODE_LONG_LINE_BYTES` (256 MiB
/// here; `benches/long_line_rss.sh` runs it with 1 GiB on a release build). The peak is the
/// largest `ru_maxrss` among the processes a small wrapper waited for: autocode and everything
/// it waited for (keeper, agent), so every one of them stayed under the bound.
#[test]
fn a_huge_stdout_line_does_not_grow_autocode() {
    let bytes: u64 = std::env::var("AUTOCODE_LONG_LINE_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256 << 20);
    // The same run with a short line is the baseline: the binary's own size (a debug build
    // with every module linked in) is not what this measures.
    let baseline = peak_rss_of_a_run_with_a_line_of(1000);
    let peak = peak_rss_of_a_run_with_a_line_of(bytes);
    println!("peak RSS with a {bytes}-byte line: {peak} KiB (a 1000-byte line: {baseline} KiB)");
    assert!(
        peak < baseline + 32 * 1024,
        "peak RSS {peak} KiB with a {bytes}-byte line, {baseline} KiB with a 1000-byte one"
    );
}

/// The peak resident set (KiB) of the largest process of a whole run whose builder prints one
/// line of `bytes` bytes.
fn peak_rss_of_a_run_with_a_line_of(bytes: u64) -> u64 {
    let builder = json!([[{"long_line": bytes},
                         {"run": super::run_e2e::BUILD}, {"run": super::run_e2e::CHECK},
                         super::run_e2e::build_report()]]);
    let harness = Harness::new(script_with(&[("builder", builder)]));
    let inner = harness.run_command(&["--yes"]);
    let mut wrapped = Command::new("python3");
    wrapped
        .arg("-c")
        .arg(
            "import resource, subprocess, sys\n\
             code = subprocess.call(sys.argv[1:], stderr=subprocess.DEVNULL)\n\
             peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n\
             print('PEAK_KIB', peak, 'EXIT', code)\n",
        )
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(inner.get_current_dir().expect("cwd"))
        .env_clear()
        .envs(
            inner
                .get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        );
    let (code, stdout, stderr) = output_bounded(wrapped, "a run with a huge line");
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("PEAK_KIB"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[3], "0", "the run completes: {stdout}");
    fields[1].parse().expect("peak")
}

#[test]
fn providers_show_warns_about_values_substituted_into_a_shell_script() {
    let harness = Harness::new(script_with(&[]));
    let providers = harness.home().join(".config/autocode/providers");
    fs::write(
        providers.join("shelly.toml"),
        "name = \"shelly\"\ncommand = [\"sh\", \"-c\", \"tool --cd {workspace} -m {model}\"]\nprompt = \"stdin\"\noutput = \"opencode_events\"\n\n[roles]\nglm = { model = \"alpha-large\" }\nrequirements = { model = \"alpha-large\" }\nplan_reviewer = { model = \"beta-large\" }\nterra = { model = \"alpha-large\" }\nsol = { model = \"beta-large\" }\ncompletion = { model = \"beta-large\" }\nastra = { model = \"alpha-large\" }\n",
    )
    .expect("write shelly.toml");
    let (code, stdout, stderr) = output_bounded(
        harness.command(&["providers", "show", "shelly"]),
        "providers show",
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("warning: command substitutes {workspace}, {model} into a shell script"),
        "{stdout}"
    );
    // The fake provider passes its values as separate arguments: no such warning.
    let (_, stdout, _) = output_bounded(
        harness.command(&["providers", "show", "fake"]),
        "providers show fake",
    );
    assert!(!stdout.contains("into a shell script"), "{stdout}");
}
