// SPDX-License-Identifier: Apache-2.0
//! Where several YAML paths are, in one pass over the text's events: what
//! [`YamlPath::locate`] finds for one path (the key of a map path, the node of a list index),
//! for a round's worth of dropped entries at the cost of one parse instead of one each.
//!
//! Paths through an alias are not followed (the events hold the alias, not its content):
//! those are left to [`YamlPath::locate`].

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::bounds::Parser;
use super::error::Position;
use super::locate::{Seg, YamlPath};

/// One open collection and where the walk is inside it.
enum Frame {
    /// A map: the next node is a key when `key` is `None`; else the value of `key`. A key
    /// that is not a short scalar is kept as `Some(None)`: its value is walked, never
    /// matched.
    Map { key: Option<Option<String>> },
    /// A list: the index of the next element.
    Seq { next: usize },
}

/// Where each of `paths` is in the first document of `yaml`, `None` where it is not found.
pub(crate) fn locate_all(yaml: &str, paths: &[YamlPath]) -> Vec<Option<Position>> {
    let mut wanted: BTreeMap<Vec<Seg>, Option<Position>> =
        paths.iter().map(|p| (p.segs().to_vec(), None)).collect();
    if let Some(mut parser) = Parser::new(yaml.as_bytes()) {
        walk(&mut parser, &mut wanted);
    }
    paths.iter().map(|p| wanted.get(p.segs()).copied().flatten()).collect()
}

fn walk(parser: &mut Parser<'_>, wanted: &mut BTreeMap<Vec<Seg>, Option<Position>>) {
    let mut stack: Vec<Frame> = Vec::new();
    // The path of the node being read: one step per open collection, plus the current key
    // or index while a node of it is read.
    let mut cur: Vec<Seg> = Vec::new();
    let mut found = |cur: &[Seg], at: Position| {
        if let Some(slot) = wanted.get_mut(cur) {
            slot.get_or_insert(at);
        }
    };
    loop {
        // Keys are the only scalars the walk reads.
        let want_scalar = matches!(stack.last(), Some(Frame::Map { key: None }));
        let Some(event) = parser.next(want_scalar) else { return };
        let kind = event.kind;
        let (starts, ends, leaf) = match kind {
            unsafe_libyaml::YAML_SCALAR_EVENT | unsafe_libyaml::YAML_ALIAS_EVENT => {
                (false, false, true)
            }
            unsafe_libyaml::YAML_SEQUENCE_START_EVENT
            | unsafe_libyaml::YAML_MAPPING_START_EVENT => (true, false, false),
            unsafe_libyaml::YAML_SEQUENCE_END_EVENT | unsafe_libyaml::YAML_MAPPING_END_EVENT => {
                (false, true, false)
            }
            unsafe_libyaml::YAML_DOCUMENT_END_EVENT | unsafe_libyaml::YAML_STREAM_END_EVENT => {
                return
            }
            _ => continue,
        };
        if ends {
            stack.pop();
            // The collection was the value of a key or an element: that step is done.
            finish(&mut stack, &mut cur);
            continue;
        }
        // A node: a map key, a map value, a list element, or the root.
        match stack.last_mut() {
            Some(Frame::Map { key: key @ None }) => {
                let name = event
                    .scalar
                    .filter(|_| kind == unsafe_libyaml::YAML_SCALAR_EVENT)
                    .and_then(|s| String::from_utf8(s).ok());
                if let Some(name) = &name {
                    cur.push(Seg::Key(Cow::Owned(name.clone())));
                    found(&cur, event.position);
                    cur.pop();
                }
                *key = Some(name);
                if starts && !skip(parser) {
                    return;
                }
                continue;
            }
            Some(Frame::Map { key: Some(name) }) => {
                cur.push(Seg::Key(Cow::Owned(name.clone().unwrap_or_default())));
            }
            Some(Frame::Seq { next }) => {
                cur.push(Seg::Index(*next));
                found(&cur, event.position);
            }
            None => {}
        }
        if leaf {
            finish(&mut stack, &mut cur);
        } else if starts {
            stack.push(match kind {
                unsafe_libyaml::YAML_SEQUENCE_START_EVENT => Frame::Seq { next: 0 },
                _ => Frame::Map { key: None },
            });
        }
    }
}

/// Read past a collection used as a map key (never a path step); false at the end of the
/// events.
fn skip(parser: &mut Parser<'_>) -> bool {
    let mut depth = 1usize;
    while depth > 0 {
        let Some(event) = parser.next(false) else { return false };
        match event.kind {
            unsafe_libyaml::YAML_SEQUENCE_START_EVENT
            | unsafe_libyaml::YAML_MAPPING_START_EVENT => depth += 1,
            unsafe_libyaml::YAML_SEQUENCE_END_EVENT | unsafe_libyaml::YAML_MAPPING_END_EVENT => {
                depth -= 1
            }
            unsafe_libyaml::YAML_STREAM_END_EVENT => return false,
            _ => {}
        }
    }
    true
}

/// A value of the innermost collection is read: step past it.
fn finish(stack: &mut [Frame], cur: &mut Vec<Seg>) {
    match stack.last_mut() {
        Some(Frame::Map { key }) => {
            *key = None;
            cur.pop();
        }
        Some(Frame::Seq { next }) => {
            *next += 1;
            cur.pop();
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path of a document: what one pass finds is what the probe finds.
    #[test]
    fn one_pass_finds_what_the_probe_finds() {
        let yaml = "# a comment\nversion: v1alpha1\nmachine:\n  network:\n    hostname: node-1\n    interfaces:\n      - interface: eth0\n        addresses: [10.0.0.1/24, 10.0.0.2/24]\n        routes:\n          - network: 10.50.0.0/16\n            gateway: 10.0.0.1\n          - {network: 10.60.0.0/16, gateway: \"10.0.0.1\"}\n      - deviceSelector:\n          hardwareAddr: 'aa:*'\n        mtu: 9000\n    nameservers:\n    - 1.1.1.1\n    - 9.9.9.9\n  time:\n    servers: []\n";
        let k = |s: &'static str| Seg::Key(Cow::Borrowed(s));
        let i = Seg::Index;
        let net = vec![k("machine"), k("network")];
        let dev = |n: usize| {
            let mut p = net.clone();
            p.extend([k("interfaces"), i(n)]);
            p
        };
        let with = |base: Vec<Seg>, more: &[Seg]| {
            let mut p = base;
            p.extend(more.iter().cloned());
            YamlPath::from_segs(p)
        };
        let paths = vec![
            YamlPath::keys("version"),
            YamlPath::keys("machine"),
            YamlPath::keys("machine.network.hostname"),
            with(dev(0), &[]),
            with(dev(0), &[k("interface")]),
            with(dev(0), &[k("addresses"), i(1)]),
            with(dev(0), &[k("routes"), i(0), k("gateway")]),
            with(dev(0), &[k("routes"), i(1)]),
            with(dev(0), &[k("routes"), i(1), k("gateway")]),
            with(dev(1), &[k("deviceSelector"), k("hardwareAddr")]),
            with(dev(1), &[k("mtu")]),
            with(dev(2), &[]),
            with(net.clone(), &[k("nameservers"), i(1)]),
            YamlPath::keys("machine.time.servers"),
            YamlPath::keys("machine.kubelet"),
        ];
        let all = locate_all(yaml, &paths);
        for (path, found) in paths.iter().zip(&all) {
            assert_eq!(*found, path.locate(yaml), "{path}");
        }
        assert!(all.iter().filter(|p| p.is_some()).count() >= 12, "{all:?}");
    }
}
