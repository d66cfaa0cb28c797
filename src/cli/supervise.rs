//! `autocode supervise [--json] [--timeout SECS] [--receipt PATH] [--ledger PATH] [--confine
//! [--writable PATH]… [--unreadable PATH]… [--read-only PATH]… [--overlay-lower PATH]] -- CMD
//! ARGS…`: runs any command under the
//! process-ownership boundary (and, with `--confine`, in a room) with autocode's environment and
//! terminal, passes its exit
//! code through (128+N for signal N, 124 for a timeout, 2 when the boundary refuses), and prints
//! the receipt (stderr for people, stdout with `--json`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::error::EdgeError;

#[derive(Debug, Args)]
pub struct SuperviseArgs {
    /// Print the receipt as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Stop the whole family after this many seconds.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Also write the receipt to this file.
    #[arg(long)]
    pub receipt: Option<PathBuf>,
    /// Run the command in a room (Landlock, plus gated unix-socket connects): it may write only
    /// the --writable paths (default: the current directory) and a fresh private temporary
    /// directory (exported as TMPDIR), and cannot signal or reach abstract unix sockets outside
    /// its family. Implied by --writable and --unreadable.
    #[arg(long)]
    pub confine: bool,
    /// A path the confined command may write beneath (repeatable; implies --confine).
    #[arg(long, visible_alias = "room", value_name = "PATH")]
    pub writable: Vec<PathBuf>,
    /// A path the confined command may not read (repeatable; implies --confine).
    #[arg(long, value_name = "PATH")]
    pub unreadable: Vec<PathBuf>,
    /// A path beneath a --writable one that stays read-only (repeatable; implies --confine):
    /// a read-only mount in a private mount namespace, as an `--in-place` builder's `.git`.
    #[arg(long, value_name = "PATH")]
    pub read_only: Vec<PathBuf>,
    /// Show the current directory as an overlay of PATH (implies --confine): the command sees
    /// PATH's content there and its writes land in a temporary upper layer, removed afterwards;
    /// PATH itself is never written (the mount of a run's verification tree).
    #[arg(long, value_name = "PATH")]
    pub overlay_lower: Option<PathBuf>,
    /// Keep the confined command's writes to HOME in this layer (DIR/upper, outside HOME)
    /// instead of a throwaway one: a second run sees what the first wrote there, the user's
    /// HOME never does.
    #[arg(long, value_name = "DIR")]
    pub home_layer: Option<PathBuf>,
    /// No private views: HOME and /tmp stay read-only to the confined command (writes there
    /// fail) instead of copy-on-write layers.
    #[arg(long, conflicts_with = "home_layer")]
    pub no_private_views: bool,
    /// A loopback, private or link-local destination the confined command may connect to
    /// although its family does not serve it (`ADDRESS[:PORT]`, `NETWORK/PREFIX`,
    /// `[IPV6]:PORT`; repeatable; implies --confine).
    #[arg(long = "allow-connect", value_name = "ADDRESS")]
    pub allow_connect: Vec<crate::supervise::net::NetAllow>,
    /// Write the exec ledger (JSON lines, one entry per exec) to this file.
    #[arg(long)]
    pub ledger: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

pub fn run(args: SuperviseArgs) -> Result<ExitCode, EdgeError> {
    let timeout = match args.timeout {
        Some(secs) if !(secs.is_finite() && secs > 0.0) => {
            return Err(EdgeError::usage(format!(
                "--timeout must be a positive number of seconds, not {secs}"
            )));
        }
        Some(secs) => Some(Duration::from_secs_f64(secs)),
        None => None,
    };
    // The overlay's upper and work directories live as long as the command.
    let layers = match &args.overlay_lower {
        Some(_) => Some(
            tempfile::Builder::new()
                .prefix("autocode-overlay-")
                .tempdir()
                .map_err(|e| EdgeError::usage(format!("cannot make the overlay's layers: {e}")))?,
        ),
        None => None,
    };
    let overlay = match (&args.overlay_lower, &layers) {
        (Some(lower), Some(layers)) => {
            let cwd = std::env::current_dir()
                .map_err(|e| EdgeError::usage(format!("no current directory: {e}")))?;
            let overlay = crate::supervise::Overlay {
                dir: cwd,
                lower: std::path::absolute(lower).map_err(|e| {
                    EdgeError::usage(format!("--overlay-lower {}: {e}", lower.display()))
                })?,
                upper: layers.path().join("upper"),
                work: layers.path().join("work"),
            };
            for dir in [&overlay.upper, &overlay.work] {
                std::fs::create_dir_all(dir)
                    .map_err(|e| EdgeError::usage(format!("cannot make {}: {e}", dir.display())))?;
            }
            Some(overlay)
        }
        _ => None,
    };
    let mut writable = args.writable;
    if let Some(overlay) = &overlay
        && !writable.is_empty()
        && !writable.contains(&overlay.dir)
    {
        writable.push(overlay.dir.clone());
    }
    let confined = args.confine
        || !writable.is_empty()
        || !args.unreadable.is_empty()
        || !args.read_only.is_empty()
        || args.home_layer.is_some()
        || !args.allow_connect.is_empty()
        || overlay.is_some();
    // The private views of HOME, the toolchain homes and /tmp: their layers live as long as the
    // command; none covers the current directory or a writable path.
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let cwd = std::env::current_dir().ok();
    let keep_clear: Vec<&std::path::Path> = writable
        .iter()
        .map(|p| p.as_path())
        .chain(cwd.as_deref())
        .collect();
    let throwaway = if confined && !args.no_private_views {
        Some(
            crate::run::confine::ThrowawayViews::new(&env, &keep_clear)
                .map_err(|e| EdgeError::usage(format!("cannot make the private layers: {e}")))?,
        )
    } else {
        None
    };
    let views = throwaway.as_ref().map(|throwaway| {
        let mut layers = throwaway.overlays();
        let home_dir = crate::run::layers::home_of(&env);
        if let Some(dir) = &args.home_layer
            && let Some(home) = layers
                .iter_mut()
                .find(|l| Some(&l.dir) == home_dir.as_ref())
        {
            let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            home.upper = dir.join("upper");
            home.work = dir.join("work");
            for made in [&home.upper, &home.work] {
                let _ = std::fs::create_dir_all(made);
            }
        }
        let mut views = crate::supervise::PrivateViews {
            layers,
            ..Default::default()
        };
        views.hidden = args
            .unreadable
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
            .filter(|p| views.covers(p))
            .collect();
        views
    });
    let code = super::runtime()?.block_on(crate::supervise::supervise_command(
        args.command,
        timeout,
        args.json,
        args.receipt,
        confined.then_some(crate::supervise::Room {
            writable,
            unreadable: args.unreadable,
            read_only: args.read_only,
            overlay,
            views,
            allow_connect: args.allow_connect,
        }),
        args.ledger,
    ));
    drop(throwaway);
    if let Some(layers) = layers
        // The kernel leaves the overlay's work directory unreadable to an ordinary owner.
        && let Err(e) = crate::store::remove_tree(layers.path())
    {
        tracing::warn!("cannot remove the overlay's layers: {e}");
    }
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
