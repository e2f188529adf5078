// SPDX-License-Identifier: Apache-2.0
//! Why the node loop could not start or went on no longer. Each message is the underlying
//! error's own.

use crate::api::server::ServerError;
use crate::reactor::ReactorError;

/// Why [`super::run`] ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// epoll, the signalfd or the timerfd.
    #[error(transparent)]
    Reactor(#[from] ReactorError),
    /// The kernel host (rtnetlink sockets) could not be opened.
    #[error(transparent)]
    Host(#[from] net::host::HostError),
    /// The netlink watcher could not be opened.
    #[error(transparent)]
    Netlink(#[from] net::netlink::NlError),
    /// The API socket could not be served (`run`; PID 1 runs on without it).
    #[error(transparent)]
    Api(#[from] ServerError),
    /// A controller could not be registered.
    #[error(transparent)]
    Runtime(#[from] runtime::RuntimeError),
    /// An input could not be written.
    #[error(transparent)]
    Store(#[from] runtime::StoreError),
}
