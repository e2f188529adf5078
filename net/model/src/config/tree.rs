// SPDX-License-Identifier: Apache-2.0
//! A document's value, built from the events the bounds scan already reads, so that a valid
//! configuration is parsed by libyaml once instead of twice (once to bound it, once more
//! inside serde_yaml).
//!
//! The tree must deserialize exactly as serde_yaml deserializes the text. A `Value` loses
//! how a scalar was written, and serde_yaml's reading of the text depends on it in places
//! (a plain `123` is a string for a `String` field, a number elsewhere; `~` is not an empty
//! list, an empty value is). So the builder keeps only what reads the same both ways and
//! gives up on the document at anything else: tags, non-empty nulls, numbers other than
//! plain decimal integers, keys that are not strings, the merge key `<<`, duplicate keys,
//! unknown aliases. A document it gave up on, and one whose tree does not deserialize, are
//! read from the text as before, so every error and position stays serde_yaml's.

use std::collections::HashMap;

use serde_yaml::{Mapping, Number, Value};

/// A collection being built, with its anchor.
enum Open {
    Seq(Vec<Value>, Option<Vec<u8>>),
    /// The mapping so far and the key waiting for its value.
    Map(Mapping, Option<Vec<u8>>, Option<Value>),
}

/// Builds one document's tree from its node events; see the module docs for what makes it
/// give up.
#[derive(Default)]
pub(super) struct Builder {
    open: Vec<Open>,
    anchors: HashMap<Vec<u8>, Value>,
    root: Option<Value>,
    failed: bool,
}

impl Builder {
    /// A scalar: its bytes, whether it was written plain, whether it has a tag.
    pub(super) fn scalar(
        &mut self,
        text: Vec<u8>,
        plain: bool,
        tagged: bool,
        anchor: Option<Vec<u8>>,
    ) {
        if self.failed {
            return;
        }
        let value = match String::from_utf8(text) {
            Ok(s) if tagged => {
                drop(s);
                None
            }
            Ok(s) if plain => resolve_plain(s),
            Ok(s) => Some(Value::String(s)),
            Err(_) => None,
        };
        match value {
            Some(v) => self.node(v, anchor),
            None => self.fail(),
        }
    }

    /// A sequence (`map` false) or mapping starts.
    pub(super) fn start(&mut self, map: bool, tagged: bool, anchor: Option<Vec<u8>>) {
        if self.failed {
            return;
        }
        if tagged {
            return self.fail();
        }
        self.open.push(if map {
            Open::Map(Mapping::new(), anchor, None)
        } else {
            Open::Seq(Vec::new(), anchor)
        });
    }

    /// The innermost collection ends.
    pub(super) fn end(&mut self) {
        if self.failed {
            return;
        }
        match self.open.pop() {
            Some(Open::Seq(items, anchor)) => self.node(Value::Sequence(items), anchor),
            Some(Open::Map(map, anchor, None)) => self.node(Value::Mapping(map), anchor),
            _ => self.fail(),
        }
    }

    /// An alias: a copy of its anchor's node (the scan has already counted its size).
    pub(super) fn alias(&mut self, anchor: Option<Vec<u8>>) {
        if self.failed {
            return;
        }
        match anchor.and_then(|a| self.anchors.get(&a).cloned()) {
            Some(v) => self.node(v, None),
            None => self.fail(),
        }
    }

    /// The document's tree, when it was built to the end without giving up.
    pub(super) fn finish(self) -> Option<Value> {
        if self.failed || !self.open.is_empty() {
            return None;
        }
        self.root
    }

    /// Stop building, and free what was built.
    pub(super) fn fail(&mut self) {
        self.failed = true;
        self.open = Vec::new();
        self.anchors = HashMap::new();
        self.root = None;
    }

    fn node(&mut self, value: Value, anchor: Option<Vec<u8>>) {
        if let Some(a) = anchor {
            self.anchors.insert(a, value.clone());
        }
        let ok = match self.open.last_mut() {
            None if self.root.is_none() => {
                self.root = Some(value);
                true
            }
            None => false,
            Some(Open::Seq(items, _)) => {
                items.push(value);
                true
            }
            Some(Open::Map(_, _, key @ None)) => match &value {
                // serde_yaml reads a key for a field name as text; a key of any other kind
                // means something else in a tree, and `<<` is the merge key.
                Value::String(s) if s != "<<" => {
                    *key = Some(value);
                    true
                }
                _ => false,
            },
            Some(Open::Map(map, _, key)) => match key.take() {
                // A duplicate key: serde_yaml's to refuse (or not) from the text.
                Some(k) => map.insert(k, value).is_none(),
                None => false,
            },
        };
        if !ok {
            self.fail();
        }
    }
}

