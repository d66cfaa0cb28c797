//! `autocode dashboard` against the real binary: its security layer (Host allowlist on every
//! path, the token and its cookie, the failed-token limit, JSON-only same-origin mutations, no
//! CORS, contained files), its views of real runs driven by the scripted fake agent
//! (`run_e2e`'s harness), the event stream's byte-offset resume, and decisions made through the
//! server (stale revision and plan token refused, idempotent request ids, the activity log).
//!
//! Requests are written by hand over a TCP socket (`dashboard_client`) so every header (Host,
//! Origin, Content-Type) is exactly what the test says. No sleep is used as synchronization:
//! conditions are polled with a bound.

use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::dashboard_client::{Dashboard, hostile_builder, only_run};
use super::run_e2e::{Harness, script_with, wait_until};

#[test]
fn every_path_needs_the_right_host_and_the_token() {
    let harness = Harness::new(script_with(&[]));
    let dash = Dashboard::start(&harness, &[&harness.workspace()]);
    let cookie = format!("Cookie: autocode_dashboard={}", dash.token);
    let paths = [
        "/",
        "/app.js",
        "/app.css",
        "/api/runs",
        "/api/ws/0/runs/x/stages/y/events",
        "/login?token=x",
    ];
    for path in paths {
        // A DNS-rebinding page reaches the port under its own name: refused, token or not.
        let wrong = dash.raw(
            &format!(
                "GET {path} HTTP/1.1\r\nHost: evil.example:{}\r\n{cookie}",
                dash.port
            ),
            "",
        );
        assert_eq!(wrong.status, 421, "{path}: {wrong:?}");
        assert!(!wrong.body.contains("autocode dashboard"), "{wrong:?}");
        let other_port = dash.raw(
            &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:1\r\n{cookie}"),
            "",
        );
        assert_eq!(other_port.status, 421, "{path}: {other_port:?}");
        // HTTP/1.0 without a Host header: refused as well.
        let missing = dash.raw(&format!("GET {path} HTTP/1.0\r\n{cookie}"), "");
        assert!(
            missing.status == 421 || missing.status == 400,
            "{path}: {missing:?}"
        );
    }
    // No token, a wrong token: 401 on every path but /login, static files included.
    for path in &paths[..5] {
        let none = dash.raw(&format!("GET {path} HTTP/1.1\r\nHost: {}", dash.host()), "");
        assert_eq!(none.status, 401, "{path}: {none:?}");
    }
    let wrong = dash.raw(
        &format!(
            "GET /api/runs HTTP/1.1\r\nHost: {}\r\nCookie: autocode_dashboard={}0",
            dash.host(),
            dash.token
        ),
        "",
    );
    assert_eq!(wrong.status, 401, "{wrong:?}");
    // The right token: the login sets an HttpOnly, SameSite=Strict cookie and goes to /.
    let login = dash.raw(
        &format!(
            "GET /login?token={} HTTP/1.1\r\nHost: localhost:{}",
            dash.token, dash.port
        ),
        "",
    );
    assert_eq!(login.status, 303, "{login:?}");
    let cookie = &login.headers["set-cookie"];
    assert!(
        cookie.contains(&dash.token)
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let page = dash.get("/");
    assert_eq!(page.status, 200, "{page:?}");
    assert!(page.body.contains("/app.js"), "{page:?}");
    for reply in [&page, &login, &wrong] {
        assert_eq!(
            reply.headers["content-security-policy"],
            "default-src 'self'; frame-ancestors 'none'"
        );
        assert_eq!(reply.headers["x-content-type-options"], "nosniff");
        assert_eq!(reply.headers["cache-control"], "no-store");
        assert!(
            !reply
                .headers
                .keys()
                .any(|k| k.starts_with("access-control-")),
            "{reply:?}"
        );
    }
    // Bearer for scripts, from the 0600 token file.
    let file = harness.home().join(".local/state/autocode/dashboard.json");
    let mode = fs::metadata(&file).map(|m| {
        use std::os::unix::fs::PermissionsExt;
        m.permissions().mode() & 0o777
    });
    assert_eq!(mode.ok(), Some(0o600));
    let saved: Value = serde_json::from_slice(&fs::read(&file).expect("token file")).expect("json");
    let bearer = dash.raw(
        &format!(
            "GET /api/runs HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}",
            dash.host(),
            saved["token"].as_str().expect("token")
        ),
        "",
    );
    assert_eq!(bearer.status, 200, "{bearer:?}");

    // Failed token attempts are limited: past five (the wrong cookie above was the first), the
    // login answers 429 even to the right token, while a browser already logged in keeps
    // working.
    for _ in 0..4 {
        let guess = dash.raw(
            &format!("GET /login?token=guess HTTP/1.1\r\nHost: {}", dash.host()),
            "",
        );
        assert_eq!(guess.status, 401, "{guess:?}");
    }
    let limited = dash.raw(
        &format!(
            "GET /login?token={} HTTP/1.1\r\nHost: {}",
            dash.token,
            dash.host()
        ),
        "",
    );
    assert_eq!(limited.status, 429, "{limited:?}");
    assert_eq!(dash.get("/api/runs").status, 200);
}

#[test]
fn a_decision_is_a_same_origin_json_post_with_the_header() {
    let harness = Harness::new(script_with(&[]));
    harness.run(&[]).assert_paused("AWAITING_PLAN_APPROVAL");
    let (_, run) = only_run(&harness);
    let dash = Dashboard::start(&harness, &[&harness.workspace()]);
    let view = dash.get_json(&format!("/api/ws/0/runs/{run}"));
    let body = json!({
        "request_id": "req-forged-0001",
        "revision": view["revision"],
        "action": "approve_plan",
        "plan_token": view["plan_token"],
    })
    .to_string();
    let host = dash.host();
    let cookie = format!("Cookie: autocode_dashboard={}", dash.token);
    let path = format!("/api/ws/0/runs/{run}/decide");
    let cases = [
        // Another site's page: its Origin.
        format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\nX-Autocode-Dashboard: 1\r\n{cookie}"
        ),
        // No Origin at all.
        format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nX-Autocode-Dashboard: 1\r\n{cookie}"
        ),
        // A text/plain body (what a cross-site form or a simple fetch sends).
        format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nContent-Type: text/plain\r\nX-Autocode-Dashboard: 1\r\n{cookie}"
        ),
        // A form body.
        format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nContent-Type: application/x-www-form-urlencoded\r\nX-Autocode-Dashboard: 1\r\n{cookie}"
        ),
        // Without the custom header.
        format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nContent-Type: application/json\r\n{cookie}"
        ),
        // Without the token.
        format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nContent-Type: application/json\r\nX-Autocode-Dashboard: 1"
        ),
        // The port of another server on this machine as Origin.
        format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://127.0.0.1:1\r\nContent-Type: application/json\r\nX-Autocode-Dashboard: 1\r\n{cookie}"
        ),
    ];
    for head in &cases {
        let reply = dash.raw(head, &body);
        assert!(
            reply.status == 403 || reply.status == 401,
            "{head}: {reply:?}"
        );
        assert!(
            !reply
                .headers
                .keys()
                .any(|k| k.starts_with("access-control-")),
            "{reply:?}"
        );
    }
    // A CORS preflight gets no CORS answer.
    let preflight = dash.raw(
        &format!("OPTIONS {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\n{cookie}"),
        "",
    );
    assert_eq!(preflight.status, 405, "{preflight:?}");
    assert!(
        !preflight
            .headers
            .keys()
            .any(|k| k.starts_with("access-control-"))
    );
    // Nothing was decided: the run still waits for its plan approval, and no planner ran again.
    let after = dash.get_json(&format!("/api/ws/0/runs/{run}"));
    assert_eq!(after["pause"]["code"], "AWAITING_PLAN_APPROVAL");
    assert_eq!(after["revision"], view["revision"]);
    assert_eq!(
        harness.roles_called(),
        ["requirements", "planner", "plan_reviewer"]
    );
}

