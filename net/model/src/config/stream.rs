// SPDX-License-Identifier: Apache-2.0
//! A configuration file as a stream of YAML documents: at most one v1alpha1 machine
//! configuration (`version: v1alpha1`) and any number of typed documents (`apiVersion:
//! v1alpha1`, `kind: ...`), checked one by one and then against each other as Talos does
//! (`pkg/machinery/config/container`: unique `Kind/name`, kinds that exclude each other,
//! and typed documents that would set what the v1alpha1 document already sets).

use std::collections::BTreeMap;

use super::bounds::{self, DocSpan};
use super::documents::{self, Document, Legacy, NetworkDocument, Problems, API_VERSION};
use super::error::{ConfigError, Position};
use super::locate::YamlPath;
use super::machine::MachineConfig;
use super::{known, validate};

/// Everything found in a configuration: the configuration as far as it loaded, every
/// error (each naming its document, path and line) and every warning.
#[derive(Debug, Default)]
pub struct Report {
    /// The configuration; meaningful only when `errors` is empty.
    pub config: MachineConfig,
    /// Every problem, in stream order (a document stops at its first shape error).
    pub errors: Vec<ConfigError>,
}

/// Check the whole stream, collecting every problem.
pub fn check(yaml: &str) -> Report {
    let yaml = yaml.strip_prefix('\u{feff}').unwrap_or(yaml);
    let mut report = Report::default();
    let spans = match bounds::check(yaml) {
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
    let many = spans.len() > 1;
    let mut legacy: Option<(usize, String)> = None;
    let mut typed: Vec<NetworkDocument> = Vec::new();
    for (i, span) in spans.iter().enumerate() {
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
                match legacy_document(&padded) {
                    Ok(cfg) => report.config = cfg,
                    Err(mut e) => {
                        if many {
                            e.document = Some(documents::label(number, "v1alpha1", None));
                        }
                        report.errors.push(e);
                    }
                }
                legacy = Some((number, padded));
            }
            Class::Typed(kind) => match Document::parse(kind, text) {
                Some(Ok(doc)) => {
                    let line = span.line_offset + 1;
                    let doc = NetworkDocument { number, line, doc };
                    let mut problems = Problems::default();
                    doc.doc.body().check(&mut problems);
                    report_problems(&mut report, &doc, problems, text, span.line_offset);
                    typed.push(doc);
                }
                Some(Err(e)) => {
                    let label = documents::label(number, kind, None);
                    report
                        .errors
                        .push(ConfigError::from_yaml(&e).in_document(&label, span.line_offset));
                }
                None if documents::NOT_IMPLEMENTED.contains(&kind) => {
                    report.config.warnings.push(format!(
                        "{} (line {}): a Talos document keelson does not implement yet; ignored",
                        documents::label(number, kind, None),
                        span.line_offset + 1,
                    ));
                }
                None => {
                    // The kinds are listed by `keelson config validate --help`, not here: the
                    // list outgrows a message.
                    let message = format!("unknown kind {:?}", crate::names::escape(kind, 32));
                    report.errors.push(at_key(number, kind, span, text, "kind", message));
                }
            },
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
    cross_check(&mut report, &typed, legacy.as_ref().map(|(_, text)| text.as_str()));
    if report.errors.is_empty() {
        for doc in typed {
            if !doc.doc.body().fold_into(&mut report.config) {
                report.config.documents.push(doc);
            }
        }
    }
    report
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

/// The v1alpha1 document: parsed, checked across values, and its warnings gathered.
fn legacy_document(yaml: &str) -> Result<MachineConfig, ConfigError> {
    let mut cfg: MachineConfig =
        serde_yaml::from_str(yaml).map_err(|e| ConfigError::from_yaml(&e))?;
    validate::check(&cfg, yaml).map_err(|(path, message)| {
        let position = path.locate(yaml);
        ConfigError::new(path.to_string(), position, message)
    })?;
    cfg.warnings = known::warnings(&cfg, yaml);
    cfg.warnings.extend(validate::warnings(&cfg, yaml));
    Ok(cfg)
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

/// A typed document's own errors and warnings, located in its text.
fn report_problems(
    report: &mut Report,
    doc: &NetworkDocument,
    problems: Problems,
    text: &str,
    line_offset: usize,
) {
    let label = doc.label();
    for (path, message) in problems.errors {
        let position = path.locate(text);
        report.errors.push(
            ConfigError::new(path.to_string(), position, message).in_document(&label, line_offset),
        );
    }
    for (path, message) in problems.warnings {
        let line = path.locate(text).map_or(doc.line, |p| p.line + line_offset);
        report.config.warnings.push(format!("{label}: {path} (line {line}): {message}"));
    }
}

/// Checks between documents: one document per `Kind/name`, no two kinds that exclude each
/// other for one name, nothing set both by a typed document and by the v1alpha1 one.
fn cross_check(report: &mut Report, typed: &[NetworkDocument], legacy: Option<&str>) {
    let mut seen: BTreeMap<String, &NetworkDocument> = BTreeMap::new();
    for doc in typed {
        let id = doc.doc.id();
        if let Some(first) = seen.get(&id) {
            report.errors.push(doc_error(
                doc,
                format!("{id} is configured twice (also {}, line {})", first.label(), first.line),
            ));
            continue;
        }
        let body = doc.doc.body();
        if let Some(name) = body.name() {
            for kind in body.conflicts_with() {
                if let Some(other) = seen.get(&format!("{kind}/{name}")) {
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
    let Some(text) = legacy else { return };
    let legacy = Legacy { cfg: &report.config, text };
    let mut conflicts = Vec::new();
    for doc in typed {
        if let Some((path, why)) = doc.doc.body().legacy_conflict(&legacy) {
            let line = legacy.line_of(path).map(|l| format!(" (line {l})")).unwrap_or_default();
            conflicts.push(doc_error(
                doc,
                format!("{why}: {path}{line} in the v1alpha1 document, and this document"),
            ));
        }
    }
    report.errors.extend(conflicts);
}

fn doc_error(doc: &NetworkDocument, message: String) -> ConfigError {
    let mut e = ConfigError::new("", Some(Position { line: doc.line, column: 1 }), message);
    e.document = Some(doc.label());
    e
}
