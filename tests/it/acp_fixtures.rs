//! The ACP stream parser against real captures (`tests/fixtures/acp/<tool>/<stage>/`, taken
//! unedited from `acp_e2e` runs with `ACP_FIXTURE_OUT`): `stdout.jsonl` is what the agent wrote,
//! `client.jsonl` what autocode sent. Zero malformed or unknown lines, a completed turn whose
//! final text is the JSON report, and the evidence split the two agents show: OpenCode reports
//! its own commands with their exit codes; Claude Code's ACP adapter runs every command in
//! autocode's terminal, so its stream holds no command event of its own.

use std::path::{Path, PathBuf};

use autocode::events::{
    CommandStatus, FinalReport, NormalizedEvent, StopClass, TransportKind, normalize_stream,
};

fn case(tool: &str, stage: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/acp")
        .join(tool)
        .join(stage)
}

fn normalized(tool: &str, stage: &str) -> autocode::events::Normalized {
    let bytes = std::fs::read(case(tool, stage).join("stdout.jsonl")).unwrap();
    normalize_stream(TransportKind::Acp, &bytes[..], None).unwrap()
}

const CASES: [(&str, &str); 4] = [
    ("opencode-acp", "004-builder-1"),
    ("opencode-acp", "005-tester-1"),
    ("claude-acp", "004-builder-1"),
    ("claude-acp", "005-tester-1"),
];

#[test]
fn every_capture_parses_to_a_completed_turn_with_a_json_report() {
    for (tool, stage) in CASES {
        let n = normalized(tool, stage);
        let s = &n.summary;
        assert_eq!(
            s.malformed_lines, 0,
            "{tool}/{stage}: {:?}",
            s.first_malformed
        );
        assert_eq!(s.unknown_lines, 0, "{tool}/{stage}");
        assert_eq!(s.stop.class, StopClass::Completed, "{tool}/{stage}");
        assert!(s.session_id.is_some(), "{tool}/{stage}");
        let Some(FinalReport::Text(text)) = &s.final_report else {
            panic!("{tool}/{stage}: no final report");
        };
        let report: serde_json::Value = serde_json::from_str(text).unwrap();
        assert!(report.is_object(), "{tool}/{stage}: {text}");
        // Every message autocode sent is one JSON-RPC 2.0 object.
        let client = std::fs::read_to_string(case(tool, stage).join("client.jsonl")).unwrap();
        for line in client.lines() {
            let message: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(message["jsonrpc"], "2.0", "{tool}/{stage}: {line}");
        }
    }
}

#[test]
fn opencode_reports_its_own_commands_with_exit_codes() {
    let n = normalized("opencode-acp", "004-builder-1");
    let finished: Vec<(&str, Option<i32>, CommandStatus)> = n
        .events
        .iter()
        .filter_map(|e| match e {
            NormalizedEvent::CommandFinished {
                command,
                exit_code,
                status,
                ..
            } => Some((command.as_str(), *exit_code, *status)),
            _ => None,
        })
        .collect();
    assert_eq!(
        finished,
        [
            (
                "printf \"hello, world\\n\" > hello.txt",
                Some(0),
                CommandStatus::Succeeded
            ),
            (
                "grep -qx \"hello, world\" hello.txt",
                Some(0),
                CommandStatus::Succeeded
            ),
        ]
    );
    assert!(n.summary.usage.input_tokens.is_some());
}

#[test]
fn claude_code_acp_runs_its_commands_in_autocodes_terminal() {
    for stage in ["004-builder-1", "005-tester-1"] {
        let n = normalized("claude-acp", stage);
        assert!(
            !n.events
                .iter()
                .any(|e| matches!(e, NormalizedEvent::CommandFinished { .. })),
            "{stage}: the agent's own stream claims no command"
        );
        assert!(
            n.events
                .iter()
                .any(|e| matches!(e, NormalizedEvent::ToolUse { tool, .. } if tool == "execute"))
        );
        let stdout =
            std::fs::read_to_string(case("claude-acp", stage).join("stdout.jsonl")).unwrap();
        assert!(stdout.contains("\"method\":\"terminal/create\""), "{stage}");
    }
}
