// SPDX-License-Identifier: Apache-2.0
//! keelson: PID 1 for Kubernetes nodes, with built-in networking.
//!
//! One binary, three modes: `init` when it is PID 1, `run` (the same runtime as an ordinary
//! process), and client commands such as `plan`.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod api;
mod config_watch;
mod demo;
mod logger;
mod logring;
mod node;
mod nodeip;
mod output;
mod pid1;
mod plan;
mod reactor;
mod run;
mod supervisor;

use std::process::ExitCode;

const USAGE: &str = "\
keelson: a minimal PID 1 for Kubernetes nodes, with built-in networking

usage:
  keelson plan --cmdline STR [--config FILE] [--link NAME[,mac=MAC][,kind=KIND][,alias=ALIAS]]...
               [-o table|yaml|json]
      Compute the network configuration this command line and config would produce, for the
      declared links, without touching the kernel.
  keelson run --root DIR [--cmdline STR] [--config FILE] [--state DIR] [--no-hostname] [--once]
              [--api-socket PATH] [--api-max-connections N]
      Run the runtime as an ordinary process in the current network namespace: configure the
      kernel, write /etc files under DIR, follow config file changes; SIGTERM stops it and
      leaves the kernel configured. --once exits as soon as everything is applied.
      --api-socket PATH serves the local API there (root only, mode 0600), to at most N
      clients at once (default 256).
  keelson get TYPE [ID] [--namespace NS] [-o table|yaml|json] [--watch] [--socket PATH]
      Show resources of a running node (addresses, routes, links, resolvers, hostname, ...).
  keelson logs [-f] [--socket PATH]
  keelson apply-config FILE [--dry-run] [--socket PATH]
      Validate a machine config, print what it adds, changes and removes, apply it.
  keelson explain TYPE ID [--socket PATH]
      Which network-config inputs set each field of a merged spec.
  keelson machine-status [--socket PATH]
  keelson help
";

fn main() -> ExitCode {
    // Multi-call: the demo image links `demo-kubelet` to this binary.
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if std::path::Path::new(&argv0).file_name().is_some_and(|n| n == "demo-kubelet") {
        return demo::main(std::env::args_os().skip(1).collect());
    }
    if std::process::id() == 1 {
        pid1::main();
    }
    logger::init();
    let mut args = std::env::args_os().skip(1);
    let Some(cmd) = args.next() else {
        eprint!("{USAGE}");
        return ExitCode::from(2);
    };
    let rest: Vec<_> = args.collect();
    match cmd.to_str() {
        Some("plan") => plan::main(rest),
        Some("run") => run::main(rest),
        Some("get") => api::client::get_main(rest),
        Some("logs") => api::client::logs_main(rest),
        Some("apply-config") => api::client::apply_main(rest),
        Some("explain") => api::client::explain_main(rest),
        Some("machine-status") => api::client::status_main(rest),
        Some("help" | "--help" | "-h") => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("keelson: unknown command {cmd:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
