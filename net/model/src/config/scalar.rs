// SPDX-License-Identifier: Apache-2.0
//! Typed scalars (IPs, CIDRs, MAC globs, kernel names, durations, ranged numbers).
//!
//! Each is parsed inside serde's visitor, so a bad value is reported by serde_yaml with its
//! own path and line, and with our message (`invalid IP address "10.0.0.x"`). Parsing after
//! the fact would attribute the error to the enclosing map.

use std::fmt;
use std::marker::PhantomData;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ipnet::IpNet;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::resource::{
    AdSelect, ArpAllTargets, ArpValidate, BondMode, BondXmitHashPolicy, ConfigLayer, FailOverMac,
    HardwareAddr, HostnameSpec, LacpRate, PrimaryReselect, RoutingTable,
};
use crate::wgkey::Key;

/// How one kind of scalar is read from its text.
pub(crate) trait ScalarParser {
    /// The parsed value.
    type Out;
    /// What serde says it expected on a wrong type ("an IP address").
    const EXPECTING: &'static str;
    /// Parse the text, or say why not.
    fn parse(s: &str) -> Result<Self::Out, String>;
}

/// `deserialize_with` for one scalar.
pub(crate) fn one<'de, P: ScalarParser, D: Deserializer<'de>>(d: D) -> Result<P::Out, D::Error> {
    d.deserialize_str(ScalarVisitor::<P>(PhantomData))
}

/// `deserialize_with` for an optional scalar (`null` is `None`); pair with `#[serde(default)]`.
pub(crate) fn opt<'de, P: ScalarParser, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<P::Out>, D::Error> {
    Ok(Option::<Scalar<P>>::deserialize(d)?.map(|s| s.0))
}

/// `deserialize_with` for a list of scalars; each element is reported at its own index.
pub(crate) fn list<'de, P: ScalarParser, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<P::Out>, D::Error> {
    Ok(Vec::<Scalar<P>>::deserialize(d)?.into_iter().map(|s| s.0).collect())
}

/// `deserialize_with` for an optional list of scalars (`null` or absent is `None`); pair with
/// `#[serde(default)]`.
pub(crate) fn opt_list<'de, P: ScalarParser, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<P::Out>>, D::Error> {
    Ok(Option::<Vec<Scalar<P>>>::deserialize(d)?.map(|v| v.into_iter().map(|s| s.0).collect()))
}

/// One scalar as a deserializable value (for `Option` and `Vec`).
struct Scalar<P: ScalarParser>(P::Out);

impl<'de, P: ScalarParser> Deserialize<'de> for Scalar<P> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one::<P, D>(d).map(Scalar)
    }
}

struct ScalarVisitor<P>(PhantomData<P>);

impl<P: ScalarParser> Visitor<'_> for ScalarVisitor<P> {
    type Value = P::Out;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(P::EXPECTING)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<P::Out, E> {
        P::parse(s).map_err(E::custom)
    }
}

/// An IP address.
pub(crate) struct Ip;
impl ScalarParser for Ip {
    type Out = IpAddr;
    const EXPECTING: &'static str = "an IP address";
    fn parse(s: &str) -> Result<IpAddr, String> {
        s.parse().map_err(|_| format!("invalid IP address {s:?}"))
    }
}

/// A listening address: `IP:PORT` (`[IPv6]:PORT`), port 1-65535.
pub(crate) struct ListenAddr;
impl ScalarParser for ListenAddr {
    type Out = std::net::SocketAddr;
    const EXPECTING: &'static str = "an address and port (IP:PORT, [IPv6]:PORT)";
    fn parse(s: &str) -> Result<std::net::SocketAddr, String> {
        let bad = || format!("invalid listen address {s:?}: expected IP:PORT or [IPv6]:PORT");
        let addr: std::net::SocketAddr = s.parse().map_err(|_| bad())?;
        if addr.port() == 0 {
            return Err(format!("invalid listen address {s:?}: port 0"));
        }
        Ok(addr)
    }
}

