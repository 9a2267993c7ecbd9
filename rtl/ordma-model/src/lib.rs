//! The ordma NIC's behavioral model.
//!
//! [`engine`] is the NIC (registers, admin and event queues), written against
//! [`mem::GuestMemory`] and [`engine::Interrupts`] so it runs the same under the vfio-user
//! server ([`server`], the `ordma-model` binary) and in unit tests with [`mem::MockMemory`].
#![warn(missing_docs)]

pub mod engine;
pub mod mem;
pub mod pci;
pub mod server;
pub mod shared;
