//! `autocode conformance`: qualifies a CLI version against autocode's contract (see
//! `crate::conformance`). `--scripted` runs the probe and every fault variant against the
//! scripted model in throwaway homes; `--live --model M --i-authorize-spend` runs the clean probe
//! on a real account; `--record` writes the verdict to the matrix and `--write-matrix` renders
//! the matrix's table into `docs/providers.md`.

use super::output::say;
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use super::context::{Context, PROBE_TIMEOUT};
use super::output;
use crate::conformance::matrix::{self, Matrix, MatrixEntry, MatrixResult};
use crate::conformance::{self, Fault, ProbeIdentity, ProbeSetup, VariantResult, script};
use crate::demo::{self, CHECKER_MODEL, DOER_MODEL, FoundCli};
use crate::error::{EdgeError, exit};
use crate::provider::{OutputMode, ResolvedProvider};
use crate::scripted_model::{Script, ScriptSyntax, ScriptedServer, ServerConfig};
use crate::transport::BuiltinTransport;

#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// The provider to qualify (a built-in or a registered tool).
    #[arg(long, required_unless_present = "write_matrix")]
    pub provider: Option<String>,
    /// Against the scripted model, offline, in throwaway homes.
    #[arg(long, conflicts_with = "live")]
    pub scripted: bool,
    /// On a real account (spends money; never in CI).
    #[arg(long, requires_all = ["model", "i_authorize_spend"])]
    pub live: bool,
    /// The builder's model (live).
    #[arg(long)]
    pub model: Option<String>,
    /// The tester's model (live; default: --model).
    #[arg(long)]
    pub checker_model: Option<String>,
    /// Confirms that a live probe may spend on the account.
    #[arg(long)]
    pub i_authorize_spend: bool,
    /// Only these variants: `clean` or a fault name (scripted; default: the clean probe and
    /// every fault).
    #[arg(long = "fault", value_name = "NAME", conflicts_with = "live")]
    pub faults: Vec<String>,
    /// Only the clean probe (scripted).
    #[arg(long, conflicts_with = "faults")]
    pub clean_only: bool,
    /// How many variants run at once.
    #[arg(long, default_value_t = 4)]
    pub jobs: usize,
    /// Seconds one stage may take.
    #[arg(long, default_value_t = 180)]
    pub stage_timeout: u64,
    /// Record the verdict in the matrix file.
    #[arg(long)]
    pub record: bool,
    /// Render the matrix table into the providers document (between its markers).
    #[arg(long)]
    pub write_matrix: bool,
    /// The matrix file.
    #[arg(long, default_value = "docs/provider-matrix.json")]
    pub matrix: PathBuf,
    /// Qualify exactly this CLI executable (default: the one on PATH, as a run would use).
    #[arg(long, value_name = "PATH")]
    pub executable: Option<PathBuf>,
    /// Look for the CLI in this directory before PATH (the pinned ones:
    /// `tests/clis/node_modules/.bin`).
    #[arg(long, value_name = "DIR", conflicts_with = "executable")]
    pub clis_dir: Option<PathBuf>,
    /// The document holding the table.
    #[arg(long, default_value = "docs/providers.md")]
    pub providers_doc: PathBuf,
    /// A note recorded with the verdict.
    #[arg(long)]
    pub note: Option<String>,
    /// Keep the probe workspaces (printed) instead of deleting them.
    #[arg(long)]
    pub keep: bool,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

/// The command's JSON output.
#[derive(Debug, Serialize)]
pub struct ConformanceSummary {
    pub engine: String,
    pub version: Option<String>,
    pub transport: String,
    pub mode: &'static str,
    pub passed: bool,
    pub variants: Vec<VariantResult>,
}

fn output_name(mode: OutputMode) -> String {
    serde_json::to_value(mode)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{mode:?}"))
}

fn env_strings(env: &crate::provider::registry::Env) -> BTreeMap<String, String> {
    env.iter()
        .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v.to_str()?.to_owned())))
        .collect()
}

