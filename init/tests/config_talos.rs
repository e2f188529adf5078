// SPDX-License-Identifier: Apache-2.0
//! `keelson config validate` and `keelson plan` on a configuration in the shape Talos 1.14
//! writes: the v1alpha1 document without `cluster.discovery`, the discovery documents, link
//! documents with the fields 1.14 added, kinds keelson ignores, and a trailing `---`. It used
//! to be refused (an unknown kind, unknown fields); it loads with one warning per ignored kind.
#![allow(clippy::unwrap_used, clippy::tests_outside_test_module)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SECRET: &str = "vlf2HU1NEZL3Ezi9Tk+RZBLJUbjnsHnTzs3wK9JNk6Q=";

fn config() -> String {
    format!(
        "version: v1alpha1
debug: false
persist: true
machine:
    type: worker
    token: abcdef.0123456789abcdef
    certSANs: []
cluster:
    token: abcdef.0123456789abcdef
---
apiVersion: v1alpha1
kind: DiscoveryServiceConfig
name: default
endpoint: https://discovery.talos.dev/
---
apiVersion: v1alpha1
kind: DiscoveryIdentityConfig
clusterID: 0raF93qnkMvF-FZNuvyGozXNdLiT2FOWSlyBaW4PR-w=
clusterSecret: {SECRET}
---
apiVersion: v1alpha1
kind: BondConfig
name: bond0
links: [eth0, eth1]
bondMode: active-backup
miimon: 100
primary: eth1
---
apiVersion: v1alpha1
kind: DHCPv4Config
name: bond0
ignoreRoutes: true
---
apiVersion: v1alpha1
kind: EthernetConfig
name: eth0
wakeOnLan: [magic]
---
apiVersion: v1alpha1
kind: KubeNodeConfig
nodeIP:
    validSubnets: [10.0.0.0/8]
---
apiVersion: v1alpha1
kind: VolumeConfig
name: EPHEMERAL
mount:
    secure: true
---
apiVersion: v1alpha1
kind: KubeletConfig
image: ghcr.io/siderolabs/kubelet:v1.35.0
config: {{}}
---
"
    )
}

fn write(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("keelson-config-talos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, config()).unwrap();
    path
}

fn keelson(args: &[&str], path: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(args)
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_talos_1_14_configuration_validates_with_one_warning_per_ignored_setting() {
    let path = write("validate.yaml");
    let (code, _, stderr) = keelson(&["config", "validate"], &path);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.lines().all(|l| l.starts_with("warning: ")), "{stderr}");
    // machine.token is read (trustd), so it is not among them.
    assert_eq!(stderr.lines().count(), 6, "{stderr}");
    assert!(!stderr.contains("machine.token"), "{stderr}");
    for what in [
        "persist (line 3)",
        "document 6 (EthernetConfig eth0): wakeOnLan (line 37)",
        "document 8 (VolumeConfig) (line 43)",
        "document 9 (KubeletConfig) (line 49)",
    ] {
        assert_eq!(stderr.matches(what).count(), 1, "{what}: {stderr}");
    }
    assert!(!stderr.contains(SECRET), "{stderr}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_talos_1_14_configuration_plans_its_bond_primary_and_dhcp_without_routes() {
    let path = write("plan.yaml");
    let (code, stdout, stderr) =
        keelson(&["plan", "--link", "eth0", "--link", "eth1", "-o", "json", "--config"], &path);
    assert_eq!(code, Some(0), "{stderr}");
    let plan: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let text = plan.to_string();
    assert!(text.contains(r#""primary":"eth1""#), "{text}");
    assert!(text.contains(r#""skipRoutes":true"#), "{text}");
    assert!(!text.contains(SECRET), "{text}");
    let _ = std::fs::remove_file(&path);
}
