// SPDX-License-Identifier: Apache-2.0
//! Checks that run before the configuration is deserialized: the document must be a mapping,
//! and aliases must not expand it beyond a stated size.
//!
//! serde_yaml expands every alias while deserializing; its own guard counts alias *uses*
//! (100 per event), not what they expand to, so one anchored list of 1,000 addresses reused by
//! 999 devices (53 KB of text) becomes a million values, and each re-parse (errors are located
//! by parsing again) pays that again. A first pass walks the document as serde would, counting
//! nodes without keeping any, and stops at the limit: time and memory stay linear in the text.

use std::fmt;

use serde::de::{self, DeserializeSeed, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};

use super::error::{ConfigError, Position};

/// Nodes that aliases may add beyond one per byte of text: generous for anchors reused as
/// intended (a shared list of nameservers, a route set), far below what a bomb needs.
pub(crate) const ALIAS_ALLOWANCE: usize = 65_536;

/// The most nodes, after alias expansion, a text of `len` bytes may have. Without aliases a
/// YAML node takes at least one byte, so only expansion can reach this.
pub(crate) fn node_limit(len: usize) -> usize {
    len.saturating_add(ALIAS_ALLOWANCE)
}

/// The marker of the walker's own errors; the outcome itself is kept in [`Walk`].
const STOP: &str = "keelson-bounds-stop";

/// What ended the walk early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    TooManyNodes,
    NotMapping(&'static str),
}

/// Walk `yaml` once. Errors: not a mapping (nothing of it is quoted), more nodes than
/// [`node_limit`] after alias expansion, or a YAML syntax error.
pub(crate) fn check(yaml: &str) -> Result<(), ConfigError> {
    let mut walk = Walk { nodes: 0, limit: node_limit(yaml.len()), stop: None };
    let result = Root(&mut walk).deserialize(serde_yaml::Deserializer::from_str(yaml));
    let Err(err) = result else { return Ok(()) };
    let position = err.location().map(Position::from);
    match walk.stop {
        Some(Stop::TooManyNodes) => Err(ConfigError::new(
            "",
            position,
            format!(
                "more than {} YAML nodes after alias expansion (one per byte of text plus \
                 {ALIAS_ALLOWANCE}); refusing to expand further",
                walk.limit
            ),
        )),
        Some(Stop::NotMapping(kind)) => Err(ConfigError::new(
            "",
            position,
            format!("the document is {kind}, not a YAML mapping (expected `version: v1alpha1` and `machine:`)"),
        )),
        None => Err(ConfigError::from_yaml(&err)),
    }
}

struct Walk {
    nodes: usize,
    limit: usize,
    stop: Option<Stop>,
}

impl Walk {
    fn count<E: de::Error>(&mut self) -> Result<(), E> {
        self.nodes += 1;
        if self.nodes > self.limit {
            self.stop = Some(Stop::TooManyNodes);
            return Err(E::custom(STOP));
        }
        Ok(())
    }
}

/// The document root: a mapping, or [`Stop::NotMapping`] naming what it is instead.
struct Root<'w>(&'w mut Walk);

impl<'de> DeserializeSeed<'de> for Root<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(RootVisitor(self.0))
    }
}

struct RootVisitor<'w>(&'w mut Walk);

impl RootVisitor<'_> {
    fn not<E: de::Error>(self, kind: &'static str) -> Result<(), E> {
        self.0.stop = Some(Stop::NotMapping(kind));
        Err(E::custom(STOP))
    }
}

impl<'de> Visitor<'de> for RootVisitor<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        Node(self.0).visit_map(map)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.not("a sequence")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.not("a string")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.not("a boolean")
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.not("a number")
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.not("a number")
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.not("a number")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.not("empty")
    }
    fn visit_enum<A: EnumAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.not("a tagged value")
    }
}

/// Any node below the root: counted, then its children walked.
struct Node<'w>(&'w mut Walk);

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML node")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.count()?;
        while map.next_key_seed(Node(self.0))?.is_some() {
            map.next_value_seed(Node(self.0))?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.count()?;
        while seq.next_element_seed(Node(self.0))?.is_some() {}
        Ok(())
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged node (`!tag value`): the tag, then the value.
        let ((), variant) = data.variant_seed(Node(self.0))?;
        variant.newtype_variant_seed(Node(self.0))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.0.count()
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.0.count()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.0.count()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.0.count()
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        self.0.count()
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        self.0.count()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.0.count()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.count()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.0.count()
    }
}
