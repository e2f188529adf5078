// SPDX-License-Identifier: Apache-2.0
//! The gRPC dispatch: a table of methods by HTTP/2 `:path`, each with its request size limit
//! and its handler, and the context a handler runs in.
//!
//! # Adding a service
//!
//! 1. Write its messages in the `talos-api` crate (prost derives, Talos's field numbers) and
//!    the roles of its methods in `talos_api::authz` (a method missing there is admin-only; a
//!    method maintenance mode serves is listed in `talos_api::authz::in_maintenance`).
//! 2. In a module of this directory, write one handler per method,
//!    `fn(&mut Call<'_>, &[u8]) -> Result<Reply, Status>`: decode the request with
//!    [`decode`], do the work with what [`Call`] gives (the store, the node's effects, the
//!    caller's access), and answer with [`Reply::unary`] or, for a server stream,
//!    [`Reply::Stream`] with a [`Feed`].
//! 3. List the methods in a `pub const METHODS: &[Method]` and add that slice to
//!    [`SERVICES`].
//!
//! Access is checked here before a handler runs (the caller's role against `talos_api::authz`,
//! maintenance mode's subset), so a handler only refines it (COSI's per-type filter). A
//! handler never blocks: it runs on the node's event loop.

use std::time::Instant;

use grpc::{code, Status};
use net::resource::{HostnameStatus, Kind, Namespace, HOSTNAME_ID};
use runtime::{Change, Runtime};
use talos_api::authz::{self, Maintenance, Role};

use super::events::EventLog;
use crate::api::cosi::watch::History;
use crate::api::transport::Access;
use crate::machine::Machine;
use crate::verbs::Effects;

/// A method's handler: the request message's bytes in, a reply or a status out.
pub type Handler = fn(&mut Call<'_>, &[u8]) -> Result<Reply, Status>;

/// One method of a service.
#[derive(Debug, Clone, Copy)]
pub struct Method {
    /// `/package.Service/Method`.
    pub path: &'static str,
    /// Largest request message taken; a longer one is `ResourceExhausted`.
    pub max_request: usize,
    pub handler: Handler,
}

/// The request limit of calls whose request is a few fields.
pub const SMALL_REQUEST: usize = 64 << 10;
/// The request limit of an apply (the request holds the config as text).
pub const APPLY_REQUEST: usize = 1 << 20;

/// What a call runs with: who called, and the node.
pub struct Call<'a> {
    /// How the client connected (the local socket is admin; TLS: its certificate's role, or
    /// maintenance).
    pub access: Access,
    pub rt: &'a mut Runtime,
    pub machine: Machine,
    /// What calls leave for the server and the loop: a reboot, a config on trial.
    pub effects: &'a mut Effects,
    /// The node's recent events (for `Events`).
    pub events: &'a EventLog,
    /// The recent changes of every kind (for COSI's watches).
    pub cosi: &'a History,
    /// Rung by a worker thread that has something for a feed (calls forwarded to other
    /// nodes); `None` where nothing waits on a bell (tests).
    pub bell: Option<&'a evloop::Ringer>,
    pub now: Instant,
}

impl Call<'_> {
    /// The node's hostname, for every reply's `metadata.hostname`.
    pub fn hostname(&self) -> String {
        hostname(self.rt)
    }

    /// The node is in maintenance mode for this caller.
    pub fn maintenance(&self) -> bool {
        self.access == Access::Maintenance
    }
}

/// The node's hostname, or empty.
pub fn hostname(rt: &Runtime) -> String {
    rt.store()
        .get_spec::<HostnameStatus>(Namespace::Network, HOSTNAME_ID)
        .map(|h| h.hostname.clone())
        .unwrap_or_default()
}

/// What the kernel command line says of a network boot (`BOOTIF=`, `keelson.image=`), if it
/// says anything: keelson-operator matches the MAC to the machine it booted.
pub fn boot_source(rt: &Runtime) -> Option<net::resource::BootSource> {
    let c = rt.store().get_spec::<net::cmdline::CmdlineNetwork>(
        Namespace::Runtime,
        net::controllers::CMDLINE_ID,
    )?;
    if c.boot_mac.is_none() && c.image.is_none() {
        return None;
    }
    Some(net::resource::BootSource {
        mac: c.boot_mac.clone().unwrap_or_default(),
        image: c.image.clone().unwrap_or_default(),
    })
}

/// What a handler answers.
pub enum Reply {
    /// One message (unary call).
    Unary(Vec<u8>),
    /// A server stream: the feed gives its messages as the client takes them.
    Stream(Box<dyn Feed>),
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unary(m) => write!(f, "Unary({} bytes)", m.len()),
            Self::Stream(_) => f.write_str("Stream"),
        }
    }
}

impl Reply {
    /// A unary reply of `msg`.
    pub fn unary<M: talos_api::Message>(msg: &M) -> Result<Self, Status> {
        Ok(Self::Unary(msg.encode_to_vec()))
    }
}

/// Decode a request; a message that does not decode is `InvalidArgument`.
pub fn decode<M: talos_api::Message + Default>(bytes: &[u8]) -> Result<M, Status> {
    M::decode(bytes).map_err(|e| Status::new(code::INVALID_ARGUMENT, format!("bad request: {e}")))
}

