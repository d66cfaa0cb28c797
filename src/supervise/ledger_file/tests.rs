//! The ledger file written and read back: the compact lines, the earlier format, and lost or
//! altered lines (never read as evidence).

use super::*;

fn entry(seq: u64, pid: i32, filename: &str, argv: &[&str]) -> LedgerEntry {
    LedgerEntry {
        seq,
        pid,
        filename: filename.into(),
        argv: argv.iter().map(|arg| (*arg).to_owned()).collect(),
        argv_truncated: false,
        argv_cut: Vec::new(),
        cwd: "/work".into(),
        at_ms: seq * 10,
        exec_plausible: true,
        exit: None,
        attestation: Attestation::Unconfirmed,
        exe: None,
    }
}

/// A shell payload as Codex sends it: a long prelude, then the command.
fn payload(command: &str) -> String {
    let prelude: String = (0..250).map(|at| format!("unset V_{at}\n")).collect();
    format!("{prelude}exec /bin/bash -c '{command}'")
}

/// What a stage writes: an `execvp` probing `PATH` (two failed lookups, then the real
/// program), two long shell payloads sharing their prelude, attestations and exits.
fn written(path: &std::path::Path) -> Vec<LedgerEntry> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let mut writer = LedgerWriter::new(file);
    let mut entries: Vec<LedgerEntry> = Vec::new();
    for (seq, dir) in ["/usr/local/sbin", "/usr/local/bin", "/usr/bin"]
        .iter()
        .enumerate()
    {
        let mut probe = entry(seq as u64, 7, &format!("{dir}/git"), &["git", "status"]);
        probe.exec_plausible = *dir == "/usr/bin";
        let previous = writer
            .last_of(7)
            .and_then(|last| {
                entries
                    .iter()
                    .find(|earlier: &&LedgerEntry| earlier.seq == last)
            })
            .cloned();
        writer.entry(&probe, previous.as_ref());
        entries.push(probe);
    }
    let first = payload("cargo test");
    let second = payload("echo done > out.txt");
    let shell_a = entry(3, 8, "/bin/bash", &["/bin/bash", "-c", &first]);
    let shell_b = entry(4, 9, "/bin/bash", &["/bin/bash", "-c", &second]);
    let again = entry(5, 10, "/bin/bash", &["/bin/bash", "-c", &first]);
    for shell in [&shell_a, &shell_b, &again] {
        writer.entry(shell, None);
    }
    writer.attestation(0, Attestation::ExecFailed, None);
    writer.attestation(1, Attestation::ExecFailed, None);
    writer.attestation(2, Attestation::Attested, Some("/usr/bin/git"));
    writer.attestation(3, Attestation::Attested, Some("/usr/bin/bash"));
    writer.exit(&[0, 1, 2], LedgerExit::Code(0));
    writer.exit(&[3], LedgerExit::Signal(9));
    // Held until the writer ends.
    writer.attestation(4, Attestation::ExecFailed, None);
    drop(writer);
    let mut expected = entries;
    expected.extend([shell_a, shell_b, again]);
    for (seq, attestation, exe) in [
        (0, Attestation::ExecFailed, None),
        (1, Attestation::ExecFailed, None),
        (2, Attestation::Attested, Some("/usr/bin/git")),
        (3, Attestation::Attested, Some("/usr/bin/bash")),
        (4, Attestation::ExecFailed, None),
    ] {
        expected[seq].attestation = attestation;
        expected[seq].exe = exe.map(str::to_owned);
    }
    for probe in expected.iter_mut().take(3) {
        probe.exit = Some(LedgerExit::Code(0));
    }
    expected[3].exit = Some(LedgerExit::Signal(9));
    expected
}

#[test]
fn compact_lines_read_back_as_the_entries_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.jsonl");
    let expected = written(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(read(&text), expected);
    // The probes name their first entry; each long payload is stored once, the second as
    // the tail after the prelude it shares with the first.
    assert_eq!(text.matches("\"same_as\":").count(), 2, "{text}");
    assert_eq!(text.matches("\"text\":").count(), 2, "{text}");
    assert_eq!(text.matches("\"keep\":").count(), 1, "{text}");
    // Failed execs ride on the next line written; the last on a line of their own.
    assert!(text.contains("\"failed\":[0,1]"), "{text}");
    assert!(text.ends_with("{\"failed\":[4]}\n"), "{text}");
    let whole: usize = expected
        .iter()
        .map(|entry| serde_json::to_string(entry).unwrap().len())
        .sum();
    assert!(
        text.len() * 2 < whole,
        "{} bytes against {whole} for whole entries",
        text.len()
    );
}

