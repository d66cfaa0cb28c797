//! (placeholder: owned by the scripted model work)
