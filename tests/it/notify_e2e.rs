//! Notifications through the real binary: a run that needs a person and one that completes call
//! a recording command with the right event, the events not selected are not sent, a webhook
//! that hangs does not hold back the run's result, and every channel's outcome is a line of the
//! run's activity log. `autocode notify test` reports each channel.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::run_e2e::{Harness, asking_one_question, script_with};

fn write_config(harness: &Harness, notify: &str) {
    let dir = harness.home().join(".config/autocode");
    fs::create_dir_all(&dir).expect("config dir");
    fs::write(dir.join("config.toml"), format!("[notify]\n{notify}")).expect("config.toml");
}

/// A command that appends its arguments, one line per call, to `record`.
fn recorder(record: &std::path::Path) -> String {
    format!(
        "command = [\"sh\", \"-c\", \"printf '%s|%s|%s\\\\n' \\\"$1\\\" \\\"$2\\\" \\\"$3\\\" >> \\\"$0\\\"\", \"{}\", \"{{event}}\", \"{{code}}\", \"{{run_id}}\"]\n",
        record.display()
    )
}

fn activity(harness: &Harness) -> Vec<Value> {
    let runs = harness.workspace().join(".autocode/runs");
    let mut lines = Vec::new();
    for entry in fs::read_dir(runs).expect("runs").flatten() {
        let text = fs::read_to_string(entry.path().join("activity.jsonl")).unwrap_or_default();
        lines.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
    }
    lines
}

#[test]
fn a_run_notifies_needs_person_then_complete_through_the_recording_command() {
    let asking = asking_one_question();
    let harness = Harness::new(script_with(&[("requirements", json!([asking]))]));
    let record = harness.home().join("record.txt");
    write_config(&harness, &recorder(&record));
    let waiting = harness.run(&[]);
    waiting.assert_paused("WAITING_FOR_USER");
    let run_id = waiting.json["run_id"].as_str().expect("run id").to_owned();
    assert_eq!(
        fs::read_to_string(&record).expect("the command ran"),
        format!("needs_person|WAITING_FOR_USER|{run_id}\n")
    );
    let done = harness.resume(&["--yes"]);
    done.assert_complete();
    assert_eq!(
        fs::read_to_string(&record).expect("record"),
        format!("needs_person|WAITING_FOR_USER|{run_id}\ncomplete||{run_id}\n")
    );
    let notes: Vec<String> = activity(&harness)
        .iter()
        .filter(|l| {
            l["event"]
                .as_str()
                .is_some_and(|e| e.starts_with("notify "))
        })
        .map(|l| {
            format!(
                "{} {}",
                l["event"].as_str().unwrap_or(""),
                l["detail"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        notes,
        [
            "notify needs_person command: delivered",
            "notify complete command: delivered"
        ]
    );
}

#[test]
fn only_the_selected_events_are_sent() {
    let harness = Harness::new(script_with(&[]));
    let record = harness.home().join("record.txt");
    write_config(
        &harness,
        &format!(
            "{}events = [\"failed\", \"needs_person\"]\n",
            recorder(&record)
        ),
    );
    harness.run(&["--yes"]).assert_complete();
    assert!(!record.exists(), "complete was not selected");
}

#[test]
fn a_hanging_webhook_does_not_hold_back_the_result() {
    let harness = Harness::new(script_with(&[]));
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/t", listener.local_addr().expect("addr"));
    write_config(
        &harness,
        &format!("webhook = \"{url}\"\ntimeout_seconds = 30\n"),
    );
    // The server takes the request, says it has it, and answers nothing until released.
    let (got, got_rx) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().expect("accept");
        let mut buf = [0u8; 4096];
        let _ = socket.read(&mut buf);
        got.send(Instant::now()).expect("tell");
        let _ = release_rx.recv_timeout(Duration::from_secs(60));
        drop(socket);
    });
    let ws = harness.workspace().display().to_string();
    let mut exec = harness
        .command(&[
            "exec",
            "Create hello.txt containing hello",
            "--workspace",
            &ws,
            "--provider",
            "fake",
            "--yes",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn exec");
    let stdout = BufReader::new(exec.stdout.take().expect("stdout"));
    let mut result = None;
    for line in stdout.lines() {
        let line: Value = serde_json::from_str(&line.expect("line")).expect("JSON");
        if line["type"] == "result" {
            result = Some((line, Instant::now()));
            break;
        }
    }
    let (result, result_at) = result.expect("a result line");
    assert_eq!(result["status"], "complete", "{result}");
    let request_at = got_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the webhook was called");
    // The result was out before the webhook could have timed out (its bound is 30 s).
    assert!(
        result_at < request_at + Duration::from_secs(10),
        "the result waited for the webhook"
    );
    release.send(()).expect("release");
    let status = exec.wait().expect("exec");
    server.join().expect("server");
    assert_eq!(status.code(), Some(0), "a notification never fails a run");
    let webhook = activity(&harness)
        .into_iter()
        .find(|l| l["event"] == "notify complete")
        .expect("the webhook's outcome is in the activity log");
    assert!(
        webhook["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("webhook: ")),
        "{webhook}"
    );
}

#[test]
fn notify_test_reports_each_channel_and_fails_when_one_fails() {
    let harness = Harness::new(script_with(&[]));
    let record = harness.home().join("record.txt");
    write_config(&harness, &format!("{}desktop = true\n", recorder(&record)));
    let sent = harness.autocode(&["notify", "test", "--json"]);
    assert_eq!(sent.code, Some(0), "{sent:?}");
    let channels: Vec<(String, String)> = sent
        .json
        .as_array()
        .expect("an array")
        .iter()
        .map(|d| {
            (
                d["channel"].as_str().unwrap_or("").to_owned(),
                d["outcome"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        channels,
        [
            ("command".to_owned(), "delivered".to_owned()),
            ("desktop".to_owned(), "skipped".to_owned())
        ]
    );
    assert_eq!(fs::read_to_string(&record).expect("record"), "test||\n");

    write_config(&harness, "command = [\"/nonexistent/notifier\"]\n");
    let failed = harness.autocode(&["notify", "test"]);
    assert_eq!(failed.code, Some(1), "{failed:?}");
    assert!(failed.stderr.contains("command: failed"), "{failed:?}");
    write_config(&harness, "");
    let none = harness.autocode(&["notify", "test"]);
    assert_eq!(none.code, Some(2), "{none:?}");
}
