// SPDX-License-Identifier: Apache-2.0
//! The verbs that call Talos's `machine.MachineService` over gRPC ([`crate::rpc`]), and how
//! their answers print: talosctl's layouts and columns, every text from the node escaped for a
//! terminal. Printing is pure (answers in, text out) so it is tested without a node.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use talos_api::common::Data;
use talos_api::google::{Empty, Timestamp};
use talos_api::machine::{
    AddressEvent, DmesgRequest, Event, EventsRequest, LogsRequest, MachineStage,
    MachineStatusEvent, RebootRequest, RebootResponse, ServiceAction, ServiceInfo,
    ServiceListResponse, ServiceRestartRequest, ServiceRestartResponse, ServiceStateEvent,
    ShutdownRequest, ShutdownResponse, VersionInfo, VersionResponse,
};
use talos_api::storage::DisksResponse;
use talos_api::Message;

use crate::output::escape_cell;
use crate::rpc::{Channel, RpcError, MAX_MESSAGE};

/// The HTTP/2 path of a `machine.MachineService` method.
pub fn path(method: &str) -> String {
    format!("/{}/{method}", talos_api::machine::SERVICE)
}

/// A table cell as talosctl prints an empty one (tables escape their cells:
/// [`crate::output::align`]).
fn or_dash(s: &str) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.into()
    }
}

/// This client's version, as talosctl prints its own under `Client:`.
pub fn client_version() -> String {
    long_version(&VersionInfo {
        tag: concat!("v", env!("CARGO_PKG_VERSION")).into(),
        os: std::env::consts::OS.into(),
        arch: match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        }
        .into(),
        ..VersionInfo::default()
    })
}

/// talosctl's long version block (`Tag`, `SHA`, `Built`, `Go version`, `OS/Arch`).
fn long_version(v: &VersionInfo) -> String {
    let mut text = String::new();
    for (label, value) in [
        ("Tag:", escape_cell(&v.tag)),
        ("SHA:", escape_cell(&v.sha)),
        ("Built:", escape_cell(&v.built)),
        ("Go version:", escape_cell(&v.go_version)),
        ("OS/Arch:", format!("{}/{}", escape_cell(&v.os), escape_cell(&v.arch))),
    ] {
        text.push_str(&format!("\t{label:<12} {value}\n"));
    }
    text
}

/// Each answering node's version, under `Server:`, `node` naming it as the user did (as
/// talosctl does). In maintenance mode: the node answered a client without a certificate
/// (`insecure`), which only a node in maintenance mode does, or it left the features out,
/// as Talos's maintenance service does.
pub fn version_text(node: &str, reply: &VersionResponse, insecure: bool) -> String {
    let mut text = String::new();
    for m in &reply.messages {
        text.push_str("Server:\n");
        text.push_str(&format!("\t{:<12} {}\n", "NODE:", escape_cell(node)));
        text.push_str(&long_version(&m.version.clone().unwrap_or_default()));
        let mut enabled = Vec::new();
        if m.features.as_ref().is_some_and(|f| f.rbac) {
            enabled.push("RBAC");
        }
        text.push_str(&format!("\t{:<12} {}\n", "Enabled:", enabled.join(", ")));
        if insecure || m.features.is_none() {
            text.push_str(&format!("\t{:<12} maintenance mode\n", "Mode:"));
        }
    }
    text
}

/// `Version` on one node.
pub fn version(
    c: &mut Channel,
    node: &str,
    insecure: bool,
    out: &mut dyn Write,
) -> Result<(), RpcError> {
    let reply: VersionResponse = c.unary(&path("Version"), &Empty {})?;
    out.write_all(version_text(node, &reply, insecure).as_bytes())
        .map_err(|e| RpcError::Handler(e.to_string()))
}

/// The longest line a byte stream (dmesg, logs) builds up before it is printed anyway: a
/// node that never sends a newline costs the client this much, not more.
pub const MAX_LINE: usize = 64 << 10;

