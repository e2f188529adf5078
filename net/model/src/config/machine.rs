// SPDX-License-Identifier: Apache-2.0
//! The document root, `machine` (except `machine.network`) and `cluster`.
//!
//! Fields typed `Option<TalosKey>` are Talos keys keelson accepts and ignores; they are listed
//! (with their paths) in `known.rs`, which also warns about them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::args::ArgValue;
use super::network::NetworkConfig;
use super::scalar::CidrFilter;
use super::scalar::{self, Base64, DiscoveryTtl, Filter, GoDuration, Url};

/// A parsed, validated machine configuration (Talos v1alpha1 shape, see the module docs).
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineConfig {
    /// `version`: always `v1alpha1`.
    pub version: String,
    /// `debug`.
    #[serde(default)]
    pub debug: bool,
    /// `machine`.
    #[serde(default)]
    pub machine: Machine,
    /// `cluster`; `None` when absent (KubeSpan needs it, docs/talos.md: KubeSpan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<Cluster>,
    /// One line per ignored Talos key, with its position.
    #[serde(skip_deserializing, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// One line per entry left out because it was invalid (file position, path, why, what
    /// was dropped); empty when the whole configuration applies.
    #[serde(skip_deserializing, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    /// Typed documents that add specs of their own (links, DHCP, rules, blackhole routes);
    /// the others are folded into the fields above.
    #[serde(skip_deserializing, skip_serializing_if = "Vec::is_empty")]
    pub documents: Vec<super::documents::NetworkDocument>,
    #[serde(default, skip_serializing)]
    pub(crate) persist: Option<TalosKey>,
}

/// A Talos key keelson does not use: any content is accepted and dropped.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct TalosKey;

impl<'de> Deserialize<'de> for TalosKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| TalosKey)
    }
}

/// A certificate and its key, each the base64 of its PEM (Talos's `machine.ca` shape). The
/// key is never shown: serialized as `<redacted>`, and left out of `Debug`.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PemKeyPair {
    /// The certificate (base64 of PEM).
    #[serde(deserialize_with = "scalar::one::<Base64, _>")]
    pub crt: String,
    /// The private key (base64 of PEM); a node needs it to issue its own certificate.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Base64, _>",
        serialize_with = "redacted",
        skip_serializing_if = "Option::is_none"
    )]
    pub key: Option<String>,
}

impl std::fmt::Debug for PemKeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PemKeyPair")
            .field("crt", &self.crt)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// `machine.type`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MachineType {
    /// Runs the control plane.
    #[serde(rename = "controlplane")]
    ControlPlane,
    /// Runs workloads only.
    Worker,
}

/// `machine`.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Machine {
    /// `machine.type`; `None` when absent.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<MachineType>,
    /// `machine.network`.
    #[serde(default)]
    pub network: NetworkConfig,
    /// `machine.time`.
    #[serde(default)]
    pub time: TimeConfig,
    /// `machine.kubelet`.
    #[serde(default)]
    pub kubelet: KubeletConfig,
    /// keelson addition: `machine.metrics`, the Prometheus metrics listener; absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<MetricsConfig>,
    /// keelson addition: `machine.tenantNetworks`, the tenant-network agent PID 1 runs;
    /// absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_networks: Option<TenantNetworksConfig>,

    /// `machine.token`: what a worker shows a control plane's trustd (port 50001) to get its
    /// API certificate signed, and what a control plane's trustd checks. Shown as
    /// `<redacted>`.
    #[serde(default, serialize_with = "redacted", skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    // Talos keys keelson ignores (see `known.rs`).
    /// `machine.ca`: the API's trust root; its key is shown as `<redacted>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PemKeyPair>,
    #[serde(default, skip_serializing, rename = "acceptedCAs")]
    pub(crate) accepted_cas: Option<TalosKey>,
    #[serde(default, skip_serializing, rename = "certSANs")]
    pub(crate) cert_sans: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) control_plane: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) pods: Option<TalosKey>,
    /// `machine.install`: the disk that keeps the node's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<InstallConfig>,
    #[serde(default, skip_serializing)]
    pub(crate) files: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) env: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) sysctls: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) sysfs: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) registries: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) system_disk_encryption: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) features: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) udev: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) logging: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) kernel: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) seccomp_profiles: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) base_runtime_spec_overrides: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) node_labels: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) node_annotations: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) node_taints: Option<TalosKey>,
    /// Deprecated in Talos (`UserVolumeConfig` replaces it) but still in its schema.
    #[serde(default, skip_serializing)]
    pub(crate) disks: Option<TalosKey>,
}