#[test]
fn files_are_contained_in_the_run_directory() {
    let harness = Harness::new(script_with(&[]));
    harness.run(&["--yes"]).assert_complete();
    let (dir, run) = only_run(&harness);
    let dash = Dashboard::start(&harness, &[&harness.workspace()]);
    // A link inside the run directory that points out of it.
    std::os::unix::fs::symlink("/etc/hostname", dir.join("escape")).expect("symlink");
    let secret = harness.workspace().join("secret.txt");
    fs::write(&secret, "do not serve").expect("secret");
    std::os::unix::fs::symlink(&secret, dir.join("escape2")).expect("symlink");
    for (path, status) in [
        ("../../../../etc/hostname", 400),
        ("%2Fetc%2Fhostname", 400),
        ("escape", 400),
        ("escape2", 400),
        ("stages/..%2F..%2F..%2Fsecret.txt", 400),
        ("nope.json", 404),
    ] {
        let reply = dash.get(&format!("/api/ws/0/runs/{run}/files?path={path}"));
        assert_eq!(reply.status, status, "{path}: {reply:?}");
        assert!(!reply.body.contains("do not serve"), "{reply:?}");
    }
    // A file that is there: served as text.
    let activity = dash.get(&format!("/api/ws/0/runs/{run}/files?path=activity.jsonl"));
    assert_eq!(activity.status, 200, "{activity:?}");
    assert!(activity.headers["content-type"].starts_with("text/plain"));
    // Run ids and stage names are not paths either.
    assert_eq!(dash.get("/api/ws/0/runs/..%2F..%2Fetc").status, 400);
    assert_eq!(
        dash.get(&format!("/api/ws/0/runs/{run}/stages/..")).status,
        404
    );
    assert_eq!(dash.get(&format!("/api/ws/7/runs/{run}")).status, 404);
}

