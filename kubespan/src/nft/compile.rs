// SPDX-License-Identifier: Apache-2.0
//! Compiles a resolved [`NftPlan`](super::NftPlan) into nf_tables batches.
//!
//! Two kinds of transaction:
//! - [`full_batch`] replaces our table, and only it, atomically: `NEWTABLE` (a no-op if it
//!   exists), `DELTABLE` (so the table is deleted whether or not it existed, which works on
//!   kernels without `NFT_MSG_DESTROYTABLE`), then the table, sets, elements, chains and rules.
//! - [`delta_batch`] changes set elements only: the ranges that left (`DELSETELEM`) and the
//!   ranges that arrived (`NEWSETELEM`), so its size depends on the change, not on the table.
//!
//! The rules are built as data ([`rules`]) and mirror what `nft` 1.0.6 generates for the
//! equivalent ruleset text (Talos's KubeSpan chains), so `nft list` shows our table exactly like
//! one loaded from that text.

use super::interval::{difference, Range, Width};
use super::plan::{Resolved, Shape, Targets};
use super::wire::*;

/// Name of the prerouting chain (type filter).
pub const CHAIN_PREROUTING: &str = "kubespan_prerouting";
/// Name of the output chain (type route, so a changed mark re-routes the packet).
pub const CHAIN_OUTGOING: &str = "kubespan_outgoing";
/// Name of the IPv4 target set.
pub const SET_V4: &str = "kubespan_targets_ipv4";
/// Name of the IPv6 target set.
pub const SET_V6: &str = "kubespan_targets_ipv6";

/// Mark bits KubeSpan owns (docs/talos.md: KubeSpan).
pub const MARK_MASK: u32 = 0x60;
/// Mark WireGuard sets on its own encrypted packets.
pub const MARK_FROM_WG: u32 = 0x20;
/// Mark that sends a packet into KubeSpan (the policy rule matches it).
pub const MARK_TO_WG: u32 = 0x40;

/// Largest element list in one message. The list is one attribute with a 16-bit length, so a
/// message holds at most ~64 KiB of elements; 60,000 leaves room for the message's own fields.
const ELEMENTS_PER_MESSAGE_BYTES: usize = 60_000;

/// One nf_tables expression, in the order the kernel evaluates them. Registers are always
/// `NFT_REG_1` for data, as `nft` does.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Expr {
    /// `meta load <key> => reg 1`.
    MetaLoad(u32),
    /// `meta set <key> with reg 1`.
    MetaSet(u32),
    /// `cmp <op> reg 1 <data>`.
    Cmp(u32, Vec<u8>),
    /// `bitwise reg 1 = (reg 1 & mask) ^ xor`.
    Bitwise(Vec<u8>, Vec<u8>),
    /// `payload load <len>b @ <base> + <offset> => reg 1`.
    Payload { base: u32, offset: u32, len: u32 },
    /// `lookup reg 1 set <name>`.
    Lookup(&'static str),
    /// `immediate reg 1 <data>`.
    Value(Vec<u8>),
    /// `immediate reg 0 accept`.
    Accept,
    /// `exthdr load tcpopt <len>b @ <kind> + <offset> => reg 1`.
    TcpOptLoad { kind: u8, offset: u32, len: u32 },
    /// `exthdr write tcpopt reg 1 => <len>b @ <kind> + <offset>`.
    TcpOptWrite { kind: u8, offset: u32, len: u32 },
}

/// TCP option kind of the maximum segment size (RFC 9293 §3.2); its value is 2 bytes at
/// offset 2 of the option.
const TCPOPT_MAXSEG: u8 = 2;
/// `NFPROTO_IPV4` / `NFPROTO_IPV6`, as `meta nfproto` reports them.
const NFPROTO_IPV4: u8 = 2;
const NFPROTO_IPV6: u8 = 10;

