//! The live probe of this machine: `/proc/meminfo` (MemTotal, MemAvailable), the cores this
//! process may use, NVIDIA GPUs through `nvidia-smi` (started through `supervise`, bounded in
//! time) and GPUs through sysfs (`/sys/class/drm`: vendor, AMD's VRAM size), unified memory
//! (NVIDIA Tegra/GB10, AMD APUs), the system memory bandwidth (a short timed copy) and the free
//! disk (statvfs). It never fails: what cannot be read is left unknown and said in `notes`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{Gpu, GpuVendor, MachineProbe};

/// How long `nvidia-smi` may take.
pub const NVIDIA_SMI_TIMEOUT: Duration = Duration::from_secs(5);

/// Published memory bandwidth (GB/s) of common GPUs, by a word of their name.
const GPU_BANDWIDTH: &[(&str, f64)] = &[
    ("H100", 3350.0),
    ("A100", 1555.0),
    ("L40S", 864.0),
    ("L4", 300.0),
    ("T4", 320.0),
    ("RTX 5090", 1792.0),
    ("RTX 5080", 960.0),
    ("RTX 4090", 1008.0),
    ("RTX 4080", 717.0),
    ("RTX 4070 Ti", 504.0),
    ("RTX 4070", 504.0),
    ("RTX 4060 Ti", 288.0),
    ("RTX 4060", 272.0),
    ("RTX 3090", 936.0),
    ("RTX 3080", 760.0),
    ("RTX 3070", 448.0),
    ("RTX 3060", 360.0),
    ("RTX A6000", 768.0),
    ("RX 7900 XTX", 960.0),
    ("RX 7900 XT", 800.0),
];

/// The published bandwidth of a GPU named `name`, when it is listed (longest match wins).
pub fn gpu_bandwidth(name: &str) -> Option<f64> {
    GPU_BANDWIDTH
        .iter()
        .filter(|(word, _)| name.contains(word))
        .max_by_key(|(word, _)| word.len())
        .map(|(_, gbs)| *gbs)
}

/// Probes this machine. `home` is where models are stored (its file system's free space).
pub async fn probe_machine(home: Option<&Path>) -> MachineProbe {
    let mut notes = Vec::new();
    let (mem_total_bytes, mem_available_bytes) = match std::fs::read_to_string("/proc/meminfo") {
        Ok(text) => match parse_meminfo(&text) {
            Some(pair) => pair,
            None => {
                notes.push("/proc/meminfo holds no MemTotal/MemAvailable".to_owned());
                (0, 0)
            }
        },
        Err(e) => {
            notes.push(format!("/proc/meminfo: {e}"));
            (0, 0)
        }
    };
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    let mut gpus = Vec::new();
    let mut unified_memory = tegra();
    match nvidia_smi(&mut notes).await {
        Some(found) => gpus.extend(found),
        None => {
            for (vendor, vram) in sysfs_gpus() {
                match (vendor, vram) {
                    (GpuVendor::Nvidia, _) => notes.push(
                        "an NVIDIA GPU is present but nvidia-smi did not answer: its memory is unknown and not budgeted".to_owned(),
                    ),
                    // An APU's small carve-out: the GPU works from system memory.
                    (GpuVendor::Amd, Some(v)) if v <= 2 << 30 => unified_memory = true,
                    (GpuVendor::Intel, _) => notes.push(
                        "an Intel GPU shares system memory: it is not budgeted apart".to_owned(),
                    ),
                    (vendor, memory_bytes) => gpus.push(Gpu {
                        vendor,
                        name: format!("{vendor:?} GPU"),
                        memory_bytes,
                        bandwidth_gbs: None,
                    }),
                }
            }
        }
    }
    if gpus
        .iter()
        .any(|g| g.vendor == GpuVendor::Nvidia && g.memory_bytes.is_none())
    {
        // GB10 and Tegra report no memory of their own: it is the system's.
        unified_memory = true;
        gpus.retain(|g| g.memory_bytes.is_some());
    }
    // One thread, then one per core (up to 8): the better of the two (on a busy machine the
    // threads compete with other work, and one thread may get a core alone).
    let memory_bandwidth_gbs = [measure_copy_bandwidth(1), measure_copy_bandwidth(cores)]
        .into_iter()
        .flatten()
        .reduce(f64::max);
    notes.push(format!(
        "system memory bandwidth: the better of 1 and {} thread{} copying 32 MiB each, measured now (a busy machine measures less)",
        cores.clamp(1, 8),
        if cores == 1 { "" } else { "s" }
    ));
    let free_disk_bytes = home.and_then(|h| match free_disk(h) {
        Ok(bytes) => Some(bytes),
        Err(e) => {
            notes.push(format!("free disk at {}: {e}", h.display()));
            None
        }
    });
    MachineProbe {
        mem_total_bytes,
        mem_available_bytes,
        cores,
        memory_bandwidth_gbs,
        gpus,
        unified_memory,
        free_disk_bytes,
        notes,
    }
}

