// SPDX-License-Identifier: Apache-2.0
//! The boot commands: `keelson-operator image ...` and `machine ...`.

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use etcd::local::{LocalEtcd, Options as LocalOptions};
use etcd::Client;

use super::images::Images;
use super::mac::Mac;
use super::machines::{valid_cmdline, MachineSpec, StoreTable, MAX_CONFIG};
use crate::cli::{default_data_dir, ServeOptions};
use crate::key::Layout;
use crate::store::Store;

pub const USAGE: &str = "\
usage: keelson-operator image add VERSION --kernel FILE --initramfs FILE [--data-dir DIR]
       keelson-operator image list [--data-dir DIR]
       keelson-operator machine add MAC --version VERSION [--cmdline ARGS] [--config FILE]
                                    [etcd options]
       keelson-operator machine list [etcd options]

Images are copied into DIR/images with their SHA-256 (DIR as for serve). Machines are kept in
the operator's etcd; etcd options are serve's (--data-dir, --etcd-endpoints, --etcd-cacert,
--etcd-cert, --etcd-key, --prefix). Without --etcd-endpoints: the private etcd of a serve
running on DIR, else that etcd started for the command.
";

#[derive(Debug, Default)]
struct Args {
    etcd: ServeOptions,
    positional: Vec<String>,
    kernel: Option<PathBuf>,
    initramfs: Option<PathBuf>,
    version: Option<String>,
    cmdline: Option<String>,
    config: Option<PathBuf>,
}

fn parse(args: Vec<OsString>) -> Result<Args, String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args);
    let mut a = Args::default();
    let e = |e: lexopt::Error| e.to_string();
    while let Some(arg) = p.next().map_err(e)? {
        match arg {
            Long("kernel") => a.kernel = Some(p.value().map_err(e)?.into()),
            Long("initramfs") => a.initramfs = Some(p.value().map_err(e)?.into()),
            Long("version") => a.version = Some(p.value().map_err(e)?.string().map_err(e)?),
            Long("cmdline") => a.cmdline = Some(p.value().map_err(e)?.string().map_err(e)?),
            Long("config") => a.config = Some(p.value().map_err(e)?.into()),
            Long("help") | Short('h') => return Err(String::new()),
            Long(
                f @ ("data-dir" | "etcd-endpoints" | "etcd-cacert" | "etcd-cert" | "etcd-key"
                | "prefix"),
            ) => {
                let f = f.to_owned();
                let v = p.value().map_err(e)?;
                // serve's own parser checks these flags.
                let mut argv = vec![OsString::from("serve"), format!("--{f}").into(), v];
                if f != "data-dir" && !a.etcd.endpoints.is_empty() {
                    argv.push("--etcd-endpoints".into());
                    argv.push(a.etcd.endpoints.join(",").into());
                }
                let o = crate::cli::parse(argv).map_err(|e| e.to_string())?.options;
                match f.as_str() {
                    "data-dir" => a.etcd.data_dir = o.data_dir,
                    "etcd-endpoints" => a.etcd.endpoints = o.endpoints,
                    "etcd-cacert" => a.etcd.cacert = o.cacert,
                    "etcd-cert" => a.etcd.cert = o.cert,
                    "etcd-key" => a.etcd.key = o.key,
                    _ => a.etcd.prefix = o.prefix,
                }
            }
            Value(v) => a.positional.push(v.string().map_err(e)?),
            other => return Err(other.unexpected().to_string()),
        }
    }
    Ok(a)
}

fn data_dir(a: &Args) -> Result<PathBuf, String> {
    a.etcd
        .data_dir
        .clone()
        .or_else(default_data_dir)
        .ok_or_else(|| "no --data-dir, HOME unset".into())
}

