//! The run's result: the diff of its branch (`autocode/<run>`) against the merge base with the
//! workspace's current branch, listed file by file (`git diff --numstat`, binary files marked)
//! and loaded one file at a time on demand, capped at [`FILE_DIFF_CAP`] bytes so a lockfile
//! never stalls the page; and the commits autocode made on the branch. git runs through
//! `run::workspace::git` (the boundary, hooks and filters off).

use axum::Json;
use axum::extract::{Path as UrlPath, Query, State};
use serde::Serialize;
use serde_json::{Value, json};

use super::AppState;
use super::view::{ViewError, found, workspace};
use crate::run::isolation::Isolation;
use crate::run::workspace::git;

/// The most of one file's diff sent to the page.
pub const FILE_DIFF_CAP: usize = 256 << 10;
/// The most files and commits listed.
const LIST_CAP: usize = 2000;

#[derive(Debug, Serialize)]
struct ChangedFile {
    path: String,
    /// `None` for a binary file.
    added: Option<u64>,
    deleted: Option<u64>,
    binary: bool,
}

/// `added\tdeleted\tpath\0` records of `git diff --numstat -z --no-renames`.
fn parse_numstat(out: &str) -> Vec<ChangedFile> {
    out.split('\0')
        .filter(|r| !r.is_empty())
        .filter_map(|record| {
            let mut parts = record.splitn(3, '\t');
            let (added, deleted, path) = (parts.next()?, parts.next()?, parts.next()?);
            let binary = added == "-" && deleted == "-";
            Some(ChangedFile {
                path: path.trim_start_matches('\n').to_owned(),
                added: added.parse().ok(),
                deleted: deleted.parse().ok(),
                binary,
            })
        })
        .take(LIST_CAP)
        .collect()
}

/// The files `branch` changes since `base` (at most `LIST_CAP`).
async fn changed_files(
    state: &AppState,
    workspace: &std::path::Path,
    base: &str,
    branch: &str,
) -> Result<Vec<ChangedFile>, ViewError> {
    let numstat = git(
        workspace,
        &["diff", "--numstat", "-z", "--no-renames", base, branch],
        &state.env,
    )
    .await
    .map_err(|e| ViewError::Internal(e.to_string()))?;
    Ok(parse_numstat(&numstat))
}

/// The run's branch and its merge base with the workspace's `HEAD`.
async fn range(
    state: &AppState,
    ws: usize,
    run_id: &str,
) -> Result<(std::path::PathBuf, String, String), ViewError> {
    let found = found(state, ws, run_id).await?;
    let Isolation::Worktree { branch, .. } = &found.state.isolation else {
        return Err(ViewError::NotFound(format!(
            "run {run_id} worked in place: there is no branch to compare"
        )));
    };
    let workspace = workspace(state, ws)?.to_owned();
    let base = git(&workspace, &["merge-base", "HEAD", branch], &state.env)
        .await
        .map_err(|e| ViewError::NotFound(e.to_string()))?;
    Ok((workspace, branch.clone(), base.trim().to_owned()))
}

/// `GET …/diff`: the files the branch changes and its commits.
pub async fn files(
    State(state): State<AppState>,
    UrlPath((ws, run_id)): UrlPath<(usize, String)>,
) -> Result<Json<Value>, ViewError> {
    let (workspace, branch, base) = range(&state, ws, &run_id).await?;
    let files = changed_files(&state, &workspace, &base, &branch).await?;
    let log = git(
        &workspace,
        &[
            "log",
            "--format=%H%x09%aI%x09%s",
            &format!("--max-count={LIST_CAP}"),
            &format!("{base}..{branch}"),
        ],
        &state.env,
    )
    .await
    .map_err(|e| ViewError::Internal(e.to_string()))?;
    let commits: Vec<Value> = log
        .lines()
        .filter_map(|l| {
            let mut p = l.splitn(3, '\t');
            Some(json!({"commit": p.next()?, "at": p.next()?, "subject": p.next()?}))
        })
        .collect();
    Ok(Json(json!({
        "branch": branch,
        "base": base,
        "files": files,
        "commits": commits,
    })))
}

#[derive(serde::Deserialize)]
pub struct FileQuery {
    path: String,
}

/// `GET …/diff/file?path=P`: one changed file's diff (only a path the branch changes).
pub async fn file(
    State(state): State<AppState>,
    UrlPath((ws, run_id)): UrlPath<(usize, String)>,
    Query(query): Query<FileQuery>,
) -> Result<Json<Value>, ViewError> {
    let (workspace, branch, base) = range(&state, ws, &run_id).await?;
    let Some(changed) = changed_files(&state, &workspace, &base, &branch)
        .await?
        .into_iter()
        .find(|f| f.path == query.path)
    else {
        return Err(ViewError::NotFound(format!(
            "the run's branch does not change {:?}",
            query.path
        )));
    };
    if changed.binary {
        return Ok(Json(
            json!({ "path": changed.path, "binary": true, "text": null, "truncated": false }),
        ));
    }
    let text = git(
        &workspace,
        &[
            "diff",
            "--no-renames",
            "--no-color",
            &base,
            &branch,
            "--",
            &format!(":(literal){}", changed.path),
        ],
        &state.env,
    )
    .await
    .map_err(|e| ViewError::Internal(e.to_string()))?;
    let truncated = text.len() > FILE_DIFF_CAP;
    let mut cut = FILE_DIFF_CAP.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Ok(Json(json!({
        "path": changed.path,
        "binary": false,
        "text": &text[..cut],
        "truncated": truncated,
        "bytes": text.len(),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numstat_marks_binary_files() {
        let files = parse_numstat("3\t1\tsrc/a.rs\0-\t-\timg.png\0");
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].added, Some(3));
        assert!(!files[0].binary);
        assert!(files[1].binary);
        assert_eq!(files[1].path, "img.png");
    }
}
