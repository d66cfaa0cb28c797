//! (placeholder: owned by the provider registry work)
