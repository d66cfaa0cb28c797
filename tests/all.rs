//! The one integration test binary: each module under `tests/it/` covers one area.

mod it;
