//! The provider matrix: which CLI versions passed conformance (`docs/provider-matrix.json`), its
//! Markdown table in `docs/providers.md` (between markers), and the lookup `doctor` uses.
//!
//! Invariant: versions are compared by their `MAJOR.MINOR.PATCH` token, so `codex-cli 0.169.0`
//! (a version command's line) and `0.169.0` (the matrix) are the same version; anything the
//! matrix does not list is `untested`, never assumed to work.

use serde::{Deserialize, Serialize};

/// The matrix as shipped in this build (`doctor` reads it).
pub const EMBEDDED_MATRIX: &str = include_str!("../../docs/provider-matrix.json");

pub const TABLE_START: &str = "<!-- conformance-matrix:start -->";
pub const TABLE_END: &str = "<!-- conformance-matrix:end -->";
pub const MATRIX_FORMAT: u64 = 1;

/// A probe's verdict as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatrixResult {
    Pass,
    Fail,
}

impl MatrixResult {
    pub fn as_str(self) -> &'static str {
        match self {
            MatrixResult::Pass => "pass",
            MatrixResult::Fail => "fail",
        }
    }
}

/// One qualified (engine, version, transport).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixEntry {
    /// The provider name (`codex`, `claude`, `opencode`, or a registered tool).
    pub engine: String,
    pub version: String,
    /// The output mode (`codex_events`, `opencode_events`, `report_file`...).
    pub transport: String,
    pub result: MatrixResult,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// The autocode commit the probe ran on.
    pub commit: String,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    pub format_version: u64,
    pub entries: Vec<MatrixEntry>,
}

#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    #[error("the provider matrix is not valid JSON of format {MATRIX_FORMAT}: {0}")]
    Parse(#[from] serde_json::Error),
    #[error("the provider matrix has format {found}, expected {MATRIX_FORMAT}")]
    Format { found: u64 },
    #[error("{TABLE_START} … {TABLE_END} markers not found (in this order) in the document")]
    Markers,
}

impl Matrix {
    pub fn parse(text: &str) -> Result<Matrix, MatrixError> {
        let matrix: Matrix = serde_json::from_str(text)?;
        if matrix.format_version != MATRIX_FORMAT {
            return Err(MatrixError::Format {
                found: matrix.format_version,
            });
        }
        Ok(matrix)
    }

    /// Adds `entry`, replacing the one with the same engine, version and transport.
    pub fn record(&mut self, entry: MatrixEntry) {
        let same = |e: &MatrixEntry| {
            e.engine == entry.engine
                && e.transport == entry.transport
                && semver(&e.version) == semver(&entry.version)
        };
        self.entries.retain(|e| !same(e));
        self.entries.push(entry);
        self.entries.sort_by(|a, b| {
            (a.engine.as_str(), a.version.as_str()).cmp(&(b.engine.as_str(), b.version.as_str()))
        });
    }

    /// The entry for `engine` at `version_line` (any spelling holding the same version).
    pub fn lookup(&self, engine: &str, version_line: &str) -> Option<&MatrixEntry> {
        let wanted = semver(version_line)?;
        self.entries
            .iter()
            .rev()
            .find(|e| e.engine == engine && semver(&e.version) == Some(wanted))
    }

    /// The Markdown table (engine, version, transport, result, date, commit, note).
    pub fn render_table(&self) -> String {
        let mut out = String::from(
            "| engine | version | transport | result | date | commit | note |\n|---|---|---|---|---|---|---|\n",
        );
        for e in &self.entries {
            let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                cell(&e.engine),
                cell(&e.version),
                cell(&e.transport),
                e.result.as_str(),
                cell(&e.date),
                cell(e.commit.get(..12).unwrap_or(&e.commit)),
                cell(&e.note)
            ));
        }
        out
    }
}

/// `document` with the table between the markers replaced by `table`.
pub fn replace_table(document: &str, table: &str) -> Result<String, MatrixError> {
    let start = document.find(TABLE_START).ok_or(MatrixError::Markers)?;
    let body_start = start + TABLE_START.len();
    let end = document
        .get(body_start..)
        .and_then(|rest| rest.find(TABLE_END))
        .map(|i| body_start + i)
        .ok_or(MatrixError::Markers)?;
    let head = document.get(..body_start).ok_or(MatrixError::Markers)?;
    let tail = document.get(end..).ok_or(MatrixError::Markers)?;
    Ok(format!("{head}\n{table}{tail}"))
}

