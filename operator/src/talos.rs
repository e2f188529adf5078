// SPDX-License-Identifier: Apache-2.0
//! [`NodeApi`] over Talos's gRPC machine API: the `cli` crate's blocking channel (`grpc`'s
//! HTTP/2 engine, `talos-api`'s messages), one connection per call, every read and write
//! bounded by [`CALL_TIMEOUT`]. Maintenance-mode calls use TLS without a client certificate
//! (what a node without a configuration serves); the others mutual TLS with the configured
//! client certificate.

use std::sync::Arc;
use std::time::Duration;

use cli::connect::{self, Target};
use cli::rpc::{Channel, RpcError};
use talos_api::common::{Data, Empty, Metadata};
use talos_api::machine::{
    ApplyConfigurationRequest, ApplyConfigurationResponse, ApplyMode, BootstrapRequest,
    ServiceListResponse, VersionResponse,
};
use talos_api::storage::DisksResponse;

use crate::reconcile::NodeApi;
use crate::states::{CallError, ServiceObs};

/// How long a connection, a write or a wait for the node's next bytes may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Talos's API port.
pub const PORT: u16 = 50000;
/// The largest kubeconfig archive taken.
const MAX_KUBECONFIG: usize = 1 << 20;

// Replies talos-api does not carry yet (field numbers from Talos's api/machine/machine.proto).

#[derive(Clone, PartialEq, prost::Message)]
struct ResetRequest {
    #[prost(bool, tag = "1")]
    graceful: bool,
    #[prost(bool, tag = "2")]
    reboot: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct UpgradeRequest {
    #[prost(string, tag = "1")]
    image: String,
    #[prost(bool, tag = "2")]
    preserve: bool,
    #[prost(bool, tag = "3")]
    stage: bool,
    #[prost(bool, tag = "4")]
    force: bool,
}

/// `ResetResponse`, `UpgradeResponse`, `BootstrapResponse`: per-node messages whose first
/// field is the metadata (the rest is not needed).
#[derive(Clone, PartialEq, prost::Message)]
struct PerNode {
    #[prost(message, optional, tag = "1")]
    metadata: Option<Metadata>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PerNodeResponse {
    #[prost(message, repeated, tag = "1")]
    messages: Vec<PerNode>,
}

fn path(service: &str, method: &str) -> String {
    format!("/{service}/{method}")
}

fn machine(method: &str) -> String {
    path(talos_api::machine::SERVICE, method)
}

/// An RPC failure as the state machines see it.
fn call_error(e: RpcError) -> CallError {
    match e {
        RpcError::Transport(m) if m.contains("said nothing") => CallError::Timeout,
        RpcError::Transport(m) => CallError::Unreachable(m),
        RpcError::Status(s) => {
            CallError::Status { code: s.code as i32, message: base::names::escape(&s.message, 256) }
        }
        RpcError::H2(e) => CallError::Garbage(format!("HTTP/2: {e}")),
        RpcError::Decode(m) | RpcError::Handler(m) => CallError::Garbage(m),
        RpcError::NotGrpc(m) => CallError::Garbage(format!("no gRPC API ({m})")),
    }
}

/// A TLS handshake refused for want of a client certificate: the node is configured (its
/// API asks for mutual TLS), no longer in maintenance mode.
fn left_maintenance(transport_error: &str) -> bool {
    transport_error.contains("CertificateRequired")
}

/// A node's error in a per-node reply's metadata (a proxied call that failed there).
fn metadata_error(m: Option<&Metadata>) -> Result<(), CallError> {
    match m {
        Some(m) if !m.error.is_empty() => Err(CallError::Status {
            code: grpc::code::UNKNOWN as i32,
            message: base::names::escape(&m.error, 256),
        }),
        _ => Ok(()),
    }
}

/// The client: maintenance TLS for the first calls, mutual TLS (when configured) after.
#[derive(Debug)]
pub struct GrpcNode {
    insecure: Arc<rustls::ClientConfig>,
    secure: Option<Arc<rustls::ClientConfig>>,
    /// A generated cluster's admin client, for the calls of its machines (before `secure`).
    cluster: Option<Arc<rustls::ClientConfig>>,
    port: u16,
}

impl GrpcNode {
    /// `secure`: the client configuration with the client certificate for configured nodes.
    pub fn new(secure: Option<Arc<rustls::ClientConfig>>) -> Result<Self, String> {
        Ok(Self { insecure: connect::insecure_config(None)?, secure, cluster: None, port: PORT })
    }

