// SPDX-License-Identifier: Apache-2.0
//! A stderr logger for client and `run` modes: `level target: message`, one line each.
//! `KEELSON_LOG` sets the level (error, warn, info, debug, trace; default info).

use std::io::Write;

struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let level = record.level().as_str().to_ascii_lowercase();
            let line = one_line(format!("{level} {}: {}", record.target(), record.args()));
            // A failed write to stderr has nowhere better to go.
            let _ = writeln!(std::io::stderr().lock(), "{line}");
            crate::logring::push(line);
        }
    }

    fn flush(&self) {}
}

/// A record as one line of plain text: control characters and bidirectional overrides that a
/// message carries (a name from a DHCP server, a value from a config) are escaped, so no input
/// can start a forged log line or drive the terminal. Backslashes stay as they are unless
/// something else needed escaping.
pub fn one_line(line: String) -> String {
    if line.chars().any(|c| c != '\\' && net::names::needs_escape(c)) {
        net::names::escape(&line, usize::MAX)
    } else {
        line
    }
}

pub fn init() {
    let level = std::env::var("KEELSON_LOG")
        .ok()
        .and_then(|v| v.parse::<log::LevelFilter>().ok())
        .unwrap_or(log::LevelFilter::Info);
    if log::set_logger(&Stderr).is_ok() {
        log::set_max_level(level);
    }
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn records_stay_one_line_of_plain_text() {
        assert_eq!(
            one_line("info dhcp4: bound 10.0.0.2/24".into()),
            "info dhcp4: bound 10.0.0.2/24"
        );
        assert_eq!(one_line(r"path C:\x".into()), r"path C:\x");
        let forged = one_line("warn x: name \"a\nerror pid1: forged\x1b[2J\u{202e}\"".into());
        assert!(!forged.contains('\n') && !forged.contains('\x1b') && !forged.contains('\u{202e}'));
        assert!(forged.contains(r"\n") && forged.contains(r"\u{1b}"), "{forged}");
    }
}
