// SPDX-License-Identifier: Apache-2.0
//! A configuration file as a stream of YAML documents: at most one v1alpha1 machine
//! configuration (`version: v1alpha1`) and any number of typed documents (`apiVersion:
//! v1alpha1`, `kind: ...`), checked one by one and then against each other as Talos does
//! (`pkg/machinery/config/container`: unique `Kind/name`, kinds that exclude each other,
//! and typed documents that would set what the v1alpha1 document already sets).

use std::collections::{BTreeMap, BTreeSet};

use super::bounds::{self, DocSpan};
use super::documents::{self, Document, Legacy, NetworkDocument, Problems, API_VERSION};
use super::error::{ConfigError, Position};
use super::locate::YamlPath;
use super::machine::MachineConfig;
use super::tree::Node;
use super::{known, prune, validate};
use serde::Deserialize;

/// Everything found in a configuration: what of it is valid, and every entry dropped
/// (each naming its document, path and line, and what was left out for it).
#[derive(Debug, Default)]
pub struct Report {
    /// The configuration without the dropped entries: meaningful when `kept` is true.
    pub config: MachineConfig,
    /// Every problem, in stream order; each one's [`ConfigError::dropped`] says what was
    /// left out for it (nothing of the configuration is kept when `kept` is false).
    pub errors: Vec<ConfigError>,
    /// At least one document (or part of one) was kept.
    pub kept: bool,
}

/// Check the whole stream: drop each invalid entry at the narrowest unit that holds it
/// (`prune`), keep the rest, and report every drop.
pub fn check(yaml: &str) -> Report {
    check_with(yaml, true)
}

/// [`check`], reading the v1alpha1 document from the tree the bounds scan built when `fast`
/// (and from its text when that tree is missing or does not load whole), or always from its
/// text: the result is the same either way, only the time differs.
pub(crate) fn check_with(yaml: &str, fast: bool) -> Report {
    let yaml = yaml.strip_prefix('\u{feff}').unwrap_or(yaml);
    let mut report = Report::default();
    let mut spans = match bounds::check(yaml) {
        Ok(spans) => spans,
        Err(e) => {
            report.errors.push(e);
            return report;
        }
    };
    if spans.is_empty() {
        report.errors.push(ConfigError::new("", None, "the configuration is empty"));
        return report;
    }
    let fast = fast && !other_line_breaks(yaml);
    let mut trees: Vec<Option<Node>> =
        spans.iter_mut().map(|s| s.tree.take().filter(|_| fast)).collect();
    let many = spans.iter().filter(|s| s.null_at.is_none()).count() > 1;
    let has = |kind: &str| spans.iter().any(|s| s.kind.as_deref() == Some(kind));
    let beside = validate::Beside {
        discovery: has("DiscoveryServiceConfig"),
        identity: has("DiscoveryIdentityConfig"),
    };
    let mut legacy: Option<(usize, String)> = None;
    let mut typed: Vec<NetworkDocument> = Vec::new();
    for (i, span) in spans.iter().enumerate() {
        if span.null_at.is_some() {
            // An empty document (a stream ending in `---`): Talos skips it, so does keelson.
            continue;
        }
        let end = spans.get(i + 1).map_or(yaml.len(), |next| next.start);
        let text = yaml.get(span.start..end).unwrap_or_default();
        let number = i + 1;
        // A lone document is read as v1alpha1 unless it says otherwise, so its errors are
        // that shape's (`missing field version`, an unknown key).
        let class = match classify(span) {
            Class::Unknown if !many => Class::Legacy,
            class => class,
        };
        match class {
            Class::Legacy => {
                if let Some((first, _)) = &legacy {
                    let message = format!(
                        "a second v1alpha1 machine configuration (the first is document {first})"
                    );
                    report.errors.push(at_document(number, "v1alpha1", span, message));
                    continue;
                }
                // Padded so that positions, warnings included, are the file's own lines.
                let padded = format!("{}{text}", "\n".repeat(span.line_offset));
                let tree = trees.get_mut(i).and_then(Option::take);
                let (cfg, errors) = legacy_document(&padded, tree, beside);
                for mut e in errors {
                    if many {
                        e.document = Some(documents::label(number, "v1alpha1", None));
                    }
                    report.errors.push(e);
                }
                if let Some(cfg) = cfg {
                    // Warnings of the documents before it stay, ahead of its own.
                    let earlier = std::mem::take(&mut report.config.warnings);
                    report.config = cfg;
                    report.config.warnings.splice(0..0, earlier);
                    report.kept = true;
                    legacy = Some((number, padded));
                } else {
                    // Counted, so that a second one is still refused, but not checked against.
                    legacy = Some((number, String::new()));
                }
            }
            Class::Typed(kind) if Document::KINDS.contains(&kind) => {
                let line = span.line_offset + 1;
                let (doc, errors, warnings) = typed_document(kind, text);
                let label = match &doc {
                    Some(doc) => documents::label(number, kind, doc.body().name().as_deref()),
                    None => documents::label(number, kind, None),
                };
                for e in errors {
                    report.errors.push(e.in_document(&label, span.line_offset));
                }
                for (path, line_in, message) in warnings {
                    let at = line_in.map_or(line, |l| l + span.line_offset);
                    report.config.warnings.push(format!("{label}: {path} (line {at}): {message}"));
                }
                if let Some(doc) = doc {
                    typed.push(NetworkDocument { number, line, doc });
                }
            }
            Class::Typed(kind) if documents::NOT_IMPLEMENTED.contains(&kind) => {
                report.config.warnings.push(format!(
                    "{} (line {}): a Talos document keelson does not implement yet; ignored",
                    documents::label(number, kind, None),
                    span.line_offset + 1,
                ));
            }
            Class::Typed(kind) => {
                // The kinds are listed by `keelson config validate --help`, not here: the
                // list outgrows a message.
                let message = format!("unknown kind {:?}", crate::names::escape(kind, 32));
                report.errors.push(at_key(number, kind, span, text, "kind", message));
            }
            Class::WrongApiVersion => {
                let kind = span.kind.as_deref().unwrap_or("?");
                let message = format!("apiVersion must be {API_VERSION}");
                report.errors.push(at_key(number, kind, span, text, "apiVersion", message));
            }
            Class::Unknown => {
                let message = "neither a v1alpha1 machine configuration (`version: v1alpha1`) \
                               nor a typed document (`apiVersion: v1alpha1` and `kind:`)";
                report.errors.push(at_document(number, "?", span, message.to_owned()));
            }
        }
    }
    let legacy_text = legacy.as_ref().map(|(_, text)| text.as_str()).filter(|t| !t.is_empty());
    let mut refused = cross_check(&mut report, &typed, legacy_text);
    for i in documents::without_identity(&typed, &refused, &report.config) {
        if let Some(doc) = typed.get(i) {
            let message = "the discovery service needs the cluster's identity: a \
                           DiscoveryIdentityConfig document, or cluster.id and cluster.secret";
            report.errors.push(doc_error(doc, message.to_owned()));
            refused.insert(i);
        }
    }
    let kept = typed.iter().enumerate().filter(|(i, _)| !refused.contains(i)).map(|(_, d)| d);
    report.config.warnings.extend(documents::extra_services(kept));
    for (i, doc) in typed.into_iter().enumerate() {
        if refused.contains(&i) {
            continue;
        }
        report.kept = true;
        if !doc.doc.body().fold_into(&mut report.config) {
            report.config.documents.push(doc);
        }
    }
    // Nothing refused (documents keelson only warns about, say) is a configuration too.
    report.kept |= report.errors.is_empty();
    if report.kept && report.config.version.is_empty() {
        // Typed documents alone: the configuration they make is still v1alpha1's shape.
        report.config.version = validate::VERSION.to_owned();
    }
    for e in &mut report.errors {
        // Whatever no unit was named for cost its document.
        if e.dropped.is_none() {
            e.dropped = Some(prune::DOCUMENT.to_owned());
        }
    }
    report.config.dropped = report.errors.iter().map(ConfigError::dropped_line).collect();
    report
}

