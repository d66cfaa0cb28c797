//! The event normalizer against every real CLI capture under `tests/fixtures/real-clis/`:
//! zero malformed lines, a JSON snapshot of each stream's events and summary, the stop class
//! of every case, and the evidence/report/usage rules the captures show.

use std::fs;
use std::path::{Path, PathBuf};

use autocode::events::{
    CommandStatus, FinalReport, Normalized, NormalizedEvent, PauseCode, StopClass, TransportKind,
    is_retryable_transport_error, normalize_stream, stop_with_log_tail,
};

/// Captures that are not event streams: `opencode export` and `session list` print one
/// pretty-printed JSON document, so every line of them is (deliberately) malformed.
const NOT_STREAMS: [(&str, &str); 2] = [("opencode", "export"), ("opencode", "session_list")];

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real-clis")
}

fn case_dirs(cli: &str) -> Vec<String> {
    let mut cases: Vec<String> = fs::read_dir(fixtures_root().join(cli))
        .expect("fixture dir exists")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("stdout.jsonl").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    cases.sort();
    cases
}

fn transport(cli: &str) -> TransportKind {
    TransportKind::parse(cli).expect("cli dir names a transport")
}

fn normalize_case(cli: &str, case: &str) -> Normalized {
    let dir = fixtures_root().join(cli).join(case);
    let stdout = fs::read(dir.join("stdout.jsonl")).expect("stdout.jsonl");
    let report = fs::read(dir.join("report.json")).ok();
    normalize_stream(transport(cli), &stdout[..], report.as_deref()).expect("reading a slice")
}

fn stderr_of(cli: &str, case: &str) -> Vec<u8> {
    fs::read(fixtures_root().join(cli).join(case).join("stderr.txt")).unwrap_or_default()
}

#[test]
fn every_fixture_stream_parses_without_malformed_lines() {
    let mut checked = 0;
    for cli in ["opencode", "codex", "claude"] {
        for case in case_dirs(cli) {
            let normalized = normalize_case(cli, &case);
            let summary = &normalized.summary;
            if NOT_STREAMS.contains(&(cli, case.as_str())) {
                assert!(summary.malformed_lines > 0, "{cli}/{case}");
                continue;
            }
            assert_eq!(
                summary.malformed_lines, 0,
                "{cli}/{case}: {:?}",
                summary.first_malformed
            );
            assert_eq!(summary.unknown_lines, 0, "{cli}/{case}");
            assert_eq!(
                summary.events,
                normalized.events.len() as u64,
                "{cli}/{case}"
            );
            assert!(summary.conflicting_session_id.is_none(), "{cli}/{case}");
            checked += 1;
        }
    }
    assert!(checked >= 65, "only {checked} streams found");
}

#[test]
fn snapshot_of_every_fixture() {
    for cli in ["opencode", "codex", "claude"] {
        for case in case_dirs(cli) {
            let normalized = normalize_case(cli, &case);
            insta::assert_json_snapshot!(format!("events__{cli}__{case}"), normalized);
        }
    }
}

