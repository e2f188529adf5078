// SPDX-License-Identifier: Apache-2.0
//! Logging for PID 1: every record goes to `/dev/kmsg` (so it shows on the serial console with
//! the kernel's timestamp, prefixed `keelson:`) and into the log ring that `keelson logs`
//! serves ([`crate::logring`]).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Mutex;

/// The kernel truncates longer records; cut them ourselves, on a character boundary.
const MAX_RECORD: usize = 900;

struct Kmsg {
    file: Mutex<Option<File>>,
}

static LOGGER: Kmsg = Kmsg { file: Mutex::new(None) };

/// syslog priority of a level (`<3>` error ... `<7>` debug).
fn priority(level: log::Level) -> u8 {
    match level {
        log::Level::Error => 3,
        log::Level::Warn => 4,
        log::Level::Info => 6,
        log::Level::Debug | log::Level::Trace => 7,
    }
}

/// `keelson: message` for PID 1's own lines, `keelson: target: message` for components.
pub fn format_line(target: &str, message: &str) -> String {
    if target == "pid1" {
        format!("keelson: {message}")
    } else {
        format!("keelson: {target}: {message}")
    }
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_RECORD {
        let mut cut = MAX_RECORD;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str(" [...]");
    }
    s
}

impl log::Log for Kmsg {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let message = crate::logger::one_line(record.args().to_string());
        let line = truncate(format_line(record.target(), &message));
        if let Ok(mut f) = self.file.lock() {
            if let Some(f) = f.as_mut() {
                // One write is one kmsg record; a failed write has nowhere better to go.
                let _ = f.write_all(format!("<{}>{line}\n", priority(record.level())).as_bytes());
            }
        }
        crate::logring::push(line);
    }

    fn flush(&self) {}
}

/// Open `/dev/kmsg` (after `/dev` is mounted) and install the logger. Safe to call when
/// `/dev/kmsg` cannot be opened: records then only reach the ring buffer.
pub fn init(level: log::LevelFilter) {
    let file = OpenOptions::new().write(true).open("/dev/kmsg").ok();
    if let Ok(mut slot) = LOGGER.file.lock() {
        *slot = file;
    }
    // Fails only if a logger is already set (a second call): the level still applies.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

/// Write a line straight to `/dev/kmsg`, bypassing the logger (the panic hook uses this, as
/// the logger's locks may be held by the panicking code).
pub fn emergency(line: &str) {
    if let Ok(mut f) = OpenOptions::new().write(true).open("/dev/kmsg") {
        let _ = f.write_all(format!("<2>keelson: {line}\n").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_prefixed_and_truncated_on_char_boundaries() {
        assert_eq!(format_line("pid1", "network ready"), "keelson: network ready");
        assert_eq!(
            format_line("network.RouteSpecController", "x"),
            "keelson: network.RouteSpecController: x"
        );
        let long = "é".repeat(1000);
        let t = truncate(long);
        assert!(t.len() <= MAX_RECORD + 6 && t.ends_with("[...]"));
    }
}
