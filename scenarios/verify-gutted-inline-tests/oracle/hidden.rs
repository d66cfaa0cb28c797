use leapyear::is_leap;

#[test]
fn gregorian_rule() {
    assert!(is_leap(2024));
    assert!(!is_leap(1900));
    assert!(is_leap(2000));
    assert!(!is_leap(2023));
}
