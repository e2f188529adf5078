// SPDX-License-Identifier: Apache-2.0
use super::with_sock;
use crate::netlink::{KernelRule, NlErrorKind};
use crate::resource::nethelpers::{Family, RouteProtocol, RoutingTable};

#[test]
fn rules_add_dump_delete() {
    with_sock(|sock| {
        let defaults = sock.dump_rules().unwrap();
        assert!(defaults.iter().any(|r| r.priority == 32766 && r.table == RoutingTable::MAIN));
        for family in [Family::Inet4, Family::Inet6] {
            let mut r = KernelRule::new(family, 32500, RoutingTable(100));
            r.fw_mark = 0x20;
            r.fw_mask = 0xff;
            sock.rule_add(&r).unwrap();
            let got: Vec<_> =
                sock.dump_rules().unwrap().into_iter().filter(|k| k.priority == 32500).collect();
            assert_eq!(got, vec![r.clone()]);
            assert_eq!(got[0].protocol, RouteProtocol::STATIC);
            let e = sock.rule_add(&r).unwrap_err();
            assert_eq!(e.kind(), NlErrorKind::Exists, "{e}");
            sock.rule_delete(&r).unwrap();
            assert!(!sock.dump_rules().unwrap().iter().any(|k| k.priority == 32500));
            let e = sock.rule_delete(&r).unwrap_err();
            assert_eq!(e.kind(), NlErrorKind::NotFound, "{e}");
        }
    });
}