/// An IPv4 address.
pub(crate) struct Ipv4;
impl ScalarParser for Ipv4 {
    type Out = Ipv4Addr;
    const EXPECTING: &'static str = "an IPv4 address";
    fn parse(s: &str) -> Result<Ipv4Addr, String> {
        s.parse().map_err(|_| format!("invalid IPv4 address {s:?}"))
    }
}

/// A prefix in CIDR notation (`10.0.0.2/24`); host bits are kept.
pub(crate) struct Cidr;
impl ScalarParser for Cidr {
    type Out = IpNet;
    const EXPECTING: &'static str = "a CIDR (address/prefix)";
    fn parse(s: &str) -> Result<IpNet, String> {
        if !s.contains('/') {
            return Err(format!("{s:?} is not in CIDR notation (address/prefix)"));
        }
        s.parse().map_err(|_| format!("invalid CIDR {s:?}"))
    }
}

/// A CIDR, or a bare IP that stands for a full-length prefix (legacy interface addresses).
pub(crate) struct CidrOrIp;
impl ScalarParser for CidrOrIp {
    type Out = IpNet;
    const EXPECTING: &'static str = "an address (CIDR or IP)";
    fn parse(s: &str) -> Result<IpNet, String> {
        if s.contains('/') {
            return Cidr::parse(s);
        }
        Ip::parse(s).map(IpNet::from)
    }
}

/// `[!]<cidr>`: an include or exclude filter.
pub(crate) struct Filter;
impl ScalarParser for Filter {
    type Out = CidrFilter;
    const EXPECTING: &'static str = "a CIDR, optionally prefixed with !";
    fn parse(s: &str) -> Result<CidrFilter, String> {
        let (exclude, rest) = match s.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        Ok(CidrFilter { exclude, network: Cidr::parse(rest)? })
    }
}

/// A MAC address glob: hex digits, `:` or `-` separators, `*` and `?` wildcards.
pub(crate) struct MacGlob;
impl ScalarParser for MacGlob {
    type Out = String;
    const EXPECTING: &'static str = "a MAC address (glob)";
    fn parse(s: &str) -> Result<String, String> {
        let bad = || format!("invalid MAC address pattern {s:?}");
        if s.is_empty() || !s.chars().all(|c| c.is_ascii_hexdigit() || ":-*?".contains(c)) {
            return Err(bad());
        }
        // Without wildcards it must be a real address.
        if !s.contains(['*', '?']) {
            s.parse::<HardwareAddr>().map_err(|_| bad())?;
        }
        Ok(s.to_ascii_lowercase().replace('-', ":"))
    }
}

/// A hostname, possibly fully qualified, validated as the hostname spec will be.
pub(crate) struct Hostname;
impl ScalarParser for Hostname {
    type Out = String;
    const EXPECTING: &'static str = "a hostname";
    fn parse(s: &str) -> Result<String, String> {
        HostnameSpec::parse_fqdn(s, ConfigLayer::Configuration)
            .map(|_| s.to_owned())
            .map_err(|e| format!("invalid hostname: {e}"))
    }
}

/// A domain name (a search domain, an `/etc/hosts` alias), kept without its trailing dot.
pub(crate) struct Domain;
impl ScalarParser for Domain {
    type Out = String;
    const EXPECTING: &'static str = "a domain name";
    fn parse(s: &str) -> Result<String, String> {
        crate::names::check_domain(s)
            .map(str::to_owned)
            .map_err(|e| format!("invalid domain name: {e}"))
    }
}

/// A routing table: a number or `main`, `local`, `default`.
pub(crate) struct Table;
impl ScalarParser for Table {
    type Out = RoutingTable;
    const EXPECTING: &'static str = "a routing table (number, main, local or default)";
    fn parse(s: &str) -> Result<RoutingTable, String> {
        match s.parse::<RoutingTable>() {
            Ok(t) if t != RoutingTable::UNSPEC => Ok(t),
            _ => Err(format!(
                "invalid routing table {s:?} (a number from 1, main, local or default)"
            )),
        }
    }
}

