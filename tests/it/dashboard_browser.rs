//! `autocode dashboard` in a real headless Chromium (Debian's `chromium` and `chromium-driver`,
//! installed by `.ci/run`), driven over chromedriver's WebDriver HTTP API: a run started by the
//! test against the scripted fake agent appears on the runs page and moves on without a reload;
//! its plan is approved, its diff read and its result applied from the page; a human-review
//! criterion is accepted; a paused run is resumed; an agent's markup and control characters
//! render as inert text. Screenshots of each page go to `target/dashboard-screenshots/`.
//!
//! Without chromium or chromedriver on this machine the tests say so on stderr and return.
//! No sleep is used as synchronization: conditions are polled with a bound.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::dashboard_client::{Dashboard, hostile_builder, only_run};
use super::run_e2e::{Harness, script_with, wait_until};

/// How long a page condition may take.
const PAGE_LIMIT: Duration = Duration::from_secs(60);

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}

fn screenshot_dir() -> PathBuf {
    let target = option_env!("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("dashboard-screenshots")
}

/// A chromedriver and one headless Chromium session (both ended when dropped).
struct Browser {
    driver: Child,
    base: String,
    session: String,
    agent: ureq::Agent,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self
            .agent
            .delete(&format!("{}/session/{}", self.base, self.session))
            .call();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Browser {
    /// `None` (with the reason on stderr) when chromium or chromedriver is not installed.
    fn start() -> Option<Browser> {
        let (Some(chromium), Some(driver)) = (
            on_path("chromium").or_else(|| on_path("chromium-browser")),
            on_path("chromedriver"),
        ) else {
            eprintln!(
                "SKIPPED: chromium and chromedriver are not installed (apt-get install -y chromium chromium-driver)"
            );
            return None;
        };
        let profile = tempfile::tempdir().expect("profile dir");
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            probe.local_addr().expect("addr").port()
        };
        let driver = Command::new(driver)
            .arg(format!("--port={port}"))
            .env("HOME", profile.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .build()
            .new_agent();
        let base = format!("http://127.0.0.1:{port}");
        let mut browser = Browser {
            driver,
            base,
            session: String::new(),
            agent,
            _profile: profile,
        };
        wait_until("chromedriver to listen", PAGE_LIMIT, || {
            browser
                .agent
                .get(&format!("{}/status", browser.base))
                .call()
                .is_ok()
        });
        let user_data = browser._profile.path().join("chromium");
        let created = browser.send(
            "POST",
            "/session",
            Some(json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": chromium.display().to_string(),
                    "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                             "--no-first-run", "--disable-background-networking",
                             "--disable-component-update", "--disable-sync",
                             "--window-size=1280,1000",
                             format!("--user-data-dir={}", user_data.display())]
                }
            }}})),
        );
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        Some(browser)
    }

    /// A WebDriver command; returns its `value`.
    fn send(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = if path == "/session" {
            format!("{}{path}", self.base)
        } else {
            format!("{}/session/{}{path}", self.base, self.session)
        };
        let response = match method {
            "GET" => self.agent.get(&url).call(),
            _ => self
                .agent
                .post(&url)
                .header("Content-Type", "application/json")
                .send(body.unwrap_or_else(|| json!({})).to_string()),
        };
        let mut response = response.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let text = response
            .body_mut()
            .read_to_string()
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        value["value"].clone()
    }

    fn goto(&self, url: &str) {
        self.send("POST", "/url", Some(json!({ "url": url })));
    }

    fn script(&self, js: &str) -> Value {
        self.send(
            "POST",
            "/execute/sync",
            Some(json!({ "script": js, "args": [] })),
        )
    }

    /// The text of the first element matching `css`, if there is one.
    fn text(&self, css: &str) -> Option<String> {
        self.script(&format!(
            "const e = document.querySelector({}); return e ? e.textContent : null;",
            json!(css)
        ))
        .as_str()
        .map(str::to_owned)
    }

    /// Waits for an element matching `css` whose text satisfies `ok`; returns the text.
    fn wait_text(&self, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PAGE_LIMIT;
        loop {
            let text = self.text(css);
            if let Some(t) = text.as_deref().filter(|t| ok(t)) {
                return t.to_owned();
            }
            if Instant::now() > deadline {
                self.screenshot(&format!("timeout-{}", what.replace(' ', "-")));
                let page = self.script("return document.body.innerText;");
                panic!("timed out waiting for {what} ({css}: {text:?}); page: {page}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn click(&self, css: &str) {
        self.wait_text(css, &format!("{css} to click"), |_| true);
        let found = self.send(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        let id = found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_owned();
        self.send("POST", &format!("/element/{id}/click"), None);
    }

    /// Saves a PNG of the page as `target/dashboard-screenshots/NAME.png`.
    fn screenshot(&self, name: &str) {
        let encoded = self.send("GET", "/screenshot", None);
        let Some(png) = encoded.as_str().and_then(base64_decode) else {
            eprintln!("no screenshot for {name}");
            return;
        };
        let dir = screenshot_dir();
        fs::create_dir_all(&dir).expect("screenshot dir");
        fs::write(dir.join(format!("{name}.png")), png).expect("write screenshot");
    }

    /// Logs in with the dashboard's login URL: the cookie is set, the runs page shows.
    fn login(&self, dash: &Dashboard) {
        self.goto(&dash.login_url);
        self.wait_text("h1", "the runs page", |t| t == "Runs");
    }
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes: Vec<u8> = text.bytes().filter(|b| *b != b'=' && *b != b'\n').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= value(*c)? << (18 - 6 * i);
        }
        let full = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&full[..chunk.len().saturating_sub(1)]);
    }
    Some(out)
}

