// SPDX-License-Identifier: Apache-2.0
//! `machine.MachineService`: the calls keelson answers, with Talos's semantics and status
//! codes. Every reply names the node in `metadata.hostname`.

use std::time::{Duration, Instant};

use grpc::{code, Status};
use net::resource::{Namespace, ServiceStatus};
use serde_json::Value;
use talos_api::common::Metadata;
use talos_api::google::Empty;
use talos_api::machine as m;

use super::dispatch::{decode, Call, Method, Reply, APPLY_REQUEST, SMALL_REQUEST};
use super::events::{service_action, service_health};
use super::feeds::{DmesgFeed, EventsFeed, LogsFeed};
use crate::api::transport::Access;
use crate::api::trial::{self, ApplyMode};
use crate::machine::Power;
use crate::verbs::{apply_with_mode, load_applied, Apply};

const fn method(name: &'static str, handler: super::dispatch::Handler) -> Method {
    Method { path: name, max_request: SMALL_REQUEST, handler }
}

/// The methods served.
pub const METHODS: &[Method] = &[
    method("/machine.MachineService/Version", version),
    Method {
        path: "/machine.MachineService/ApplyConfiguration",
        max_request: APPLY_REQUEST,
        handler: apply_configuration,
    },
    method("/machine.MachineService/Reboot", reboot),
    method("/machine.MachineService/Shutdown", shutdown),
    method("/machine.MachineService/Reset", reset),
    method("/machine.MachineService/Upgrade", upgrade),
    method("/machine.MachineService/ServiceList", service_list),
    method("/machine.MachineService/ServiceRestart", service_restart),
    method("/machine.MachineService/Dmesg", dmesg),
    method("/machine.MachineService/Logs", logs),
    method("/machine.MachineService/Events", events),
    method("/machine.MachineService/Hostname", hostname),
    method("/machine.MachineService/Memory", memory),
    method("/machine.MachineService/LoadAvg", load_avg),
    method("/machine.MachineService/Bootstrap", bootstrap),
];

/// The platform keelson reports: Talos names the environment it runs in (`metal`, `aws`,
/// ...) and the mode (`metal`, `cloud`, `container`); keelson boots bare metal and VMs alike.
const PLATFORM: (&str, &str) = ("metal", "metal");

/// The node itself, as Talos lists it among its services.
const MACHINED: &str = "machined";

fn version(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let maintenance = call.maintenance();
    let reply = m::Version {
        metadata: Metadata::of(&call.hostname()),
        version: Some(m::VersionInfo {
            tag: format!("v{}", crate::machine::version()),
            os: std::env::consts::OS.into(),
            arch: arch().into(),
            ..m::VersionInfo::default()
        }),
        platform: Some(m::PlatformInfo { name: PLATFORM.0.into(), mode: PLATFORM.1.into() }),
        // Talos's maintenance service leaves the features out: there is no RBAC without a
        // config.
        features: (!maintenance).then_some(m::FeaturesInfo { rbac: true }),
        keelson_boot: super::dispatch::boot_source(call.rt)
            .map(|b| m::KeelsonBoot { mac: b.mac, image: b.image }),
    };
    Reply::unary(&m::VersionResponse { messages: vec![reply] })
}

/// The architecture as Go names it (Talos reports `runtime.GOARCH`).
fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// An apply request's mode as keelson's. Maintenance mode takes what Talos's maintenance
/// service takes (`reboot`, `auto`, `try`): a node without a config has nothing to reboot
/// out of, so `reboot` applies as `auto` there.
pub(super) fn apply_mode(
    mode: i32,
    try_timeout: Option<talos_api::google::Duration>,
    maintenance: bool,
) -> Result<ApplyMode, Status> {
    let wire = m::ApplyMode::try_from(mode)
        .map_err(|_| Status::new(code::INVALID_ARGUMENT, format!("unknown apply mode {mode}")))?;
    if maintenance && !matches!(wire, m::ApplyMode::Reboot | m::ApplyMode::Auto | m::ApplyMode::Try)
    {
        return Err(Status::new(
            code::UNIMPLEMENTED,
            format!(
                "apply configuration --mode='{}' is not supported in maintenance mode",
                wire.cli_name()
            ),
        ));
    }
    Ok(match wire {
        m::ApplyMode::Reboot if maintenance => ApplyMode::Auto,
        m::ApplyMode::Reboot => ApplyMode::Reboot,
        m::ApplyMode::Auto => ApplyMode::Auto,
        m::ApplyMode::NoReboot => ApplyMode::NoReboot,
        m::ApplyMode::Staged => ApplyMode::Staged,
        m::ApplyMode::Try => {
            let t = match try_timeout {
                None => trial::DEFAULT_TRY,
                Some(d) => d.to_std().filter(|t| !t.is_zero()).ok_or_else(|| {
                    Status::new(code::INVALID_ARGUMENT, "try_mode_timeout: not a positive duration")
                })?,
            };
            if t > trial::MAX_TRY {
                return Err(Status::new(
                    code::INVALID_ARGUMENT,
                    format!("try_mode_timeout: at most {} h", trial::MAX_TRY.as_secs() / 3600),
                ));
            }
            ApplyMode::Try(t)
        }
    })
}

