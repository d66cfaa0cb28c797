//! (placeholder: owned by the events work)