/// A VLAN ID, 1 to 4094: 0 means "untagged" and 4095 is reserved (IEEE 802.1Q; the kernel
/// refuses it with ERANGE).
pub(crate) struct VlanId;
impl ScalarParser for VlanId {
    type Out = u16;
    const EXPECTING: &'static str = "a VLAN ID (1-4094)";
    fn parse(s: &str) -> Result<u16, String> {
        match s.parse::<u16>() {
            Ok(id) if (1..=4094).contains(&id) => Ok(id),
            _ => Err(format!("invalid VLAN ID {s:?} (must be 1 to 4094)")),
        }
    }
}

/// The smallest KubeSpan MTU Talos allows (the IPv6 minimum).
pub(crate) const KUBESPAN_MIN_MTU: u32 = 1280;

/// The KubeSpan link MTU, at least [`KUBESPAN_MIN_MTU`].
pub(crate) struct KubeSpanMtu;
impl ScalarParser for KubeSpanMtu {
    type Out = u32;
    const EXPECTING: &'static str = "an MTU";
    fn parse(s: &str) -> Result<u32, String> {
        match s.parse::<u32>() {
            Ok(mtu) if mtu >= KUBESPAN_MIN_MTU => Ok(mtu),
            Ok(mtu) => Err(format!("kubespan MTU {mtu} is below the minimum {KUBESPAN_MIN_MTU}")),
            Err(_) => Err(format!("invalid MTU {s:?}")),
        }
    }
}

/// An nftables table name: what `nft` accepts unquoted (a letter, then letters, digits, `_`,
/// `-`, `.`), at most 255 bytes.
pub(crate) struct NftTableName;
impl ScalarParser for NftTableName {
    type Out = String;
    const EXPECTING: &'static str = "an nftables table name";
    fn parse(s: &str) -> Result<String, String> {
        let ok = s.len() <= 255
            && s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if ok {
            Ok(s.to_owned())
        } else {
            Err(format!(
                "invalid nftables table name {s:?} (a letter, then letters, digits, _ - .)"
            ))
        }
    }
}

/// Is `s` padded base64 whose non-alphanumeric characters are among `extra`?
fn is_base64(s: &str, extra: &[u8]) -> bool {
    let body = s.trim_end_matches('=');
    s.len().is_multiple_of(4)
        && s.len() - body.len() <= 2
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || extra.contains(&b))
}

/// Base64 text (cluster ID and secret), standard or URL-safe alphabet (Talos generates the
/// cluster ID URL-safe); the bytes are decoded where they are used.
pub(crate) struct Base64;
impl ScalarParser for Base64 {
    type Out = String;
    const EXPECTING: &'static str = "base64 text";
    fn parse(s: &str) -> Result<String, String> {
        let ok = is_base64(s, b"+/") || is_base64(s, b"-_");
        if ok {
            Ok(s.to_owned())
        } else {
            Err(format!("invalid base64 {s:?}"))
        }
    }
}

/// Length of a WireGuard key in base64 (32 bytes, one `=` of padding).
const WG_KEY_B64_LEN: usize = 44;

fn wg_key(s: &str, what: &str) -> Result<String, String> {
    // WireGuard keys use the standard alphabet only.
    match s.len() == WG_KEY_B64_LEN && is_base64(s, b"+/") {
        true if s.ends_with('=') && !s.ends_with("==") => Ok(s.to_owned()),
        _ => Err(format!("invalid WireGuard {what} (expected 32 bytes in base64, 44 characters)")),
    }
}

/// A WireGuard private key; the text is never echoed back in an error.
pub(crate) struct WgKey;
impl ScalarParser for WgKey {
    type Out = Key;
    const EXPECTING: &'static str = "a WireGuard private key (base64)";
    fn parse(s: &str) -> Result<Self::Out, String> {
        let text = wg_key(s, "private key")?;
        Key::from_base64(&text).map_err(|e| format!("invalid WireGuard private key: {e}"))
    }
}

/// A WireGuard public key.
pub(crate) struct WgKeyPublic;
impl ScalarParser for WgKeyPublic {
    type Out = String;
    const EXPECTING: &'static str = "a WireGuard public key (base64)";
    fn parse(s: &str) -> Result<String, String> {
        wg_key(s, "public key").map_err(|e| format!("{e}: {s:?}"))
    }
}

