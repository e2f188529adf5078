// SPDX-License-Identifier: Apache-2.0
//! Small kernel-facing value types shared by every network resource: address family, scope,
//! routing table, route protocol/type, flag sets, link (ARPHRD) type and MAC addresses.
//!
//! Each serializes the way `talosctl get -o yaml` prints it (`inet4`, `global`, `main`,
//! `permanent`), and parses back from the same text, so YAML round-trips.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// Implements `Serialize`/`Deserialize` through `Display`/`FromStr`.
macro_rules! serde_via_str {
    ($ty:ty) => {
        impl ::serde::Serialize for $ty {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <::std::string::String as ::serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use serde_via_str;

/// A value that is not one of the names (or numbers) a field accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}")]
pub struct ParseNameError {
    /// What was being parsed ("scope", "routing table", ...).
    pub what: &'static str,
    /// The rejected text.
    pub value: String,
}

impl ParseNameError {
    pub(crate) fn new(what: &'static str, value: &str) -> Self {
        Self { what, value: value.to_owned() }
    }
}

/// A numeric kernel value with well-known names; unknown numbers print as decimals.
macro_rules! named_number {
    ($(#[$m:meta])* $name:ident($int:ty), $what:literal, { $($(#[$cm:meta])* $cname:ident = $val:literal => $text:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $int);
        impl $name {
            $( $(#[$cm])* pub const $cname: Self = Self($val); )*
            /// The well-known name, `None` for a number without one (printed as a decimal).
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( $val => Some($text), )*
                    _ => None,
                }
            }
        }
        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                match self.name() {
                    Some(text) => f.write_str(text),
                    None => write!(f, "{}", self.0),
                }
            }
        }
        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::fmt::Display::fmt(self, f)
            }
        }
        impl ::std::str::FromStr for $name {
            type Err = $crate::resource::nethelpers::ParseNameError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $( $text => Ok(Self($val)), )*
                    _ => s.parse::<$int>().map(Self).map_err(|_| $crate::resource::nethelpers::ParseNameError::new($what, s)),
                }
            }
        }
        serde_via_str!($name);
    };
}
pub(crate) use named_number;

/// Address family, printed `inet4`/`inet6` as in Talos IDs.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub enum Family {
    /// AF_INET (2).
    #[default]
    Inet4,
    /// AF_INET6 (10).
    Inet6,
}

impl Family {
    /// The family of an IP address.
    pub fn of(ip: &IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Family::Inet4,
            IpAddr::V6(_) => Family::Inet6,
        }
    }

    /// The kernel's AF_* number.
    pub fn af(self) -> u8 {
        match self {
            Family::Inet4 => 2,
            Family::Inet6 => 10,
        }
    }

    /// The unspecified address of this family.
    pub fn unspecified(self) -> IpAddr {
        match self {
            Family::Inet4 => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            Family::Inet6 => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        }
    }
}

impl Family {
    /// `inet4` or `inet6`.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Inet4 => "inet4",
            Family::Inet6 => "inet6",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Family {
    type Err = ParseNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "inet4" => Ok(Family::Inet4),
            "inet6" => Ok(Family::Inet6),
            _ => Err(ParseNameError::new("family", s)),
        }
    }
}
serde_via_str!(Family);

named_number!(
    /// `rtm_scope` / `ifa_scope`.
    Scope(u8), "scope", {
        /// Universe.
        GLOBAL = 0 => "global",
        /// Site.
        SITE = 200 => "site",
        /// Link.
        LINK = 253 => "link",
        /// Host.
        HOST = 254 => "host",
        /// Nowhere.
        NOWHERE = 255 => "nowhere",
    }
);

named_number!(
    /// A routing table number; `main`, `local`, `default` and `unspec` print by name.
    RoutingTable(u32), "routing table", {
        /// 0.
        UNSPEC = 0 => "unspec",
        /// 253.
        DEFAULT = 253 => "default",
        /// 254.
        MAIN = 254 => "main",
        /// 255.
        LOCAL = 255 => "local",
    }
);

named_number!(
    /// `rtm_protocol`: who installed a route.
    RouteProtocol(u8), "route protocol", {
        /// 0.
        UNSPEC = 0 => "unspec",
        /// 1.
        REDIRECT = 1 => "redirect",
        /// 2.
        KERNEL = 2 => "kernel",
        /// 3: installed during boot (cmdline, DHCP).
        BOOT = 3 => "boot",
        /// 4: installed by the administrator (config).
        STATIC = 4 => "static",
        /// 9.
        RA = 9 => "ra",
        /// 16.
        DHCP = 16 => "dhcp",
    }
);

