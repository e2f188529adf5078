// SPDX-License-Identifier: Apache-2.0
//! A document's value, built from the events the bounds scan already reads, so that a valid
//! configuration is parsed by libyaml once instead of twice (once to bound it, once more
//! inside serde_yaml).
//!
//! The tree must deserialize exactly as serde_yaml deserializes the text, which depends on
//! how a scalar was written (a plain `123` is a string for a `String` field and a number
//! elsewhere, a quoted one only a string; `~` is not an empty list, an empty value is). Each
//! scalar keeps its text and its resolved kind; a string field reads the text, as serde_yaml
//! does, anything else the kind, as `serde_yaml::Value` does. The builder keeps only what
//! reads the same both ways and gives up on the document at anything else: tags, non-empty nulls, numbers other than
//! plain decimal integers, keys that are not strings, the merge key `<<`, duplicate keys,
//! unknown aliases. A document it gave up on, and one whose tree does not deserialize, are
//! read from the text as before, so every error and position stays serde_yaml's.

use std::collections::HashMap;

use serde::de::value::{BorrowedStrDeserializer, MapDeserializer, SeqDeserializer};
use serde::de::{self, IntoDeserializer, Visitor};

/// A scalar's text: short ones (most keys, addresses, names) inline, without an allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Text {
    Inline(Inline),
    Heap(Box<str>),
}

const INLINE: usize = 22;

/// Up to [`INLINE`] bytes of UTF-8. Its fields are private to this module and only
/// [`Text::new`] fills them, from a `str`: reading them back needs no second check, and the
/// scalars of a large config are read several times each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Inline {
    len: u8,
    bytes: [u8; INLINE],
}

impl Text {
    /// `None` when `bytes` are not UTF-8.
    pub(crate) fn new(bytes: &[u8]) -> Option<Self> {
        let s = std::str::from_utf8(bytes).ok()?;
        let mut inline = [0u8; INLINE];
        match (inline.get_mut(..s.len()), u8::try_from(s.len())) {
            (Some(head), Ok(len)) => {
                head.copy_from_slice(s.as_bytes());
                Some(Text::Inline(Inline { len, bytes: inline }))
            }
            _ => Some(Text::Heap(s.into())),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            Text::Inline(i) => {
                let b = i.bytes.get(..usize::from(i.len)).unwrap_or_default();
                // SAFETY: `Inline` is only built in `Text::new`, from the bytes of a `str`,
                // `len` of them, and never changed after.
                unsafe { std::str::from_utf8_unchecked(b) }
            }
            Text::Heap(s) => s,
        }
    }
}

/// What a scalar resolved to (see [`resolve_plain`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    Str,
}

/// A document's tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    Scalar(Text, Kind),
    Seq(Vec<Node>),
    Map(Vec<(Text, Node)>),
}

/// A collection being built, with its anchor.
enum Open {
    Seq(Vec<Node>, Option<Vec<u8>>),
    /// The mapping so far and the key waiting for its value.
    Map(Vec<(Text, Node)>, Option<Vec<u8>>, Option<Text>),
}

/// Builds one document's tree from its node events; see the module docs for what makes it
/// give up.
#[derive(Default)]
pub(super) struct Builder {
    open: Vec<Open>,
    /// Each anchor's node and its size in nodes.
    anchors: HashMap<Vec<u8>, (Node, usize)>,
    /// Nodes copied for aliases so far (see [`ALIAS_COPIES`]).
    copied: usize,
    root: Option<Node>,
    failed: bool,
}

/// The most nodes aliases may copy into a tree. Beyond it the document is read from its
/// text, as before: serde_yaml expands aliases into the configuration without first holding
/// the expansion, and the tree is there to save time on plain documents, not to add memory
/// on alias-heavy ones (a tree is otherwise no larger than serde_yaml's list of the
/// document's events, which the text reading holds).
const ALIAS_COPIES: usize = 4096;

