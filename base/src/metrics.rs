// SPDX-License-Identifier: Apache-2.0
//! Metrics as text a Prometheus server scrapes: the Prometheus text exposition format 0.0.4,
//! or OpenMetrics 1.0 when the scraper asks for it in `Accept`. Pure: the caller keeps its
//! counters however suits it and writes them out here at scrape time, so nothing is shared
//! between the code that counts and the code that serves.
//!
//! Formats: <https://prometheus.io/docs/instrumenting/exposition_formats/> and
//! <https://github.com/prometheus/OpenMetrics/blob/main/specification/OpenMetrics.md>. The
//! one difference that matters here: a counter family is named without `_total` in
//! OpenMetrics' `# TYPE` line and with it in Prometheus's, while the sample is `_total` in both;
//! OpenMetrics ends with `# EOF`.
//!
//! Names are the caller's constants (checked in debug builds); label values may come from
//! input and are escaped, but a caller must bound how many distinct values a label can take.

use std::fmt::Write;

/// Which text format a scrape gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names it, else Prometheus.
    pub fn from_accept(accept: Option<&[u8]>) -> Self {
        let asks = accept.is_some_and(|a| {
            a.windows(b"application/openmetrics-text".len())
                .any(|w| w.eq_ignore_ascii_case(b"application/openmetrics-text"))
        });
        if asks {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// Only goes up; samples are `<name>_total`.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Buckets, `_sum` and `_count`.
    Histogram,
}

/// Cumulative buckets of observed values, with their sum and count.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Per bound, the observations at or below it but above the previous bound; the last slot
    /// counts those above every bound.
    counts: Vec<u64>,
    sum: f64,
}

impl Histogram {
    /// Empty, with these upper bounds (ascending; `+Inf` is implied).
    pub fn new(bounds: &'static [f64]) -> Self {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]), "bounds must ascend");
        Self { bounds, counts: vec![0; bounds.len() + 1], sum: 0.0 }
    }

    /// Count one observation.
    pub fn observe(&mut self, v: f64) {
        let slot = self.bounds.iter().position(|b| v <= *b).unwrap_or(self.bounds.len());
        if let Some(c) = self.counts.get_mut(slot) {
            *c += 1;
        }
        self.sum += v;
    }

    /// How many observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Text being written for one scrape.
#[derive(Debug)]
pub struct Exposition {
    format: Format,
    out: String,
    /// The family whose samples are being written, and its type.
    family: Option<(&'static str, Type)>,
}

impl Exposition {
    /// An empty scrape in `format`.
    pub fn new(format: Format) -> Self {
        Self { format, out: String::new(), family: None }
    }

    /// Start a family: its `# HELP` and `# TYPE` lines. `name` is the family's base name
    /// (without `_total` for a counter). Samples written after this belong to it.
    pub fn family(&mut self, name: &'static str, kind: Type, help: &str) -> &mut Self {
        debug_assert!(valid_name(name), "metric name {name:?}");
        debug_assert!(!(kind == Type::Counter && name.ends_with("_total")), "{name}: no _total");
        let type_name = match (kind, self.format) {
            (Type::Counter, Format::Prometheus) => format!("{name}_total"),
            _ => name.to_owned(),
        };
        let kind_text = match kind {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        };
        let _ = writeln!(self.out, "# HELP {type_name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {type_name} {kind_text}");
        self.family = Some((name, kind));
        self
    }

    /// One sample of the current counter or gauge family.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) -> &mut Self {
        let Some((name, kind)) = self.family else {
            debug_assert!(false, "a sample before its family");
            return self;
        };
        let suffix = if kind == Type::Counter { "_total" } else { "" };
        self.line(name, suffix, labels, None, value);
        self
    }

