// SPDX-License-Identifier: Apache-2.0
//! A stored resource as COSI sends it: metadata with Talos's type and namespace, the spec as
//! YAML in `yaml_spec` (the serialisation `keelson get -o yaml` shows).
//! `proto_spec` carries Talos's protobuf for the types talosctl decodes from it
//! ([`super::proto_spec`]); other types leave it empty. A merged spec's provenance (which
//! `network-config` inputs each field came from: keelson's own) travels as the annotation
//! [`PROVENANCE`], JSON. Pure.

use std::time::{SystemTime, UNIX_EPOCH};

use net::resource::{Kind, Phase, Resource};
use talos_api::cosi;

use super::names::{cosi_namespace, cosi_type};

/// The annotation that carries a merged spec's provenance: a JSON object of field → inputs
/// (`*`: the whole spec), as `keelson get -o yaml` and `keelson explain` show it.
pub const PROVENANCE: &str = "keelson.dev/provenance";

/// A time as `google.protobuf.Timestamp`; times before 1970 (a clock that was never set) as
/// 1970.
pub fn timestamp(t: SystemTime) -> cosi::Timestamp {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    cosi::Timestamp {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// COSI's phase names.
fn phase(p: Phase) -> &'static str {
    match p {
        Phase::Running => "running",
        Phase::TearingDown => "tearingDown",
    }
}

/// The metadata of `r`.
pub fn metadata(r: &Resource) -> cosi::Metadata {
    let m = &r.metadata;
    cosi::Metadata {
        namespace: cosi_namespace(m.kind, m.namespace).to_owned(),
        r#type: cosi_type(m.kind).type_name.to_owned(),
        id: m.id.to_string(),
        version: m.version.to_string(),
        owner: m.owner.to_owned(),
        phase: phase(m.phase).to_owned(),
        created: Some(timestamp(m.created)),
        updated: Some(timestamp(m.updated)),
        finalizers: m.finalizers.iter().map(str::to_owned).collect(),
        labels: Default::default(),
        annotations: r
            .provenance
            .as_ref()
            .and_then(|p| serde_json::to_string(p).ok())
            .map(|p| (PROVENANCE.to_owned(), p))
            .into_iter()
            .collect(),
    }
}

/// `r` as COSI sends it. The YAML cannot fail for keelson's own types; should it, the spec
/// goes out empty and the log says which resource.
pub fn resource(r: &Resource) -> cosi::Resource {
    let yaml_spec = serde_yaml::to_string(&r.spec).unwrap_or_else(|e| {
        log::warn!(target: "api", "{} {}: spec not encoded: {e}", r.metadata.kind, net::names::escape(&r.metadata.id, 64));
        String::new()
    });
    cosi::Resource {
        metadata: Some(metadata(r)),
        spec: Some(cosi::Spec {
            proto_spec: super::proto_spec::encode(r).unwrap_or_default(),
            yaml_spec,
        }),
    }
}

/// What is left of a resource that is gone: its identity.
pub fn tombstone(kind: Kind, namespace: &str, id: &str) -> cosi::Resource {
    cosi::Resource {
        metadata: Some(cosi::Metadata {
            namespace: namespace.to_owned(),
            r#type: cosi_type(kind).type_name.to_owned(),
            id: id.to_owned(),
            phase: phase(Phase::Running).to_owned(),
            ..Default::default()
        }),
        spec: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use net::resource::{HostnameStatus, Metadata, Namespace};
    use std::time::Duration;

    #[test]
    fn a_stored_resource_goes_out_with_talos_names_and_yaml() {
        let at = UNIX_EPOCH + Duration::new(1_700_000_000, 5);
        let r = Resource {
            metadata: Metadata {
                namespace: Namespace::Network,
                kind: Kind::HostnameStatus,
                id: "hostname".into(),
                version: 7,
                owner: "network.HostnameStatusController",
                phase: Phase::TearingDown,
                created: at,
                updated: at,
                finalizers: Default::default(),
            },
            spec: HostnameStatus { hostname: "n1".into(), domainname: "example.org".into() }.into(),
            provenance: None,
        };
        let c = resource(&r);
        let m = c.metadata.unwrap();
        assert_eq!(m.r#type, "HostnameStatuses.net.talos.dev");
        assert_eq!(m.namespace, "network");
        assert_eq!(m.version, "7");
        assert_eq!(m.phase, "tearingDown");
        assert_eq!(m.created, Some(cosi::Timestamp { seconds: 1_700_000_000, nanos: 5 }));
        let yaml = c.spec.unwrap().yaml_spec;
        assert_eq!(yaml, serde_yaml::to_string(&r.spec).unwrap());
        assert!(yaml.contains("hostname: n1"), "{yaml}");
        assert!(yaml.contains("domainname: example.org"), "{yaml}");
    }

    #[test]
    fn etc_files_show_in_talos_files_namespace() {
        let t = tombstone(Kind::EtcFileStatus, "files", "resolv.conf");
        let m = t.metadata.unwrap();
        assert_eq!(m.r#type, "EtcFileStatuses.files.talos.dev");
        assert_eq!(cosi_namespace(Kind::EtcFileStatus, Namespace::Network), "files");
        assert!(t.spec.is_none());
    }

    #[test]
    fn times_before_1970_are_1970() {
        let before = UNIX_EPOCH - Duration::from_secs(5);
        assert_eq!(timestamp(before), cosi::Timestamp { seconds: 0, nanos: 0 });
    }
}