impl Builder {
    /// A scalar: its text (`None`: not UTF-8), whether it was written plain, whether it has
    /// a tag.
    pub(super) fn scalar(
        &mut self,
        text: Option<Text>,
        plain: bool,
        tagged: bool,
        anchor: Option<Vec<u8>>,
    ) {
        if self.failed {
            return;
        }
        let kind = match &text {
            _ if tagged => None,
            Some(t) if plain => resolve_plain(t.as_str()),
            Some(_) => Some(Kind::Str),
            None => None,
        };
        match (text, kind) {
            (Some(t), Some(k)) => self.node(Node::Scalar(t, k), anchor),
            _ => self.fail(),
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
            Open::Map(Vec::new(), anchor, None)
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
            Some(Open::Seq(items, anchor)) => self.node(Node::Seq(items), anchor),
            // A duplicate key: serde_yaml's to refuse (or not) from the text.
            Some(Open::Map(entries, anchor, None)) if !has_duplicates(&entries) => {
                self.node(Node::Map(entries), anchor)
            }
            _ => self.fail(),
        }
    }

    /// An alias: a copy of its anchor's node (the scan has already counted its size).
    pub(super) fn alias(&mut self, anchor: Option<Vec<u8>>) {
        if self.failed {
            return;
        }
        let found = anchor.and_then(|a| self.anchors.get(&a));
        match found {
            Some((v, size)) if self.copied.saturating_add(*size) <= ALIAS_COPIES => {
                self.copied += size;
                let v = v.clone();
                self.node(v, None);
            }
            _ => self.fail(),
        }
    }

    /// The document's tree, when it was built to the end without giving up.
    pub(super) fn finish(self) -> Option<Node> {
        if self.failed || !self.open.is_empty() {
            return None;
        }
        self.root
    }

    /// Stop building, and free what was built.
    fn fail(&mut self) {
        self.failed = true;
        self.open = Vec::new();
        self.anchors = HashMap::new();
        self.root = None;
    }

    fn node(&mut self, node: Node, anchor: Option<Vec<u8>>) {
        if let Some(a) = anchor {
            let size = count(&node);
            self.anchors.insert(a, (node.clone(), size));
        }
        let ok = match self.open.last_mut() {
            None if self.root.is_none() => {
                self.root = Some(node);
                true
            }
            None => false,
            Some(Open::Seq(items, _)) => {
                items.push(node);
                true
            }
            Some(Open::Map(entries, _, key)) => match key.take() {
                Some(k) => {
                    entries.push((k, node));
                    true
                }
                // serde_yaml reads a key for a field name as text; a key of any other kind
                // means something else in a tree, and `<<` is the merge key.
                None => match node {
                    Node::Scalar(t, Kind::Str) if t.as_str() != "<<" => {
                        *key = Some(t);
                        true
                    }
                    _ => false,
                },
            },
        };
        if !ok {
            self.fail();
        }
    }
}

/// Nodes in `node`, itself included (keys count with their values, as the bounds scan counts).
fn count(node: &Node) -> usize {
    match node {
        Node::Scalar(..) => 1,
        Node::Seq(items) => items.iter().map(count).fold(1, usize::saturating_add),
        Node::Map(entries) => {
            entries.iter().map(|(_, v)| count(v).saturating_add(1)).fold(1, usize::saturating_add)
        }
    }
}

/// Whether two entries share a key: pairwise for small mappings, sorted for large ones.
fn has_duplicates(entries: &[(Text, Node)]) -> bool {
    if entries.len() <= 8 {
        return entries
            .iter()
            .enumerate()
            .any(|(i, (k, _))| entries.iter().skip(i + 1).any(|(o, _)| o.as_str() == k.as_str()));
    }
    let mut keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    keys.windows(2).any(|w| matches!(w, [a, b] if a == b))
}

/// The error of a tree that does not deserialize: never shown (the text is read again).
pub(crate) type TreeError = de::value::Error;