/// MemTotal and MemAvailable in bytes.
pub fn parse_meminfo(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            Some(kb * 1024)
        })
    };
    Some((field("MemTotal")?, field("MemAvailable")?))
}

/// `nvidia-smi --query-gpu=name,memory.total`: `None` when it is absent or does not answer.
async fn nvidia_smi(notes: &mut Vec<String>) -> Option<Vec<Gpu>> {
    let program = on_path("nvidia-smi")?;
    let args = [
        "--query-gpu=name,memory.total",
        "--format=csv,noheader,nounits",
    ]
    .map(std::ffi::OsString::from);
    let program = program.into_os_string();
    let run = crate::supervise::run_in_current_family(&program, &args, Path::new("/"), 64 << 10);
    match tokio::time::timeout(NVIDIA_SMI_TIMEOUT, run).await {
        Ok(Ok(out)) if out.exit == crate::supervise::Exit::Code(0) => {
            Some(parse_nvidia_smi(&String::from_utf8_lossy(&out.stdout)))
        }
        Ok(Ok(out)) => {
            notes.push(format!("nvidia-smi ended with {:?}", out.exit));
            None
        }
        Ok(Err(e)) => {
            notes.push(format!("nvidia-smi: {e}"));
            None
        }
        Err(_) => {
            notes.push(format!(
                "nvidia-smi did not answer within {} s",
                NVIDIA_SMI_TIMEOUT.as_secs()
            ));
            None
        }
    }
}

/// `NAME, MIB` lines; a memory of `[N/A]` (unified-memory GPUs) is unknown.
pub fn parse_nvidia_smi(text: &str) -> Vec<Gpu> {
    text.lines()
        .filter_map(|line| {
            let (name, memory) = line.rsplit_once(',')?;
            let name = name.trim().to_owned();
            Some(Gpu {
                vendor: GpuVendor::Nvidia,
                memory_bytes: memory.trim().parse::<u64>().ok().map(|mib| mib << 20),
                bandwidth_gbs: gpu_bandwidth(&name),
                name,
            })
        })
        .collect()
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

/// The GPUs under `/sys/class/drm`: vendor, and the VRAM size where the driver says it (AMD).
fn sysfs_gpus() -> Vec<(GpuVendor, Option<u64>)> {
    let Ok(entries) = std::fs::read_dir("/sys/class/drm") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_card = name
            .strip_prefix("card")
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if !is_card {
            continue;
        }
        let device = entry.path().join("device");
        let vendor =
            match std::fs::read_to_string(device.join("vendor")).map(|v| v.trim().to_owned()) {
                Ok(v) if v == "0x10de" => GpuVendor::Nvidia,
                Ok(v) if v == "0x1002" => GpuVendor::Amd,
                Ok(v) if v == "0x8086" => GpuVendor::Intel,
                _ => continue,
            };
        let vram = std::fs::read_to_string(device.join("mem_info_vram_total"))
            .ok()
            .and_then(|v| v.trim().parse().ok());
        out.push((vendor, vram));
    }
    out
}

fn tegra() -> bool {
    std::fs::read("/proc/device-tree/compatible")
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("nvidia,tegra"))
}

/// GB/s of `threads` threads each copying 32 MiB three times (read and write counted), as
/// generation reads weights on every core; bounded to well under a second.
fn measure_copy_bandwidth(threads: u32) -> Option<f64> {
    const SIZE: usize = 32 << 20;
    let threads = threads.clamp(1, 8) as usize;
    let mut buffers: Vec<(Vec<u8>, Vec<u8>)> = (0..threads)
        .map(|_| (vec![1u8; SIZE], vec![0u8; SIZE]))
        .collect();
    for (source, target) in &mut buffers {
        target.copy_from_slice(source); // touch the pages first
    }
    let started = Instant::now();
    let rounds: Vec<u32> = std::thread::scope(|scope| {
        let handles: Vec<_> = buffers
            .iter_mut()
            .map(|(source, target)| {
                scope.spawn(move || {
                    let mut rounds = 0u32;
                    while rounds < 3 && started.elapsed() < Duration::from_millis(300) {
                        target.copy_from_slice(source);
                        std::hint::black_box(&*target);
                        rounds += 1;
                    }
                    rounds
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let copied: u32 = rounds.iter().sum();
    (seconds > 0.0 && copied > 0).then(|| (2 * SIZE) as f64 * f64::from(copied) / seconds / 1e9)
}

fn free_disk(path: &Path) -> Result<u64, nix::Error> {
    let stat = nix::sys::statvfs::statvfs(path)?;
    Ok(stat.blocks_available() as u64 * stat.fragment_size() as u64)
}
