//! `autocode local recommend [--json]` (which catalogue models fit this machine, `crate::local`)
//! and `autocode models --catalogue [--json]` (the model catalogue, `crate::models`). Neither
//! downloads anything or makes a model request.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::context::Context;
use super::output;
use crate::error::EdgeError;
use crate::local::{self, Fit, FitLevel, Placement, Recommendation, gb, thousands};
use crate::models::{Catalogue, ModelEntry};

#[derive(Debug, Subcommand)]
pub enum LocalCommand {
    /// Which catalogue models fit this machine: memory, GPUs, the need of each model at each
    /// context step against the budget, fit and speed (no download, no model request).
    Recommend(RecommendArgs),
}

#[derive(Debug, Args)]
pub struct RecommendArgs {
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

fn env_get(ctx: &Context) -> impl Fn(&str) -> Option<String> + '_ {
    |k| {
        ctx.env
            .get(std::ffi::OsStr::new(k))
            .and_then(|v| v.to_str())
            .map(str::to_owned)
    }
}

/// The catalogue with the user's file merged (a malformed file is a usage error naming it).
pub fn catalogue(ctx: &Context) -> Result<Catalogue, EdgeError> {
    let file = crate::models::user_file(env_get(ctx));
    Catalogue::load(file.as_deref()).map_err(|e| {
        EdgeError::usage(e).hint("fix the file, or move it aside to use the built-in catalogue")
    })
}

pub fn run(command: LocalCommand) -> Result<ExitCode, EdgeError> {
    let ctx = Context::from_process()?;
    match command {
        LocalCommand::Recommend(args) => recommend(&ctx, args),
    }
}

fn recommend(ctx: &Context, args: RecommendArgs) -> Result<ExitCode, EdgeError> {
    let catalogue = catalogue(ctx)?;
    let home = env_get(ctx)("HOME").map(PathBuf::from);
    let machine = super::runtime()?.block_on(local::probe_machine(home.as_deref()));
    let recommendation = local::recommend(&catalogue, &machine);
    if args.json {
        output::print_json(&recommendation)?;
    } else {
        output::print_stdout(&render(&recommendation))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn placement(p: Placement) -> &'static str {
    match p {
        Placement::Gpu => "GPU",
        Placement::UnifiedMemory => "unified memory",
        Placement::SystemMemory => "system memory",
    }
}

fn speed(fit: &Fit) -> String {
    fit.tokens_per_s
        .map(|s| format!("~{s:.0} tok/s"))
        .unwrap_or_else(|| "speed unknown".into())
}

fn fit_line(fit: &Fit) -> String {
    format!(
        "{:<22} {:<7} {:<14} {:>8} tokens  needs {:>8}  {:>5.1} % {:<5}  {:<13} download {}{}",
        fit.model,
        fit.quant,
        placement(fit.placement),
        thousands(u64::from(fit.context)),
        gb(fit.need_bytes),
        fit.share * 100.0,
        match fit.level {
            FitLevel::Good => "good",
            FitLevel::Tight => "tight",
        },
        speed(fit),
        gb(fit.download_bytes),
        fit.caveat
            .as_ref()
            .map(|c| format!("  (not picked: {c})"))
            .unwrap_or_default()
    )
}

/// The recommendation for people.
pub fn render(r: &Recommendation) -> String {
    let m = &r.machine;
    let mut out = format!(
        "machine: {} memory ({} available), {} core{}, system memory bandwidth {}, {}{}{}\n",
        gb(m.mem_total_bytes),
        gb(m.mem_available_bytes),
        m.cores,
        if m.cores == 1 { "" } else { "s" },
        m.memory_bandwidth_gbs
            .map(|b| format!("{b:.1} GB/s"))
            .unwrap_or_else(|| "unknown".into()),
        if m.gpus.is_empty() {
            "no GPU budgeted".to_owned()
        } else {
            m.gpus
                .iter()
                .map(|g| {
                    format!(
                        "{} ({})",
                        g.name,
                        g.memory_bytes
                            .map(gb)
                            .unwrap_or_else(|| "memory unknown".into())
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        },
        if m.unified_memory {
            ", unified memory"
        } else {
            ""
        },
        m.free_disk_bytes
            .map(|f| format!(", {} free disk", gb(f)))
            .unwrap_or_default()
    );
    out.push_str("budgets:\n");
    for b in &r.budgets {
        out.push_str(&format!(
            "  {:<14} {:>8}  ({})\n",
            placement(b.placement),
            gb(b.bytes),
            b.basis
        ));
    }
    match &r.pick {
        Some(p) => {
            out.push_str(&format!(
                "pick: {} {} on {}, {} tokens of context, needs {} ({:.1} % of the budget), {}, download {}; runtimes: {}{}\n",
                p.model,
                p.quant,
                placement(p.placement),
                thousands(u64::from(p.context)),
                gb(p.need_bytes),
                p.share * 100.0,
                speed(p),
                gb(p.download_bytes),
                p.runtimes.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", "),
                p.ollama
                    .as_ref()
                    .map(|o| format!(" (ollama pull {o})"))
                    .unwrap_or_default()
            ));
        }
        None => out.push_str("pick: none: no model fits well enough and fast enough (see below)\n"),
    }
    if !r.fits.is_empty() {
        out.push_str("fits:\n");
        for fit in &r.fits {
            out.push_str(&format!("  {}\n", fit_line(fit)));
        }
    }
    if !r.not_offered.is_empty() {
        out.push_str("not offered:\n");
        for n in &r.not_offered {
            out.push_str(&format!("  {:<22} {}\n", n.model, n.reason));
        }
    }
    for note in &m.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out.push_str(&format!(
        "fit: need = weights + KV cache at the context + {} for the runtime; good up to {:.0} % of the budget, tight up to {:.0} %; speed = bandwidth / active weights (an upper bound)",
        gb(local::RUNTIME_OVERHEAD_BYTES),
        local::GOOD_SHARE * 100.0,
        local::TIGHT_SHARE * 100.0
    ));
    out
}

/// `autocode models --catalogue [--json]`.
pub fn models_catalogue(ctx: &Context, json: bool) -> Result<ExitCode, EdgeError> {
    let catalogue = catalogue(ctx)?;
    if json {
        output::print_json(&catalogue)?;
    } else {
        let mut lines: Vec<String> = catalogue.models.iter().map(catalogue_line).collect();
        lines.push(format!("sources: {}", catalogue.sources.join(", ")));
        output::print_stdout(&lines.join("\n"))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn catalogue_line(m: &ModelEntry) -> String {
    let price = m
        .price
        .iter()
        .max_by(|a, b| a.date.cmp(&b.date))
        .map(|p| format!("${}/${} per Mtok ({})", p.input, p.output, p.date))
        .unwrap_or_else(|| "price unknown".into());
    let local = m
        .local
        .as_ref()
        .map(|l| {
            format!(
                "  local: {}B ({}B active), {} via {}",
                l.params_total_b,
                l.params_active_b,
                l.quants
                    .iter()
                    .map(|q| format!("{} {}", q.name, gb(q.download_bytes)))
                    .collect::<Vec<_>>()
                    .join(", "),
                l.runtimes
                    .iter()
                    .map(|r| r.as_str())
                    .collect::<Vec<_>>()
                    .join("/")
            )
        })
        .unwrap_or_default();
    format!(
        "{:<22} {:<8} context {:>7}  output {:>6}  tools {:<3}  {}{}",
        m.id,
        m.family,
        thousands(u64::from(m.context_window)),
        thousands(u64::from(m.output_cap)),
        if m.tool_calls { "yes" } else { "no" },
        price,
        local
    )
}
