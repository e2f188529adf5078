// SPDX-License-Identifier: Apache-2.0
//! The module tables of `/lib/modules/<release>` (`pid1::modules`, `pid1::alias`): an input is
//! `modules.dep`, `modules.softdep` and `modules.alias` separated by NUL bytes.
//!
//! Oracles: no panic; every module's load order lists each file once, the module's own file
//! last but its `post:` softdeps, and only files of `modules.dep`; a lookup returns each module
//! once; the glob matcher agrees with a plain backtracking matcher written from the rules in
//! `pid1::alias` (fnmatch without flags), on every alias pattern against every word of the
//! input.

use std::collections::BTreeSet;
use std::path::PathBuf;

use testkit::fuzzkit::{run, Mutator, Target, Verdict};

use crate::pid1::alias::glob_match;
use crate::pid1::modules::{parse_modules_dep, parse_softdep, Tables};

/// `[...]` at the start of `p` (after the `[`): (matched, bytes taken with the `]`).
fn reference_bracket(p: &[u8], c: u8) -> Option<(bool, usize)> {
    let (negate, mut i) = match p.first() {
        Some(b'!' | b'^') => (true, 1),
        _ => (false, 0),
    };
    let start = i;
    let mut matched = false;
    loop {
        let lo = *p.get(i)?;
        if lo == b']' && i > start {
            return Some((matched != negate, i + 1));
        }
        if p.get(i + 1) == Some(&b'-') && p.get(i + 2).is_some_and(|h| *h != b']') {
            matched |= (lo..=p[i + 2]).contains(&c);
            i += 3;
        } else {
            matched |= lo == c;
            i += 1;
        }
    }
}

