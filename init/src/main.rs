// SPDX-License-Identifier: Apache-2.0
//! keelson: PID 1 for Kubernetes nodes, with built-in networking.
//!
//! One binary, three modes: `init` when it is PID 1, `run` (the same runtime as an ordinary
//! process), and client commands such as `plan`.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod api;
mod config_cmd;
mod config_watch;
mod ifnames_cmd;
mod logger;
mod logring;
mod machine;
mod node;
mod nodeip;
mod output;
mod pid1;
mod plan;
mod reactor;
mod run;
mod supervisor;

use std::process::ExitCode;

/// Each command's usage, as `keelson help` prints it and `keelson CMD --help` prints its own.
const COMMANDS: &[(&str, &str)] = &[
    (
        "plan",
        "  keelson plan --cmdline STR [--config FILE] [--link NAME[,mac=MAC][,kind=KIND][,alias=ALIAS]]...
               [-o table|yaml|json]
      Compute the network configuration this command line and config would produce, for the
      declared links, without touching the kernel.
",
    ),
    (
        "config",
        "  keelson config validate FILE [--mode metal|cloud]
      Check a configuration (a v1alpha1 document, typed documents, or both): every problem,
      each with its document, path and line; exit 1 if there is any. Typed kinds read:
      HostnameConfig ResolverConfig StaticHostConfig TimeSyncConfig RoutingRuleConfig
      BlackholeRouteConfig KubeSpanConfig KubeSpanEndpointsConfig.
  keelson config migrate FILE
      Print the configuration with machine.network and machine.time as typed documents.
",
    ),
    (
        "run",
        "  keelson run --root DIR [--cmdline STR] [--config FILE] [--state DIR] [--no-hostname] [--once]
              [--api-socket PATH] [--api-max-connections N]
      Run the runtime as an ordinary process in the current network namespace: configure the
      kernel, write /etc files under DIR, follow config file changes; SIGTERM stops it and
      leaves the kernel configured. --once exits as soon as everything is applied.
      --api-socket PATH serves the local API there (root only, mode 0600), to at most N
      clients at once (default 256).
",
    ),
    (
        "get",
        "  keelson get TYPE [ID] [--namespace NS] [-o table|yaml|json] [--watch] [--socket PATH]
      Show resources of a running node (addresses, routes, links, resolvers, hostname, ...).
",
    ),
    ("logs", "  keelson logs [-f] [--socket PATH]\n      The node's log; -f follows it.\n"),
    (
        "apply-config",
        "  keelson apply-config FILE [--dry-run] [--socket PATH]
      Validate a machine config, print what it adds, changes and removes, apply it.
",
    ),
    (
        "explain",
        "  keelson explain TYPE ID [--socket PATH]
      Which network-config inputs set each field of a merged spec.
",
    ),
    (
        "ifnames",
        "  keelson ifnames [LINK]...
      The predictable name keelson gives each physical link (systemd-udevd's net_id names
      under its default policy) and the candidates it chose from.
",
    ),
    ("machine-status", "  keelson machine-status [--socket PATH]\n      The node's stage and readiness.\n"),
    ("help", "  keelson help\n      This text. `keelson COMMAND --help` shows one command.\n"),
];

fn usage() -> String {
    let mut text = String::from(
        "keelson: a minimal PID 1 for Kubernetes nodes, with built-in networking\n\nusage:\n",
    );
    for (_, help) in COMMANDS {
        text.push_str(help);
    }
    text
}

/// `--help` or `-h` among a command's arguments (before a `--`).
fn wants_help(args: &[std::ffi::OsString]) -> bool {
    args.iter().take_while(|a| *a != "--").any(|a| a == "--help" || a == "-h")
}

fn main() -> ExitCode {
    if std::process::id() == 1 {
        pid1::main();
    }
    let argv: Vec<_> = std::env::args_os().skip(1).collect();
    if pid1::drivers::is_modprobe_call(&argv) {
        return pid1::drivers::modprobe_main(&argv);
    }
    logger::init();
    let mut args = std::env::args_os().skip(1);
    let Some(cmd) = args.next() else {
        eprint!("{}", usage());
        return ExitCode::from(2);
    };
    let rest: Vec<_> = args.collect();
    if let Some((_, help)) = COMMANDS.iter().find(|(name, _)| cmd == *name) {
        if wants_help(&rest) {
            print!("usage:\n{help}");
            return ExitCode::SUCCESS;
        }
    }
    match cmd.to_str() {
        Some("plan") => plan::main(rest),
        Some("run") => run::main(rest),
        Some("config") => config_cmd::main(rest),
        Some("ifnames") => ifnames_cmd::main(rest),
        Some("get") => api::client::get_main(rest),
        Some("logs") => api::client::logs_main(rest),
        Some("apply-config") => api::client::apply_main(rest),
        Some("explain") => api::client::explain_main(rest),
        Some("machine-status") => api::client::status_main(rest),
        Some("help" | "--help" | "-h") => {
            print!("{}", usage());
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("keelson: unknown command {cmd:?}\n\n{}", usage());
            ExitCode::from(2)
        }
    }
}
