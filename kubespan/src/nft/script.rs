// SPDX-License-Identifier: Apache-2.0
//! The same table as `nft` text. keelson never runs `nft`; this rendering exists so that tests
//! and `scripts/bench-kubespan` can load the identical table through `nft -f` and compare.

use std::fmt::Write;

use super::compile::{CHAIN_OUTGOING, CHAIN_PREROUTING, SET_V4, SET_V6};
use super::interval::{display, Width};
use super::plan::Resolved;

/// `nft -f` input that creates the table `plan` describes (it assumes the table is absent).
pub fn nft_script(plan: &Resolved) -> String {
    let t = &plan.shape;
    let mut s = String::new();
    let _ = writeln!(s, "table inet {} {{", t.table);
    for (set, ty, width, ranges) in [
        (SET_V4, "ipv4_addr", Width::V4, &plan.targets.v4),
        (SET_V6, "ipv6_addr", Width::V6, &plan.targets.v6),
    ] {
        let _ = write!(s, "  set {set} {{ type {ty}; flags interval;");
        if !ranges.is_empty() {
            let elems: Vec<String> = ranges.iter().map(|r| display(r, width)).collect();
            let _ = write!(s, " elements = {{ {} }}", elems.join(", "));
        }
        s.push_str(" }\n");
    }
    let mark = "meta mark set meta mark & 0xffffffdf | 0x00000040 accept";
    let from_wg = "meta mark & 0x00000060 == 0x00000020 accept";
    let _ = writeln!(
        s,
        "  chain {CHAIN_PREROUTING} {{\n    type filter hook prerouting priority filter; policy accept;\n    {from_wg}\n    ip daddr @{SET_V4} {mark}\n    ip6 daddr @{SET_V6} {mark}\n  }}"
    );
    let syn = "tcp flags & (syn | rst) == syn";
    let _ = writeln!(
        s,
        "  chain {CHAIN_OUTGOING} {{\n    type route hook output priority filter; policy accept;\n    {from_wg}\n    oifname \"lo\" accept\n    icmpv6 type nd-neighbor-solicit accept\n    icmpv6 type nd-neighbor-advert accept\n    ip daddr @{SET_V4} {syn} tcp option maxseg size > {c4} tcp option maxseg size set {c4}\n    ip6 daddr @{SET_V6} {syn} tcp option maxseg size > {c6} tcp option maxseg size set {c6}\n    ip daddr @{SET_V4} {mark}\n    ip6 daddr @{SET_V6} {mark}\n  }}",
        c4 = t.clamp_v4,
        c6 = t.clamp_v6,
    );
    s.push_str("}\n");
    s
}
