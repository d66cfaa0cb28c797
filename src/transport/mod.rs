//! (placeholder: owned by the transport work)