/// `machine.install`: keelson does not copy itself to the disk (it boots from its
/// initramfs); it puts a state partition there. `image`, `extraKernelArgs` and the other
/// installer keys are Talos's and ignored.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstallConfig {
    /// The disk by device path (`/dev/vda`) or name (`vda`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
    /// The disk by its properties, when `disk` is not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_selector: Option<DiskSelector>,
    /// Install even over an existing partition table (which is lost).
    #[serde(default)]
    pub wipe: bool,

    // Talos keys keelson ignores (see `known.rs`).
    #[serde(default, skip_serializing)]
    pub(crate) image: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) extra_kernel_args: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) bootloader: Option<TalosKey>,
    #[serde(default, skip_serializing, rename = "legacyBIOSSupport")]
    pub(crate) legacy_bios_support: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) extensions: Option<TalosKey>,
    #[serde(default, skip_serializing, rename = "grubUseUKICmdline")]
    pub(crate) grub_use_uki_cmdline: Option<TalosKey>,
}

/// `machine.install.diskSelector`: every field given must match; the first matching disk
/// (by name) is taken. Text fields match exactly or as a glob with `*`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiskSelector {
    /// `4GB`, `>= 10GB`, `<= 1TiB`, `> 512MB`, `< 2TB` (decimal or binary units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// The kernel name (`vda`, `nvme0n1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The model as the disk reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The serial number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// The World Wide Identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwid: Option<String>,
    /// `ssd`, `hdd`, `nvme` or `sd` (an SD/MMC card).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub disk_type: Option<String>,

    // Talos keys keelson ignores (see `known.rs`).
    #[serde(default, skip_serializing)]
    pub(crate) uuid: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) modalias: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) bus_path: Option<TalosKey>,
}

/// `machine.time`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeConfig {
    /// Time sync off.
    #[serde(default)]
    pub disabled: bool,
    /// NTP servers (names or IPs); empty keeps the defaults.
    #[serde(default)]
    pub servers: Vec<String>,
    /// How long boot waits for time sync (Go-style duration: `90s`, `2m`, `1h30m`).
    #[serde(
        default,
        deserialize_with = "scalar::opt::<GoDuration, _>",
        serialize_with = "scalar::serialize_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub boot_timeout: Option<Duration>,
    /// Authenticate the servers with NTS (RFC 8915): only a `TimeSyncConfig` document sets it
    /// (v1alpha1 has no such key).
    #[serde(skip_deserializing, skip_serializing_if = "std::ops::Not::not")]
    pub use_nts: bool,
}

/// `machine.metrics` (a keelson key): serve Prometheus metrics over plain HTTP.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsConfig {
    /// Where to listen (`[::]:9100`).
    #[serde(deserialize_with = "scalar::one::<scalar::ListenAddr, _>")]
    pub listen: std::net::SocketAddr,
}

/// Where the tenant-network agent is, unless `machine.tenantNetworks.agent` says.
pub const DEFAULT_TENANT_AGENT: &str = "/usr/bin/keelson-operator";

/// The most etcd endpoints `machine.tenantNetworks.etcdEndpoints` takes.
pub const MAX_TENANT_ETCD_ENDPOINTS: usize = 16;

fn default_tenant_agent() -> String {
    DEFAULT_TENANT_AGENT.to_owned()
}

