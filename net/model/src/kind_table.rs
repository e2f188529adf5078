// SPDX-License-Identifier: Apache-2.0
//! The kind table: every resource kind, once. Everything per kind derives from it.
//!
//! [`kind_table!`] hands the rows to a callback macro, so each consumer generates what it needs
//! from the same list: `crate::kinds` the [`Kind`](crate::kinds::Kind) enum, `AnySpec`,
//! `SpecType`, the layered kinds, their merges and the API's names; `crate::resource` the
//! [`LayerSpecs`](crate::resource::LayerSpecs) struct. This module imports nothing: rows name
//! types by path, and only the consumer's expansion refers to them (the `resource` consumer
//! expands layered rows only, whose types are its own, so `resource` never reaches `cmdline`
//! or `config`).
//!
//! A row is `Variant(type) = "ShortName", "FullTypeName"` followed by optional parts:
//!
//! * `layered(field, merge fn, "merge controller name")`: config sources write this kind into
//!   `network-config` (one `LayerSpecs` field), and a merge controller folds it into `network`;
//!   the type implements `crate::resource::LayeredSpec`.
//! * `namespace(Ns)`: the namespace the CLI assumes when none is given (default `Network`).
//! * `aliases("name", ...)`: extra names the CLI accepts beyond the derived ones.
//!
//! How to add a kind: see `crate::kinds`.

