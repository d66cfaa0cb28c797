//! Onboarding a direct endpoint as a new user would, through the built binary in a temporary
//! home: `connections check` and `doctor` agree on what is missing and always say why (never a
//! bare exit 1, never "not installed" for the built-in runtime), and a run without role models
//! names every missing one at once with one command that sets them all.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_autocode");

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn autocode(home: &std::path::Path, args: &[&str]) -> Out {
    let out = Command::new(BIN)
        .args(args)
        .current_dir(home)
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("autocode runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn check_and_doctor_agree_and_say_why() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    // No endpoint at all.
    let check = autocode(home, &["connections", "check", "--provider", "autocode"]);
    assert_eq!(check.code, 1, "{}", check.stderr);
    assert!(
        check.stdout.contains("no direct endpoint is configured"),
        "{}",
        check.stdout
    );
    let doctor = autocode(home, &["doctor", "--provider", "autocode"]);
    assert_eq!(doctor.code, 1);
    assert!(
        doctor
            .stdout
            .contains("problem: no direct endpoint is configured"),
        "{}",
        doctor.stdout
    );
    assert!(
        !doctor.stdout.contains("not installed"),
        "{}",
        doctor.stdout
    );
    assert!(
        doctor.stdout.contains("built in: autocode's own runtime"),
        "{}",
        doctor.stdout
    );
    // Every missing role model at once, with one command for all of them.
    let missing = doctor
        .stdout
        .lines()
        .find(|l| l.contains("has no model for"))
        .unwrap_or_else(|| panic!("{}", doctor.stdout));
    assert!(missing.contains("no model for 7 roles"), "{missing}");
    for flag in [
        "--requirements-model",
        "--planner-model",
        "--plan-reviewer-model",
        "--builder-model",
        "--tester-model",
        "--completion-model",
        "--resolver-model",
    ] {
        assert!(missing.contains(flag), "{flag}: {missing}");
    }

    // An endpoint that needs a key and has none: both say so, with the command that stores it.
    let setup = autocode(
        home,
        &[
            "connections",
            "setup",
            "--name",
            "cloud",
            "--kind",
            "openai",
            "--model",
            "gpt-5=openai",
        ],
    );
    assert_eq!(setup.code, 0, "{}", setup.stderr);
    let check = autocode(home, &["connections", "check", "--provider", "autocode"]);
    assert_eq!(check.code, 1);
    let why = "endpoint cloud has no key stored for https://api.openai.com/v1";
    assert!(check.stderr.contains(why), "{}", check.stderr);
    assert!(check.stderr.contains("--key-stdin"), "{}", check.stderr);
    assert!(
        check.stderr.contains("autocode: setup required"),
        "{}",
        check.stderr
    );
    let doctor = autocode(
        home,
        &[
            "doctor",
            "--provider",
            "autocode",
            "--single-model",
            "cloud/gpt-5",
        ],
    );
    assert_eq!(doctor.code, 1);
    // Once, naming every role that uses the endpoint, not once per role.
    assert_eq!(doctor.stdout.matches(why).count(), 1, "{}", doctor.stdout);
    assert!(doctor.stdout.contains("(the requirements, planner, plan_reviewer, builder, tester, completion_reviewer, resolver's endpoint)"), "{}", doctor.stdout);
    assert!(
        doctor.stdout.trim_end().ends_with("not ready"),
        "{}",
        doctor.stdout
    );

    // A stored key: both agree it is configured.
    let mut keyed = Command::new(BIN);
    keyed
        .args([
            "connections",
            "setup",
            "--name",
            "cloud",
            "--kind",
            "openai",
            "--key-stdin",
        ])
        .current_dir(home)
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("PATH", "/usr/bin:/bin")
        .stdin(std::process::Stdio::piped());
    let mut child = keyed.spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"sk-test").unwrap();
    assert!(child.wait().unwrap().success());
    let check = autocode(home, &["connections", "check", "--provider", "autocode"]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert!(
        check.stderr.contains("autocode: configured"),
        "{}",
        check.stderr
    );
    // The saved endpoint kept its model through the key-only setup.
    assert!(check.stdout.contains("cloud/gpt-5"), "{}", check.stdout);
}
