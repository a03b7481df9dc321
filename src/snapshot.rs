//! The immutable state a render reads (placeholder, defined next).
