// SPDX-License-Identifier: Apache-2.0
//! The Client FQDN option (39) in DNS wire format (RFC 4704).

/// RFC 4704 §4.1 flags of option 39: S = ask the server to update the AAAA record (a node
/// has no DNS credentials of its own).
const FQDN_FLAG_S: u8 = 0x01;

/// Option 39 data (RFC 4704 §4): flags, then the name in DNS wire format; a single label is
/// sent as a partial name (no root label) so the server may complete it. `None` for a name
/// with an empty or over-long label.
pub(crate) fn encode_fqdn(name: &str) -> Option<Vec<u8>> {
    let name = name.trim_end_matches('.');
    let mut data = vec![FQDN_FLAG_S];
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        let len = u8::try_from(label.len()).ok().filter(|l| (1..=63).contains(l))?;
        data.push(len);
        data.extend_from_slice(label.as_bytes());
    }
    if labels.len() > 1 {
        data.push(0);
    }
    Some(data)
}

/// The name of option 39 data: uncompressed labels (RFC 4704 §4.2), with or without the root
/// label. `None` for anything else.
pub(crate) fn decode_fqdn(data: &[u8]) -> Option<String> {
    let (_flags, mut rest) = data.split_first()?;
    let mut labels: Vec<String> = Vec::new();
    while let Some((&len, tail)) = rest.split_first() {
        if len == 0 {
            break;
        }
        let label = tail.get(..usize::from(len)).filter(|_| len <= 63)?;
        let label = std::str::from_utf8(label).ok()?;
        labels.push(label.to_owned());
        rest = tail.get(usize::from(len)..)?;
    }
    (!labels.is_empty()).then(|| labels.join("."))
}
