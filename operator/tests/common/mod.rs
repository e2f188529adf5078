// SPDX-License-Identifier: Apache-2.0
//! What the operator's integration tests share: scratch directories and a private etcd.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;

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
