// SPDX-License-Identifier: Apache-2.0
//! Checks that run before the configuration is deserialized, and the split of the stream into
//! its documents: each a mapping, a bounded number of them, of bounded size once aliases are
//! expanded.
//!
//! serde_yaml first loads every event of the document into memory (about 128 bytes each: a
//! 16 MiB flow list of 8 million scalars takes a GiB), then expands every alias while
//! deserializing. Its own alias guard counts alias *uses* (100 per event), not what they
//! expand to, so one anchored list of 1,000 addresses reused by 999 devices (62 KB of text)
//! becomes a million values, and each re-parse (errors are located by parsing again) pays
//! that again. This scan reads the libyaml event stream one event at a time, keeping only
//! the size of each anchored node, and stops at the limit: memory stays constant and time
//! linear in the text, whatever the document.

use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::mem::MaybeUninit;

use super::error::{ConfigError, Position};
use super::tree::{self, Builder, Text};

/// Nodes that aliases may add beyond one per byte of text: generous for anchors reused as
/// intended (a shared list of nameservers, a route set), far below what a bomb needs.
pub(crate) const ALIAS_ALLOWANCE: usize = 65_536;

/// The most nodes a configuration may have after alias expansion, whatever its length: a
/// config of 10,000 interfaces with 4 addresses and 4 routes each has about 310,000.
pub(crate) const MAX_NODES: usize = 1 << 19;

/// The deepest nesting scanned (serde_yaml refuses deeper documents at 128 anyway).
const MAX_DEPTH: usize = 128;

/// The most documents a configuration may hold: a v1alpha1 document plus one per link,
/// route rule or host entry of a large node.
pub(crate) const MAX_DOCUMENTS: usize = 65_536;

/// The longest `kind`, `apiVersion` or `version` value kept from a document's header: every
/// real one is far shorter, and a longer one is reported without being quoted.
const MAX_HEADER_VALUE: usize = 64;

/// One document of the stream: where its text starts, and the top-level keys that say what
/// it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DocSpan {
    /// Byte offset of the first line of the document (its `---`, when it has one).
    pub start: usize,
    /// Lines before that offset, added to positions found in the document's own text.
    pub line_offset: usize,
    /// Top-level `version` (the v1alpha1 machine configuration has it).
    pub version: Option<String>,
    /// Top-level `apiVersion` (typed documents have it).
    pub api_version: Option<String>,
    /// Top-level `kind`.
    pub kind: Option<String>,
    /// Where the document's root is a null (nothing after a `---`, `~`, `null`): Talos's
    /// loader skips such documents, so a stream that ends in `---` loads.
    pub null_at: Option<Position>,
    /// The document's value, built during the scan when it reads exactly as serde_yaml reads
    /// the text (`tree`); not built for typed documents (`apiVersion` or `kind` at the top).
    pub tree: Option<tree::Node>,
}

/// The most nodes, after alias expansion, a text of `len` bytes may have. Without aliases a
/// YAML node takes at least one byte, so below [`MAX_NODES`] only expansion reaches this.
pub(crate) fn node_limit(len: usize) -> usize {
    len.saturating_add(ALIAS_ALLOWANCE).min(MAX_NODES)
}

