// SPDX-License-Identifier: Apache-2.0
//! Leaving etcd on a graceful `Reset` (Talos's `leave etcd` step: the node removes its own
//! member before it is wiped, so the others keep a quorum of the members that remain), and
//! the check that refuses a graceful reset of the cluster's only member. Pure: the calls are
//! in `node::etcd_join`.

use etcd::wire::Member;

use super::join;

/// What a leaving member does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leave {
    /// Remove member `id`, asking `via` (the other members' client URLs; empty: the local
    /// member, which etcd also accepts). When this member is raft's leader, it first hands
    /// leadership to `hand_to` (a voting member), so the others need no election (Talos
    /// forfeits leadership before it leaves too).
    Remove { id: i64, via: Vec<String>, hand_to: Option<i64> },
    /// This node is the only member: nothing to leave to.
    LastMember,
    /// This node is not listed (never joined, or already removed).
    NotAMember,
}

/// The step for this node (`name`, `peer_url`) given the member list and raft's leader (as
/// the local member's status says; 0: unknown).
pub fn plan(members: &[Member], name: &str, peer_url: &str, leader: i64) -> Leave {
    match join::find_self(members, name, peer_url) {
        Some(me) => plan_for(members, me.id, leader),
        None => Leave::NotAMember,
    }
}

/// The step for member `me` (as the local member's status names it: `EtcdLeaveCluster`).
pub fn plan_for(members: &[Member], me: i64, leader: i64) -> Leave {
    let Some(me) = members.iter().find(|m| m.id == me) else {
        return Leave::NotAMember;
    };
    if members.len() <= 1 {
        return Leave::LastMember;
    }
    let hand_to = if leader == me.id {
        members.iter().find(|m| m.id != me.id && !m.is_learner).map(|m| m.id)
    } else {
        None
    };
    Leave::Remove { id: me.id, via: join::others(members, me.id), hand_to }
}

/// A graceful reset of a control plane: refused when its etcd has one member, as Talos
/// refuses (its check that etcd keeps a quorum without this node). `members`: how many the
/// local etcd lists.
pub fn check_graceful_reset(members: usize) -> Result<(), String> {
    if members == 1 {
        return Err("this node is etcd's only member: a graceful reset would leave the cluster \
                    with no etcd member; reset with graceful=false to wipe it anyway"
            .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn member(id: i64, name: &str, n: u8) -> Member {
        Member {
            id,
            name: name.into(),
            peer_urls: vec![format!("https://10.0.0.{n}:2380")],
            client_urls: vec![format!("https://10.0.0.{n}:2379")],
            is_learner: false,
        }
    }

    #[test]
    fn a_member_among_others_is_removed_through_the_others() {
        let m = [member(1, "cp-1", 1), member(2, "cp-2", 2), member(3, "cp-3", 3)];
        let via = vec!["https://10.0.0.1:2379".to_owned(), "https://10.0.0.3:2379".to_owned()];
        assert_eq!(
            plan(&m, "cp-2", "https://10.0.0.2:2380", 1),
            Leave::Remove { id: 2, via: via.clone(), hand_to: None }
        );
        // The leader hands leadership to a voter first (not to a learner).
        let mut with_learner = m.clone();
        with_learner[0].is_learner = true;
        assert_eq!(
            plan(&with_learner, "cp-2", "https://10.0.0.2:2380", 2),
            Leave::Remove { id: 2, via, hand_to: Some(3) }
        );
        // Found by its peer URL when the name differs (a renamed host).
        assert!(matches!(
            plan(&m, "other", "https://10.0.0.3:2380", 0),
            Leave::Remove { id: 3, hand_to: None, .. }
        ));
    }

    #[test]
    fn the_last_member_stays_and_a_stranger_has_nothing_to_leave() {
        assert_eq!(
            plan(&[member(1, "cp-1", 1)], "cp-1", "https://10.0.0.1:2380", 1),
            Leave::LastMember
        );
        let m = [member(1, "cp-1", 1), member(2, "cp-2", 2)];
        assert_eq!(plan(&m, "cp-9", "https://10.0.0.9:2380", 1), Leave::NotAMember);
        assert_eq!(plan(&[], "cp-1", "https://10.0.0.1:2380", 0), Leave::NotAMember);
    }

    #[test]
    fn the_api_finds_this_member_by_the_id_its_status_gives() {
        let m = [member(1, "cp-1", 1), member(2, "cp-2", 2)];
        assert_eq!(
            plan_for(&m, 1, 1),
            Leave::Remove { id: 1, via: vec!["https://10.0.0.2:2379".into()], hand_to: Some(2) }
        );
        assert_eq!(plan_for(&m, 9, 1), Leave::NotAMember);
        assert_eq!(plan_for(&m[..1], 1, 1), Leave::LastMember);
    }

    #[test]
    fn a_graceful_reset_of_the_only_member_is_refused() {
        let e = check_graceful_reset(1).unwrap_err();
        assert!(e.contains("only member") && e.contains("graceful=false"), "{e}");
        assert!(check_graceful_reset(2).is_ok());
        assert!(check_graceful_reset(3).is_ok());
        // Nothing listed (not a member yet): nothing to protect.
        assert!(check_graceful_reset(0).is_ok());
    }
}
