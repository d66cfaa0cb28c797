//! `autocode local recommend [--json]` (which catalogue models fit this machine, `crate::local`),
//! `autocode local setup [MODEL]` (a running local server saved as a direct connection,
//! `crate::local::setup`: the only command here that downloads, after the size was shown and
//! confirmed) and `autocode models --catalogue [--json]` (the model catalogue, `crate::models`).

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
    /// Find a running local model server (Ollama, llama.cpp, LM Studio, vLLM on their usual
    /// loopback ports, or --url), pull the model into Ollama after its size was shown and
    /// confirmed, read the context the server runs with, run the readiness canaries, and save
    /// the endpoint as a direct connection.
    Setup(SetupArgs),
}

#[derive(Debug, Args)]
pub struct SetupArgs {
    /// The model: a listed id, an Ollama tag (`qwen2.5-coder:1.5b`) or a catalogue id
    /// (`qwen2.5-coder-1.5b`, pulled under its Ollama tag). Default: the server's only model.
    pub model: Option<String>,
    /// The server's address on this machine (default: the first that answers of
    /// 127.0.0.1:11434, :8080, :1234, :8000).
    #[arg(long)]
    pub url: Option<String>,
    /// The endpoint's name in the direct connections (default: the server's kind).
    #[arg(long)]
    pub name: Option<String>,
    /// The model's family, for the cross-model rule (default: from the model catalogue).
    #[arg(long)]
    pub family: Option<String>,
    /// Pull without asking (the size is still shown).
    #[arg(long, short = 'y')]
    pub yes: bool,
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
        LocalCommand::Setup(args) => setup(&ctx, args),
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

fn setup(ctx: &Context, args: SetupArgs) -> Result<ExitCode, EdgeError> {
    use crate::direct::connections::{Connections, EndpointKind, dir_from_env};
    use crate::local::setup::{self, SetupError};
    let catalogue = catalogue(ctx)?;
    let server = setup::discover(args.url.as_deref()).map_err(EdgeError::usage)?;
    output::say!(
        "found a {} server at {} (lists: {})",
        server.kind.as_str(),
        server.base_url,
        if server.models.is_empty() {
            "nothing yet".to_owned()
        } else {
            server.models.join(", ")
        }
    );
    // A catalogue id means its Ollama tag on Ollama.
    let wanted = args.model.clone().map(|m| match server.kind {
        EndpointKind::Ollama => catalogue
            .get(&m)
            .and_then(|e| e.local.as_ref())
            .and_then(|l| l.ollama.clone())
            .unwrap_or(m),
        _ => m,
    });
    let model = match (wanted, server.models.as_slice()) {
        (Some(m), _) => m,
        (None, [one]) => one.clone(),
        (None, listed) => {
            return Err(EdgeError::usage(SetupError::WhichModel(
                if listed.is_empty() {
                    "no model".into()
                } else {
                    listed.join(", ")
                },
            )));
        }
    };
    if !server.models.contains(&model) {
        if server.kind != EndpointKind::Ollama {
            return Err(EdgeError::usage(SetupError::ModelAbsent {
                kind: server.kind.as_str(),
                model: model.clone(),
                listed: server.models.join(", "),
                fix: "load it in the server (llama-server -m FILE, the LM Studio app, vllm serve MODEL) and run setup again".into(),
            }));
        }
        let size = setup::ollama_size(&catalogue, &model);
        match size {
            Some(size) => output::say!("{model} is not pulled yet: a {} download", local::gb(size)),
            None if args.yes => {
                output::say!("{model} is not pulled yet; its size is not in the catalogue")
            }
            None => return Err(EdgeError::usage(SetupError::UnknownSize(model))),
        }
        if !args.yes && !confirm(&format!("pull {model} now? [y/N] ")) {
            return Err(EdgeError::usage(SetupError::NotConfirmed { model, size }));
        }
        let mut bar = PullBar::new();
        setup::ollama_pull(&server.base_url, &model, |event| bar.show(event))
            .map_err(EdgeError::usage)?;
        bar.done();
    }
    let family = args
        .family
        .clone()
        .or_else(|| setup::family_of(&catalogue, &model))
        .ok_or_else(|| EdgeError::usage(SetupError::UnknownFamily(model.clone())))?;
    let name = args.name.clone().unwrap_or_else(|| match server.kind {
        EndpointKind::LlamaCpp => "llamacpp".to_owned(),
        EndpointKind::OpenaiCompatible => "local".to_owned(),
        other => other.as_str().to_owned(),
    });
    let endpoint = setup::endpoint_for(&server, &name, &model, &family);
    let marker = format!("ac-canary-setup-{}", std::process::id());
    output::say!(
        "checking {model} (a tool call and a long prompt; a small model on a CPU takes a minute)"
    );
    let readiness = setup::readiness(&endpoint, &model, &marker).map_err(EdgeError::usage)?;
    for check in &readiness.checks {
        output::say!(
            "{} {}: {}{}",
            if check.ok { "ok  " } else { "FAIL" },
            check.name,
            check.detail,
            check
                .fix
                .as_deref()
                .map(|f| format!(" (fix: {f})"))
                .unwrap_or_default()
        );
    }
    match readiness.context {
        Some(context) => output::say!(
            "the server runs {model} with a {} token context",
            thousands(context)
        ),
        None => output::say!("the server does not say which context it runs {model} with"),
    }
    if !readiness.ok() {
        return Err(EdgeError::usage(format!(
            "{model} on {} is not ready (see the failed checks above); nothing was saved",
            server.base_url
        )));
    }
    let dir = dir_from_env(env_get(ctx)).map_err(EdgeError::usage)?;
    let mut connections = Connections::load(&dir).map_err(EdgeError::usage)?;
    setup::save(&mut connections, endpoint.clone()).map_err(EdgeError::usage)?;
    // The canaries just passed: a run within the cache's day does not repeat them.
    if let Some(cache) = crate::run::preflight::direct_ready::cache_of(&ctx.env)
        && let Err(e) = cache.record_pass(
            &endpoint,
            &model,
            &readiness.fingerprint,
            chrono::Utc::now(),
        )
    {
        tracing::warn!("cannot record the passed canaries: {e}");
    }
    output::say!(
        "saved endpoint {name} ({model}, family {family}) in {}",
        dir.display()
    );
    for line in setup::routes(&name, &model) {
        output::print_stdout(&format!("{line}\n"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A yes on the terminal (never without one).
fn confirm(prompt: &str) -> bool {
    use std::io::{BufRead, IsTerminal, Write};
    if !std::io::stdin().is_terminal() {
        output::say!("{prompt}(stdin is not a terminal: no; pass --yes to pull)");
        return false;
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{prompt}");
    let _ = err.flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    matches!(line.trim(), "y" | "Y" | "yes")
}

/// The pull's progress on stderr: one redrawn bar on a terminal, a line per tenth otherwise.
struct PullBar {
    terminal: bool,
    last_tenth: Option<(String, u64)>,
}

impl PullBar {
    fn new() -> PullBar {
        use std::io::IsTerminal;
        PullBar {
            terminal: std::io::stderr().is_terminal(),
            last_tenth: None,
        }
    }

    fn show(&mut self, event: &crate::local::setup::PullEvent) {
        use crate::local::setup::PullEvent;
        use std::io::Write;
        match event {
            PullEvent::Status(status) => {
                if self.terminal {
                    eprintln!();
                }
                output::say!("{status}");
            }
            PullEvent::Progress {
                digest,
                completed,
                total,
            } => {
                let line = pull_bar(digest, *completed, *total);
                if self.terminal {
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r{line}");
                    let _ = err.flush();
                } else {
                    let tenth = completed.saturating_mul(10) / (*total).max(1);
                    if self.last_tenth.as_ref() != Some(&(digest.clone(), tenth)) {
                        self.last_tenth = Some((digest.clone(), tenth));
                        output::say!("{line}");
                    }
                }
            }
        }
    }

    fn done(&self) {
        if self.terminal {
            eprintln!();
        }
    }
}

/// `pulling 6f2b1c3a [#########           ] 45% 0.5 GB / 1.1 GB`.
pub fn pull_bar(digest: &str, completed: u64, total: u64) -> String {
    let short: String = digest
        .trim_start_matches("sha256:")
        .chars()
        .take(8)
        .collect();
    let percent = completed.min(total).saturating_mul(100) / total.max(1);
    let filled = usize::try_from(percent / 5).unwrap_or(20);
    format!(
        "pulling {short} [{}{}] {percent:>3}% {} / {}",
        "#".repeat(filled),
        " ".repeat(20 - filled.min(20)),
        local::gb(completed),
        local::gb(total)
    )
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
