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