/// The CLI the probe sets up against the scripted model: a built-in's own, OpenCode for an
/// `opencode_events` tool, the driven CLI for an ACP tool whose agent autocode knows
/// (`acp::pinned::native_cli`: Claude Code's adapter, `opencode acp`), none for a report-file
/// tool.
fn scripted_cli(
    provider: &ResolvedProvider,
    ctx: &Context,
    search: &demo::CliSearch,
) -> Result<Option<FoundCli>, EdgeError> {
    let transport = match BuiltinTransport::for_provider(&provider.name) {
        Some(t) => Some(t),
        None => match provider.config.output {
            OutputMode::OpencodeEvents => Some(BuiltinTransport::Opencode),
            OutputMode::CodexEvents => Some(BuiltinTransport::Codex),
            OutputMode::ClaudeEvents => Some(BuiltinTransport::Claude),
            // An ACP agent driving a built-in CLI reads that CLI's configuration.
            OutputMode::Acp => crate::acp::pinned::native_cli(&provider.config.command),
            OutputMode::ReportFile => None,
            OutputMode::DirectRuntime => None,
        },
    };
    let Some(transport) = transport else {
        return Ok(None);
    };
    demo::find_cli(Some(transport), &ctx.path_var(), search)
        .map(Some)
        .map_err(|e| {
            EdgeError::usage(format!("{}: {e}", transport.program())).hint(
                "install the pinned CLIs with `npm ci --prefix tests/clis` and pass `--clis-dir tests/clis/node_modules/.bin`, or name one with `--executable PATH`",
            )
        })
}

