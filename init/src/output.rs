// SPDX-License-Identifier: Apache-2.0
//! Rendering resources as a table, YAML documents or a JSON array (the seed's shapes).

use std::fmt::Write as _;
use std::io::Write;

use net::resource::{AnySpec, Resource};

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Yaml,
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "table" => Ok(Format::Table),
            "yaml" => Ok(Format::Yaml),
            "json" => Ok(Format::Json),
            _ => Err(format!("unknown output format {s:?} (want table, yaml or json)")),
        }
    }
}

/// Write resources in a format, streaming: a plan of 100,000 resources is never held as text.
pub fn render(out: &mut impl Write, resources: &[&Resource], format: Format) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    match format {
        Format::Table => out.write_all(table(resources).as_bytes()).map_err(io),
        Format::Yaml => {
            for (i, r) in resources.iter().enumerate() {
                if i > 0 {
                    out.write_all(b"---\n").map_err(io)?;
                }
                serde_yaml::to_writer(&mut *out, r).map_err(|e| e.to_string())?;
            }
            Ok(())
        }
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, resources).map_err(|e| e.to_string())?;
            out.write_all(b"\n").map_err(io)
        }
    }
}

/// The layer of a layered spec, for the table's LAYER column.
fn layer(spec: &AnySpec) -> String {
    let layer = match spec {
        AnySpec::AddressSpec(s) => s.layer,
        AnySpec::RouteSpec(s) => s.layer,
        AnySpec::LinkSpec(s) => s.layer,
        AnySpec::ResolverSpec(s) => s.layer,
        AnySpec::HostnameSpec(s) => s.layer,
        AnySpec::TimeServerSpec(s) => s.layer,
        AnySpec::OperatorSpec(s) => s.layer,
        AnySpec::RoutingRuleSpec(s) => s.layer,
        _ => return String::new(),
    };
    layer.to_string()
}

fn table(resources: &[&Resource]) -> String {
    let header = ["NAMESPACE", "TYPE", "ID", "VERSION", "LAYER"];
    let rows: Vec<[String; 5]> = resources
        .iter()
        .map(|r| {
            let m = &r.metadata;
            [
                m.namespace.to_string(),
                m.kind.to_string(),
                m.id.clone(),
                m.version.to_string(),
                layer(&r.spec),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                let _ = write!(l, "{cell:<w$}   ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&header);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    out
}