/// A rule: its chain and its expressions.
pub type Rule = (&'static str, Vec<Expr>);

/// `meta mark & 0x60 == 0x20 accept`: WireGuard's own packets follow the main table.
fn accept_from_wireguard() -> Vec<Expr> {
    vec![
        Expr::MetaLoad(NFT_META_MARK),
        Expr::Bitwise(MARK_MASK.to_ne_bytes().to_vec(), 0u32.to_ne_bytes().to_vec()),
        Expr::Cmp(NFT_CMP_EQ, MARK_FROM_WG.to_ne_bytes().to_vec()),
        Expr::Accept,
    ]
}

/// `ip[6] daddr @set`, with the `meta nfproto` guard an `inet` table needs.
fn daddr_in(width: Width) -> Vec<Expr> {
    let (proto, offset, len, set) = match width {
        Width::V4 => (NFPROTO_IPV4, 16, 4, SET_V4),
        Width::V6 => (NFPROTO_IPV6, 24, 16, SET_V6),
    };
    vec![
        Expr::MetaLoad(NFT_META_NFPROTO),
        Expr::Cmp(NFT_CMP_EQ, vec![proto]),
        Expr::Payload { base: NFT_PAYLOAD_NETWORK_HEADER, offset, len },
        Expr::Lookup(set),
    ]
}

/// `... meta mark set meta mark & 0xffffffdf | 0x40 accept`: set 0x40, clear 0x20, keep every
/// other bit (the kernel gets the folded form `(mark & 0xffffff9f) ^ 0x40`).
fn mark_to_wireguard(width: Width) -> Vec<Expr> {
    let mut e = daddr_in(width);
    e.extend([
        Expr::MetaLoad(NFT_META_MARK),
        Expr::Bitwise((!MARK_MASK).to_ne_bytes().to_vec(), MARK_TO_WG.to_ne_bytes().to_vec()),
        Expr::MetaSet(NFT_META_MARK),
        Expr::Accept,
    ]);
    e
}

/// `... tcp flags & (syn|rst) == syn tcp option maxseg size > clamp tcp option maxseg size set
/// clamp`: only SYNs advertising more than the tunnel can carry are lowered.
fn clamp_mss(width: Width, clamp: u16) -> Vec<Expr> {
    const TCP_FLAGS_OFFSET: u32 = 13;
    const SYN: u8 = 0x02;
    const RST: u8 = 0x04;
    let mss = TcpOpt { kind: TCPOPT_MAXSEG, offset: 2, len: 2 };
    let mut e = daddr_in(width);
    e.extend([
        Expr::MetaLoad(NFT_META_L4PROTO),
        Expr::Cmp(NFT_CMP_EQ, vec![libc::IPPROTO_TCP as u8]),
        Expr::Payload { base: NFT_PAYLOAD_TRANSPORT_HEADER, offset: TCP_FLAGS_OFFSET, len: 1 },
        Expr::Bitwise(vec![SYN | RST], vec![0]),
        Expr::Cmp(NFT_CMP_EQ, vec![SYN]),
        Expr::TcpOptLoad { kind: mss.kind, offset: mss.offset, len: mss.len },
        // The MSS is big-endian on the wire; `cmp gt` compares bytes, so big-endian is right.
        Expr::Cmp(NFT_CMP_GT, clamp.to_be_bytes().to_vec()),
        Expr::Value(clamp.to_be_bytes().to_vec()),
        Expr::TcpOptWrite { kind: mss.kind, offset: mss.offset, len: mss.len },
    ]);
    e
}

/// `icmpv6 type <ty> accept`: neighbour discovery stays on the link. A peer's link address can
/// be both one it routes through KubeSpan and its WireGuard endpoint; marked, the neighbour
/// advertisement answering its solicitation (and our unicast reachability probes) would go
/// into the tunnel, the peer would never learn our link-layer address, and no handshake could
/// reach it.
fn accept_icmpv6(ty: u8) -> Vec<Expr> {
    vec![
        Expr::MetaLoad(NFT_META_NFPROTO),
        Expr::Cmp(NFT_CMP_EQ, vec![NFPROTO_IPV6]),
        Expr::MetaLoad(NFT_META_L4PROTO),
        Expr::Cmp(NFT_CMP_EQ, vec![libc::IPPROTO_ICMPV6 as u8]),
        Expr::Payload { base: NFT_PAYLOAD_TRANSPORT_HEADER, offset: 0, len: 1 },
        Expr::Cmp(NFT_CMP_EQ, vec![ty]),
        Expr::Accept,
    ]
}

/// ICMPv6 types of neighbour solicitation and advertisement (RFC 4861 §4.3, §4.4).
pub const ND_NEIGHBOR_SOLICIT: u8 = 135;
pub const ND_NEIGHBOR_ADVERT: u8 = 136;

struct TcpOpt {
    kind: u8,
    offset: u32,
    len: u32,
}

/// The rules of both chains, in order (docs/talos.md: KubeSpan).
pub fn rules(shape: &Shape) -> Vec<Rule> {
    // IFNAMSIZ bytes, NUL padded, as the kernel stores interface names.
    let lo: [u8; 16] = *b"lo\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
    vec![
        (CHAIN_PREROUTING, accept_from_wireguard()),
        (CHAIN_PREROUTING, mark_to_wireguard(Width::V4)),
        (CHAIN_PREROUTING, mark_to_wireguard(Width::V6)),
        (CHAIN_OUTGOING, accept_from_wireguard()),
        (
            CHAIN_OUTGOING,
            vec![
                Expr::MetaLoad(NFT_META_OIFNAME),
                Expr::Cmp(NFT_CMP_EQ, lo.to_vec()),
                Expr::Accept,
            ],
        ),
        (CHAIN_OUTGOING, accept_icmpv6(ND_NEIGHBOR_SOLICIT)),
        (CHAIN_OUTGOING, accept_icmpv6(ND_NEIGHBOR_ADVERT)),
        (CHAIN_OUTGOING, clamp_mss(Width::V4, shape.clamp_v4)),
        (CHAIN_OUTGOING, clamp_mss(Width::V6, shape.clamp_v6)),
        (CHAIN_OUTGOING, mark_to_wireguard(Width::V4)),
        (CHAIN_OUTGOING, mark_to_wireguard(Width::V6)),
    ]
}

/// The batch that replaces our table with the one `plan` describes. `seq` numbers the first
/// message.
pub fn full_batch(plan: &Resolved, seq: u32) -> Batch {
    replace_batch(plan, None, seq)
}

/// Like [`full_batch`], also deleting table `previous` (our table under an earlier name) in the
/// same transaction, so a rename never leaves two tables marking packets.
pub fn replace_batch(plan: &Resolved, previous: Option<&str>, seq: u32) -> Batch {
    let table = plan.shape.table.as_str();
    let mut b = Batch::new(seq);
    if let Some(old) = previous.filter(|old| *old != table) {
        drop_table(&mut b, old);
    }
    drop_table(&mut b, table);
    b.begin(NFT_MSG_NEWTABLE, NFPROTO_INET, NLM_F_CREATE, format!("NEWTABLE {table}"));
    b.str_attr(NFTA_TABLE_NAME, table);
    b.be32(NFTA_TABLE_FLAGS, 0);

    for (id, (set, width)) in [(SET_V4, Width::V4), (SET_V6, Width::V6)].into_iter().enumerate() {
        let (key_type, key_len) = match width {
            Width::V4 => (NFT_TYPE_IPADDR, 4),
            Width::V6 => (NFT_TYPE_IP6ADDR, 16),
        };
        b.begin(NFT_MSG_NEWSET, NFPROTO_INET, NLM_F_CREATE, format!("NEWSET {set}"));
        b.str_attr(NFTA_SET_TABLE, table);
        b.str_attr(NFTA_SET_NAME, set);
        b.be32(NFTA_SET_FLAGS, NFT_SET_INTERVAL);
        b.be32(NFTA_SET_KEY_TYPE, key_type);
        b.be32(NFTA_SET_KEY_LEN, key_len);
        b.be32(NFTA_SET_ID, id as u32 + 1);
        // nft's user data: key byte order big-endian (NFTNL_UDATA_SET_KEYBYTEORDER = 0, value
        // BYTEORDER_BIG_ENDIAN = 2), so `nft list` prints the keys as nft itself would.
        let mut udata = vec![0u8, 4];
        udata.extend_from_slice(&2u32.to_ne_bytes());
        b.bytes_attr(NFTA_SET_USERDATA, &udata);
    }
    elements(&mut b, NFT_MSG_NEWSETELEM, table, SET_V4, Width::V4, &plan.targets.v4);
    elements(&mut b, NFT_MSG_NEWSETELEM, table, SET_V6, Width::V6, &plan.targets.v6);

    for (chain, kind, hook) in [
        (CHAIN_PREROUTING, "filter", NF_INET_PRE_ROUTING),
        (CHAIN_OUTGOING, "route", NF_INET_LOCAL_OUT),
    ] {
        b.begin(NFT_MSG_NEWCHAIN, NFPROTO_INET, NLM_F_CREATE, format!("NEWCHAIN {chain}"));
        b.str_attr(NFTA_CHAIN_TABLE, table);
        b.str_attr(NFTA_CHAIN_NAME, chain);
        let h = b.nest(NFTA_CHAIN_HOOK);
        b.be32(NFTA_HOOK_HOOKNUM, hook);
        b.be32(NFTA_HOOK_PRIORITY, 0); // NF_IP_PRI_FILTER
        b.nest_end(h);
        b.be32(NFTA_CHAIN_POLICY, NF_ACCEPT);
        b.str_attr(NFTA_CHAIN_TYPE, kind);
    }

    for (n, (chain, exprs)) in rules(&plan.shape).into_iter().enumerate() {
        b.begin(
            NFT_MSG_NEWRULE,
            NFPROTO_INET,
            NLM_F_CREATE | NLM_F_APPEND,
            format!("NEWRULE {chain} #{}", n + 1),
        );
        b.str_attr(NFTA_RULE_TABLE, table);
        b.str_attr(NFTA_RULE_CHAIN, chain);
        let list = b.nest(NFTA_RULE_EXPRESSIONS);
        for e in &exprs {
            expr(&mut b, e);
        }
        b.nest_end(list);
    }
    b
}

/// The ranges that leave and arrive when the sets go from one content to another.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Delta {
    /// Ranges to delete (present before, absent after, compared whole).
    pub removed: Targets,
    /// Ranges to add.
    pub added: Targets,
}

