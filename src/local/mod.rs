//! Local models on this machine: what the machine offers ([`probe`]: memory, cores, GPUs,
//! unified memory, free disk, as a typed [`MachineProbe`] so recorded machines can be fed in)
//! and which catalogue models fit it ([`recommend`]): each model's need (weights of a
//! quantization plus the KV cache at each context step plus the runtime's buffers) against a
//! memory budget, a fit level (a share of the budget up to 0.85 is good, up to 0.98 tight,
//! beyond that not offered), a generation speed estimate from memory bandwidth, and why the
//! others do not fit; [`setup`]: `local setup` (find a server, pull, read its context, check,
//! save); [`routes`]: `run --local`'s per-role routes. Depends on `models` (the catalogue),
//! `direct` (the saved endpoints) and, for the live probe, `supervise`.

pub mod probe;
pub mod routes;
pub mod setup;

use serde::{Deserialize, Serialize};

use crate::models::{Catalogue, LocalFacts, ModelEntry, Quant, Runtime};

pub use probe::probe_machine;

/// The context steps a model is sized at (tokens), up to its own window.
pub const CONTEXT_STEPS: [u32; 6] = [8_192, 16_384, 32_768, 65_536, 131_072, 262_144];
/// The least context offered: what a stage needs (the direct runtime's readiness check).
pub const MIN_CONTEXT: u32 = crate::direct::preflight::STAGE_CONTEXT as u32;
/// The runtime's own buffers (compute, batches, the program): the 1.5B model at 32k measured
/// 3.4 GB RSS under llama.cpp against 2.1 GB of weights and KV cache.
pub const RUNTIME_OVERHEAD_BYTES: u64 = 1_000_000_000;
/// A share of the budget up to this is a good fit…
pub const GOOD_SHARE: f64 = 0.85;
/// …up to this a tight one; beyond it a model is not offered.
pub const TIGHT_SHARE: f64 = 0.98;
/// Below this estimated generation speed (tokens/s) a fitting model is not picked: an agent
/// stage writes thousands of tokens over dozens of responses.
pub const MIN_TOKENS_PER_S: f64 = 5.0;
/// What a GPU keeps for the driver and the display.
pub const GPU_RESERVE_BYTES: u64 = 512 * 1024 * 1024;

/// A GPU's maker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuVendor {
    Nvidia,
    Amd,
    Intel,
}

/// One GPU as probed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub vendor: GpuVendor,
    pub name: String,
    /// Its own memory; `None` when the probe could not read it (then it is not budgeted).
    pub memory_bytes: Option<u64>,
    /// Memory bandwidth (GB/s) from the name's published figure, when known.
    pub bandwidth_gbs: Option<f64>,
}

/// What the machine offers, as probed (or recorded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineProbe {
    pub mem_total_bytes: u64,
    pub mem_available_bytes: u64,
    pub cores: u32,
    /// System memory bandwidth (GB/s), when measured or known.
    pub memory_bandwidth_gbs: Option<f64>,
    pub gpus: Vec<Gpu>,
    /// CPU and GPU share one memory (Apple silicon, NVIDIA Tegra/GB10, AMD APUs).
    pub unified_memory: bool,
    /// Free space where models are stored, when readable.
    pub free_disk_bytes: Option<u64>,
    /// What could not be probed, and why.
    pub notes: Vec<String>,
}

/// Where a model's weights and cache live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    Gpu,
    UnifiedMemory,
    SystemMemory,
}

impl Placement {
    fn label(self) -> &'static str {
        match self {
            Placement::Gpu => "GPU memory",
            Placement::UnifiedMemory => "unified memory",
            Placement::SystemMemory => "system memory",
        }
    }
}

/// Memory a model may take in one place.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Budget {
    pub placement: Placement,
    pub bytes: u64,
    /// The bandwidth generation reads at (GB/s), when known.
    pub bandwidth_gbs: Option<f64>,
    /// How the budget was set.
    pub basis: String,
}

/// How well a model fits its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FitLevel {
    Good,
    Tight,
}

/// A model's need at one context step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextNeed {
    pub context: u32,
    pub need_bytes: u64,
    /// `need_bytes / budget`.
    pub share: f64,
}

/// A model (in one quantization and placement) that fits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fit {
    pub model: String,
    pub family: String,
    pub quant: String,
    pub placement: Placement,
    /// The largest context step that fits.
    pub context: u32,
    pub need_bytes: u64,
    pub share: f64,
    pub level: FitLevel,
    pub download_bytes: u64,
    /// Generation tokens/s: bandwidth over the bytes of weights active per token (an upper bound).
    pub tokens_per_s: Option<f64>,
    /// The download fits the free disk (`None`: unknown).
    pub disk_ok: Option<bool>,
    pub runtimes: Vec<Runtime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ollama: Option<String>,
    pub params_total_b: f64,
    /// Every context step evaluated, fitting or not.
    pub steps: Vec<ContextNeed>,
    /// Why a fitting model is not the pick (too slow, no disk), if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caveat: Option<String>,
}