/// Every fixture dir and the stop it must classify to (stdout stream plus stderr tail).
#[test]
fn stop_class_of_every_fixture() {
    use StopClass::*;
    let table: &[(&str, &str, StopClass)] = &[
        ("opencode", "continue", Completed),
        ("opencode", "debuglog", Completed),
        ("opencode", "down", TransportError),
        ("opencode", "err429", RateLimit),
        ("opencode", "err429once", Completed),
        ("opencode", "err500", ServerError),
        ("opencode", "export", CutStream),
        ("opencode", "failcmd", Completed),
        ("opencode", "happy", Completed),
        ("opencode", "happy_stdin", Completed),
        ("opencode", "netprobe", Completed),
        ("opencode", "netprobe_noflags", Completed),
        ("opencode", "netprobe_pure", Completed),
        ("opencode", "nonjson", Completed),
        ("opencode", "perm_ask", EndedWithoutAnswer),
        ("opencode", "perm_ask_auto", Completed),
        ("opencode", "perm_default", Completed),
        ("opencode", "resume", Completed),
        ("opencode", "session_list", CutStream),
        ("opencode", "thinking", Completed),
        ("codex", "badschema", Completed),
        ("codex", "codexhome_outside_tmp", Completed),
        ("codex", "down", CutStream),
        ("codex", "down_bounded", TransportError),
        ("codex", "envkey_missing", Authentication),
        ("codex", "err429", RateLimit),
        ("codex", "err429once", Completed),
        ("codex", "err500", ServerError),
        ("codex", "failcmd", Completed),
        ("codex", "happy", Completed),
        ("codex", "netprobe", Completed),
        ("codex", "netprobe_noanalytics", Completed),
        ("codex", "netprobe_noapps", Completed),
        ("codex", "netprobe_noplugins", Completed),
        ("codex", "netprobe_quiet", Completed),
        ("codex", "no_envkey", Completed),
        ("codex", "nonjson", Completed),
        ("codex", "prompt_arg", Completed),
        ("codex", "prompt_arg_plus_stdin", Completed),
        ("codex", "resume", Completed),
        ("codex", "resume_last", Completed),
        ("codex", "sandboxprobe", Completed),
        ("codex", "sandboxprobe_bypass", Completed),
        ("codex", "sandboxprobe_net", Completed),
        ("codex", "wire_chat", StartFailure),
        ("claude", "authtoken", Completed),
        ("claude", "badschema", StructuredOutputExhausted),
        ("claude", "bare", Completed),
        ("claude", "continue", Completed),
        ("claude", "down", TransportError),
        ("claude", "err429", RateLimit),
        ("claude", "err429once", Completed),
        ("claude", "err500", ServerError),
        ("claude", "err500_maxretries1", ServerError),
        ("claude", "failcmd", Completed),
        ("claude", "failcmd_acceptedits", Completed),
        ("claude", "happy", Completed),
        ("claude", "lean", Completed),
        ("claude", "netprobe", Completed),
        ("claude", "netprobe_noenv", Completed),
        ("claude", "nonjson", Completed),
        ("claude", "noschema", Completed),
        ("claude", "noschema_nonjson", Completed),
        ("claude", "partial", Completed),
        ("claude", "perm_acceptedits_only", Completed),
        ("claude", "perm_allowed_only", Completed),
        ("claude", "perm_bypass_root", StartFailure),
        ("claude", "perm_default_only", Completed),
        ("claude", "perm_dontask_allowed", Completed),
        ("claude", "perm_skip_root", StartFailure),
        ("claude", "perm_skip_root_sandbox", Completed),
        ("claude", "resume", Completed),
    ];
    // The table lists every fixture dir, no more, no less.
    let mut listed: Vec<(String, String)> = table
        .iter()
        .map(|(cli, case, _)| (cli.to_string(), case.to_string()))
        .collect();
    listed.sort();
    let mut present: Vec<(String, String)> = ["opencode", "codex", "claude"]
        .iter()
        .flat_map(|cli| case_dirs(cli).into_iter().map(|c| (cli.to_string(), c)))
        .collect();
    present.sort();
    assert_eq!(listed, present);

    for (cli, case, expected) in table {
        let normalized = normalize_case(cli, case);
        let stop = stop_with_log_tail(&normalized.summary, &stderr_of(cli, case));
        assert_eq!(stop.class, *expected, "{cli}/{case}: {stop:?}");
        assert_eq!(stop.pause_code, expected.pause_code(), "{cli}/{case}");
        // Only OpenCode's explicitly retryable 500, alone in its stream, may be replayed.
        let retryable = is_retryable_transport_error(&normalized.summary);
        assert_eq!(
            retryable,
            (*cli, *case) == ("opencode", "err500"),
            "{cli}/{case}"
        );
    }
}