named_number!(
    /// `rtm_type`.
    RouteType(u8), "route type", {
        /// 0.
        UNSPEC = 0 => "unspec",
        /// 1.
        UNICAST = 1 => "unicast",
        /// 2.
        LOCAL = 2 => "local",
        /// 3.
        BROADCAST = 3 => "broadcast",
        /// 4.
        ANYCAST = 4 => "anycast",
        /// 5.
        MULTICAST = 5 => "multicast",
        /// 6.
        BLACKHOLE = 6 => "blackhole",
        /// 7.
        UNREACHABLE = 7 => "unreachable",
        /// 8.
        PROHIBIT = 8 => "prohibit",
        /// 9.
        THROW = 9 => "throw",
        /// 10.
        NAT = 10 => "nat",
        /// 11.
        XRESOLVE = 11 => "xresolve",
    }
);

named_number!(
    /// Link-layer type (`ARPHRD_*`).
    LinkType(u16), "link type", {
        /// Ethernet (1).
        ETHER = 1 => "ether",
        /// Loopback (772).
        LOOPBACK = 772 => "loopback",
        /// No header (65534), e.g. WireGuard.
        NONE = 65534 => "none",
    }
);

/// A set of flags printed as comma-separated names (unknown bits print in hex).
macro_rules! flag_set {
    ($(#[$m:meta])* $name:ident($int:ty), $what:literal, { $($(#[$cm:meta])* $cname:ident = $val:literal => $text:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $int);
        impl $name {
            $( $(#[$cm])* pub const $cname: Self = Self($val); )*
            const NAMES: &'static [($int, &'static str)] = &[$(($val, $text)),*];
            /// True when every bit of `other` is set.
            pub fn contains(self, other: Self) -> bool { self.0 & other.0 == other.0 }
            /// The empty set.
            pub fn is_empty(self) -> bool { self.0 == 0 }
        }
        impl std::ops::BitOr for $name {
            type Output = Self;
            fn bitor(self, rhs: Self) -> Self { Self(self.0 | rhs.0) }
        }
        impl std::ops::BitAnd for $name {
            type Output = Self;
            fn bitand(self, rhs: Self) -> Self { Self(self.0 & rhs.0) }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut rest = self.0;
                let mut first = true;
                for (bit, text) in Self::NAMES {
                    if rest & bit != 0 {
                        if !first { f.write_str(",")?; }
                        f.write_str(text)?;
                        rest &= !bit;
                        first = false;
                    }
                }
                if rest != 0 {
                    if !first { f.write_str(",")?; }
                    write!(f, "{rest:#x}")?;
                }
                Ok(())
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({self})", stringify!($name))
            }
        }
        impl FromStr for $name {
            type Err = ParseNameError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let mut v: $int = 0;
                for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    if let Some((bit, _)) = Self::NAMES.iter().find(|(_, t)| *t == part) {
                        v |= bit;
                    } else if let Some(hex) = part.strip_prefix("0x") {
                        v |= <$int>::from_str_radix(hex, 16).map_err(|_| ParseNameError::new($what, s))?;
                    } else {
                        return Err(ParseNameError::new($what, s));
                    }
                }
                Ok(Self(v))
            }
        }
        serde_via_str!($name);
    };
}

flag_set!(
    /// `IFA_F_*` address flags.
    AddressFlags(u32), "address flags", {
        /// IFA_F_SECONDARY.
        SECONDARY = 0x01 => "secondary",
        /// IFA_F_NODAD.
        NODAD = 0x02 => "nodad",
        /// IFA_F_OPTIMISTIC.
        OPTIMISTIC = 0x04 => "optimistic",
        /// IFA_F_DADFAILED.
        DADFAILED = 0x08 => "dadfailed",
        /// IFA_F_HOMEADDRESS.
        HOMEADDRESS = 0x10 => "homeaddress",
        /// IFA_F_DEPRECATED.
        DEPRECATED = 0x20 => "deprecated",
        /// IFA_F_TENTATIVE.
        TENTATIVE = 0x40 => "tentative",
        /// IFA_F_PERMANENT.
        PERMANENT = 0x80 => "permanent",
        /// IFA_F_MANAGETEMPADDR.
        MNGTMPADDR = 0x100 => "mngmtmpaddr",
        /// IFA_F_NOPREFIXROUTE.
        NOPREFIXROUTE = 0x200 => "noprefixroute",
        /// IFA_F_MCAUTOJOIN.
        MCAUTOJOIN = 0x400 => "mcautojoin",
        /// IFA_F_STABLE_PRIVACY.
        STABLE_PRIVACY = 0x800 => "stable-privacy",
    }
);

impl AddressFlags {
    /// Flags a spec may set; merge drops the others with a warning (docs/talos.md: Merge).
    pub const MANAGED: Self = Self(0x80 | 0x02 | 0x10 | 0x100 | 0x200 | 0x400);
}