    /// The current histogram family's samples for one label set.
    pub fn histogram(&mut self, labels: &[(&str, &str)], h: &Histogram) -> &mut Self {
        let Some((name, Type::Histogram)) = self.family else {
            debug_assert!(false, "a histogram outside a histogram family");
            return self;
        };
        let mut cumulative = 0u64;
        for (i, bound) in h.bounds.iter().enumerate() {
            cumulative += h.counts.get(i).copied().unwrap_or(0);
            self.line(name, "_bucket", labels, Some(&number(*bound)), cumulative as f64);
        }
        self.line(name, "_bucket", labels, Some("+Inf"), h.count() as f64);
        self.line(name, "_sum", labels, None, h.sum);
        self.line(name, "_count", labels, None, h.count() as f64);
        self
    }

    /// The finished text.
    pub fn finish(mut self) -> String {
        if self.format == Format::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }

    fn line(
        &mut self,
        name: &str,
        suffix: &str,
        labels: &[(&str, &str)],
        le: Option<&str>,
        v: f64,
    ) {
        self.out.push_str(name);
        self.out.push_str(suffix);
        if !labels.is_empty() || le.is_some() {
            self.out.push('{');
            let le = le.map(|b| ("le", b));
            for (i, (k, val)) in labels.iter().copied().chain(le).enumerate() {
                debug_assert!(valid_name(k) && !k.contains(':'), "label name {k:?}");
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(val));
            }
            self.out.push('}');
        }
        self.out.push(' ');
        self.out.push_str(&number(v));
        self.out.push('\n');
    }
}

/// A sample value as both formats accept it.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// A label value: backslash, double quote and newline escaped.
fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Help text: backslash and newline escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_is_named_with_total_in_prometheus_and_without_in_openmetrics_type_lines() {
        for (format, type_line) in [
            (Format::Prometheus, "# TYPE calls_total counter"),
            (Format::OpenMetrics, "# TYPE calls counter"),
        ] {
            let mut e = Exposition::new(format);
            e.family("calls", Type::Counter, "Calls.").sample(&[("rpc", "Hello")], 3.0);
            let text = e.finish();
            assert!(text.contains(type_line), "{text}");
            assert!(text.contains("\ncalls_total{rpc=\"Hello\"} 3\n"), "{text}");
            assert_eq!(text.ends_with("# EOF\n"), format == Format::OpenMetrics);
        }
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut e = Exposition::new(Format::Prometheus);
        e.family("x", Type::Gauge, "two\nlines \\ here").sample(&[("v", "a\"b\\c\nd")], 1.5);
        assert_eq!(
            e.finish(),
            "# HELP x two\\nlines \\\\ here\n# TYPE x gauge\nx{v=\"a\\\"b\\\\c\\nd\"} 1.5\n"
        );
    }

    #[test]
    fn histogram_buckets_are_cumulative_with_inf_sum_and_count() {
        static BOUNDS: [f64; 3] = [0.001, 0.01, 0.1];
        let mut h = Histogram::new(&BOUNDS);
        for v in [0.0005, 0.002, 0.003, 5.0] {
            h.observe(v);
        }
        let mut e = Exposition::new(Format::Prometheus);
        e.family("d_seconds", Type::Histogram, "D.").histogram(&[("c", "a")], &h);
        let text = e.finish();
        for want in [
            "d_seconds_bucket{c=\"a\",le=\"0.001\"} 1\n",
            "d_seconds_bucket{c=\"a\",le=\"0.01\"} 3\n",
            "d_seconds_bucket{c=\"a\",le=\"0.1\"} 3\n",
            "d_seconds_bucket{c=\"a\",le=\"+Inf\"} 4\n",
            "d_seconds_sum{c=\"a\"} 5.0055\n",
            "d_seconds_count{c=\"a\"} 4\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
    }

    #[test]
    fn accept_picks_the_format() {
        assert_eq!(Format::from_accept(None), Format::Prometheus);
        assert_eq!(Format::from_accept(Some(b"text/plain;version=0.0.4")), Format::Prometheus);
        let prom = b"application/OpenMetrics-text;version=1.0.0,text/plain;q=0.5";
        assert_eq!(Format::from_accept(Some(prom)), Format::OpenMetrics);
    }

    #[test]
    fn numbers_print_as_both_formats_read_them() {
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(1e20), "100000000000000000000");
    }
}