/// Whether libyaml breaks lines where the text's lines do not (a lone `\r`, NEL, LS, PS):
/// documents are cut from the text by line, so there the text of a document may not hold
/// exactly what libyaml read for it, and only reading that text gives today's answer.
///
/// Byte by byte, without decoding characters: NEL is `C2 85`, LS and PS `E2 80 A8`/`A9` in
/// UTF-8, and `C2` and `E2` only ever start a character.
fn other_line_breaks(yaml: &str) -> bool {
    let b = yaml.as_bytes();
    b.iter().enumerate().any(|(i, &c)| match c {
        b'\r' => b.get(i + 1) != Some(&b'\n'),
        0xC2 => b.get(i + 1) == Some(&0x85),
        0xE2 => b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xA8 | 0xA9)),
        _ => false,
    })
}

/// What a document is, from its header keys.
enum Class<'a> {
    Legacy,
    Typed(&'a str),
    WrongApiVersion,
    Unknown,
}

fn classify(span: &DocSpan) -> Class<'_> {
    match (&span.version, &span.api_version, &span.kind) {
        (_, Some(api), Some(_)) if api != API_VERSION => Class::WrongApiVersion,
        (_, Some(_), Some(kind)) => Class::Typed(kind),
        (Some(_), None, None) => Class::Legacy,
        _ => Class::Unknown,
    }
}

/// The v1alpha1 document without its invalid entries, and one error per dropped entry.
fn legacy_document(
    yaml: &str,
    tree: Option<Node>,
    beside: validate::Beside,
) -> (Option<MachineConfig>, Vec<ConfigError>) {
    // The tree reads as the text does (see `tree`); anything wrong is found again from the
    // text, so that its errors and their positions are serde_yaml's.
    let fast = tree
        .and_then(|t| MachineConfig::deserialize(&t).ok())
        .filter(|cfg| validate::check(cfg, &prune::Source::new(yaml)).is_empty());
    let loaded = match fast {
        Some(cfg) => prune::loaded(yaml, cfg),
        None => prune::load(yaml, |t| serde_yaml::from_str::<MachineConfig>(t), validate::check),
    };
    let Some(mut cfg) = loaded.value else { return (None, loaded.errors) };
    cfg.warnings = known::warnings(&cfg, yaml);
    cfg.warnings.extend(validate::warnings(&cfg, &loaded.source, beside));
    (Some(cfg), loaded.errors)
}

