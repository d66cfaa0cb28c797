//! Throughput and peak memory of the event normalizer, per CLI format.
//!
//! For each format it writes a file of about 200 MB (`EVENTS_BENCH_MB` to change it) by
//! repeating the real fixture lines, parses it in a fresh child process of this binary (so
//! `VmHWM` is that format's own peak RSS), and times `jq -c . >/dev/null` on the same file.
//! Run: `cargo bench --bench parse_streams`.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use autocode::events::{ParseOptions, TransportKind, parse_stream};

const CHILD_FLAG: &str = "--events-bench-child";

/// Fixture streams repeated to build each file: a success and a failure case per CLI.
fn sample(transport: TransportKind) -> String {
    let parts: &[&str] = match transport {
        TransportKind::Opencode => &[
            include_str!("../tests/fixtures/real-clis/opencode/thinking/stdout.jsonl"),
            include_str!("../tests/fixtures/real-clis/opencode/failcmd/stdout.jsonl"),
            include_str!("../tests/fixtures/real-clis/opencode/err429/stdout.jsonl"),
        ],
        TransportKind::Codex => &[
            include_str!("../tests/fixtures/real-clis/codex/happy/stdout.jsonl"),
            include_str!("../tests/fixtures/real-clis/codex/failcmd/stdout.jsonl"),
            include_str!("../tests/fixtures/real-clis/codex/err429/stdout.jsonl"),
        ],
        TransportKind::Claude => &[
            include_str!("../tests/fixtures/real-clis/claude/happy/stdout.jsonl"),
            include_str!("../tests/fixtures/real-clis/claude/failcmd/stdout.jsonl"),
            include_str!("../tests/fixtures/real-clis/claude/err429once/stdout.jsonl"),
        ],
        TransportKind::Acp => &[
            include_str!("../tests/fixtures/acp/opencode-acp/004-builder-1/stdout.jsonl"),
            include_str!("../tests/fixtures/acp/claude-acp/004-builder-1/stdout.jsonl"),
        ],
    };
    let mut text = String::new();
    for part in parts {
        text.push_str(part);
        if !part.ends_with('\n') {
            text.push('\n');
        }
    }
    text
}

fn write_file(path: &Path, transport: TransportKind, target_bytes: u64) -> std::io::Result<u64> {
    let chunk = sample(transport);
    let mut writer = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut written = 0u64;
    while written < target_bytes {
        writer.write_all(chunk.as_bytes())?;
        written += chunk.len() as u64;
    }
    writer.flush()?;
    Ok(written)
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// CPU time of this (single-threaded) process in seconds, from `/proc/self/schedstat`: the
/// machine is shared, so wall time alone would measure the neighbours too.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    let nanos: u64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(nanos as f64 / 1e9)
}

/// Child: parse one file and print `wall_seconds cpu_seconds events peak_kib`.
fn child(transport: &str, path: &str) -> Result<(), Box<dyn std::error::Error>> {
    let transport = TransportKind::parse(transport).ok_or("unknown transport")?;
    let reader = BufReader::with_capacity(256 * 1024, File::open(path)?);
    let start = Instant::now();
    let cpu_start = cpu_seconds().unwrap_or(0.0);
    let mut events = 0u64;
    let summary = parse_stream(transport, reader, &ParseOptions::default(), |_| events += 1)?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds().unwrap_or(0.0) - cpu_start;
    if summary.malformed_lines != 0 {
        return Err(format!("{} malformed lines", summary.malformed_lines).into());
    }
    println!("{seconds} {cpu} {events} {}", peak_rss_kib().unwrap_or(0));
    Ok(())
}

/// Wall and CPU seconds of `jq -c . <file >/dev/null`; the CPU time is the children's time
/// that the shell's `times` builtin reports. `None` when jq is absent or fails.
fn time_jq(path: &Path) -> Option<(f64, Option<f64>)> {
    let start = Instant::now();
    let output = Command::new("sh")
        .arg("-c")
        .arg("command -v jq >/dev/null || exit 127; jq -c . <\"$1\" >/dev/null || exit 1; times")
        .arg("sh")
        .arg(path)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let wall = start.elapsed().as_secs_f64();
    // `times` prints the shell's then its children's user/system time: "0m0.306s 0m0.001s".
    let text = String::from_utf8_lossy(&output.stdout);
    let children = text.lines().nth(1).map(|line| {
        line.split_whitespace()
            .filter_map(parse_times_field)
            .sum::<f64>()
    });
    Some((wall, children))
}

fn parse_times_field(field: &str) -> Option<f64> {
    let (minutes, rest) = field.split_once('m')?;
    let seconds = rest.strip_suffix('s')?;
    Some(minutes.parse::<f64>().ok()? * 60.0 + seconds.parse::<f64>().ok()?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == CHILD_FLAG) {
        let transport = args.get(i + 1).ok_or("missing transport")?;
        let path = args.get(i + 2).ok_or("missing path")?;
        return child(transport, path);
    }
    let megabytes: u64 = std::env::var("EVENTS_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir()?;
    let exe = std::env::current_exe()?;
    println!(
        "{:<9} {:>7} {:>9} {:>11} {:>10} {:>10} {:>11} {:>10} {:>9}",
        "format",
        "MB",
        "events",
        "wall MB/s",
        "CPU MB/s",
        "peak RSS",
        "jq wall",
        "jq CPU",
        "CPU x jq"
    );
    for transport in TransportKind::ALL {
        let path = dir.path().join(format!("{transport}.jsonl"));
        let bytes = write_file(&path, transport, megabytes * 1_000_000)?;
        let mb = bytes as f64 / 1_000_000.0;
        let output = Command::new(&exe)
            .args([CHILD_FLAG, transport.as_str()])
            .arg(&path)
            .output()?;
        if !output.status.success() {
            return Err(format!(
                "child for {transport} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        let stdout = String::from_utf8(output.stdout)?;
        let fields: Vec<&str> = stdout.split_whitespace().collect();
        let [seconds, cpu, events, peak_kib] = fields.as_slice() else {
            return Err(format!("unexpected child output {stdout:?}").into());
        };
        let seconds: f64 = seconds.parse()?;
        let cpu: f64 = cpu.parse()?;
        let peak_mib = peak_kib.parse::<f64>()? / 1024.0;
        let rate = |s: f64| format!("{:.1}", mb / s);
        let jq = time_jq(&path);
        println!(
            "{:<9} {:>7.1} {:>9} {:>11} {:>10} {:>7.1}MiB {:>11} {:>10} {:>9}",
            transport.as_str(),
            mb,
            events,
            rate(seconds),
            rate(cpu),
            peak_mib,
            jq.map(|(wall, _)| rate(wall))
                .unwrap_or_else(|| "jq absent".into()),
            jq.and_then(|(_, cpu)| cpu)
                .map(rate)
                .unwrap_or_else(|| "-".into()),
            jq.and_then(|(_, jq_cpu)| jq_cpu)
                .map(|jq_cpu| format!("{:.1}x", jq_cpu / cpu))
                .unwrap_or_else(|| "-".into()),
        );
        std::fs::remove_file(&path)?;
    }
    Ok(())
}
