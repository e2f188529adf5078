// SPDX-License-Identifier: Apache-2.0
//! The client's identity: its DUID (RFC 8415 §11) and the IAID of its IA_NA (§12).

use crate::resource::ClientIdentifier;
use base::hex::decode_hex;

/// DUID-LLT (RFC 8415 §11.2).
const DUID_LLT: u16 = 1;
/// DUID-LL (RFC 8415 §11.4).
const DUID_LL: u16 = 3;
/// DUID-UUID (RFC 6355).
const DUID_UUID: u16 = 4;
/// DUID-EN (RFC 8415 §11.3).
const DUID_EN: u16 = 2;
/// The IANA hardware type of Ethernet.
const HTYPE_ETHERNET: u16 = 1;
/// RFC 8415 §11.1: "The DUID is ... at most 128 octets long (not including the type code)".
const MAX_DUID_LEN: usize = 130;

/// How the client names itself.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub enum DuidConfig {
    /// DUID-LL from the link's MAC: stable across boots without any stored state.
    #[default]
    LinkLayer,
    /// DUID-LLT with this time (seconds since 2000-01-01 UTC). The operator must persist the
    /// time for the DUID to stay stable; the engine never reads the clock.
    LinkLayerTime(u32),
    /// Raw DUID bytes from the configuration (`dhcpOptions.duidv6`).
    Raw(Vec<u8>),
}

impl DuidConfig {
    /// The policy for an operator's client identifier setting: `none` and `mac` both give
    /// DUID-LL (keelson's stable default, where Talos uses a fresh DUID-LLT), `duid:<hex>` the
    /// configured bytes, checked by [`DuidConfig::build`].
    pub fn from_client_identifier(id: &ClientIdentifier) -> Self {
        match id {
            ClientIdentifier::None | ClientIdentifier::Mac => DuidConfig::LinkLayer,
            ClientIdentifier::Duid(hex) => match decode_hex(hex) {
                Some(bytes) => DuidConfig::Raw(bytes),
                None => {
                    log::warn!("dhcp6: client identifier {hex:?} is not hex; using DUID-LL");
                    DuidConfig::LinkLayer
                }
            },
        }
    }

    /// The DUID bytes for a link with this MAC. A configured DUID that fails [`check_duid`] is
    /// logged and replaced by DUID-LL (docs/talos.md: DHCPv6: invalid input is logged and ignored).
    pub fn build(&self, mac: &[u8; 6]) -> Vec<u8> {
        match self {
            DuidConfig::LinkLayer => duid_ll(mac),
            DuidConfig::LinkLayerTime(time) => {
                let mut duid = Vec::with_capacity(14);
                duid.extend_from_slice(&DUID_LLT.to_be_bytes());
                duid.extend_from_slice(&HTYPE_ETHERNET.to_be_bytes());
                duid.extend_from_slice(&time.to_be_bytes());
                duid.extend_from_slice(mac);
                duid
            }
            DuidConfig::Raw(bytes) => match check_duid(bytes) {
                Ok(()) => bytes.clone(),
                Err(why) => {
                    log::warn!("dhcp6: configured DUID ignored ({why}); using DUID-LL");
                    duid_ll(mac)
                }
            },
        }
    }
}

fn duid_ll(mac: &[u8; 6]) -> Vec<u8> {
    let mut duid = Vec::with_capacity(10);
    duid.extend_from_slice(&DUID_LL.to_be_bytes());
    duid.extend_from_slice(&HTYPE_ETHERNET.to_be_bytes());
    duid.extend_from_slice(mac);
    duid
}

/// Structural checks of RFC 8415 §11: a type and at least one byte of identifier, at most
/// 130 bytes, and the fixed parts of the known types present. Unknown types are accepted:
/// DUIDs are opaque to servers (§11).
pub fn check_duid(duid: &[u8]) -> Result<(), &'static str> {
    if duid.len() < 3 {
        return Err("shorter than 3 bytes");
    }
    if duid.len() > MAX_DUID_LEN {
        return Err("longer than 130 bytes");
    }
    let kind = u16::from_be_bytes([duid[0], duid[1]]);
    let ok = match kind {
        DUID_LLT => duid.len() > 8,
        DUID_EN => duid.len() > 6,
        DUID_LL => duid.len() > 4,
        DUID_UUID => duid.len() == 18,
        0 => false,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err("too short for its DUID type")
    }
}

/// The IAID: the last four bytes of the MAC, as Talos does (docs/talos.md: DHCPv6), so it is stable
/// across boots and differs between links.
pub fn iaid_from_mac(mac: &[u8; 6]) -> u32 {
    u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]])
}