/// The mode a reply reports: what actually happened (`auto` never needs a reboot: keelson
/// applies every change live).
fn applied_mode(mode: ApplyMode) -> m::ApplyMode {
    match mode {
        ApplyMode::Auto | ApplyMode::NoReboot => m::ApplyMode::NoReboot,
        ApplyMode::Reboot => m::ApplyMode::Reboot,
        ApplyMode::Staged => m::ApplyMode::Staged,
        ApplyMode::Try(_) => m::ApplyMode::Try,
    }
}

/// The status of an apply the node refused.
fn apply_error(why: String) -> Status {
    let code = if why.starts_with("invalid config") {
        code::INVALID_ARGUMENT
    } else {
        grpc::code::FAILED_PRECONDITION
    };
    Status::new(code, why)
}

fn apply_configuration(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: m::ApplyConfigurationRequest = decode(req)?;
    apply(call, &req, false)
}

/// An apply, Talos's or keelson's (`partial`: invalid entries are dropped, not refused).
pub(super) fn apply(
    call: &mut Call<'_>,
    req: &m::ApplyConfigurationRequest,
    partial: bool,
) -> Result<Reply, Status> {
    let maintenance = call.maintenance();
    let mode = apply_mode(req.mode, req.try_mode_timeout, maintenance)?;
    let text = std::str::from_utf8(&req.data)
        .map_err(|_| Status::new(code::INVALID_ARGUMENT, "the config is not UTF-8 text"))?;
    let hostname = call.hostname();
    if maintenance && req.dry_run {
        // What Talos's maintenance service says: there is nothing to compare with.
        let cfg = load_applied(text, partial).map_err(apply_error)?;
        let reply = m::ApplyConfiguration {
            metadata: Metadata::of(&hostname),
            warnings: cfg.warnings.clone(),
            mode: req.mode,
            mode_details: "Dry run summary:\nNode is running in maintenance mode and does not have a config yet.".into(),
        };
        return Reply::unary(&m::ApplyConfigurationResponse { messages: vec![reply] });
    }
    let apply = Apply { text, dry_run: req.dry_run, partial };
    let v = apply_with_mode(call.rt, apply, mode, call.effects, call.now).map_err(apply_error)?;
    if maintenance && !req.dry_run {
        // The config ends maintenance: this connection's rights end with it (its answer
        // still goes out).
        call.access = Access::Revoked;
    }
    let mut warnings: Vec<String> = strings(&v["warnings"]);
    // Marked, so a client tells a dropped entry from a warning about a kept one.
    warnings.extend(strings(&v["dropped"]).iter().map(|d| format!("dropped: {d}")));
    let reply = m::ApplyConfiguration {
        metadata: Metadata::of(&hostname),
        warnings,
        mode: applied_mode(mode) as i32,
        mode_details: mode_details(mode, req.dry_run, &v),
    };
    Reply::unary(&m::ApplyConfigurationResponse { messages: vec![reply] })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_owned)).collect()
}