#[test]
fn views_show_the_run_the_cli_sees_and_events_resume_by_offset() {
    let harness = Harness::new(script_with(&[("builder", json!([hostile_builder()]))]));
    harness.run(&["--yes"]).assert_complete();
    let (dir, run) = only_run(&harness);
    let dash = Dashboard::start(&harness, &[&harness.workspace()]);
    let runs = dash.get_json("/api/runs");
    let row = &runs["runs"][0];
    assert_eq!(row["run_id"], run.as_str());
    assert_eq!(row["phase"], "complete");
    assert!(row["driven_by"].is_null(), "{row}");
    assert_eq!(row["cut_off"], false);
    assert!(
        row["usage"]["output_tokens"].as_u64().unwrap_or(0) > 0,
        "{row}"
    );

    let view = dash.get_json(&format!("/api/ws/0/runs/{run}"));
    let status = harness.status();
    assert_eq!(view["state"], status.json, "the run view is status --json");
    let builder = view["state"]["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .find(|a| a["role"] == "builder")
        .expect("a builder stage")["dir"]
        .as_str()
        .expect("dir")
        .to_owned();
    let stage = dash.get_json(&format!("/api/ws/0/runs/{run}/stages/{builder}"));
    assert_eq!(stage["validation"]["verified"]["accepted"], true, "{stage}");
    // The agent's markup comes back as JSON data (served as JSON, nosniff), never as a page.
    let reply = dash.get(&format!("/api/ws/0/runs/{run}/stages/{builder}"));
    assert!(reply.headers["content-type"].starts_with("application/json"));
    assert!(
        stage["report"]["verified"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("<script>")),
        "{stage}"
    );
    assert!(
        stage["ledger"].as_array().is_some_and(|l| !l.is_empty()),
        "{stage}"
    );

    // The event stream: one event per line, its id the byte offset after it, then `end`.
    let events_path = format!("/api/ws/0/runs/{run}/stages/{builder}/events");
    let file = fs::read_to_string(dir.join("stages").join(&builder).join("events.jsonl"))
        .expect("events.jsonl");
    let lines: Vec<&str> = file.lines().collect();
    assert!(lines.len() >= 3, "{file}");
    let parsed = sse(&dash.get(&events_path).body);
    let data: Vec<&str> = parsed
        .iter()
        .filter(|e| e.0 == "line")
        .map(|e| e.2.as_str())
        .collect();
    assert_eq!(data, lines);
    assert_eq!(parsed.last().map(|e| e.0.as_str()), Some("end"));
    let second_id = parsed[1].1.clone();
    assert_eq!(
        second_id.parse::<usize>().ok(),
        Some(lines[0].len() + lines[1].len() + 2)
    );
    // Reconnecting with Last-Event-ID resumes after that line, exactly.
    let resumed = dash.raw(
        &format!(
            "GET {events_path} HTTP/1.1\r\nHost: {}\r\nCookie: autocode_dashboard={}\r\nLast-Event-ID: {second_id}",
            dash.host(),
            dash.token
        ),
        "",
    );
    let rest: Vec<String> = sse(&resumed.body)
        .into_iter()
        .filter(|e| e.0 == "line")
        .map(|e| e.2)
        .collect();
    assert_eq!(rest, lines[2..]);

    // The diff of the run's branch, file by file.
    let diff = dash.get_json(&format!("/api/ws/0/runs/{run}/diff"));
    let files: Vec<&str> = diff["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    assert!(files.contains(&"hello.txt"), "{diff}");
    assert!(!diff["commits"].as_array().expect("commits").is_empty());
    let one = dash.get_json(&format!("/api/ws/0/runs/{run}/diff/file?path=hello.txt"));
    assert!(
        one["text"].as_str().is_some_and(|t| t.contains("+hello")),
        "{one}"
    );
    // Only a path the branch changes.
    assert_eq!(
        dash.get(&format!("/api/ws/0/runs/{run}/diff/file?path=README.md"))
            .status,
        404
    );
}

/// `(event, id, data)` of an event-stream body.
fn sse(body: &str) -> Vec<(String, String, String)> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let (mut event, mut id, mut data) =
                (String::from("message"), String::new(), Vec::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                }
            }
            (event, id, data.join("\n"))
        })
        .collect()
}

