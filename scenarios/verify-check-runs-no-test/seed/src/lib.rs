//! Word statistics.

/// The number of lines of `text`.
pub fn line_count(text: &str) -> usize {
    text.lines().count()
}