/// What the scan found wrong, before serde_yaml sees the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    TooManyNodes(usize),
    TooDeep,
    NotMapping(&'static str),
    TooManyDocuments,
    /// Not YAML before any document started: what libyaml says.
    Syntax(&'static str),
}

/// One node event of the stream, as much as the scan needs.
#[derive(Debug, PartialEq, Eq)]
enum Node {
    Scalar,
    Start,
    End,
    Alias,
}

/// Scan `yaml` and return its documents in order. Refused: a document that is not a mapping
/// (nothing of it is quoted), more than [`MAX_DOCUMENTS`], nesting deeper than
/// [`MAX_DEPTH`], more nodes than [`node_limit`] after alias expansion. A YAML syntax error
/// is left to serde_yaml, which reports it with its position; the documents before it are
/// returned and the one holding it spans the rest of the text.
pub(crate) fn check(yaml: &str) -> Result<Vec<DocSpan>, ConfigError> {
    let (refusal, position) = match scan(yaml) {
        // Null documents beside others are skipped; a stream of nothing else is refused as
        // before (a lone `~` is not a configuration).
        Ok(docs) => match docs.iter().map(|d| d.null_at).collect::<Option<Vec<_>>>().as_deref() {
            Some([first, ..]) => (Refusal::NotMapping("a scalar"), *first),
            _ => return Ok(docs),
        },
        Err(e) => e,
    };
    let message = match refusal {
        Refusal::TooManyNodes(limit) => format!(
            "more than {limit} YAML nodes after alias expansion (one per byte of text plus \
             {ALIAS_ALLOWANCE}, at most {MAX_NODES}); refusing to expand further"
        ),
        Refusal::TooDeep => format!("nested deeper than {MAX_DEPTH} levels"),
        Refusal::NotMapping(kind) => format!(
            "the document is {kind}, not a YAML mapping (expected `version: v1alpha1` and \
             `machine:`, or `apiVersion: v1alpha1` and `kind:`)"
        ),
        Refusal::TooManyDocuments => format!("more than {MAX_DOCUMENTS} YAML documents"),
        Refusal::Syntax(problem) => format!("not YAML: {problem}"),
    };
    Err(ConfigError::new("", Some(position), message))
}

/// The sizes the scan keeps: expanded nodes so far, each anchor's expanded size, the open
/// collections (with the anchor and count they started at).
struct Sizes {
    limit: usize,
    nodes: usize,
    anchors: HashMap<Vec<u8>, usize>,
    open: Vec<Option<(Vec<u8>, usize)>>,
}

impl Sizes {
    fn event(&mut self, node: Node, anchor: Option<Vec<u8>>) -> Result<(), Refusal> {
        let start = self.nodes;
        match node {
            Node::Scalar => {
                self.nodes += 1;
                if let Some(a) = anchor {
                    self.anchors.insert(a, 1);
                }
            }
            Node::Start => {
                if self.open.len() >= MAX_DEPTH {
                    return Err(Refusal::TooDeep);
                }
                self.nodes += 1;
                self.open.push(anchor.map(|a| (a, start)));
            }
            Node::End => {
                if let Some(Some((a, from))) = self.open.pop() {
                    self.anchors.insert(a, self.nodes - from);
                }
            }
            Node::Alias => {
                // An unknown anchor is serde_yaml's error to report; it counts as one node.
                let size = anchor.and_then(|a| self.anchors.get(&a).copied()).unwrap_or(1);
                self.nodes = self.nodes.saturating_add(size);
            }
        }
        if self.nodes > self.limit {
            return Err(Refusal::TooManyNodes(self.limit));
        }
        Ok(())
    }
}

/// One libyaml event, as much of it as the scan needs.
pub(super) struct Event {
    pub(super) kind: unsafe_libyaml::yaml_event_type_t,
    pub(super) anchor: Option<Vec<u8>>,
    /// A scalar's value, when it is at most [`MAX_HEADER_VALUE`] bytes.
    pub(super) scalar: Option<Vec<u8>>,
    /// A scalar written plain and without a tag (so `~`, `null` or nothing is a null).
    pub(super) plain: bool,
    /// A scalar's whole value, when asked for (see [`Parser::next_full`]); `Some(None)`
    /// when it is not UTF-8.
    pub(super) value: Option<Option<Text>>,
    /// The node has a tag.
    pub(super) tagged: bool,
    pub(super) position: Position,
}

/// A libyaml parser over borrowed text, deleted on drop. Boxed: libyaml keeps pointers into
/// its own state, so it must not move once initialized.
pub(super) struct Parser<'t> {
    sys: Box<MaybeUninit<unsafe_libyaml::yaml_parser_t>>,
    _text: &'t [u8],
}

