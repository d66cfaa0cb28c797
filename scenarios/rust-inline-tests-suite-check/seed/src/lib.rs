/// Feet to meters.
pub fn feet_to_meters(f: f64) -> f64 {
    f * 0.3048
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_feet() {
        assert!((feet_to_meters(10.0) - 3.048).abs() < 1e-9);
    }
}
