// SPDX-License-Identifier: Apache-2.0
//! The one-pass reading (the v1alpha1 document deserialized from the tree the bounds scan
//! built) against the reading from the text: the same configuration, errors and warnings,
//! for the repository's example configs and for generated documents full of the YAML that
//! reads differently from a tree (quoted numbers, nulls, tags, anchors, duplicate and merge
//! keys).

use super::bounds;
use super::stream::check_with;
use super::tests_hostile::alias_bomb;
use super::*;
use serde::Deserialize;

/// Both readings of `yaml`, which must agree in everything.
fn same(yaml: &str) {
    let fast = check_with(yaml, true);
    let slow = check_with(yaml, false);
    assert_eq!(fast.config, slow.config, "config of:\n{yaml}");
    assert_eq!(fast.errors, slow.errors, "errors of:\n{yaml}");
    assert_eq!(fast.kept, slow.kept, "kept of:\n{yaml}");
}

/// The fenced YAML blocks of a Markdown page.
fn yaml_blocks(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for line in md.lines() {
        match (&mut block, line.trim_start()) {
            (None, l) if l.starts_with("```yaml") => block = Some(String::new()),
            (Some(_), l) if l.starts_with("```") => out.extend(block.take()),
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    out
}

pub(super) fn examples() -> Vec<String> {
    let pages = [
        include_str!("../../../../docs/machine-config.md"),
        include_str!("../../../../docs/kubespan.md"),
        include_str!("../../../../docs/metrics.md"),
        include_str!("../../../../docs/tenant-networks.md"),
        include_str!("../../../../docs/lifecycle.md"),
        include_str!("../../../../docs/discovery-server.md"),
        include_str!("../../../../docs/config.md"),
        include_str!("../../../../docs/config-documents.md"),
    ];
    let mut all: Vec<String> = pages.iter().flat_map(|p| yaml_blocks(p)).collect();
    all.push(include_str!("../../../../initramfs/config.yaml").to_owned());
    for hostile in [
        include_str!("../../../../init/tests/data/hostile/bom.yaml"),
        include_str!("../../../../init/tests/data/hostile/control-chars.yaml"),
        include_str!("../../../../init/tests/data/hostile/long-value.yaml"),
        include_str!("../../../../init/tests/data/hostile/sequence.yaml"),
        include_str!("../../../../init/tests/data/hostile/two-documents.yaml"),
    ] {
        all.push(hostile.to_owned());
    }
    all
}

#[test]
fn the_example_configs_read_the_same_both_ways() {
    let all = examples();
    assert!(all.len() >= 8, "found {} examples", all.len());
    for yaml in &all {
        same(yaml);
    }
}

#[test]
fn a_plain_large_config_is_read_from_the_tree() {
    // Without this the comparisons above would pass with the tree never used.
    let mut yaml = String::from(
        "version: v1alpha1\nmachine:\n  network:\n    hostname: node-1\n    interfaces:\n      \
         - interface: eth0\n        mtu: 1500\n        dhcp: false\n        addresses:\n",
    );
    for i in 0..200 {
        yaml += &format!("          - 10.1.{}.{}/32\n", i / 250, i % 250 + 1);
    }
    yaml += "        routes:\n";
    for i in 0..200 {
        yaml += &format!("          - {{network: 10.100.0.{i}/32, gateway: 10.0.0.1}}\n");
    }
    let spans = bounds::check(&yaml).unwrap();
    let tree = spans.into_iter().next().and_then(|s| s.tree).expect("a tree for the document");
    let cfg = MachineConfig::deserialize(&tree).unwrap();
    assert_eq!(cfg, parse(&yaml).unwrap());
    same(&yaml);
    // A typed document's tree is not built: it is read from its text.
    let typed = "apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: a\n";
    assert!(bounds::check(typed).unwrap().iter().all(|s| s.tree.is_none()));
}

#[test]
fn aliases_and_anchors_read_the_same_both_ways() {
    same(&alias_bomb(20, 5));
    same(
        "version: v1alpha1\nmachine:\n  network:\n    nameservers: &n ['1.1.1.1']\n    \
          hostname: &h node\n    extraHostEntries:\n      - ip: 10.0.0.9\n        aliases: [*h]\n",
    );
    same("version: v1alpha1\nmachine:\n  network:\n    hostname: *missing\n");
}

/// A small deterministic generator (xorshift): no dependency, and a failure names its input.
/// When `valid`, it mostly picks the first choice (each list starts with a valid one), so
/// that valid documents, which the tree reads, are compared as well as broken ones.
pub(super) struct Rng(pub(super) u64, pub(super) bool);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        if self.1 && !self.next().is_multiple_of(10) {
            return from[0];
        }
        let i = usize::try_from(self.next() % from.len() as u64).unwrap();
        from[i]
    }
}

/// Scalars that read differently depending on how they were written or what asks for them.
const SCALARS: [&str; 26] = [
    "node-1",
    "'123'",
    "123",
    "\"123\"",
    "~",
    "null",
    "",
    "!!str 5",
    "true",
    "'true'",
    "0x10",
    "1e3",
    "1.5",
    "-1",
    "007",
    ".inf",
    "yes",
    "\"a b\"",
    "!!binary aGk=",
    "10.0.0.1/24",
    "'10.0.0.1/24'",
    "1500",
    "2001:db8::1/64",
    "|\n          literal",
    "0",
    "!custom x",
];

