//! `autocode runs [--workspace DIR] [--json]`: the workspace's runs, newest first — id, phase
//! (or pause), age and the objective's first line — and the runs autocode refuses, with why.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::output;
use crate::error::EdgeError;

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// The project whose runs to list (default: the current directory).
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: RunsArgs) -> Result<ExitCode, EdgeError> {
    let workspace = std::fs::canonicalize(&args.workspace)
        .map_err(|e| EdgeError::usage(format!("workspace {}: {e}", args.workspace.display())))?;
    let env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let listings = super::runtime()?
        .block_on(crate::run::list_runs(&workspace, &env))
        .map_err(EdgeError::internal)?;
    if args.json {
        output::print_json(&listings)?;
        return Ok(ExitCode::SUCCESS);
    }
    if listings.is_empty() {
        output::print_stdout(&format!("no runs in {}", workspace.display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    let now = chrono::Utc::now();
    let rows: Vec<[String; 4]> = listings
        .iter()
        .map(|l| match &l.summary {
            Some(s) => [
                l.run_id.clone(),
                s.pause.clone().unwrap_or_else(|| s.phase.clone()),
                age(now - s.updated_at),
                s.objective.clone(),
            ],
            None => [
                l.run_id.clone(),
                "REFUSED".into(),
                "-".into(),
                l.refused.clone().unwrap_or_default(),
            ],
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (w0, w1, w2) = (width(0), width(1), width(2));
    // The objective is cut to what is left of 80 columns (at least 20 characters, ending in
    // `…`); a refused run's reason is never cut (`runs --json` has every objective whole).
    let room = 80usize.saturating_sub(w0 + w1 + w2 + 6).max(20);
    let text: Vec<String> = rows
        .iter()
        .zip(&listings)
        .map(|(r, l)| {
            let last = if l.summary.is_some() && r[3].chars().count() > room {
                let head: String = r[3].chars().take(room - 1).collect();
                format!("{head}…")
            } else {
                r[3].clone()
            };
            format!("{:<w0$}  {:<w1$}  {:>w2$}  {last}", r[0], r[1], r[2])
        })
        .collect();
    output::print_stdout(&text.join("\n"))?;
    Ok(ExitCode::SUCCESS)
}

/// `42s`, `7m`, `3h`, `5d`: how long ago, in one unit.
fn age(elapsed: chrono::TimeDelta) -> String {
    let secs = elapsed.num_seconds().max(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_one_unit() {
        assert_eq!(age(chrono::TimeDelta::seconds(42)), "42s");
        assert_eq!(age(chrono::TimeDelta::seconds(7 * 60 + 3)), "7m");
        assert_eq!(age(chrono::TimeDelta::seconds(3 * 3600)), "3h");
        assert_eq!(age(chrono::TimeDelta::seconds(5 * 86_400)), "5d");
        assert_eq!(age(chrono::TimeDelta::seconds(-5)), "0s");
    }
}
