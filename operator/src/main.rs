// SPDX-License-Identifier: Apache-2.0
//! keelson-operator: see docs/etcd.md.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nix::sys::signal::{kill, SigSet, Signal};
use nix::unistd::Pid;
use operator::cli::{self, CliError, Command, Verb};
use operator::ctl::{self, CtlError};
use operator::key::Layout;
use operator::store::Store;

fn main() -> ExitCode {
    base::stderr_log::init_from_env("KEELSON_LOG");
    // The boot commands (docs/pxe.md) run once and exit.
    let mut args = std::env::args_os().skip(1);
    let first = std::env::args_os().nth(1).and_then(|a| a.into_string().ok());
    if let Some(cmd @ ("image" | "machine")) = first.as_deref() {
        let _ = args.next();
        return operator::pxe::cli::main(cmd, args.collect());
    }
    if first.as_deref() == Some("tenant-agent") {
        let _ = args.next();
        return operator::networks::agent::main(args.collect());
    }
    let cmd = match cli::parse(args) {
        Ok(o) => o,
        Err(CliError::Help) => {
            print!("{}{}", cli::USAGE, operator::pxe::options::SERVE_USAGE);
            return ExitCode::SUCCESS;
        }
        Err(CliError::Usage(e)) => {
            eprintln!(
                "keelson-operator: {e}\n{}{}",
                cli::USAGE,
                operator::pxe::options::SERVE_USAGE
            );
            return ExitCode::from(2);
        }
    };
    if cmd.verb != Verb::Serve {
        return resource_command(&cmd);
    }
    let opts = cmd.options;
    // SIGTERM and SIGINT end the operator in order; SIGUSR1 is the worker saying it ended on
    // its own. All three are blocked here and in every thread, and taken by sigwait below.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGUSR1);
    if let Err(e) = signals.thread_block() {
        eprintln!("keelson-operator: blocking signals: {e}");
        return ExitCode::FAILURE;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let worker = evloop::spawn_worker("serve", move || {
        let r = operator::serve::run(&opts, &flag);
        let _ = kill(Pid::this(), Signal::SIGUSR1);
        r
    });
    let worker = match worker {
        Ok(w) => w,
        Err(e) => {
            log::error!("starting: {e}");
            return ExitCode::FAILURE;
        }
    };
    match signals.wait() {
        Ok(Signal::SIGUSR1) => {}
        Ok(sig) => {
            log::info!("{sig}: stopping");
            stop.store(true, Ordering::Relaxed);
        }
        Err(e) => {
            log::error!("sigwait: {e}");
            stop.store(true, Ordering::Relaxed);
        }
    }
    match worker.join() {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            log::error!("{e}");
            ExitCode::FAILURE
        }
        Err(_) => {
            log::error!("the serve thread panicked");
            ExitCode::FAILURE
        }
    }
}

/// `apply`, `get`, `describe`, `delete`: one etcd, one answer.
fn resource_command(cmd: &Command) -> ExitCode {
    let o = &cmd.options;
    // Bad input is refused before any connection is made.
    let input = match &cmd.verb {
        Verb::Apply { file } => match read_input(file).and_then(|t| {
            operator::kinds::parse(&t)?;
            Ok(t)
        }) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("keelson-operator: {e}");
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };
    // The key opening a kubeconfig: read before any connection, never made here.
    let key = match &cmd.verb {
        Verb::Kubeconfig { .. } => {
            let path = o.secrets_key.clone().or_else(|| {
                o.data_dir
                    .clone()
                    .or_else(operator::cli::default_data_dir)
                    .map(|d| d.join("secrets.key"))
            });
            let Some(path) = path else {
                eprintln!("keelson-operator: no --secrets-key and no --data-dir");
                return ExitCode::FAILURE;
            };
            match operator::secrets::SecretsKey::load(&path) {
                Ok(k) => Some(k),
                Err(e) => {
                    eprintln!("keelson-operator: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        _ => None,
    };
    let client = match operator::serve::client(o) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("keelson-operator: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut store = Store::new(client, Layout::new(&o.prefix, o.prefix.as_bytes()));
    let ns = o.namespace.as_str();
    let result = match &cmd.verb {
        Verb::Serve => return ExitCode::FAILURE,
        Verb::Apply { .. } => ctl::apply(&mut store, input.as_deref().unwrap_or(""))
            .map(|lines| (lines.join("\n") + "\n").into_bytes()),
        Verb::Get { kind, name, output } => {
            ctl::get(&mut store, ns, *kind, name.as_deref(), *output).map(String::into_bytes)
        }
        Verb::Describe { kind, name } => {
            ctl::describe(&mut store, ns, *kind, name).map(String::into_bytes)
        }
        Verb::Delete { kind, name } => {
            ctl::delete(&mut store, ns, *kind, name).map(|l| (l + "\n").into_bytes())
        }
        Verb::Kubeconfig { name, path } => match &key {
            Some(key) => ctl::kubeconfig(&mut store, ns, key, name).and_then(|k| match path {
                Some(p) => write_private(p, &k)
                    .map(|()| format!("kubeconfig written to {}\n", p.display()).into_bytes())
                    .map_err(|e| CtlError::Encode(format!("{}: {e}", p.display()))),
                None => Ok(k),
            }),
            None => return ExitCode::FAILURE,
        },
    };
    match result {
        Ok(text) => {
            let _ = std::io::stdout().lock().write_all(&text);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("keelson-operator: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Write a secret file: mode 0600 from its creation, and so even when it existed.
fn write_private(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(data)?;
    f.sync_all()
}

fn read_input(file: &std::path::Path) -> Result<String, CtlError> {
    use std::io::Read;
    let mut text = String::new();
    let limit = operator::kinds::MAX_INPUT as u64 + 1;
    let r = if file.as_os_str() == "-" {
        std::io::stdin().lock().take(limit).read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(limit).read_to_string(&mut text))
    };
    r.map_err(|e| CtlError::Encode(format!("{}: {e}", file.display())))?;
    Ok(text)
}