#[test]
fn a_ledger_of_whole_entry_lines_reads_as_before() {
    let mut first = entry(0, 7, "/bin/sh", &["sh", "-c", "make"]);
    let second = entry(1, 8, "/usr/bin/env", &["env"]);
    let mut lines = vec![
        serde_json::to_string(&first).unwrap(),
        serde_json::to_string(&second).unwrap(),
    ];
    first.attestation = Attestation::Attested;
    first.exe = Some("/usr/bin/dash".into());
    lines.push(serde_json::to_string(&first).unwrap());
    first.exit = Some(LedgerExit::Code(2));
    lines.push(serde_json::to_string(&first).unwrap());
    lines.push("{\"seq\":1,\"pid\":8,\"filena".into());
    assert_eq!(read(&lines.join("\n")), vec![first, second]);
}

#[test]
fn an_entry_whose_text_or_first_line_is_lost_or_altered_is_never_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.jsonl");
    let expected = written(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    let without = |needle: &str| -> Vec<LedgerEntry> {
        let kept: Vec<&str> = text.lines().filter(|line| !line.contains(needle)).collect();
        read(&kept.join("\n"))
    };
    // The first text (the whole prelude) lost: both payloads that name it are unreadable.
    let lost = without("\"value\":\"unset");
    for seq in [3, 4, 5] {
        assert_eq!(lost[seq].attestation, Attestation::Unreadable, "{seq}");
        assert!(lost[seq].argv.is_empty());
        assert_eq!(lost[seq].exe, None);
    }
    assert_eq!(lost[2], expected[2]);
    // The entry the probes name lost: they are unreadable too.
    let probes = without("\"filename\":\"/usr/local/sbin/git\"");
    assert_eq!(probes.len(), expected.len() - 1);
    assert!(
        probes
            .iter()
            .take(2)
            .all(|entry| entry.argv.is_empty() && entry.attestation == Attestation::Unreadable)
    );
    // A text altered after it was written no longer matches its digest.
    let altered = text.replacen("unset V_1\\n", "unset V_2\\n", 1);
    let read_back = read(&altered);
    assert_eq!(read_back[3].attestation, Attestation::Unreadable);
    assert_eq!(read_back[2], expected[2]);
}

#[test]
fn absent_execs_are_held_and_one_execvp_s_probes_fold_into_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.jsonl");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    let mut writer = LedgerWriter::new(file);
    let absent = |seq: u64, pid: i32, filename: &str, argv: &[&str]| {
        let mut probe = entry(seq, pid, filename, argv);
        probe.exec_plausible = false;
        probe.attestation = Attestation::ExecFailed;
        probe
    };
    let git = ["git", "status"];
    let mut expected = vec![
        absent(0, 7, "/usr/local/sbin/git", &git),
        absent(1, 7, "/usr/local/bin/git", &git),
        absent(2, 7, "/sbin/git", &git),
        // Another process's probe between two of the same run breaks it.
        absent(3, 8, "/usr/local/sbin/make", &["make"]),
        absent(4, 7, "/bin/git", &git),
        entry(5, 7, "/usr/bin/git", &git),
        // A run of one name only: another name starts a new line.
        absent(6, 9, "/opt/nope", &["nope"]),
        absent(7, 9, "/opt/other", &["nope"]),
        // Another process's run of the same argv along the same directories.
        absent(8, 11, "/usr/local/sbin/git", &git),
        absent(9, 11, "/usr/local/bin/git", &git),
        absent(10, 11, "/sbin/git", &git),
    ];
    // The second run's probes in the first's millisecond (the first run's are not).
    for seq in [9, 10] {
        expected[seq].at_ms = expected[8].at_ms;
    }
    for probe in expected.iter().take(5) {
        writer.absent(probe, writer.last_of(probe.pid).map(|_| &expected[0]));
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "",
        "nothing that never ran is written before the next line"
    );
    writer.entry(&expected[5], Some(&expected[0]));
    writer.absent(&expected[6], None);
    writer.absent(&expected[7], Some(&expected[6]));
    for probe in &expected[8..] {
        writer.absent(probe, None);
    }
    writer.exit(&[0, 1, 2, 4, 5], LedgerExit::Code(0));
    drop(writer);
    for seq in [0, 1, 2, 4, 5] {
        expected[seq].exit = Some(LedgerExit::Code(0));
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(read(&text), expected, "{text}");
    assert!(
        text.contains("\"absent\":[\"/usr/local/bin\",\"/sbin\"],\"absent_ms\":[10,20]"),
        "{text}"
    );
    // Another argv in the same cwd names the cwd of the first entry written in full.
    assert!(text.contains("\"cwd_as\":0"), "{text}");
    assert_eq!(text.matches("\"/work\"").count(), 1, "{text}");
    // The second run names the first's argv and directories.
    assert!(
        text.contains("\"seq\":8,\"pid\":11,") && text.contains("\"absent_as\":0,\"argv_as\":0"),
        "{text}"
    );
    // Runs (0–2), (3), (4), the real exec, (6), (7), (8–10), the exit.
    assert_eq!(text.lines().count(), 8, "{text}");
    // The run's line lost: its probes and every line naming it are unreadable.
    let kept: Vec<&str> = text.lines().skip(1).collect();
    let lost = read(&kept.join("\n"));
    assert_eq!(lost.len(), expected.len() - 5, "{lost:#?}");
    assert!(
        lost.iter()
            .filter(|entry| entry.pid != 8 && entry.pid != 9)
            .all(|entry| entry.argv.is_empty() && entry.attestation == Attestation::Unreadable),
        "{lost:#?}"
    );
}

