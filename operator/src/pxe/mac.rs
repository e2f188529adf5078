// SPDX-License-Identifier: Apache-2.0
//! A link-layer address as the boot service names machines: six bytes, written as lowercase
//! hex pairs joined by `:` (iPXE's `${net0/mac}`).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mac(pub [u8; 6]);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a MAC address (six hex pairs joined by ':' or '-')")]
pub struct MacError;

impl Mac {
    /// `52:54:00:12:34:56`, `52-54-00-12-34-56`, either case. Nothing else: the text comes
    /// from URLs and the command line, and ends up in file names and log lines.
    pub fn parse(s: &str) -> Result<Self, MacError> {
        let b = s.as_bytes();
        if b.len() != 17 {
            return Err(MacError);
        }
        let sep = b[2];
        if sep != b':' && sep != b'-' {
            return Err(MacError);
        }
        let mut out = [0u8; 6];
        for (i, o) in out.iter_mut().enumerate() {
            let at = i * 3;
            if i > 0 && b[at - 1] != sep {
                return Err(MacError);
            }
            let hi = hex(b[at]).ok_or(MacError)?;
            let lo = hex(b[at + 1]).ok_or(MacError)?;
            *o = hi << 4 | lo;
        }
        Ok(Self(out))
    }
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_separators_and_cases_parse_to_one_form() {
        let m = Mac::parse("52:54:00:AB:cd:0f").unwrap();
        assert_eq!(m.to_string(), "52:54:00:ab:cd:0f");
        assert_eq!(Mac::parse("52-54-00-ab-cd-0f"), Ok(m));
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "52:54:00:ab:cd",
            "52:54:00:ab:cd:0f:",
            "52:54-00:ab:cd:0f",
            "52:54:00:ab:cd:0g",
            "../../../etc/pa",
            "52.54.00.ab.cd.0f",
            "52:54:00:ab:c\u{e9}",
        ] {
            assert_eq!(Mac::parse(bad), Err(MacError), "{bad:?}");
        }
    }
}
