//! The dated price table (`providers/prices.toml`, compiled in): a cost estimate for a stage
//! whose provider reports none. A model that is not listed has an unknown cost; nothing is
//! invented. Prices are USD per million tokens.

use serde::Deserialize;

use crate::events::Usage;

const PRICES_TOML: &str = include_str!("../providers/prices.toml");

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub model: String,
    pub date: String,
    pub input: f64,
    #[serde(default)]
    pub cache_write: Option<f64>,
    #[serde(default)]
    pub cache_read: Option<f64>,
    pub output: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceTable {
    price: Vec<Price>,
}

/// The embedded table (checked by a test, so a parse failure cannot ship).
pub fn table() -> Vec<Price> {
    toml::from_str::<PriceTable>(PRICES_TOML)
        .map(|t| t.price)
        .unwrap_or_default()
}

/// The newest price row for `model` (a `provider/` prefix is read through).
pub fn price_for(model: &str) -> Option<Price> {
    let bare = model.rsplit('/').next().unwrap_or(model);
    table()
        .into_iter()
        .filter(|p| bare == p.model || bare.starts_with(&format!("{}-", p.model)))
        .max_by(|a, b| a.model.len().cmp(&b.model.len()).then(a.date.cmp(&b.date)))
}

/// An estimate for `usage` on `model`, when the model is listed and the usage is known.
/// Input excludes cache reads (the usage convention); output includes reasoning.
pub fn estimate(model: &str, usage: &Usage) -> Option<f64> {
    let price = price_for(model)?;
    let input = usage.input_tokens? as f64;
    let output = usage.output_tokens? as f64;
    let cache_read = usage.cache_read_tokens.unwrap_or(0) as f64;
    let cache_write = usage.cache_write_tokens.unwrap_or(0) as f64;
    let per = 1_000_000.0;
    Some(
        input * price.input / per
            + output * price.output / per
            + cache_read * price.cache_read.unwrap_or(price.input) / per
            + cache_write * price.cache_write.unwrap_or(price.input) / per,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_parses_and_is_dated() {
        let table: PriceTable = toml::from_str(PRICES_TOML).unwrap();
        assert!(!table.price.is_empty());
        for p in &table.price {
            assert!(
                chrono::NaiveDate::parse_from_str(&p.date, "%Y-%m-%d").is_ok(),
                "{}",
                p.model
            );
        }
    }

    #[test]
    fn listed_models_are_priced_and_others_stay_unknown() {
        let usage = Usage {
            input_tokens: Some(1_000_000),
            output_tokens: Some(1_000_000),
            cache_read_tokens: Some(0),
            ..Default::default()
        };
        assert_eq!(estimate("claude-haiku-4-5-20251001", &usage), Some(6.0));
        assert_eq!(estimate("anthropic/claude-haiku-4-5", &usage), Some(6.0));
        assert_eq!(estimate("gpt-5-mini", &usage), Some(2.25));
        assert_eq!(estimate("gpt-5", &usage), Some(11.25));
        assert_eq!(estimate("claude-sonnet-5-5", &usage), None);
        assert_eq!(estimate("mock-model", &usage), None);
        let unknown = Usage::default();
        assert_eq!(estimate("gpt-5", &unknown), None);
    }
}
