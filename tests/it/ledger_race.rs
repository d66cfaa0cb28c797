//! The argv race against the exec ledger, with real processes: a racer flips the `sh -c`
//! payload between `exit 3` and `exit 0` while the exec waits for the keeper, from another
//! thread of the caller or from another process through shared memory. Over 1,000 trials
//! (`autocode supervise --confine --ledger`), no attested entry may name an argv or an exit
//! other than what ran: every attested `sh -c "exit N"` ended with N.
//!
//! No sleep is used as synchronization (the racers spin; their parents wait for each child).

use std::path::Path;
use std::process::{Command, Stdio};

use autocode::supervise::{self, Attestation, LedgerExit};

const BIN: &str = env!("CARGO_BIN_EXE_autocode");

/// `racer <thread|shared> <trials>`: each trial forks a child that execs
/// `sh -c "exit 3"` while its payload byte is flipped to `0` and back by a spinning thread of
/// the child (`thread`) or by a sibling process through a `MAP_SHARED` page (`shared`).
const RACER: &str = r#"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile char *payload;
static volatile int flipping;

static void *flip(void *unused) {
    (void)unused;
    for (;;) {
        payload[5] = payload[5] == '3' ? '0' : '3';
        flipping = 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int shared = strcmp(argv[1], "shared") == 0;
    int trials = atoi(argv[2]);
    payload = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (payload == MAP_FAILED) return 2;
    strcpy((char *)payload, "exit 3");
    pid_t flipper = -1;
    if (shared) {
        flipper = fork();
        if (flipper == 0) flip(0);
    }
    for (int i = 0; i < trials; i++) {
        pid_t child = fork();
        if (child == 0) {
            if (!shared) {
                pthread_t thread;
                pthread_create(&thread, 0, flip, 0);
                while (!flipping) {}
            }
            char *args[] = {"sh", "-c", (char *)payload, 0};
            execv("/bin/sh", args);
            _exit(127);
        }
        int status;
        waitpid(child, &status, 0);
    }
    if (flipper > 0) kill(flipper, 9);
    return 0;
}
"#;

fn compile(dir: &Path) -> std::path::PathBuf {
    let source = dir.join("racer.c");
    std::fs::write(&source, RACER).unwrap();
    let binary = dir.join("racer");
    let status = Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&binary)
        .arg(&source)
        .status()
        .expect("cc is needed for the race test");
    assert!(status.success());
    binary
}

/// Runs the racer under the boundary; returns (attested racer entries, all racer entries,
/// entries whose recorded argv disagrees with how they ended).
fn race(racer: &Path, dir: &Path, mode: &str, trials: u32) -> (usize, usize, usize) {
    let ledger = dir.join(format!("{mode}.jsonl"));
    let status = Command::new(BIN)
        .args(["supervise", "--confine", "--ledger"])
        .arg(&ledger)
        .arg("--")
        .arg(racer)
        .args([mode, &trials.to_string()])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{mode}: {status:?}");
    let entries = supervise::read_ledger(&ledger).unwrap();
    let mut attested = 0;
    let mut all = 0;
    let mut disagreeing = 0;
    for entry in entries.iter().filter(|entry| entry.argv.len() == 3) {
        let code = match entry.argv[2].as_str() {
            "exit 3" => 3,
            "exit 0" => 0,
            _ => continue,
        };
        all += 1;
        let agrees = entry.exit == Some(LedgerExit::Code(code));
        disagreeing += usize::from(!agrees);
        if entry.attestation == Attestation::Attested {
            attested += 1;
            assert!(
                agrees,
                "{mode}: an attested entry names what did not run: {entry:?}"
            );
        }
    }
    assert_eq!(all, trials as usize, "{mode}: one entry per trial");
    (attested, all, disagreeing)
}

#[test]
fn a_racing_argv_never_yields_an_attested_entry_that_differs_from_what_ran() {
    let dir = tempfile::tempdir().unwrap();
    let racer = compile(dir.path());
    let (attested, all, disagreeing) = race(&racer, dir.path(), "thread", 400);
    eprintln!("thread racer: {attested} attested of {all}, {disagreeing} raced the keeper");
    assert_eq!(attested, 0, "a multi-threaded caller is never attested");
    // Over hundreds of trials the racers do win some (measured: about one in six), or this
    // test would prove nothing.
    assert!(disagreeing > 0, "the thread racer never raced");
    let (attested, all, disagreeing) = race(&racer, dir.path(), "shared", 600);
    eprintln!("shared-memory racer: {attested} attested of {all}, {disagreeing} raced the keeper");
    assert!(disagreeing > 0, "the shared-memory racer never raced");
    assert!(
        attested + disagreeing <= all,
        "only entries that ran what was read are attested"
    );
}
