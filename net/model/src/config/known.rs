// SPDX-License-Identifier: Apache-2.0
//! The fixed list of Talos keys keelson accepts but does not use.
//!
//! Real Talos configs carry PKI, install, etcd and Kubernetes settings that a
//! network-only init has no use for. Rejecting them would make every Talos config unusable;
//! ignoring *any* unknown key would hide typos. So exactly these keys are accepted, their
//! content is not looked at, and each one present yields a warning with its line. Keys under
//! `machine.network` are deliberately absent: ignoring network settings (`wireguard`,
//! `dummy`, `cidr`) would leave a node silently misconfigured, so those are errors.

use super::locate::YamlPath;
use super::machine::{Cluster, InstallConfig, KubeletConfig, Machine, MachineConfig};

/// Every known-but-ignored key path, with whether this config has it.
pub(crate) fn talos_keys(cfg: &MachineConfig) -> Vec<(&'static str, bool)> {
    let mut keys = vec![("persist", cfg.persist.is_some())];
    keys.extend(machine_keys(&cfg.machine));
    keys.extend(kubelet_keys(&cfg.machine.kubelet));
    let install = cfg.machine.install.clone().unwrap_or_default();
    keys.extend(install_keys(&install));
    let default_cluster = Cluster::default();
    keys.extend(cluster_keys(cfg.cluster.as_ref().unwrap_or(&default_cluster)));
    keys
}

fn machine_keys(m: &Machine) -> [(&'static str, bool); 20] {
    [
        ("machine.acceptedCAs", m.accepted_cas.is_some()),
        ("machine.certSANs", m.cert_sans.is_some()),
        ("machine.controlPlane", m.control_plane.is_some()),
        ("machine.pods", m.pods.is_some()),
        ("machine.files", m.files.is_some()),
        ("machine.env", m.env.is_some()),
        ("machine.sysctls", m.sysctls.is_some()),
        ("machine.sysfs", m.sysfs.is_some()),
        ("machine.registries", m.registries.is_some()),
        ("machine.systemDiskEncryption", m.system_disk_encryption.is_some()),
        ("machine.features", m.features.is_some()),
        ("machine.udev", m.udev.is_some()),
        ("machine.logging", m.logging.is_some()),
        ("machine.kernel", m.kernel.is_some()),
        ("machine.seccompProfiles", m.seccomp_profiles.is_some()),
        ("machine.baseRuntimeSpecOverrides", m.base_runtime_spec_overrides.is_some()),
        ("machine.nodeLabels", m.node_labels.is_some()),
        ("machine.nodeAnnotations", m.node_annotations.is_some()),
        ("machine.nodeTaints", m.node_taints.is_some()),
        ("machine.disks", m.disks.is_some()),
    ]
}

fn install_keys(i: &InstallConfig) -> [(&'static str, bool); 9] {
    let s = i.disk_selector.clone().unwrap_or_default();
    [
        ("machine.install.image", i.image.is_some()),
        ("machine.install.extraKernelArgs", i.extra_kernel_args.is_some()),
        ("machine.install.bootloader", i.bootloader.is_some()),
        ("machine.install.legacyBIOSSupport", i.legacy_bios_support.is_some()),
        ("machine.install.extensions", i.extensions.is_some()),
        ("machine.install.grubUseUKICmdline", i.grub_use_uki_cmdline.is_some()),
        ("machine.install.diskSelector.uuid", s.uuid.is_some()),
        ("machine.install.diskSelector.modalias", s.modalias.is_some()),
        ("machine.install.diskSelector.busPath", s.bus_path.is_some()),
    ]
}

fn kubelet_keys(k: &KubeletConfig) -> [(&'static str, bool); 8] {
    [
        ("machine.kubelet.clusterDNS", k.cluster_dns.is_some()),
        ("machine.kubelet.extraMounts", k.extra_mounts.is_some()),
        ("machine.kubelet.extraConfig", k.extra_config.is_some()),
        ("machine.kubelet.credentialProviderConfig", k.credential_provider_config.is_some()),
        (
            "machine.kubelet.defaultRuntimeSeccompProfileEnabled",
            k.default_runtime_seccomp_profile_enabled.is_some(),
        ),
        ("machine.kubelet.registerWithFQDN", k.register_with_fqdn.is_some()),
        ("machine.kubelet.skipNodeRegistration", k.skip_node_registration.is_some()),
        ("machine.kubelet.disableManifestsDirectory", k.disable_manifests_directory.is_some()),
    ]
}

fn cluster_keys(c: &Cluster) -> [(&'static str, bool); 23] {
    [
        (
            "cluster.controlPlane.localAPIServerPort",
            c.control_plane.as_ref().is_some_and(|p| p.local_api_server_port.is_some()),
        ),
        ("cluster.clusterName", c.cluster_name.is_some()),
        ("cluster.network", c.network.is_some()),
        ("cluster.token", c.token.is_some()),
        ("cluster.aescbcEncryptionSecret", c.aescbc_encryption_secret.is_some()),
        ("cluster.secretboxEncryptionSecret", c.secretbox_encryption_secret.is_some()),
        ("cluster.aggregatorCA", c.aggregator_ca.is_some()),
        ("cluster.acceptedCAs", c.accepted_cas.is_some()),
        ("cluster.serviceAccount", c.service_account.is_some()),
        ("cluster.apiServer", c.api_server.is_some()),
        ("cluster.controllerManager", c.controller_manager.is_some()),
        ("cluster.proxy", c.proxy.is_some()),
        ("cluster.scheduler", c.scheduler.is_some()),
        ("cluster.etcd.image", c.etcd.as_ref().is_some_and(|e| e.image.is_some())),
        ("cluster.etcd.subnet", c.etcd.as_ref().is_some_and(|e| e.subnet.is_some())),
        ("cluster.coreDNS", c.core_dns.is_some()),
        ("cluster.externalCloudProvider", c.external_cloud_provider.is_some()),
        ("cluster.extraManifests", c.extra_manifests.is_some()),
        ("cluster.extraManifestHeaders", c.extra_manifest_headers.is_some()),
        ("cluster.inlineManifests", c.inline_manifests.is_some()),
        ("cluster.allowSchedulingOnControlPlanes", c.allow_scheduling_on_control_planes.is_some()),
        ("cluster.adminKubeconfig", c.admin_kubeconfig.is_some()),
        ("cluster.allowSchedulingOnMasters", c.allow_scheduling_on_masters.is_some()),
    ]
}

/// One warning per ignored Talos key present in `yaml`, in document order.
pub(crate) fn warnings(cfg: &MachineConfig, yaml: &str) -> Vec<String> {
    let mut found: Vec<(Option<usize>, &str)> = talos_keys(cfg)
        .into_iter()
        .filter(|(_, present)| *present)
        .map(|(path, _)| (YamlPath::keys(path).locate(yaml).map(|p| p.line), path))
        .collect();
    crate::sort::ascending(&mut found);
    found
        .into_iter()
        .map(|(line, path)| match line {
            Some(line) => {
                format!("{path} (line {line}): a Talos key keelson does not use; ignored")
            }
            None => format!("{path}: a Talos key keelson does not use; ignored"),
        })
        .collect()
}
