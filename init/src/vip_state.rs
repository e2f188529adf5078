// SPDX-License-Identifier: Apache-2.0
//! What a VIP's election looks like to a user (the `VIPStatus` resource): the election
//! machine's phase, the driver's last etcd failure and the leader it read, turned into a state
//! and a sentence that say why this node does or does not hold the VIP. Pure.

use std::time::SystemTime;

use net::operator::vip::Phase;
use net::resource::Rfc3339;

/// Why the last etcd call failed, as far as a user cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// etcd took the request but did not answer in time, or answered that it has no leader:
    /// raft has no quorum (or etcd is badly overloaded).
    NoQuorum,
    /// No connection, a refused or broken one, or the etcd process is not running.
    Unreachable(String),
}

/// The longest error text a status repeats.
const WHY_MAX: usize = 160;

/// Sort an etcd client error into a [`Failure`].
pub fn classify(e: &etcd::ClientError) -> Failure {
    let text = e.to_string();
    match e {
        etcd::ClientError::Timeout(_) => Failure::NoQuorum,
        // etcd's own words when raft has no leader (`etcdserver: no leader`, `request timed
        // out`, `leader changed`).
        etcd::ClientError::Decode(_)
            if ["no leader", "timed out", "leader changed"].iter().any(|w| text.contains(w)) =>
        {
            Failure::NoQuorum
        }
        _ => Failure::Unreachable(base::names::escape(&text, WHY_MAX)),
    }
}

/// This node's part in one VIP's election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Campaign {
    /// The node is not a control plane: it never campaigns.
    NotControlPlane,
    /// A control plane whose etcd has not run healthy yet (or has stopped).
    WaitingForEtcd,
    /// Asking for a lease or a place in the queue, or pausing before asking again.
    Campaigning,
    /// In the queue behind the leader (its hostname when read).
    Waiting { holder: Option<String> },
    /// This node holds the VIP.
    Holding,
    /// Leader on paper, but no keep-alive succeeded in time: the address is off.
    Fenced { last_keepalive: SystemTime },
    /// etcd has no quorum; `fenced` when this node was the holder (its last keep-alive).
    QuorumLost { fenced: Option<SystemTime> },
    /// The local etcd does not answer.
    EtcdUnreachable { why: String, fenced: Option<SystemTime> },
    /// A planned handover: the address is going.
    HandingOver,
    /// The election ended here (shutdown, or the VIP left the config).
    Stopped,
}

/// What the driver knows, for [`Campaign::of`].
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    /// The machine's phase.
    pub phase: Phase,
    /// The candidate waits for its predecessor (from the last check).
    pub waiting: bool,
    /// The leader's hostname as last read while waiting.
    pub leader: Option<&'a str>,
    /// The last etcd call's failure (`None`: it succeeded).
    pub failure: Option<&'a Failure>,
    /// When the fence fired (wall clock, from the last successful keep-alive).
    pub fenced: Option<SystemTime>,
    /// etcd has not run healthy yet, or its process ended.
    pub etcd_down: bool,
}

impl Campaign {
    /// The state the driver's view amounts to. A failing etcd explains more than the phase
    /// it leaves the machine in, so it comes first (except while handing over or stopped).
    pub fn of(s: Seen<'_>) -> Self {
        match s.phase {
            Phase::Releasing => return Self::HandingOver,
            Phase::Stopped => return Self::Stopped,
            Phase::Holding => return Self::Holding,
            _ => {}
        }
        if s.etcd_down {
            return Self::WaitingForEtcd;
        }
        let fenced = if s.phase == Phase::Fenced { s.fenced } else { None };
        match s.failure {
            Some(Failure::NoQuorum) => return Self::QuorumLost { fenced },
            Some(Failure::Unreachable(why)) => {
                return Self::EtcdUnreachable { why: why.clone(), fenced }
            }
            None => {}
        }
        match s.phase {
            Phase::Fenced => match s.fenced {
                Some(t) => Self::Fenced { last_keepalive: t },
                None => Self::Campaigning,
            },
            Phase::Campaigning if s.waiting => {
                Self::Waiting { holder: s.leader.map(str::to_owned) }
            }
            _ => Self::Campaigning,
        }
    }

    /// This node holds the address.
    pub fn holding(&self) -> bool {
        *self == Self::Holding
    }

