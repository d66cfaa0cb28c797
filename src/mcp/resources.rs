//! The runs' results as MCP resources: `autocode://run/<id>/status` (where the run stands),
//! `autocode://run/<id>/diff` (its branch against the merge base with the workspace's `HEAD`)
//! and `autocode://run/<id>/report/<stage>` (a stage attempt's integrity-checked report). A run
//! is looked up in the workspaces the server knows (its own directory and every workspace a
//! tool call named); a report is read only from the run directory's own `stages/<attempt>/`,
//! for an attempt the run's state lists, and never through a link out of the run directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use serde_json::Value;

use super::Server;
use crate::ids::RunId;
use crate::run::isolation::Isolation;
use crate::run::state::RunState;

/// The URI scheme and authority every resource starts with.
pub const PREFIX: &str = "autocode://run/";
/// The most of a diff one read returns.
pub const DIFF_CAP: usize = 1 << 20;
/// The largest report file read.
const REPORT_CAP: u64 = 4 << 20;

/// What of a run a resource names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Status,
    Diff,
    /// The attempt's directory name (`004-builder-1`).
    Report(String),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ResourceError {
    #[error("{0:?} is not an autocode resource (autocode://run/<id>/status|diff|report/<stage>)")]
    NotOurs(String),
    #[error("{0:?} is not a run id")]
    BadRun(String),
    #[error("{0:?} is not a stage attempt's directory name")]
    BadStage(String),
    #[error("no run {0} in the workspaces this server knows (name its workspace in a tool call)")]
    NoRun(String),
    #[error("run {run} has no attempt {stage}")]
    NoStage { run: String, stage: String },
    #[error("attempt {stage} of run {run} has no report")]
    NoReport { run: String, stage: String },
    #[error("{0}")]
    Unreadable(String),
    #[error("run {0} worked in place: there is no branch to compare")]
    InPlace(String),
}

/// Parses `autocode://run/<id>/<part>`.
pub fn parse(uri: &str) -> Result<(RunId, Part), ResourceError> {
    let rest = uri
        .strip_prefix(PREFIX)
        .ok_or_else(|| ResourceError::NotOurs(uri.to_owned()))?;
    let mut parts = rest.splitn(3, '/');
    let (run, what, more) = (parts.next(), parts.next(), parts.next());
    let run = run.unwrap_or_default();
    let id = RunId::new(run).map_err(|_| ResourceError::BadRun(run.to_owned()))?;
    let part = match (what, more) {
        (Some("status"), None) => Part::Status,
        (Some("diff"), None) => Part::Diff,
        (Some("report"), Some(stage)) => {
            let plain = !stage.is_empty()
                && stage
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !plain {
                return Err(ResourceError::BadStage(stage.to_owned()));
            }
            Part::Report(stage.to_owned())
        }
        _ => return Err(ResourceError::NotOurs(uri.to_owned())),
    };
    Ok((id, part))
}

pub fn uri(run: &RunId, part: &Part) -> String {
    match part {
        Part::Status => format!("{PREFIX}{}/status", run.as_str()),
        Part::Diff => format!("{PREFIX}{}/diff", run.as_str()),
        Part::Report(stage) => format!("{PREFIX}{}/report/{stage}", run.as_str()),
    }
}

/// The resources of one run: its status, its diff when it has a branch, and the report of each
/// attempt that wrote one.
pub fn of_run(dir: &Path, state: &RunState) -> Vec<(String, String, &'static str)> {
    let id = &state.run_id;
    let mut out = vec![(
        uri(id, &Part::Status),
        format!("run {} status", id.as_str()),
        "application/json",
    )];
    if matches!(state.isolation, Isolation::Worktree { .. }) {
        out.push((
            uri(id, &Part::Diff),
            format!("run {} diff", id.as_str()),
            "text/x-diff",
        ));
    }
    for attempt in &state.attempts {
        if dir
            .join("stages")
            .join(&attempt.dir)
            .join("report.json")
            .is_file()
        {
            out.push((
                uri(id, &Part::Report(attempt.dir.clone())),
                format!("run {} report of {}", id.as_str(), attempt.dir),
                "application/json",
            ));
        }
    }
    out
}

/// The report of attempt `stage`, read from inside `dir` only and integrity-checked.
pub fn report(dir: &Path, state: &RunState, stage: &str) -> Result<Value, ResourceError> {
    let run = state.run_id.as_str().to_owned();
    let attempt = state
        .attempts
        .iter()
        .find(|a| a.dir == stage)
        .ok_or_else(|| ResourceError::NoStage {
            run: run.clone(),
            stage: stage.to_owned(),
        })?;
    let path = dir.join("stages").join(&attempt.dir).join("report.json");
    let inside = |p: &Path| -> Result<PathBuf, ResourceError> {
        std::fs::canonicalize(p).map_err(|_| ResourceError::NoReport {
            run: run.clone(),
            stage: stage.to_owned(),
        })
    };
    let (root, file) = (inside(dir)?, inside(&path)?);
    if !file.starts_with(&root) {
        return Err(ResourceError::Unreadable(format!(
            "{} leads out of the run directory",
            path.display()
        )));
    }
    let meta = std::fs::metadata(&file).map_err(|e| ResourceError::Unreadable(e.to_string()))?;
    if meta.len() > REPORT_CAP {
        return Err(ResourceError::Unreadable(format!(
            "{} is {} bytes, over the {REPORT_CAP}-byte cap",
            path.display(),
            meta.len()
        )));
    }
    crate::run::integrity::read_record::<Value>(&file)
        .map_err(|e| ResourceError::Unreadable(e.to_string()))
}