    /// The client for maintenance mode (TLS without a client certificate).
    pub fn insecure_client(&self) -> Arc<rustls::ClientConfig> {
        self.insecure.clone()
    }

    /// The client certificate `serve` was given for configured nodes.
    pub fn secure_client(&self) -> Option<Arc<rustls::ClientConfig>> {
        self.secure.clone()
    }

    /// Talk to another port (tests run nodes on loopback ports).
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    fn channel(&self, address: &str, insecure: bool) -> Result<Channel, CallError> {
        let tls = if insecure {
            self.insecure.clone()
        } else {
            self.cluster.clone().or_else(|| self.secure.clone()).ok_or_else(|| {
                CallError::Unreachable(
                    "no client certificate configured for configured nodes".into(),
                )
            })?
        };
        open_channel(address, self.port, tls, insecure, CALL_TIMEOUT, |io| io)
    }

    fn unary<Req: talos_api::Message, Resp: talos_api::Message + Default>(
        &self,
        address: &str,
        insecure: bool,
        path: &str,
        req: &Req,
    ) -> Result<Resp, CallError> {
        self.channel(address, insecure)?.unary(path, req).map_err(call_error)
    }

    fn per_node(
        &self,
        address: &str,
        method: &str,
        req: &impl talos_api::Message,
    ) -> Result<(), CallError> {
        let r: PerNodeResponse = self.unary(address, false, &machine(method), req)?;
        r.messages.iter().try_for_each(|m| metadata_error(m.metadata.as_ref()))
    }
}

/// A channel to `address:port` over TLS with `tls` (`insecure`: without a client certificate,
/// as maintenance mode takes), connect and writes bounded by [`CALL_TIMEOUT`], each read by
/// `read_timeout`; `wrap` may wrap the connected stream (the event streams' stop-aware reads).
pub(crate) fn open_channel(
    address: &str,
    port: u16,
    tls: Arc<rustls::ClientConfig>,
    insecure: bool,
    read_timeout: Duration,
    wrap: impl FnOnce(Box<dyn connect::Stream>) -> Box<dyn connect::Stream>,
) -> Result<Channel, CallError> {
    let target =
        Target::Remote { name: address.to_owned(), host: address.to_owned(), port, tls, insecure };
    let io =
        connect::open(&target, Some(read_timeout), CALL_TIMEOUT).map_err(CallError::Unreachable)?;
    let authority = if address.contains(':') {
        format!("[{address}]:{port}")
    } else {
        format!("{address}:{port}")
    };
    Ok(Channel::over(wrap(io), authority, true))
}

/// A node's boot report, checked: a MAC of six hex pairs and an image name of the boot
/// service's syntax, or empty.
fn boot_report(
    b: &talos_api::machine::KeelsonBoot,
) -> Result<crate::states::BootReport, CallError> {
    let mac = if b.mac.is_empty() {
        String::new()
    } else {
        crate::pxe::mac::Mac::parse(&b.mac)
            .map_err(|_| {
                CallError::Garbage(format!(
                    "Version: boot MAC {:?} is not a MAC address",
                    base::names::escape(&b.mac, 64)
                ))
            })?
            .to_string()
    };
    if !b.image.is_empty() && !crate::pxe::images::valid_version(&b.image) {
        return Err(CallError::Garbage(format!(
            "Version: boot image {:?} is not an image name",
            base::names::escape(&b.image, 80)
        )));
    }
    Ok(crate::states::BootReport { mac, image: b.image.clone() })
}

impl GrpcNode {
    /// Whether the node answers `Version` over maintenance TLS (a configured node refuses a
    /// client without a certificate at the handshake).
    fn in_maintenance(&self, address: &str) -> bool {
        self.unary::<_, VersionResponse>(address, true, &machine("Version"), &Empty::default())
            .is_ok()
    }
}

impl NodeApi for GrpcNode {
    fn use_client(&mut self, client: Option<Arc<rustls::ClientConfig>>) {
        self.cluster = client;
    }

    fn version(&mut self, address: &str) -> Result<String, CallError> {
        let r: VersionResponse =
            self.unary(address, false, &machine("Version"), &Empty::default())?;
        let m = r.messages.first().ok_or_else(|| CallError::Garbage("Version: no reply".into()))?;
        metadata_error(m.metadata.as_ref())?;
        let tag = m.version.as_ref().map(|v| v.tag.clone()).unwrap_or_default();
        if !crate::kinds::valid_version(&tag) {
            return Err(CallError::Garbage(format!(
                "Version: tag {:?} is not vX.Y.Z",
                base::names::escape(&tag, 64)
            )));
        }
        Ok(tag)
    }