    /// The short state (`VIPStatus.state`).
    pub fn state(&self) -> &'static str {
        match self {
            Self::NotControlPlane => "not a control plane",
            Self::WaitingForEtcd => "waiting for etcd",
            Self::Campaigning => "campaigning",
            Self::Waiting { .. } => "waiting",
            Self::Holding => "holding",
            Self::Fenced { .. } => "fenced",
            Self::QuorumLost { .. } => "quorum lost",
            Self::EtcdUnreachable { .. } => "etcd unreachable",
            Self::HandingOver => "handing over",
            Self::Stopped => "stopped",
        }
    }

    /// The state in a sentence (`VIPStatus.reason`).
    pub fn reason(&self) -> String {
        let fenced = |t: &Option<SystemTime>| match t {
            Some(t) => format!("; fenced: no keep-alive since {}", Rfc3339(*t)),
            None => String::new(),
        };
        match self {
            Self::NotControlPlane => "not a control plane: only control planes campaign".into(),
            Self::WaitingForEtcd => {
                "waiting for etcd: the local etcd is not running or not healthy yet".into()
            }
            Self::Campaigning => "campaigning".into(),
            Self::Waiting { holder: Some(h) } => format!("waiting behind {h}"),
            Self::Waiting { holder: None } => "waiting behind another candidate".into(),
            Self::Holding => "holding".into(),
            Self::Fenced { last_keepalive } => {
                format!("fenced: no keep-alive since {}", Rfc3339(*last_keepalive))
            }
            Self::QuorumLost { fenced: t } => {
                format!("quorum lost: etcd answers no leader or not in time{}", fenced(t))
            }
            Self::EtcdUnreachable { why, fenced: t } => {
                format!("etcd unreachable: {why}{}", fenced(t))
            }
            Self::HandingOver => "handing over: the address goes, then the key".into(),
            Self::Stopped => "stopped: not campaigning".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    fn seen(phase: Phase) -> Seen<'static> {
        Seen { phase, waiting: false, leader: None, failure: None, fenced: None, etcd_down: false }
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn every_state_says_why() {
        let no_quorum = Failure::NoQuorum;
        let refused = Failure::Unreachable("connection refused".into());
        let t = Some(at(1_700_000_000));
        let cases: Vec<(Seen<'_>, &str, &str, bool)> = vec![
            (seen(Phase::Holding), "holding", "holding", true),
            (
                Seen { waiting: true, leader: Some("cp-1"), ..seen(Phase::Campaigning) },
                "waiting",
                "waiting behind cp-1",
                false,
            ),
            (
                Seen { waiting: true, ..seen(Phase::Campaigning) },
                "waiting",
                "waiting behind another candidate",
                false,
            ),
            (seen(Phase::Campaigning), "campaigning", "campaigning", false),
            (seen(Phase::Granting), "campaigning", "campaigning", false),
            (seen(Phase::Idle), "campaigning", "campaigning", false),
            (
                Seen { fenced: t, ..seen(Phase::Fenced) },
                "fenced",
                "fenced: no keep-alive since 2023-11-14T22:13:20Z",
                false,
            ),
            (
                Seen { fenced: t, failure: Some(&no_quorum), ..seen(Phase::Fenced) },
                "quorum lost",
                "quorum lost: etcd answers no leader or not in time; fenced: no keep-alive since 2023-11-14T22:13:20Z",
                false,
            ),
            (
                Seen { failure: Some(&no_quorum), ..seen(Phase::Idle) },
                "quorum lost",
                "quorum lost: etcd answers no leader or not in time",
                false,
            ),
            (
                Seen { failure: Some(&refused), ..seen(Phase::Querying) },
                "etcd unreachable",
                "etcd unreachable: connection refused",
                false,
            ),
            (
                Seen { etcd_down: true, failure: Some(&refused), ..seen(Phase::Idle) },
                "waiting for etcd",
                "waiting for etcd: the local etcd is not running or not healthy yet",
                false,
            ),
            (
                Seen { failure: Some(&no_quorum), ..seen(Phase::Releasing) },
                "handing over",
                "handing over: the address goes, then the key",
                false,
            ),
            (seen(Phase::Stopped), "stopped", "stopped: not campaigning", false),
        ];
        for (s, state, reason, holding) in cases {
            let c = Campaign::of(s);
            assert_eq!(c.state(), state, "{s:?}");
            assert_eq!(c.reason(), reason, "{s:?}");
            assert_eq!(c.holding(), holding, "{s:?}");
        }
        // Not from the driver: the node decides this one.
        assert_eq!(Campaign::NotControlPlane.state(), "not a control plane");
    }

    #[test]
    fn timeouts_and_no_leader_are_quorum_loss_and_the_rest_unreachable() {
        use etcd::ClientError;
        assert_eq!(classify(&ClientError::Timeout(Duration::from_millis(250))), Failure::NoQuorum);
        let refused = ClientError::Unreachable("https://127.0.0.1:2379: refused".into());
        assert!(matches!(classify(&refused), Failure::Unreachable(w) if w.contains("refused")));
        let body =
            br#"{"error":"etcdserver: no leader","code":14,"message":"etcdserver: no leader"}"#;
        let no_leader = etcd::decode::unary::<serde_json::Value>("range", 503, body)
            .map_err(ClientError::from)
            .unwrap_err();
        assert_eq!(classify(&no_leader), Failure::NoQuorum, "{no_leader}");
        let long = ClientError::Unreachable("x".repeat(5000));
        assert!(matches!(classify(&long), Failure::Unreachable(w) if w.len() <= 200));
    }
}