flag_set!(
    /// `RTM_F_*` / `RTNH_F_*` route flags.
    RouteFlags(u32), "route flags", {
        /// RTNH_F_DEAD.
        DEAD = 0x1 => "dead",
        /// RTNH_F_PERVASIVE.
        PERVASIVE = 0x2 => "pervasive",
        /// RTNH_F_ONLINK.
        ONLINK = 0x4 => "onlink",
        /// RTNH_F_OFFLOAD.
        OFFLOAD = 0x8 => "offload",
        /// RTNH_F_LINKDOWN.
        LINKDOWN = 0x10 => "linkdown",
        /// RTNH_F_UNRESOLVED.
        UNRESOLVED = 0x20 => "unresolved",
        /// RTM_F_NOTIFY.
        NOTIFY = 0x100 => "notify",
        /// RTM_F_CLONED.
        CLONED = 0x200 => "cloned",
        /// RTM_F_EQUALIZE.
        EQUALIZE = 0x400 => "equalize",
        /// RTM_F_PREFIX.
        PREFIX = 0x800 => "prefix",
    }
);

flag_set!(
    /// `IFF_*` interface flags.
    LinkFlags(u32), "link flags", {
        /// IFF_UP.
        UP = 0x1 => "UP",
        /// IFF_BROADCAST.
        BROADCAST = 0x2 => "BROADCAST",
        /// IFF_DEBUG.
        DEBUG = 0x4 => "DEBUG",
        /// IFF_LOOPBACK.
        LOOPBACK = 0x8 => "LOOPBACK",
        /// IFF_POINTOPOINT.
        POINTOPOINT = 0x10 => "POINTOPOINT",
        /// IFF_NOTRAILERS.
        NOTRAILERS = 0x20 => "NOTRAILERS",
        /// IFF_RUNNING.
        RUNNING = 0x40 => "RUNNING",
        /// IFF_NOARP.
        NOARP = 0x80 => "NOARP",
        /// IFF_PROMISC.
        PROMISC = 0x100 => "PROMISC",
        /// IFF_ALLMULTI.
        ALLMULTI = 0x200 => "ALLMULTI",
        /// IFF_MASTER.
        MASTER = 0x400 => "MASTER",
        /// IFF_SLAVE.
        SLAVE = 0x800 => "SLAVE",
        /// IFF_MULTICAST.
        MULTICAST = 0x1000 => "MULTICAST",
        /// IFF_PORTSEL.
        PORTSEL = 0x2000 => "PORTSEL",
        /// IFF_AUTOMEDIA.
        AUTOMEDIA = 0x4000 => "AUTOMEDIA",
        /// IFF_DYNAMIC.
        DYNAMIC = 0x8000 => "DYNAMIC",
        /// IFF_LOWER_UP.
        LOWER_UP = 0x10000 => "LOWER_UP",
        /// IFF_DORMANT.
        DORMANT = 0x20000 => "DORMANT",
        /// IFF_ECHO.
        ECHO = 0x40000 => "ECHO",
    }
);

/// A 6-byte (or other length) hardware address, printed as `aa:bb:cc:dd:ee:ff`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct HardwareAddr(pub Vec<u8>);

impl fmt::Display for HardwareAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for HardwareAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for HardwareAddr {
    type Err = ParseNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Ok(Self::default());
        }
        s.split([':', '-'])
            .map(|p| if p.len() == 2 { u8::from_str_radix(p, 16).ok() } else { None })
            .collect::<Option<Vec<u8>>>()
            .filter(|v| v.len() >= 2)
            .map(Self)
            .ok_or_else(|| ParseNameError::new("hardware address", s))
    }
}
serde_via_str!(HardwareAddr);

/// Serde helpers for `skip_serializing_if`.
pub(crate) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_numbers_round_trip() {
        assert_eq!(RoutingTable::MAIN.to_string(), "main");
        assert_eq!(RoutingTable(180).to_string(), "180");
        assert_eq!("180".parse::<RoutingTable>().unwrap(), RoutingTable(180));
        assert_eq!("local".parse::<RoutingTable>().unwrap(), RoutingTable::LOCAL);
        assert_eq!("link".parse::<Scope>().unwrap(), Scope::LINK);
        assert!("sideways".parse::<Scope>().is_err());
        assert_eq!(RouteProtocol::BOOT.to_string(), "boot");
    }

    #[test]
    fn flags_print_and_parse() {
        let f = AddressFlags::PERMANENT | AddressFlags::NODAD;
        assert_eq!(f.to_string(), "nodad,permanent");
        assert_eq!("nodad,permanent".parse::<AddressFlags>().unwrap(), f);
        assert_eq!(AddressFlags(0x80 | 0x10000).to_string(), "permanent,0x10000");
        assert_eq!("permanent,0x10000".parse::<AddressFlags>().unwrap(), AddressFlags(0x10080));
        assert!("bogus".parse::<AddressFlags>().is_err());
    }

    #[test]
    fn hardware_addr() {
        let mac: HardwareAddr = "2e:1a:B6:53:81:69".parse().unwrap();
        assert_eq!(mac.0, vec![0x2e, 0x1a, 0xb6, 0x53, 0x81, 0x69]);
        assert_eq!(mac.to_string(), "2e:1a:b6:53:81:69");
        assert!("2e:1a:b6:53:81".parse::<HardwareAddr>().is_ok());
        assert!("2e:1a:zz".parse::<HardwareAddr>().is_err());
        assert!("2e1ab6".parse::<HardwareAddr>().is_err());
    }
}