/// What the apply did, for people: the mode's outcome, then each resource change with its
/// fields (`+ added`, `- removed`, `~ changed`), a count, and what the mode left behind (a
/// trial, a staged file, where the config is kept, a reboot). `keelson apply-config` prints
/// it as it is.
pub(super) fn mode_details(mode: ApplyMode, dry_run: bool, v: &Value) -> String {
    use std::fmt::Write as _;
    let what = match (mode, dry_run) {
        (_, true) => "Dry run summary: nothing was applied".to_owned(),
        (ApplyMode::Reboot, false) => "Applied configuration; the node reboots now".to_owned(),
        (ApplyMode::Staged, false) => {
            "Staged configuration to be applied after the next reboot".to_owned()
        }
        (ApplyMode::Try(t), false) => format!(
            "Applied configuration on trial: it is rolled back in {} s unless confirmed",
            t.as_secs()
        ),
        (ApplyMode::Auto | ApplyMode::NoReboot, false) => {
            "Applied configuration without a reboot".to_owned()
        }
    };
    let mut text = format!("{what}\n");
    let changes = v["changes"].as_array().map_or(&[][..], Vec::as_slice);
    for ch in changes {
        let s = |k: &str| ch[k].as_str().unwrap_or_default().to_owned();
        let action = s("action");
        let mark = match action.as_str() {
            "added" => "+",
            "removed" => "-",
            _ => "~",
        };
        let _ = writeln!(text, "{mark} {action} {} {}", s("type"), s("id"));
        for f in ch["fields"].as_array().into_iter().flatten() {
            let field = f["field"].as_str().unwrap_or_default();
            let _ = writeln!(text, "    {field}: {} -> {}", f["before"], f["after"]);
        }
    }
    let staged = v["staged"].as_str();
    let n = changes.len();
    let _ = match (n == 0, dry_run) {
        (true, _) => writeln!(text, "no changes to network resources"),
        (false, false) if staged.is_some() => {
            writeln!(text, "{n} resource(s) will change at the next start (staged)")
        }
        (false, true) => writeln!(text, "{n} resource(s) would change (dry run: nothing applied)"),
        (false, false) => writeln!(text, "{n} resource(s) changing: applied"),
    };
    if let Some(t) = v["trialSeconds"].as_u64() {
        let _ = writeln!(
            text,
            "on trial for {t} s: `keelson config confirm` keeps it, otherwise the node rolls back"
        );
    }
    if let Some(path) = staged {
        let _ = writeln!(text, "staged: {path} (the next start boots into it)");
    }
    if let Some(kept) = v["kept"].as_str() {
        let _ = writeln!(text, "kept: {kept}");
    }
    if v["reboot"] == Value::Bool(true) {
        text.push_str("the node reboots now\n");
    }
    text
}

/// An actor id for a power request (Talos's clients follow the events of it).
pub(super) fn actor_id(now: Instant, started: Instant) -> String {
    format!("keelson-{:x}", now.saturating_duration_since(started).as_nanos())
}

fn reboot(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: m::RebootRequest = decode(req)?;
    m::RebootMode::try_from(req.mode).map_err(|_| {
        Status::new(code::INVALID_ARGUMENT, format!("unknown reboot mode {}", req.mode))
    })?;
    call.effects.power = Some(Power::Reboot);
    log::warn!(target: "api", "reboot requested over the gRPC API");
    let reply = m::Reboot {
        metadata: Metadata::of(&call.hostname()),
        actor_id: actor_id(call.now, call.machine.started),
    };
    Reply::unary(&m::RebootResponse { messages: vec![reply] })
}

fn shutdown(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: m::ShutdownRequest = decode(req)?;
    call.effects.power = Some(Power::Shutdown);
    log::warn!(target: "api", "shutdown requested over the gRPC API");
    let reply = m::Shutdown {
        metadata: Metadata::of(&call.hostname()),
        actor_id: actor_id(call.now, call.machine.started),
    };
    Reply::unary(&m::ShutdownResponse { messages: vec![reply] })
}

/// Talos's system partition labels keelson has something under.
const STATE: &str = "STATE";
const EPHEMERAL: &str = "EPHEMERAL";