/// `ip:port` or `[ipv6]:port`, a port other than 0.
pub(crate) struct Endpoint;
impl ScalarParser for Endpoint {
    type Out = std::net::SocketAddr;
    const EXPECTING: &'static str = "an endpoint (ip:port)";
    fn parse(s: &str) -> Result<Self::Out, String> {
        match s.parse::<std::net::SocketAddr>() {
            Ok(a) if a.port() != 0 => Ok(a),
            Ok(_) => Err(format!("endpoint {s:?} has port 0")),
            Err(_) => Err(format!("invalid endpoint {s:?} (expected ip:port or [ipv6]:port)")),
        }
    }
}

/// The longest per-endpoint timeout: Talos's endpoint connection timeout, our ceiling.
pub(crate) const ENDPOINT_TIMEOUT_MAX: Duration = Duration::from_secs(15);

/// The shortest: one second, below which a handshake round trip over a WAN may not fit.
pub(crate) const ENDPOINT_TIMEOUT_MIN: Duration = Duration::from_secs(1);

/// KubeSpan's per-endpoint timeout, a Go-style duration from 1 s to 15 s.
pub(crate) struct EndpointTimeout;
impl ScalarParser for EndpointTimeout {
    type Out = Duration;
    const EXPECTING: &'static str = "a duration from 1s to 15s";
    fn parse(s: &str) -> Result<Duration, String> {
        let d = GoDuration::parse(s)?;
        if (ENDPOINT_TIMEOUT_MIN..=ENDPOINT_TIMEOUT_MAX).contains(&d) {
            Ok(d)
        } else {
            Err(format!("endpoint timeout {s:?} is outside 1s..15s"))
        }
    }
}

/// keelson: how long the discovery service keeps what a node publishes (it republishes at
/// half of it). The service's maximum is 30 minutes, Talos's value.
pub(crate) struct DiscoveryTtl;
impl ScalarParser for DiscoveryTtl {
    type Out = Duration;
    const EXPECTING: &'static str = "a duration from 10s to 30m";
    fn parse(s: &str) -> Result<Duration, String> {
        let d = GoDuration::parse(s)?;
        if (Duration::from_secs(10)..=Duration::from_secs(30 * 60)).contains(&d) {
            Ok(d)
        } else {
            Err(format!("discovery TTL {s:?} is outside 10s..30m"))
        }
    }
}

/// `serialize_with` for a Go-style duration.
pub(crate) fn serialize_duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_go_duration(d))
}

/// A DHCPv6 DUID as hex (`00:01:00:01:...` or `00010001...`), normalized to bare lowercase
/// hex. Structural DUID checks are the DHCPv6 client's (docs/talos.md: DHCPv6).
pub(crate) struct DuidHex;
impl ScalarParser for DuidHex {
    type Out = String;
    const EXPECTING: &'static str = "a DUID in hex";
    fn parse(s: &str) -> Result<String, String> {
        let hex = s.replace(':', "");
        if hex.len() >= 4
            && hex.len().is_multiple_of(2)
            && hex.bytes().all(|b| b.is_ascii_hexdigit())
        {
            Ok(hex.to_ascii_lowercase())
        } else {
            Err(format!("invalid DUID {s:?} (expected hex bytes)"))
        }
    }
}

/// An `http://` or `https://` URL.
pub(crate) struct Url;
impl ScalarParser for Url {
    type Out = String;
    const EXPECTING: &'static str = "a URL";
    fn parse(s: &str) -> Result<String, String> {
        // `grpc://` is TLS like `https://` (Talos's `DiscoveryServiceConfig` allows it, and
        // the discovery client takes it).
        let rest = ["https://", "http://", "grpc://"].iter().find_map(|p| s.strip_prefix(p));
        match rest {
            Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(s.to_owned()),
            _ => Err(format!("invalid URL {s:?} (expected http://, https:// or grpc://)")),
        }
    }
}

/// The longest path or etcd URL a `machine.tenantNetworks` field takes.
pub(crate) const MAX_AGENT_TEXT: usize = 1024;

