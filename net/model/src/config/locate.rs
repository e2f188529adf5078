// SPDX-License-Identifier: Apache-2.0
//! Find where a YAML path sits in the text.
//!
//! serde_yaml 0.9 keeps no positions on values; only its errors carry one. To locate a path
//! we parse the text again with a probe that walks the path and fails *inside* the
//! deserializer on the target (the key for a map path, the element for a list index); the
//! error's `location()` is then the target's position. Checks that need context (run after
//! parsing) and the known-Talos-key warnings use this.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::error::Position;

/// One step of a YAML path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Seg {
    /// A map key (fixed in the code, or read from an error's path).
    Key(Cow<'static, str>),
    /// A list index.
    Index(usize),
}

/// A YAML path such as `machine.network.interfaces[1].vlans[0].vlanId`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct YamlPath(Vec<Seg>);

impl YamlPath {
    /// Parse `a.b.c` (keys only); used for the fixed known-key list.
    pub(crate) fn keys(dotted: &'static str) -> Self {
        Self(dotted.split('.').map(|k| Seg::Key(Cow::Borrowed(k))).collect())
    }

    /// This path plus a key.
    pub(crate) fn key(&self, key: &'static str) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Key(Cow::Borrowed(key)));
        p
    }

    /// This path plus a list index.
    pub(crate) fn index(&self, i: usize) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }

    /// A path as serde_yaml's errors write it (`a.b[3].c`; empty or `.` for the root).
    /// Keys holding `.` or `[` cannot be told apart from steps; such a path is then simply
    /// not found where it is looked up.
    pub(crate) fn parse(text: &str) -> Self {
        let mut segs = Vec::new();
        let mut key = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '.' => {
                    if !key.is_empty() {
                        segs.push(Seg::Key(Cow::Owned(std::mem::take(&mut key))));
                    }
                }
                '[' => {
                    if !key.is_empty() {
                        segs.push(Seg::Key(Cow::Owned(std::mem::take(&mut key))));
                    }
                    let mut digits = String::new();
                    for d in chars.by_ref() {
                        if d == ']' {
                            break;
                        }
                        digits.push(d);
                    }
                    match digits.parse() {
                        Ok(n) => segs.push(Seg::Index(n)),
                        Err(_) => segs.push(Seg::Key(Cow::Owned(format!("[{digits}]")))),
                    }
                }
                c => key.push(c),
            }
        }
        if !key.is_empty() {
            segs.push(Seg::Key(Cow::Owned(key)));
        }
        Self(segs)
    }

    /// A path made of these steps.
    pub(crate) fn from_segs(segs: Vec<Seg>) -> Self {
        Self(segs)
    }

    /// The steps of the path.
    pub(crate) fn segs(&self) -> &[Seg] {
        &self.0
    }

    /// The path of the document itself.
    pub(crate) fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The path one step up (the root stays the root).
    pub(crate) fn parent(&self) -> Self {
        let mut p = self.clone();
        p.0.pop();
        p
    }

    /// `self` is `other` or lies inside it.
    pub(crate) fn within(&self, other: &Self) -> bool {
        self.0.starts_with(&other.0)
    }

    /// Where the path's last step is in `yaml`; `None` when the path is not present.
    pub(crate) fn locate(&self, yaml: &str) -> Option<Position> {
        let err =
            Probe { rest: &self.0 }.deserialize(serde_yaml::Deserializer::from_str(yaml)).err()?;
        // Any other error (there should be none: the text already parsed) is not our probe.
        if err.to_string().contains(FOUND) {
            err.location().map(Position::from)
        } else {
            None
        }
    }
}

impl fmt::Display for YamlPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if i == 0 => f.write_str(k)?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// The marker message of the probe's deliberate error.
const FOUND: &str = "keelson-locate-probe-found";

/// Walks `rest`; ignores everything off the path.
struct Probe<'p> {
    rest: &'p [Seg],
}

impl<'de> DeserializeSeed<'de> for Probe<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.rest.is_empty() {
            // Reached a list element: fail on it, whatever it is.
            return d.deserialize_any(Fail);
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Probe<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Seg::Key(target), rest)) = self.rest.split_first() else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        let last = rest.is_empty();
        let target: &str = target;
        while let Some(hit) = map.next_key_seed(KeyProbe { target, last })? {
            if hit {
                map.next_value_seed(Probe { rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Seg::Index(target), rest)) = self.rest.split_first() else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        let mut i = 0;
        loop {
            let found = if i == *target {
                seq.next_element_seed(Probe { rest })?
            } else {
                seq.next_element::<IgnoredAny>()?.map(|_| ())
            };
            if found.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    // Scalars off the path (or where the path expects a map or list): not found.
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// Reads a key; fails on it when it is the last step, else reports whether it matched.
struct KeyProbe<'p> {
    target: &'p str,
    last: bool,
}

impl<'de> DeserializeSeed<'de> for KeyProbe<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyProbe<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        match key == self.target {
            true if self.last => Err(E::custom(FOUND)),
            hit => Ok(hit),
        }
    }
}

/// A visitor that accepts nothing: its error message carries [`FOUND`].
struct Fail;

impl Visitor<'_> for Fail {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(FOUND)
    }
}
