//! `autocode dashboard [--workspace DIR]… [--scorecard DIR]… [--port N] [--open] [--json]`: the local web view of
//! the runs (`crate::dashboard`). Prints the login URL (it carries the launch token) once on
//! stdout and serves until interrupted.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::output;
use crate::dashboard::{self, Options, Started};
use crate::error::EdgeError;

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// A project whose runs to show (repeat for several; default: the current directory).
    #[arg(long)]
    pub workspace: Vec<PathBuf>,
    /// A scenario result folder whose scorecard to show (`scenario run --out DIR`; repeat).
    #[arg(long, value_name = "DIR")]
    pub scorecard: Vec<PathBuf>,
    /// The port to listen on (default: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// The address to listen on: a loopback address only (127.0.0.1, ::1).
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Open the login URL in the default browser (xdg-open).
    #[arg(long)]
    pub open: bool,
    /// Print the login URL, address and token file as one JSON line on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: DashboardArgs) -> Result<ExitCode, EdgeError> {
    let given = if args.workspace.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.workspace
    };
    let mut workspaces = Vec::new();
    for dir in given {
        let canonical = std::fs::canonicalize(&dir)
            .map_err(|e| EdgeError::usage(format!("workspace {}: {e}", dir.display())))?;
        if !workspaces.contains(&canonical) {
            workspaces.push(canonical);
        }
    }
    let env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let exe = std::env::current_exe().map_err(EdgeError::internal)?;
    // The token file sits beside the run-state key, in its 0700 directory (made with the key:
    // the dashboard needs the key anyway, to verify what it shows).
    let token_file = match crate::run::integrity::process_key() {
        Ok(_) => crate::run::integrity::key_dir()
            .ok()
            .map(|dir| dir.join("dashboard.json")),
        Err(e) => {
            output::say!("no token file ({e}): use the login URL");
            None
        }
    };
    let options = Options {
        workspaces,
        addr: args.bind,
        port: args.port,
        env,
        exe,
        token_file,
        scorecards: args.scorecard,
    };
    let (json, open) = (args.json, args.open);
    let runtime = super::runtime()?;
    runtime
        .block_on(async move {
            let (tx, rx) = tokio::sync::oneshot::channel::<Started>();
            let announce = async move {
                if let Ok(started) = rx.await {
                    announce(&started, json);
                    if open {
                        open_browser(&started.login_url).await;
                    }
                }
            };
            let serve = dashboard::serve(options, move |started| {
                let _ = tx.send(started.clone());
            });
            let (served, ()) = tokio::join!(serve, announce);
            served
        })
        .map_err(EdgeError::usage)?;
    Ok(ExitCode::SUCCESS)
}

fn announce(started: &Started, json: bool) {
    let printed = if json {
        output::print_json(started)
    } else {
        output::print_stdout(&started.login_url)
    };
    if let Err(e) = printed {
        output::say!("cannot print the login URL: {}", e.render());
    }
    output::say!(
        "autocode dashboard listens on {} for {} workspace(s); the URL above carries its token{} (stop: Ctrl-C)",
        started.address,
        started.workspaces.len(),
        started
            .token_file
            .as_ref()
            .map(|f| format!(", also in {}", f.display()))
            .unwrap_or_default()
    );
}

async fn open_browser(url: &str) {
    let program = std::ffi::OsString::from("xdg-open");
    let args = [std::ffi::OsString::from(url)];
    let cwd = std::env::temp_dir();
    match crate::supervise::run_in_current_family(&program, &args, &cwd, 4096).await {
        Ok(out) if matches!(out.exit, crate::supervise::Exit::Code(0)) => {}
        Ok(out) => output::say!(
            "xdg-open did not open the browser ({:?}): open the URL above",
            out.exit
        ),
        Err(e) => output::say!("cannot start xdg-open ({e}): open the URL above"),
    }
}