/// What a plain scalar means, when it reads the same from a tree as from the text: the empty
/// scalar is null, `true`/`false` in serde_yaml's spellings are booleans, plain decimal
/// integers are numbers, and a scalar that could not be a number, boolean or null is a
/// string. `None` for the rest (`~`, `null`, floats, `0x10`, `+1`, `007`, `.inf`...).
fn resolve_plain(s: String) -> Option<Value> {
    match s.as_str() {
        "" => return Some(Value::Null),
        "~" | "null" | "Null" | "NULL" => return None,
        "true" | "True" | "TRUE" => return Some(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Value::Bool(false)),
        _ => {}
    }
    if !maybe_number(&s) {
        return Some(Value::String(s));
    }
    let digits = s.strip_prefix('-').unwrap_or(&s);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && s != "-0";
    if !canonical {
        return None;
    }
    if s.starts_with('-') {
        s.parse::<i64>().ok().map(|n| Value::Number(Number::from(n)))
    } else {
        s.parse::<u64>().ok().map(|n| Value::Number(Number::from(n)))
    }
}

/// Whether serde_yaml might read a plain scalar as a number: anything Rust reads as a float
/// (a superset of serde_yaml's floats and decimal integers), the radix prefixes and the
/// YAML spellings of infinity and not-a-number.
fn maybe_number(s: &str) -> bool {
    let bare = s.trim_start_matches(['+', '-']);
    s.parse::<f64>().is_ok()
        || ["0x", "0o", "0b"].iter().any(|p| bare.starts_with(p))
        || [".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"].iter().any(|p| bare.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_scalars_resolve_only_where_the_text_reads_the_same() {
        let r = |s: &str| resolve_plain(s.to_owned());
        assert_eq!(r(""), Some(Value::Null));
        assert_eq!(r("true"), Some(Value::Bool(true)));
        assert_eq!(r("FALSE"), Some(Value::Bool(false)));
        assert_eq!(r("1500"), Some(Value::Number(Number::from(1500u64))));
        assert_eq!(r("0"), Some(Value::Number(Number::from(0u64))));
        assert_eq!(r("-5"), Some(Value::Number(Number::from(-5i64))));
        assert_eq!(r("eth0"), Some(Value::String("eth0".into())));
        assert_eq!(r("10.0.0.1/24"), Some(Value::String("10.0.0.1/24".into())));
        assert_eq!(r("10.0.0.1"), Some(Value::String("10.0.0.1".into())));
        assert_eq!(r("yes"), Some(Value::String("yes".into())));
        for other in [
            "~",
            "null",
            "NULL",
            "1.5",
            "1e3",
            "0x10",
            "0o7",
            "0b1",
            "+1",
            "-0",
            "007",
            ".inf",
            "-.inf",
            ".nan",
            "inf",
            "NaN",
            "18446744073709551616",
            "-0x1",
        ] {
            assert_eq!(r(other), None, "{other}");
        }
    }

    #[test]
    fn duplicate_keys_merge_keys_tags_and_key_kinds_give_up() {
        let mut b = Builder::default();
        b.start(true, false, None);
        b.scalar(b"a".to_vec(), true, false, None);
        b.scalar(b"1".to_vec(), true, false, None);
        b.scalar(b"a".to_vec(), true, false, None);
        b.scalar(b"2".to_vec(), true, false, None);
        b.end();
        assert_eq!(b.finish(), None, "duplicate key");

        let mut b = Builder::default();
        b.start(true, false, None);
        b.scalar(b"<<".to_vec(), true, false, None);
        b.end();
        assert_eq!(b.finish(), None, "merge key");

        let mut b = Builder::default();
        b.start(true, false, None);
        b.scalar(b"1".to_vec(), true, false, None);
        b.scalar(b"x".to_vec(), true, false, None);
        b.end();
        assert_eq!(b.finish(), None, "numeric key");

        let mut b = Builder::default();
        b.start(true, false, None);
        b.scalar(b"a".to_vec(), true, false, None);
        b.scalar(b"x".to_vec(), false, true, None);
        b.end();
        assert_eq!(b.finish(), None, "tag");

        let mut b = Builder::default();
        b.start(false, false, None);
        b.scalar(b"123".to_vec(), false, false, Some(b"n".to_vec()));
        b.alias(Some(b"n".to_vec()));
        b.end();
        let quoted = Value::String("123".into());
        assert_eq!(b.finish(), Some(Value::Sequence(vec![quoted.clone(), quoted])));
    }
}