#[test]
fn failure_pause_codes() {
    let cases = [
        ("opencode", "err429", Some(PauseCode::PausedRateLimit)),
        ("codex", "err429", Some(PauseCode::PausedRateLimit)),
        ("claude", "err429", Some(PauseCode::PausedRateLimit)),
        ("codex", "err500", Some(PauseCode::PausedProviderUncertain)),
        ("claude", "down", Some(PauseCode::PausedProviderUncertain)),
        ("claude", "happy", None),
    ];
    for (cli, case, code) in cases {
        let normalized = normalize_case(cli, case);
        assert_eq!(normalized.summary.stop.pause_code, code, "{cli}/{case}");
    }
    // opencode err429 honours retry-after: the hint is kept.
    let opencode = normalize_case("opencode", "err429");
    assert_eq!(
        opencode.summary.stop.reset_hint.as_deref(),
        Some("retry-after: 1")
    );
}

fn commands(normalized: &Normalized) -> Vec<(String, Option<i32>, CommandStatus)> {
    normalized
        .events
        .iter()
        .filter_map(|e| match e {
            NormalizedEvent::CommandFinished {
                evidence_id,
                exit_code,
                status,
                ..
            } => Some((evidence_id.to_string(), *exit_code, *status)),
            _ => None,
        })
        .collect()
}

#[test]
fn command_evidence_per_cli() {
    let cases: &[(&str, &str, Option<i32>, CommandStatus, &str)] = &[
        (
            "opencode",
            "happy",
            Some(0),
            CommandStatus::Succeeded,
            "event:call_",
        ),
        (
            "opencode",
            "failcmd",
            Some(3),
            CommandStatus::Failed,
            "event:call_",
        ),
        (
            "opencode",
            "perm_ask",
            None,
            CommandStatus::Denied,
            "event:call_",
        ),
        (
            "codex",
            "happy",
            Some(0),
            CommandStatus::Succeeded,
            "event:item_2",
        ),
        (
            "codex",
            "failcmd",
            Some(3),
            CommandStatus::Failed,
            "event:item_1",
        ),
        // Claude Code reports no exit code for a result it does not mark as an error: unknown,
        // never exit 0 (only the exec ledger can tell it).
        (
            "claude",
            "happy",
            None,
            CommandStatus::Ended,
            "event:toolu_",
        ),
        (
            "claude",
            "failcmd",
            Some(3),
            CommandStatus::Failed,
            "event:toolu_",
        ),
        (
            "claude",
            "failcmd_acceptedits",
            None,
            CommandStatus::Denied,
            "event:toolu_",
        ),
        (
            "claude",
            "perm_default_only",
            None,
            CommandStatus::Denied,
            "event:toolu_",
        ),
    ];
    for (cli, case, exit, status, id_prefix) in cases {
        let normalized = normalize_case(cli, case);
        let evidence: Vec<i32> = normalized
            .events
            .iter()
            .filter_map(|e| e.command_evidence().map(|(_, code)| code))
            .collect();
        assert_eq!(
            evidence,
            exit.iter().copied().collect::<Vec<_>>(),
            "{cli}/{case}"
        );
        let found = commands(&normalized);
        assert_eq!(found.len(), 1, "{cli}/{case}: {found:?}");
        let (id, found_exit, found_status) = &found[0];
        assert!(id.starts_with(id_prefix), "{cli}/{case}: {id}");
        assert_eq!((found_exit, found_status), (exit, status), "{cli}/{case}");
    }
}

#[test]
fn permission_denials_are_reported_once() {
    for (cli, case) in [
        ("opencode", "perm_ask"),
        ("claude", "perm_default_only"),
        ("claude", "failcmd_acceptedits"),
    ] {
        let normalized = normalize_case(cli, case);
        assert_eq!(normalized.summary.permission_denials, 1, "{cli}/{case}");
    }
}