/// Splits a byte stream that arrives in arbitrary chunks into lines, each escaped for a
/// terminal.
#[derive(Debug, Default)]
pub struct Lines {
    pending: Vec<u8>,
}

impl Lines {
    /// Add a chunk; the text of every line it completes.
    pub fn push(&mut self, chunk: &[u8]) -> String {
        let mut text = String::new();
        for &b in chunk {
            if b == b'\n' {
                self.line(&mut text);
            } else {
                self.pending.push(b);
                if self.pending.len() >= MAX_LINE {
                    self.line(&mut text);
                }
            }
        }
        text
    }

    /// The end of the stream: an unfinished last line.
    pub fn finish(&mut self) -> String {
        let mut text = String::new();
        if !self.pending.is_empty() {
            self.line(&mut text);
        }
        text
    }

    fn line(&mut self, text: &mut String) {
        text.push_str(&escape_cell(&String::from_utf8_lossy(&self.pending)));
        text.push('\n');
        self.pending.clear();
    }
}

fn write_err(e: std::io::Error) -> String {
    e.to_string()
}

/// Print a stream of `common.Data` chunks as escaped lines, as they arrive.
fn print_stream(
    c: &mut Channel,
    path: &str,
    req: &impl Message,
    out: &mut dyn Write,
) -> Result<(), RpcError> {
    let mut lines = Lines::default();
    c.call(path, req, MAX_MESSAGE, &mut |d: Data| {
        let text = lines.push(&d.bytes);
        out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(write_err)
    })?;
    out.write_all(lines.finish().as_bytes()).map_err(|e| RpcError::Handler(e.to_string()))
}

/// `Dmesg`: the kernel ring buffer; `follow` keeps printing new records.
pub fn dmesg(c: &mut Channel, follow: bool, out: &mut dyn Write) -> Result<(), RpcError> {
    print_stream(c, &path("Dmesg"), &DmesgRequest { follow, tail: false }, out)
}

/// `Logs`: a service's log (machined's is keelson's own log ring); `follow` keeps printing.
pub fn logs(
    c: &mut Channel,
    service: &str,
    follow: bool,
    tail_lines: i32,
    out: &mut dyn Write,
) -> Result<(), RpcError> {
    let req = LogsRequest {
        namespace: "system".into(),
        id: service.into(),
        driver: 0,
        follow,
        tail_lines,
    };
    print_stream(c, &path("Logs"), &req, out)
}

/// go-humanize's `Bytes` as talosctl prints sizes: SI units, one decimal below 10.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
    if n < 10 {
        return format!("{n} B");
    }
    let e = ((n as f64).ln() / 1000f64.ln()).floor() as usize;
    let e = e.min(UNITS.len() - 1);
    let v = (n as f64 / 1000f64.powi(e as i32) * 10.0 + 0.5).floor() / 10.0;
    let unit = UNITS.get(e).copied().unwrap_or("B");
    if v < 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.0} {unit}")
    }
}

/// `storage.Disk.type` by name.
fn disk_type(t: i32) -> &'static str {
    match t {
        1 => "SSD",
        2 => "HDD",
        3 => "NVME",
        4 => "SD",
        5 => "CD",
        _ => "UNKNOWN",
    }
}

