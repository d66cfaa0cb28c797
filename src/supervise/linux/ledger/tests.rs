//! The ledger's readers and book, on this process's own memory and on temporary files.

use super::*;

#[test]
fn sockaddrs_classify_by_family_and_first_byte() {
    let unix = |path: &[u8]| {
        let mut bytes = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        bytes.extend_from_slice(path);
        bytes
    };
    assert_eq!(
        parse_sockaddr(&unix(b"/tmp/tmux-0/default\0\0\0")),
        SocketTarget::Path(b"/tmp/tmux-0/default".to_vec())
    );
    assert_eq!(
        parse_sockaddr(&unix(b"rel/sock")),
        SocketTarget::Path(b"rel/sock".to_vec())
    );
    assert_eq!(parse_sockaddr(&unix(b"\0abstract")), SocketTarget::Abstract);
    assert_eq!(parse_sockaddr(&unix(b"")), SocketTarget::Abstract);
    let mut inet = (libc::AF_INET as u16).to_ne_bytes().to_vec();
    inet.extend_from_slice(&[0, 80, 127, 0, 0, 1]);
    assert_eq!(
        parse_sockaddr(&inet),
        SocketTarget::Other,
        "too short: EINVAL"
    );
    inet.extend_from_slice(&[0; 8]);
    assert_eq!(
        parse_sockaddr(&inet),
        SocketTarget::Inet("127.0.0.1:80".parse().unwrap())
    );
    let mut inet6 = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
    inet6.extend_from_slice(&[0x1f, 0x90, 0, 0, 0, 0]);
    inet6.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
    assert_eq!(
        parse_sockaddr(&inet6),
        SocketTarget::Inet("[::1]:8080".parse().unwrap())
    );
    assert_eq!(parse_sockaddr(&[1]), SocketTarget::Other);
}

#[test]
fn the_room_is_matched_by_whole_components() {
    let room = vec![PathBuf::from("/work/tree"), PathBuf::from("/tmp/stage")];
    assert!(inside_room(Path::new("/work/tree/.sock"), &room));
    assert!(inside_room(Path::new("/tmp/stage/a/b"), &room));
    assert!(!inside_room(Path::new("/work/tree2/sock"), &room));
    assert!(!inside_room(Path::new("/tmp/tmux-0/default"), &room));
}

#[test]
fn exec_targets_follow_the_callers_root_cwd_and_descriptor() {
    assert_eq!(
        exec_target(7, b"/usr/bin/env", None, false),
        PathBuf::from("/proc/7/root/usr/bin/env")
    );
    assert_eq!(
        exec_target(7, b"./x", None, false),
        PathBuf::from("/proc/7/cwd/./x")
    );
    assert_eq!(
        exec_target(7, b"x", Some(AT_FDCWD), false),
        PathBuf::from("/proc/7/cwd/x")
    );
    assert_eq!(
        exec_target(7, b"x", Some(5), false),
        PathBuf::from("/proc/7/fd/5/x")
    );
    assert_eq!(
        exec_target(7, b"", Some(5), true),
        PathBuf::from("/proc/7/fd/5")
    );
}

#[test]
fn wait_statuses_read_as_code_or_signal() {
    assert_eq!(exit_of_status(0), LedgerExit::Code(0));
    assert_eq!(exit_of_status(3 << 8), LedgerExit::Code(3));
    assert_eq!(exit_of_status(9), LedgerExit::Signal(9));
    assert_eq!(exit_of_status(15 | 0x80), LedgerExit::Signal(15));
}

#[test]
fn this_process_memory_reads_back_bounded() {
    let pid = std::process::id() as i32;
    let text = b"hello\0";
    let (read, cut) = read_cstring(pid, text.as_ptr() as u64, 100).unwrap();
    assert_eq!((read.as_slice(), cut), (&b"hello"[..], false));
    let (read, cut) = read_cstring(pid, text.as_ptr() as u64, 3).unwrap();
    assert_eq!((read.as_slice(), cut), (&b"hel"[..], true));
    let strings = [c"a".as_ptr() as u64, c"bc".as_ptr() as u64, 0];
    let (argv, cut) = read_argv(pid, strings.as_ptr() as u64, Width::W64).unwrap();
    assert_eq!((argv, cut), (vec!["a".to_owned(), "bc".to_owned()], false));
    let many: Vec<u64> = std::iter::repeat_n(c"x".as_ptr() as u64, ARG_LIMIT + 5)
        .chain([0])
        .collect();
    let (argv, cut) = read_argv(pid, many.as_ptr() as u64, Width::W64).unwrap();
    assert_eq!((argv.len(), cut), (ARG_LIMIT, true));
    assert_eq!(
        read_cstring(pid, 8, 10),
        None,
        "unmapped memory is unreadable"
    );
}

#[test]
fn a_book_taking_over_recovers_what_the_file_holds_and_it_was_never_told() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.jsonl");
    let origin = unix_ms();
    // The writer (the keeper) records three execs and the end of the first two.
    let mut writer = Book::new(Some(path.clone()), origin);
    writer.write_to_file();
    assert!(writer.writes_file());
    let call = |name: &str| ExecCall {
        filename: name.into(),
        argv: vec![name.into()],
        argv_truncated: false,
        cwd: "/".into(),
        plausible: true,
        ..ExecCall::default()
    };
    let told = writer.record(10, call("/bin/a"), None);
    writer.record(11, call("/bin/b"), None);
    writer.record(12, call("/bin/c"), None);
    writer.finish(&[0, 1], Some(LedgerExit::Code(0)));
    // The reader (autocode) was told only the first exec, not its end.
    let mut reader = Book::new(Some(path.clone()), origin);
    assert!(!reader.writes_file());
    reader.adopt(told, None);
    reader.recover_from_file();
    let entries = reader.entries();
    assert_eq!(
        entries.iter().map(|entry| entry.seq).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert_eq!(entries[0].exit, Some(LedgerExit::Code(0)));
    assert_eq!(entries[1].exit, Some(LedgerExit::Code(0)));
    assert_eq!(entries[2].exit, None);
    assert_eq!(reader.next_seq(), 3, "numbering continues after the file");
    reader.write_to_file();
    let next = reader.record(13, call("/bin/d"), None);
    assert_eq!(next.seq, 3);
    assert_eq!(crate::supervise::read_ledger(&path).unwrap().len(), 4);
}

#[test]
fn a_book_numbers_entries_and_supersedes_lines_in_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.jsonl");
    let mut book = Book::new(Some(path.clone()), unix_ms());
    book.write_to_file();
    let call = |name: &str| ExecCall {
        filename: name.into(),
        argv: vec![name.into()],
        argv_truncated: false,
        cwd: "/".into(),
        plausible: true,
        ..ExecCall::default()
    };
    let first = book.record(10, call("/bin/a"), None);
    let second = book.record(10, call("/bin/b"), None);
    assert_eq!((first.seq, second.seq), (0, 1));
    book.finish(&[0, 1], Some(LedgerExit::Code(3)));
    let text = std::fs::read_to_string(&path).unwrap();
    // Two entry lines and one line for both ends.
    assert_eq!(text.lines().count(), 3, "{text}");
    let entries = crate::supervise::read_ledger(&path).unwrap();
    assert_eq!(entries.len(), 2);
    assert!(
        entries
            .iter()
            .all(|entry| entry.exit == Some(LedgerExit::Code(3)))
    );
}