/// The diff of the run's branch against its merge base with the workspace's `HEAD`, cut at
/// [`DIFF_CAP`] bytes (a last line says so).
pub async fn diff(
    workspace: &Path,
    state: &RunState,
    env: &BTreeMap<String, String>,
) -> Result<String, ResourceError> {
    let Isolation::Worktree { branch, .. } = &state.isolation else {
        return Err(ResourceError::InPlace(state.run_id.as_str().to_owned()));
    };
    let git = |args: Vec<String>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::run::workspace::git(workspace, &args, env)
            .await
            .map_err(|e| ResourceError::Unreadable(e.to_string()))
    };
    let base = git(vec!["merge-base".into(), "HEAD".into(), branch.clone()]).await?;
    let base = base.trim().to_owned();
    let text = git(vec![
        "diff".into(),
        "--no-renames".into(),
        "--no-color".into(),
        base,
        branch.clone(),
    ])
    .await?;
    if text.len() <= DIFF_CAP {
        return Ok(text);
    }
    let mut cut = DIFF_CAP;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Ok(format!(
        "{}\n[autocode: the diff is {} bytes; cut at {DIFF_CAP}: see `git diff` of branch {branch}]\n",
        &text[..cut],
        text.len()
    ))
}

/// The URI templates of the resources.
pub fn templates() -> ListResourceTemplatesResult {
    let template = |part: &str, about: &str, mime: &str| {
        ResourceTemplate::new(format!("{PREFIX}{{run}}/{part}"), about).with_mime_type(mime)
    };
    ListResourceTemplatesResult::with_all_items(vec![
        template("status", "where a run stands", "application/json"),
        template("diff", "a run's branch as a diff", "text/x-diff"),
        template(
            "report/{stage}",
            "a stage attempt's checked report",
            "application/json",
        ),
    ])
}

impl Server {
    fn known_workspaces(&self) -> Vec<PathBuf> {
        self.workspaces
            .lock()
            .map(|known| known.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every run's resources in the workspaces this server knows.
    pub(super) async fn run_resources(&self) -> ListResourcesResult {
        let mut listed = Vec::new();
        for ws in self.known_workspaces() {
            for id in super::run_ids(&ws) {
                if let Ok((dir, state)) = self.state(&ws, &id).await {
                    for (uri, name, mime) in of_run(&dir, &state) {
                        listed.push(Resource::new(uri, name).with_mime_type(mime));
                    }
                }
            }
        }
        ListResourcesResult::with_all_items(listed)
    }

    /// The resource `uri` names.
    pub(super) async fn read_run_resource(
        &self,
        uri: &str,
    ) -> Result<ReadResourceResult, ResourceError> {
        let (id, part) = parse(uri)?;
        let ws = self
            .known_workspaces()
            .into_iter()
            .find(|ws| crate::run::runs_dir(ws).join(id.as_str()).is_dir())
            .ok_or_else(|| ResourceError::NoRun(id.as_str().to_owned()))?;
        let (dir, state) = self
            .state(&ws, &id)
            .await
            .map_err(ResourceError::Unreadable)?;
        let json = |value: &Value| {
            ResourceContents::text(serde_json::to_string_pretty(value).unwrap_or_default(), uri)
                .with_mime_type("application/json")
        };
        let contents = match part {
            Part::Status => json(&self.status_value(&dir, &state)),
            Part::Diff => ResourceContents::text(diff(&ws, &state, &self.env).await?, uri)
                .with_mime_type("text/x-diff"),
            Part::Report(stage) => json(&report(&dir, &state, &stage)?),
        };
        Ok(ReadResourceResult::new(vec![contents]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_nothing_else_parses() {
        let id = RunId::new("20260101-000000-abcdef").expect("id");
        for part in [
            Part::Status,
            Part::Diff,
            Part::Report("004-builder-1".into()),
        ] {
            assert_eq!(parse(&uri(&id, &part)), Ok((id.clone(), part)));
        }
        for bad in [
            "autocode://run/20260101-000000-abcdef/report/../../etc/passwd",
            "autocode://run/20260101-000000-abcdef/report/..",
            "autocode://run/20260101-000000-abcdef/report/",
            "autocode://run/20260101-000000-abcdef/report/a%2F..",
            "autocode://run/../diff",
            "autocode://run/20260101-000000-abcdef/state.json",
            "file:///etc/passwd",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