#[test]
fn a_plan_approval_through_the_server_is_bound_recorded_and_idempotent() {
    let harness = Harness::new(script_with(&[]));
    harness.run(&[]).assert_paused("AWAITING_PLAN_APPROVAL");
    let (dir, run) = only_run(&harness);
    let dash = Dashboard::start(&harness, &[&harness.workspace()]);
    let view = dash.get_json(&format!("/api/ws/0/runs/{run}"));
    assert_eq!(view["pause"]["code"], "AWAITING_PLAN_APPROVAL");
    assert!(
        view["pause"]["next_step"]
            .as_str()
            .is_some_and(|s| s.contains("--approve-plan")),
        "{view}"
    );
    let token = view["plan_token"].as_str().expect("plan token").to_owned();
    let revision = view["revision"].as_str().expect("revision").to_owned();

    // A page drawn before the run moved on, and a plan the page did not show: refused.
    let stale = dash.decide(
        0,
        &run,
        &json!({"request_id": "req-stale-0001", "revision": "2000-01-01T00:00:00Z",
                "action": "approve_plan", "plan_token": token}),
    );
    assert_eq!(stale.status, 409, "{stale:?}");
    assert!(stale.body.contains("moved on"), "{stale:?}");
    let other_plan = dash.decide(
        0,
        &run,
        &json!({"request_id": "req-other-0001", "revision": revision,
                "action": "approve_plan", "plan_token": "r1:0000"}),
    );
    assert_eq!(other_plan.status, 409, "{other_plan:?}");
    // A decision the run does not wait for.
    let not_waiting = dash.decide(
        0,
        &run,
        &json!({"request_id": "req-accept-0001", "revision": revision,
                "action": "accept_test_changes"}),
    );
    assert_eq!(not_waiting.status, 409, "{not_waiting:?}");
    assert_eq!(
        harness.roles_called(),
        ["requirements", "planner", "plan_reviewer"]
    );

    let body = json!({"request_id": "req-approve-0001", "revision": revision,
                      "action": "approve_plan", "plan_token": token});
    let accepted = dash.decide(0, &run, &body);
    assert_eq!(accepted.status, 202, "{accepted:?}");
    let record = dash.wait_decision("req-approve-0001");
    assert_eq!(record["status"], "done", "{record}");
    assert_eq!(record["exit_code"], 0, "{record}");
    assert_eq!(record["output"]["outcome"], "complete", "{record}");
    assert!(
        record["command"]
            .as_array()
            .is_some_and(|c| c.iter().any(|a| a == "--approve-plan")),
        "{record}"
    );
    let status = harness.status();
    assert_eq!(status.json["phase"]["phase"], "complete", "{status:?}");
    // The same request again answers the first outcome; nothing runs twice.
    let calls = harness.calls().len();
    let again = dash.decide(0, &run, &body);
    assert_eq!(again.status, 200, "{again:?}");
    assert_eq!(again.json()["request_id"], "req-approve-0001");
    assert_eq!(harness.calls().len(), calls);
    // Recorded in the run's activity log as made from the dashboard.
    let activity = fs::read_to_string(dir.join("activity.jsonl")).expect("activity");
    assert!(
        activity
            .lines()
            .any(|l| l.contains("dashboard decision: approve_plan")
                && l.contains("req-approve-0001")),
        "{activity}"
    );
    // The view now shows the decision and the completed run; the old revision is gone.
    let after = dash.get_json(&format!("/api/ws/0/runs/{run}"));
    assert_ne!(after["revision"], revision.as_str());
    assert_eq!(after["decisions"][0]["request_id"], "req-approve-0001");
}

