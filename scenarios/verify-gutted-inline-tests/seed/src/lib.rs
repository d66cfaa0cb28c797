//! Calendar helpers.

/// Whether `year` is a leap year in the Gregorian calendar.
pub fn is_leap(year: u32) -> bool {
    todo!("is_leap({year})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisible_by_four() {
        assert!(is_leap(2024));
    }

    #[test]
    fn centuries_are_not() {
        assert!(!is_leap(1900));
    }

    #[test]
    fn every_fourth_century_is() {
        assert!(is_leap(2000));
    }
}
