// SPDX-License-Identifier: Apache-2.0
//! Text from the network on its way to a log line.

/// Escape for one log line: control characters and non-ASCII as `\u{..}`-style escapes,
/// bounded to 512 characters.
pub fn escape(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i >= 512 {
            out.push_str("...");
            break;
        }
        if c.is_ascii_graphic() || c == ' ' {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    out
}
