// SPDX-License-Identifier: Apache-2.0
//! The fields of one parameter value: splitting with offsets, the per-field error, and the
//! value parsers every parameter shares (IP, MTU, MAC, link names, hostnames, integers).

use std::fmt::Display;
use std::net::IpAddr;
use std::str::FromStr;

use crate::resource::nethelpers::HardwareAddr;
use crate::resource::{
    link_name_problem, ConfigLayer, HostnameSpec, MAX_LINK_NAME_LEN, MAX_LINK_REF_LEN,
};

/// What is wrong with one field; its `Display` is the message of a `CmdlineError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Problem {
    /// A value that does not parse or is out of range.
    #[error("invalid {what} {value:?}: {reason}")]
    Invalid { what: &'static str, value: String, reason: String },
    /// A name the grammar does not know.
    #[error("unknown {what} {value:?}")]
    Unknown { what: &'static str, value: String },
    /// A required field is empty or absent.
    #[error("missing {0}")]
    Missing(&'static str),
    /// More fields than the form allows.
    #[error("too many fields (at most {0})")]
    TooManyFields(usize),
    /// Broken syntax (brackets, stray fields).
    #[error("{0}")]
    Malformed(&'static str),
    /// The entry contradicts itself or an earlier entry.
    #[error("{0}")]
    Conflict(String),
}

/// A rejected field: the problem and the byte offset in the command line where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    /// Byte offset into the whole command line.
    pub offset: usize,
    /// What is wrong.
    pub problem: Problem,
}

impl FieldError {
    /// `problem` at the start of `field`.
    pub fn at(field: &Field<'_>, problem: Problem) -> Self {
        Self { offset: field.offset, problem }
    }

    /// `invalid <what> "<field text>": <reason>`.
    pub fn invalid(field: &Field<'_>, what: &'static str, reason: impl Display) -> Self {
        Self::at(
            field,
            Problem::Invalid { what, value: field.text.to_owned(), reason: reason.to_string() },
        )
    }
}

/// One field of a value, as a slice of the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field<'a> {
    /// The text, without the brackets of a `[...]` field.
    pub text: &'a str,
    /// Byte offset of `text` in the whole command line.
    pub offset: usize,
    /// The field was written in brackets.
    pub bracketed: bool,
}

impl<'a> Field<'a> {
    /// An empty field (stands in for an absent one).
    pub const EMPTY: Field<'static> = Field { text: "", offset: 0, bracketed: false };

    /// A field covering `text`, which starts at byte `offset` of the command line.
    pub fn new(text: &'a str, offset: usize) -> Self {
        Self { text, offset, bracketed: false }
    }

    /// The field is empty (an empty field means "not given").
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The part of this field starting at byte `at` of its text.
    pub fn tail(&self, at: usize) -> Field<'a> {
        Field::new(self.text.get(at..).unwrap_or_default(), self.offset + at)
    }

    /// Split this field's text on `sep` (no brackets).
    pub fn split(&self, sep: char) -> Vec<Field<'a>> {
        let mut out = Vec::new();
        let mut start = 0;
        for (i, c) in self.text.char_indices().filter(|&(_, c)| c == sep) {
            out.push(Field::new(&self.text[start..i], self.offset + start));
            start = i + c.len_utf8();
        }
        out.push(self.tail(start));
        out
    }
}

