// SPDX-License-Identifier: Apache-2.0
//! The `log` backend of keelson's tools that are not PID 1 (the discovery server, the
//! operator): one line per record on stderr, `level message`, escaped when it holds characters
//! a terminal would act on (addresses, paths and values from outside end up in messages).

use std::io::Write;

struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let line =
                format!("{} {}", record.level().as_str().to_ascii_lowercase(), record.args());
            let line = if line.chars().any(crate::names::needs_escape) {
                crate::names::escape(&line, usize::MAX)
            } else {
                line
            };
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }

    fn flush(&self) {}
}

/// Log to stderr at the level `var` names (`error` .. `trace`), `info` when it is unset or
/// not a level. A second call keeps the first logger.
pub fn init_from_env(var: &str) {
    let level =
        std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(log::LevelFilter::Info);
    if log::set_logger(&Stderr).is_ok() {
        log::set_max_level(level);
    }
}