/// `machine.tenantNetworks` (a keelson key): PID 1 runs `AGENT tenant-agent` (the
/// `keelson-operator` binary) against the operator's etcd, so this node realises its tenant
/// networks and reports them.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantNetworksConfig {
    /// The `keelson-operator` binary (absolute path).
    #[serde(
        default = "default_tenant_agent",
        deserialize_with = "scalar::one::<scalar::AbsPath, _>"
    )]
    pub agent: String,
    /// The operator's etcd (`http://` or `https://` URLs; 1 to
    /// [`MAX_TENANT_ETCD_ENDPOINTS`], checked in `validate`).
    #[serde(deserialize_with = "scalar::list::<scalar::EtcdUrl, _>")]
    pub etcd_endpoints: Vec<String>,
    /// CA bundle (PEM file) for `https://` endpoints.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<scalar::AbsPath, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub etcd_ca: Option<String>,
    /// Client certificate (PEM file); goes with `etcdKey`.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<scalar::AbsPath, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub etcd_cert: Option<String>,
    /// Client key (PEM file); goes with `etcdCert`.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<scalar::AbsPath, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub etcd_key: Option<String>,
    /// The operator's key prefix in etcd (the agent's default when absent).
    #[serde(
        default,
        deserialize_with = "scalar::opt::<scalar::EtcdPrefix, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub prefix: Option<String>,
    /// The name the agent reports under (the node's hostname when absent).
    #[serde(
        default,
        deserialize_with = "scalar::opt::<scalar::Hostname, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub node: Option<String>,
    /// The local VXLAN tunnel endpoint (the agent picks one when absent).
    #[serde(
        default,
        deserialize_with = "scalar::opt::<scalar::Ip, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub vtep_local: Option<std::net::IpAddr>,
    /// The VXLAN UDP port (the agent's default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vxlan_port: Option<std::num::NonZeroU16>,
}

/// `machine.kubelet`: keelson hands off to a kubelet it does not manage the image of.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeletConfig {
    /// keelson addition: the kubelet command line (`argv[0]` first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Extra `--key=value` flags; a list value is one flag per item (Talos 1.14).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_args: BTreeMap<String, ArgValue>,
    /// How the node IP is picked.
    #[serde(default, rename = "nodeIP", skip_serializing_if = "Option::is_none")]
    pub node_ip: Option<NodeIpConfig>,
    /// keelson addition: the kubelet's health endpoint (`http://` to an IP or `localhost`);
    /// `None`: [`DEFAULT_HEALTHZ`](super::DEFAULT_HEALTHZ).
    #[serde(
        default,
        deserialize_with = "scalar::opt::<super::healthz::HealthzUrl, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub healthz: Option<String>,

    /// Talos's kubelet image. keelson runs no images: it hands the reference to
    /// [`command`](Self::command) as `KUBELET_IMAGE`, and a new one restarts the kubelet.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<super::healthz::KubeletImage, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub image: Option<String>,

    // Talos keys keelson ignores (see `known.rs`).
    #[serde(default, skip_serializing, rename = "clusterDNS")]
    pub(crate) cluster_dns: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) extra_mounts: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) extra_config: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) credential_provider_config: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) default_runtime_seccomp_profile_enabled: Option<TalosKey>,
    #[serde(default, skip_serializing, rename = "registerWithFQDN")]
    pub(crate) register_with_fqdn: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) skip_node_registration: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) disable_manifests_directory: Option<TalosKey>,
}

/// `machine.kubelet.nodeIP`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeIpConfig {
    /// Subnets the node IP must be in (`!` excludes).
    #[serde(default, deserialize_with = "scalar::list::<Filter, _>")]
    pub valid_subnets: Vec<CidrFilter>,
}

/// `cluster`. `Debug` shows the secret as `<redacted>` (a config may be logged whole).
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cluster {
    /// Cluster ID (base64), KubeSpan's and discovery's cluster identity.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Base64, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub id: Option<String>,
    /// Cluster secret (base64), the discovery encryption key and KubeSpan's preshared key.
    /// Shown as `<redacted>`.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Base64, _>",
        serialize_with = "redacted",
        skip_serializing_if = "Option::is_none"
    )]
    pub secret: Option<String>,
    /// Peer discovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<Discovery>,
    /// etcd on a control-plane node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<EtcdConfig>,
    /// The Kubernetes CA (`ca.crt` and `ca.key`): the admin kubeconfig's client certificate
    /// is issued from it on a control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PemKeyPair>,

    /// `cluster.controlPlane`: its `endpoint` is the admin kubeconfig's server and where a
    /// joining control plane looks for etcd members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlaneConfig>,

    // Talos keys keelson ignores (see `known.rs`).
    #[serde(default, skip_serializing)]
    pub(crate) cluster_name: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) network: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) token: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) aescbc_encryption_secret: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) secretbox_encryption_secret: Option<TalosKey>,
    #[serde(default, skip_serializing, rename = "aggregatorCA")]
    pub(crate) aggregator_ca: Option<TalosKey>,
    #[serde(default, skip_serializing, rename = "acceptedCAs")]
    pub(crate) accepted_cas: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) service_account: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) api_server: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) controller_manager: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) proxy: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) scheduler: Option<TalosKey>,
    #[serde(default, skip_serializing, rename = "coreDNS")]
    pub(crate) core_dns: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) external_cloud_provider: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) extra_manifests: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) extra_manifest_headers: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) inline_manifests: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) allow_scheduling_on_control_planes: Option<TalosKey>,
    /// The deprecated spelling of `allowSchedulingOnControlPlanes`, still in Talos's schema.
    #[serde(default, skip_serializing)]
    pub(crate) allow_scheduling_on_masters: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) admin_kubeconfig: Option<TalosKey>,
}

