//! Measures the boundary's costs and prints them (harness = false; `cargo bench --bench
//! supervise`). Numbers go to docs/performance.md.
//!
//! - launch-to-verified overhead: `true` supervised vs a plain spawn + wait (medians);
//! - notified setsid round trip (p50/p99), measured inside a supervised copy of this binary,
//!   vs the same loop unsupervised;
//! - an un-notified syscall (getppid) loop with and without the filter;
//! - the room: launch-to-verified of `true` without a room, with a room (writable: one
//!   directory), and with a room that also carves out an unreadable path (interleaved).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use autocode::supervise::{
    self, LaunchSpec, Overlay, PrivateViews, RealPath, Room, StdinSource, StdioMode,
};

const LAUNCHES: usize = 200;
const CALLS: usize = 20_000;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(index).copied().unwrap_or(f64::NAN)
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

/// Child modes: time `CALLS` raw calls and print "p50 p99 mean" in nanoseconds.
fn child(mode: &str) {
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let start = Instant::now();
        // SAFETY: raw syscalls with no arguments; the results do not matter here.
        unsafe {
            match mode {
                "setsid" => libc::syscall(libc::SYS_setsid),
                _ => libc::syscall(libc::SYS_getppid),
            };
        }
        samples.push(start.elapsed().as_nanos() as f64);
    }
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    let samples = sorted(samples);
    println!(
        "{:.0} {:.0} {:.0}",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        mean
    );
}

fn spec(program: OsString, args: &[&str]) -> LaunchSpec {
    LaunchSpec {
        label: "bench".into(),
        program,
        args: args.iter().map(OsString::from).collect(),
        env: std::env::vars_os().collect::<BTreeMap<_, _>>(),
        cwd: std::env::temp_dir(),
        stdin: StdinSource::Null,
        stdio: StdioMode::Captured { limit: 4096 },
        timeout: Some(Duration::from_secs(60)),
        room: None,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(mode) = args
        .iter()
        .position(|a| a == "--child")
        .and_then(|i| args.get(i + 1))
    {
        child(mode);
        return;
    }
    let keeper = supervise::init_before_threads();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let truth: OsString = "true".into();

    let mut plain = Vec::new();
    let mut supervised = Vec::new();
    let mut unverified = 0;
    for _ in 0..LAUNCHES {
        let start = Instant::now();
        Command::new(&truth).status().expect("plain true");
        plain.push(start.elapsed().as_secs_f64() * 1e3);
        let start = Instant::now();
        let finished = runtime
            .block_on(supervise::run(spec(truth.clone(), &[])))
            .expect("supervised true");
        supervised.push(start.elapsed().as_secs_f64() * 1e3);
        unverified += usize::from(!finished.receipt.verified);
    }
    let (plain, supervised) = (sorted(plain), sorted(supervised));
    println!("keeper process: {keeper}");
    println!(
        "launch `true` ({LAUNCHES}x, interleaved): plain median {:.2} ms, supervised (to verified) median {:.2} ms, overhead {:.2} ms; p99 {:.2} / {:.2} ms; unverified {unverified}",
        percentile(&plain, 0.5),
        percentile(&supervised, 0.5),
        percentile(&supervised, 0.5) - percentile(&plain, 0.5),
        percentile(&plain, 0.99),
        percentile(&supervised, 0.99),
    );

    let scratch = tempfile::tempdir().expect("scratch dir");
    std::fs::create_dir(scratch.path().join("state")).expect("state dir");
    std::fs::write(scratch.path().join("state/key"), "k").expect("key");
    std::fs::create_dir(scratch.path().join(".git")).expect("hole dir");
    // The layers live outside what they cover (HOME and /tmp), as a run's do.
    let home = std::fs::canonicalize(std::env::var_os("HOME").expect("HOME")).expect("HOME");
    let layers = tempfile::tempdir_in("/var/tmp").expect("layers");
    for i in 0..2 {
        for part in ["upper", "work"] {
            std::fs::create_dir_all(layers.path().join(format!("{i}/{part}"))).expect("layer");
        }
    }
    let rooms = [
        ("no room", None),
        (
            "room (writable: 1 dir)",
            Some(Room::writable([scratch.path().to_owned()])),
        ),
        (
            "room + carve-out (1 unreadable)",
            Some(Room {
                writable: vec![std::env::temp_dir()],
                unreadable: vec![scratch.path().join("state/key")],
                read_only: Vec::new(),
                overlay: None,
                views: None,
                allow_connect: Vec::new(),
            }),
        ),
        (
            "room + read-only hole (an in-place .git)",
            Some(Room {
                writable: vec![scratch.path().to_owned()],
                unreadable: Vec::new(),
                read_only: vec![scratch.path().join(".git")],
                overlay: None,
                views: None,
                allow_connect: Vec::new(),
            }),
        ),
        (
            "room + private layers of HOME and /tmp (the work dir bound back)",
            Some(Room {
                writable: vec![scratch.path().to_owned()],
                unreadable: Vec::new(),
                read_only: Vec::new(),
                overlay: None,
                allow_connect: Vec::new(),
                views: Some(PrivateViews {
                    layers: [home.clone(), PathBuf::from("/tmp")]
                        .into_iter()
                        .enumerate()
                        .map(|(i, dir)| Overlay {
                            lower: dir.clone(),
                            dir,
                            upper: layers.path().join(format!("{i}/upper")),
                            work: layers.path().join(format!("{i}/work")),
                        })
                        .collect(),
                    real: vec![RealPath {
                        path: std::fs::canonicalize(scratch.path()).expect("canonical"),
                        writable: true,
                    }],
                    hidden: Vec::new(),
                }),
            }),
        ),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); rooms.len()];
    let mut unverified = 0;
    for _ in 0..LAUNCHES {
        for ((_, room), samples) in rooms.iter().zip(times.iter_mut()) {
            let mut launch = spec(truth.clone(), &[]);
            launch.room = room.clone();
            let start = Instant::now();
            let finished = runtime
                .block_on(supervise::run(launch))
                .expect("supervised true");
            samples.push(start.elapsed().as_secs_f64() * 1e3);
            unverified += usize::from(!finished.receipt.verified);
        }
    }
    let medians: Vec<f64> = times
        .into_iter()
        .map(|samples| percentile(&sorted(samples), 0.5))
        .collect();
    for ((name, _), median) in rooms.iter().zip(&medians) {
        println!(
            "launch `true` ({LAUNCHES}x, interleaved), {name}: median {median:.2} ms (+{:.2} ms)",
            median - medians[0]
        );
    }
    println!("rooms: unverified {unverified}");

    let me: OsString = std::env::current_exe().expect("own path").into();
    let bare = |mode: &str| {
        let output = Command::new(&me)
            .args(["--child", mode])
            .output()
            .expect("bare child");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    let boxed = |mode: &str| {
        let finished = runtime
            .block_on(supervise::run(spec(me.clone(), &["--child", mode])))
            .expect("supervised child");
        assert!(finished.receipt.verified);
        String::from_utf8_lossy(&finished.stdout).trim().to_owned()
    };
    println!(
        "setsid ({CALLS} calls, ns p50 p99 mean): bare {} | notified {}",
        bare("setsid"),
        boxed("setsid")
    );
    println!(
        "getppid ({CALLS} calls, ns p50 p99 mean): bare {} | filtered {}",
        bare("getppid"),
        boxed("getppid")
    );
}