/// What a `ResetRequest` wipes, as Talos reads one: user disks are refused with `SYSTEM_DISK`
/// (Talos's own rule) and otherwise not supported (keelson keeps nothing on other disks);
/// listed labels wipe what they name when their `wipe` is set, an unknown label is refused;
/// no labels wipe everything (unless only user disks are asked for).
pub(super) fn wipe_of(req: &m::ResetRequest) -> Result<crate::machine::Wipe, Status> {
    let mode = m::ResetWipeMode::try_from(req.mode).map_err(|_| {
        Status::new(code::INVALID_ARGUMENT, format!("mode: unknown wipe mode {}", req.mode))
    })?;
    if !req.user_disks_to_wipe.is_empty() {
        if mode == m::ResetWipeMode::SystemDisk {
            return Err(Status::new(
                code::INVALID_ARGUMENT,
                "reset failed: invalid input, wipe mode SYSTEM_DISK doesn't support UserDisksToWipe parameter",
            ));
        }
        return Err(Status::new(
            code::UNIMPLEMENTED,
            "user_disks_to_wipe: keelson keeps nothing on user disks and does not wipe them",
        ));
    }
    let mut wipe = crate::machine::Wipe::default();
    if req.system_partitions_to_wipe.is_empty() {
        if mode != m::ResetWipeMode::UserDisks {
            wipe = crate::machine::Wipe { state: true, ephemeral: true };
        }
        return Ok(wipe);
    }
    if mode == m::ResetWipeMode::UserDisks {
        return Err(Status::new(
            code::INVALID_ARGUMENT,
            "reset failed: invalid input, wipe mode USER_DISKS doesn't support SystemPartitionsToWipe parameter",
        ));
    }
    for (i, spec) in req.system_partitions_to_wipe.iter().enumerate() {
        let slot = match spec.label.as_str() {
            STATE => &mut wipe.state,
            EPHEMERAL => &mut wipe.ephemeral,
            other => {
                return Err(Status::new(
                    code::INVALID_ARGUMENT,
                    format!(
                        "system_partitions_to_wipe[{i}].label: {:?} is not a partition keelson has (STATE, EPHEMERAL)",
                        net::names::escape(other, 64)
                    ),
                ))
            }
        };
        *slot |= spec.wipe;
    }
    Ok(wipe)
}

fn reset(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: m::ResetRequest = decode(req)?;
    let wipe = wipe_of(&req)?;
    let plan = crate::machine::Reset { wipe, reboot: req.reboot, graceful: req.graceful };
    let reply = m::Reset {
        metadata: Metadata::of(&call.hostname()),
        actor_id: actor_id(call.now, call.machine.started),
    };
    let answer = m::ResetResponse { messages: vec![reply] };
    if let Some(pki) = graceful_etcd_member(call, &plan) {
        return reset_after_etcd_check(call, plan, &pki, answer);
    }
    crate::verbs::reset(call.effects, plan)
        .map_err(|e| Status::new(grpc::code::FAILED_PRECONDITION, e))?;
    Reply::unary(&answer)
}

/// A graceful reset of a control plane whose etcd holds data (a member): the directory of
/// etcd's certificates, for the member count check.
fn graceful_etcd_member(
    call: &Call<'_>,
    plan: &crate::machine::Reset,
) -> Option<std::path::PathBuf> {
    use net::config::{MachineConfig, MachineType};
    if !plan.graceful {
        return None;
    }
    let cfg = call
        .rt
        .store()
        .get_spec::<MachineConfig>(Namespace::Config, net::controllers::MACHINE_CONFIG_ID)?;
    if cfg.machine.machine_type != Some(MachineType::ControlPlane) {
        return None;
    }
    let paths = call.effects.etcd.as_ref()?;
    (!crate::etcd::data_dir_empty(&paths.data)).then(|| paths.pki.clone())
}

/// Talos refuses a graceful reset that would cost etcd its quorum; keelson refuses the one
/// that would remove the last member. The count is a blocking etcd call, so it runs on a
/// worker (the answer is deferred); an etcd that does not answer does not hold the reset up
/// (the leave step says so again).
fn reset_after_etcd_check(
    call: &mut Call<'_>,
    plan: crate::machine::Reset,
    pki: &std::path::Path,
    answer: m::ResetResponse,
) -> Result<Reply, Status> {
    if call.effects.power.is_some() || call.effects.pending_reset.is_some() {
        return Err(Status::new(grpc::code::FAILED_PRECONDITION, "the node is already going down"));
    }
    if let Some(job) = &call.effects.upgrade {
        return Err(Status::new(
            grpc::code::FAILED_PRECONDITION,
            format!("an upgrade from {} is under way", job.shown),
        ));
    }
    let (ca, cert, key) = (pki.join("ca.crt"), pki.join("peer.crt"), pki.join("peer.key"));
    let (go, gone) = std::sync::mpsc::channel();
    let bytes = talos_api::Message::encode_to_vec(&answer);
    let feed = super::deferred::run(call, Duration::from_secs(8), move || {
        match crate::node::etcd_join::count_members(&ca, &cert, &key) {
            Ok(n) => crate::etcd::leave::check_graceful_reset(n)
                .map_err(|e| Status::new(grpc::code::FAILED_PRECONDITION, e))?,
            Err(e) => {
                log::warn!(target: "api", "reset: etcd's members could not be counted ({e}); going on")
            }
        }
        let _ = go.send(());
        Ok(bytes)
    })?;
    call.effects.pending_reset = Some((gone, plan));
    Ok(Reply::Stream(feed))
}