/// A model that is not offered, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotOffered {
    pub model: String,
    pub reason: String,
}

/// The answer of `autocode local recommend`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    pub machine: MachineProbe,
    pub budgets: Vec<Budget>,
    /// The best fit among those fast enough and with room on disk: GPU or unified memory before
    /// system memory, good before tight, then the most parameters.
    pub pick: Option<Fit>,
    /// Every model that fits, its best quantization and placement, best first.
    pub fits: Vec<Fit>,
    pub not_offered: Vec<NotOffered>,
}

/// The memory budgets of `machine`: the GPUs' memory (summed: a runtime splits layers across
/// them) and system memory, or the one unified memory.
pub fn budgets(machine: &MachineProbe) -> Vec<Budget> {
    let reserve = (2u64 << 30).max(machine.mem_total_bytes / 10);
    let system = machine
        .mem_total_bytes
        .saturating_sub(reserve)
        .min(machine.mem_available_bytes);
    let system_basis = format!(
        "the smaller of available memory ({}) and total less {} for the system",
        gb(machine.mem_available_bytes),
        gb(reserve)
    );
    if machine.unified_memory {
        return vec![Budget {
            placement: Placement::UnifiedMemory,
            bytes: system,
            bandwidth_gbs: machine.memory_bandwidth_gbs,
            basis: system_basis,
        }];
    }
    let mut out = Vec::new();
    let known: Vec<(&Gpu, u64)> = machine
        .gpus
        .iter()
        .filter_map(|g| g.memory_bytes.map(|m| (g, m)))
        .collect();
    if !known.is_empty() {
        let bytes = known
            .iter()
            .map(|(_, m)| m.saturating_sub(GPU_RESERVE_BYTES))
            .sum();
        // Layers split across GPUs run one after another: the slowest sets the pace.
        let bandwidth = known
            .iter()
            .map(|(g, _)| g.bandwidth_gbs)
            .collect::<Option<Vec<f64>>>()
            .and_then(|b| b.into_iter().reduce(f64::min));
        out.push(Budget {
            placement: Placement::Gpu,
            bytes,
            bandwidth_gbs: bandwidth,
            basis: format!(
                "{} GPU{} ({}), {} each kept for the driver",
                known.len(),
                if known.len() == 1 { "" } else { "s" },
                known
                    .iter()
                    .map(|(g, m)| format!("{} {}", g.name, gb(*m)))
                    .collect::<Vec<_>>()
                    .join(", "),
                gb(GPU_RESERVE_BYTES)
            ),
        });
    }
    out.push(Budget {
        placement: Placement::SystemMemory,
        bytes: system,
        bandwidth_gbs: machine.memory_bandwidth_gbs,
        basis: system_basis,
    });
    out
}

/// What `local` and `quant` need at `context` tokens.
pub fn need_bytes(local: &LocalFacts, quant: &Quant, context: u32) -> u64 {
    quant.download_bytes + local.kv_bytes_per_token() * u64::from(context) + RUNTIME_OVERHEAD_BYTES
}

/// The context steps of a model: those of [`CONTEXT_STEPS`] from [`MIN_CONTEXT`] up to its
/// window.
fn steps_of(model: &ModelEntry) -> Vec<u32> {
    CONTEXT_STEPS
        .into_iter()
        .filter(|c| *c >= MIN_CONTEXT && *c <= model.context_window)
        .collect()
}