#[test]
fn stop_signals_the_process_that_drives_the_run() {
    // A builder that hangs until it is stopped.
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([[{"run": "true"}, {"hang": true}]]),
    )]));
    let mut run = harness
        .run_command(&["--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the run");
    let marker = harness.state().join("builder-1.hanging");
    wait_until("the builder to hang", Duration::from_secs(60), || {
        marker.exists()
    });
    let (_, id) = only_run(&harness);
    let dash = Dashboard::start(&harness, &[&harness.workspace()]);
    let view = dash.get_json(&format!("/api/ws/0/runs/{id}"));
    assert_eq!(view["driven_by"]["pid"], run.id(), "{view}");
    // While a process drives it, nothing but stop is accepted.
    let resume = dash.decide(
        0,
        &id,
        &json!({"request_id": "req-resume-0001", "revision": view["revision"], "action": "clean"}),
    );
    assert_eq!(resume.status, 409, "{resume:?}");
    let stop = dash.decide(
        0,
        &id,
        &json!({"request_id": "req-stop-00001", "revision": view["revision"], "action": "stop"}),
    );
    assert_eq!(stop.status, 202, "{stop:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = run.try_wait().expect("try_wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the run did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(3), "paused, as after Ctrl-C");
    let after = dash.get_json(&format!("/api/ws/0/runs/{id}"));
    assert_eq!(after["pause"]["code"], "PAUSED_INTERRUPTED", "{after}");
    assert!(after["driven_by"].is_null());
}

#[test]
fn a_stage_the_pause_names_is_set_aside_and_run_again() {
    let requirements_ok = json!([{"report": {
        "summary": "A file hello.txt that says hello.",
        "goals": ["hello.txt exists and contains hello"],
        "constraints": [],
        "acceptance_criteria": [{"id": "AC1", "text": "hello.txt contains exactly hello",
                                "covers": ["Create hello.txt containing hello"]}],
        "open_questions": []
    }}]);
    let harness = Harness::new(script_with(&[(
        "requirements",
        json!([[{"exit": 2}], requirements_ok]),
    )]));
    harness
        .run(&["--yes"])
        .assert_paused("PAUSED_PROVIDER_UNCERTAIN");
    let (_, id) = only_run(&harness);
    let dash = Dashboard::start(&harness, &[&harness.workspace()]);
    let view = dash.get_json(&format!("/api/ws/0/runs/{id}"));
    // A plain resume keeps this pause (it needs the stage set aside): done, paused again.
    let plain = dash.decide(
        0,
        &id,
        &json!({"request_id": "req-resume-plain", "revision": view["revision"], "action": "resume"}),
    );
    assert_eq!(plain.status, 202, "{plain:?}");
    let record = dash.wait_decision("req-resume-plain");
    assert_eq!(record["exit_code"], 3, "{record}");
    let view = dash.get_json(&format!("/api/ws/0/runs/{id}"));
    assert_eq!(view["pause"]["code"], "PAUSED_PROVIDER_UNCERTAIN");
    let abandon = dash.decide(
        0,
        &id,
        &json!({"request_id": "req-abandon-0001", "revision": view["revision"],
                "action": "abandon_stage"}),
    );
    assert_eq!(abandon.status, 202, "{abandon:?}");
    let record = dash.wait_decision("req-abandon-0001");
    assert!(
        record["command"]
            .as_array()
            .is_some_and(|c| c.iter().any(|a| a == "--abandon-stage")),
        "{record}"
    );
    // The run was started with --yes (recorded): it goes on to its end.
    let after = dash.get_json(&format!("/api/ws/0/runs/{id}"));
    assert!(after["pause"].is_null(), "{after}");
    assert_eq!(after["state"]["phase"]["phase"], "complete", "{after}");
    assert_eq!(
        harness.roles_called()[..3],
        ["requirements", "requirements", "planner"]
    );
}

