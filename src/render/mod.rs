//! Pure render pipeline (placeholder, defined next).

pub mod layered;