/// Printable text without whitespace, at most [`MAX_AGENT_TEXT`] bytes: what reaches another
/// process's command line.
fn plain(s: &str) -> bool {
    s.len() <= MAX_AGENT_TEXT && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// An absolute file path (no `..` component, no whitespace).
pub(crate) struct AbsPath;
impl ScalarParser for AbsPath {
    type Out = String;
    const EXPECTING: &'static str = "an absolute path";
    fn parse(s: &str) -> Result<String, String> {
        let shown = crate::names::escape(s, 64);
        if !s.starts_with('/') || !plain(s) || s.split('/').any(|c| c == "..") {
            return Err(format!(
                "invalid path {shown:?}: expected an absolute path without `..` or whitespace, \
                 at most {MAX_AGENT_TEXT} bytes"
            ));
        }
        Ok(s.to_owned())
    }
}

/// An etcd client URL: `http://` or `https://`, a host, no credentials, no comma (the agent
/// takes a comma-separated list).
pub(crate) struct EtcdUrl;
impl ScalarParser for EtcdUrl {
    type Out = String;
    const EXPECTING: &'static str = "an etcd URL";
    fn parse(s: &str) -> Result<String, String> {
        let rest = ["https://", "http://"].iter().find_map(|p| s.strip_prefix(p));
        let Some(rest) = rest else {
            let shown = crate::names::escape(s, 64);
            return Err(format!("invalid etcd URL {shown:?} (expected http:// or https://)"));
        };
        let authority = rest.split('/').next().unwrap_or_default();
        // Userinfo may carry a password: said without the text.
        if authority.contains('@') {
            return Err("invalid etcd URL: credentials in the URL are not accepted".into());
        }
        if authority.is_empty() || !plain(s) || s.contains(',') {
            let shown = crate::names::escape(s, 64);
            return Err(format!(
                "invalid etcd URL {shown:?}: expected a host, no comma or whitespace, at most \
                 {MAX_AGENT_TEXT} bytes"
            ));
        }
        Ok(s.to_owned())
    }
}

/// The operator's key prefix in etcd (`/keelson-operator`): `/` and printable text.
pub(crate) struct EtcdPrefix;
impl ScalarParser for EtcdPrefix {
    type Out = String;
    const EXPECTING: &'static str = "a key prefix like /keelson-operator";
    fn parse(s: &str) -> Result<String, String> {
        if !s.starts_with('/') || s.len() > 255 || !plain(s) {
            let shown = crate::names::escape(s, 64);
            return Err(format!(
                "invalid key prefix {shown:?}: expected / then printable text, at most 255 bytes"
            ));
        }
        Ok(s.to_owned())
    }
}

/// Kernel names that must be spelled by name: `802.3ad`, never its number `4`.
macro_rules! named_parser {
    ($($parser:ident => $ty:ty, $what:literal;)*) => {$(
        #[doc = concat!("A ", $what, " by name.")]
        pub(crate) struct $parser;
        impl ScalarParser for $parser {
            type Out = $ty;
            const EXPECTING: &'static str = concat!("a ", $what);
            fn parse(s: &str) -> Result<$ty, String> {
                // FromStr also takes numbers; a name round-trips through Display, a number
                // (or an unknown name) does not.
                match s.parse::<$ty>() {
                    Ok(v) if v.to_string() == s => Ok(v),
                    _ => Err(format!(concat!("invalid ", $what, " {:?}"), s)),
                }
            }
        }
    )*};
}

named_parser! {
    BondModeName => BondMode, "bond mode";
    XmitHashPolicyName => BondXmitHashPolicy, "bond xmit hash policy";
    LacpRateName => LacpRate, "LACP rate";
    ArpValidateName => ArpValidate, "ARP validate mode";
    ArpAllTargetsName => ArpAllTargets, "ARP all targets mode";
    PrimaryReselectName => PrimaryReselect, "primary reselect policy";
    FailOverMacName => FailOverMac, "fail over MAC policy";
    AdSelectName => AdSelect, "ad select policy";
}

/// A Go-style duration (`90s`, `2m`, `1h30m`, `1.5h`, `300ms`).
pub(crate) struct GoDuration;
impl ScalarParser for GoDuration {
    type Out = Duration;
    const EXPECTING: &'static str = "a duration such as 90s, 2m or 1h30m";
    fn parse(s: &str) -> Result<Duration, String> {
        parse_go_duration(s).ok_or_else(|| {
            format!("invalid duration {s:?} (expected a number and unit: ns, us, ms, s, m, h)")
        })
    }
}

fn parse_go_duration(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = s;
    let mut total: u128 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let unit_ns: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let int: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        total = total.checked_add(int.checked_mul(unit_ns)?)?;
        if !frac.is_empty() {
            let digits: u128 = frac.parse().ok()?;
            let scale = 10u128.checked_pow(u32::try_from(frac.len()).ok()?)?;
            total = total.checked_add(digits.checked_mul(unit_ns)? / scale)?;
        }
        rest = tail;
    }
    let secs = u64::try_from(total / 1_000_000_000).ok()?;
    let nanos = u32::try_from(total % 1_000_000_000).ok()?;
    Some(Duration::new(secs, nanos))
}