    fn boot_report(
        &mut self,
        address: &str,
        insecure: bool,
    ) -> Result<Option<crate::states::BootReport>, CallError> {
        let r: VersionResponse =
            self.unary(address, insecure, &machine("Version"), &Empty::default())?;
        let m = r.messages.first().ok_or_else(|| CallError::Garbage("Version: no reply".into()))?;
        metadata_error(m.metadata.as_ref())?;
        m.keelson_boot.as_ref().map(boot_report).transpose()
    }

    fn disks(&mut self, address: &str) -> Result<usize, CallError> {
        let r: DisksResponse = self.unary(
            address,
            true,
            &path(talos_api::storage::SERVICE, "Disks"),
            &Empty::default(),
        )?;
        let m = r.messages.first().ok_or_else(|| CallError::Garbage("Disks: no reply".into()))?;
        metadata_error(m.metadata.as_ref())?;
        Ok(m.disks.len())
    }

    fn apply_configuration(
        &mut self,
        address: &str,
        insecure: bool,
        config: &str,
        dry_run: bool,
    ) -> Result<bool, CallError> {
        let req = ApplyConfigurationRequest {
            data: config.as_bytes().to_vec(),
            mode: ApplyMode::Auto as i32,
            dry_run,
            try_mode_timeout: None,
        };
        let mut c = self.channel(address, insecure)?;
        let mut answer =
            c.unary::<_, ApplyConfigurationResponse>(&machine("ApplyConfiguration"), &req);
        // A node that left maintenance mode took a configuration already: an earlier leader's
        // apply whose status write was lost (it died between the two), or one made by hand.
        // The same apply over mutual TLS is then a no-op on a node that runs this
        // configuration, and a change on one that runs another (as a later apply would be).
        if insecure && matches!(&answer, Err(RpcError::Transport(m)) if left_maintenance(m)) {
            log::info!(
                "ApplyConfiguration: {} left maintenance mode already; applying over mutual TLS",
                base::names::escape(address, 64)
            );
            c = self.channel(address, false)?;
            answer = c.unary(&machine("ApplyConfiguration"), &req);
        }
        match answer {
            Ok(r) => {
                for m in &r.messages {
                    metadata_error(m.metadata.as_ref())?;
                }
                Ok(false)
            }
            // The node rebooting into the install drops the connection (Talos answers
            // Unavailable "graceful_stop"): the configuration was taken.
            Err(RpcError::Status(s)) if s.code == grpc::code::UNAVAILABLE => Ok(true),
            Err(RpcError::Transport(m)) if m.contains("closed") => Ok(true),
            Err(e) => Err(call_error(e)),
        }
    }

    fn apply_no_reboot(&mut self, address: &str, config: &str) -> Result<(), CallError> {
        let req = ApplyConfigurationRequest {
            data: config.as_bytes().to_vec(),
            mode: ApplyMode::NoReboot as i32,
            dry_run: false,
            try_mode_timeout: None,
        };
        let r: ApplyConfigurationResponse =
            self.unary(address, false, &machine("ApplyConfiguration"), &req)?;
        for m in &r.messages {
            metadata_error(m.metadata.as_ref())?;
        }
        Ok(())
    }

    fn service_info(&mut self, address: &str, name: &str) -> Result<ServiceObs, CallError> {
        // Talos has no ServiceInfo call: its client filters ServiceList.
        let r: ServiceListResponse =
            self.unary(address, false, &machine("ServiceList"), &Empty::default())?;
        let m =
            r.messages.first().ok_or_else(|| CallError::Garbage("ServiceList: no reply".into()))?;
        metadata_error(m.metadata.as_ref())?;
        let s = m.services.iter().find(|s| s.id == name);
        Ok(match s {
            None => ServiceObs { state: "Absent".into(), healthy: false },
            Some(s) => ServiceObs {
                state: base::names::escape(&s.state, 64),
                healthy: s.health.as_ref().is_some_and(|h| h.healthy && !h.unknown),
            },
        })
    }

    fn bootstrap(&mut self, address: &str) -> Result<(), CallError> {
        self.per_node(address, "Bootstrap", &BootstrapRequest::default())
    }

