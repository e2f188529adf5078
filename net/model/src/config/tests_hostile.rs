// SPDX-License-Identifier: Apache-2.0
//! Hostile documents: a secret file named as the config, alias bombs, a byte-order mark,
//! content that would flood or forge log lines.

use super::bounds::{node_limit, ALIAS_ALLOWANCE, MAX_NODES};
use super::error::{excerpt_quotes, EXCERPT_CHARS};
use super::*;

const MINIMAL: &str = "version: v1alpha1\nmachine:\n  network:\n    hostname: node-1\n";

fn err(yaml: &str) -> ConfigError {
    match parse(yaml) {
        Ok(cfg) => panic!("expected an error, parsed {cfg:?}"),
        Err(e) => e,
    }
}

/// One device with `addresses: &A [n addresses]`, then `devices - 1` devices reusing `*A`.
pub(crate) fn alias_bomb(n: usize, devices: usize) -> String {
    let list: Vec<String> = (0..n).map(|i| format!("10.{}.{}.1/32", i / 256, i % 256)).collect();
    let mut s = String::from("version: v1alpha1\nmachine:\n  network:\n    interfaces:\n");
    s += &format!("      - interface: eth0\n        addresses: &A [{}]\n", list.join(", "));
    for i in 1..devices {
        s += &format!("      - interface: eth{i}\n        addresses: *A\n");
    }
    s
}

#[test]
fn a_byte_order_mark_is_accepted() {
    let with_bom = format!("\u{feff}{MINIMAL}");
    assert_eq!(parse(&with_bom).unwrap(), parse(MINIMAL).unwrap());
}

#[test]
fn a_shadow_file_is_refused_without_quoting_it() {
    // `root:...:7:::` ends in `:` and a newline, so YAML reads the line as a mapping key.
    let shadow = "root:$6$Zq8Pd0Xb$Kf3vS8x2Lw9mNpQrTuVyZa1b2c3d4e5f6g7h8i9j0kLmNoPqRsTuVwXyZ:19000:0:99999:7:::\n\
                  daemon:*:19000:0:99999:7:::\n";
    let e = err(shadow);
    assert_eq!(e.path, "");
    assert_eq!(e.position, Some(Position { line: 1, column: 1 }));
    assert!(e.message.starts_with("unknown key (not a name, 92 characters), expected"), "{e}");
    assert!(!e.to_string().contains("root"), "{e}");
    // The same lines without the trailing colons are one string: not a mapping.
    let e = err("root:$6$Zq8Pd0Xb$Kf3vS8x2Lw9mNp\ndaemon:*:19000\n");
    assert!(e.message.starts_with("the document is a scalar, not a YAML mapping"), "{e}");
    assert!(!e.to_string().contains("$6$"), "{e}");
}