#[test]
fn reports_per_cli() {
    let text = |cli: &str, case: &str| match normalize_case(cli, case).summary.final_report {
        Some(FinalReport::Text(t)) => Some(t),
        Some(FinalReport::Structured(v)) => Some(v.to_string()),
        None => None,
    };
    // opencode: the text of the last step.
    assert!(text("opencode", "happy").is_some_and(|t| t.contains("\"status\": \"done\"")));
    assert!(text("opencode", "nonjson").is_some_and(|t| t.starts_with("All done!")));
    assert_eq!(text("opencode", "perm_ask"), None);
    assert_eq!(text("opencode", "err429"), None);
    // codex: the -o file, none after turn.failed.
    let happy_file = fs::read_to_string(fixtures_root().join("codex/happy/report.json")).unwrap();
    assert_eq!(text("codex", "happy"), Some(happy_file));
    assert_eq!(text("codex", "err429"), None);
    assert_eq!(text("codex", "down"), None);
    // claude: structured_output only.
    assert!(matches!(
        normalize_case("claude", "happy").summary.final_report,
        Some(FinalReport::Structured(_))
    ));
    for case in ["nonjson", "noschema", "badschema", "err429"] {
        assert_eq!(text("claude", case), None, "claude/{case}");
    }
}

#[test]
fn final_text_flag_per_cli() {
    let finals = |cli: &str, case: &str| -> Vec<bool> {
        normalize_case(cli, case)
            .events
            .iter()
            .filter_map(|e| match e {
                NormalizedEvent::Text { is_final, .. } => Some(*is_final),
                _ => None,
            })
            .collect()
    };
    assert_eq!(finals("opencode", "happy"), [true]);
    assert_eq!(finals("codex", "happy"), [true]);
    assert_eq!(finals("claude", "noschema"), [true]);
    // Claude nonjson: the first answer was nudged, the second ended the run.
    assert_eq!(finals("claude", "nonjson"), [false, true]);
    // An API error's text is Claude Code's message, not an answer.
    assert_eq!(finals("claude", "err429"), Vec::<bool>::new());
}

#[test]
fn usage_mappings_match_the_mock_numbers() {
    // The mock: 2 requests total 2100 input (1210 cached), 81 output (25 reasoning).
    for cli in ["opencode", "codex"] {
        let usage = normalize_case(cli, "happy").summary.usage;
        assert_eq!(usage.input_tokens, Some(2100 - 1210), "{cli}");
        assert_eq!(usage.cache_read_tokens, Some(1210), "{cli}");
        assert_eq!(usage.cache_write_tokens, Some(0), "{cli}");
        assert_eq!(usage.output_tokens, Some(81), "{cli}");
        assert_eq!(usage.reasoning_tokens, Some(25), "{cli}");
    }
    // Claude: Anthropic fields (the mock's 1000+100·step is sent as uncached input_tokens;
    // cache_creation 300+step); no reasoning count, a reported cost.
    let claude = normalize_case("claude", "happy").summary.usage;
    assert_eq!(claude.input_tokens, Some(2100));
    assert_eq!(claude.cache_read_tokens, Some(1210));
    assert_eq!(claude.cache_write_tokens, Some(601));
    assert_eq!(claude.output_tokens, Some(81));
    assert_eq!(claude.reasoning_tokens, None);
    assert!(claude.cost_usd.is_some_and(|c| c > 0.0));
    // Failed runs report no usage at all (codex) or Claude's explicit zeros.
    assert!(normalize_case("codex", "err429").summary.usage.is_empty());
}