fn scalar(r: &mut Rng) -> &'static str {
    r.pick(&SCALARS)
}

pub(super) fn generated(r: &mut Rng) -> String {
    let mut y = String::new();
    y += r.pick(&["", "---\n", "# comment\n", "%YAML 1.2\n---\n"]);
    y += r.pick(&["version: v1alpha1\n", "version: v1alpha1\n", "version: 1\n", ""]);
    y += "machine:\n";
    y += r.pick(&["  type: worker\n", "  type: 5\n", "", "  type: ~\n"]);
    y += "  network:\n";
    y += &format!("    hostname: {}\n", scalar(r));
    y += r.pick(&["", "    hostname: dup\n", "    <<: {hostname: m}\n", "    unknown: 1\n"]);
    y += &format!("    nameservers: {}\n", r.pick(&["[1.1.1.1]", "['8.8.8.8', 9]", "~", "", "[]"]));
    y += "    interfaces:\n";
    for i in 0..3 {
        let name = ["eth0", "eth1", "'eth2'"][i];
        y += &format!("      - interface: {}\n", r.pick(&[name, "eth1", "5", "~", "*A"]));
        y += &format!("        mtu: {}\n", r.pick(&["1500", "'1500'", "0x5dc", "1e3", "~", ""]));
        y += &format!("        dhcp: {}\n", r.pick(&["true", "false", "'true'", "yes", "~", ""]));
        let anchor = if i == 0 { "&A " } else { "" };
        let list = r.pick(&["[10.0.0.2/24]", "['10.0.0.3/24', 10.0.0.4/24]", "[bad]", "~"]);
        let addresses = if i > 0 && r.pick(&["a", "b"]) == "a" { "*A" } else { list };
        y += &format!("        addresses: {anchor}{addresses}\n");
        y += "        routes:\n";
        y += &format!(
            "          - {{network: {}, gateway: {}, metric: {}}}\n",
            r.pick(&["'10.1.0.0/16'", "0.0.0.0/0", "x", "~"]),
            r.pick(&["10.0.0.1", "\"10.0.0.1\"", "", "!!str 10.0.0.1"]),
            r.pick(&["10", "'10'", "-1", "1.0", "~", "0o17"]),
        );
    }
    y += r.pick(&[
        "",
        "---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: typed\n",
        "---\n",
        "cluster:\n  id: 5\n",
    ]);
    y
}

#[test]
fn generated_documents_read_the_same_both_ways() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15, false);
    let (mut loaded, mut treed) = (0, 0);
    for n in 0..600 {
        r.1 = n % 2 == 0;
        let yaml = generated(&mut r);
        same(&yaml);
        loaded += usize::from(check_with(&yaml, true).errors.is_empty());
        let tree = bounds::check(&yaml).ok().and_then(|s| s.into_iter().find_map(|s| s.tree));
        treed += usize::from(tree.is_some_and(|t| MachineConfig::deserialize(&t).is_ok()));
    }
    eprintln!("{loaded} valid, {treed} read from the tree");
    assert!(treed > 0, "no generated document was read from its tree");
    // The set must hold valid documents too, or it would only compare error paths.
    assert!(loaded > 0, "no generated document was valid");
}

#[test]
fn line_breaks_the_text_does_not_count_read_from_the_text() {
    // Found by the config fuzz target: a lone `\r` is a line break to libyaml and not to
    // the cut into documents, so the first document's text held the second's `---`.
    same("version: v1alpha1\r---\nve: v1alphaversion: v1alqha1\n");
    same("version: v1alpha1\r\nmachine:\r\n  network:\r\n    hostname: a\r\n");
    same("version: v1alpha1\u{2028}---\nversion: v1alpha1\n");
    same("version: v1alpha1\u{85}machine: {}\n");
}

#[test]
fn a_syntax_error_after_a_whole_document_reads_it_from_the_text() {
    // Found by the config fuzz target: the document ends (`...`), then libyaml refuses what
    // follows; the document's text runs over the error, which serde_yaml reports.
    same("version: v1alpha1\n...\nversion: v1alpha1\n");
    same("version: v1alpha1\n---\nmachine: [\n");
}

#[test]
fn scalars_read_as_written_where_the_field_asks_for_text() {
    // A plain number in a text field, a flag value of each kind, quoted and plain booleans,
    // the empty value, a duplicate flag: each as serde_yaml reads the text.
    let kubelet = |args: &str| {
        format!(
            "version: v1alpha1\nmachine:\n  kubelet:\n    command: [/bin/kubelet, 2, true, '3']\n    \
             extraArgs: {args}\n  network:\n    hostname: node-1\n"
        )
    };
    for args in [
        "{v: 2, a: true, b: '2', c: -1, d: x, e: [1, '1', no], f: ''}",
        "{v: 2, v: 3}",
        "{v: ~}",
        "{v: 1.5}",
        "{v: 0x10}",
        "",
        "{}",
        "{v: }",
    ] {
        same(&kubelet(args));
    }
    let cfg = parse(&kubelet("{v: 2, a: true, b: '2'}")).unwrap();
    let tree = bounds::check(&kubelet("{v: 2, a: true, b: '2'}")).unwrap();
    assert!(tree.iter().all(|s| s.tree.is_some()), "read from the tree");
    assert_eq!(cfg.machine.kubelet.command, ["/bin/kubelet", "2", "true", "3"]);
}
