// SPDX-License-Identifier: Apache-2.0
//! Talos's etcd calls of `machine.MachineService` on a control plane: `EtcdMemberList`,
//! `EtcdStatus`, `EtcdRemoveMember` (by name), `EtcdRemoveMemberByID`, `EtcdLeaveCluster`
//! and `EtcdForfeitLeadership`. Each asks the local member over etcd's JSON gateway with
//! the node's etcd peer certificate; those are blocking calls, so the answer is deferred to
//! a worker (bounded by the call's limit and each etcd call's own timeout). The checks
//! before (a control plane, etcd supervised here, running) answer as Talos's do
//! (`Unimplemented` for a node without etcd).

use std::path::PathBuf;
use std::time::Duration;

use grpc::{code, Status};
use net::resource::{Namespace, ServiceStatus};
use talos_api::common::Metadata;
use talos_api::google::Empty;
use talos_api::machine as m;

use super::dispatch::{decode, Call, Method, Reply, SMALL_REQUEST};
use crate::etcd::leave::{plan_for, Leave};
use crate::node::etcd_join::{carry_out, local_client};

const fn method(name: &'static str, handler: super::dispatch::Handler) -> Method {
    Method { path: name, max_request: SMALL_REQUEST, handler }
}

/// The methods served.
pub const METHODS: &[Method] = &[
    method("/machine.MachineService/EtcdMemberList", member_list),
    method("/machine.MachineService/EtcdStatus", status),
    method("/machine.MachineService/EtcdRemoveMember", remove_member),
    method("/machine.MachineService/EtcdRemoveMemberByID", remove_member_by_id),
    method("/machine.MachineService/EtcdLeaveCluster", leave_cluster),
    method("/machine.MachineService/EtcdForfeitLeadership", forfeit_leadership),
];

/// A call that reads or makes one change (a few etcd calls of at most 3 s each).
const LIMIT: Duration = Duration::from_secs(10);
/// A leave: the handover, then the removal retried while etcd's reconfiguration check
/// refuses.
const LEAVE_LIMIT: Duration = Duration::from_secs(20);
/// How long the leave retries the removal.
const LEAVE_RETRY_FOR: Duration = Duration::from_secs(10);
/// How long the leave waits for the loop to stop etcd before it wipes the data directory.
const STOP_WAIT: Duration = Duration::from_secs(6);

/// etcd's certificates, for a client of the local member; its data directory and the
/// bootstrap mark (what a leave wipes).
#[derive(Clone)]
struct Pki {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    data: PathBuf,
    mark: Option<PathBuf>,
}

impl Pki {
    fn client(&self, urls: &[String]) -> Result<etcd::Client, Status> {
        local_client(&self.ca, &self.cert, &self.key, urls)
            .map_err(|e| Status::new(code::UNAVAILABLE, format!("etcd client: {e}")))
    }
}

/// Talos's checks: a control plane whose etcd is supervised here (`Unimplemented` as
/// Talos answers), then keelson's: etcd is running (`FailedPrecondition`).
fn check(call: &Call<'_>, api: &str) -> Result<Pki, Status> {
    use net::config::{MachineConfig, MachineType};
    let control_plane = call
        .rt
        .store()
        .get_spec::<MachineConfig>(Namespace::Config, net::controllers::MACHINE_CONFIG_ID)
        .is_some_and(|c| c.machine.machine_type == Some(MachineType::ControlPlane));
    if !control_plane {
        return Err(Status::new(
            code::UNIMPLEMENTED,
            format!("{api} is only available on control plane nodes"),
        ));
    }
    let service = call.rt.store().get_spec::<ServiceStatus>(Namespace::Runtime, "etcd");
    let (Some(paths), Some(service)) = (call.effects.etcd.as_ref(), service) else {
        return Err(Status::new(
            code::UNIMPLEMENTED,
            format!("{api} is not available: \"etcd\" service is not registered on this node"),
        ));
    };
    if service.state != "running" {
        return Err(Status::new(
            code::FAILED_PRECONDITION,
            format!("{api}: etcd is not running on this node (it is {})", service.state),
        ));
    }
    Ok(Pki {
        ca: paths.pki.join("ca.crt"),
        cert: paths.pki.join("peer.crt"),
        key: paths.pki.join("peer.key"),
        data: paths.data.clone(),
        mark: paths.mark.clone(),
    })
}

/// An etcd call's error as a gRPC status: etcd's own code when it answered with one (a
/// removed or unknown member is `NotFound`), `Unavailable` when it could not be reached.
fn failed(what: &str, e: &etcd::ClientError) -> Status {
    let c = e.server_code().and_then(|c| u32::try_from(c).ok()).filter(|c| (1..=16).contains(c));
    Status::new(c.unwrap_or(code::UNAVAILABLE), format!("{what}: {e}"))
}

fn encode<M: talos_api::Message>(msg: &M) -> Result<Vec<u8>, Status> {
    Ok(msg.encode_to_vec())
}