/// `Upgrade`: `image` is the URL of an upgrade manifest (docs/upgrade.md). The answer comes
/// once the URL is taken; the download, the digests and the kexec follow on a worker, and a
/// refusal there is one console line (the node keeps running).
fn upgrade(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: m::UpgradeRequest = decode(req)?;
    if req.stage {
        return Err(Status::new(
            code::UNIMPLEMENTED,
            "stage: keelson keeps no image on disk to stage; an upgrade boots the new image now",
        ));
    }
    match m::UpgradeRebootMode::try_from(req.reboot_mode) {
        Ok(m::UpgradeRebootMode::Default) => {}
        Ok(m::UpgradeRebootMode::Powercycle) => {
            return Err(Status::new(
                code::INVALID_ARGUMENT,
                "reboot_mode: POWERCYCLE would boot what the machine's firmware boots, not the upgrade; keelson upgrades by kexec only",
            ))
        }
        Err(_) => {
            return Err(Status::new(
                code::INVALID_ARGUMENT,
                format!("reboot_mode: unknown mode {}", req.reboot_mode),
            ))
        }
    }
    crate::verbs::upgrade(call.effects, &req.image).map_err(|e| {
        let c = if e.starts_with("image:") {
            code::INVALID_ARGUMENT
        } else {
            grpc::code::FAILED_PRECONDITION
        };
        Status::new(c, e)
    })?;
    let reply = m::Upgrade {
        metadata: Metadata::of(&call.hostname()),
        ack: "Upgrade request received".into(),
        actor_id: actor_id(call.now, call.machine.started),
    };
    Reply::unary(&m::UpgradeResponse { messages: vec![reply] })
}

/// The services the node lists: itself as `machined` (always running), then each service it
/// supervises.
fn services(call: &Call<'_>) -> Vec<m::ServiceInfo> {
    let mut list = vec![m::ServiceInfo {
        id: MACHINED.into(),
        state: m::ServiceAction::Running.state_name().into(),
        events: Some(m::ServiceEvents {
            events: vec![m::ServiceEvent {
                msg: "Service started as PID 1".into(),
                state: "Running".into(),
                ts: None,
            }],
        }),
        health: Some(m::ServiceHealth { unknown: false, healthy: true, ..Default::default() }),
    }];
    for (id, s) in call.rt.store().list_specs::<ServiceStatus>(Namespace::Runtime) {
        let state = service_action(s).state_name();
        let msg = if s.last_exit.is_empty() {
            format!("Service {}", state.to_lowercase())
        } else {
            s.last_exit.clone()
        };
        list.push(m::ServiceInfo {
            id: id.to_owned(),
            state: state.into(),
            events: Some(m::ServiceEvents {
                events: vec![m::ServiceEvent { msg, state: state.into(), ts: None }],
            }),
            health: Some(service_health(s)),
        });
    }
    list
}

fn service_list(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let reply =
        m::ServiceList { metadata: Metadata::of(&call.hostname()), services: services(call) };
    Reply::unary(&m::ServiceListResponse { messages: vec![reply] })
}

fn service_restart(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: m::ServiceRestartRequest = decode(req)?;
    let id = req.id.as_str();
    if id == MACHINED {
        return Err(Status::new(
            grpc::code::FAILED_PRECONDITION,
            "machined is the node itself: reboot the node instead",
        ));
    }
    let shown = net::names::escape(id, 64);
    let Some(status) = call.rt.store().get_spec::<ServiceStatus>(Namespace::Runtime, id) else {
        return Err(Status::new(grpc::code::NOT_FOUND, format!("service {shown:?} not found")));
    };
    if status.command.is_empty() && status.state == "stopped" {
        return Err(Status::new(
            grpc::code::FAILED_PRECONDITION,
            format!("service {shown:?} is not configured to run"),
        ));
    }
    call.effects.restart = Some(id.to_owned());
    log::info!(target: "api", "restart of {id} requested over the gRPC API");
    let reply = m::ServiceRestart {
        metadata: Metadata::of(&call.hostname()),
        resp: format!("Service {id:?} restarted"),
    };
    Reply::unary(&m::ServiceRestartResponse { messages: vec![reply] })
}