/// Split `value` (at byte `offset` of the command line) on `:`; a field written `[...]` may
/// contain colons (IPv6 addresses, MACs), and loses its brackets.
pub(crate) fn split_bracketed(value: &str, offset: usize) -> Result<Vec<Field<'_>>, FieldError> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = value.as_bytes();
    loop {
        if bytes.get(start) == Some(&b'[') {
            let close = value[start..].find(']').map(|i| start + i);
            let Some(close) = close else {
                return Err(FieldError::at(
                    &Field::new(&value[start..], offset + start),
                    Problem::Malformed("'[' is never closed"),
                ));
            };
            out.push(Field {
                text: &value[start + 1..close],
                offset: offset + start + 1,
                bracketed: true,
            });
            match bytes.get(close + 1) {
                None => return Ok(out),
                Some(b':') => start = close + 2,
                Some(_) => {
                    return Err(FieldError::at(
                        &Field::new(&value[close + 1..], offset + close + 1),
                        Problem::Malformed("a ']' must end its field"),
                    ))
                }
            }
            continue;
        }
        let end = value[start..].find(':').map_or(value.len(), |i| start + i);
        let field = Field::new(&value[start..end], offset + start);
        if let Some(i) = field.text.find(['[', ']']) {
            return Err(FieldError::at(
                &field.tail(i),
                Problem::Malformed("brackets must enclose a whole field"),
            ));
        }
        out.push(field);
        if end == value.len() {
            return Ok(out);
        }
        start = end + 1;
    }
}

/// A non-empty string of ASCII digits as an integer (no sign, no spaces: `u32::from_str`
/// alone would take `+5`).
pub(crate) fn parse_digits<T: FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// An optional IP address: an empty field is `None`.
pub(crate) fn parse_ip(
    field: &Field<'_>,
    what: &'static str,
) -> Result<Option<IpAddr>, FieldError> {
    if field.is_empty() {
        return Ok(None);
    }
    field.text.parse().map(Some).map_err(|e| FieldError::invalid(field, what, e))
}

/// The smallest MTU the kernel takes for Ethernet (`ETH_MIN_MTU`).
const MIN_MTU: u32 = 68;
/// The largest MTU IP can use (`IP_MAX_MTU`).
const MAX_MTU: u32 = 65535;

/// An optional MTU in `MIN_MTU..=MAX_MTU`.
pub(crate) fn parse_mtu(field: &Field<'_>) -> Result<Option<u32>, FieldError> {
    if field.is_empty() {
        return Ok(None);
    }
    match parse_digits::<u32>(field.text) {
        Some(mtu) if (MIN_MTU..=MAX_MTU).contains(&mtu) => Ok(Some(mtu)),
        _ => Err(FieldError::invalid(
            field,
            "MTU",
            format_args!("expected an integer from {MIN_MTU} to {MAX_MTU}"),
        )),
    }
}