impl Delta {
    /// The change from `old` to `new`: linear in their sizes, with no allocation beyond the
    /// result.
    pub fn between(old: &Targets, new: &Targets) -> Self {
        Delta {
            removed: Targets { v4: difference(&old.v4, &new.v4), v6: difference(&old.v6, &new.v6) },
            added: Targets { v4: difference(&new.v4, &old.v4), v6: difference(&new.v6, &old.v6) },
        }
    }

    /// Ranges removed, both families.
    pub fn removed(&self) -> usize {
        self.removed.v4.len() + self.removed.v6.len()
    }

    /// Ranges added, both families.
    pub fn added(&self) -> usize {
        self.added.v4.len() + self.added.v6.len()
    }

    /// The batch for this change, or `None` when there is nothing to do. Removals come first,
    /// so a range that changed shape never overlaps its old self.
    pub fn batch(&self, table: &str, seq: u32) -> Option<Batch> {
        if self.removed() + self.added() == 0 {
            return None;
        }
        let mut b = Batch::new(seq);
        for (msg, t) in [(NFT_MSG_DELSETELEM, &self.removed), (NFT_MSG_NEWSETELEM, &self.added)] {
            elements(&mut b, msg, table, SET_V4, Width::V4, &t.v4);
            elements(&mut b, msg, table, SET_V6, Width::V6, &t.v6);
        }
        Some(b)
    }
}