#[test]
fn a_text_over_the_cap_keeps_its_ends_and_its_digests() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.jsonl");
    let file = std::fs::File::create(&path).unwrap();
    let mut writer = LedgerWriter::new(file);
    let prelude: String = (0..100_000).map(|at| format!("unset V_{at}\n")).collect();
    assert!(prelude.len() > TEXT_CAP);
    let long = format!("{prelude}exec '/bin/bash' -c 'cargo test'");
    let shell = entry(0, 8, "/bin/bash", &["/bin/bash", "-c", &long]);
    writer.entry(&shell, None);
    drop(writer);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.len() < TEXT_CAP + 1024, "{} bytes", text.len());
    let read_back = read(&text);
    let payload = &read_back[0].argv[2];
    assert!(
        !read_back[0].argv_truncated,
        "cut by the file, not the keeper"
    );
    assert_eq!(
        read_back[0].argv_cut,
        [CutArg {
            index: 2,
            sha256: sha256_hex(&long),
            words_sha256: words_sha256(&long),
        }]
    );
    assert_eq!(
        words_sha256(" a \n b\tc "),
        sha256_hex("a b c"),
        "the words' digest is of the collapsed text"
    );
    assert!(payload.starts_with("unset V_0\n"), "{payload}");
    assert!(
        payload.ends_with("exec '/bin/bash' -c 'cargo test'"),
        "{payload}"
    );
    assert!(
        payload.contains(&sha256_hex(&long)),
        "the digest names the whole"
    );
    assert!(payload.len() < TEXT_CAP);
}

#[test]
fn an_inline_script_under_the_cap_reads_back_whole() {
    // A tester's `python3 -c '…'` under the cap is kept whole; over it, by digest (above).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.jsonl");
    let file = std::fs::File::create(&path).unwrap();
    let mut writer = LedgerWriter::new(file);
    let script: String = (0..150)
        .map(|at| format!("assert {at} + 1 == {}\n", at + 1))
        .collect();
    assert!(
        script.len() > LONG_TEXT && script.len() <= TEXT_CAP,
        "{}",
        script.len()
    );
    let python = entry(0, 8, "/usr/bin/python3", &["python3", "-c", &script]);
    writer.entry(&python, None);
    drop(writer);
    let read_back = read(&std::fs::read_to_string(&path).unwrap());
    assert!(!read_back[0].argv_truncated);
    assert_eq!(read_back[0].argv[2], script);
}

#[test]
fn a_run_of_probes_names_the_start_of_an_earlier_run_and_adds_what_differs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.jsonl");
    let mut writer = LedgerWriter::new(std::fs::File::create(&path).unwrap());
    let absent = |seq: u64, pid: i32, dir: &str| {
        let mut probe = entry(seq, pid, &format!("{dir}/git"), &["git"]);
        probe.exec_plausible = false;
        probe.attestation = Attestation::ExecFailed;
        probe
    };
    let path_dirs = ["/a", "/b", "/c", "/d"];
    // pid 7 searches three directories, pid 8 two (found in the third), pid 9 all four.
    let mut expected = Vec::new();
    for (pid, count) in [(7, 3), (8, 2), (9, 4)] {
        for dir in &path_dirs[..count] {
            expected.push(absent(expected.len() as u64, pid, dir));
        }
    }
    for (at, probe) in expected.iter().enumerate() {
        let previous = (at > 0 && expected[at - 1].pid == probe.pid).then(|| &expected[at - 1]);
        writer.absent(probe, previous);
    }
    drop(writer);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(read(&text), expected, "{text}");
    assert_eq!(
        text.matches("\"/b\"").count(),
        1,
        "one list in full: {text}"
    );
    assert!(text.contains("\"absent_as\":0,\"absent_keep\":1"), "{text}");
    assert!(text.contains("\"absent\":[\"/d\"]"), "{text}");
    // A lost earlier run: the later one reads no probe rather than misplaced ones.
    let lost: Vec<&str> = text.lines().skip(1).collect();
    let read_lost = read(&lost.join("\n"));
    assert!(
        read_lost
            .iter()
            .all(|entry| entry.seq == 3 || entry.seq == 5),
        "{read_lost:#?}"
    );
}