#[test]
fn scorecards_are_scenario_stats_of_the_folders_given_and_the_shipped_matrix() {
    use autocode::scenario::result::{self, RESULT_FORMAT, ScenarioResult, Timings};
    use autocode::scenario::verdict::{RunEnding, Verdict};
    let harness = Harness::new(script_with(&[]));
    let out = tempfile::tempdir().expect("results");
    for (repeat, verdict) in [(0, Verdict::Pass), (1, Verdict::HonestStop)] {
        let dir = result::result_dir(out.path(), "hello", "scripted-opencode", repeat);
        fs::create_dir_all(&dir).expect("result dir");
        let ending = match verdict {
            Verdict::Pass => RunEnding::Complete,
            _ => RunEnding::Paused {
                code: autocode::pause::PauseCode::PausedBlocked,
                reason: "<b>blocked</b>".into(),
            },
        };
        result::write(
            &dir,
            &ScenarioResult {
                format_version: RESULT_FORMAT,
                case: "hello".into(),
                profile: "scripted-opencode".into(),
                protocol: None,
                repeat,
                verdict,
                ending,
                run_id: None,
                stages: 6,
                resumes: 0,
                tokens: 100,
                cost_usd: None,
                oracle: vec![],
                timings: Timings::default(),
                started_at: chrono::DateTime::UNIX_EPOCH,
            },
        )
        .expect("write result");
    }
    let empty = tempfile::tempdir().expect("empty");
    let (full, none) = (
        out.path().display().to_string(),
        empty.path().display().to_string(),
    );
    let dash = Dashboard::start_with(
        &harness,
        &[&harness.workspace()],
        &["--scorecard", &full, "--scorecard", &none],
    );
    let cards = dash.get_json("/api/scorecards");
    let stats = &cards["scorecards"][0]["stats"];
    assert_eq!(stats["total"]["runs"], 2, "{cards}");
    assert_eq!(stats["total"]["passes"], 1);
    assert_eq!(stats["total"]["honest_stops"], 1);
    assert_eq!(stats["false_complete"], 0);
    assert!(cards["scorecards"][1]["error"].is_string(), "{cards}");
    let shipped: Value = serde_json::from_str(
        &fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/provider-matrix.json"),
        )
        .expect("matrix"),
    )
    .expect("matrix json");
    assert_eq!(cards["matrix"]["entries"], shipped["entries"]);
}

#[test]
fn open_questions_are_answered_through_the_server() {
    let asking = json!([{"report": {
        "summary": "A greeting file.",
        "goals": ["a greeting file exists"],
        "constraints": [],
        "acceptance_criteria": [{"id": "AC1", "text": "hello.txt contains exactly hello",
                                "covers": ["Create hello.txt containing hello"]}],
        "open_questions": [{"id": "Q1", "question": "Which file name?",
                            "proposed_default": "hello.txt"}]
    }}]);
    let harness = Harness::new(script_with(&[("requirements", json!([asking]))]));
    harness.run(&[]).assert_paused("WAITING_FOR_USER");
    let (_, id) = only_run(&harness);
    let dash = Dashboard::start(&harness, &[&harness.workspace()]);
    let view = dash.get_json(&format!("/api/ws/0/runs/{id}"));
    assert_eq!(view["state"]["questions"][0]["id"], "Q1", "{view}");
    // A question nobody asked is refused before anything runs.
    let typo = dash.decide(
        0,
        &id,
        &json!({"request_id": "req-answer-typo", "revision": view["revision"],
                "action": "answer", "answers": [["Q9", "x"]]}),
    );
    assert_eq!(typo.status, 409, "{typo:?}");
    assert_eq!(harness.roles_called(), ["requirements"]);
    let answered = dash.decide(
        0,
        &id,
        &json!({"request_id": "req-answer-0001", "revision": view["revision"],
                "action": "answer", "answers": [["Q1", "greeting-from-the-page.txt"]]}),
    );
    assert_eq!(answered.status, 202, "{answered:?}");
    let record = dash.wait_decision("req-answer-0001");
    assert_eq!(
        record["exit_code"], 3,
        "paused at the plan approval: {record}"
    );
    let after = dash.get_json(&format!("/api/ws/0/runs/{id}"));
    assert_eq!(after["pause"]["code"], "AWAITING_PLAN_APPROVAL", "{after}");
    assert_eq!(
        after["state"]["answers"]["Q1"]["text"], "greeting-from-the-page.txt",
        "{after}"
    );
}

#[test]
fn a_bind_address_other_than_loopback_is_refused() {
    let harness = Harness::new(script_with(&[]));
    for address in ["0.0.0.0", "::"] {
        let out = harness
            .command(&["dashboard", "--bind", address])
            .output()
            .expect("run autocode dashboard");
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("loopback"), "{stderr}");
        assert!(out.stdout.is_empty(), "no login URL printed: {out:?}");
    }
}