/// `cluster.controlPlane`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControlPlaneConfig {
    /// The Kubernetes API's URL (`https://<host>:<port>`); its host also names the etcd
    /// members a joining control plane asks first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The local API server's port; ignored (keelson runs no API server).
    #[serde(default, skip_serializing, rename = "localAPIServerPort")]
    pub(crate) local_api_server_port: Option<TalosKey>,
}

impl ControlPlaneConfig {
    /// The endpoint's host (brackets of an IPv6 literal removed), when it is a URL with one.
    pub fn endpoint_host(&self) -> Option<String> {
        let url = self.endpoint.as_deref()?.trim();
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let authority = rest.split(['/', '?', '#']).next()?;
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        let host = if let Some(v6) = authority.strip_prefix('[') {
            v6.split_once(']')?.0
        } else {
            authority.split(':').next()?
        };
        (!host.is_empty()).then(|| host.to_owned())
    }
}

/// `cluster.etcd`, the keys Talos reads for its etcd service.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EtcdConfig {
    /// The etcd CA: peers and clients are issued certificates from it (its key is needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PemKeyPair>,
    /// Extra `--key=value` flags for etcd.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_args: BTreeMap<String, String>,
    /// Subnets the advertised peer address is chosen from (`!` excludes).
    #[serde(
        default,
        deserialize_with = "scalar::list::<Filter, _>",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub advertised_subnets: Vec<CidrFilter>,
    /// Subnets etcd listens on for peers (`!` excludes); default: all addresses.
    #[serde(
        default,
        deserialize_with = "scalar::list::<Filter, _>",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub listen_subnets: Vec<CidrFilter>,
    /// Talos's etcd container image: keelson runs the `etcd` binary of the image it booted
    /// from, so this is ignored (with the warning every ignored Talos key gets).
    #[serde(default, skip_serializing)]
    pub(crate) image: Option<TalosKey>,
    /// Talos's deprecated single `subnet`; ignored.
    #[serde(default, skip_serializing)]
    pub(crate) subnet: Option<TalosKey>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Only what keelson uses: the keys it ignores have no content to show.
        f.debug_struct("Cluster")
            .field("id", &self.id)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("discovery", &self.discovery)
            .field("etcd", &self.etcd)
            .field("control_plane", &self.control_plane)
            .field("ca", &self.ca)
            .finish_non_exhaustive()
    }
}

/// `cluster.discovery`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Discovery {
    /// Discovery on.
    #[serde(default)]
    pub enabled: bool,
    /// Registries.
    #[serde(default)]
    pub registries: DiscoveryRegistries,
}

/// `cluster.discovery.registries`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiscoveryRegistries {
    /// The Kubernetes (node annotation) registry.
    #[serde(default)]
    pub kubernetes: KubernetesRegistry,
    /// The discovery service registry.
    #[serde(default)]
    pub service: ServiceRegistry,
}

/// `registries.kubernetes`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesRegistry {
    /// Registry off.
    #[serde(default)]
    pub disabled: bool,
}

/// `registries.service`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceRegistry {
    /// Registry off.
    #[serde(default)]
    pub disabled: bool,
    /// Service URL; `None` means Talos's public service.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Url, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub endpoint: Option<String>,
    /// keelson: how long the service keeps what this node publishes; `None` is Talos's 30
    /// minutes. Shorter makes a node that left disappear sooner, at more refresh traffic.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<DiscoveryTtl, _>",
        serialize_with = "scalar::serialize_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub ttl: Option<Duration>,
}

fn redacted<S: serde::Serializer>(_: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str("<redacted>")
}