/// The first `MAJOR.MINOR.PATCH` token of a version line.
pub fn semver(line: &str) -> Option<(u64, u64, u64)> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find_map(|token| {
            let mut parts = token.split('.');
            let major = parts.next()?.parse().ok()?;
            let minor = parts.next()?.parse().ok()?;
            let patch = parts.next()?.parse().ok()?;
            Some((major, minor, patch))
        })
}

/// What `doctor` says about a CLI version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ConformanceStatus {
    Pass { date: String, commit: String },
    Fail { date: String, note: String },
    Untested,
}

impl ConformanceStatus {
    /// One line for `doctor`.
    pub fn line(&self) -> String {
        match self {
            ConformanceStatus::Pass { date, commit } => format!(
                "pass (qualified {date} on {})",
                commit.get(..12).unwrap_or(commit)
            ),
            ConformanceStatus::Fail { date, note } => format!("FAIL ({date}: {note})"),
            ConformanceStatus::Untested => {
                "untested (this version is not in the provider matrix; run `autocode conformance`)"
                    .into()
            }
        }
    }
}

/// The status of `engine` at `version_line` in the embedded matrix.
pub fn embedded_status(engine: &str, version_line: Option<&str>) -> ConformanceStatus {
    let Ok(matrix) = Matrix::parse(EMBEDDED_MATRIX) else {
        return ConformanceStatus::Untested;
    };
    match version_line.and_then(|v| matrix.lookup(engine, v)) {
        Some(e) if e.result == MatrixResult::Pass => ConformanceStatus::Pass {
            date: e.date.clone(),
            commit: e.commit.clone(),
        },
        Some(e) => ConformanceStatus::Fail {
            date: e.date.clone(),
            note: e.note.clone(),
        },
        None => ConformanceStatus::Untested,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(engine: &str, version: &str) -> MatrixEntry {
        MatrixEntry {
            engine: engine.into(),
            version: version.into(),
            transport: "codex_events".into(),
            result: MatrixResult::Pass,
            date: "2026-11-29".into(),
            commit: "0123456789abcdef".into(),
            note: "a | b".into(),
        }
    }

    #[test]
    fn versions_compare_by_their_number() {
        assert_eq!(semver("codex-cli 0.169.0"), Some((0, 169, 0)));
        assert_eq!(semver("2.1.328 (Claude Code)"), Some((2, 1, 328)));
        assert_eq!(semver("no version"), None);
        let mut m = Matrix {
            format_version: 1,
            entries: vec![],
        };
        m.record(entry("codex", "0.169.0"));
        m.record(entry("codex", "codex-cli 0.169.0"));
        assert_eq!(m.entries.len(), 1);
        assert!(m.lookup("codex", "codex-cli 0.169.0").is_some());
        assert!(m.lookup("codex", "0.170.0").is_none());
        assert!(m.lookup("claude", "0.169.0").is_none());
    }

    #[test]
    fn the_table_replaces_only_what_is_between_the_markers() {
        let m = Matrix {
            format_version: 1,
            entries: vec![entry("codex", "0.169.0")],
        };
        let doc = format!("# T\n{TABLE_START}\nold\n{TABLE_END}\nafter\n");
        let out = replace_table(&doc, &m.render_table()).unwrap();
        assert!(out.starts_with(&format!("# T\n{TABLE_START}\n| engine |")));
        assert!(out.contains(
            "| codex | 0.169.0 | codex_events | pass | 2026-11-29 | 0123456789ab | a \\| b |\n"
        ));
        assert!(out.ends_with(&format!("{TABLE_END}\nafter\n")));
        assert!(!out.contains("old"));
        assert_eq!(replace_table(&out, &m.render_table()).unwrap(), out);
        assert!(replace_table("no markers", "x").is_err());
    }

    #[test]
    fn the_embedded_matrix_parses_and_unlisted_versions_are_untested() {
        let m = Matrix::parse(EMBEDDED_MATRIX).unwrap();
        assert_eq!(
            embedded_status("codex", Some("codex-cli 99.0.0")),
            ConformanceStatus::Untested
        );
        assert_eq!(embedded_status("codex", None), ConformanceStatus::Untested);
        for e in &m.entries {
            assert!(matches!(
                embedded_status(&e.engine, Some(&e.version)),
                ConformanceStatus::Pass { .. } | ConformanceStatus::Fail { .. }
            ));
        }
    }

    #[test]
    fn malformed_matrices_are_typed_errors() {
        assert!(matches!(
            Matrix::parse("{\"format_version\": 2, \"entries\": []}"),
            Err(MatrixError::Format { found: 2 })
        ));
        assert!(Matrix::parse("[").is_err());
    }
}
