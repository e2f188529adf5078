// SPDX-License-Identifier: Apache-2.0
//! [`ConfigError`]: the first problem in a machine configuration, with its YAML path and
//! position.

use std::fmt;

/// A 1-based line and column in the configuration text.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Position {
    /// Line, starting at 1.
    pub line: usize,
    /// Column, starting at 1.
    pub column: usize,
}

impl From<serde_yaml::Location> for Position {
    fn from(l: serde_yaml::Location) -> Self {
        Self { line: l.line(), column: l.column() }
    }
}

/// Why a machine configuration was rejected. The whole document is rejected: nothing of it
/// applies.
///
/// Displays as `machine.network.interfaces[1].routes[0].gateway (line 14, column 22): invalid
/// IP address "10.0.0.x"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", Label(path, *position))]
pub struct ConfigError {
    /// The YAML path of the offending key or value (`machine.network.interfaces[1].mtu`);
    /// empty for the document itself.
    pub path: String,
    /// Where in the text, when known.
    pub position: Option<Position>,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// An error at `path`.
    pub fn new(
        path: impl Into<String>,
        position: Option<Position>,
        message: impl Into<String>,
    ) -> Self {
        Self { path: path.into(), position, message: message.into() }
    }

    /// The line of the problem, when known.
    pub fn line(&self) -> Option<usize> {
        self.position.map(|p| p.line)
    }

    /// Split a serde_yaml error into path, position and message.
    ///
    /// serde_yaml 0.9 exposes only `location()` and a rendered `"<path>: <message> at line L
    /// column C"` string, so the path is recovered from that text. An unknown key is reported
    /// by serde at its map; the key is appended so the path names the key itself.
    pub(crate) fn from_yaml(err: &serde_yaml::Error) -> Self {
        let position = err.location().map(Position::from);
        let mut text = err.to_string();
        if let Some(p) = position {
            let suffix = format!(" at line {} column {}", p.line, p.column);
            if text.ends_with(&suffix) {
                text.truncate(text.len() - suffix.len());
            }
        }
        let (mut path, mut message) = match text.split_once(": ") {
            Some((p, m)) if looks_like_path(p) => (p.to_owned(), m.to_owned()),
            _ => (String::new(), text),
        };
        if let Some(rest) = message.strip_prefix("unknown field `") {
            if let Some((key, expected)) = rest.split_once('`') {
                path = join_key(&path, key);
                message = format!("unknown key {key:?}{expected}");
            }
        }
        Self { path, position, message }
    }
}

/// Does serde_yaml's message prefix look like a path (`a.b[3].c`) rather than prose?
fn looks_like_path(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-[]?/".contains(c))
}

/// `parent.key`, or `key` at the root.
pub(crate) fn join_key(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// `path (line L, column C)`, with `(document)` standing for the empty root path.
struct Label<'a>(&'a str, Option<Position>);

impl fmt::Display for Label<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "(document)" } else { self.0 })?;
        if let Some(p) = self.1 {
            write!(f, " (line {}, column {})", p.line, p.column)?;
        }
        Ok(())
    }
}
