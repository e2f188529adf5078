// SPDX-License-Identifier: Apache-2.0
//! [`ConfigError`]: a problem in a machine configuration, with its YAML path and
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

/// A problem in a machine configuration. [`check`](super::check) drops the entry that
/// holds it ([`ConfigError::dropped`]) and keeps the rest; [`parse`](super::parse) refuses
/// the configuration with its first problem.
///
/// Displays as `machine.network.interfaces[1].routes[0].gateway (line 14, column 22): invalid
/// IP address "10.0.0.x"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", DocLabel(document.as_deref()), Label(path, *position))]
pub struct ConfigError {
    /// Which document of a multi-document configuration (`document 3 (LinkConfig eth0)`);
    /// `None` when the configuration is one document.
    pub document: Option<String>,
    /// The YAML path of the offending key or value (`machine.network.interfaces[1].mtu`);
    /// empty for the document itself.
    pub path: String,
    /// Where in the text, when known.
    pub position: Option<Position>,
    /// What is wrong.
    pub message: String,
    /// What was left out for it, when the rest of the configuration still applies: the
    /// path of the dropped field or list item, or `the whole document`. Not part of
    /// [`Display`](fmt::Display); see [`ConfigError::dropped_line`].
    pub dropped: Option<String>,
}

impl ConfigError {
    /// An error at `path`.
    pub fn new(
        path: impl Into<String>,
        position: Option<Position>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            document: None,
            path: excerpt_path(&path.into()),
            position,
            message: excerpt_quotes(&message.into()),
            dropped: None,
        }
    }

    /// The error and what was dropped for it: `PATH (line L, column C): MESSAGE (dropped
    /// UNIT)`, or the error alone when nothing was.
    pub fn dropped_line(&self) -> String {
        match &self.dropped {
            Some(unit) => format!("{self} (dropped {unit})"),
            None => self.to_string(),
        }
    }

    /// The same error in document `label` of a stream, `lines` lines below where its own
    /// text was parsed.
    pub(crate) fn in_document(mut self, label: &str, lines: usize) -> Self {
        self.document = Some(label.to_owned());
        if let Some(p) = &mut self.position {
            p.line += lines;
        }
        self
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
                // Names are what people mistype; anything else (a line of a secret file
                // named as the config by mistake) is not repeated at all.
                if looks_like_path(key) && key.len() <= EXCERPT_CHARS {
                    path = join_key(&path, key);
                    message = format!("unknown key {key:?}{expected}");
                } else {
                    let n = key.chars().count();
                    message = format!("unknown key (not a name, {n} characters){expected}");
                }
            }
        }
        Self::new(path, position, message)
    }
}

/// The most characters of document content an error quotes: enough to recognise a typo,
/// too few to copy a secret that was named as the config by mistake.
pub(crate) const EXCERPT_CHARS: usize = 24;
/// The longest message and path kept (serde's "expected one of ..." lists fit).
const MESSAGE_CHARS: usize = 400;

/// `message` with every quoted run (`"..."` or `` `...` ``) cut to [`EXCERPT_CHARS`], control
/// characters escaped and the whole cut to [`MESSAGE_CHARS`]: errors quote the document, and
/// the document may be anything the path pointed at.
pub(crate) fn excerpt_quotes(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MESSAGE_CHARS + 8));
    let mut quote: Option<char> = None;
    let mut quoted = 0usize;
    let mut chars = message.chars();
    let mut total = 0usize;
    while let Some(c) = chars.next() {
        if total >= MESSAGE_CHARS {
            out.push('…');
            break;
        }
        match quote {
            None => {
                if c == '"' || c == '`' {
                    quote = Some(c);
                    quoted = 0;
                }
                push_escaped(&mut out, c);
                total += 1;
            }
            Some(q) if c == q => {
                quote = None;
                out.push(c);
                total += 1;
            }
            Some(q) => {
                // A backslash escape (Debug-quoted strings) counts as one character.
                let escaped = if q == '"' && c == '\\' { chars.next() } else { None };
                quoted += 1;
                if quoted <= EXCERPT_CHARS {
                    push_escaped(&mut out, c);
                    if let Some(e) = escaped {
                        push_escaped(&mut out, e);
                    }
                    total += 1;
                } else if quoted == EXCERPT_CHARS + 1 {
                    out.push('…');
                    total += 1;
                }
            }
        }
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    if c.is_control() {
        out.extend(c.escape_default());
    } else {
        out.push(c);
    }
}

/// A path is ours (`a.b[3].c`) or names keys the document chose (map keys such as
/// `extraArgs`'s): escape and cut it like a message.
fn excerpt_path(path: &str) -> String {
    if path.is_empty() || (looks_like_path(path) && path.len() <= MESSAGE_CHARS) {
        path.to_owned()
    } else {
        excerpt_quotes(&format!("{path:?}"))
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

/// `document 3 (LinkConfig eth0): `, or nothing for a one-document configuration.
struct DocLabel<'a>(Option<&'a str>);

impl fmt::Display for DocLabel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(doc) => write!(f, "{doc}: "),
            None => Ok(()),
        }
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