/// Backtracking fnmatch: exponential in the worst case, so inputs are kept short.
fn reference_glob(p: &[u8], t: &[u8]) -> bool {
    match p.first() {
        None => t.is_empty(),
        Some(b'*') => (0..=t.len()).any(|k| reference_glob(&p[1..], &t[k..])),
        Some(_) if t.is_empty() => false,
        Some(b'?') => reference_glob(&p[1..], &t[1..]),
        Some(b'[') => match reference_bracket(&p[1..], t[0]) {
            Some((true, n)) => reference_glob(&p[1 + n..], &t[1..]),
            Some((false, _)) => false,
            None => t[0] == b'[' && reference_glob(&p[1..], &t[1..]),
        },
        Some(&c) => c == t[0] && reference_glob(&p[1..], &t[1..]),
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let dep = "kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko\n\
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko\n\
kernel/net/core/failover.ko:\n\
kernel/drivers/net/bonding/bonding.ko.xz: kernel/net/tls/tls.ko\n\
kernel/net/tls/tls.ko:\n\
kernel/crypto/crc32c_generic.ko:\n\
kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko\n\
kernel/lib/crc16.ko:\n";
    let soft = "softdep ext4 pre: crc32c post: tls\nsoftdep virtio-net pre: bonding\n";
    let alias = "alias pci:v00001AF4d00001041sv*sd*bc*sc*i* virtio_net\n\
alias crc32c crc32c_generic\n\
alias rtnl-link-bond bonding\n\
alias usb:v0B95p1790d*dc*dsc*dp*ic*isc*ip*in* ax88179_178a\n\
alias pci:v*d*sv*sd*bc02sc[0-8]i[!a-c] virtio_net\n\
alias [] odd\n\
alias x[ virtio_net\n";
    vec![
        format!("{dep}\0{soft}\0{alias}\0pci:v00001AF4d00001041sv00001AF4sd00000001bc02sc00i00 crc32c x[").into_bytes(),
        b"a.ko: b.ko\nb.ko: a.ko\n\0softdep a pre: b post: a\nsoftdep b pre: a\n\0alias * a\n".to_vec(),
    ]
}

#[test]
fn fuzz_target_modules() {
    let target = Target {
        name: "modules",
        crate_dir: super::CRATE_DIR,
        seeds: seeds(),
        mutator: Mutator {
            dict: &[
                b"\0",
                b"\n",
                b": ",
                b".ko",
                b"softdep ",
                b" pre: ",
                b" post: ",
                b"alias ",
                b"*",
                b"?",
                b"[",
                b"]",
                b"[!",
                b"-",
                b"_",
                b"/",
            ],
            lengths: None,
            max_len: 4096,
        },
        default_iters: 5_000,
    };
    run(target, |b| {
        let text = String::from_utf8_lossy(b);
        let mut parts = text.split('\0');
        let (dep, soft, alias, words) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        let t = Tables::from_texts(PathBuf::from("/lib/modules/x"), dep, soft, alias);
        let deps = parse_modules_dep(dep);
        let _ = parse_softdep(soft);
        let files: BTreeSet<&String> = deps.values().map(|(p, _)| p).collect();
        let mut any = false;
        for (module, (path, _)) in &deps {
            let Some(order) = t.chain(module) else {
                return Err(format!("module {module} of modules.dep has no load order"));
            };
            let unique: BTreeSet<&String> = order.iter().collect();
            if unique.len() != order.len() || !order.contains(path) {
                return Err(format!("load order of {module}: {order:?}"));
            }
            if let Some(f) = order.iter().find(|f| !files.contains(f)) {
                return Err(format!("{f} is not in modules.dep"));
            }
            any = true;
        }
        let patterns: Vec<&str> = alias
            .lines()
            .filter_map(|l| l.strip_prefix("alias ")?.split_whitespace().next())
            .filter(|p| p.len() <= 64)
            .collect();
        for w in words.split_whitespace().chain(alias.split_whitespace()).take(16) {
            let found = t.resolve(w);
            let unique: BTreeSet<&String> = found.iter().collect();
            if unique.len() != found.len() {
                return Err(format!("{w} resolved to {found:?}"));
            }
            if w.len() > 64 {
                continue;
            }
            for p in &patterns {
                let (ours, reference) = (
                    glob_match(p.as_bytes(), w.as_bytes()),
                    reference_glob(p.as_bytes(), w.as_bytes()),
                );
                if ours != reference {
                    return Err(format!("glob {p:?} on {w:?}: {ours}, fnmatch says {reference}"));
                }
            }
        }
        Ok(if any { Verdict::Accepted } else { Verdict::Refused })
    });
}

/// Found while writing `fuzz_target_modules` (its inputs are too short to build it): a
/// `modules.dep` whose every line depends on the next made the load order recurse once per
/// line; 200,000 lines overflowed a loader thread's stack (2 MiB, the default) and took the
/// process down. Dependencies are now followed `DEP_DEPTH` deep.
#[test]
fn a_dependency_chain_as_long_as_the_file_does_not_overflow_the_stack() {
    use crate::pid1::modules::DEP_DEPTH;
    let n = 200_000;
    let dep: String = (0..n).map(|i| format!("m{i}.ko: m{}.ko\n", i + 1)).collect();
    let t = Tables::from_texts(PathBuf::from("/lib/modules/x"), &dep, "", "");
    // A thread of the loader's stack size, as the loader runs it (a test, not a PID-1 thread).
    #[allow(clippy::disallowed_methods)]
    let order = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || t.chain("m0"))
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(order.last().map(String::as_str), Some("m0.ko"));
    assert!(order.len() <= DEP_DEPTH + 1, "{} files", order.len());
}

/// Found by `fuzz_target_modules` (corpus file `dep-name-untrimmed.hex`): a `modules.dep` line
/// with a blank before its path named its module ` b` but kept the trimmed path `b.ko`, so
/// ` b` and `b` shared one file and ` b`'s load order listed it twice.
#[test]
fn one_file_is_one_module_whatever_the_blanks_around_its_path() {
    let t = Tables::from_texts(PathBuf::from("/m"), " b.ko: b.ko\nb.ko: a.ko\na.ko:\n", "", "");
    assert_eq!(t.chain(" b"), None);
    assert_eq!(t.chain("b"), Some(vec!["a.ko".to_string(), "b.ko".to_string()]));
}
