// SPDX-License-Identifier: Apache-2.0
//! A command-line flag's value in `machine.kubelet.extraArgs`: one value, or, since Talos
//! 1.14 (`meta.Args`), a list of them, each its own `--key=value`.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// One flag's value or values.
#[derive(Clone, PartialEq, Eq, Debug, Serialize)]
#[serde(untagged)]
pub enum ArgValue {
    /// `key: value`: `--key=value`.
    One(String),
    /// `key: [a, b]`: `--key=a --key=b`, in order.
    Many(Vec<String>),
}

impl ArgValue {
    /// The flags this value makes for `key`.
    pub fn flags<'a>(&'a self, key: &'a str) -> impl Iterator<Item = String> + 'a {
        let values: &[String] = match self {
            ArgValue::One(v) => std::slice::from_ref(v),
            ArgValue::Many(list) => list,
        };
        values.iter().map(move |v| format!("--{key}={v}"))
    }
}

impl PartialEq<&str> for ArgValue {
    fn eq(&self, other: &&str) -> bool {
        matches!(self, ArgValue::One(v) if v == other)
    }
}

/// A scalar as its text: YAML gives `2` and `true` types, a flag takes them as text.
struct Text;

impl<'de> Visitor<'de> for Text {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        Ok(v.to_string())
    }
}

struct Item(String);

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_string(Text).map(Item)
    }
}

struct Value;

impl<'de> Visitor<'de> for Value {
    type Value = ArgValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or a list of strings")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<ArgValue, E> {
        Ok(ArgValue::One(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<ArgValue, E> {
        Ok(ArgValue::One(v))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<ArgValue, E> {
        Text.visit_bool(v).map(ArgValue::One)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<ArgValue, E> {
        Text.visit_i64(v).map(ArgValue::One)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<ArgValue, E> {
        Text.visit_u64(v).map(ArgValue::One)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<ArgValue, E> {
        Text.visit_f64(v).map(ArgValue::One)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ArgValue, A::Error> {
        // Bounded by the document, whose size and node count are checked before parsing.
        let mut list = Vec::new();
        while let Some(Item(v)) = seq.next_element()? {
            list.push(v);
        }
        Ok(ArgValue::Many(list))
    }
}

impl<'de> Deserialize<'de> for ArgValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Value)
    }
}
