//! The scorecards page: `autocode scenario stats` of each result folder the dashboard was given
//! (`--scorecard DIR`, `scenario::stats::collect` then `merge`, as the CLI computes them) and
//! the conformance matrix this build ships (`conformance::matrix::EMBEDDED_MATRIX`).

use std::path::PathBuf;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::AppState;
use crate::conformance::matrix::{EMBEDDED_MATRIX, Matrix};
use crate::scenario::stats;

/// One result folder's scorecard, or why there is none.
fn scorecard(dir: PathBuf) -> Value {
    match stats::collect(std::slice::from_ref(&dir)) {
        Ok(found) => {
            let results: Vec<_> = found.into_iter().map(|(_, r)| r).collect();
            json!({ "dir": dir, "stats": stats::merge(&results) })
        }
        Err(e) => json!({ "dir": dir, "error": e.to_string() }),
    }
}

/// `GET /api/scorecards`.
pub async fn scorecards(State(state): State<AppState>) -> Json<Value> {
    let dirs = state.scorecards.clone();
    let cards = tokio::task::spawn_blocking(move || dirs.into_iter().map(scorecard).collect())
        .await
        .unwrap_or_else(|e| vec![json!({ "error": e.to_string() })]);
    let matrix = match Matrix::parse(EMBEDDED_MATRIX) {
        Ok(m) => json!({ "entries": m.entries }),
        Err(e) => json!({ "error": e.to_string() }),
    };
    Json(json!({ "scorecards": cards, "matrix": matrix }))
}