fn dmesg(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: m::DmesgRequest = decode(req)?;
    let feed =
        DmesgFeed::open(std::path::Path::new("/dev/kmsg"), req.follow, req.tail, call.hostname())
            .map_err(|e| Status::new(code::INTERNAL, format!("/dev/kmsg: {e}")))?;
    Ok(Reply::Stream(Box::new(feed)))
}

fn logs(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: m::LogsRequest = decode(req)?;
    // `talosctl logs machined`: the node's own log, in the `system` namespace.
    if req.id != MACHINED || !(req.namespace.is_empty() || req.namespace == "system") {
        let shown = net::names::escape(&req.id, 64);
        return Err(Status::new(
            grpc::code::NOT_FOUND,
            format!("log {shown:?} not found (keelson keeps the log of machined, the node itself)"),
        ));
    }
    let feed = LogsFeed::new(req.follow, req.tail_lines, call.hostname());
    Ok(Reply::Stream(Box::new(feed)))
}

fn events(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: m::EventsRequest = decode(req)?;
    let seconds = u64::try_from(req.tail_seconds).unwrap_or(0);
    let from = if req.tail_events < 0 {
        0
    } else if req.tail_events > 0 {
        call.events.next_seq().saturating_sub(req.tail_events.unsigned_abs().into())
    } else if !req.tail_id.is_empty() {
        let seq = call.events.seq_of(&req.tail_id).ok_or_else(|| {
            Status::new(grpc::code::NOT_FOUND, "tail_id: no such event (it may be too old)")
        })?;
        seq + 1
    } else if seconds > 0 {
        let since =
            call.now.checked_sub(Duration::from_secs(seconds)).unwrap_or(call.machine.started);
        call.events.first_since(since)
    } else {
        call.events.next_seq()
    };
    Ok(Reply::Stream(Box::new(EventsFeed::new(from, req.with_actor_id, call.hostname()))))
}

fn hostname(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let name = call.hostname();
    let reply = m::Hostname { metadata: Metadata::of(&name), hostname: name };
    Reply::unary(&m::HostnameResponse { messages: vec![reply] })
}

/// `/proc/meminfo` as Talos's `MemInfo` (kilobytes, as the file says).
pub(super) fn meminfo(text: &str) -> m::MemInfo {
    let mut info = m::MemInfo::default();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else { continue };
        let Some(value) = rest.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()) else {
            continue;
        };
        let slot = match key {
            "MemTotal" => &mut info.memtotal,
            "MemFree" => &mut info.memfree,
            "MemAvailable" => &mut info.memavailable,
            "Buffers" => &mut info.buffers,
            "Cached" => &mut info.cached,
            "SwapCached" => &mut info.swapcached,
            "Active" => &mut info.active,
            "Inactive" => &mut info.inactive,
            "SwapTotal" => &mut info.swaptotal,
            "SwapFree" => &mut info.swapfree,
            "Dirty" => &mut info.dirty,
            "Writeback" => &mut info.writeback,
            "Shmem" => &mut info.shmem,
            "Slab" => &mut info.slab,
            _ => continue,
        };
        *slot = value;
    }
    info
}

/// A small `/proc` file.
fn proc_file(name: &str) -> Result<String, Status> {
    let path = std::path::Path::new("/proc").join(name);
    net::bounded::read_text(&path, 64 << 10)
        .map_err(|e| Status::new(code::INTERNAL, format!("{}: {e}", path.display())))
}

fn memory(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let reply = m::Memory {
        metadata: Metadata::of(&call.hostname()),
        meminfo: Some(meminfo(&proc_file("meminfo")?)),
    };
    Reply::unary(&m::MemoryResponse { messages: vec![reply] })
}

fn load_avg(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let text = proc_file("loadavg")?;
    let mut loads = text.split_whitespace().map(|v| v.parse::<f64>().unwrap_or(0.0));
    let mut next = || loads.next().unwrap_or(0.0);
    let reply = m::LoadAvg {
        metadata: Metadata::of(&call.hostname()),
        load1: next(),
        load5: next(),
        load15: next(),
    };
    Reply::unary(&m::LoadAvgResponse { messages: vec![reply] })
}

