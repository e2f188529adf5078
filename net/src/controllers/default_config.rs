// SPDX-License-Identifier: Apache-2.0
//! Layer `default`: built-in defaults (docs/talos.md: Defaults).
//!
//! - `lo` up with 127.0.0.1/8 (scope host); `::1` is left to the kernel.
//! - Every physical link that nothing else mentions is brought up, and gets a DHCPv4 operator
//!   unless a cmdline/platform/configuration LinkSpec claims it or it is ignored (docs/talos.md:
//!   Defaults). Unlike Talos, only links that exist get one, and a bare `ip=off` turns this off.
//! - Resolvers 1.1.1.1 and 8.8.8.8, with the node's domain as search domain when a machine
//!   configuration exists and does not set `disableSearchDomain`; time server
//!   `time.cloudflare.com` (NTS).
//! - With a machine configuration, hostname `talos-<default address>` (docs/talos.md: Defaults
//!   `addr` mode); without one, no default hostname.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

use super::ids::{CMDLINE_ID, MACHINE_CONFIG_ID};
use super::layer::{
    layered_outputs, link_identities, source_version, LayerCache, SourceVersion, LINKS_INPUT,
};
use crate::cmdline::CmdlineNetwork;
use crate::config::{AutoHostname, MachineConfig};
use crate::resource::{
    AddressSpec, ClientIdentifier, ConfigLayer, HostnameSpec, HostnameStatus, Kind, LayerSpecs,
    LinkDigest, LinkSpec, LinkView, Namespace, NodeAddress, Operator, OperatorSpec, ResolverSpec,
    Scope, TimeServerSpec, DEFAULT_ROUTE_METRIC, HOSTNAME_ID,
};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// Default name servers (Talos `DefaultPrimaryResolver`, `DefaultSecondaryResolver`).
pub const DEFAULT_RESOLVERS: [IpAddr; 2] =
    [IpAddr::V4(Ipv4Addr::new(1, 1, 1, 1)), IpAddr::V4(Ipv4Addr::new(8, 8, 8, 8))];

/// Default time server.
pub const DEFAULT_TIME_SERVER: &str = "time.cloudflare.com";

/// Everything the defaults depend on.
#[derive(Debug, Default)]
pub struct DefaultInputs<'a> {
    /// The parsed kernel command line.
    pub cmdline: Option<&'a CmdlineNetwork>,
    /// The machine configuration.
    pub config: Option<&'a MachineConfig>,
    /// The node's links.
    pub links: LinkView<'a>,
    /// Links named by a LinkSpec at layer cmdline, platform or configuration.
    pub claimed_links: BTreeSet<String>,
    /// NodeAddress `default`, when it holds exactly one address.
    pub default_address: Option<IpAddr>,
    /// The domain name in effect (HostnameStatus).
    pub domainname: Option<String>,
    /// The node's identity, for `auto: stable` hostnames.
    pub node_id: Option<&'a str>,
}

/// The layer-`default` specs: a pure function of its inputs.
pub fn default_specs(input: &DefaultInputs<'_>) -> LayerSpecs {
    let mut out = LayerSpecs::default();
    let lo: IpNet = IpNet::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8).unwrap_or_default();
    let mut lo_addr = AddressSpec::new("lo", lo, ConfigLayer::Default);
    lo_addr.scope = Scope::HOST;
    out.addresses.push(lo_addr);
    out.links.push(LinkSpec::up("lo", ConfigLayer::Default));

    let links = &input.links;
    let mut ignored: BTreeSet<String> = BTreeSet::new();
    let mut mentioned: BTreeSet<String> = BTreeSet::new();
    if let Some(cmdline) = input.cmdline {
        ignored.extend(cmdline.ignore_interfaces.iter().map(|n| links.resolve(n)));
        mentioned.extend(cmdline.link_specs.iter().map(|s| links.resolve(&s.name)));
        mentioned.extend(cmdline.link_configs.iter().map(|c| links.resolve(&c.link_name)));
    }
    if let Some(config) = input.config {
        ignored.extend(config.ignored_interfaces(links));
        mentioned.extend(config.mentioned_interfaces(links));
    }
    let dhcp4 = input.cmdline.is_none_or(|c| c.default_dhcp4);
    let dhcp6 = input.cmdline.is_some_and(|c| c.default_dhcp6);
    let defaults_on = input.config.is_none_or(MachineConfig::runs_default_link_config);
    for (name, _) in links.physical().filter(|_| defaults_on) {
        let name = name.to_owned();
        if ignored.contains(&name) {
            continue;
        }
        if !mentioned.contains(&name) {
            out.links.push(LinkSpec::up(&name, ConfigLayer::Default));
        }
        if input.claimed_links.contains(&name) {
            continue;
        }
        if dhcp4 {
            out.operators.push(OperatorSpec::dhcp4(
                &name,
                DEFAULT_ROUTE_METRIC,
                ClientIdentifier::Mac,
                ConfigLayer::Default,
            ));
        }
        if dhcp6 {
            out.operators.push(OperatorSpec {
                operator: Operator::Dhcp6,
                link_name: name.clone(),
                require_up: true,
                dhcp6: Some(crate::resource::Dhcp6OperatorSpec {
                    route_metric: DEFAULT_ROUTE_METRIC,
                    skip_hostname_request: false,
                    client_identifier: ClientIdentifier::Mac,
                }),
                layer: ConfigLayer::Default,
                ..OperatorSpec::default()
            });
        }
    }

    let search_domains = match (input.config, &input.domainname) {
        (Some(c), Some(d)) if !c.machine.network.disable_search_domain && !d.is_empty() => {
            vec![d.clone()]
        }
        _ => Vec::new(),
    };
    out.resolvers.push(ResolverSpec {
        dns_servers: DEFAULT_RESOLVERS.to_vec(),
        search_domains,
        layer: ConfigLayer::Default,
        ..ResolverSpec::default()
    });
    out.time_servers.push(TimeServerSpec {
        time_servers: vec![DEFAULT_TIME_SERVER.to_owned()],
        use_nts: true,
        layer: ConfigLayer::Default,
    });
    if let Some(name) = input.config.and_then(|c| auto_hostname(c, input)) {
        if let Ok(h) = HostnameSpec::parse_fqdn(&name, ConfigLayer::Default) {
            out.hostnames.push(h);
        }
    }
    out
}

