//! The probe's scripted-model script, generated per probe from its identity and nonce, with one
//! fault variant applied to the builder's conversation.
//!
//! Invariant: the clean script makes a conforming CLI pass every assessment; each scripted fault
//! changes exactly one thing about what the model answers (documented in `docs/providers.md`).

use serde_json::{Value, json};

use super::fault::Fault;

/// Marks each probe step's prompt; the script's conversations are matched on them.
pub const BUILD_MARK: &str = "[autocode-conformance build]";
pub const CHECK_MARK: &str = "[autocode-conformance check]";
pub const RESUME_MARK: &str = "[autocode-conformance resume]";

/// The builder's commands: copy the nonce, a probe that exits 0 and one that exits 7.
pub const COPY_COMMAND: &str = "cp input.txt output.txt";
pub const OK_COMMAND: &str = "test -s output.txt";
pub const FAIL_COMMAND: &str = "(exit 7)";
pub const FAIL_EXIT: i64 = 7;

/// Who a probe is: its id and the nonce it plants in `input.txt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeIdentity {
    pub probe_id: String,
    pub nonce: String,
}

impl ProbeIdentity {
    /// A fresh identity from the system's randomness.
    pub fn random() -> ProbeIdentity {
        ProbeIdentity {
            probe_id: format!("probe-{}", random_hex(6)),
            nonce: random_hex(16),
        }
    }

    /// The line a report's `summary` starts with; the assessment reads identity and nonce back.
    pub fn summary_line(&self) -> String {
        format!("conformance probe {} nonce {}", self.probe_id, self.nonce)
    }

    /// The tester's check: the nonce is exactly the content of `output.txt`.
    pub fn check_command(&self) -> String {
        format!("grep -qx {} output.txt", self.nonce)
    }
}

/// `2 * bytes` lowercase hex digits from `/dev/urandom` (time and pid when it is unreadable).
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    let read = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut buf))
        .is_ok();
    if !read {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
            ^ u128::from(std::process::id());
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (seed >> ((i % 16) * 8)) as u8;
        }
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

fn shell(command: &str) -> Value {
    json!({"kind": "shell", "command": command})
}

fn report(report: Value) -> Value {
    json!({"kind": "report", "report": report})
}

fn text(text: &str) -> Value {
    json!({"kind": "text", "text": text})
}

fn cite(command: &str, exit_code: i64) -> Value {
    json!({"command": command, "exit_code": exit_code, "evidence_ref": "event:?"})
}

/// The builder's report for `identity` citing `checks`.
pub fn build_report(identity: &ProbeIdentity, checks: Vec<Value>) -> Value {
    json!({
        "status": "done",
        "summary": identity.summary_line(),
        "files_changed": ["output.txt"],
        "checks": checks,
        "blockers": []
    })
}

/// The tester's report for `identity`.
pub fn test_report(identity: &ProbeIdentity) -> Value {
    json!({
        "milestone_id": "probe",
        "summary": identity.summary_line(),
        "criteria": [{
            "criterion_id": "nonce",
            "verdict": "PASS",
            "checks": [cite(&identity.check_command(), 0)],
            "notes": ""
        }]
    })
}