/// `Bootstrap`: Talos's checks in its order, then the request is kept on disk and etcd
/// starts a new cluster of this node. A kept request counts as bootstrapped, as a non-empty
/// data directory does: etcd may not have written its first file yet.
fn bootstrap(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    use crate::etcd::bootstrap::{check, Facts};
    use net::config::{MachineConfig, MachineType};
    use net::resource::{TimeStatus, TIME_STATUS_ID};
    let _: m::BootstrapRequest = decode(req)?;
    let store = call.rt.store();
    let cfg =
        store.get_spec::<MachineConfig>(Namespace::Config, net::controllers::MACHINE_CONFIG_ID);
    let control_plane =
        cfg.as_ref().is_some_and(|c| c.machine.machine_type == Some(MachineType::ControlPlane));
    let etcd_ca = cfg
        .as_ref()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.etcd.as_ref())
        .and_then(|e| e.ca.as_ref())
        .is_some_and(|ca| ca.key.is_some());
    // Talos waits up to 5 s for sync; a handler here never waits, so it answers from now.
    let time_synced = store
        .get_spec::<TimeStatus>(Namespace::Runtime, TIME_STATUS_ID)
        .is_some_and(|t| t.synced || t.sync_disabled);
    let paths = call.effects.etcd.clone();
    let empty = paths.as_ref().is_some_and(|p| {
        crate::etcd::data_dir_empty(&p.data) && !p.mark.as_ref().is_some_and(|m| m.exists())
    }) && !call.effects.bootstrap;
    check(Facts { control_plane, etcd_ca, time_synced, data_dir_empty: empty })
        .map_err(|r| Status::new(r.code, r.message))?;
    if let Some(mark) = paths.and_then(|p| p.mark) {
        crate::api::trial::write_back(&mark, "bootstrap requested\n").map_err(|e| {
            log::error!(target: "api", "Bootstrap: {}: {e}", mark.display());
            Status::new(code::INTERNAL, "the bootstrap request could not be kept")
        })?;
    }
    call.effects.bootstrap = true;
    log::warn!(target: "api", "Bootstrap: etcd starts a new cluster of this node");
    let reply = m::Bootstrap { metadata: Metadata::of(&call.hostname()) };
    Reply::unary(&m::BootstrapResponse { messages: vec![reply] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_details_carry_the_per_field_diff_and_what_the_mode_did() {
        let v = serde_json::json!({
            "changes": [
                {"action": "added", "type": "AddressSpec", "id": "eth0/10.0.0.5/24"},
                {"action": "changed", "type": "LinkSpec", "id": "eth0",
                 "fields": [{"field": "mtu", "before": 1500, "after": 9000}]},
                {"action": "removed", "type": "AddressSpec", "id": "eth0/10.0.0.2/24"},
            ],
        });
        let dry = mode_details(ApplyMode::Auto, true, &v);
        assert_eq!(
            dry,
            "Dry run summary: nothing was applied\n\
             + added AddressSpec eth0/10.0.0.5/24\n\
             ~ changed LinkSpec eth0\n    mtu: 1500 -> 9000\n\
             - removed AddressSpec eth0/10.0.0.2/24\n\
             3 resource(s) would change (dry run: nothing applied)\n"
        );
        let mut v = v;
        v["trialSeconds"] = serde_json::json!(60);
        let t = mode_details(ApplyMode::Try(Duration::from_secs(60)), false, &v);
        assert!(t.starts_with("Applied configuration on trial"), "{t}");
        assert!(t.contains("3 resource(s) changing: applied\non trial for 60 s:"), "{t}");
        let staged = serde_json::json!({"changes": [], "staged": "/c.yaml.staged"});
        let s = mode_details(ApplyMode::Staged, false, &staged);
        assert!(s.contains("no changes to network resources\nstaged: /c.yaml.staged"), "{s}");
        let kept = serde_json::json!({"changes": [], "kept": "/c.yaml", "reboot": true});
        let r = mode_details(ApplyMode::Reboot, false, &kept);
        assert!(r.ends_with("kept: /c.yaml\nthe node reboots now\n"), "{r}");
    }

    #[test]
    fn apply_modes_as_talos_takes_them() {
        let m_ = |mode: m::ApplyMode, maintenance| apply_mode(mode as i32, None, maintenance);
        assert_eq!(m_(m::ApplyMode::Auto, false).ok(), Some(ApplyMode::Auto));
        assert_eq!(m_(m::ApplyMode::NoReboot, false).ok(), Some(ApplyMode::NoReboot));
        assert_eq!(m_(m::ApplyMode::Reboot, false).ok(), Some(ApplyMode::Reboot));
        assert_eq!(m_(m::ApplyMode::Staged, false).ok(), Some(ApplyMode::Staged));
        assert_eq!(m_(m::ApplyMode::Try, false).ok(), Some(ApplyMode::Try(trial::DEFAULT_TRY)));
        // Maintenance: reboot, auto and try; a reboot has nothing to reboot out of.
        assert_eq!(m_(m::ApplyMode::Reboot, true).ok(), Some(ApplyMode::Auto));
        assert_eq!(
            m_(m::ApplyMode::NoReboot, true).err().map(|s| s.code),
            Some(code::UNIMPLEMENTED)
        );
        assert_eq!(m_(m::ApplyMode::Staged, true).err().map(|s| s.code), Some(code::UNIMPLEMENTED));
        assert_eq!(apply_mode(9, None, false).err().map(|s| s.code), Some(code::INVALID_ARGUMENT));
        let d = |seconds, nanos| Some(talos_api::google::Duration { seconds, nanos });
        let try_ = m::ApplyMode::Try as i32;
        assert_eq!(
            apply_mode(try_, d(30, 0), false).ok(),
            Some(ApplyMode::Try(Duration::from_secs(30)))
        );
        for bad in [d(0, 0), d(-5, 0), d(1, -1), d(100 * 3600, 0)] {
            assert_eq!(
                apply_mode(try_, bad, false).err().map(|s| s.code),
                Some(code::INVALID_ARGUMENT)
            );
        }
        assert_eq!(applied_mode(ApplyMode::Auto), m::ApplyMode::NoReboot);
    }

    #[test]
    fn reset_wipes_as_talos_reads_the_request() {
        use crate::machine::Wipe;
        let spec = |label: &str, wipe| m::ResetPartitionSpec { label: label.into(), wipe };
        let req = |mode: m::ResetWipeMode, parts: Vec<m::ResetPartitionSpec>, disks: Vec<&str>| {
            m::ResetRequest {
                mode: mode as i32,
                system_partitions_to_wipe: parts,
                user_disks_to_wipe: disks.into_iter().map(str::to_owned).collect(),
                ..m::ResetRequest::default()
            }
        };
        let all = Wipe { state: true, ephemeral: true };
        assert_eq!(wipe_of(&req(m::ResetWipeMode::All, vec![], vec![])).ok(), Some(all));
        assert_eq!(wipe_of(&req(m::ResetWipeMode::SystemDisk, vec![], vec![])).ok(), Some(all));
        assert_eq!(
            wipe_of(&req(m::ResetWipeMode::UserDisks, vec![], vec![])).ok(),
            Some(Wipe::default())
        );
        let state = req(m::ResetWipeMode::All, vec![spec("STATE", true)], vec![]);
        assert_eq!(wipe_of(&state).ok(), Some(Wipe { state: true, ephemeral: false }));
        let kept =
            req(m::ResetWipeMode::All, vec![spec("STATE", false), spec("EPHEMERAL", true)], vec![]);
        assert_eq!(wipe_of(&kept).ok(), Some(Wipe { state: false, ephemeral: true }));
        let code_of = |r: &m::ResetRequest| wipe_of(r).err().map(|s| (s.code, s.message));
        let (c, msg) = code_of(&req(m::ResetWipeMode::All, vec![spec("META", true)], vec![]))
            .unwrap_or_default();
        assert_eq!(c, code::INVALID_ARGUMENT);
        assert!(msg.starts_with("system_partitions_to_wipe[0].label: \"META\""), "{msg}");
        let disks = |mode| req(mode, vec![], vec!["/dev/sdb"]);
        assert_eq!(
            code_of(&disks(m::ResetWipeMode::SystemDisk)).map(|c| c.0),
            Some(code::INVALID_ARGUMENT)
        );
        assert_eq!(code_of(&disks(m::ResetWipeMode::All)).map(|c| c.0), Some(code::UNIMPLEMENTED));
        let bad = m::ResetRequest { mode: 7, ..m::ResetRequest::default() };
        assert_eq!(code_of(&bad).map(|c| c.0), Some(code::INVALID_ARGUMENT));
    }

    #[test]
    fn meminfo_in_kilobytes() {
        let info = meminfo(
            "MemTotal:       16318412 kB\nMemFree:  100 kB\nBogus\nSlab: x kB\nDirty: 7 kB\n",
        );
        assert_eq!((info.memtotal, info.memfree, info.dirty, info.slab), (16_318_412, 100, 7, 0));
    }
}