/// The etcd of `--etcd-endpoints`, else the private etcd of a running `serve` on the same data
/// directory, else that private etcd started for this command (and stopped after it).
fn connect(a: &Args) -> Result<(Client, Option<LocalEtcd>), String> {
    match crate::serve::client(&a.etcd) {
        Ok(c) => Ok((c, None)),
        Err(crate::serve::ServeError::NotServing(_)) => {
            let dir = data_dir(a)?;
            let opts = LocalOptions::new(&dir.join("etcd"), &dir.join("etcd.log"));
            let etcd = LocalEtcd::start(&opts).map_err(|e| format!("private etcd: {e}"))?;
            Ok((etcd.client(), Some(etcd)))
        }
        Err(e) => Err(e.to_string()),
    }
}

fn table(a: &Args) -> Result<(StoreTable, Option<LocalEtcd>), String> {
    let (client, local) = connect(a)?;
    let layout = Layout::new(&a.etcd.prefix, a.etcd.prefix.as_bytes());
    Ok((StoreTable::new(Store::new(client, layout)), local))
}

fn run(cmd: &str, a: &Args) -> Result<(), String> {
    let pos: Vec<&str> = a.positional.iter().map(String::as_str).collect();
    match (cmd, pos.as_slice()) {
        ("image", ["add", version]) => {
            let (Some(k), Some(i)) = (&a.kernel, &a.initramfs) else {
                return Err("image add: --kernel and --initramfs are needed".into());
            };
            let e = Images::new(&data_dir(a)?).add(version, k, i).map_err(|e| e.to_string())?;
            println!(
                "{version}\tvmlinuz {} {}\tinitramfs {} {}",
                e.kernel.size, e.kernel.sha256, e.initramfs.size, e.initramfs.sha256
            );
            Ok(())
        }
        ("image", ["list"]) => {
            for (v, e) in Images::new(&data_dir(a)?).list().map_err(|e| e.to_string())? {
                println!(
                    "{v}\tvmlinuz {} {}\tinitramfs {} {}",
                    e.kernel.size, e.kernel.sha256, e.initramfs.size, e.initramfs.sha256
                );
            }
            Ok(())
        }
        ("machine", ["add", mac]) => {
            let mac = Mac::parse(mac).map_err(|e| format!("machine add: {e}"))?;
            let version = a.version.clone().ok_or("machine add: --version is needed")?;
            if !super::images::valid_version(&version) {
                return Err("machine add: --version: 1 to 64 of A-Z a-z 0-9 . _ + -".into());
            }
            let cmdline = a.cmdline.clone().unwrap_or_default();
            if !valid_cmdline(&cmdline) {
                return Err(
                    "machine add: --cmdline: printable ASCII without '$', at most 1024 bytes"
                        .into(),
                );
            }
            let config = match &a.config {
                None => None,
                Some(p) => {
                    let f = std::fs::File::open(p)
                        .map_err(|e| format!("--config {}: {e}", p.display()))?;
                    let mut s = String::new();
                    f.take(MAX_CONFIG as u64 + 1)
                        .read_to_string(&mut s)
                        .map_err(|e| format!("--config {}: {e}", p.display()))?;
                    if s.len() > MAX_CONFIG {
                        return Err(format!("--config {}: over 512 KiB", p.display()));
                    }
                    Some(s)
                }
            };
            let (t, local) = table(a)?;
            let r =
                t.put(&mac, MachineSpec { version, cmdline, config }).map_err(|e| e.to_string());
            drop(local);
            r?;
            println!("{mac}");
            Ok(())
        }
        ("machine", ["list"]) => {
            let (t, local) = table(a)?;
            let l = t.list().map_err(|e| e.to_string());
            drop(local);
            for (mac, s) in l? {
                let cfg = if s.config.is_some() { "config" } else { "no config" };
                println!("{}\t{}\t{cfg}\t{}", base::names::escape(&mac, 64), s.version, s.cmdline);
            }
            Ok(())
        }
        _ => Err(format!("{cmd}: add or list")),
    }
}

/// `keelson-operator image|machine ...`: `args` are those after the command word.
pub fn main(cmd: &str, args: Vec<OsString>) -> ExitCode {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("keelson-operator {cmd}: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(cmd, &a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keelson-operator {cmd}: {}", base::names::escape(&e, 1024));
            ExitCode::FAILURE
        }
    }
}
