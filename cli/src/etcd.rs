// SPDX-License-Identifier: Apache-2.0
//! `keelson etcd members|status|leave|remove-member|forfeit-leadership [NODE OPTIONS]`:
//! Talos's etcd calls on control-plane nodes, under talosctl's verb names. `members` and
//! `status` print talosctl's columns; `leave` and `remove-member` print nothing when done
//! (as talosctl); `forfeit-leadership` prints the member that leads now, if it moved.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use talos_api::google::Empty;
use talos_api::machine::{
    EtcdDoneResponse, EtcdForfeitLeadershipResponse, EtcdMemberListRequest, EtcdMemberListResponse,
    EtcdRemoveMemberByIdRequest, EtcdRemoveMemberRequest, EtcdStatusResponse,
};

use crate::client::{each, finish};
use crate::connect::{self, Common};
use crate::output::{align, escape_cell};
use crate::rpc::{Channel, RpcError};

/// `keelson etcd`.
pub fn main(raw: Vec<OsString>) -> ExitCode {
    finish("etcd", run(raw))
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verb {
    Members,
    Status,
    Leave,
    /// By hexadecimal member ID (as `members` prints it), or by name (Talos's older call).
    RemoveMember(Member),
    ForfeitLeadership,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Member {
    Id(u64),
    Name(String),
}

const USAGE: &str =
    "usage: keelson etcd members|status|leave|remove-member ID-OR-NAME|forfeit-leadership";

/// The verb and the node options.
fn args(raw: Vec<OsString>) -> Result<(Verb, Common), String> {
    let (common, positional) = connect::options_and_words(raw)?;
    let verb = match positional.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["members"] => Verb::Members,
        ["status"] => Verb::Status,
        ["leave"] => Verb::Leave,
        ["forfeit-leadership"] => Verb::ForfeitLeadership,
        ["remove-member", who] => Verb::RemoveMember(member(who)?),
        _ => return Err(USAGE.into()),
    };
    Ok((verb, common))
}

/// A member as given: 16 hex digits (talosctl prints IDs so) or a name.
fn member(s: &str) -> Result<Member, String> {
    if s.is_empty() {
        return Err("remove-member: an empty member".into());
    }
    let hex = s.strip_prefix("0x").unwrap_or(s);
    if hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return u64::from_str_radix(hex, 16)
            .map(Member::Id)
            .map_err(|e| format!("remove-member {}: {e}", escape_cell(s)));
    }
    Ok(Member::Name(s.to_owned()))
}

fn run(raw: Vec<OsString>) -> Result<(), String> {
    let (verb, common) = args(raw)?;
    if matches!(verb, Verb::Leave | Verb::RemoveMember(_) | Verb::ForfeitLeadership) {
        // One change at a time: several nodes leaving at once can cost the cluster its quorum.
        let targets = common.targets()?;
        if targets.len() != 1 {
            return Err("one node at a time (-n NODE)".into());
        }
    }
    each(&common, |target, out| {
        let mut c = Channel::connect(target, false).map_err(|e| e.to_string())?;
        call(&mut c, &verb, out).map_err(|e| format!("{}: {e}", target.name()))
    })
}

fn path(name: &str) -> String {
    format!("/{}/{name}", talos_api::machine::SERVICE)
}

fn write(out: &mut dyn Write, text: &str) -> Result<(), RpcError> {
    out.write_all(text.as_bytes()).map_err(|e| RpcError::Handler(e.to_string()))
}

fn call(c: &mut Channel, verb: &Verb, out: &mut dyn Write) -> Result<(), RpcError> {
    match verb {
        Verb::Members => {
            let r: EtcdMemberListResponse =
                c.unary(&path("EtcdMemberList"), &EtcdMemberListRequest::default())?;
            write(out, &members_table(&r))
        }
        Verb::Status => {
            let r: EtcdStatusResponse = c.unary(&path("EtcdStatus"), &Empty {})?;
            write(out, &status_table(&r))
        }
        Verb::Leave => {
            let _: EtcdDoneResponse = c.unary(&path("EtcdLeaveCluster"), &Empty {})?;
            Ok(())
        }
        Verb::RemoveMember(Member::Id(id)) => {
            let req = EtcdRemoveMemberByIdRequest { member_id: *id };
            let _: EtcdDoneResponse = c.unary(&path("EtcdRemoveMemberByID"), &req)?;
            Ok(())
        }
        Verb::RemoveMember(Member::Name(name)) => {
            let req = EtcdRemoveMemberRequest { member: name.clone() };
            let _: EtcdDoneResponse = c.unary(&path("EtcdRemoveMember"), &req)?;
            Ok(())
        }
        Verb::ForfeitLeadership => {
            let r: EtcdForfeitLeadershipResponse =
                c.unary(&path("EtcdForfeitLeadership"), &Empty {})?;
            let moved: Vec<&str> =
                r.messages.iter().map(|m| m.member.as_str()).filter(|m| !m.is_empty()).collect();
            let text = match moved.as_slice() {
                [] => "not the leader: nothing to forfeit\n".to_owned(),
                names => format!("leadership moved to {}\n", escape_cell(&names.join(", "))),
            };
            write(out, &text)
        }
    }
}

