// SPDX-License-Identifier: Apache-2.0
//! The one check for names that reach `/etc` files, the kernel's UTS names and the terminal:
//! hostnames, domains (search domains, the hostname's domain) and `/etc/hosts` aliases.
//!
//! Rules (RFC 1123 §2.1 on top of RFC 952, with RFC 1035 §2.3.4 lengths):
//! * a label is 1 to 63 bytes of ASCII letters, digits and `-`, neither starting nor ending
//!   with `-`;
//! * a name is labels joined by `.`, at most 253 bytes, one trailing dot (the root) ignored;
//! * the host label (the first label of a hostname) is exactly that; labels of domains and
//!   aliases may also contain `_`, which real DNS zones use (RFC 2181 §11 allows any octet;
//!   Active Directory domains and service labels carry underscores) and which is inert in
//!   `resolv.conf` and `hosts` lines;
//! * the domain given to `setdomainname(2)` is at most 64 bytes (`__NEW_UTS_LEN`), so a
//!   longer one is refused here instead of failing in the kernel on every reconcile.
//!
//! Anything else (blanks, control characters, `#`, non-ASCII) is refused, so a value that
//! passes can be written as one token of one line.

use std::fmt;

/// The longest label (RFC 1035 §2.3.4).
pub const MAX_LABEL: usize = 63;
/// The longest name in text form without the trailing dot (RFC 1035 §2.3.4: 255 octets on the
/// wire, i.e. 253 characters).
pub const MAX_NAME: usize = 253;
/// The longest hostname or domain name the kernel keeps (`__NEW_UTS_LEN`, sethostname(2)).
pub const MAX_UTS: usize = 64;

/// What a name is checked as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    /// A host label or a fully qualified hostname: its first label allows no `_`.
    Hostname,
    /// A domain, a search domain or a hosts alias: `_` allowed in every label.
    Domain,
}

/// Why a name was refused. The offending content is never echoed beyond one escaped
/// character, so a hostile value cannot reach a log line or terminal through the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Nothing (or only a dot).
    #[error("is empty")]
    Empty,
    /// Over the total length.
    #[error("is {len} bytes long, more than {max}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Two dots in a row, or a leading dot.
    #[error("label {index} is empty")]
    EmptyLabel {
        /// 1-based label position.
        index: usize,
    },
    /// A label over 63 bytes.
    #[error("label {index} is {len} bytes long, more than 63")]
    LabelTooLong {
        /// 1-based label position.
        index: usize,
        /// Its length in bytes.
        len: usize,
    },
    /// A character outside the label alphabet.
    #[error("label {index} contains {}", Char(*ch))]
    BadChar {
        /// 1-based label position.
        index: usize,
        /// The first offending character.
        ch: char,
    },
    /// A label starting or ending with `-`.
    #[error("label {index} starts or ends with '-'")]
    Hyphen {
        /// 1-based label position.
        index: usize,
    },
    /// A domain `setdomainname(2)` would refuse.
    #[error("domain part is {len} bytes long, more than {MAX_UTS} (the kernel's limit)")]
    DomainTooLong {
        /// Its length in bytes.
        len: usize,
    },
}

/// A character for a message: printable ASCII quoted, anything else as its escape.
struct Char(char);

impl fmt::Display for Char {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// Check one label at 1-based `index`.
fn check_label(label: &str, index: usize, underscore: bool) -> Result<(), NameError> {
    if label.is_empty() {
        return Err(NameError::EmptyLabel { index });
    }
    if let Some(ch) = label
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || c == '-' || (underscore && c == '_')))
    {
        return Err(NameError::BadChar { index, ch });
    }
    if label.len() > MAX_LABEL {
        return Err(NameError::LabelTooLong { index, len: label.len() });
    }
    if label.starts_with('-') || label.ends_with('-') {
        return Err(NameError::Hyphen { index });
    }
    Ok(())
}

/// Check a name; returns it without its trailing dot.
pub fn check(name: &str, kind: NameKind) -> Result<&str, NameError> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    // Characters first: a newline in an over-long value is the more useful report.
    for (i, label) in name.split('.').enumerate() {
        let underscore = !(kind == NameKind::Hostname && i == 0);
        match check_label(label, i + 1, underscore) {
            Err(e @ NameError::BadChar { .. }) => return Err(e),
            _ => continue,
        }
    }
    if name.len() > MAX_NAME {
        return Err(NameError::TooLong { len: name.len(), max: MAX_NAME });
    }
    for (i, label) in name.split('.').enumerate() {
        check_label(label, i + 1, !(kind == NameKind::Hostname && i == 0))?;
    }
    Ok(name)
}

/// A domain or search domain, without its trailing dot.
pub fn check_domain(name: &str) -> Result<&str, NameError> {
    check(name, NameKind::Domain)
}

/// A hostname, possibly fully qualified: split into the host label and its domain (empty
/// when there is none), each fit for `sethostname(2)`/`setdomainname(2)`.
pub fn split_hostname(fqdn: &str) -> Result<(&str, &str), NameError> {
    let fqdn = check(fqdn, NameKind::Hostname)?;
    let (host, domain) = fqdn.split_once('.').unwrap_or((fqdn, ""));
    if domain.len() > MAX_UTS {
        return Err(NameError::DomainTooLong { len: domain.len() });
    }
    Ok((host, domain))
}

