//! The witness tree's own file contents (`run::witness`, the replay `final_with_base_code`):
//! the result with its code changes taken back, where a code file's text is neither the base's
//! nor the result's (the result's tests beside the base code, the names the work adds standing
//! in).

use std::collections::BTreeMap;

use crate::gittree::{GitStore, GitTreeError, TreeId};

/// The code files of the witness tree (the result with its code changes taken back, `files`)
/// whose text is not the base file's: a file holding code and tests keeps the result's tests over
/// its base code (Rust's `#[cfg(test)]` items, Python's doctests), and each name the result
/// defines at a file's top level that its base version lacks stands in there, raising when called
/// (`verify::standins`).
pub(super) async fn witness_contents(
    store: &GitStore,
    base: &TreeId,
    result: &TreeId,
    files: &[String],
) -> Result<Vec<(String, u32, Vec<u8>)>, GitTreeError> {
    // Source files only, read whole (a file left out of a side is not there).
    let sources: Vec<String> = files
        .iter()
        .filter(|rel| {
            crate::verify::inline::may_hold_tests(rel) || crate::verify::standins::may_stand_in(rel)
        })
        .cloned()
        .collect();
    if sources.is_empty() {
        return Ok(Vec::new());
    }
    let text = |found: Vec<(String, u32, Vec<u8>)>| -> BTreeMap<String, (u32, Vec<u8>)> {
        found
            .into_iter()
            .map(|(rel, mode, data)| (rel, (mode, data)))
            .collect()
    };
    let base_files = text(store.files_at(base, &sources, u64::MAX).await?);
    let result_files = text(store.files_at(result, &sources, u64::MAX).await?);
    let mut out = Vec::new();
    fn utf8((mode, data): &(u32, Vec<u8>)) -> Option<(u32, &str)> {
        Some((*mode, std::str::from_utf8(data).ok()?))
    }
    for rel in &sources {
        let Some((result_mode, result_text)) = result_files.get(rel).and_then(utf8) else {
            continue;
        };
        let base_file = match base_files.get(rel) {
            Some(file) => match utf8(file) {
                Some(file) => Some(file),
                // Not text: it comes back as it is.
                None => continue,
            },
            None => None,
        };
        let spliced = base_file.and_then(|(_, base_text)| {
            crate::verify::inline::base_code_with_result_tests(rel, base_text, result_text)
        });
        let base_text = base_file.map(|(_, text)| text);
        let shown = spliced.as_deref().or(base_text);
        let text =
            crate::verify::standins::with_stand_ins(rel, base_text, shown, result_text).or(spliced);
        if let Some(text) = text {
            let mode = base_file.map_or(result_mode, |(mode, _)| mode);
            out.push((rel.clone(), mode, text.into_bytes()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::workspace::git_test_env as env;
    use std::fs;

    #[tokio::test]
    async fn the_witness_files_hold_the_base_code_the_result_tests_and_the_stand_ins() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        crate::run::workspace::git_init_for_tests(&ws).await;
        fs::write(ws.join("m.py"), "def shout(s):\n    return s.upper()\n").unwrap();
        fs::write(ws.join("data.bin"), [0u8, 159, 146, 150]).unwrap();
        fs::write(ws.join("notes.txt"), "base\n").unwrap();
        let store = GitStore::open(&dir.path().join("git"), &ws, &env())
            .await
            .unwrap()
            .unwrap();
        let index = dir.path().join("wt.index");
        let base = store.write_tree(&ws, &index).await.unwrap();
        fs::write(
            ws.join("m.py"),
            "def shout(s):\n    return s.upper()\n\n\ndef title(s):\n    \"\"\"\n    >>> title('a')\n    'A'\n    \"\"\"\n    return s.title()\n",
        )
        .unwrap();
        fs::write(ws.join("n.py"), "def slug(s):\n    return s\n").unwrap();
        fs::write(ws.join("data.bin"), [1u8, 159]).unwrap();
        fs::write(ws.join("notes.txt"), "now\n").unwrap();
        let result = store.write_tree(&ws, &index).await.unwrap();
        let files: Vec<String> = ["m.py", "n.py", "data.bin", "notes.txt", "gone.py"]
            .map(str::to_owned)
            .to_vec();
        let contents = witness_contents(&store, &base, &result, &files)
            .await
            .unwrap();
        let by_path: BTreeMap<&str, &str> = contents
            .iter()
            .map(|(rel, _, text)| (rel.as_str(), std::str::from_utf8(text).unwrap()))
            .collect();
        assert_eq!(
            by_path.keys().copied().collect::<Vec<_>>(),
            ["m.py", "n.py"]
        );
        let m = by_path["m.py"];
        assert!(m.starts_with("def shout(s):\n    return s.upper()"), "{m}");
        assert!(
            m.contains("__test__") && m.contains(">>> title('a')"),
            "{m}"
        );
        assert!(
            m.contains("def title(*args, **kwargs):") && !m.contains("s.title()"),
            "{m}"
        );
        assert!(
            by_path["n.py"].contains("def slug(*args, **kwargs):"),
            "{}",
            by_path["n.py"]
        );
    }
}