/// Calls `$cb! { rows }` with every row of the kind table, in declaration order (the order of
/// `Kind::ALL`, of the merge controllers and of `LayerSpecs`'s fields).
macro_rules! kind_table {
    ($cb:ident) => {
        $cb! {
            /// Desired address.
            AddressSpec($crate::resource::AddressSpec) = "AddressSpec", "AddressSpecs.net.keelson.dev",
                layered(addresses, $crate::merge::merge_addresses, "network.AddressMergeController");
            /// Observed address.
            AddressStatus($crate::resource::AddressStatus) = "AddressStatus", "AddressStatuses.net.keelson.dev";
            /// Desired route.
            RouteSpec($crate::resource::RouteSpec) = "RouteSpec", "RouteSpecs.net.keelson.dev",
                layered(routes, $crate::merge::merge_routes, "network.RouteMergeController");
            /// Observed route.
            RouteStatus($crate::resource::RouteStatus) = "RouteStatus", "RouteStatuses.net.keelson.dev";
            /// Desired link.
            LinkSpec($crate::resource::LinkSpec) = "LinkSpec", "LinkSpecs.net.keelson.dev",
                layered(links, $crate::merge::merge_links, "network.LinkMergeController");
            /// Observed link.
            LinkStatus($crate::resource::LinkStatus) = "LinkStatus", "LinkStatuses.net.keelson.dev";
            /// Link state changed without a netlink event (WireGuard): re-read.
            LinkRefresh($crate::resource::LinkRefresh) = "LinkRefresh", "LinkRefreshes.net.keelson.dev";
            /// Desired resolvers.
            ResolverSpec($crate::resource::ResolverSpec) = "ResolverSpec", "ResolverSpecs.net.keelson.dev",
                layered(resolvers, $crate::merge::merge_resolvers, "network.ResolverMergeController");
            /// Resolvers in effect.
            ResolverStatus($crate::resource::ResolverStatus) = "ResolverStatus", "ResolverStatuses.net.keelson.dev";
            /// Desired hostname.
            HostnameSpec($crate::resource::HostnameSpec) = "HostnameSpec", "HostnameSpecs.net.keelson.dev",
                layered(hostnames, $crate::merge::merge_hostnames, "network.HostnameMergeController");
            /// Hostname in effect.
            HostnameStatus($crate::resource::HostnameStatus) = "HostnameStatus", "HostnameStatuses.net.keelson.dev";
            /// Desired time servers.
            TimeServerSpec($crate::resource::TimeServerSpec) = "TimeServerSpec", "TimeServerSpecs.net.keelson.dev",
                layered(time_servers, $crate::merge::merge_time_servers, "network.TimeServerMergeController");
            /// Time servers in effect.
            TimeServerStatus($crate::resource::TimeServerStatus) = "TimeServerStatus", "TimeServerStatuses.net.keelson.dev";
            /// An operator to run.
            OperatorSpec($crate::resource::OperatorSpec) = "OperatorSpec", "OperatorSpecs.net.keelson.dev",
                layered(operators, $crate::merge::merge_operators, "network.OperatorMergeController");
            /// What an operator is doing.
            OperatorStatus($crate::resource::OperatorStatus) = "OperatorStatus", "OperatorStatuses.net.keelson.dev";
            /// A shared VIP's election as this node sees it.
            VipStatus($crate::resource::VipStatus) = "VIPStatus", "VIPStatuses.net.keelson.dev";
            /// A tenant network as this node realised it (read from the node round's status file).
            TenantNetworkStatus($crate::resource::TenantNetworkStatus) = "TenantNetworkStatus", "TenantNetworkStatuses.net.keelson.dev",
                aliases("networks", "tenantnetworks", "tenantnetwork");
            /// Desired policy routing rule.
            RoutingRuleSpec($crate::resource::RoutingRuleSpec) = "RoutingRuleSpec", "RoutingRuleSpecs.net.keelson.dev",
                layered(rules, $crate::merge::merge_rules, "network.RoutingRuleMergeController");
            /// Observed policy routing rule.
            RoutingRuleStatus($crate::resource::RoutingRuleStatus) = "RoutingRuleStatus", "RoutingRuleStatuses.net.keelson.dev";
            /// Node addresses.
            NodeAddress($crate::resource::NodeAddress) = "NodeAddress", "NodeAddresses.net.keelson.dev";
            /// Network readiness.
            NetworkStatus($crate::resource::NetworkStatus) = "NetworkStatus", "NetworkStatuses.net.keelson.dev";
            /// A file written under the root (`/etc/resolv.conf`, ...).
            EtcFileStatus($crate::resource::EtcFileStatus) = "EtcFileStatus", "EtcFileStatuses.files.keelson.dev";
            /// A supervised service.
            ServiceStatus($crate::resource::ServiceStatus) = "ServiceStatus", "ServiceStatuses.runtime.keelson.dev",
                namespace(Runtime);
            /// Where the machine is in its life, and whether it is ready.
            MachineStatus($crate::resource::MachineStatus) = "MachineStatus", "MachineStatuses.runtime.keelson.dev",
                namespace(Runtime);
            /// Time sync state.
            TimeStatus($crate::resource::TimeStatus) = "TimeStatus", "TimeStatuses.runtime.keelson.dev",
                namespace(Runtime);
            /// The machine's identity from SMBIOS.
            SystemInformation($crate::resource::SystemInformation) = "SystemInformation", "SystemInformations.hardware.keelson.dev",
                namespace(Hardware), aliases("systeminformation");
            /// The parsed kernel command line.
            Cmdline($crate::cmdline::CmdlineNetwork) = "Cmdline", "Cmdlines.runtime.keelson.dev",
                namespace(Runtime), aliases("cmdlines");
            /// The machine configuration.
            MachineConfig($crate::config::MachineConfig) = "MachineConfig", "MachineConfigs.config.keelson.dev",
                namespace(Config), aliases("machineconfig");
            /// The node's KubeSpan key pair and address.
            KubeSpanIdentity($crate::resource::KubeSpanIdentity) = "KubeSpanIdentity", "KubeSpanIdentities.kubespan.keelson.dev",
                namespace(KubeSpan), aliases("kubespanidentities");
            /// A KubeSpan peer to mesh with.
            KubeSpanPeerSpec($crate::resource::KubeSpanPeerSpec) = "KubeSpanPeerSpec", "KubeSpanPeerSpecs.kubespan.keelson.dev",
                namespace(KubeSpan);
            /// A KubeSpan peer's state (Talos's `talosctl get kubespanpeerstatuses` also answers
            /// to `peers`).
            KubeSpanPeerStatus($crate::resource::KubeSpanPeerStatus) = "KubeSpanPeerStatus", "KubeSpanPeerStatuses.kubespan.keelson.dev",
                namespace(KubeSpan), aliases("peers", "peer");
            /// The node's identity in the cluster (Talos's `identities`).
            NodeIdentity($crate::resource::NodeIdentity) = "NodeIdentity", "Identities.cluster.keelson.dev",
                namespace(Cluster), aliases("identities", "identity", "nodeidentities");
            /// What a node publishes about itself.
            Affiliate($crate::resource::Affiliate) = "Affiliate", "Affiliates.cluster.keelson.dev",
                namespace(Cluster), aliases("affiliates");
            /// A cluster member.
            Member($crate::resource::Member) = "Member", "Members.cluster.keelson.dev",
                namespace(Cluster), aliases("members");
        }
    };
}
pub(crate) use kind_table;

/// Expands to `$then`, ignoring `$marker`: lets a callback emit one item per row that has an
/// optional part (`$( $( keep!($field; ...), )? )*`).
macro_rules! keep {
    ($marker:tt; $($then:tt)*) => {
        $($then)*
    };
}
pub(crate) use keep;