#[test]
fn codex_resume_usage_is_the_difference_from_the_previous_total() {
    let happy = normalize_case("codex", "happy").summary;
    let dir = fixtures_root().join("codex/resume");
    let stdout = fs::read(dir.join("stdout.jsonl")).unwrap();
    let options = autocode::events::ParseOptions {
        codex_previous_total: happy.codex_thread_totals,
        ..Default::default()
    };
    let resumed =
        autocode::events::parse_stream(TransportKind::Codex, &stdout[..], &options, |_| {})
            .unwrap();
    assert_eq!(resumed.usage, happy.usage);
    // resume_last is the third turn: 6300 cumulative, again 2100 for this call.
    let third_stdout = fs::read(fixtures_root().join("codex/resume_last/stdout.jsonl")).unwrap();
    let options = autocode::events::ParseOptions {
        codex_previous_total: resumed.codex_thread_totals,
        ..Default::default()
    };
    let third =
        autocode::events::parse_stream(TransportKind::Codex, &third_stdout[..], &options, |_| {})
            .unwrap();
    assert_eq!(third.usage, happy.usage);
}

#[test]
fn claude_api_key_source_and_retries() {
    let happy = normalize_case("claude", "happy").summary;
    assert_eq!(happy.api_key_source.as_deref(), Some("ANTHROPIC_API_KEY"));
    let authtoken = normalize_case("claude", "authtoken").summary;
    assert_eq!(authtoken.api_key_source.as_deref(), Some("none"));
    let err429 = normalize_case("claude", "err429");
    assert_eq!(err429.summary.retries, 10);
    assert!(err429.events.iter().any(|e| matches!(
        e,
        NormalizedEvent::Retry {
            attempt: Some(10),
            http_status: Some(429),
            ..
        }
    )));
}

#[test]
fn claude_resumed_cost_is_the_difference_from_the_session_total() {
    let happy = normalize_case("claude", "happy").summary;
    let session_after_happy = happy.claude_session_cost_usd.expect("a reported cost");
    let stdout = fs::read(fixtures_root().join("claude/resume/stdout.jsonl")).unwrap();
    let options = autocode::events::ParseOptions {
        claude_previous_session_cost_usd: Some(session_after_happy),
        ..Default::default()
    };
    let resumed =
        autocode::events::parse_stream(TransportKind::Claude, &stdout[..], &options, |_| {})
            .unwrap();
    // The resume row reports the session's total (twice the first call); usage is per call.
    let own_cost = resumed.usage.cost_usd.expect("cost");
    assert!((own_cost - session_after_happy).abs() < 1e-9, "{own_cost}");
    assert!(
        resumed
            .claude_session_cost_usd
            .is_some_and(|c| c > 2.0 * session_after_happy - 1e-9)
    );
    assert_eq!(resumed.usage.input_tokens, happy.usage.input_tokens);
}

#[test]
fn log_tail_decides_only_when_the_stream_cannot() {
    // Codex without --json prints plain text; the ERROR line that ends the log decides.
    let plain = b"[2026-11-29T19:00:00] OpenAI Codex v0.169.0\nworkdir: /tmp/ws\n";
    let normalized = normalize_stream(TransportKind::Codex, &plain[..], None).unwrap();
    assert_eq!(normalized.summary.stop.class, StopClass::CutStream);
    let stop = stop_with_log_tail(
        &normalized.summary,
        b"ERROR: exceeded retry limit, last status: 429 Too Many Requests\n",
    );
    assert_eq!(stop.class, StopClass::RateLimit);
    assert_eq!(stop.pause_code, Some(PauseCode::PausedRateLimit));
    // A completed stream is not overridden by an ERROR line in its log.
    let happy = normalize_case("codex", "happy");
    let stop = stop_with_log_tail(&happy.summary, b"ERROR: 429 Too Many Requests\n");
    assert_eq!(stop.class, StopClass::Completed);
    // The real stderr tails of the captures never decide by themselves.
    let wire_chat = normalize_case("codex", "wire_chat");
    let stop = stop_with_log_tail(&wire_chat.summary, &stderr_of("codex", "wire_chat"));
    assert_eq!(stop.class, StopClass::StartFailure);
}