/// talosctl's `etcd members` columns (the NODE column is the prefix `each` adds for several).
pub fn members_table(r: &EtcdMemberListResponse) -> String {
    let mut rows =
        vec![["ID", "HOSTNAME", "PEER URLS", "CLIENT URLS", "LEARNER"].map(String::from).to_vec()];
    for m in r.messages.iter().flat_map(|m| &m.members) {
        rows.push(vec![
            format!("{:016x}", m.id),
            escape_cell(&m.hostname),
            escape_cell(&m.peer_urls.join(",")),
            escape_cell(&m.client_urls.join(",")),
            m.is_learner.to_string(),
        ]);
    }
    align(&rows)
}

/// talosctl's `etcd status` columns.
pub fn status_table(r: &EtcdStatusResponse) -> String {
    let mut rows = vec![[
        "MEMBER",
        "DB SIZE",
        "IN USE",
        "LEADER",
        "RAFT INDEX",
        "RAFT TERM",
        "RAFT APPLIED INDEX",
        "LEARNER",
        "ERRORS",
    ]
    .map(String::from)
    .to_vec()];
    for s in r.messages.iter().filter_map(|m| m.member_status.as_ref()) {
        let size = u64::try_from(s.db_size).unwrap_or(0);
        let used = u64::try_from(s.db_size_in_use).unwrap_or(0);
        let pct = if size == 0 { 0.0 } else { used as f64 * 100.0 / size as f64 };
        rows.push(vec![
            format!("{:016x}", s.member_id),
            crate::machine::human_bytes(size),
            format!("{} ({pct:.2}%)", crate::machine::human_bytes(used)),
            format!("{:016x}", s.leader),
            s.raft_index.to_string(),
            s.raft_term.to_string(),
            s.raft_applied_index.to_string(),
            s.is_learner.to_string(),
            escape_cell(&s.errors.join(", ")),
        ]);
    }
    align(&rows)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use talos_api::machine::{EtcdMember, EtcdMemberStatus, EtcdMembers, EtcdStatus};

    fn parse(args: &[&str]) -> Result<Verb, String> {
        super::args(args.iter().map(OsString::from).collect()).map(|(v, _)| v)
    }

    #[test]
    fn verbs_and_members_parse_as_talosctl_names_them() {
        assert_eq!(parse(&["members"]).unwrap(), Verb::Members);
        assert_eq!(parse(&["status", "--socket", "/s"]).unwrap(), Verb::Status);
        assert_eq!(parse(&["forfeit-leadership"]).unwrap(), Verb::ForfeitLeadership);
        assert_eq!(
            parse(&["remove-member", "8e9e05c52164694d"]).unwrap(),
            Verb::RemoveMember(Member::Id(0x8e9e_05c5_2164_694d))
        );
        assert_eq!(
            parse(&["remove-member", "cp-2"]).unwrap(),
            Verb::RemoveMember(Member::Name("cp-2".into()))
        );
        assert!(parse(&[]).unwrap_err().contains("usage"));
        assert!(parse(&["remove-member"]).unwrap_err().contains("usage"));
        assert!(parse(&["defrag"]).unwrap_err().contains("usage"));
        assert!(parse(&["remove-member", ""]).is_err());
    }

    #[test]
    fn tables_have_talosctls_columns_and_escape_names() {
        let r = EtcdMemberListResponse {
            messages: vec![EtcdMembers {
                metadata: None,
                legacy_members: vec![],
                members: vec![EtcdMember {
                    id: 0x1f,
                    hostname: "cp\u{1b}[2J".into(),
                    peer_urls: vec!["https://10.0.0.1:2380".into()],
                    client_urls: vec!["https://10.0.0.1:2379".into()],
                    is_learner: true,
                }],
            }],
        };
        let t = members_table(&r);
        assert!(t.starts_with("ID"), "{t}");
        assert!(t.contains("000000000000001f") && t.contains("true"), "{t}");
        assert!(!t.contains('\u{1b}'), "{t}");
        let s = EtcdStatusResponse {
            messages: vec![EtcdStatus {
                metadata: None,
                member_status: Some(EtcdMemberStatus {
                    member_id: 2,
                    db_size: 20_000,
                    db_size_in_use: 5_000,
                    leader: 2,
                    raft_term: 3,
                    ..Default::default()
                }),
            }],
        };
        let t = status_table(&s);
        assert!(t.contains("20 kB") && t.contains("5.0 kB (25.00%)"), "{t}");
    }
}
