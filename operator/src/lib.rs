// SPDX-License-Identifier: Apache-2.0
//! keelson-operator: its resource store on etcd ([`store`], laid out by [`key`]), the etcd it
//! uses (a private one or an existing cluster) and the leader election of its replicas
//! ([`serve`]), its command line ([`cli`]), network boot ([`pxe`]) and tenant networks
//! ([`networks`]).

pub mod cli;
pub mod command;
pub mod ctl;
pub mod key;
pub mod kinds;
pub mod metrics;
pub mod names;
pub mod networks;
pub mod push;
pub mod pxe;
pub mod reconcile;
pub mod secrets;
pub mod serve;
pub mod states;
pub mod store;
pub mod talos;
pub mod watch;
