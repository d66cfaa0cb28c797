/// The average of two integers, rounded down.
///
/// ```
/// assert_eq!(calc::avg(2, 4), 3);
/// assert_eq!(calc::avg(2, 5), 3);
/// ```
pub fn avg(a: i64, b: i64) -> i64 {
    (a + b + 1) / 2
}