/// An optional Ethernet MAC given as one field (`[aa:bb:..]`, `aa-bb-..`) or as the six
/// colon-separated fields it was split into.
pub(crate) fn parse_mac(parts: &[Field<'_>]) -> Result<Option<HardwareAddr>, FieldError> {
    const OCTETS: usize = 6;
    let (first, text) = match parts {
        [] => return Ok(None),
        [f] if f.is_empty() => return Ok(None),
        [f] => (*f, f.text.to_owned()),
        [f, ..] if parts.len() == OCTETS => {
            let joined: Vec<&str> = parts.iter().map(|p| p.text).collect();
            (*f, joined.join(":"))
        }
        [f, ..] if parts.len() < OCTETS => {
            let joined: Vec<&str> = parts.iter().map(|p| p.text).collect();
            return Err(invalid_mac(f, &joined.join(":"), "expected 6 octets"));
        }
        _ => {
            return Err(FieldError::at(
                &parts[OCTETS],
                Problem::Malformed("too many fields after the MAC address"),
            ))
        }
    };
    let mac: HardwareAddr = text
        .parse()
        .map_err(|_| invalid_mac(&first, &text, "expected 6 hex octets like 02:00:5e:10:00:01"))?;
    if mac.0.len() != OCTETS {
        return Err(invalid_mac(&first, &text, "expected 6 octets"));
    }
    // The kernel refuses both with EADDRNOTAVAIL; say so now instead of at apply time.
    if mac.0[0] & 1 == 1 {
        return Err(invalid_mac(&first, &text, "a multicast address"));
    }
    if mac.0.iter().all(|&b| b == 0) {
        return Err(invalid_mac(&first, &text, "the all-zero address"));
    }
    Ok(Some(mac))
}

fn invalid_mac(at: &Field<'_>, text: &str, reason: &str) -> FieldError {
    FieldError::at(
        at,
        Problem::Invalid { what: "MAC address", value: text.to_owned(), reason: reason.to_owned() },
    )
}

/// A name that refers to a link: a kernel name, alias or altname, resolved later.
pub(crate) fn check_link_ref(field: &Field<'_>, what: &'static str) -> Result<(), FieldError> {
    if field.is_empty() {
        return Err(FieldError::at(field, Problem::Missing(what)));
    }
    match link_name_problem(field.text, MAX_LINK_REF_LEN) {
        Some(why) => Err(FieldError::invalid(field, what, why)),
        None => Ok(()),
    }
}

/// A name for a link we create: a valid reference of at most 15 bytes (`IFNAMSIZ - 1`).
pub(crate) fn check_new_link_name(field: &Field<'_>, what: &'static str) -> Result<(), FieldError> {
    check_link_ref(field, what)?;
    match link_name_problem(field.text, MAX_LINK_NAME_LEN) {
        Some(why) => Err(FieldError::invalid(field, what, why)),
        None => Ok(()),
    }
}

/// A hostname or FQDN, validated as the hostname controller will (`parse_fqdn`); blanks and
/// control characters are rejected too, since no resolver can answer for them.
pub(crate) fn parse_hostname(field: &Field<'_>) -> Result<String, FieldError> {
    if let Some(c) = field.text.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(FieldError::invalid(field, "hostname", format_args!("contains {c:?}")));
    }
    HostnameSpec::parse_fqdn(field.text, ConfigLayer::Cmdline)
        .map(|_| field.text.to_owned())
        .map_err(|e| FieldError::invalid(field, "hostname", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(fields: &[Field<'_>]) -> Vec<(String, usize)> {
        fields.iter().map(|f| (f.text.to_owned(), f.offset)).collect()
    }

    #[test]
    fn brackets_protect_colons() {
        let f = split_bracketed("[2001:db8::1]::x:[aa:bb]", 10).unwrap();
        assert_eq!(
            texts(&f),
            [("2001:db8::1".into(), 11), ("".into(), 24), ("x".into(), 25), ("aa:bb".into(), 28),]
        );
        assert!(f[0].bracketed && !f[2].bracketed);
        assert_eq!(split_bracketed("a:", 0).unwrap().len(), 2);
    }

    #[test]
    fn bad_brackets_are_located() {
        let e = split_bracketed("a:[1:2", 0).unwrap_err();
        assert_eq!(e.offset, 2);
        let e = split_bracketed("[1]x", 0).unwrap_err();
        assert_eq!(e.offset, 3);
        let e = split_bracketed("a:b]", 0).unwrap_err();
        assert_eq!(e.offset, 3);
    }

    #[test]
    fn digits_only() {
        assert_eq!(parse_digits::<u32>("1500"), Some(1500));
        assert_eq!(parse_digits::<u32>("+15"), None);
        assert_eq!(parse_digits::<u8>("256"), None);
        assert_eq!(parse_digits::<u8>(""), None);
    }

    #[test]
    fn macs() {
        let six = split_bracketed("02:00:5e:10:00:01", 0).unwrap();
        assert_eq!(
            parse_mac(&six).unwrap().map(|m| m.to_string()),
            Some("02:00:5e:10:00:01".into())
        );
        let one = [Field::new("02-00-5e-10-00-01", 0)];
        assert!(parse_mac(&one).unwrap().is_some());
        let multicast = [Field::new("01:00:5e:10:00:01", 3)];
        assert_eq!(parse_mac(&multicast).unwrap_err().offset, 3);
        let short = split_bracketed("02:00:5e", 0).unwrap();
        assert!(parse_mac(&short).is_err());
        let long = split_bracketed("02:00:5e:10:00:01:02", 0).unwrap();
        assert_eq!(parse_mac(&long).unwrap_err().offset, 18);
    }

    #[test]
    fn link_names() {
        assert!(check_link_ref(&Field::new("enp0s3", 0), "device").is_ok());
        assert!(check_link_ref(&Field::new("a/b", 0), "device").is_err());
        assert!(check_new_link_name(&Field::new("bond0123456789ab", 0), "bond").is_err());
    }
}