/// The batch that turns the sets holding `old` into sets holding `new`, or `None` when they
/// are equal (see [`Delta::batch`]).
pub fn delta_batch(table: &str, old: &Targets, new: &Targets, seq: u32) -> Option<Batch> {
    Delta::between(old, new).batch(table, seq)
}

/// Deletes inet table `name` whether or not it exists: `NEWTABLE` (a no-op on an existing
/// table) then `DELTABLE`, which works on kernels without `NFT_MSG_DESTROYTABLE` (6.3+).
pub fn drop_table(b: &mut Batch, name: &str) {
    b.begin(NFT_MSG_NEWTABLE, NFPROTO_INET, NLM_F_CREATE, format!("NEWTABLE {name} (ensure)"));
    b.str_attr(NFTA_TABLE_NAME, name);
    b.begin(NFT_MSG_DELTABLE, NFPROTO_INET, 0, format!("DELTABLE {name}"));
    b.str_attr(NFTA_TABLE_NAME, name);
}

/// Appends `ranges` to `set` as `msg` (`NEWSETELEM` or `DELSETELEM`) messages: each range is a
/// start element and, unless it runs to the top of the address space, an interval-end element
/// at the first address after it.
fn elements(b: &mut Batch, msg: u8, table: &str, set: &str, width: Width, ranges: &[Range]) {
    let key_len = width.key(0).len();
    // LIST_ELEM + KEY nest + DATA_VALUE + key, twice, plus the end element's flags.
    let per_range = 2 * (4 + 4 + 4 + key_len) + 8;
    let per_message = (ELEMENTS_PER_MESSAGE_BYTES / per_range).max(1);
    let verb = if msg == NFT_MSG_DELSETELEM { "DELSETELEM" } else { "NEWSETELEM" };
    for chunk in ranges.chunks(per_message) {
        let flags = if msg == NFT_MSG_NEWSETELEM { NLM_F_CREATE } else { 0 };
        b.begin(msg, NFPROTO_INET, flags, format!("{verb} {set} ({} ranges)", chunk.len()));
        b.str_attr(NFTA_SET_ELEM_LIST_TABLE, table);
        b.str_attr(NFTA_SET_ELEM_LIST_SET, set);
        let list = b.nest(NFTA_SET_ELEM_LIST_ELEMENTS);
        for r in chunk {
            element(b, width, r.first, false);
            if let Some(end) = r.end(width) {
                element(b, width, end, true);
            }
        }
        b.nest_end(list);
    }
}

