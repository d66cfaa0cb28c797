//! autocode run by a subreaper parent (another autocode: `scenario run --jobs`, `mcp`, the
//! dashboard) leaves nothing for that parent to reap: its keeper is gone and reaped before it
//! exits. The parent here is a small Python process marked `PR_SET_CHILD_SUBREAPER`; after the
//! autocode child's exit is collected, `os.wait()` tells deterministically whether anything
//! was left: a leftover descendant was reparented to the parent when the child exited, so the
//! wait either returns it (leaked) or fails at once with `ECHILD` (clean). No sleeps.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_autocode");

const PARENT: &str = r#"
import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_CHILD_SUBREAPER = 36
assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
left = []
while True:
    try:
        pid, _ = os.wait()
    except ChildProcessError:
        break
    left.append(pid)
print(done.returncode, len(left))
"#;

fn leftovers(args: &[&str]) -> (i32, usize) {
    let out = Command::new("python3")
        .arg("-c")
        .arg(PARENT)
        .arg(BIN)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace().map(|f| f.parse::<i64>().unwrap());
    let code = fields.next().expect("the child's code") as i32;
    let left = fields.next().expect("the count of leftovers") as usize;
    (code, left)
}

#[test]
fn an_autocode_child_leaves_no_process_to_its_subreaper_parent() {
    // A command that starts processes (the keeper, then a supervised family) and one that
    // starts the keeper but no launch.
    assert_eq!(leftovers(&["supervise", "--", "true"]), (0, 0));
    let (_, left) = leftovers(&["doctor", "--json"]);
    assert_eq!(left, 0);
}
