// SPDX-License-Identifier: Apache-2.0
//! keelson-discovery-server: see docs/discovery-server.md.

use std::io::Write;
use std::process::ExitCode;

use discovery_server::config::{self, ConfigError};
use discovery_server::server::Server;

struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let line =
                format!("{} {}", record.level().as_str().to_ascii_lowercase(), record.args());
            // Addresses and paths come from outside: one line of plain text each.
            let line = if line.chars().any(net::names::needs_escape) {
                net::names::escape(&line, usize::MAX)
            } else {
                line
            };
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }

    fn flush(&self) {}
}

/// Many watchers mean many sockets: take the hard limit on descriptors.
fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

fn main() -> ExitCode {
    let level = std::env::var("KEELSON_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(log::LevelFilter::Info);
    if log::set_logger(&Stderr).is_ok() {
        log::set_max_level(level);
    }
    let cfg = match config::parse(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(ConfigError::Help) => {
            println!("{}", config::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("keelson-discovery-server: {e}\n{}", config::USAGE);
            return ExitCode::from(2);
        }
    };
    raise_fd_limit();
    match Server::new(cfg).and_then(Server::run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