/// Print a duration the way Go does (`1h30m0s`, `1.5s`, `300ms`), for `serialize_with`.
pub(crate) fn format_go_duration(d: &Duration) -> String {
    let nanos = d.subsec_nanos();
    let secs = d.as_secs();
    if secs == 0 {
        return match nanos {
            0 => "0s".to_owned(),
            n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
            n if n % 1_000 == 0 => format!("{}µs", n / 1_000),
            n => format!("{n}ns"),
        };
    }
    let mut out = String::new();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if nanos == 0 {
        out.push_str(&format!("{s}s"));
    } else {
        let frac = format!("{nanos:09}");
        out.push_str(&format!("{s}.{}s", frac.trim_end_matches('0')));
    }
    out
}

/// `serialize_with` for an optional Go-style duration.
pub(crate) fn serialize_opt_duration<S: Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&format_go_duration(d)),
        None => s.serialize_none(),
    }
}

// Value types that are scalars in the YAML: they live here, beside their parsers, so the
// config structs that hold them import this module and nothing imports back.

/// `[!]<cidr>`: include a network, or exclude it with `!`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CidrFilter {
    /// `!` given.
    pub exclude: bool,
    /// The network.
    pub network: IpNet,
}

impl fmt::Display for CidrFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.exclude {
            f.write_str("!")?;
        }
        write!(f, "{}", self.network)
    }
}

impl Serialize for CidrFilter {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CidrFilter {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one::<Filter, D>(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let cases = [
            ("90s", 90_000),
            ("2m", 120_000),
            ("1h30m", 5_400_000),
            ("1.5h", 5_400_000),
            ("300ms", 300),
            ("0", 0),
            (".5s", 500),
        ];
        for (text, ms) in cases {
            assert_eq!(parse_go_duration(text), Some(Duration::from_millis(ms)), "{text}");
        }
        for bad in ["", "5", "2 m", "1d", "-1s", "s", "1..5s", "m5"] {
            assert_eq!(parse_go_duration(bad), None, "{bad:?}");
        }
        assert_eq!(format_go_duration(&Duration::from_secs(5400)), "1h30m0s");
        assert_eq!(format_go_duration(&Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_go_duration(&Duration::from_millis(300)), "300ms");
    }

    #[test]
    fn names_only() {
        assert_eq!(BondModeName::parse("802.3ad"), Ok(BondMode::LACP));
        assert!(BondModeName::parse("4").is_err());
        assert!(BondModeName::parse("802.3xx").is_err());
        assert_eq!(Table::parse("100"), Ok(RoutingTable(100)));
        assert!(Table::parse("unspec").is_err());
    }

    #[test]
    fn mac_globs() {
        assert_eq!(MacGlob::parse("AA:BB:*").as_deref(), Ok("aa:bb:*"));
        assert!(MacGlob::parse("zz:11:22:33:44:55").is_err());
        assert!(MacGlob::parse("aa:bb:c").is_err());
    }
}