/// talosctl's disks table. talosctl adds a NODE column when an answer came through its
/// proxy; keelson connects to each node itself and names several nodes as every verb does
/// (each line prefixed with the node).
pub fn disks_table(reply: &DisksResponse) -> String {
    let header: Vec<String> = [
        "DEV",
        "MODEL",
        "SERIAL",
        "TYPE",
        "UUID",
        "WWID",
        "MODALIAS",
        "NAME",
        "SIZE",
        "BUS_PATH",
        "SUBSYSTEM",
        "READ_ONLY",
        "SYSTEM_DISK",
    ]
    .map(String::from)
    .to_vec();
    let mut rows = vec![header];
    for m in &reply.messages {
        for d in &m.disks {
            rows.push(vec![
                or_dash(&d.device_name),
                or_dash(&d.model),
                or_dash(&d.serial),
                disk_type(d.r#type).into(),
                or_dash(&d.uuid),
                or_dash(&d.wwid),
                or_dash(&d.modalias),
                or_dash(&d.name),
                human_bytes(d.size),
                or_dash(&d.bus_path),
                or_dash(&d.subsystem),
                if d.readonly { "*" } else { "" }.into(),
                if d.system_disk { "*" } else { "" }.into(),
            ]);
        }
    }
    crate::output::align(&rows)
}

/// `storage.StorageService/Disks`.
pub fn disks(c: &mut Channel, out: &mut dyn Write) -> Result<(), RpcError> {
    let reply: DisksResponse =
        c.unary(&format!("/{}/Disks", talos_api::storage::SERVICE), &Empty {})?;
    out.write_all(disks_table(&reply).as_bytes()).map_err(|e| RpcError::Handler(e.to_string()))
}

/// A whole number of seconds as Go's `time.Duration` prints it (`0s`, `42s`, `3m7s`,
/// `26h0m5s`).
pub fn go_duration(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

fn since(ts: Option<Timestamp>, now: SystemTime) -> String {
    let Some(ts) = ts else { return String::new() };
    let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    // Rounded to the second as talosctl does; a clock ahead of ours reads as zero.
    let then = ts.seconds.max(0) as u64 + u64::from(ts.nanos >= 500_000_000);
    go_duration(now.saturating_sub(then))
}

fn health(s: &ServiceInfo) -> &'static str {
    match &s.health {
        Some(h) if h.unknown => "?",
        Some(h) if h.healthy => "OK",
        Some(_) => "Fail",
        None => "?",
    }
}

/// talosctl's services table: `NODE SERVICE STATE HEALTH LAST CHANGE LAST EVENT`, one row
/// per service of every node, the node named as the user named it (keelson has no proxy
/// whose metadata would name it).
pub fn services_table(answers: &[(String, ServiceListResponse)], now: SystemTime) -> String {
    let mut rows = vec![["NODE", "SERVICE", "STATE", "HEALTH", "LAST CHANGE", "LAST EVENT"]
        .map(String::from)
        .to_vec()];
    for (node, reply) in answers {
        for m in &reply.messages {
            for s in &m.services {
                let events = s.events.as_ref().map(|e| e.events.as_slice()).unwrap_or_default();
                let last = events.last();
                rows.push(vec![
                    node.clone(),
                    s.id.clone(),
                    s.state.clone(),
                    health(s).into(),
                    format!("{} ago", since(last.and_then(|e| e.ts), now)),
                    last.map_or_else(|| "<none>".into(), |e| e.msg.clone()),
                ]);
            }
        }
    }
    crate::output::align(&rows)
}

/// One service as talosctl's `service ID` prints it: NODE, ID, STATE, HEALTH, the last
/// health message, then the events newest first.
pub fn service_text(node: &str, s: &ServiceInfo, now: SystemTime) -> String {
    let mut rows = vec![
        vec!["NODE".to_owned(), node.to_owned()],
        vec!["ID".to_owned(), s.id.clone()],
        vec!["STATE".to_owned(), s.state.clone()],
        vec!["HEALTH".to_owned(), health(s).to_owned()],
    ];
    if let Some(h) = s.health.as_ref().filter(|h| !h.last_message.is_empty()) {
        rows.push(vec!["LAST HEALTH MESSAGE".into(), h.last_message.clone()]);
    }
    let events = s.events.as_ref().map(|e| e.events.as_slice()).unwrap_or_default();
    for (i, e) in events.iter().rev().enumerate() {
        rows.push(vec![
            if i == 0 { "EVENTS" } else { "" }.into(),
            format!("[{}]: {} ({} ago)", e.state, e.msg, since(e.ts, now)),
        ]);
    }
    crate::output::align(&rows)
}

/// `ServiceList` on one node.
pub fn service_list(c: &mut Channel) -> Result<ServiceListResponse, RpcError> {
    c.unary(&path("ServiceList"), &Empty {})
}

/// `ServiceStart`, `ServiceStop` or `ServiceRestart` on one node: the node's answer text.
pub fn service_action(c: &mut Channel, action: &str, id: &str) -> Result<String, RpcError> {
    let method = match action {
        "start" => "ServiceStart",
        "stop" => "ServiceStop",
        _ => "ServiceRestart",
    };
    let reply: ServiceRestartResponse =
        c.unary(&path(method), &ServiceRestartRequest { id: id.into() })?;
    Ok(reply.messages.iter().map(|m| m.resp.as_str()).collect::<Vec<_>>().join(", "))
}

/// `Reboot` (`mode` 0 default, 1 powercycle) or `Shutdown`.
pub fn power(c: &mut Channel, op: &str, mode: i32) -> Result<(), RpcError> {
    if op == "reboot" {
        let _: RebootResponse = c.unary(&path("Reboot"), &RebootRequest { mode })?;
    } else {
        let _: ShutdownResponse = c.unary(&path("Shutdown"), &ShutdownRequest { force: false })?;
    }
    Ok(())
}

/// The prefix of the type URLs of Talos's runtime events.
const EVENT_URL: &str = "talos/runtime/";

/// talosctl's events columns.
pub const EVENTS_HEADER: [&str; 6] = ["NODE", "ID", "EVENT", "ACTOR", "SOURCE", "MESSAGE"];

/// One event as talosctl's `events` row (`node` as the user named it); `None` for an event
/// type this client does not know (talosctl skips those too), or one that does not decode.
pub fn event_row(node: &str, ev: &Event) -> Option<Vec<String>> {
    let data = ev.data.as_ref()?;
    let name = data.type_url.strip_prefix(EVENT_URL)?;
    let (source, message) = match name {
        "machine.ServiceStateEvent" => {
            let m = ServiceStateEvent::decode(data.value.as_slice()).ok()?;
            let action = ServiceAction::try_from(m.action).map_or("UNKNOWN", action_name);
            (m.service, format!("{action}: {}", m.message))
        }
        "machine.AddressEvent" => {
            let m = AddressEvent::decode(data.value.as_slice()).ok()?;
            (m.hostname, format!("ADDRESSES: {}", m.addresses.join(",")))
        }
        "machine.MachineStatusEvent" => {
            let m = MachineStatusEvent::decode(data.value.as_slice()).ok()?;
            let stage = MachineStage::try_from(m.stage).map_or("UNKNOWN", stage_name);
            let status = m.status.unwrap_or_default();
            let unmet: Vec<&str> =
                status.unmet_conditions.iter().map(|c| c.name.as_str()).collect();
            (
                stage.to_owned(),
                format!("ready: {}, unmet conditions: [{}]", status.ready, unmet.join(" ")),
            )
        }
        _ => return None,
    };
    Some(vec![
        node.to_owned(),
        ev.id.clone(),
        data.type_url.clone(),
        ev.actor_id.clone(),
        source,
        message,
    ])
}

/// Go's enum names as Talos's protobuf prints them.
fn action_name(a: ServiceAction) -> &'static str {
    match a {
        ServiceAction::Initialized => "INITIALIZED",
        ServiceAction::Preparing => "PREPARING",
        ServiceAction::Waiting => "WAITING",
        ServiceAction::Running => "RUNNING",
        ServiceAction::Stopping => "STOPPING",
        ServiceAction::Finished => "FINISHED",
        ServiceAction::Failed => "FAILED",
        ServiceAction::Skipped => "SKIPPED",
    }
}

