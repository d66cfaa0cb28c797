//! Tests of `supervise`.

use super::*;

#[test]
fn the_probe_serializes_for_doctor() {
    let value = serde_json::to_value(probe()).expect("serializable probe");
    assert!(value.is_object(), "{value}");
}

fn sample_receipt() -> Receipt {
    Receipt {
        mode: "sampled_process_group".into(),
        label: "x".into(),
        kernel: "k".into(),
        session_boundary: None,
        root_pid: 1,
        root_sid: None,
        root_pgid: 1,
        sessions: vec![2],
        groups: vec![],
        denied: vec![],
        killed: vec![2],
        keeper_lost: false,
        owner_lost: false,
        verified: false,
        ended_by: EndedBy::IdleTimeout,
        run_ms: 1.5,
        cleanup_ms: 0.5,
        room: None,
    }
}

#[test]
fn receipts_round_trip_and_omit_a_missing_session_boundary() {
    let receipt = sample_receipt();
    let text = serde_json::to_string(&receipt).unwrap();
    assert!(!text.contains("session_boundary"), "{text}");
    assert!(text.contains(r#""ended_by":"idle_timeout""#), "{text}");
    assert_eq!(serde_json::from_str::<Receipt>(&text).unwrap(), receipt);
}

#[test]
fn a_receipt_is_written_into_what_is_not_a_regular_file_and_never_replaces_it() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    // A FIFO stands for /dev/null, /dev/stdout or a terminal: written into, kept.
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    write_receipt(&fifo, &sample_receipt()).unwrap();
    let read: Receipt = serde_json::from_slice(&reader.join().unwrap()).unwrap();
    assert_eq!(read, sample_receipt());
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    // A symlink to a regular file: the file is replaced, the link stays a link.
    let file = dir.path().join("receipt.json");
    std::fs::write(&file, "old").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    write_receipt(&link, &sample_receipt()).unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let read: Receipt = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(read, sample_receipt());
}
