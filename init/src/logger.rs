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
            let line = format!("{level} {}: {}", record.target(), record.args());
            // A failed write to stderr has nowhere better to go.
            let _ = writeln!(std::io::stderr().lock(), "{line}");
            crate::logring::push(line);
        }
    }

    fn flush(&self) {}
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