/// `talos-xxx-yyy` from the node's identity: the SHA-256 of the node ID, its first 8 bytes
/// as a big-endian number written in base 36, characters 1..4 and 4..7 (Talos's stable
/// hostname, docs/talos.md: Defaults).
pub fn stable_hostname(node_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(node_id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let mut n = u64::from_be_bytes(first);
    let mut b36 = Vec::with_capacity(13);
    loop {
        b36.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    b36.reverse();
    let b36 = String::from_utf8_lossy(&b36).into_owned();
    let part = |r: std::ops::Range<usize>| b36.get(r).unwrap_or_default().to_owned();
    format!("talos-{}-{}", part(1..4), part(4..7))
}

/// The generated hostname the configuration asks for, when its input is there.
fn auto_hostname(config: &MachineConfig, input: &DefaultInputs<'_>) -> Option<String> {
    match config.machine.network.auto_hostname {
        AutoHostname::Addr => input.default_address.map(addr_hostname),
        AutoHostname::Stable => input.node_id.map(stable_hostname),
        AutoHostname::Off => None,
    }
}

/// `talos-` + the address with `.` as `-` and `:` removed (docs/talos.md: Defaults `addr` mode).
pub fn addr_hostname(ip: IpAddr) -> String {
    format!("talos-{}", ip.to_string().replace(':', "").replace('.', "-"))
}

/// Writes `default/…` specs.
#[derive(Debug, Default)]
pub struct DefaultConfigController {
    cache: LayerCache<DefaultKey>,
}

/// Everything the layer was written from (the owned part of [`DefaultInputs`]).
#[derive(Debug, PartialEq)]
struct DefaultKey {
    cmdline: Option<SourceVersion>,
    config: Option<SourceVersion>,
    links: LinkDigest,
    claimed_links: BTreeSet<String>,
    default_address: Option<IpAddr>,
    domainname: Option<String>,
}

impl Controller for DefaultConfigController {
    fn name(&self) -> &'static str {
        "network.DefaultConfigController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::weak(Namespace::Runtime, Kind::Cmdline),
            Input::weak(Namespace::Config, Kind::MachineConfig),
            LINKS_INPUT,
            Input::weak(Namespace::NetworkConfig, Kind::LinkSpec),
            Input::weak(Namespace::Network, Kind::NodeAddress),
            Input::weak(Namespace::Network, Kind::HostnameStatus),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        layered_outputs()
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let claimed_links = ctx
            .list::<LinkSpec>(Namespace::NetworkConfig)
            .into_iter()
            .filter(|(_, s)| {
                matches!(
                    s.layer,
                    ConfigLayer::Cmdline | ConfigLayer::Platform | ConfigLayer::Configuration
                )
            })
            .map(|(_, s)| s.name.clone())
            .collect();
        let default_address = ctx
            .get::<NodeAddress>(Namespace::Network, "default")
            .filter(|n| n.addresses.len() == 1)
            .and_then(|n| n.addresses.first().map(IpNet::addr));
        let links = link_identities(ctx);
        let key = DefaultKey {
            cmdline: source_version(ctx, Namespace::Runtime, Kind::Cmdline, CMDLINE_ID),
            config: source_version(ctx, Namespace::Config, Kind::MachineConfig, MACHINE_CONFIG_ID),
            links: links.digest(),
            claimed_links,
            default_address,
            domainname: ctx
                .get::<HostnameStatus>(Namespace::Network, HOSTNAME_ID)
                .map(|h| h.domainname.clone()),
        };
        if self.cache.is_current(&key) {
            return Ok(Next::Idle);
        }
        let specs = default_specs(&DefaultInputs {
            cmdline: ctx.get::<CmdlineNetwork>(Namespace::Runtime, CMDLINE_ID),
            config: ctx.get::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID),
            links: links.view(),
            claimed_links: key.claimed_links.clone(),
            default_address: key.default_address,
            domainname: key.domainname.clone(),
            // No node identity is kept yet: `auto: stable` waits for one.
            node_id: None,
        });
        self.cache.write(ctx, ConfigLayer::Default, key, specs)?;
        Ok(Next::Idle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{LinkStatus, LinkType};

    fn ether() -> LinkStatus {
        LinkStatus { link_type: LinkType::ETHER, ..Default::default() }
    }

    #[test]
    fn stable_hostname_matches_talos() {
        assert_eq!(stable_hostname("fGdOI05hVrx3YMagLo0Bwxa2Nm9BAswWm8XLeEj0aS4"), "talos-hwz-sw5");
    }

    #[test]
    fn addr_hostnames_match_talos() {
        assert_eq!(addr_hostname("33.11.22.44".parse().unwrap()), "talos-33-11-22-44");
        assert_eq!(addr_hostname("2001:db8::1".parse().unwrap()), "talos-2001db81");
    }

    #[test]
    fn loopback_resolvers_time_always() {
        let out = default_specs(&DefaultInputs::default());
        assert_eq!(out.addresses.len(), 1);
        assert_eq!(out.addresses[0].id(), "lo/127.0.0.1/8");
        assert_eq!(out.addresses[0].scope, Scope::HOST);
        assert_eq!(out.links, [LinkSpec::up("lo", ConfigLayer::Default)]);
        assert_eq!(out.resolvers[0].dns_servers, DEFAULT_RESOLVERS);
        assert_eq!(out.time_servers[0].time_servers, [DEFAULT_TIME_SERVER]);
        assert!(out.time_servers[0].use_nts);
        assert!(out.hostnames.is_empty(), "no default hostname without a machine config");
        assert!(out.operators.is_empty(), "no links, no DHCP");
    }

    #[test]
    fn default_link_up_and_dhcp_on_physical_links_only() {
        let eth0 = ether();
        let eth1 = ether();
        let bond = LinkStatus { kind: "bond".into(), ..ether() };
        let lo = LinkStatus { link_type: LinkType::LOOPBACK, ..Default::default() };
        let input = DefaultInputs {
            links: LinkView::new([("eth0", &eth0), ("eth1", &eth1), ("bond0", &bond), ("lo", &lo)]),
            claimed_links: ["eth1".to_owned()].into(),
            ..Default::default()
        };
        let out = default_specs(&input);
        let up: Vec<_> = out.links.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(up, ["lo", "eth0", "eth1"]);
        let ops: Vec<_> = out.operators.iter().map(|o| o.id()).collect();
        assert_eq!(ops, ["dhcp4/eth0"], "eth1 is claimed by a higher layer, bond0 is not physical");
        let dhcp = out.operators[0].dhcp4.as_ref().unwrap();
        assert_eq!((dhcp.route_metric, &dhcp.client_identifier), (1024, &ClientIdentifier::Mac));
        assert!(out.operators[0].require_up);
    }

    #[test]
    fn cmdline_ignore_and_ip_off() {
        let eth0 = ether();
        let eth1 = ether();
        let cmdline = CmdlineNetwork {
            ignore_interfaces: vec!["eth1".into()],
            default_dhcp4: false,
            ..Default::default()
        };
        let input = DefaultInputs {
            cmdline: Some(&cmdline),
            links: LinkView::new([("eth0", &eth0), ("eth1", &eth1)]),
            ..Default::default()
        };
        let out = default_specs(&input);
        let up: Vec<_> = out.links.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(up, ["lo", "eth0"], "ignored links are not brought up");
        assert!(out.operators.is_empty(), "ip=off disables default DHCP");
    }

    #[test]
    fn search_domain_from_the_node_domain_with_config_only() {
        let mut config = MachineConfig::default();
        let with = |config: Option<&MachineConfig>| {
            let input = DefaultInputs {
                config,
                domainname: Some("example.org".into()),
                ..Default::default()
            };
            default_specs(&input).resolvers[0].search_domains.clone()
        };
        assert_eq!(with(Some(&config)), ["example.org"]);
        assert!(with(None).is_empty(), "no machine config: no default search domain");
        config.machine.network.disable_search_domain = true;
        assert!(with(Some(&config)).is_empty());
    }

    #[test]
    fn hostname_from_default_address_with_config() {
        let config = MachineConfig::default();
        let input = DefaultInputs {
            config: Some(&config),
            default_address: Some("172.20.0.2".parse().unwrap()),
            ..Default::default()
        };
        let out = default_specs(&input);
        assert_eq!(out.hostnames[0].hostname, "talos-172-20-0-2");
        let no_config = DefaultInputs {
            default_address: Some("172.20.0.2".parse().unwrap()),
            ..Default::default()
        };
        assert!(default_specs(&no_config).hostnames.is_empty());
    }
}