/// One quantization in one budget: the largest context step that fits, or why none does.
fn evaluate(
    model: &ModelEntry,
    local: &LocalFacts,
    quant: &Quant,
    budget: &Budget,
    free_disk: Option<u64>,
) -> Result<Fit, String> {
    let steps: Vec<ContextNeed> = steps_of(model)
        .into_iter()
        .map(|context| {
            let need = need_bytes(local, quant, context);
            ContextNeed {
                context,
                need_bytes: need,
                share: share(need, budget.bytes),
            }
        })
        .collect();
    let Some(first) = steps.first() else {
        return Err(format!(
            "its context window ({} tokens) is under the {} tokens a stage needs",
            thousands(u64::from(model.context_window)),
            thousands(u64::from(MIN_CONTEXT))
        ));
    };
    // The largest context that fits well, else the largest that fits at all.
    let best = steps
        .iter()
        .rev()
        .find(|s| s.share <= GOOD_SHARE)
        .or_else(|| steps.iter().rev().find(|s| s.share <= TIGHT_SHARE));
    let Some(best) = best else {
        return Err(format!(
            "{} needs {} at {} tokens, {:.1} % of the budget ({} of {})",
            quant.name,
            gb(first.need_bytes),
            thousands(u64::from(first.context)),
            first.share * 100.0,
            gb(budget.bytes),
            budget.placement.label()
        ));
    };
    let active = quant.download_bytes as f64 * (local.params_active_b / local.params_total_b);
    let tokens_per_s = budget
        .bandwidth_gbs
        .filter(|b| *b > 0.0)
        .map(|b| b * 1e9 / active.max(1.0));
    Ok(Fit {
        model: model.id.clone(),
        family: model.family.clone(),
        quant: quant.name.clone(),
        placement: budget.placement,
        context: best.context,
        need_bytes: best.need_bytes,
        share: best.share,
        level: if best.share <= GOOD_SHARE {
            FitLevel::Good
        } else {
            FitLevel::Tight
        },
        download_bytes: quant.download_bytes,
        tokens_per_s,
        disk_ok: free_disk.map(|free| free >= quant.download_bytes),
        runtimes: local.runtimes.clone(),
        ollama: local.ollama.clone(),
        params_total_b: local.params_total_b,
        caveat: None,
        steps,
    })
}

fn share(need: u64, budget: u64) -> f64 {
    if budget == 0 {
        f64::INFINITY
    } else {
        need as f64 / budget as f64
    }
}

/// Why a fit is not picked, if it is not.
fn caveat(fit: &Fit) -> Option<String> {
    if fit.disk_ok == Some(false) {
        return Some(format!(
            "the {} download does not fit the free disk",
            gb(fit.download_bytes)
        ));
    }
    match fit.tokens_per_s {
        Some(speed) if speed < MIN_TOKENS_PER_S => Some(format!(
            "about {speed:.1} tokens/s: under the {MIN_TOKENS_PER_S} tokens/s an agent stage needs"
        )),
        _ => None,
    }
}

/// Ordering among one model's fits: usable (fast enough, room on disk), GPU or unified memory
/// before system memory (many times the bandwidth), good before tight, then the larger (better)
/// quantization.
fn better_fit(a: &Fit, b: &Fit) -> std::cmp::Ordering {
    let key = |f: &Fit| {
        (
            caveat(f).is_none(),
            std::cmp::Reverse(f.placement),
            f.level == FitLevel::Good,
            f.download_bytes,
            f.context,
        )
    };
    key(a).cmp(&key(b))
}

/// Ordering among models: usable first, GPU or unified memory before system memory, good
/// before tight, the most parameters, the larger context.
fn better_model(a: &Fit, b: &Fit) -> std::cmp::Ordering {
    let key = |f: &Fit| {
        (
            f.caveat.is_none(),
            std::cmp::Reverse(f.placement),
            f.level == FitLevel::Good,
            (f.params_total_b * 100.0) as u64,
            f.context,
        )
    };
    key(a).cmp(&key(b))
}

/// Every catalogue model with local facts, against `machine`.
pub fn recommend(catalogue: &Catalogue, machine: &MachineProbe) -> Recommendation {
    let budgets = budgets(machine);
    let mut fits = Vec::new();
    let mut not_offered = Vec::new();
    for (model, local) in catalogue.local() {
        let mut best: Option<Fit> = None;
        // (quantization size, budget size, why): the smallest quantization in the largest
        // budget says the most, as nothing smaller exists.
        let mut reasons: Vec<(u64, std::cmp::Reverse<u64>, String)> = Vec::new();
        for budget in &budgets {
            for quant in &local.quants {
                match evaluate(model, local, quant, budget, machine.free_disk_bytes) {
                    Ok(fit) => {
                        if best.as_ref().is_none_or(|b| better_fit(&fit, b).is_gt()) {
                            best = Some(fit);
                        }
                    }
                    Err(reason) => reasons.push((
                        quant.download_bytes,
                        std::cmp::Reverse(budget.bytes),
                        reason,
                    )),
                }
            }
        }
        match best {
            Some(mut fit) => {
                fit.caveat = caveat(&fit);
                fits.push(fit);
            }
            None => not_offered.push(NotOffered {
                model: model.id.clone(),
                reason: reasons
                    .into_iter()
                    .min()
                    .map(|(_, _, why)| why)
                    .unwrap_or_else(|| "no memory budget to place it in".into()),
            }),
        }
    }
    fits.sort_by(|a, b| better_model(b, a));
    let pick = fits.first().filter(|f| f.caveat.is_none()).cloned();
    Recommendation {
        machine: machine.clone(),
        budgets,
        pick,
        fits,
        not_offered,
    }
}

/// `10.2 GB` (decimal, as download sizes are published).
pub fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// `65,536`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests;
