// SPDX-License-Identifier: Apache-2.0
//! Rendering resources as a table, YAML documents or a JSON array (the shapes `talosctl get`
//! prints).

use std::fmt::Write as _;
use std::io::Write;

use crate::resource::{AnySpec, Resource};

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Yaml,
    Json,
}

/// An output format that does not exist.
#[derive(Debug, thiserror::Error)]
#[error("unknown output format {0:?} (want table, yaml or json)")]
pub struct UnknownFormat(String);

/// Why output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Writing failed (a closed pipe, a full disk).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A resource could not be encoded as YAML.
    #[error(transparent)]
    Yaml(#[from] serde_yaml::Error),
    /// A resource could not be encoded as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl std::str::FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "table" => Ok(Format::Table),
            "yaml" => Ok(Format::Yaml),
            "json" => Ok(Format::Json),
            _ => Err(UnknownFormat(s.to_owned())),
        }
    }
}

/// Write resources in a format, streaming: a plan of 100,000 resources is never held as text.
pub fn render(
    out: &mut impl Write,
    resources: &[&Resource],
    format: Format,
) -> Result<(), OutputError> {
    match format {
        Format::Table => Ok(out.write_all(table(resources).as_bytes())?),
        Format::Yaml => {
            for (i, r) in resources.iter().enumerate() {
                if i > 0 {
                    out.write_all(b"---\n")?;
                }
                // Through a string, one resource at a time: the same bytes as `to_writer`,
                // and the serializer (`Serializer<&mut Vec<u8>>`) is the one `to_string`
                // callers already instantiate, instead of one more copy of every spec's
                // `Serialize` for this writer type.
                out.write_all(serde_yaml::to_string(r)?.as_bytes())?;
            }
            Ok(())
        }
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, resources)?;
            Ok(out.write_all(b"\n")?)
        }
    }
}

/// The layer of a layered spec, for the table's LAYER column.
fn layer(spec: &AnySpec) -> String {
    let layer = match spec {
        AnySpec::AddressSpec(s) => s.layer,
        AnySpec::RouteSpec(s) => s.layer,
        AnySpec::LinkSpec(s) => s.layer,
        AnySpec::ResolverSpec(s) => s.layer,
        AnySpec::HostnameSpec(s) => s.layer,
        AnySpec::TimeServerSpec(s) => s.layer,
        AnySpec::OperatorSpec(s) => s.layer,
        AnySpec::RoutingRuleSpec(s) => s.layer,
        _ => return String::new(),
    };
    layer.to_string()
}