fn member_list(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: m::EtcdMemberListRequest = decode(req)?;
    let pki = check(call, "member list")?;
    let hostname = call.hostname();
    let feed = super::deferred::run(call, LIMIT, move || {
        let list =
            pki.client(&[])?.member_list().map_err(|e| failed("failed to list members", &e))?;
        let members: Vec<m::EtcdMember> = list
            .members
            .iter()
            .map(|x| m::EtcdMember {
                id: x.id as u64,
                hostname: x.name.clone(),
                peer_urls: x.peer_urls.clone(),
                client_urls: x.client_urls.clone(),
                is_learner: x.is_learner,
            })
            .collect();
        encode(&m::EtcdMemberListResponse {
            messages: vec![m::EtcdMembers {
                metadata: Metadata::of(&hostname),
                legacy_members: members.iter().map(|x| x.hostname.clone()).collect(),
                members,
            }],
        })
    })?;
    Ok(Reply::Stream(feed))
}

fn status(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let pki = check(call, "etcd status")?;
    let hostname = call.hostname();
    let feed = super::deferred::run(call, LIMIT, move || {
        let s = pki.client(&[])?.status().map_err(|e| failed("failed to query etcd status", &e))?;
        encode(&m::EtcdStatusResponse {
            messages: vec![m::EtcdStatus {
                metadata: Metadata::of(&hostname),
                member_status: Some(m::EtcdMemberStatus {
                    member_id: s.header.member_id as u64,
                    protocol_version: s.version,
                    db_size: s.db_size,
                    db_size_in_use: s.db_size_in_use,
                    leader: s.leader as u64,
                    raft_index: s.raft_index as u64,
                    raft_term: s.raft_term as u64,
                    raft_applied_index: s.raft_applied_index as u64,
                    errors: s.errors,
                    is_learner: s.is_learner,
                }),
            }],
        })
    })?;
    Ok(Reply::Stream(feed))
}

/// Which member a remove call names.
enum Target {
    Id(i64),
    Name(String),
}

fn remove_member(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: m::EtcdRemoveMemberRequest = decode(req)?;
    if req.member.is_empty() {
        return Err(Status::new(code::INVALID_ARGUMENT, "member: the member's name is empty"));
    }
    remove(call, Target::Name(req.member))
}

fn remove_member_by_id(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: m::EtcdRemoveMemberByIdRequest = decode(req)?;
    if req.member_id == 0 {
        return Err(Status::new(code::INVALID_ARGUMENT, "member_id: 0 is no etcd member"));
    }
    remove(call, Target::Id(req.member_id as i64))
}

/// Remove another member. This node's own member is refused: removed that way, its etcd
/// would stop with the data of a member the cluster no longer knows, where
/// `EtcdLeaveCluster` also stops it (keelson's refusal; Talos removes whatever it is told).
fn remove(call: &mut Call<'_>, target: Target) -> Result<Reply, Status> {
    let pki = check(call, "etcd remove member")?;
    let hostname = call.hostname();
    let feed = super::deferred::run(call, LIMIT, move || {
        let mut c = pki.client(&[])?;
        let me =
            c.status().map_err(|e| failed("failed to query etcd status", &e))?.header.member_id;
        let list = c.member_list().map_err(|e| failed("failed to list members", &e))?;
        let id = match target {
            Target::Id(id) => id,
            Target::Name(name) => {
                list.members.iter().find(|x| x.name == name).map(|x| x.id).ok_or_else(|| {
                    Status::new(
                        code::NOT_FOUND,
                        format!(
                            "failed to find {:?} in list of etcd members",
                            net::names::escape(&name, 64)
                        ),
                    )
                })?
            }
        };
        if id == me {
            return Err(Status::new(
                code::FAILED_PRECONDITION,
                format!(
                    "member {:x} is this node: use EtcdLeaveCluster (talosctl etcd leave) to remove it",
                    id as u64
                ),
            ));
        }
        c.member_remove(id)
            .map_err(|e| failed(&format!("failed to remove member {}", id as u64), &e))?;
        log::info!(target: "etcd", "member {:x} removed through the API", id as u64);
        encode(&m::EtcdDoneResponse {
            messages: vec![m::EtcdDone { metadata: Metadata::of(&hostname) }],
        })
    })?;
    Ok(Reply::Stream(feed))
}