fn run_page(dash: &Dashboard, run: &str) -> String {
    format!("http://127.0.0.1:{}/#/run/0/{run}", dash.port)
}

#[test]
fn a_run_appears_live_then_its_plan_is_approved_its_diff_read_and_its_result_applied() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let harness = Harness::new(script_with(&[]));
    let dash = Dashboard::start(&harness, &[&harness.workspace()]);
    browser.login(&dash);
    browser.wait_text("main", "the empty runs page", |t| t.contains("No runs yet"));
    // A marker that a reload would lose: the page must follow the run without one.
    browser.script("window.autocodeMarker = 42;");
    // Without --yes the run stops at the plan approval, as for a person at a terminal.
    let mut run = harness
        .run_command(&[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the run");
    browser.wait_text("#runs tr[data-run] .phase", "the run to appear", |t| {
        !t.is_empty()
    });
    browser.wait_text(
        "#runs tr[data-run] .phase",
        "the plan approval pause",
        |t| t == "AWAITING_PLAN_APPROVAL",
    );
    assert_eq!(run.wait().expect("run").code(), Some(3));
    assert_eq!(browser.script("return window.autocodeMarker;"), json!(42));
    browser.screenshot("runs");

    let (dir, id) = only_run(&harness);
    browser.click(".run-link");
    browser.wait_text("#approve-plan", "the approve button", |_| true);
    let next = browser.wait_text("#next-step", "the continuing command", |t| {
        t.contains("--approve-plan")
    });
    assert!(next.contains("autocode resume"), "{next}");
    browser.screenshot("plan-approval");
    browser.click("#approve-plan");
    browser.wait_text("#decision-done", "the approval to finish", |_| true);
    assert_eq!(
        browser.script("return document.querySelector('#decision-done').dataset.status;"),
        json!("done")
    );
    browser.wait_text("#run-phase", "the run to complete", |t| t == "complete");
    browser.wait_text("#stages", "the builder stage", |t| t.contains("builder"));
    browser.screenshot("run-complete");
    let activity = fs::read_to_string(dir.join("activity.jsonl")).expect("activity");
    assert!(
        activity.contains("dashboard decision: approve_plan"),
        "{activity}"
    );

    browser.click("#show-diff");
    browser.click(".diff-link");
    browser.wait_text("#diff-file pre", "the file's diff", |t| {
        t.contains("+hello")
    });
    browser.screenshot("diff");

    browser.click("#apply");
    browser.wait_text(
        "#decision-done[data-action=apply]",
        "the apply to finish",
        |_| true,
    );
    assert_eq!(
        browser.script("return document.querySelector('#decision-done').dataset.status;"),
        json!("done"),
        "{:?}",
        browser.text("#decision-result")
    );
    browser.screenshot("applied");
    assert_eq!(
        fs::read_to_string(harness.workspace().join("hello.txt")).expect("applied hello.txt"),
        "hello\n"
    );
    // The CLI sees the same run the page showed.
    let status = harness.status();
    assert_eq!(status.json["run_id"], id.as_str());
}

#[test]
fn a_human_review_criterion_is_accepted_from_the_page() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let plan = json!([{"report": {
        "summary": "One milestone with a human check.",
        "milestones": [{"id": "M1", "title": "Greeting", "description": "",
                        "acceptance_criteria": [
                            {"id": "AC1", "text": "hello", "check": super::run_e2e::CHECK, "human_review": false, "kind": "fail_to_pass"},
                            {"id": "AC2", "text": "hello.txt reads well", "check": null,
                             "human_review": true, "kind": "fail_to_pass"}]}]
    }}]);
    let tester = json!([{"run": super::run_e2e::CHECK}, {"report": {
        "milestone_id": "M1", "summary": "AC1 holds; AC2 needs a person.",
        "criteria": [
            {"criterion_id": "AC1", "verdict": "PASS", "notes": "",
             "checks": [{"command": super::run_e2e::CHECK, "exit_code": 0, "evidence_ref": "{{last_event}}"}]},
            {"criterion_id": "AC2", "verdict": "HUMAN_REVIEW", "notes": "tone", "checks": []}
        ]
    }}]);
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan])),
        ("tester", json!([tester])),
    ]));
    harness
        .run(&["--yes"])
        .assert_paused("AWAITING_HUMAN_REVIEW");
    let (_, id) = only_run(&harness);
    let dash = Dashboard::start(&harness, &[&harness.workspace()]);
    browser.login(&dash);
    browser.goto(&run_page(&dash, &id));
    let shown = browser.wait_text(".review-text", "the text to review", |t| t.contains("AC2"));
    assert!(shown.contains("reads well"), "{shown}");
    browser.screenshot("human-review");
    browser.click(".accept-criterion[data-criterion=AC2]");
    browser.wait_text("#decision-done", "the acceptance to finish", |_| true);
    browser.wait_text("#run-phase", "the run to complete", |t| t == "complete");
    browser.wait_text("#criteria", "how AC2 was verified", |t| {
        t.contains("accepted by a person")
    });
    browser.screenshot("human-review-accepted");
    let status = harness.status();
    let decisions = status.json["verification"]["human_decisions"].clone();
    assert_eq!(decisions[0]["accepted"], true, "{status:?}");
}

