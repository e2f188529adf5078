// SPDX-License-Identifier: Apache-2.0
//! `machine.MachineService/Kubeconfig` on a control plane: an admin kubeconfig whose client
//! certificate (`O=system:masters`, `CN=admin`) is issued from the cluster's Kubernetes CA
//! (`cluster.ca`), for the API at `cluster.controlPlane.endpoint`. As Talos's machined
//! answers it (siderolabs/talos `v1alpha1_server.go`), the file is sent as a `.tar.gz` holding
//! one file, `kubeconfig` (mode 0600), in one `common.Data` message, the format of `Copy`.
//! Workers: `FailedPrecondition`.

use std::time::SystemTime;

use base64::Engine;
use grpc::{code, Status};
use net::config::{MachineConfig, MachineType};
use net::resource::Namespace;
use talos_api::common::{Data, Metadata};
use talos_api::google::Empty;
use talos_api::Message;

use super::dispatch::{decode, Call, Feed, FeedCtx, Flow, Method, Reply, SMALL_REQUEST};
use crate::api::identity::Ca;

/// The methods served.
pub const METHODS: &[Method] = &[Method {
    path: "/machine.MachineService/Kubeconfig",
    max_request: SMALL_REQUEST,
    handler: kubeconfig,
}];

/// The admin certificate's validity (Talos's default `adminKubeconfig.certLifetime`: a year).
const CERT_DAYS: i64 = 365;
/// The cluster's name in the kubeconfig (keelson does not read `cluster.clusterName`).
const CLUSTER: &str = "keelson";

fn kubeconfig(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let refuse = |why: String| Err(Status::new(code::FAILED_PRECONDITION, why));
    let config = call
        .rt
        .store()
        .get_spec::<MachineConfig>(Namespace::Config, net::controllers::MACHINE_CONFIG_ID);
    let Some(config) = config else {
        return refuse("the node has no machine config".into());
    };
    if config.machine.machine_type != Some(MachineType::ControlPlane) {
        return refuse("kubeconfig is only available on control plane nodes".into());
    }
    let cluster = config.cluster.as_ref();
    let endpoint = cluster.and_then(|c| c.control_plane.as_ref()).and_then(|p| p.endpoint.clone());
    let Some(endpoint) = endpoint else {
        return refuse("cluster.controlPlane.endpoint is not set".into());
    };
    if let Err(why) = check_endpoint(&endpoint) {
        return refuse(format!("cluster.controlPlane.endpoint: {why}"));
    }
    let Some(ca) = cluster.and_then(|c| c.ca.as_ref()) else {
        return refuse("cluster.ca is not set".into());
    };
    let Some(key) = ca.key.as_deref() else {
        return refuse("cluster.ca has no key: the node cannot issue the admin certificate".into());
    };
    let pem = |b64: &str, what| crate::api::remote::decode(b64, what);
    let issued = pem(&ca.crt, "crt").and_then(|crt| pem(key, "key").map(|k| (crt, k))).and_then(
        |(crt, k)| {
            let ca = Ca::from_pem(&crt, &k).map_err(|e| e.to_string())?;
            let id = ca
                .issue_kube_client("system:masters", "admin", CERT_DAYS)
                .map_err(|e| e.to_string())?;
            Ok((crt, id))
        },
    );
    let (ca_pem, id) = match issued {
        Ok(x) => x,
        Err(e) => return refuse(format!("cluster.ca: {e}")),
    };
    let text = render(&endpoint, &ca_pem, &id.cert_pem, &id.key_pem);
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let archive = tar_gz("kubeconfig", text.as_bytes(), now);
    log::info!(target: "api", "admin kubeconfig issued from cluster.ca");
    let msg = Data { metadata: Metadata::of(&call.hostname()), bytes: archive }.encode_to_vec();
    Ok(Reply::Stream(Box::new(Once(Some(msg)))))
}

/// `https://HOST[:PORT][/PATH]`, with nothing YAML or a URL would read specially.
fn check_endpoint(url: &str) -> Result<(), &'static str> {
    let rest = url.strip_prefix("https://").ok_or("not an https:// URL")?;
    let ok = |c: char| c.is_ascii_alphanumeric() || "-._~:/[]%".contains(c);
    if rest.is_empty() || url.len() > 512 || !rest.chars().all(ok) {
        return Err("not a URL of a host and port");
    }
    Ok(())
}