impl<'de> IntoDeserializer<'de, TreeError> for &'de Node {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> de::Deserializer<'de> for &'de Node {
    type Error = TreeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        match self {
            Node::Scalar(_, Kind::Null) => visitor.visit_unit(),
            Node::Scalar(_, Kind::Bool(b)) => visitor.visit_bool(*b),
            Node::Scalar(_, Kind::U64(n)) => visitor.visit_u64(*n),
            Node::Scalar(_, Kind::I64(n)) => visitor.visit_i64(*n),
            Node::Scalar(t, Kind::Str) => visitor.visit_borrowed_str(t.as_str()),
            Node::Seq(items) => visit_seq(items, visitor),
            Node::Map(entries) => visit_map(entries, visitor),
        }
    }

    /// serde_yaml hands a string field any scalar's text as written.
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        match self {
            Node::Scalar(t, _) => visitor.visit_borrowed_str(t.as_str()),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        match self {
            Node::Scalar(_, Kind::Null) => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        match self {
            Node::Scalar(_, Kind::Null) => visitor.visit_unit(),
            _ => Err(de::Error::custom("not null")),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        visitor.visit_newtype_struct(self)
    }

    /// An empty value is an empty list, as serde_yaml reads it.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        match self {
            Node::Seq(items) => visit_seq(items, visitor),
            Node::Scalar(_, Kind::Null) => visit_seq(&[], visitor),
            _ => Err(de::Error::custom("not a sequence")),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        self.deserialize_seq(visitor)
    }

    /// An empty value is an empty mapping, as serde_yaml reads it.
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        match self {
            Node::Map(entries) => visit_map(entries, visitor),
            Node::Scalar(_, Kind::Null) => visit_map(&[], visitor),
            _ => Err(de::Error::custom("not a mapping")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        self.deserialize_map(visitor)
    }

    /// Unit variants by name only (a tagged variant gave the tree up already).
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TreeError> {
        match self {
            Node::Scalar(t, Kind::Str) => {
                visitor.visit_enum(BorrowedStrDeserializer::<TreeError>::new(t.as_str()))
            }
            _ => Err(de::Error::custom("not an enum variant")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TreeError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf
    }
}

fn visit_seq<'de, V: Visitor<'de>>(items: &'de [Node], visitor: V) -> Result<V::Value, TreeError> {
    let mut seq = SeqDeserializer::new(items.iter());
    let value = visitor.visit_seq(&mut seq)?;
    seq.end()?;
    Ok(value)
}

fn visit_map<'de, V: Visitor<'de>>(
    entries: &'de [(Text, Node)],
    visitor: V,
) -> Result<V::Value, TreeError> {
    let mut map = MapDeserializer::new(entries.iter().map(|(k, v)| (k.as_str(), v)));
    let value = visitor.visit_map(&mut map)?;
    map.end()?;
    Ok(value)
}

/// What a plain scalar means, when it reads the same from a tree as from the text: the empty
/// scalar is null, `true`/`false` in serde_yaml's spellings are booleans, plain decimal
/// integers are numbers, and a scalar that could not be a number, boolean or null is a
/// string. `None` for the rest (`~`, `null`, floats, `0x10`, `+1`, `007`, `.inf`...).
fn resolve_plain(s: &str) -> Option<Kind> {
    match s {
        "" => return Some(Kind::Null),
        "~" | "null" | "Null" | "NULL" => return None,
        "true" | "True" | "TRUE" => return Some(Kind::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Kind::Bool(false)),
        _ => {}
    }
    if !maybe_number(s) {
        return Some(Kind::Str);
    }
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && s != "-0";
    if !canonical {
        return None;
    }
    if s.starts_with('-') {
        s.parse::<i64>().ok().map(Kind::I64)
    } else {
        s.parse::<u64>().ok().map(Kind::U64)
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
        assert_eq!(resolve_plain(""), Some(Kind::Null));
        assert_eq!(resolve_plain("true"), Some(Kind::Bool(true)));
        assert_eq!(resolve_plain("FALSE"), Some(Kind::Bool(false)));
        assert_eq!(resolve_plain("1500"), Some(Kind::U64(1500)));
        assert_eq!(resolve_plain("0"), Some(Kind::U64(0)));
        assert_eq!(resolve_plain("-5"), Some(Kind::I64(-5)));
        for s in ["eth0", "10.0.0.1/24", "10.0.0.1", "yes", "2001:db8::1"] {
            assert_eq!(resolve_plain(s), Some(Kind::Str), "{s}");
        }
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
            assert_eq!(resolve_plain(other), None, "{other}");
        }
    }

    #[test]
    fn texts_inline_short_ones() {
        let short = Text::new(b"10.100.255.255/32").unwrap();
        assert!(matches!(short, Text::Inline(..)));
        assert_eq!(short.as_str(), "10.100.255.255/32");
        let long = Text::new(&[b'a'; 40]).unwrap();
        assert!(matches!(long, Text::Heap(_)));
        assert_eq!(long.as_str().len(), 40);
        assert_eq!(Text::new(b"\xff"), None);
    }

    fn text(s: &str) -> Option<Text> {
        Text::new(s.as_bytes())
    }

    fn map(pairs: &[(&str, bool)]) -> Option<Node> {
        let mut b = Builder::default();
        b.start(true, false, None);
        for (s, plain) in pairs {
            b.scalar(text(s), *plain, false, None);
        }
        b.end();
        b.finish()
    }

    #[test]
    fn duplicate_keys_merge_keys_tags_and_key_kinds_give_up() {
        assert!(map(&[("a", true), ("1", true)]).is_some());
        assert_eq!(map(&[("a", true), ("1", true), ("a", true), ("2", true)]), None);
        let many: Vec<String> = (0..20).map(|i| format!("k{}", i % 19)).collect();
        let pairs: Vec<(&str, bool)> =
            many.iter().flat_map(|k| [(k.as_str(), true), ("v", true)]).collect();
        assert_eq!(map(&pairs), None, "duplicate in a large mapping");
        assert_eq!(map(&[("<<", true), ("x", true)]), None, "merge key");
        assert_eq!(map(&[("1", true), ("x", true)]), None, "numeric key");
        assert_eq!(map(&[("true", true), ("x", true)]), None, "boolean key");
        assert!(map(&[("'1'", false), ("x", true)]).is_some(), "quoted key");

        let mut b = Builder::default();
        b.start(true, false, None);
        b.scalar(text("a"), true, false, None);
        b.scalar(text("x"), false, true, None);
        b.end();
        assert_eq!(b.finish(), None, "tag");
    }

    #[test]
    fn an_alias_copies_its_anchor_with_how_it_was_written() {
        let mut b = Builder::default();
        b.start(false, false, None);
        b.scalar(text("123"), false, false, Some(b"n".to_vec()));
        b.alias(Some(b"n".to_vec()));
        b.end();
        let quoted = Node::Scalar(Text::new(b"123").unwrap(), Kind::Str);
        assert_eq!(b.finish(), Some(Node::Seq(vec![quoted.clone(), quoted])));
        let mut b = Builder::default();
        b.start(false, false, None);
        b.alias(Some(b"missing".to_vec()));
        b.end();
        assert_eq!(b.finish(), None, "unknown alias");
    }

    #[test]
    fn aliases_copy_a_bounded_number_of_nodes() {
        let build = |uses: usize| {
            let mut b = Builder::default();
            b.start(false, false, None);
            b.start(false, false, Some(b"l".to_vec()));
            for _ in 0..99 {
                b.scalar(text("x"), true, false, None);
            }
            b.end();
            for _ in 0..uses {
                b.alias(Some(b"l".to_vec()));
            }
            b.end();
            b.finish()
        };
        // 100 nodes a copy: 40 copies fit in the budget, 41 do not.
        assert!(build(ALIAS_COPIES / 100).is_some());
        assert_eq!(build(ALIAS_COPIES / 100 + 1), None);
    }

    #[test]
    fn string_fields_read_a_scalar_as_written_other_types_its_kind() {
        use serde::Deserialize;
        let node = Node::Scalar(Text::new(b"123").unwrap(), Kind::U64(123));
        assert_eq!(String::deserialize(&node).unwrap(), "123");
        assert_eq!(u16::deserialize(&node).unwrap(), 123);
        let quoted = Node::Scalar(Text::new(b"123").unwrap(), Kind::Str);
        assert!(u16::deserialize(&quoted).is_err());
        let empty = Node::Scalar(Text::new(b"").unwrap(), Kind::Null);
        assert_eq!(Vec::<String>::deserialize(&empty).unwrap(), Vec::<String>::new());
        assert_eq!(Option::<String>::deserialize(&empty).unwrap(), None);
        assert_eq!(String::deserialize(&empty).unwrap(), "");
    }
}