#[test]
fn a_paused_run_is_resumed_from_the_page() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let requirements_ok = json!([{"report": {
        "summary": "A file hello.txt that says hello.",
        "goals": ["hello.txt exists and contains hello"],
        "constraints": [],
        "acceptance_criteria": [{"id": "AC1", "text": "hello.txt contains exactly hello",
                                "covers": ["Create hello.txt containing hello"]}],
        "open_questions": []
    }}]);
    // A rate limit: `resume` alone continues it.
    let harness = Harness::new(script_with(&[(
        "requirements",
        json!([[{"error": {"status": 429, "message": "mock 429", "retryable": true,
                           "retry_after": 1}}], requirements_ok]),
    )]));
    harness.run(&["--yes"]).assert_paused("PAUSED_RATE_LIMIT");
    let (_, id) = only_run(&harness);
    let dash = Dashboard::start(&harness, &[&harness.workspace()]);
    browser.login(&dash);
    browser.goto(&run_page(&dash, &id));
    browser.wait_text("#pause", "the pause", |t| t.contains("PAUSED_RATE_LIMIT"));
    browser.screenshot("paused");
    browser.click("#resume");
    browser.wait_text("#decision-done", "the resume to finish", |_| true);
    // The run was started with --yes (recorded in its state): it goes on to its end.
    browser.wait_text("#run-phase", "the run to complete", |t| t == "complete");
    browser.screenshot("resumed");
    assert_eq!(
        harness.roles_called()[..3],
        ["requirements", "requirements", "planner"]
    );
}

#[test]
fn an_agents_markup_and_control_characters_render_as_text() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let harness = Harness::new(script_with(&[("builder", json!([hostile_builder()]))]));
    harness.run(&["--yes"]).assert_complete();
    let (_, id) = only_run(&harness);
    let status = harness.status();
    let builder = status.json["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .find(|a| a["role"] == "builder")
        .and_then(|a| a["dir"].as_str())
        .expect("builder dir")
        .to_owned();
    let dash = Dashboard::start(&harness, &[&harness.workspace()]);
    browser.login(&dash);
    browser.goto(&format!("{}/stage/{builder}", run_page(&dash, &id)));
    let report = browser.wait_text("[data-record=report] pre", "the builder's report", |t| {
        t.contains("pwned")
    });
    assert!(
        report.contains("<script>window.pwned=1</script>"),
        "the markup shows as text: {report}"
    );
    assert!(
        report.contains("\u{27e8}U+202E\u{27e9}"),
        "bidi made visible: {report}"
    );
    assert!(report.contains("\u{27e8}U+2066\u{27e9}"), "{report}");
    assert!(!report.contains('\u{202e}') && !report.contains('\u{1b}'));
    // Nothing the agent wrote ran: no handler fired, no element was made from it.
    assert_eq!(
        browser.script(
            "return [window.pwned === undefined, document.scripts.length, document.querySelectorAll('main img, main script').length];"
        ),
        json!([true, 1, 0])
    );
    // The finished stage's events were streamed, and the stream says it ended.
    browser.wait_text("#stream-state", "the stream to end", |t| {
        t == "stage finished"
    });
    let lines = browser.script("return document.querySelector('#events').dataset.lines;");
    assert!(
        lines
            .as_str()
            .and_then(|l| l.parse::<u32>().ok())
            .unwrap_or(0)
            >= 3,
        "{lines}"
    );
    browser.screenshot("hostile-report");
    // The scorecards page: the conformance matrix this build ships.
    browser.goto(&format!("http://127.0.0.1:{}/#/scorecards", dash.port));
    browser.wait_text("#matrix", "the conformance matrix", |t| {
        t.contains("engine")
    });
    browser.screenshot("scorecards");
}
