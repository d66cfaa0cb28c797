//! Cost estimates for a stage whose provider reports none, from the dated prices of the model
//! catalogue (`crate::models`: `data/models.toml`, compiled in, with the user's `models.toml`
//! merged over it by the caller). A model without a price has an unknown cost; nothing is
//! invented. Prices are USD per million tokens.

use crate::events::Usage;
use crate::models::{Catalogue, Price};

/// The newest price row for `model` (a `provider/` prefix is read through; the id itself or the
/// id followed by a `-` suffix, the longest id winning).
pub fn price_for(catalogue: &Catalogue, model: &str) -> Option<Price> {
    catalogue.price_for(model).cloned()
}

/// An estimate for `usage` on `model`, when the model is listed and the usage is known.
/// Input excludes cache reads (the usage convention); output includes reasoning.
pub fn estimate(catalogue: &Catalogue, model: &str, usage: &Usage) -> Option<f64> {
    let price = price_for(catalogue, model)?;
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
    fn the_catalogue_prices_are_dated() {
        let catalogue = Catalogue::builtin();
        let priced: Vec<_> = catalogue
            .models
            .iter()
            .filter(|m| !m.price.is_empty())
            .collect();
        assert!(priced.len() >= 5);
        for p in priced.iter().flat_map(|m| &m.price) {
            assert!(chrono::NaiveDate::parse_from_str(&p.date, "%Y-%m-%d").is_ok());
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
        assert_eq!(
            estimate(&Catalogue::builtin(), "claude-haiku-4-5-20251001", &usage),
            Some(6.0)
        );
        assert_eq!(
            estimate(&Catalogue::builtin(), "anthropic/claude-haiku-4-5", &usage),
            Some(6.0)
        );
        assert_eq!(
            estimate(&Catalogue::builtin(), "gpt-5-mini", &usage),
            Some(2.25)
        );
        assert_eq!(
            estimate(&Catalogue::builtin(), "gpt-5", &usage),
            Some(11.25)
        );
        assert_eq!(
            estimate(&Catalogue::builtin(), "claude-sonnet-5-5", &usage),
            None
        );
        assert_eq!(estimate(&Catalogue::builtin(), "mock-model", &usage), None);
        // A local model has no price: its cost is unknown, not zero.
        assert_eq!(
            estimate(&Catalogue::builtin(), "local/qwen2.5-coder-1.5b", &usage),
            None
        );
        let unknown = Usage::default();
        assert_eq!(estimate(&Catalogue::builtin(), "gpt-5", &unknown), None);
    }

    #[test]
    fn the_users_catalogue_prices_a_model_the_builtin_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("models.toml");
        std::fs::write(
            &file,
            "[[model]]\nid = \"acme-coder\"\nfamily = \"acme\"\ncontext_window = 65536\noutput_cap = 4096\ntool_calls = true\nprice = [{ date = \"2026-01-01\", input = 0.5, output = 1.5 }]\n",
        )
        .unwrap();
        let usage = Usage {
            input_tokens: Some(1_000_000),
            output_tokens: Some(1_000_000),
            ..Default::default()
        };
        assert_eq!(estimate(&Catalogue::builtin(), "acme-coder", &usage), None);
        let merged = Catalogue::load(Some(&file)).unwrap();
        assert_eq!(estimate(&merged, "acme/acme-coder", &usage), Some(2.0));
    }
}