impl<'t> Parser<'t> {
    pub(super) fn new(text: &'t [u8]) -> Option<Self> {
        let mut sys = Box::new(MaybeUninit::<unsafe_libyaml::yaml_parser_t>::uninit());
        let p = sys.as_mut_ptr();
        // SAFETY: `p` points to writable memory for a parser; initialize fills it in.
        if unsafe { unsafe_libyaml::yaml_parser_initialize(p) }.fail {
            return None;
        }
        // SAFETY: `p` is initialized; the input outlives the parser (`'t`), and its length
        // is the slice's.
        unsafe {
            unsafe_libyaml::yaml_parser_set_encoding(p, unsafe_libyaml::YAML_UTF8_ENCODING);
            unsafe_libyaml::yaml_parser_set_input_string(p, text.as_ptr(), text.len() as u64);
        }
        Some(Self { sys, _text: text })
    }

    /// What libyaml found wrong and where, after `next` returned `None`: a fixed text of
    /// libyaml's (never the document's own bytes).
    fn problem(&self) -> Option<(&'static str, Position)> {
        // SAFETY: the parser is initialized; `problem` is NULL or one of libyaml's static
        // NUL-terminated messages.
        unsafe {
            let p = &*self.sys.as_ptr();
            if p.problem.is_null() {
                return None;
            }
            let text = CStr::from_ptr(p.problem).to_str().ok()?;
            let mark = p.problem_mark;
            let position = Position {
                line: usize::try_from(mark.line).unwrap_or(usize::MAX).saturating_add(1),
                column: usize::try_from(mark.column).unwrap_or(usize::MAX).saturating_add(1),
            };
            // The message is static in libyaml: keep it as such.
            Some((
                KNOWN_PROBLEMS.iter().find(|k| **k == text).copied().unwrap_or("syntax error"),
                position,
            ))
        }
    }

    /// The next event; `None` on a syntax error (the caller stops there: libyaml must not be
    /// asked again after an error). A scalar's value is copied only when `want_scalar`: the
    /// scan reads the root mapping's, and a large config has a hundred thousand others.
    pub(super) fn next(&mut self, want_scalar: bool) -> Option<Event> {
        self.next_full(want_scalar, false)
    }

    /// As [`Parser::next`], and with every scalar's whole value copied when `full`.
    pub(super) fn next_full(&mut self, want_scalar: bool, full: bool) -> Option<Event> {
        let p = self.sys.as_mut_ptr();
        let mut event = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
        let e = event.as_mut_ptr();
        // SAFETY: `p` is an initialized parser; on success `e` holds an event, read here
        // (anchors are NUL-terminated strings owned by the event) and then deleted once.
        unsafe {
            if unsafe_libyaml::yaml_parser_parse(p, e).fail {
                return None;
            }
            let kind = (*e).type_;
            let anchor = match kind {
                unsafe_libyaml::YAML_SCALAR_EVENT => (*e).data.scalar.anchor,
                unsafe_libyaml::YAML_SEQUENCE_START_EVENT => (*e).data.sequence_start.anchor,
                unsafe_libyaml::YAML_MAPPING_START_EVENT => (*e).data.mapping_start.anchor,
                unsafe_libyaml::YAML_ALIAS_EVENT => (*e).data.alias.anchor,
                _ => std::ptr::null_mut(),
            };
            let anchor = (!anchor.is_null())
                .then(|| CStr::from_ptr(anchor as *const c_char).to_bytes().to_vec());
            // Scalars are kept only while short: the scan needs header values, nothing else.
            let scalar = (want_scalar && kind == unsafe_libyaml::YAML_SCALAR_EVENT)
                .then(|| {
                    let data = (*e).data.scalar;
                    let len = usize::try_from(data.length).unwrap_or(usize::MAX);
                    (len <= MAX_HEADER_VALUE && !data.value.is_null())
                        .then(|| std::slice::from_raw_parts(data.value, len).to_vec())
                })
                .flatten();
            let value = (full && kind == unsafe_libyaml::YAML_SCALAR_EVENT).then(|| {
                let data = (*e).data.scalar;
                let len = usize::try_from(data.length).unwrap_or(0);
                if data.value.is_null() {
                    Text::new(b"")
                } else {
                    Text::new(std::slice::from_raw_parts(data.value, len))
                }
            });
            let tag = match kind {
                unsafe_libyaml::YAML_SCALAR_EVENT => (*e).data.scalar.tag,
                unsafe_libyaml::YAML_SEQUENCE_START_EVENT => (*e).data.sequence_start.tag,
                unsafe_libyaml::YAML_MAPPING_START_EVENT => (*e).data.mapping_start.tag,
                _ => std::ptr::null_mut(),
            };
            let tagged = !tag.is_null();
            let plain = kind == unsafe_libyaml::YAML_SCALAR_EVENT
                && !tagged
                && (*e).data.scalar.style == unsafe_libyaml::YAML_PLAIN_SCALAR_STYLE;
            let mark = (*e).start_mark;
            let position = Position {
                line: usize::try_from(mark.line).unwrap_or(usize::MAX).saturating_add(1),
                column: usize::try_from(mark.column).unwrap_or(usize::MAX).saturating_add(1),
            };
            unsafe_libyaml::yaml_event_delete(e);
            Some(Event { kind, anchor, scalar, plain, value, tagged, position })
        }
    }
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        // SAFETY: the parser was initialized in `new` (a failed one is never built).
        unsafe { unsafe_libyaml::yaml_parser_delete(self.sys.as_mut_ptr()) }
    }
}

