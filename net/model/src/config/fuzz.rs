// SPDX-License-Identifier: Apache-2.0
//! The `config` fuzz target (docs/fuzzing.md): mutated machine configurations read both
//! ways, from the tree the bounds scan builds and from the text, must give the same
//! configuration, errors and warnings; neither may panic.

use testkit::fuzzkit::{run, Mutator, Target, Verdict};

use super::stream::check_with;
use super::tests_onepass::{examples, generated, Rng};

/// YAML's syntax and the shapes that read differently from a tree and from text.
const DICT: &[&[u8]] = &[
    b": ",
    b"- ",
    b"\n",
    b"\n  ",
    b"\n    ",
    b"---\n",
    b"...\n",
    b"&a ",
    b"*a",
    b"!!str ",
    b"!!int ",
    b"!t ",
    b"<<: ",
    b"'",
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b", ",
    b"~",
    b"null",
    b"true",
    b"0x1",
    b"1e3",
    b"007",
    b"-1",
    b".inf",
    b"# ",
    b"|\n",
    b">\n",
    b"version: v1alpha1\n",
    b"machine:\n",
    b"network:\n",
    b"interfaces:\n",
    b"hostname: ",
    b"mtu: ",
    b"addresses: ",
    b"routes:\n",
    b"interface: eth0\n",
    b"10.0.0.1/24",
    b"dhcp: ",
];

#[test]
fn fuzz_target_config() {
    let mut seeds: Vec<Vec<u8>> = examples().into_iter().map(String::into_bytes).collect();
    let mut r = Rng(0x005e_ed0f_c0f1, true);
    seeds.extend((0..16).map(|_| generated(&mut r).into_bytes()));
    let target = Target {
        name: "config",
        crate_dir: env!("CARGO_MANIFEST_DIR"),
        seeds,
        mutator: Mutator { dict: DICT, lengths: None, max_len: 16 << 10 },
        default_iters: 5000,
    };
    run(target, |b| {
        let Ok(yaml) = std::str::from_utf8(b) else { return Ok(Verdict::Refused) };
        let (fast, slow) = (check_with(yaml, true), check_with(yaml, false));
        if fast.config != slow.config {
            return Err("the tree and the text give different configurations".into());
        }
        if fast.errors != slow.errors {
            return Err(format!("errors differ: {:?} / {:?}", fast.errors, slow.errors));
        }
        if fast.kept != slow.kept {
            return Err("kept differs".into());
        }
        Ok(if fast.errors.is_empty() { Verdict::Accepted } else { Verdict::Refused })
    });
}