fn builder_steps(identity: &ProbeIdentity, fault: Option<Fault>) -> Vec<Value> {
    let honest_checks = || {
        vec![
            cite(COPY_COMMAND, 0),
            cite(OK_COMMAND, 0),
            cite(FAIL_COMMAND, FAIL_EXIT),
        ]
    };
    let commands = || vec![shell(COPY_COMMAND), shell(OK_COMMAND), shell(FAIL_COMMAND)];
    let with = |mut steps: Vec<Value>, last: Value| {
        steps.push(last);
        steps
    };
    let honest = || with(commands(), report(build_report(identity, honest_checks())));
    let cut_report = {
        let full = build_report(identity, honest_checks()).to_string();
        full.chars().take(full.len() / 2).collect::<String>()
    };
    match fault {
        None | Some(Fault::WrongSessionOnResume) | Some(Fault::MissingUsage) => honest(),
        Some(Fault::ForgedEvidence) => {
            let mut checks = honest_checks();
            checks.push(cite("ls -l output.txt", 0));
            with(commands(), report(build_report(identity, checks)))
        }
        Some(Fault::MalformedReport) => with(
            commands(),
            report(json!({"status": "finished", "summary": identity.summary_line()})),
        ),
        Some(Fault::WrongExitCode) => with(
            commands(),
            report(build_report(
                identity,
                vec![
                    cite(COPY_COMMAND, 0),
                    cite(OK_COMMAND, 0),
                    cite(FAIL_COMMAND, 0),
                ],
            )),
        ),
        Some(Fault::UnexpectedWrite) => {
            let mut steps = commands();
            steps.push(shell("echo stray > stray.txt"));
            with(steps, report(build_report(identity, honest_checks())))
        }
        Some(Fault::IncompleteTurn) => with(
            commands(),
            json!({"kind": "length", "text": cut_report.clone()}),
        ),
        Some(Fault::WrongNonce) => {
            let wrong = ProbeIdentity {
                probe_id: identity.probe_id.clone(),
                nonce: "0".repeat(identity.nonce.len().max(1)),
            };
            let copy = format!("echo {} > output.txt", wrong.nonce);
            vec![
                shell(&copy),
                shell(OK_COMMAND),
                shell(FAIL_COMMAND),
                report(build_report(
                    &wrong,
                    vec![
                        cite(&copy, 0),
                        cite(OK_COMMAND, 0),
                        cite(FAIL_COMMAND, FAIL_EXIT),
                    ],
                )),
            ]
        }
        Some(Fault::StaleReport) => {
            // The report of an earlier probe attempt: its identity, its nonce.
            let earlier = ProbeIdentity {
                probe_id: format!("{}-earlier", identity.probe_id),
                nonce: "f".repeat(identity.nonce.len().max(1)),
            };
            with(commands(), report(build_report(&earlier, honest_checks())))
        }
        Some(Fault::ProcessFailure) => {
            let mut steps = vec![json!({"kind": "http_error", "status": 500, "times": 1000})];
            steps.extend(honest());
            steps
        }
        Some(Fault::ShellCommandFinalMessage) => {
            with(commands(), text(&json!({"cmd": COPY_COMMAND}).to_string()))
        }
        Some(Fault::TruncatedOutput) => with(commands(), text(&cut_report)),
        Some(Fault::RateLimitThenSuccess) => {
            let mut steps =
                vec![json!({"kind": "http_error", "status": 429, "times": 1, "retry_after": 1})];
            steps.extend(honest());
            steps
        }
        Some(Fault::Unauthorized) => {
            let mut steps = vec![json!({"kind": "http_error", "status": 401, "times": 1000})];
            steps.extend(honest());
            steps
        }
    }
}

/// The whole script: the resumed turn first (it also carries the check prompt in its history),
/// then the check, then the build.
pub fn probe_script(identity: &ProbeIdentity, fault: Option<Fault>, models: &[&str]) -> Value {
    let check = identity.check_command();
    json!({
        "models": models,
        "title": "autocode conformance probe",
        "conversation": [
            {
                "name": "resume",
                "match": {"last_prompt_contains": RESUME_MARK},
                "count_turns": "since_last_prompt",
                "step": [shell(&check), report(test_report(identity))]
            },
            {
                "name": "check",
                "match": {"prompt_contains": CHECK_MARK},
                "step": [shell(&check), report(test_report(identity))]
            },
            {
                "name": "build",
                "match": {"prompt_contains": BUILD_MARK},
                "step": builder_steps(identity, fault)
            }
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{ReportKind, validate};
    use crate::scripted_model::{Script, ScriptSyntax};
    use std::path::Path;

    fn identity() -> ProbeIdentity {
        ProbeIdentity {
            probe_id: "probe-abc".into(),
            nonce: "0123456789abcdef".into(),
        }
    }

    #[test]
    fn every_variant_script_parses() {
        let id = identity();
        let variants = std::iter::once(None).chain(Fault::ALL.into_iter().map(Some));
        for fault in variants {
            let script = probe_script(&id, fault, &["m"]);
            Script::parse(&script.to_string(), ScriptSyntax::Json, Path::new("p.json"))
                .unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        }
    }

    #[test]
    fn the_clean_reports_validate_and_the_malformed_one_does_not() {
        let id = identity();
        let honest = build_report(&id, vec![cite(COPY_COMMAND, 0)]);
        validate(ReportKind::Build, &honest).unwrap();
        validate(ReportKind::Test, &test_report(&id)).unwrap();
        let steps = builder_steps(&id, Some(Fault::MalformedReport));
        let last = steps.last().unwrap()["report"].clone();
        assert!(validate(ReportKind::Build, &last).is_err());
    }

    #[test]
    fn identities_are_random_and_carry_themselves() {
        let a = ProbeIdentity::random();
        let b = ProbeIdentity::random();
        assert_ne!(a, b);
        assert_eq!(a.nonce.len(), 32);
        assert!(a.summary_line().contains(&a.nonce));
        assert!(a.summary_line().contains(&a.probe_id));
    }
}