/// The kubeconfig (YAML; every value is base64 or a checked URL, so nothing needs quoting).
fn render(server: &str, ca_pem: &str, cert_pem: &str, key_pem: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let user = format!("admin@{CLUSTER}");
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n  - name: {CLUSTER}\n    cluster:\n      server: {server}\n      certificate-authority-data: {}\nusers:\n  - name: {user}\n    user:\n      client-certificate-data: {}\n      client-key-data: {}\ncontexts:\n  - context:\n      cluster: {CLUSTER}\n      namespace: default\n      user: {user}\n    name: {user}\ncurrent-context: {user}\n",
        b64(ca_pem),
        b64(cert_pem),
        b64(key_pem),
    )
}

/// A stream of one message.
struct Once(Option<Vec<u8>>);

impl Feed for Once {
    fn next(&mut self, _: &FeedCtx<'_>, _room: usize, out: &mut Vec<Vec<u8>>) -> Flow {
        out.extend(self.0.take());
        Flow::Done(Status::new(code::OK, ""))
    }

    fn ready(&self) -> bool {
        self.0.is_some()
    }
}

/// A `.tar.gz` of one regular file `name` (mode 0600, owner root). The deflate stream uses
/// stored blocks: a kubeconfig is a few KiB and compressing it buys nothing.
pub(crate) fn tar_gz(name: &str, data: &[u8], mtime: u64) -> Vec<u8> {
    gzip(&tar(name, data, mtime), mtime)
}

/// A ustar archive of one file (POSIX.1-1988 header, two zero blocks at the end).
fn tar(name: &str, data: &[u8], mtime: u64) -> Vec<u8> {
    let mut h = [0u8; 512];
    let mut put = |at: usize, bytes: &[u8]| {
        for (i, b) in bytes.iter().enumerate() {
            if let Some(slot) = h.get_mut(at + i) {
                *slot = *b;
            }
        }
    };
    let name = name.as_bytes();
    put(0, name.get(..name.len().min(100)).unwrap_or_default());
    put(100, b"0000600\0");
    put(108, b"0000000\0");
    put(116, b"0000000\0");
    put(124, format!("{:011o}\0", data.len()).as_bytes());
    put(136, format!("{:011o}\0", mtime & 0o77_777_777_777).as_bytes());
    put(148, b"        ");
    put(156, b"0");
    put(257, b"ustar\0");
    put(263, b"00");
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    let mut put = |at: usize, bytes: &[u8]| {
        for (i, b) in bytes.iter().enumerate() {
            if let Some(slot) = h.get_mut(at + i) {
                *slot = *b;
            }
        }
    };
    put(148, format!("{sum:06o}\0 ").as_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out.extend_from_slice(&[0u8; 1024]);
    out
}

/// RFC 1952 gzip of `data` in RFC 1951 stored blocks.
fn gzip(data: &[u8], mtime: u64) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0];
    out.extend_from_slice(&u32::try_from(mtime).unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&[0, 255]);
    let mut chunks = data.chunks(0xffff).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        let last = u8::from(chunks.peek().is_none());
        let len = chunk.len() as u16;
        out.push(last);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// CRC-32 (IEEE 802.3, reflected), as gzip's trailer has it.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for b in data {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_of_the_check_string() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn the_archive_is_a_gzip_of_a_tar_of_one_file() {
        let data = b"apiVersion: v1\n";
        let gz = tar_gz("kubeconfig", data, 1_700_000_000);
        assert_eq!(gz.get(..3), Some(&[0x1f, 0x8b, 8][..]));
        // Stored blocks: the tar sits in the stream as it is, after the 10-byte gzip header
        // and the 5-byte block header.
        let tar = gz.get(15..gz.len() - 8).unwrap_or_default();
        assert_eq!(tar.len() % 512, 0);
        assert_eq!(tar.get(..10), Some(&b"kubeconfig"[..]));
        assert_eq!(tar.get(257..262), Some(&b"ustar"[..]));
        assert_eq!(tar.get(512..512 + data.len()), Some(&data[..]));
        let sum: u32 = tar
            .get(..512)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(i, b)| if (148..156).contains(&i) { u32::from(b' ') } else { u32::from(*b) })
            .sum();
        let stored = std::str::from_utf8(tar.get(148..154).unwrap_or_default()).unwrap_or("");
        assert_eq!(u32::from_str_radix(stored, 8).ok(), Some(sum));
    }

    #[test]
    fn only_plain_https_endpoints() {
        assert!(check_endpoint("https://10.0.0.2:6443").is_ok());
        assert!(check_endpoint("https://[fd00::1]:6443").is_ok());
        assert!(check_endpoint("http://10.0.0.2:6443").is_err());
        assert!(check_endpoint("https://a\n  user: x").is_err());
        assert!(check_endpoint("https://").is_err());
    }
}