/// A typed document without its invalid entries; its errors (positions in `text`) and its
/// warnings (path, line in `text`, message).
type Typed = (Option<Document>, Vec<ConfigError>, Vec<(String, Option<usize>, String)>);

fn typed_document(kind: &str, text: &str) -> Typed {
    let deser = |t: &str| {
        Document::parse(kind, t).unwrap_or_else(|| {
            Err(<serde_yaml::Error as serde::de::Error>::custom("not a document kind"))
        })
    };
    let problems = |doc: &Document| {
        let mut p = Problems::default();
        doc.body().check(&mut p);
        p
    };
    let loaded = prune::load(text, deser, |doc, _| problems(doc).errors);
    let Some(doc) = loaded.value else { return (None, loaded.errors, Vec::new()) };
    let warnings = problems(&doc)
        .warnings
        .into_iter()
        .map(|(path, message)| {
            let line = loaded.source.locate(&path).map(|p| p.line);
            (loaded.source.original(&path).to_string(), line, message)
        })
        .collect();
    (Some(doc), loaded.errors, warnings)
}

/// An error about a whole document, at its first line.
fn at_document(number: usize, kind: &str, span: &DocSpan, message: String) -> ConfigError {
    let position = Position { line: span.line_offset + 1, column: 1 };
    let mut e = ConfigError::new("", Some(position), message);
    e.document = Some(documents::label(number, kind, None));
    e
}

/// An error at one top-level key of a document.
fn at_key(
    number: usize,
    kind: &str,
    span: &DocSpan,
    text: &str,
    key: &'static str,
    message: String,
) -> ConfigError {
    let position = YamlPath::keys(key).locate(text);
    ConfigError::new(key, position, message)
        .in_document(&documents::label(number, kind, None), span.line_offset)
}

/// Checks between documents: one document per `Kind/name`, no two kinds that exclude each
/// other for one name, nothing set both by a typed document and by the v1alpha1 one. Returns
/// the indices (in `typed`) of the documents refused: the later of two that clash.
fn cross_check(
    report: &mut Report,
    typed: &[NetworkDocument],
    legacy: Option<&str>,
) -> BTreeSet<usize> {
    let mut refused = BTreeSet::new();
    let mut seen: BTreeMap<String, &NetworkDocument> = BTreeMap::new();
    for (i, doc) in typed.iter().enumerate() {
        let id = doc.doc.id();
        if let Some(first) = seen.get(&id) {
            report.errors.push(doc_error(
                doc,
                format!("{id} is configured twice (also {}, line {})", first.label(), first.line),
            ));
            refused.insert(i);
            continue;
        }
        let body = doc.doc.body();
        if let Some(name) = body.name() {
            for kind in body.conflicts_with() {
                if let Some(other) = seen.get(&format!("{kind}/{name}")) {
                    refused.insert(i);
                    report.errors.push(doc_error(
                        doc,
                        format!(
                            "conflicts with {} (line {}): one name, two kinds",
                            other.label(),
                            other.line
                        ),
                    ));
                }
            }
        }
        seen.insert(id, doc);
    }
    let Some(text) = legacy else { return refused };
    let legacy = Legacy { cfg: &report.config, text };
    let mut conflicts = Vec::new();
    for (i, doc) in typed.iter().enumerate() {
        if let Some((path, why)) = doc.doc.body().legacy_conflict(&legacy) {
            refused.insert(i);
            let line = legacy.line_of(path).map(|l| format!(" (line {l})")).unwrap_or_default();
            conflicts.push(doc_error(
                doc,
                format!("{why}: {path}{line} in the v1alpha1 document, and this document"),
            ));
        }
    }
    report.errors.extend(conflicts);
    refused
}

fn doc_error(doc: &NetworkDocument, message: String) -> ConfigError {
    let mut e = ConfigError::new("", Some(Position { line: doc.line, column: 1 }), message);
    e.document = Some(doc.label());
    e
}

#[cfg(test)]
mod tests {
    use super::other_line_breaks;

    #[test]
    fn line_breaks_libyaml_adds() {
        for (text, other) in [
            ("a: 1\nb: 2\n", false),
            ("a: 1\r\nb: 2\r\n", false),
            ("a: 1\rb: 2", true),
            ("a: 1\r", true),
            ("a: \u{85}", true),
            ("a: \u{2028}b", true),
            ("a: \u{2029}", true),
            // Neighbours sharing the lead bytes: U+0084, U+00E9, U+2027, U+202A, U+20AC.
            ("a: \u{84}\u{e9}\u{2027}\u{202a}\u{20ac}\r\n", false),
            ("", false),
        ] {
            assert_eq!(other_line_breaks(text), other, "{text:?}");
        }
    }
}