/// What a feed sees when asked for more.
#[allow(dead_code)] // `rt` and `changes` are for feeds that follow the store (COSI's Watch).
pub struct FeedCtx<'a> {
    pub rt: &'a Runtime,
    /// Store changes since the last time (only those of the kinds the server journals).
    pub changes: &'a [Change],
    pub events: &'a EventLog,
    /// The recent changes of every kind (for COSI's watches).
    pub cosi: &'a History,
    pub now: Instant,
}

/// Whether a stream goes on.
#[derive(Debug)]
pub enum Flow {
    /// More may come.
    More,
    /// The stream ends with this status.
    Done(Status),
}

/// The source of a server stream's messages. The server asks it for more only while the
/// client keeps up (its HTTP/2 window takes what was sent), and drops the stream of a client
/// that stops reading; a feed never buffers for a slow client beyond its own bound.
pub trait Feed {
    /// Append the next messages, about `room` bytes at most, to `out`.
    fn next(&mut self, ctx: &FeedCtx<'_>, room: usize, out: &mut Vec<Vec<u8>>) -> Flow;
    /// When to ask again even if nothing happens in the store (a file it follows).
    fn poll_at(&self) -> Option<Instant> {
        None
    }
    /// The store kinds whose changes it needs in [`FeedCtx::changes`] (the runtime journals
    /// only the kinds someone reads).
    fn kinds(&self) -> Vec<Kind> {
        Vec::new()
    }
    /// It has messages to give now, without waiting for the store or the clock (the rest of
    /// a list, a watch's backlog): the server asks again as soon as the client has room.
    fn ready(&self) -> bool {
        false
    }
}

/// May the caller call `path`? Err: the status to answer with.
pub fn authorize(access: Access, path: &str) -> Result<(), Status> {
    let role = match access {
        Access::Admin => Role::Admin,
        Access::Operator => Role::Operator,
        Access::Reader => Role::Reader,
        Access::Maintenance => {
            return match authz::in_maintenance(path) {
                Maintenance::Served => Ok(()),
                Maintenance::Denied => {
                    Err(Status::new(code::PERMISSION_DENIED, "not allowed in maintenance mode"))
                }
                Maintenance::Absent => Err(Status::new(
                    code::UNIMPLEMENTED,
                    "API is not implemented in maintenance mode",
                )),
            };
        }
        Access::Trustd => {
            return if path == talos_api::security::CERTIFICATE {
                Ok(())
            } else {
                Err(Status::new(code::UNIMPLEMENTED, "trustd serves only Certificate"))
            };
        }
        Access::Pending => {
            return Err(Status::new(code::UNAUTHENTICATED, "not authenticated"));
        }
        Access::Revoked => {
            return Err(Status::new(
                code::PERMISSION_DENIED,
                "this connection was made under a TLS trust the node no longer has: reconnect",
            ));
        }
    };
    if authz::allows(role, path) {
        Ok(())
    } else {
        Err(Status::new(
            code::PERMISSION_DENIED,
            format!("{} is not allowed to call {path}", role.name()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_by_role_and_in_maintenance() {
        let version = "/machine.MachineService/Version";
        let reboot = "/machine.MachineService/Reboot";
        let apply = "/machine.MachineService/ApplyConfiguration";
        let code_of = |a: Access, p: &str| authorize(a, p).err().map(|s| s.code);
        assert_eq!(code_of(Access::Admin, reboot), None);
        assert_eq!(code_of(Access::Operator, reboot), None);
        assert_eq!(code_of(Access::Reader, reboot), Some(code::PERMISSION_DENIED));
        assert_eq!(code_of(Access::Reader, version), None);
        assert_eq!(code_of(Access::Operator, apply), Some(code::PERMISSION_DENIED));
        assert_eq!(code_of(Access::Maintenance, apply), None);
        assert_eq!(code_of(Access::Maintenance, version), None);
        assert_eq!(code_of(Access::Maintenance, "/storage.StorageService/Disks"), None);
        assert_eq!(code_of(Access::Maintenance, reboot), Some(code::UNIMPLEMENTED));
        assert_eq!(
            code_of(Access::Maintenance, "/cosi.resource.State/Update"),
            Some(code::PERMISSION_DENIED)
        );
        assert_eq!(code_of(Access::Revoked, version), Some(code::PERMISSION_DENIED));
        assert_eq!(code_of(Access::Pending, version), Some(code::UNAUTHENTICATED));
        let csr = talos_api::security::CERTIFICATE;
        assert_eq!(code_of(Access::Trustd, csr), None);
        assert_eq!(code_of(Access::Trustd, version), Some(code::UNIMPLEMENTED));
        assert_eq!(code_of(Access::Trustd, reboot), Some(code::UNIMPLEMENTED));
        assert_eq!(code_of(Access::Reader, csr), Some(code::PERMISSION_DENIED));
        assert_eq!(code_of(Access::Maintenance, csr), Some(code::UNIMPLEMENTED));
    }
}
