//! MachineOSConfig and MachineOSBuild: on-cluster image mode (layered pools).
//!
//! Placeholder: the layered-pools work (issue 5) defines these types from `shared/crds/`.
