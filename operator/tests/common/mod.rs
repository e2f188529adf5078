// SPDX-License-Identifier: Apache-2.0
//! What the operator's integration tests share: scratch directories and a private etcd.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Child;

use etcd::local::{LocalEtcd, Options};

/// A scratch directory, removed when dropped.
pub struct Dir(pub PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An empty `keelson-<suite>-<test>-<pid>` under the temporary directory.
pub fn temp(suite: &str, test: &str) -> Dir {
    let dir = std::env::temp_dir().join(format!("keelson-{suite}-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Dir(dir)
}

/// Whether the `etcd` binary runs; without it the test is skipped (or fails when
/// `KEELSON_REQUIRE_ROOT=1`).
pub fn have_etcd(test: &str) -> bool {
    let found = std::process::Command::new("etcd").arg("--version").output();
    if found.is_ok_and(|o| o.status.success()) {
        return true;
    }
    testkit::skip_or_fail(&format!("{test}: no etcd binary (Debian: etcd-server)"));
    false
}

/// A private etcd member on loopback, its data in a scratch directory (no fsync).
pub fn start_etcd(suite: &str, test: &str) -> Option<(LocalEtcd, Dir)> {
    if !have_etcd(test) {
        return None;
    }
    let dir = temp(suite, test);
    let mut opts = Options::new(&dir.0.join("data"), &dir.0.join("etcd.log"));
    opts.no_fsync = true;
    Some((LocalEtcd::start(&opts).unwrap(), dir))
}

/// Network IDs claimed by someone else (`PREFIX<id>` in namespace `x`), with the index keys
/// keelson's allocator reads, 50 to a transaction: a range filled before a test or bench.
pub fn claim_ids_as_others(s: &mut operator::store::Store, ids: &[u32], prefix: &str) {
    use operator::networks::allocate;
    use operator::networks::kinds::{CLUSTER, NETWORK_IDS};
    use operator::store::Resource;
    for chunk in ids.chunks(50) {
        let mut rs: Vec<Resource<serde_json::Value>> = chunk
            .iter()
            .map(|id| {
                let spec = serde_json::json!({"spec": {"claimRef": {"namespace": "x", "name": format!("{prefix}{id}"), "uid": "1"}}});
                Resource::new(CLUSTER, NETWORK_IDS, &id.to_string(), spec)
            })
            .collect();
        s.write_all(&mut rs).unwrap();
        let layout = s.layout().clone();
        let puts = chunk
            .iter()
            .map(|id| {
                etcd::wire::RequestOp::Put(etcd::wire::PutRequest {
                    key: allocate::index_key(&layout, *id),
                    ..Default::default()
                })
            })
            .collect();
        let t = etcd::wire::TxnRequest { compare: vec![], success: puts, failure: vec![] };
        assert!(s.client().txn(&t).unwrap().succeeded);
    }
}

/// The `keelson` binary: `KEELSON_BIN`, else next to this test's target directory.
pub fn keelson_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEELSON_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("keelson");
    p.is_file().then_some(p)
}

/// A node process, killed and its directory removed when dropped.
pub struct Killed(pub Child, pub PathBuf);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

/// The admin context's CA, certificate and key of a keelsonconfig, as PEM files.
pub fn client_pems(
    keelsonconfig: &std::path::Path,
    dir: &std::path::Path,
) -> (PathBuf, PathBuf, PathBuf) {
    use base64::Engine;
    let v: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(keelsonconfig).unwrap()).unwrap();
    let ctx = &v["contexts"][v["context"].as_str().unwrap()];
    let write = |field: &str| {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(ctx[field].as_str().unwrap().trim())
            .unwrap();
        let p = dir.join(format!("client-{field}.pem"));
        std::fs::write(&p, pem).unwrap();
        p
    };
    (write("ca"), write("crt"), write("key"))
}

/// Entering a namespace without dropping it (the test's `Netns` deletes it on drop).
pub trait EnterAndKeep {
    fn enter_and_keep(self);
}

impl EnterAndKeep for testkit::Netns {
    fn enter_and_keep(self) {
        self.enter();
        std::mem::forget(self);
    }
}