#[test]
fn documents_that_are_not_mappings_are_refused() {
    for (text, kind) in [
        ("- a\n- b\n", "a sequence"),
        ("42\n", "a scalar"),
        ("true\n", "a scalar"),
        ("!secret hunter2\n", "a scalar"),
        ("~\n", "a scalar"),
        ("&a [1]\n", "a sequence"),
    ] {
        let e = err(text);
        assert!(e.message.starts_with(&format!("the document is {kind}, ")), "{text:?}: {e}");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}

#[test]
fn an_unknown_key_is_named_only_when_it_is_a_name() {
    let long = "k".repeat(EXCERPT_CHARS + 1);
    let e = err(&format!("version: v1alpha1\n{long}: 1\n"));
    assert_eq!(e.path, "");
    assert!(!e.to_string().contains(&long[..EXCERPT_CHARS]), "{e}");
    assert!(e.to_string().contains("(line 2, column 1)"), "{e}");
    let e = err("version: v1alpha1\nmachine:\n  bogus: 1\n");
    assert_eq!(e.path, "machine.bogus");
    assert!(e.message.starts_with("unknown key \"bogus\""), "{e}");
}

#[test]
fn control_characters_never_reach_the_message() {
    let e = err("version: v1alpha1\n\"\\e[31mred\\nforged line\": 1\n");
    let shown = e.to_string();
    assert!(!shown.chars().any(char::is_control), "{shown:?}");
    let e = err("version: v1alpha1\nmachine:\n  type: \"a\\u0007b\\rc\"\n");
    assert!(!e.to_string().chars().any(char::is_control), "{e}");
}

#[test]
fn long_values_are_cut() {
    let long = "x".repeat(10_000);
    let e = err(&format!("version: v1alpha1\nmachine:\n  type: {long}\n"));
    assert_eq!(e.path, "machine.type");
    assert!(e.to_string().len() < 600, "{} bytes", e.to_string().len());
}

#[test]
fn excerpts() {
    assert_eq!(excerpt_quotes("invalid \"abc\""), "invalid \"abc\"");
    let long = format!("bad {:?} here", "y".repeat(100));
    assert_eq!(excerpt_quotes(&long), format!("bad \"{}…\" here", "y".repeat(EXCERPT_CHARS)));
    assert_eq!(excerpt_quotes("a\u{1b}b"), "a\\u{1b}b");
    // Escapes inside a Debug-quoted string count once and are kept whole.
    assert_eq!(excerpt_quotes(r#"k "a\"b" z"#), r#"k "a\"b" z"#);
    assert_eq!(excerpt_quotes("`unterminated"), "`unterminated");
}

#[test]
fn an_alias_bomb_is_refused_by_the_scan() {
    let bomb = alias_bomb(1000, 1000);
    assert!(bomb.len() < 80_000);
    let e = err(&bomb);
    assert!(e.message.starts_with("more than"), "{e}");
    assert!(e.message.contains("alias expansion"), "{e}");
}

#[test]
fn anchors_used_as_intended_are_accepted() {
    // 100 interfaces sharing 16 addresses: 1,600 expanded values, well inside the allowance.
    let cfg = parse(&alias_bomb(16, 100)).unwrap();
    assert_eq!(cfg.machine.network.interfaces.len(), 100);
    assert_eq!(cfg.machine.network.interfaces[99].addresses.len(), 16);
}

#[test]
fn the_limit_is_linear_in_the_text() {
    assert_eq!(node_limit(0), ALIAS_ALLOWANCE);
    assert_eq!(node_limit(1000), 1000 + ALIAS_ALLOWANCE);
    assert_eq!(node_limit(usize::MAX), MAX_NODES);
}

#[test]
fn a_long_flat_list_is_refused_before_it_is_loaded() {
    // 600,000 scalars in 1.2 MB: without aliases, but more nodes than any config needs.
    let text = format!("version: v1alpha1\nx: [{}0]\n", "0,".repeat(600_000));
    let e = err(&text);
    assert!(e.message.starts_with(&format!("more than {MAX_NODES} YAML nodes")), "{e}");
}

#[test]
fn depth_and_documents_are_bounded() {
    let deep = format!("version: v1alpha1\nx: {}{}\n", "[".repeat(200), "]".repeat(200));
    assert!(err(&deep).message.starts_with("nested deeper than 128 levels"));
    let two = "version: v1alpha1\n---\nversion: v1alpha1\n";
    let e = err(two);
    assert!(e.message.starts_with("a second v1alpha1 machine configuration"), "{e}");
    assert_eq!(e.line(), Some(2));
    let many = "---\napiVersion: v1alpha1\nkind: HostnameConfig\nauto: off\n"
        .repeat(super::bounds::MAX_DOCUMENTS + 1);
    let e = err(&many);
    assert!(e.message.starts_with("more than 65536 YAML documents"), "{e}");
    // A syntax error is still serde_yaml's, with its position.
    let e = err("version: v1alpha1\nmachine: [\n");
    assert!(e.position.is_some(), "{e}");
}

#[test]
fn nested_aliases_are_counted_as_expanded() {
    // The classic "billion laughs": each level doubles ten times over.
    let mut s = String::from("version: v1alpha1\nl0: &l0 [a, a, a, a, a, a, a, a, a, a]\n");
    for i in 1..10 {
        let prev = format!("*l{}", i - 1);
        s += &format!("l{i}: &l{i} [{}]\n", vec![prev; 10].join(", "));
    }
    let e = err(&s);
    assert!(e.message.contains("alias expansion"), "{e}");
}