fn stage_name(s: MachineStage) -> &'static str {
    match s {
        MachineStage::Unknown => "UNKNOWN",
        MachineStage::Booting => "BOOTING",
        MachineStage::Installing => "INSTALLING",
        MachineStage::Maintenance => "MAINTENANCE",
        MachineStage::Running => "RUNNING",
        MachineStage::Rebooting => "REBOOTING",
        MachineStage::ShuttingDown => "SHUTTING_DOWN",
        MachineStage::Resetting => "RESETTING",
        MachineStage::Upgrading => "UPGRADING",
    }
}

/// `Events`: the node's runtime events as they come (after the history `req` asks for),
/// one aligned row each.
pub fn events(
    c: &mut Channel,
    node: &str,
    req: &EventsRequest,
    out: &mut dyn Write,
) -> Result<(), RpcError> {
    // Seeded wide enough for typical cells, so later rows rarely widen a column.
    let mut widths = vec![node.len().max(4), 20, 39, 5, 8];
    let header = vec![EVENTS_HEADER.map(String::from).to_vec()];
    out.write_all(crate::output::align_with(&header, &mut widths).as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| RpcError::Handler(e.to_string()))?;
    c.call(&path("Events"), req, MAX_MESSAGE, &mut |ev: Event| {
        let Some(row) = event_row(node, &ev) else { return Ok(()) };
        let text = crate::output::align_with(&[row], &mut widths);
        out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(write_err)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use talos_api::common::Metadata;
    use talos_api::machine::{FeaturesInfo, Version};
    use talos_api::machine::{ServiceEvent, ServiceEvents, ServiceHealth, ServiceList};
    use talos_api::storage::{Disk, Disks};

    #[test]
    fn version_prints_talosctl_s_layout_escaped() {
        let reply = VersionResponse {
            messages: vec![Version {
                metadata: None,
                version: Some(VersionInfo {
                    tag: "v0.1.0\x1b[2J".into(),
                    os: "linux".into(),
                    arch: "amd64".into(),
                    ..VersionInfo::default()
                }),
                platform: None,
                features: Some(FeaturesInfo { rbac: true }),
                keelson_boot: None,
            }],
        };
        let text = version_text("10.0.0.2", &reply, true);
        assert!(text.contains("\tMode:        maintenance mode\n"), "{text}");
        assert_eq!(
            text,
            "Server:\n\tNODE:        10.0.0.2\n\tTag:         v0.1.0\\u{1b}[2J\n\tSHA:         \n\tBuilt:       \n\tGo version:  \n\tOS/Arch:     linux/amd64\n\tEnabled:     RBAC\n\tMode:        maintenance mode\n"
        );
        // A node with a client certificate, and its features: not in maintenance mode. The
        // node is named as the user named it, whatever hostname it reports.
        let mut named = reply.clone();
        named.messages[0].metadata =
            Some(Metadata { hostname: "n1".into(), ..Metadata::default() });
        let text = version_text("10.0.0.2", &named, false);
        assert!(
            text.contains("\tNODE:        10.0.0.2\n") && !text.contains("maintenance"),
            "{text}"
        );
        // Without features (Talos's maintenance service leaves them out), even over the socket.
        let mut bare = reply;
        bare.messages[0].features = None;
        let text = version_text("/run/keelson/api.sock", &bare, false);
        assert!(text.contains("\tEnabled:     \n\tMode:        maintenance mode\n"), "{text}");
    }

    #[test]
    fn lines_join_chunks_escape_and_stay_bounded() {
        let mut l = Lines::default();
        assert_eq!(l.push(b"one\ntw"), "one\n");
        assert_eq!(l.push(b"o\n\x1b]0;x\x07\n"), "two\n\\u{1b}]0;x\\u{7}\n");
        assert_eq!(l.push(b"no newline"), "");
        assert_eq!(l.finish(), "no newline\n");
        // A node that never sends a newline: printed in pieces of MAX_LINE.
        let text = l.push(&vec![b'a'; MAX_LINE * 2 + 5]);
        assert_eq!(text.lines().count(), 2);
        assert!(text.lines().all(|line| line.len() == MAX_LINE));
        assert_eq!(l.finish(), "aaaaa\n");
    }

    #[test]
    fn sizes_as_talosctl_prints_them() {
        for (n, want) in [
            (0, "0 B"),
            (9, "9 B"),
            (999, "999 B"),
            (1000, "1.0 kB"),
            (1_500_000, "1.5 MB"),
            (10_737_418_240, "11 GB"),
            (512_110_190_592, "512 GB"),
            (u64::MAX, "18 EB"),
        ] {
            assert_eq!(human_bytes(n), want, "{n}");
        }
    }

    #[test]
    fn durations_as_go_prints_them() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(59), "59s");
        assert_eq!(go_duration(187), "3m7s");
        assert_eq!(go_duration(93_605), "26h0m5s");
    }

    fn disk(dev: &str) -> Disk {
        Disk {
            size: 10_737_418_240,
            model: "QEMU HARDDISK".into(),
            device_name: dev.into(),
            r#type: 2,
            bus_path: "/pci0000:00/virtio1".into(),
            subsystem: "/sys/class/block".into(),
            ..Disk::default()
        }
    }

    #[test]
    fn disks_use_talosctl_s_columns() {
        let reply = DisksResponse {
            messages: vec![Disks { metadata: None, disks: vec![disk("/dev/sda")] }],
        };
        let text = disks_table(&reply);
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            [
                "DEV",
                "MODEL",
                "SERIAL",
                "TYPE",
                "UUID",
                "WWID",
                "MODALIAS",
                "NAME",
                "SIZE",
                "BUS_PATH",
                "SUBSYSTEM",
                "READ_ONLY",
                "SYSTEM_DISK"
            ]
        );
        let row = lines.next().unwrap();
        assert!(row.starts_with("/dev/sda "), "{row}");
        assert!(
            row.contains(" QEMU HARDDISK ") && row.contains(" HDD ") && row.contains(" 11 GB ")
        );
        // A hostile model cannot move the cursor; the node's own name adds no column.
        let mut evil = disk("/dev/sdb");
        evil.model = "\x1b[2J".into();
        let reply = DisksResponse {
            messages: vec![Disks {
                metadata: Some(Metadata { hostname: "n1".into(), ..Metadata::default() }),
                disks: vec![evil],
            }],
        };
        let text = disks_table(&reply);
        assert!(text.starts_with("DEV ") && !text.contains('\x1b'), "{text}");
        assert!(text.contains("\\u{1b}[2J"), "{text}");
    }

    fn service(
        id: &str,
        state: &str,
        healthy: Option<bool>,
        events: &[(&str, i64)],
    ) -> ServiceInfo {
        ServiceInfo {
            id: id.into(),
            state: state.into(),
            events: Some(ServiceEvents {
                events: events
                    .iter()
                    .map(|(msg, at)| ServiceEvent {
                        msg: (*msg).into(),
                        state: state.into(),
                        ts: Some(Timestamp { seconds: *at, nanos: 0 }),
                    })
                    .collect(),
            }),
            health: Some(ServiceHealth {
                unknown: healthy.is_none(),
                healthy: healthy.unwrap_or(false),
                last_message: String::new(),
                last_change: None,
            }),
        }
    }

    #[test]
    fn services_use_talosctl_s_columns() {
        let now = UNIX_EPOCH + std::time::Duration::from_secs(1_000);
        let reply = ServiceListResponse {
            messages: vec![ServiceList {
                metadata: None,
                services: vec![
                    service(
                        "kubelet",
                        "Running",
                        Some(true),
                        &[("Started", 900), ("Healthy", 990)],
                    ),
                    service("machined", "Running", None, &[]),
                    service("evil\x1b[31m", "Failed", Some(false), &[("exit\n1", 813)]),
                ],
            }],
        };
        let text = services_table(&[("10.0.0.2".into(), reply)], now);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[0].starts_with("NODE ")
                && lines[0].contains(" LAST CHANGE ")
                && lines[0].ends_with("LAST EVENT")
        );
        let cells = |l: &str| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(cells(lines[1]), ["10.0.0.2", "kubelet", "Running", "OK", "10s ago", "Healthy"]);
        assert_eq!(cells(lines[2]), ["10.0.0.2", "machined", "Running", "?", "ago", "<none>"]);
        assert_eq!(
            cells(lines[3]),
            ["10.0.0.2", "evil\\u{1b}[31m", "Failed", "Fail", "3m7s ago", "exit\\n1"]
        );
    }

    #[test]
    fn one_service_lists_its_events_newest_first() {
        let now = UNIX_EPOCH + std::time::Duration::from_secs(1_000);
        let s = service("kubelet", "Running", Some(true), &[("Started", 900), ("Healthy", 990)]);
        let text = service_text("n1", &s, now);
        let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
        assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["NODE", "n1"]);
        assert!(
            lines[4].starts_with("EVENTS ") && lines[4].ends_with("[Running]: Healthy (10s ago)")
        );
        assert!(lines[5].trim_start().starts_with("[Running]: Started (1m40s ago)"), "{text}");
    }

    #[test]
    fn events_as_talosctl_prints_them() {
        use talos_api::google::Any;
        let any = |name: &str, value: Vec<u8>| {
            Some(Any { type_url: format!("talos/runtime/{name}"), value })
        };
        let svc = ServiceStateEvent {
            service: "kubelet\x1b[2J".into(),
            action: ServiceAction::Running as i32,
            message: "Health check successful".into(),
            health: None,
        };
        let ev = Event {
            metadata: None,
            data: any("machine.ServiceStateEvent", svc.encode_to_vec()),
            id: "c1".into(),
            actor_id: String::new(),
        };
        let row = event_row("10.0.0.2", &ev).unwrap();
        assert_eq!(
            row,
            [
                "10.0.0.2",
                "c1",
                "talos/runtime/machine.ServiceStateEvent",
                "",
                "kubelet\x1b[2J",
                "RUNNING: Health check successful"
            ]
        );
        // Cells are escaped when aligned.
        let text = crate::output::align(&[row]);
        assert!(!text.contains('\x1b') && text.contains("kubelet\\u{1b}[2J"), "{text}");
        let status = MachineStatusEvent {
            stage: MachineStage::Running as i32,
            status: Some(talos_api::machine::MachineStatus {
                ready: false,
                unmet_conditions: vec![talos_api::machine::UnmetCondition {
                    name: "kubelet".into(),
                    reason: "not healthy".into(),
                }],
            }),
        };
        let ev = Event { data: any("machine.MachineStatusEvent", status.encode_to_vec()), ..ev };
        let row = event_row("n", &ev).unwrap();
        assert_eq!(row[4..], ["RUNNING", "ready: false, unmet conditions: [kubelet]"]);
        // Unknown types and undecodable values are skipped, as talosctl skips them.
        let odd = Event { data: any("machine.PhaseEvent", vec![]), ..ev.clone() };
        assert!(event_row("n", &odd).is_none());
        let broken = Event { data: any("machine.AddressEvent", vec![0xff]), ..ev };
        assert!(event_row("n", &broken).is_none());
    }

    #[test]
    fn the_client_version_is_this_crate_s() {
        let text = client_version();
        assert!(text.starts_with(&format!("\tTag:         v{}\n", env!("CARGO_PKG_VERSION"))));
        assert!(text.contains("\tOS/Arch:     linux/"), "{text}");
    }
}
