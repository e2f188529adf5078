// SPDX-License-Identifier: Apache-2.0
//! keelson: PID 1 for Kubernetes nodes, with built-in networking.
//!
//! One binary, three modes: `init` when it is PID 1, `run` (the same runtime as an ordinary
//! process), and client commands such as `plan`.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// Links the word-at-a-time `memcmp` in place of musl's (see the crate).
#[cfg(target_env = "musl")]
use wordcmp as _;

#[cfg(target_env = "musl")]
mod alloc;

mod api;
mod config_cmd;
mod config_watch;
mod etcd;
mod fetch;
#[cfg(test)]
mod fuzz;
mod ifnames_cmd;
mod lifecycle;
mod logger;
mod logring;
mod machine;
mod node;
mod nodeip;
mod pid1;
mod plan;
mod reactor;
mod run;
mod staged;
mod state;
mod supervisor;
mod upgrade;
mod verbs;
mod vip;
mod vip_state;

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
      each with its document, path and line; exit 1 if there is any. Every document kind
      of Talos v1.14 loads, acted on or with a warning (docs/machine-config.md).
  keelson config migrate FILE
      Print the configuration with machine.network and machine.time as typed documents.
  keelson config confirm [NODE OPTIONS]
      Keep the config applied with apply-config --mode try (before its timeout).
",
    ),
    (
        "run",
        "  keelson run --root DIR [--cmdline STR] [--config FILE] [--state DIR] [--no-hostname] [--once]
              [--api-socket PATH] [--api-listen ADDR:PORT]... [--trustd-listen ADDR:PORT]... [--trustd-cert-lifetime SECS] [--api-max-connections N]
              [--set-clock] [--nts-ca FILE] [--config-url URL [--config-ca PEM]...]
              [--metrics-listen ADDR:PORT]
      Run the runtime as an ordinary process in the current network namespace: configure the
      kernel, write /etc files under DIR, follow config file changes; SIGTERM stops it and
      leaves the kernel configured. --once exits as soon as everything is applied.
      --api-socket PATH serves the local API there (root only, mode 0600), to at most N
      clients at once (default 256). --api-listen serves it over TLS too (PID 1: [::]:50000):
      maintenance mode (self-signed, --insecure) while the node has no config, then mutual
      TLS with client certificates from the config's machine.ca (a config without a usable
      machine.ca turns TLS off: only the local socket serves; one whose machine.ca has no key
      asks the control plane's trustd for its certificate). --trustd-listen serves trustd
      (PID 1: [::]:50001) on a node with the CA's key, for workers' certificates, valid a year
      (--trustd-cert-lifetime SECS: that long instead, for tests of their renewal). Time sync only measures the clock
      (timestatus) unless --set-clock lets it step and slew it, as PID 1 does. --nts-ca FILE
      trusts the PEM certificates in FILE for NTS key exchange, beside
      /etc/ssl/certs/ca-certificates.crt.
      --config-url fetches the config as PID 1 does with talos.config=URL (once the network is
      ready, retried with backoff) and keeps it in --config FILE; an existing FILE is used
      instead. --config-ca replaces the https trust roots (/etc/keelson/ca.pem and
      /etc/ssl/certs/ca-certificates.crt).
      --metrics-listen serves Prometheus metrics over plain HTTP (GET /metrics) when the config
      has no machine.metrics.listen (docs/metrics.md).
",
    ),
    (
        "get",
        "  keelson get TYPE [ID] [--namespace NS] [-o table|yaml|json] [--watch] [NODE OPTIONS]
      Show resources of a running node (addresses, routes, links, resolvers, hostname, ...).
",
    ),
    (
        "logs",
        "  keelson logs [SERVICE] [-f] [--tail N] [NODE OPTIONS]
      A service's log (gRPC Logs); machined's, the default, is the node's own log. -f
      follows it.
",
    ),
    (
        "apply-config",
        "  keelson apply-config FILE [--dry-run] [--mode auto|no-reboot|reboot|staged|try]
               [--timeout 1m] [--allow-partial]
               [NODE OPTIONS]
      Validate a machine config, print what it adds, changes and removes, apply it. --mode
      try rolls it back after --timeout (default 1m) unless `keelson config confirm` comes
      first; reboot applies it, then reboots; staged keeps it beside the config file, and
      the next start boots into it. A config with an invalid entry is refused whole;
      --allow-partial drops the invalid entries (each printed) and applies the rest.
",
    ),
    (
        "explain",
        "  keelson explain TYPE ID [NODE OPTIONS]
      Which network-config inputs set each field of a merged spec.
",
    ),
    ("machine-status", "  keelson machine-status [NODE OPTIONS]\n      The node's stage and readiness.\n"),
    (
        "version",
        "  keelson version [--client] [NODE OPTIONS]
      This client's version and each node's (gRPC Version; and whether it is in maintenance
      mode).
",
    ),
    (
        "disks",
        "  keelson disks [NODE OPTIONS]
      The node's block devices (gRPC Disks, talosctl's columns): device, model, serial, type,
      UUID, WWID, modalias, name, size, bus path, subsystem, read-only, system disk.