/// A throwaway home for a report-file tool (no CLI config to write).
fn plain_home(home: &Path) -> BTreeMap<String, String> {
    let h = |p: &str| home.join(p).to_string_lossy().into_owned();
    [
        ("HOME", h("")),
        ("XDG_CONFIG_HOME", h(".config")),
        ("XDG_DATA_HOME", h(".local/share")),
        ("XDG_CACHE_HOME", h(".cache")),
        ("XDG_STATE_HOME", h(".local/state")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// A boxed future borrowing from the command's state.
type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Polls every future to completion, concurrently, in order of the input.
async fn join_all<T>(futures: Vec<Boxed<'_, T>>) -> Vec<T> {
    let mut slots: Vec<(Boxed<'_, T>, Option<T>)> =
        futures.into_iter().map(|f| (f, None)).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, slot) in slots.iter_mut() {
            if slot.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(v) => *slot = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    slots.into_iter().filter_map(|(_, v)| v).collect()
}

struct Scripted<'a> {
    provider: &'a ResolvedProvider,
    ctx: &'a Context,
    cli: Option<FoundCli>,
    root: PathBuf,
    stage_timeout: Duration,
}

impl Scripted<'_> {
    async fn variant(&self, index: usize, fault: Option<Fault>) -> Result<VariantResult, String> {
        let identity = ProbeIdentity::random();
        let transport = self.cli.as_ref().map(|c| c.transport);
        let acp_agent = (self.provider.config.output == OutputMode::Acp)
            .then(|| transport.and_then(crate::acp::PinnedAcpAgent::for_cli))
            .flatten();
        let model = |m: &str| match (acp_agent, transport) {
            (Some(agent), _) => agent.scripted_model(m),
            (None, Some(t)) => demo::model_id(t, m),
            (None, None) => m.to_owned(),
        };
        let script_value = script::probe_script(&identity, fault, &[DOER_MODEL, CHECKER_MODEL]);
        let script = Script::parse(
            &script_value.to_string(),
            ScriptSyntax::Json,
            Path::new("conformance-probe.json"),
        )
        .map_err(|e| e.to_string())?;
        let server = ScriptedServer::start(ServerConfig::new(script))
            .await
            .map_err(|e| e.to_string())?;
        let variant_root = self.root.join(format!(
            "{index:02}-{}",
            fault.map_or("clean", Fault::as_str)
        ));
        let home = variant_root.join("home");
        let env = match &self.cli {
            Some(cli) => {
                let mut overrides =
                    demo::isolated_cli_env(cli.transport, &server, &home, demo::DEMO_CLI)
                        .map_err(|e| e.to_string())?;
                if let Some(agent) = acp_agent {
                    overrides.extend(agent.agent_env(Some(&cli.executable)));
                }
                env_strings(&demo::run_env(&self.ctx.env, &overrides, cli))
            }
            None => {
                let mut env = env_strings(&self.ctx.env);
                env.extend(plain_home(&home));
                env
            }
        };
        let setup = ProbeSetup {
            provider: self.provider.clone(),
            env,
            builder_model: model(DOER_MODEL),
            checker_model: model(CHECKER_MODEL),
            scripted_local: true,
            root: variant_root,
            stage_timeout: self.stage_timeout,
        };
        let probe = conformance::run_probe(&setup, &identity, fault).await;
        server.shutdown().await;
        Ok(conformance::judge_variant(
            fault,
            probe.map_err(|e| e.to_string())?,
        ))
    }
}

fn print_variant(v: &VariantResult) {
    let steps: Vec<String> = v
        .probe
        .steps
        .iter()
        .map(|s| format!("{} {:.1}s", s.step.as_str(), s.seconds))
        .collect();
    let named: Vec<&str> = v.named.iter().map(|k| k.as_str()).collect();
    say!(
        "  {:<28} {}  [{}]{}",
        v.variant,
        if v.passed { "PASS" } else { "FAIL" },
        steps.join(", "),
        if named.is_empty() {
            String::new()
        } else {
            format!(" caught: {}", named.join(", "))
        }
    );
    if !v.passed {
        for p in v.probe.problems() {
            say!("      {} {}: {}", p.step.as_str(), p.kind, p.detail);
        }
        if !v.expected.is_empty() {
            let expected: Vec<&str> = v.expected.iter().map(|k| k.as_str()).collect();
            say!("      expected one of: {}", expected.join(", "));
        }
    }
    for note in &v.probe.notes {
        say!("      note: {note}");
    }
}

pub fn run(args: ConformanceArgs) -> Result<ExitCode, EdgeError> {
    let mut passed = true;
    if let Some(name) = &args.provider {
        passed = probe(&args, name)?;
    }
    if args.write_matrix {
        write_matrix(&args.matrix, &args.providers_doc)?;
    }
    Ok(ExitCode::from(if passed { exit::OK } else { exit::FAILED }))
}

fn probe(args: &ConformanceArgs, name: &str) -> Result<bool, EdgeError> {
    if !args.scripted && !args.live {
        return Err(EdgeError::usage(
            "say --scripted (offline, against the scripted model) or --live --model M --i-authorize-spend",
        ));
    }
    let faults: Vec<Option<Fault>> = if args.live || args.clean_only {
        vec![None]
    } else if args.faults.is_empty() {
        std::iter::once(None)
            .chain(Fault::ALL.into_iter().map(Some))
            .collect()
    } else {
        args.faults
            .iter()
            .map(|f| {
                if f == "clean" {
                    return Ok(None);
                }
                Fault::parse(f).map(Some).ok_or_else(|| {
                    let names: Vec<&str> = Fault::ALL.iter().map(|f| f.as_str()).collect();
                    EdgeError::usage(format!(
                        "unknown fault {f:?}; the variants are: clean, {}",
                        names.join(", ")
                    ))
                })
            })
            .collect::<Result<_, _>>()?
    };
    let ctx = Context::from_process()?;
    let provider = ctx.resolve(Some(name))?;
    let transport = output_name(provider.config.output);
    let faults = if provider.config.output == OutputMode::ReportFile && faults.len() > 1 {
        // The scripted faults act through the model server, which a report-file tool need not
        // talk to: only the clean probe qualifies it.
        say!("{name} writes a report file: only the clean probe applies (no scripted faults)");
        vec![None]
    } else {
        faults
    };
    let root = tempfile::Builder::new()
        .prefix("autocode-conformance-")
        .tempdir()
        .map_err(EdgeError::internal)?;
    let runtime = super::runtime()?;
    let stage_timeout = Duration::from_secs(args.stage_timeout);
    let (version, variants) = runtime.block_on(async {
        let (variants, cli) = if args.scripted {
            let search = demo::CliSearch {
                executable: args.executable.clone(),
                dir: args.clis_dir.clone(),
            };
            let cli = scripted_cli(&provider, &ctx, &search)?;
            if let Some(cli) = &cli {
                say!("{name}: {}", cli.executable.display());
            }
            let scripted = Scripted {
                provider: &provider,
                ctx: &ctx,
                cli: cli.clone(),
                root: root.path().to_owned(),
                stage_timeout,
            };
            let gate = Arc::new(tokio::sync::Semaphore::new(args.jobs.max(1)));
            let scripted = &scripted;
            let futures: Vec<Boxed<'_, Result<VariantResult, String>>> = faults
                .iter()
                .enumerate()
                .map(|(i, fault)| {
                    let gate = gate.clone();
                    let fault = *fault;
                    Box::pin(async move {
                        let _permit = gate.acquire().await.map_err(|e| e.to_string())?;
                        scripted.variant(i, fault).await
                    }) as Boxed<'_, _>
                })
                .collect();
            let results = join_all(futures).await;
            (results, cli)
        } else {
            let model = args.model.clone().unwrap_or_default();
            let setup = ProbeSetup {
                provider: provider.clone(),
                env: env_strings(&ctx.env),
                checker_model: args.checker_model.clone().unwrap_or_else(|| model.clone()),
                builder_model: model,
                scripted_local: false,
                root: root.path().to_owned(),
                stage_timeout,
            };
            let identity = ProbeIdentity::random();
            let probe = conformance::run_probe(&setup, &identity, None)
                .await
                .map(|p| conformance::judge_variant(None, p))
                .map_err(|e| e.to_string());
            (vec![probe], None)
        };
        let mut probe_env = ctx.agent_env(Some(&provider)).kept;
        if let Some(dir) = cli.as_ref().and_then(|c| c.executable.parent()) {
            let path = probe_env.get("PATH").cloned().unwrap_or_default();
            probe_env.insert("PATH".into(), format!("{}:{path}", dir.display()));
        }
        let probe_ctx = crate::provider::ProbeContext {
            env: super::context::to_os_env(&probe_env),
            cwd: std::env::temp_dir(),
            timeout: PROBE_TIMEOUT,
            // Conformance asks the tool itself which version it is.
            version_cache: None,
        };
        let version = crate::provider::probe_version(&provider.config, &probe_ctx)
            .await
            .ok();
        Ok::<_, EdgeError>((version, variants))
    })?;
    let mode = if args.scripted { "scripted" } else { "live" };
    say!(
        "autocode conformance {name} {} ({transport}, {mode})",
        version.as_deref().unwrap_or("(version unknown)")
    );
    let mut results = Vec::new();
    let mut errors = Vec::new();
    for (fault, v) in faults.iter().zip(variants) {
        match v {
            Ok(v) => {
                print_variant(&v);
                results.push(v);
            }
            Err(e) => {
                say!("  {:<28} ERROR {e}", fault.map_or("clean", Fault::as_str));
                errors.push(e);
            }
        }
    }
    let passed = errors.is_empty() && results.iter().all(|v| v.passed);
    let caught = results
        .iter()
        .filter(|v| v.variant != "clean" && v.passed)
        .count();
    let total_faults = faults.iter().filter(|f| f.is_some()).count();
    say!(
        "conformance {name}: {} (clean probe {}, {caught}/{total_faults} fault variants caught)",
        if passed { "PASS" } else { "FAIL" },
        results
            .iter()
            .find(|v| v.variant == "clean")
            .map_or("not run", |v| if v.passed { "passed" } else { "FAILED" })
    );
    if args.record {
        let text = std::fs::read_to_string(&args.matrix)
            .map_err(|e| EdgeError::usage(format!("{}: {e}", args.matrix.display())))?;
        let mut m = Matrix::parse(&text)
            .map_err(|e| EdgeError::usage(format!("{}: {e}", args.matrix.display())))?;
        let commit = runtime.block_on(current_commit(&ctx));
        m.record(MatrixEntry {
            engine: name.to_owned(),
            version: version
                .as_deref()
                .and_then(matrix::semver)
                .map(|(a, b, c)| format!("{a}.{b}.{c}"))
                .or(version.clone())
                .unwrap_or_else(|| "unknown".into()),
            transport: transport.clone(),
            result: if passed {
                MatrixResult::Pass
            } else {
                MatrixResult::Fail
            },
            date: chrono::Utc::now().format("%Y-%m-%d").to_string(),
            commit,
            note: args.note.clone().unwrap_or_else(|| {
                format!("{mode}: clean probe + {caught}/{total_faults} fault variants caught")
            }),
        });
        let json = serde_json::to_string_pretty(&m).map_err(EdgeError::internal)?;
        crate::store::write_atomic(&args.matrix, format!("{json}\n").as_bytes())
            .map_err(EdgeError::internal)?;
        say!("recorded in {}", args.matrix.display());
    }
    if !passed && !args.keep {
        say!("rerun with --keep to inspect the probe workspaces and stage directories");
    }
    if args.keep {
        let kept = root.keep();
        say!("probe workspaces kept under {}", kept.display());
    }
    if args.json {
        output::print_json(&ConformanceSummary {
            engine: name.to_owned(),
            version,
            transport,
            mode,
            passed,
            variants: results,
        })?;
    }
    Ok(passed)
}

async fn current_commit(ctx: &Context) -> String {
    let env = env_strings(&ctx.env);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    crate::run::workspace::git(&cwd, &["rev-parse", "HEAD"], &env)
        .await
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

fn write_matrix(matrix_path: &Path, doc_path: &Path) -> Result<(), EdgeError> {
    let text = std::fs::read_to_string(matrix_path)
        .map_err(|e| EdgeError::usage(format!("{}: {e}", matrix_path.display())))?;
    let m = Matrix::parse(&text)
        .map_err(|e| EdgeError::usage(format!("{}: {e}", matrix_path.display())))?;
    let doc = std::fs::read_to_string(doc_path)
        .map_err(|e| EdgeError::usage(format!("{}: {e}", doc_path.display())))?;
    let updated = matrix::replace_table(&doc, &m.render_table())
        .map_err(|e| EdgeError::usage(format!("{}: {e}", doc_path.display())))?;
    crate::store::write_atomic(doc_path, updated.as_bytes()).map_err(EdgeError::internal)?;
    say!(
        "rendered {} entries of {} into {}",
        m.entries.len(),
        matrix_path.display(),
        doc_path.display()
    );
    Ok(())
}
