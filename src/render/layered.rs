//! Layered (image-mode) pools: which OS image a booting node gets, and why.
//!
//! Placeholder: the layered-pools work (issue 5) implements the pure decision here.