/// Leave the cluster as a graceful reset does (leadership handed on, the member removed),
/// then stop etcd, keep it stopped and wipe its data directory, as Talos does (the node
/// joins again as a new member when it restarts). The last member and a node that is not a
/// member are refused (`FailedPrecondition`).
fn leave_cluster(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let pki = check(call, "etcd leave")?;
    if call.effects.etcd_left.is_some() {
        return Err(Status::new(code::FAILED_PRECONDITION, "etcd leave: already under way"));
    }
    let hostname = call.hostname();
    let bell = call.bell.cloned();
    let (left, gone) = std::sync::mpsc::channel();
    let feed = super::deferred::run(call, LEAVE_LIMIT, move || {
        let mut local = pki.client(&[])?;
        let s = local.status().map_err(|e| failed("failed to query etcd status", &e))?;
        let list = local.member_list().map_err(|e| failed("failed to list members", &e))?;
        let step = plan_for(&list.members, s.header.member_id, s.leader);
        match step {
            Leave::LastMember => {
                return Err(Status::new(
                    code::FAILED_PRECONDITION,
                    "failed to leave cluster: this node is etcd's only member",
                ))
            }
            Leave::NotAMember => {
                return Err(Status::new(
                    code::FAILED_PRECONDITION,
                    "failed to leave cluster: this node is not an etcd member",
                ))
            }
            Leave::Remove { .. } => {}
        }
        let connect = |urls: &[String]| local_client(&pki.ca, &pki.cert, &pki.key, urls);
        let what = carry_out(&mut local, step, connect, LEAVE_RETRY_FOR)
            .map_err(|e| Status::new(code::UNAVAILABLE, format!("failed to leave cluster: {e}")))?;
        log::info!(target: "etcd", "etcd leave: {what}; stopping etcd");
        // The loop stops etcd now, not when this call ends.
        let _ = left.send(());
        if let Some(b) = &bell {
            b.ring();
        }
        wipe_once_stopped(&pki);
        encode(&m::EtcdDoneResponse {
            messages: vec![m::EtcdDone { metadata: Metadata::of(&hostname) }],
        })
    })?;
    call.effects.etcd_left = Some(gone);
    Ok(Reply::Stream(feed))
}

/// Hand raft leadership to another voting member when this one leads; the reply names the
/// new leader (empty when this member did not lead).
fn forfeit_leadership(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let pki = check(call, "etcd forfeit leadership")?;
    let hostname = call.hostname();
    let feed = super::deferred::run(call, LIMIT, move || {
        let mut c = pki.client(&[])?;
        let list = c.member_list().map_err(|e| failed("failed to list etcd members", &e))?;
        if list.members.len() == 1 {
            return Err(Status::new(
                code::FAILED_PRECONDITION,
                "cannot forfeit leadership, only one member",
            ));
        }
        let s = c.status().map_err(|e| failed("failed to query etcd status", &e))?;
        let me = s.header.member_id;
        let member = if s.leader != me {
            String::new()
        } else {
            let Some(to) = list.members.iter().find(|x| x.id != me && !x.is_learner) else {
                return Err(Status::new(
                    code::FAILED_PRECONDITION,
                    "cannot forfeit leadership: no other voting member",
                ));
            };
            match c.move_leader(to.id) {
                Ok(_) => {
                    log::info!(target: "etcd", "raft leadership handed to {:x} ({}) through the API", to.id as u64, to.name);
                    to.name.clone()
                }
                // Leadership moved meanwhile: nothing left to forfeit.
                Err(e) if e.to_string().contains("not leader") => String::new(),
                Err(e) => return Err(failed("failed to forfeit leadership", &e)),
            }
        };
        encode(&m::EtcdForfeitLeadershipResponse {
            messages: vec![m::EtcdForfeitLeadership { metadata: Metadata::of(&hostname), member }],
        })
    })?;
    Ok(Reply::Stream(feed))
}

/// Wipe etcd's data (a removed member's log is of no use, and a restart would start the
/// removed member again) and the bootstrap mark (the node joins as a new member, never
/// bootstraps a second cluster), once etcd no longer answers on its client port. An etcd
/// that is still up after [`STOP_WAIT`] keeps its data, and the log says so.
fn wipe_once_stopped(pki: &Pki) {
    let port = std::net::SocketAddr::from(([127, 0, 0, 1], crate::etcd::CLIENT_PORT));
    let until = std::time::Instant::now() + STOP_WAIT;
    while std::net::TcpStream::connect_timeout(&port, Duration::from_millis(200)).is_ok() {
        if std::time::Instant::now() >= until {
            log::warn!(target: "etcd", "etcd leave: etcd still answers after {} s: its data directory {} is kept", STOP_WAIT.as_secs(), pki.data.display());
            return;
        }
        #[allow(clippy::disallowed_methods)] // A worker, not the loop.
        std::thread::sleep(Duration::from_millis(100));
    }
    // Its contents: the directory may be a mount point.
    let wiped = std::fs::read_dir(&pki.data).and_then(|entries| {
        for e in entries {
            let e = e?;
            let path = e.path();
            // The entry's own type: a link is removed, never followed.
            if e.file_type()?.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(())
    });
    match wiped {
        Ok(()) => log::info!(target: "etcd", "etcd leave: {} wiped", pki.data.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn!(target: "etcd", "etcd leave: wipe {}: {e}", pki.data.display()),
    }
    if let Some(mark) = &pki.mark {
        let _ = std::fs::remove_file(mark);
    }
}