/// Byte offsets of the start of every line (line 1 at index 0).
fn line_starts(yaml: &str) -> Vec<usize> {
    std::iter::once(0).chain(yaml.match_indices('\n').map(|(i, _)| i + 1)).collect()
}

/// The top-level key whose value the scan is waiting for.
#[derive(Clone, Copy)]
enum HeaderKey {
    Version,
    ApiVersion,
    Kind,
}

/// libyaml's messages for text that is not YAML at all, quoted as they are.
const KNOWN_PROBLEMS: [&str; 12] = [
    "control characters are not allowed",
    "invalid leading UTF-8 octet",
    "incomplete UTF-8 octet sequence",
    "invalid trailing UTF-8 octet",
    "invalid Unicode character",
    "found character that cannot start any token",
    "did not find expected node content",
    "did not find expected <document start>",
    "mapping values are not allowed in this context",
    "found unexpected end of stream",
    "did not find expected ',' or '}'",
    "did not find expected ',' or ']'",
];

fn scan(yaml: &str) -> Result<Vec<DocSpan>, (Refusal, Position)> {
    let mut docs = Vec::new();
    let Some(mut parser) = Parser::new(yaml.as_bytes()) else { return Ok(docs) };
    let lines = line_starts(yaml);
    let mut sizes = Sizes {
        limit: node_limit(yaml.len()),
        nodes: 0,
        anchors: HashMap::new(),
        open: Vec::new(),
    };
    // Inside the current document's root mapping: is the next scalar a key, and which header
    // key did the last key name.
    let mut root_seen = false;
    let mut expect_key = true;
    let mut pending: Option<HeaderKey> = None;
    // The scan reads the values of a document's root (a null document) and of the nodes
    // directly in a root mapping (one collection open), and no others.
    // The current document's tree, while it is still being built (see `tree`).
    let mut builder: Option<Builder> = None;
    while let Some(Event { kind, anchor, scalar, plain, value, tagged, position: at }) =
        parser.next_full(sizes.open.len() <= 1, builder.is_some())
    {
        let node = match kind {
            unsafe_libyaml::YAML_STREAM_END_EVENT => return Ok(docs),
            unsafe_libyaml::YAML_DOCUMENT_END_EVENT => {
                if let Some(doc) = docs.last_mut() {
                    doc.tree = builder.take().and_then(Builder::finish);
                }
                continue;
            }
            unsafe_libyaml::YAML_DOCUMENT_START_EVENT => {
                if docs.len() >= MAX_DOCUMENTS {
                    return Err((Refusal::TooManyDocuments, at));
                }
                // The first document owns everything before it (comments, directives); later
                // ones start at the line of their `---`.
                let line_offset = if docs.is_empty() { 0 } else { at.line - 1 };
                let start = lines.get(line_offset).copied().unwrap_or(yaml.len());
                docs.push(DocSpan { start, line_offset, ..DocSpan::default() });
                // Anchors do not cross documents (YAML 1.2 §9.1).
                sizes.anchors.clear();
                (root_seen, expect_key, pending) = (false, true, None);
                builder = Some(Builder::default());
                continue;
            }
            unsafe_libyaml::YAML_SCALAR_EVENT => Node::Scalar,
            unsafe_libyaml::YAML_SEQUENCE_START_EVENT
            | unsafe_libyaml::YAML_MAPPING_START_EVENT => Node::Start,
            unsafe_libyaml::YAML_SEQUENCE_END_EVENT | unsafe_libyaml::YAML_MAPPING_END_EVENT => {
                Node::End
            }
            unsafe_libyaml::YAML_ALIAS_EVENT => Node::Alias,
            _ => continue,
        };
        if !root_seen {
            root_seen = true;
            let kind = match kind {
                unsafe_libyaml::YAML_MAPPING_START_EVENT => None,
                unsafe_libyaml::YAML_SEQUENCE_START_EVENT => Some("a sequence"),
                unsafe_libyaml::YAML_ALIAS_EVENT => Some("an alias"),
                _ => Some("a scalar"),
            };
            let null = plain
                && matches!(scalar.as_deref(), Some(b"" | b"~" | b"null" | b"Null" | b"NULL"));
            match (kind, docs.last_mut()) {
                (Some(_), Some(doc)) if null => doc.null_at = Some(at),
                (Some(kind), _) => return Err((Refusal::NotMapping(kind), at)),
                (None, _) => {}
            }
        } else if sizes.open.len() == 1 {
            // A node directly in the root mapping: keys and values alternate.
            if expect_key {
                pending = match scalar.as_deref() {
                    Some(b"version") => Some(HeaderKey::Version),
                    Some(b"apiVersion") => Some(HeaderKey::ApiVersion),
                    Some(b"kind") => Some(HeaderKey::Kind),
                    _ => None,
                };
                if matches!(pending, Some(HeaderKey::ApiVersion | HeaderKey::Kind)) {
                    // A typed document: read from its text, which is short.
                    builder = None;
                }
            } else if let (Some(key), Some(doc)) = (pending.take(), docs.last_mut()) {
                // A value too long to keep is still a value: it is reported as unknown.
                let value = (node == Node::Scalar).then(|| {
                    scalar
                        .as_deref()
                        .map_or_else(|| "…".to_owned(), |v| String::from_utf8_lossy(v).into_owned())
                });
                match key {
                    HeaderKey::Version => doc.version = value,
                    HeaderKey::ApiVersion => doc.api_version = value,
                    HeaderKey::Kind => doc.kind = value,
                }
            }
            if node != Node::End {
                expect_key = !expect_key;
            }
        }
        if let Some(b) = builder.as_mut() {
            let anchor = anchor.clone();
            match kind {
                unsafe_libyaml::YAML_SCALAR_EVENT => {
                    b.scalar(value.flatten(), plain, tagged, anchor);
                }
                unsafe_libyaml::YAML_MAPPING_START_EVENT => b.start(true, tagged, anchor),
                unsafe_libyaml::YAML_SEQUENCE_START_EVENT => b.start(false, tagged, anchor),
                unsafe_libyaml::YAML_ALIAS_EVENT => b.alias(anchor),
                _ => b.end(),
            }
        }
        sizes.event(node, anchor).map_err(|r| (r, at))?;
    }
    // A syntax error. Once a document started, serde_yaml reports it with that document's
    // position; before any, nothing would, and the text would look empty. The last document's
    // text runs to the end, over the error, so no tree stands for it: all are read as text.
    for doc in &mut docs {
        doc.tree = None;
    }
    if docs.is_empty() {
        if let Some((problem, at)) = parser.problem() {
            return Err((Refusal::Syntax(problem), at));
        }
    }
    Ok(docs)
}