    fn kubeconfig(&mut self, address: &str) -> Result<String, CallError> {
        // A stream of chunks of a gzipped tar holding `kubeconfig`: kept as it came, base64.
        let mut c = self.channel(address, false)?;
        let mut bytes = Vec::new();
        c.call(&machine("Kubeconfig"), &Empty::default(), MAX_KUBECONFIG, &mut |d: Data| {
            if bytes.len() + d.bytes.len() > MAX_KUBECONFIG {
                return Err(format!("kubeconfig larger than {MAX_KUBECONFIG} bytes"));
            }
            bytes.extend_from_slice(&d.bytes);
            Ok(())
        })
        .map_err(call_error)?;
        use base64::Engine;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    fn reset(&mut self, address: &str) -> Result<(), CallError> {
        match self.per_node(address, "Reset", &ResetRequest { graceful: false, reboot: true }) {
            // The node wiping itself may drop the connection before it answers.
            Err(CallError::Unreachable(m)) if m.contains("closed") => Ok(()),
            // A node in maintenance mode (its mutual TLS handshake fails: it serves a
            // self-signed certificate) has no configuration left to wipe: reset already, by an
            // earlier leader that died before removing the machine, or by hand. Only a node
            // without a configuration answers the maintenance client.
            Err(e) if self.in_maintenance(address) => {
                log::info!(
                    "Reset: {} is in maintenance mode already ({e:?}): counted as reset",
                    base::names::escape(address, 64)
                );
                Ok(())
            }
            other => other,
        }
    }

    fn upgrade(&mut self, address: &str, image: &str) -> Result<(), CallError> {
        let req =
            UpgradeRequest { image: image.into(), preserve: false, stage: false, force: true };
        self.per_node(address, "Upgrade", &req)
    }

    fn reboot(&mut self, address: &str) -> Result<(), CallError> {
        let req = talos_api::machine::RebootRequest {
            mode: talos_api::machine::RebootMode::Default as i32,
        };
        match self.per_node(address, "Reboot", &req) {
            // A node going down may drop the connection before it answers.
            Err(CallError::Unreachable(m)) if m.contains("closed") => Ok(()),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handshake_refused_for_want_of_a_client_certificate_means_maintenance_is_over() {
        // What the cli's channel says when a configured node refuses the maintenance client.
        let refused = "the node refused this client at the TLS handshake (received fatal alert: CertificateRequired): a client certificate from the node's CA is needed (--keelsonconfig), --insecure only reaches a node in maintenance mode";
        assert!(left_maintenance(refused));
        assert!(!left_maintenance("127.0.0.1: TLS: invalid peer certificate: UnknownIssuer"));
        assert!(!left_maintenance("the node closed the connection"));
        assert!(!left_maintenance("connect: Connection refused (os error 111)"));
    }

    #[test]
    fn rpc_failures_become_condition_reasons() {
        let t = |e| call_error(e);
        assert_eq!(
            t(RpcError::Transport("the node said nothing for 10 s".into())),
            CallError::Timeout
        );
        assert!(matches!(
            t(RpcError::Transport("connect: refused".into())),
            CallError::Unreachable(_)
        ));
        assert!(matches!(t(RpcError::Decode("bad varint".into())), CallError::Garbage(_)));
        assert!(matches!(t(RpcError::NotGrpc("closed at once")), CallError::Garbage(_)));
        let s = grpc::Status::new(6, "etcd data directory is not empty");
        assert_eq!(
            t(RpcError::Status(s)),
            CallError::Status {
                code: crate::states::ALREADY_EXISTS,
                message: "etcd data directory is not empty".into()
            }
        );
        assert!(metadata_error(Some(&Metadata {
            hostname: "n".into(),
            error: "boom".into(),
            ..Metadata::default()
        }))
        .is_err());
        assert!(metadata_error(Metadata::of("n").as_ref()).is_ok());
    }

    #[test]
    fn requests_carry_talos_field_numbers() {
        use talos_api::Message;
        // graceful=false is left out; reboot=true is field 2, varint 1.
        assert_eq!(ResetRequest { graceful: false, reboot: true }.encode_to_vec(), [0x10, 1]);
        let u = UpgradeRequest { image: "i".into(), preserve: false, stage: false, force: true };
        assert_eq!(u.encode_to_vec(), [0x0a, 1, b'i', 0x20, 1]);
    }
}
