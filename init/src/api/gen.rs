// SPDX-License-Identifier: Apache-2.0
//! `keelson gen config CLUSTER-NAME`: a new CA, a machine config skeleton that carries it
//! (`machine.yaml`), and client configs with an `os:admin` certificate (`keelsonconfig`)
//! and an `os:reader` one (`keelsonconfig.reader`), as `talosctl gen config` writes
//! `controlplane.yaml` and `talosconfig`. Every file is written mode 0600 (they hold keys)
//! and an existing file is never overwritten.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use base64::Engine;

use super::identity::Ca;
use cli::connect::{Context, KeelsonConfig};

/// A client certificate's lifetime (Talos gives its admin certificate a year).
const CLIENT_DAYS: i64 = 365;

/// `keelson gen config CLUSTER-NAME [--output DIR] [--endpoints HOST[:PORT],...]`
pub fn main(raw: Vec<OsString>) -> ExitCode {
    match gen(raw) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keelson gen: {e}");
            ExitCode::FAILURE
        }
    }
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
}

fn write_new(path: &Path, text: &str) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
}

fn gen(raw: Vec<OsString>) -> Result<(), String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(raw);
    let (mut out, mut endpoints, mut positional) = (PathBuf::from("."), Vec::new(), Vec::new());
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Short('o') | Long("output") => out = p.value().map_err(|e| e.to_string())?.into(),
            Short('e') | Long("endpoints") => {
                let v = p.value().map_err(|e| e.to_string())?;
                let v = v.into_string().map_err(|v| format!("not UTF-8: {v:?}"))?;
                endpoints.extend(v.split(',').filter(|s| !s.is_empty()).map(String::from));
            }
            Value(v) => positional.push(v.into_string().map_err(|v| format!("not UTF-8: {v:?}"))?),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    let [what, cluster] = positional.as_slice() else {
        return Err(
            "usage: keelson gen config CLUSTER-NAME [--output DIR] [--endpoints HOST[:PORT],...]"
                .into(),
        );
    };
    if what != "config" {
        return Err(format!("unknown gen target {what:?} (only `config`)"));
    }
    if cluster.is_empty()
        || !cluster.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err("CLUSTER-NAME: letters, digits, '-', '_' and '.' only".into());
    }
    for (_, path) in files(&out) {
        if path.exists() {
            return Err(format!("{}: exists; not overwriting it", path.display()));
        }
    }
    if endpoints.is_empty() {
        endpoints.push("127.0.0.1".into());
    }
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let ca = Ca::generate(cluster).map_err(|e| e.to_string())?;
    let machine = machine_config(cluster, &ca);
    let client = |role: &str| -> Result<String, String> {
        let id = ca.issue_client(role, CLIENT_DAYS).map_err(|e| e.to_string())?;
        let ctx = Context {
            endpoints: endpoints.clone(),
            nodes: Vec::new(),
            ca: b64(&ca.cert_pem),
            crt: b64(&id.cert_pem),
            key: b64(&id.key_pem),
        };
        let cfg = KeelsonConfig {
            context: cluster.clone(),
            contexts: BTreeMap::from([(cluster.clone(), ctx)]),
        };
        serde_yaml::to_string(&cfg).map_err(|e| e.to_string())
    };
    let [machine_path, admin_path, reader_path] = files(&out).map(|(_, p)| p);
    write_new(&machine_path, &machine)?;
    write_new(&admin_path, &client("os:admin")?)?;
    write_new(&reader_path, &client("os:reader")?)?;
    for (what, path) in files(&out) {
        println!("created {} ({what})", path.display());
    }
    Ok(())
}

fn files(dir: &Path) -> [(&'static str, PathBuf); 3] {
    [
        ("machine config with the cluster's CA", dir.join("machine.yaml")),
        ("client config, os:admin", dir.join("keelsonconfig")),
        ("client config, os:reader", dir.join("keelsonconfig.reader")),
    ]
}

/// The machine config skeleton: the CA, and room for the rest.
fn machine_config(cluster: &str, ca: &Ca) -> String {
    format!(
        "# Machine config for cluster {cluster}, made by `keelson gen config`.\n\
         # machine.ca.key is the cluster's CA key: keep this file secret.\n\
         version: v1alpha1\n\
         machine:\n  \
           ca:\n    \
             crt: {}\n    \
             key: {}\n  \
           network: {{}}\n",
        b64(&ca.cert_pem),
        b64(ca.key_pem())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skeleton_parses_and_carries_the_ca() {
        let ca = Ca::generate("demo").unwrap_or_else(|e| unreachable!("{e}"));
        let text = machine_config("demo", &ca);
        let cfg = net::config::parse(&text).unwrap_or_else(|e| unreachable!("{e}"));
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        let pair = cfg.machine.ca.clone().unwrap_or_default();
        assert_eq!(pair.crt, b64(&ca.cert_pem));
        // The key is there for the node, and never shown.
        assert!(pair.key.is_some());
        let shown = serde_yaml::to_string(&cfg).unwrap_or_default();
        assert!(shown.contains("<redacted>"), "{shown}");
        assert!(!shown.contains(&b64(ca.key_pem())), "{shown}");
        assert!(!format!("{cfg:?}").contains(&b64(ca.key_pem())));
    }
}