/// Whether `name` is a valid domain or alias as written (no trailing-dot normalization), for
/// renderers that must never emit anything else.
pub fn is_domain(name: &str) -> bool {
    check_domain(name).is_ok_and(|n| n.len() == name.len())
}

/// Whether `name` is a valid host label.
pub fn is_host_label(name: &str) -> bool {
    !name.contains('.') && check(name, NameKind::Hostname).is_ok_and(|n| n.len() == name.len())
}

/// Text for a log line or terminal: control characters (C0, DEL, C1), bidirectional
/// overrides and isolates, and `\` escaped as Rust escapes (`\n`, `\u{1b}`, `\u{202e}`),
/// everything else as it is; at most `max` characters of input, then `…`.
pub fn escape(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters a terminal interprets rather than shows.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || c == '\\'
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names() {
        assert_eq!(check_domain("example.com."), Ok("example.com"));
        assert_eq!(check_domain("_ldap._tcp.corp-1.example"), Ok("_ldap._tcp.corp-1.example"));
        assert_eq!(split_hostname("node-1.example.org."), Ok(("node-1", "example.org")));
        assert_eq!(split_hostname("NODE1"), Ok(("NODE1", "")));
        assert_eq!(split_hostname("1node"), Ok(("1node", "")), "RFC 1123 allows a leading digit");
        assert!(is_domain(
            &["a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61)].join(".")
        ));
    }

    #[test]
    fn refusals_say_which_label_and_why() {
        let nl = "x registry.local\nnameserver 6.6.6.6";
        assert_eq!(check_domain(nl), Err(NameError::BadChar { index: 1, ch: ' ' }));
        assert_eq!(check_domain(nl).map_err(|e| e.to_string()), Err("label 1 contains ' '".into()));
        assert_eq!(
            split_hostname("node\n6.6.6.6 registry.local").map_err(|e| e.to_string()),
            Err("label 1 contains '\\n'".into())
        );
        assert_eq!(
            check_domain("ok.\u{1b}[2J").map_err(|e| e.to_string()),
            Err("label 2 contains '\\u{1b}'".into())
        );
        assert_eq!(split_hostname("my_host"), Err(NameError::BadChar { index: 1, ch: '_' }));
        assert_eq!(check_domain("a..b"), Err(NameError::EmptyLabel { index: 2 }));
        assert_eq!(check_domain(".a"), Err(NameError::EmptyLabel { index: 1 }));
        assert_eq!(check_domain(""), Err(NameError::Empty));
        assert_eq!(check_domain("."), Err(NameError::Empty));
        assert_eq!(check_domain("a-.b"), Err(NameError::Hyphen { index: 1 }));
        assert_eq!(check_domain("a.-b"), Err(NameError::Hyphen { index: 2 }));
        assert_eq!(
            check_domain(&format!("a.{}", "b".repeat(64))),
            Err(NameError::LabelTooLong { index: 2, len: 64 })
        );
        let long = ["a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(62)].join(".");
        assert_eq!(check_domain(&long), Err(NameError::TooLong { len: 254, max: 253 }));
        assert_eq!(check_domain("café.example"), Err(NameError::BadChar { index: 1, ch: 'é' }));
        assert_eq!(check_domain("a#b"), Err(NameError::BadChar { index: 1, ch: '#' }));
        assert_eq!(check_domain("a\0"), Err(NameError::BadChar { index: 1, ch: '\0' }));
        assert_eq!(check_domain("a.b.."), Err(NameError::EmptyLabel { index: 3 }));
    }

    #[test]
    fn hostname_domain_fits_the_kernel() {
        let domain64 = format!("{}.{}", "d".repeat(40), "e".repeat(23));
        assert_eq!(domain64.len(), 64);
        assert!(split_hostname(&format!("node.{domain64}")).is_ok());
        let domain65 = format!("{}.{}", "d".repeat(40), "e".repeat(24));
        assert_eq!(
            split_hostname(&format!("node.{domain65}")),
            Err(NameError::DomainTooLong { len: 65 })
        );
        // A search domain is not given to the kernel: only the DNS limits apply.
        assert!(check_domain(&domain65).is_ok());
    }

    #[test]
    fn exact_forms_for_renderers() {
        assert!(is_domain("example.com"));
        assert!(!is_domain("example.com."), "renderers get normalized names");
        assert!(is_host_label("node-1"));
        assert!(!is_host_label("node.example"));
        assert!(!is_host_label("node_1"));
    }

    #[test]
    fn escape_for_terminals() {
        assert_eq!(escape("plain-text é", 100), "plain-text é");
        assert_eq!(
            escape("a\nb\x1b[31m\u{9b}\u{202e}\\", 100),
            "a\\nb\\u{1b}[31m\\u{9b}\\u{202e}\\\\"
        );
        assert_eq!(escape("abcdef", 3), "abc…");
        assert_eq!(escape("\x7f", 10), "\\u{7f}");
    }
}
