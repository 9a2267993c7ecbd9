//! The ordma NIC's behavioral model.
//!
//! [`engine`] is the NIC (registers, admin and event queues, object tables), written against
//! [`mem::Dma`] and [`engine::Interrupts`] so it runs the same under the vfio-user server
//! ([`server`], the `ordma-model` binary) and in unit tests with vm-memory's anonymous
//! guest memory. [`device`] shares one NIC between the model's threads: the vfio-user loop
//! and the [`control`] channel; [`wire`] carries frames between the model processes of a run.
#![warn(missing_docs)]

pub mod control;
pub mod device;
pub mod engine;
pub mod mem;
pub mod pcap;
pub mod pci;
pub mod server;
pub mod wire;
