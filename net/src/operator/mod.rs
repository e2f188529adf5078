//! Operators: the protocol clients that turn what they learn into operator-layer specs
//! (TB §6). The engines (`crate::dhcp4`) are sans-IO; this module owns their sockets and
//! drives them from the event loop (ARCHITECTURE §5).

pub mod dhcp4_socket;
pub mod dhcp6_socket;
pub mod engine;
pub mod frame;
pub mod leases;
pub mod manager;
pub mod plan;

pub use manager::Operators;
