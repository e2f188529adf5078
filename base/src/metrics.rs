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
    /// The last histogram's bounds, formatted: histograms of one family share their bounds,
    /// and formatting a fraction is among the dearest steps of a scrape.
    bounds: Option<(&'static [f64], Vec<String>)>,
}

impl Exposition {
    /// An empty scrape in `format`.
    pub fn new(format: Format) -> Self {
        Self::with_buffer(format, String::new())
    }

    /// An empty scrape in `format`, written into `buf` (cleared first): a caller that hands
    /// back the last scrape's text keeps its allocation, rather than growing a new one.
    pub fn with_buffer(format: Format, mut buf: String) -> Self {
        buf.clear();
        Self { format, out: buf, family: None, bounds: None }
    }

    /// Start a family: its `# HELP` and `# TYPE` lines. `name` is the family's base name
    /// (without `_total` for a counter). Samples written after this belong to it.
    pub fn family(&mut self, name: &'static str, kind: Type, help: &str) -> &mut Self {
        debug_assert!(valid_name(name), "metric name {name:?}");
        debug_assert!(!(kind == Type::Counter && name.ends_with("_total")), "{name}: no _total");
        let total = match (kind, self.format) {
            (Type::Counter, Format::Prometheus) => "_total",
            _ => "",
        };
        let kind_text = match kind {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        };
        self.out.push_str("# HELP ");
        self.out.push_str(name);
        self.out.push_str(total);
        self.out.push(' ');
        escape_help(&mut self.out, help);
        self.out.push_str("\n# TYPE ");
        self.out.push_str(name);
        self.out.push_str(total);
        self.out.push(' ');
        self.out.push_str(kind_text);
        self.out.push('\n');
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
        let mut bounds = match self.bounds.take() {
            Some((b, text)) if std::ptr::eq(b, h.bounds) => text,
            _ => h
                .bounds
                .iter()
                .map(|b| {
                    let mut s = String::new();
                    write_number(&mut s, *b);
                    s
                })
                .collect(),
        };
        let mut cumulative = 0u64;
        for (i, bound) in bounds.iter().enumerate() {
            cumulative += h.counts.get(i).copied().unwrap_or(0);
            self.line(name, "_bucket", labels, Some(Le::Bound(bound)), cumulative as f64);
        }
        self.bounds = Some((h.bounds, std::mem::take(&mut bounds)));
        let count = h.count() as f64;
        self.line(name, "_bucket", labels, Some(Le::Inf), count);
        self.line(name, "_sum", labels, None, h.sum);
        self.line(name, "_count", labels, None, count);
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
        le: Option<Le<'_>>,
        v: f64,
    ) {
        // Written straight into the one buffer: a scrape is thousands of lines, and a
        // temporary string per number or label would be most of its cost.
        let out = &mut self.out;
        out.push_str(name);
        out.push_str(suffix);
        if !labels.is_empty() || le.is_some() {
            out.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                debug_assert!(valid_name(k) && !k.contains(':'), "label name {k:?}");
                if i > 0 {
                    out.push(',');
                }
                out.push_str(k);
                out.push_str("=\"");
                escape_label(out, val);
                out.push('"');
            }
            if let Some(le) = le {
                if !labels.is_empty() {
                    out.push(',');
                }
                out.push_str("le=\"");
                match le {
                    Le::Bound(b) => out.push_str(b),
                    Le::Inf => out.push_str("+Inf"),
                }
                out.push('"');
            }
            out.push('}');
        }
        out.push(' ');
        write_number(out, v);
        out.push('\n');
    }
}

/// A histogram bucket's upper bound.
#[derive(Clone, Copy)]
enum Le<'a> {
    /// Already formatted.
    Bound(&'a str),
    Inf,
}

/// A sample value as both formats accept it.
#[cfg(test)]
fn number(v: f64) -> String {
    let mut s = String::new();
    write_number(&mut s, v);
    s
}

/// [`number`], appended to `out`.
fn write_number(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// A label value, appended with backslash, double quote and newline escaped.
fn escape_label(out: &mut String, v: &str) {
    if !v.contains(['\\', '"', '\n']) {
        out.push_str(v);
        return;
    }
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Help text, appended with backslash and newline escaped.
fn escape_help(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
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
    fn histograms_with_other_bounds_get_their_own_and_a_reused_buffer_starts_empty() {
        static A: [f64; 2] = [0.5, 1.0];
        static B: [f64; 1] = [0.25];
        let (mut a, mut b) = (Histogram::new(&A), Histogram::new(&B));
        a.observe(0.75);
        b.observe(0.1);
        let old = String::from("left over from the last scrape\n");
        let mut e = Exposition::with_buffer(Format::Prometheus, old);
        e.family("h", Type::Histogram, "H.");
        e.histogram(&[("k", "a")], &a).histogram(&[("k", "b")], &b).histogram(&[("k", "c")], &a);
        assert_eq!(
            e.finish(),
            "# HELP h H.\n# TYPE h histogram\n\
             h_bucket{k=\"a\",le=\"0.5\"} 0\nh_bucket{k=\"a\",le=\"1\"} 1\n\
             h_bucket{k=\"a\",le=\"+Inf\"} 1\nh_sum{k=\"a\"} 0.75\nh_count{k=\"a\"} 1\n\
             h_bucket{k=\"b\",le=\"0.25\"} 1\nh_bucket{k=\"b\",le=\"+Inf\"} 1\n\
             h_sum{k=\"b\"} 0.1\nh_count{k=\"b\"} 1\n\
             h_bucket{k=\"c\",le=\"0.5\"} 0\nh_bucket{k=\"c\",le=\"1\"} 1\n\
             h_bucket{k=\"c\",le=\"+Inf\"} 1\nh_sum{k=\"c\"} 0.75\nh_count{k=\"c\"} 1\n"
        );
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