fn element(b: &mut Batch, width: Width, addr: u128, interval_end: bool) {
    let e = b.nest(NFTA_LIST_ELEM);
    if interval_end {
        b.be32(NFTA_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END);
    }
    let k = b.nest(NFTA_SET_ELEM_KEY);
    b.bytes_attr(NFTA_DATA_VALUE, &width.key(addr));
    b.nest_end(k);
    b.nest_end(e);
}

/// Writes one expression: `NFTA_LIST_ELEM { NFTA_EXPR_NAME, NFTA_EXPR_DATA { ... } }`.
fn expr(b: &mut Batch, e: &Expr) {
    let name = match e {
        Expr::MetaLoad(_) | Expr::MetaSet(_) => "meta",
        Expr::Cmp(..) => "cmp",
        Expr::Bitwise(..) => "bitwise",
        Expr::Payload { .. } => "payload",
        Expr::Lookup(_) => "lookup",
        Expr::Value(_) | Expr::Accept => "immediate",
        Expr::TcpOptLoad { .. } | Expr::TcpOptWrite { .. } => "exthdr",
    };
    let elem = b.nest(NFTA_LIST_ELEM);
    b.str_attr(NFTA_EXPR_NAME, name);
    let data = b.nest(NFTA_EXPR_DATA);
    match e {
        Expr::MetaLoad(key) => {
            b.be32(NFTA_META_KEY, *key);
            b.be32(NFTA_META_DREG, NFT_REG_1);
        }
        Expr::MetaSet(key) => {
            b.be32(NFTA_META_KEY, *key);
            b.be32(NFTA_META_SREG, NFT_REG_1);
        }
        Expr::Cmp(op, value) => {
            b.be32(NFTA_CMP_SREG, NFT_REG_1);
            b.be32(NFTA_CMP_OP, *op);
            data_value(b, NFTA_CMP_DATA, value);
        }
        Expr::Bitwise(mask, xor) => {
            b.be32(NFTA_BITWISE_SREG, NFT_REG_1);
            b.be32(NFTA_BITWISE_DREG, NFT_REG_1);
            b.be32(NFTA_BITWISE_LEN, mask.len() as u32);
            data_value(b, NFTA_BITWISE_MASK, mask);
            data_value(b, NFTA_BITWISE_XOR, xor);
        }
        Expr::Payload { base, offset, len } => {
            b.be32(NFTA_PAYLOAD_DREG, NFT_REG_1);
            b.be32(NFTA_PAYLOAD_BASE, *base);
            b.be32(NFTA_PAYLOAD_OFFSET, *offset);
            b.be32(NFTA_PAYLOAD_LEN, *len);
        }
        Expr::Lookup(set) => {
            b.str_attr(NFTA_LOOKUP_SET, set);
            b.be32(NFTA_LOOKUP_SREG, NFT_REG_1);
        }
        Expr::Value(value) => {
            b.be32(NFTA_IMMEDIATE_DREG, NFT_REG_1);
            data_value(b, NFTA_IMMEDIATE_DATA, value);
        }
        Expr::Accept => {
            b.be32(NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
            let d = b.nest(NFTA_IMMEDIATE_DATA);
            let v = b.nest(NFTA_DATA_VERDICT);
            b.be32(NFTA_VERDICT_CODE, NF_ACCEPT);
            b.nest_end(v);
            b.nest_end(d);
        }
        Expr::TcpOptLoad { kind, offset, len } => {
            b.be32(NFTA_EXTHDR_DREG, NFT_REG_1);
            b.bytes_attr(NFTA_EXTHDR_TYPE, &[*kind]);
            b.be32(NFTA_EXTHDR_OFFSET, *offset);
            b.be32(NFTA_EXTHDR_LEN, *len);
            b.be32(NFTA_EXTHDR_OP, NFT_EXTHDR_OP_TCPOPT);
        }
        Expr::TcpOptWrite { kind, offset, len } => {
            b.be32(NFTA_EXTHDR_SREG, NFT_REG_1);
            b.bytes_attr(NFTA_EXTHDR_TYPE, &[*kind]);
            b.be32(NFTA_EXTHDR_OFFSET, *offset);
            b.be32(NFTA_EXTHDR_LEN, *len);
            b.be32(NFTA_EXTHDR_OP, NFT_EXTHDR_OP_TCPOPT);
        }
    }
    b.nest_end(data);
    b.nest_end(elem);
}

/// `ty { NFTA_DATA_VALUE value }`.
fn data_value(b: &mut Batch, ty: u16, value: &[u8]) {
    let n = b.nest(ty);
    b.bytes_attr(NFTA_DATA_VALUE, value);
    b.nest_end(n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nft::NftPlan;

    /// Hex, 16 bytes a line, as the fixtures are stored.
    fn hex(bytes: &[u8]) -> String {
        bytes
            .chunks(16)
            .map(|l| l.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ") + "\n")
            .collect()
    }

    /// Compares with `testdata/<name>`; `KEELSON_BLESS=1` rewrites the fixture instead. The encoder
    /// that wrote them is checked against the kernel by `tests/nft_netns.rs`, which compares `nft
    /// -j list` of our table with the one `nft -f` builds from the equivalent ruleset text.
    fn golden(name: &str, bytes: &[u8]) {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/nft/testdata").join(name);
        let got = hex(bytes);
        if std::env::var("KEELSON_BLESS").as_deref() == Ok("1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &got).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            got, want,
            "{name} differs (KEELSON_BLESS=1 rewrites it after a deliberate change)"
        );
    }

    fn small() -> Resolved {
        NftPlan {
            targets_v4: vec!["10.0.0.0/8".parse().unwrap(), "255.255.255.255/32".parse().unwrap()],
            targets_v6: vec!["fd00::/8".parse().unwrap()],
            ..NftPlan::default()
        }
        .resolve()
        .unwrap()
    }

    #[test]
    fn full_batch_golden() {
        let (bytes, sent, next) = full_batch(&small(), 1).finish().unwrap();
        let names: Vec<&str> = sent.iter().map(|s| s.what.as_str()).collect();
        assert_eq!(
            names,
            [
                "NEWTABLE talos_kubespan (ensure)",
                "DELTABLE talos_kubespan",
                "NEWTABLE talos_kubespan",
                "NEWSET kubespan_targets_ipv4",
                "NEWSET kubespan_targets_ipv6",
                "NEWSETELEM kubespan_targets_ipv4 (2 ranges)",
                "NEWSETELEM kubespan_targets_ipv6 (1 ranges)",
                "NEWCHAIN kubespan_prerouting",
                "NEWCHAIN kubespan_outgoing",
                "NEWRULE kubespan_prerouting #1",
                "NEWRULE kubespan_prerouting #2",
                "NEWRULE kubespan_prerouting #3",
                "NEWRULE kubespan_outgoing #4",
                "NEWRULE kubespan_outgoing #5",
                "NEWRULE kubespan_outgoing #6",
                "NEWRULE kubespan_outgoing #7",
                "NEWRULE kubespan_outgoing #8",
                "NEWRULE kubespan_outgoing #9",
                "NEWRULE kubespan_outgoing #10",
                "NEWRULE kubespan_outgoing #11",
            ]
        );
        // Sequence numbers run from the BATCH_BEGIN (1) through BATCH_END.
        assert_eq!(sent[0].seq, 2);
        assert_eq!(next, 2 + sent.len() as u32 + 1);
        golden("full_batch.hex", &bytes);
    }

    #[test]
    fn rename_drops_the_old_table_in_the_same_batch() {
        let (_, sent, _) = replace_batch(&small(), Some("old_ks"), 1).finish().unwrap();
        let names: Vec<&str> = sent.iter().take(5).map(|s| s.what.as_str()).collect();
        assert_eq!(
            names,
            [
                "NEWTABLE old_ks (ensure)",
                "DELTABLE old_ks",
                "NEWTABLE talos_kubespan (ensure)",
                "DELTABLE talos_kubespan",
                "NEWTABLE talos_kubespan",
            ]
        );
        // The same name as before is not dropped twice.
        let (_, same, _) = replace_batch(&small(), Some("talos_kubespan"), 1).finish().unwrap();
        assert_eq!(same.len(), full_batch(&small(), 1).len());
    }

    #[test]
    fn delta_batch_golden() {
        let old = small().targets;
        let new = NftPlan {
            targets_v4: vec!["10.0.0.0/8".parse().unwrap(), "192.168.0.0/16".parse().unwrap()],
            targets_v6: vec!["fd00::/8".parse().unwrap()],
            ..NftPlan::default()
        }
        .resolve()
        .unwrap()
        .targets;
        assert!(delta_batch("talos_kubespan", &old, &old, 1).is_none());
        let (bytes, sent, _) =
            delta_batch("talos_kubespan", &old, &new, 1).unwrap().finish().unwrap();
        let names: Vec<&str> = sent.iter().map(|s| s.what.as_str()).collect();
        assert_eq!(
            names,
            [
                "DELSETELEM kubespan_targets_ipv4 (1 ranges)",
                "NEWSETELEM kubespan_targets_ipv4 (1 ranges)"
            ]
        );
        golden("delta_batch.hex", &bytes);
    }

    #[test]
    fn range_to_the_top_has_no_end_element() {
        // 255.255.255.255/32 alone: one start element, no interval end (it would be 2^32).
        let only_top = Targets { v4: small().targets.v4[1..].to_vec(), v6: Vec::new() };
        let (bytes, _, _) =
            delta_batch("t", &Targets::default(), &only_top, 1).unwrap().finish().unwrap();
        let flags_attr = [8, 0, NFTA_SET_ELEM_FLAGS as u8, 0, 0, 0, 0, 1];
        assert!(!bytes.windows(8).any(|w| w == flags_attr));
        assert!(bytes.windows(4).any(|w| w == [255, 255, 255, 255]));
        // 10.0.0.0/8: a start and an end element at 11.0.0.0.
        let ten = Targets { v4: small().targets.v4[..1].to_vec(), v6: Vec::new() };
        let (bytes, _, _) =
            delta_batch("t", &Targets::default(), &ten, 1).unwrap().finish().unwrap();
        assert_eq!(bytes.windows(8).filter(|w| *w == flags_attr).count(), 1);
        assert!(bytes.windows(4).any(|w| w == [11, 0, 0, 0]));
    }

    #[test]
    fn delta_size_is_independent_of_untouched_ranges() {
        // Peer k owns two /26 in 10.(k>>8).(k&255).0/24 (adjacent, so one range, until peer 0
        // moves its second one) plus fd00:k::/64.
        let peers = |n: u32, changed: bool| -> Targets {
            let mut v4 = Vec::new();
            let mut v6 = Vec::new();
            for k in 0..n {
                let (a, b) = ((k >> 8) as u8, k as u8);
                let third = if changed && k == 0 { 7 } else { 1 };
                v4.push(format!("10.{a}.{b}.0/26").parse().unwrap());
                v4.push(format!("10.{a}.{b}.{}/26", third * 64 % 256).parse().unwrap());
                v6.push(format!("fd00:{k:x}::/64").parse().unwrap());
            }
            NftPlan { targets_v4: v4, targets_v6: v6, ..NftPlan::default() }
                .resolve()
                .unwrap()
                .targets
        };
        let size = |n| {
            let b = delta_batch("talos_kubespan", &peers(n, false), &peers(n, true), 1).unwrap();
            (b.len(), b.bytes())
        };
        assert_eq!(size(10), size(1000));
        // And a full table of 1,000 peers splits its elements below the 64 KiB attribute limit.
        let full = Resolved { shape: small().shape, targets: peers(1000, false) };
        assert!(full_batch(&full, 1).finish().is_ok());
    }

    #[test]
    fn marking_keeps_foreign_bits() {
        let rules = rules(&small().shape);
        let mark = rules[1].1.iter().find_map(|e| match e {
            Expr::Bitwise(mask, xor) => Some((mask.clone(), xor.clone())),
            _ => None,
        });
        let (mask, xor) = mark.unwrap();
        let apply = |m: u32| {
            (m & u32::from_ne_bytes(mask.clone().try_into().unwrap()))
                ^ u32::from_ne_bytes(xor.clone().try_into().unwrap())
        };
        assert_eq!(apply(0), 0x40);
        assert_eq!(apply(0x1020), 0x1040);
        assert_eq!(apply(0xffff_ffff), 0xffff_ffdf);
        assert_eq!(apply(0x0f00_0060), 0x0f00_0040);
    }
}
