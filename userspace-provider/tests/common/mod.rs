//! Helpers shared by the provider's integration tests.
pub mod rdma_core;