",
    ),
    (
        "dmesg",
        "  keelson dmesg [-f] [NODE OPTIONS]\n      The node's kernel ring buffer (gRPC Dmesg); -f follows it.\n",
    ),
    (
        "events",
        "  keelson events [--tail N] [--duration 10m] [--since ID] [--actor-id ID] [NODE OPTIONS]
      The node's runtime events as they come (gRPC Events): NODE ID EVENT ACTOR SOURCE
      MESSAGE; --tail N shows N past events first (-1: all the node keeps).
",
    ),
    (
        "service",
        "  keelson service [ID [start|stop|restart|status]] [NODE OPTIONS]   (also: services)
      The node's services (gRPC ServiceList): NODE SERVICE STATE HEALTH LAST CHANGE LAST
      EVENT; one service's health and events; or start, stop or restart it.
",
    ),
    (
        "bootstrap",
        "  keelson bootstrap [NODE OPTIONS]
      Start the etcd cluster on one control-plane node (gRPC Bootstrap, os:admin); prints
      nothing when accepted, the node's refusal otherwise (AlreadyExists: done before).
",
    ),
    (
        "etcd",
        "  keelson etcd members|status|leave|remove-member ID-OR-NAME|forfeit-leadership [NODE OPTIONS]
      etcd on control-plane nodes (gRPC EtcdMemberList, EtcdStatus: every role; the others
      os:admin, one node at a time): the members or the local member's status (talosctl's
      columns), leave the cluster (etcd then stays stopped), remove another member (by the
      ID members prints, or by name), hand raft leadership to another member.
",
    ),
    (
        "kubeconfig",
        "  keelson kubeconfig [PATH] [NODE OPTIONS]
      The admin kubeconfig of a control-plane node (gRPC Kubeconfig, os:admin), written to
      PATH (default ./kubeconfig) with mode 0600; one node.
",
    ),
    (
        "reboot",
        "  keelson reboot [--mode default|powercycle|staged] [NODE OPTIONS]
      Stop the node's services, then reboot (os:admin or os:operator; `run` just stops).
      A staged config is booted into at any next start; --mode staged refuses unless one
      waits.
",
    ),
    (
        "shutdown",
        "  keelson shutdown [NODE OPTIONS]
      Stop the node's services, then power off (os:admin or os:operator; `run` just stops).
",
    ),
    (
        "reset",
        "  keelson reset [--graceful=true|false] [--reboot] [--system-labels-to-wipe STATE,EPHEMERAL]
                [--wipe-mode all|system-disk|user-disks] [NODE OPTIONS]
      Stop the node's services, wipe its state (the state partition's slots: configs,
      identity, keys, leases), then power off, or reboot with --reboot, into maintenance
      mode (os:admin; `run` wipes its --state and --config and exits).
",
    ),
    (
        "upgrade",
        "  keelson upgrade --image URL [NODE OPTIONS]
      Boot the kernel and initramfs the upgrade manifest at URL names (https; each checked
      against its SHA-256), by kexec, keeping the state (os:admin): NODE ACK STARTED.
",
    ),
    (
        "gen",
        "  keelson gen config CLUSTER-NAME [--output DIR] [--endpoints HOST[:PORT],...]
      A new CA; machine.yaml (a machine config carrying it as machine.ca), keelsonconfig
      (client config with an os:admin certificate) and keelsonconfig.reader (os:reader).
",
    ),
    (
        "node options",
        "  NODE OPTIONS (every command that talks to a node):
      --socket PATH              the local API socket (the default, /run/keelson/api.sock)
      -n, --nodes HOST[:PORT],.. these nodes over TLS (port 50000 by default); output is
                                 prefixed with the node when there are several
      -e, --endpoints HOST,..    where to connect when no node is named
      --keelsonconfig PATH       client config (or KEELSONCONFIG, or ~/.keelson/config)
      -i, --insecure             a node in maintenance mode: no client certificate, the
                                 node's certificate unchecked unless --fingerprint SHA256
",
    ),
    (
        "ifnames",
        "  keelson ifnames [LINK]...
      The predictable name keelson gives each physical link (systemd-udevd's net_id names
      under its default policy) and the candidates it chose from.
",
    ),
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
    let name = if cmd == "services" { "service".into() } else { cmd.clone() };
    if let Some((_, help)) = COMMANDS.iter().find(|(n, _)| name == *n) {
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
        Some("get") => cli::client::get_main(rest),
        Some("logs") => cli::client::logs_main(rest),
        Some("apply-config") => cli::client::apply_main(rest),
        Some("explain") => cli::client::explain_main(rest),
        Some("machine-status") => cli::client::status_main(rest),
        Some("version") => cli::client::version_main(rest),
        Some("gen") => api::gen::main(rest),
        Some("disks") => cli::client::disks_main(rest),
        Some("dmesg") => cli::client::dmesg_main(rest),
        Some("reboot") => cli::client::power_main("reboot", rest),
        Some("shutdown") => cli::client::power_main("shutdown", rest),
        Some("reset") => cli::lifecycle::reset_main(rest),
        Some("upgrade") => cli::lifecycle::upgrade_main(rest),
        Some("service" | "services") => cli::client::service_main(rest),
        Some("events") => cli::client::events_main(rest),
        Some("kubeconfig") => cli::kubeconfig::main(rest),
        Some("bootstrap") => cli::bootstrap::main(rest),
        Some("etcd") => cli::etcd::main(rest),
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