fn table(resources: &[&Resource]) -> String {
    let header = ["NAMESPACE", "TYPE", "ID", "VERSION", "LAYER"];
    let rows: Vec<[String; 5]> = resources
        .iter()
        .map(|r| {
            let m = &r.metadata;
            [
                m.namespace.to_string(),
                m.kind.to_string(),
                escape_cell(&m.id),
                m.version.to_string(),
                layer(&r.spec),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                let _ = write!(l, "{cell:<w$}   ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&header);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    out
}

/// A table cell as the terminal must show it: control characters (C0, DEL, C1) and
/// bidirectional overrides escaped (`\n`, `\u{1b}`, `\u{202e}`), so a name from a DHCP server
/// or a link alias can neither move the cursor, nor recolour, nor split a row. YAML and JSON
/// are escaped by their serializers.
pub fn escape_cell(text: &str) -> String {
    if text.chars().any(base::names::needs_escape) {
        base::names::escape(text, usize::MAX)
    } else {
        text.to_owned()
    }
}

/// serde_json escapes only C0 controls; DEL, C1 controls (U+009B is a CSI to many
/// terminals) and bidirectional overrides are written raw. They can only occur inside
/// strings, where `\uXXXX` is the same value (RFC 8259 §7), so escape them too. Newlines
/// outside strings are the pretty-printer's and stay.
fn json_escape_rest(text: &str) -> std::borrow::Cow<'_, str> {
    let escape = |c: char| c != '\n' && c != '\\' && base::names::needs_escape(c);
    if !text.chars().any(escape) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escape(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// A resource as the API sends it (JSON), with the node it came from.
#[derive(Debug, Clone)]
pub struct Remote {
    /// The node's hostname, or empty.
    pub node: String,
    /// `{"metadata":…, "spec":…, "provenance":…}`.
    pub resource: serde_json::Value,
}

/// The short type name of a resource's `metadata.type` (`AddressStatuses.net.keelson.dev` →
/// `AddressStatus`); unknown names are shown as they are.
fn short_type(full: &str) -> String {
    crate::resource::Kind::ALL
        .iter()
        .find(|k| k.type_name() == full || k.short_name() == full)
        .map_or_else(|| full.to_owned(), |k| k.short_name().to_owned())
}

/// A JSON value as a table cell: strings bare, absent empty, the rest compact JSON.
fn cell(v: Option<&serde_json::Value>) -> String {
    match v {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The columns a type adds after `VERSION` (as `talosctl get` shows them), and the spec fields they
/// show.
pub fn type_columns(short: &str) -> &'static [(&'static str, &'static str)] {
    match short {
        "AddressStatus" | "AddressSpec" => &[("ADDRESS", "address"), ("LINK", "linkName")],
        "RouteStatus" | "RouteSpec" => &[
            ("DST", "dst"),
            ("GATEWAY", "gateway"),
            ("LINK", "outLinkName"),
            ("METRIC", "priority"),
        ],
        "LinkStatus" => &[
            ("TYPE", "type"),
            ("KIND", "kind"),
            ("HW ADDR", "hardwareAddr"),
            ("OPER STATE", "operationalState"),
        ],
        "LinkSpec" => &[("LOGICAL", "logical"), ("UP", "up"), ("MTU", "mtu")],
        "ResolverStatus" | "ResolverSpec" => &[("RESOLVERS", "dnsServers")],
        "HostnameStatus" | "HostnameSpec" => {
            &[("HOSTNAME", "hostname"), ("DOMAINNAME", "domainname")]
        }
        "TimeServerStatus" | "TimeServerSpec" => &[("TIMESERVERS", "timeServers")],
        "NodeAddress" => &[("ADDRESSES", "addresses")],
        "NetworkStatus" => &[
            ("ADDRESS", "addressReady"),
            ("CONNECTIVITY", "connectivityReady"),
            ("HOSTNAME", "hostnameReady"),
            ("ETC", "etcFilesReady"),
            ("WAITING", "waiting"),
        ],
        "ServiceStatus" => &[
            ("STATE", "state"),
            ("HEALTHY", "healthy"),
            ("PID", "pid"),
            ("STARTS", "starts"),
            ("LAST EXIT", "lastExit"),
        ],
        "MachineStatus" => &[("STAGE", "stage"), ("READY", "status.ready")],
        "TimeStatus" => &[
            ("SYNCED", "synced"),
            ("EPOCH", "epoch"),
            ("SYNC DISABLED", "syncDisabled"),
            ("SERVER", "server"),
            ("OFFSET NS", "offsetNs"),
            ("REASON", "reason"),
        ],
        "SystemInformation" => &[
            ("MANUFACTURER", "manufacturer"),
            ("PRODUCTNAME", "productName"),
            ("VERSION", "version"),
            ("SERIALNUMBER", "serialnumber"),
            ("UUID", "uuid"),
            ("WAKEUPTYPE", "wakeUpType"),
            ("SKUNUMBER", "skuNumber"),
        ],
        "EtcFileStatus" => &[("PATH", "path"), ("SIZE", "size")],
        "NodeIdentity" => &[("NODE ID", "nodeId")],
        "Affiliate" => {
            &[("HOSTNAME", "hostname"), ("MACHINE TYPE", "machineType"), ("ADDRESSES", "addresses")]
        }
        "Member" => &[
            ("HOSTNAME", "hostname"),
            ("MACHINE TYPE", "machineType"),
            ("OS", "operatingSystem"),
            ("ADDRESSES", "addresses"),
        ],
        "RoutingRuleStatus" | "RoutingRuleSpec" => &[
            ("SRC", "src"),
            ("DST", "dst"),
            ("TABLE", "table"),
            ("PRIORITY", "priority"),
            ("ACTION", "action"),
        ],
        "OperatorSpec" => &[("OPERATOR", "operator"), ("LINK", "linkName")],
        "KubeSpanIdentity" => {
            &[("ADDRESS", "address"), ("SUBNET", "subnet"), ("PUBLIC KEY", "publicKey")]
        }
        "KubeSpanPeerSpec" => {
            &[("LABEL", "label"), ("ENDPOINTS", "endpoints"), ("ALLOWED IPS", "allowedIps")]
        }
        "KubeSpanPeerStatus" => &[
            ("LABEL", "label"),
            ("ENDPOINT", "endpoint"),
            ("STATE", "state"),
            ("LAST HANDSHAKE", AGE_PREFIX_LAST_HANDSHAKE),
            ("RX", "receiveBytes"),
            ("TX", "transmitBytes"),
        ],
        "VIPStatus" => &[
            ("LINK", "linkName"),
            ("HOLDING", "holding"),
            ("HOLDER", "holder"),
            ("STATE", "state"),
            ("SINCE", "since"),
            ("REASON", "reason"),
        ],
        "TenantNetworkStatus" => &[
            ("STATE", "state"),
            ("VRF", "vrf"),
            ("VXLAN", "vxlan"),
            ("TABLE", "table"),
            ("PREFIXES", "list:prefixes"),
            ("PEERS", PEERS),
            ("MESSAGE", "message"),
        ],
        "OperatorStatus" => &[
            ("STATE", "state"),
            ("ADDRESS", "address"),
            ("SERVER", "server"),
            ("LEASE", "leaseSeconds"),
            ("REASON", "reason"),
        ],
        _ => &[],
    }
}

/// A column field that shows the age of an RFC 3339 time (`12s ago`) instead of the time.
const AGE_PREFIX: &str = "age:";
const AGE_PREFIX_LAST_HANDSHAKE: &str = "age:lastHandshakeTime";
/// A column field that shows a list of strings comma-separated instead of as JSON.
const LIST_PREFIX: &str = "list:";
/// The column of a tenant network's peers: `ID:STATE`, comma-separated.
const PEERS: &str = "peers:peers";

/// A list of strings, comma-separated (anything else as [`cell`] shows it).
fn list_cell(v: Option<&serde_json::Value>) -> String {
    match v.and_then(serde_json::Value::as_array) {
        Some(items) => items.iter().map(|i| cell(Some(i))).collect::<Vec<_>>().join(","),
        None => cell(v),
    }
}

/// Peers as `301:Ready,302:Pending`.
fn peers_cell(v: Option<&serde_json::Value>) -> String {
    match v.and_then(serde_json::Value::as_array) {
        Some(items) => items
            .iter()
            .map(|p| format!("{}:{}", cell(p.get("id")), cell(p.get("state"))))
            .collect::<Vec<_>>()
            .join(","),
        None => cell(v),
    }
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SSZ` (what [`crate::resource::Rfc3339`] writes).
fn parse_rfc3339(s: &str) -> Option<i64> {
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    if s.len() != 20 || !s.ends_with('Z') {
        return None;
    }
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    // Days from civil (H. Hinnant), the inverse of Rfc3339's formatting.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// `3s ago`, `4m10s ago`, `2h5m ago`; empty for no time.
fn age_cell(v: Option<&serde_json::Value>, now_unix: i64) -> String {
    let Some(t) = v.and_then(|v| v.as_str()).and_then(parse_rfc3339) else {
        return String::new();
    };
    let secs = (now_unix - t).max(0);
    match secs {
        s if s < 60 => format!("{s}s ago"),
        s if s < 3600 => format!("{}m{}s ago", s / 60, s % 60),
        s => format!("{}h{}m ago", s / 3600, (s / 60) % 60),
    }
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The table header for resources of one type (`prefix` adds leading columns, e.g. EVENT).
pub fn remote_header(prefix: &[&str], short: &str) -> Vec<String> {
    let mut h: Vec<String> = prefix.iter().map(|s| (*s).to_owned()).collect();
    h.extend(["NODE", "NAMESPACE", "TYPE", "ID", "VERSION"].map(str::to_owned));
    h.extend(type_columns(short).iter().map(|(name, _)| (*name).to_owned()));
    h
}

/// One table row.
pub fn remote_row(prefix: &[&str], r: &Remote) -> Vec<String> {
    let m = &r.resource["metadata"];
    let short = short_type(m["type"].as_str().unwrap_or_default());
    let mut row: Vec<String> = prefix.iter().map(|s| (*s).to_owned()).collect();
    row.push(r.node.clone());
    row.push(cell(m.get("namespace")));
    row.push(short.clone());
    row.push(cell(m.get("id")));
    row.push(cell(m.get("version")));
    let spec = &r.resource["spec"];
    let now = now_unix();
    row.extend(type_columns(&short).iter().map(
        |(_, field)| match field.strip_prefix(AGE_PREFIX) {
            Some(f) => age_cell(spec.get(f), now),
            None if field.starts_with(LIST_PREFIX) => {
                list_cell(spec.get(field.trim_start_matches(LIST_PREFIX)))
            }
            None if *field == PEERS => peers_cell(spec.get("peers")),
            // `status.ready`: a field of a nested object.
            None => cell(field.split('.').try_fold(spec, |v, k| v.get(k))),
        },
    ));
    row
}

/// Align rows under a header, three spaces apart, the last column ragged.
pub fn align(rows: &[Vec<String>]) -> String {
    align_with(rows, &mut Vec::new())
}

/// Like [`align`], with column widths kept across calls: a stream of rows (a watch) stays
/// aligned, columns only ever growing.
pub fn align_with(rows: &[Vec<String>], widths: &mut Vec<usize>) -> String {
    let rows: Vec<Vec<String>> =
        rows.iter().map(|row| row.iter().map(|c| escape_cell(c)).collect()).collect();
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            if widths.len() <= i {
                widths.push(0);
            }
            widths[i] = widths[i].max(c.len());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut l = String::new();
        for (i, (c, w)) in row.iter().zip(widths.iter()).enumerate() {
            if i + 1 == row.len() {
                l.push_str(c);
            } else {
                let _ = write!(l, "{c:<w$}   ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    }
    out
}

/// One YAML document: `node:`, `metadata:`, `spec:` and, for merged specs, `provenance:`.
pub fn remote_yaml(r: &Remote) -> Result<String, serde_yaml::Error> {
    // A YAML mapping keeps insertion order: `node` first, as `talosctl` prints it.
    let mut doc = serde_yaml::Mapping::new();
    doc.insert("node".into(), r.node.clone().into());
    for key in ["metadata", "spec", "provenance"] {
        if let Some(v) = r.resource.get(key) {
            doc.insert(key.into(), serde_yaml::to_value(v)?);
        }
    }
    serde_yaml::to_string(&doc)
}

/// Render resources from the API.
pub fn render_remote(
    out: &mut impl Write,
    items: &[Remote],
    format: Format,
) -> Result<(), OutputError> {
    match format {
        Format::Table => {
            let short = items
                .first()
                .map(|r| short_type(r.resource["metadata"]["type"].as_str().unwrap_or_default()))
                .unwrap_or_default();
            let mut rows = vec![remote_header(&[], &short)];
            rows.extend(items.iter().map(|r| remote_row(&[], r)));
            Ok(out.write_all(align(&rows).as_bytes())?)
        }
        Format::Yaml => {
            for (i, r) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b"---\n")?;
                }
                out.write_all(remote_yaml(r)?.as_bytes())?;
            }
            Ok(())
        }
        Format::Json => {
            let all: Vec<&serde_json::Value> = items.iter().map(|r| &r.resource).collect();
            let text = serde_json::to_string_pretty(&all)?;
            out.write_all(json_escape_rest(&text).as_bytes())?;
            Ok(out.write_all(b"\n")?)
        }
    }
}

#[cfg(test)]
mod remote_tests {
    use super::*;
    use serde_json::json;

    fn addr() -> Remote {
        Remote {
            node: "node-1".into(),
            resource: json!({
                "metadata": {"namespace": "network", "type": "AddressStatuses.net.keelson.dev",
                             "id": "eth0/10.0.0.2/24", "version": 1},
                "spec": {"address": "10.0.0.2/24", "linkName": "eth0"}
            }),
        }
    }

    #[test]
    fn table_has_seed_columns() {
        let mut out = Vec::new();
        render_remote(&mut out, &[addr()], Format::Table).unwrap_or_else(|e| unreachable!("{e}"));
        let text = String::from_utf8_lossy(&out);
        let mut lines = text.lines();
        assert_eq!(
            lines.next().map(|l| l.split_whitespace().collect::<Vec<_>>()),
            Some(vec!["NODE", "NAMESPACE", "TYPE", "ID", "VERSION", "ADDRESS", "LINK"])
        );
        assert_eq!(
            lines.next().map(|l| l.split_whitespace().collect::<Vec<_>>()),
            Some(vec![
                "node-1",
                "network",
                "AddressStatus",
                "eth0/10.0.0.2/24",
                "1",
                "10.0.0.2/24",
                "eth0"
            ])
        );
    }

    #[test]
    fn peer_table_shows_handshake_age() {
        let t = crate::resource::Rfc3339(
            std::time::SystemTime::now() - std::time::Duration::from_secs(75),
        )
        .to_string();
        let peer = Remote {
            node: "n".into(),
            resource: json!({
                "metadata": {"namespace": "kubespan",
                             "type": "KubeSpanPeerStatuses.kubespan.keelson.dev",
                             "id": "key", "version": 3},
                "spec": {"label": "node-2", "endpoint": "10.0.0.2:51820", "state": "up",
                         "lastHandshakeTime": t, "receiveBytes": 1024, "transmitBytes": 2048}
            }),
        };
        let header = remote_header(&[], "KubeSpanPeerStatus");
        assert_eq!(
            header[5..],
            ["LABEL", "ENDPOINT", "STATE", "LAST HANDSHAKE", "RX", "TX"].map(str::to_owned)
        );
        let row = remote_row(&[], &peer);
        let age = &row[8];
        assert!(age == "1m15s ago" || age == "1m16s ago", "{row:?}");
        assert_eq!(row[5..8], ["node-2", "10.0.0.2:51820", "up"].map(str::to_owned));
        assert_eq!(row[9..], ["1024", "2048"].map(str::to_owned));
        assert_eq!(parse_rfc3339("2021-06-29T20:23:18Z"), Some(1_624_998_198));
        assert_eq!(parse_rfc3339("2000-02-29T00:00:00Z"), Some(951_782_400));
        assert_eq!(parse_rfc3339("garbage"), None);
    }

    #[test]
    fn yaml_documents() {
        let mut out = Vec::new();
        render_remote(&mut out, &[addr(), addr()], Format::Yaml)
            .unwrap_or_else(|e| unreachable!("{e}"));
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("node: node-1\nmetadata:\n"), "{text}");
        assert_eq!(text.matches("\n---\n").count(), 1, "{text}");
        assert!(text.contains("spec:\n  address: 10.0.0.2/24"), "{text}");
    }

    fn hostile() -> Remote {
        Remote {
            node: "n\x1b[2Jode".into(),
            resource: json!({
                "metadata": {"namespace": "network", "type": "HostnameStatuses.net.keelson.dev",
                             "id": "hostname", "version": 1},
                "spec": {"hostname": "evil\n10.0.0.66 registry\u{1b}]0;t\u{7}",
                         "domainname": "\u{202e}moc.elpmaxe\u{9b}"}
            }),
        }
    }

    #[test]
    fn table_escapes_control_characters_in_every_cell() {
        let mut out = Vec::new();
        render_remote(&mut out, &[hostile()], Format::Table)
            .unwrap_or_else(|e| unreachable!("{e}"));
        let text = String::from_utf8(out).unwrap_or_default();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(!text.trim_end().chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
        assert!(!text.contains('\u{202e}'), "{text:?}");
        let row = text.lines().nth(1).unwrap_or_default();
        assert!(row.starts_with("n\\u{1b}[2Jode "), "{row}");
        assert!(row.contains("evil\\n10.0.0.66 registry\\u{1b}]0;t\\u{7}"), "{row}");
        assert!(row.ends_with("\\u{202e}moc.elpmaxe\\u{9b}"), "{row}");
        // The watch path aligns the same rows.
        let aligned = align_with(&[remote_row(&["+"], &hostile())], &mut Vec::new());
        assert!(!aligned.trim_end().chars().any(|c| c.is_control()), "{aligned:?}");
    }

    #[test]
    fn yaml_and_json_escape_control_characters() {
        for format in [Format::Yaml, Format::Json] {
            let mut out = Vec::new();
            render_remote(&mut out, &[hostile()], format).unwrap_or_else(|e| unreachable!("{e}"));
            let text = String::from_utf8(out).unwrap_or_default();
            assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{format:?}: {text:?}");
            if format == Format::Json {
                assert!(!text.contains('\u{202e}'), "{text:?}");
            }
            // Escaped, not dropped: the value reads back intact.
            let back: serde_json::Value = match format {
                Format::Json => serde_json::from_str(&text).unwrap_or_default(),
                _ => serde_yaml::from_str(&text).unwrap_or_default(),
            };
            let spec = if format == Format::Json { &back[0]["spec"] } else { &back["spec"] };
            assert_eq!(spec["hostname"], "evil\n10.0.0.66 registry\u{1b}]0;t\u{7}", "{format:?}");
        }
    }
}
