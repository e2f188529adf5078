// SPDX-License-Identifier: Apache-2.0
//! Splitting a kernel command line into `key[=value]` parameters, the way the kernel's
//! `next_arg()` (`lib/cmdline.c`) does, while keeping byte offsets for error columns.
//!
//! Kernel rules kept here:
//! * parameters are separated by whitespace outside double quotes;
//! * a `"` anywhere toggles quoting, but only a quote opening the parameter, a quote opening
//!   the value and the closing quote at the very end are removed; inner quotes stay;
//! * the first `=` separates key and value, even inside quotes;
//! * a bare `--` ends the kernel's parameters (the rest belongs to init).
//!
//! Because only edge quotes are removed, every key and value is a contiguous slice of the
//! command line, so an offset into a value is also an offset into the whole line.

/// One parameter: borrowed slices of the command line plus their byte offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Param<'a> {
    /// The key (`ip`, `talos.hostname`, `keelson.debug`).
    pub key: &'a str,
    /// Byte offset of the key.
    pub key_offset: usize,
    /// The value without its surrounding quotes; `None` for a flag without `=`.
    pub value: Option<&'a str>,
    /// Byte offset of the value (meaningful only when `value` is set).
    pub value_offset: usize,
}

/// The parameters of a command line, and the offset of a quote left open (the kernel then
/// takes everything up to the end of the line as one parameter).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Tokens<'a> {
    /// Parameters in command line order.
    pub params: Vec<Param<'a>>,
    /// Byte offset of the parameter whose quote was never closed.
    pub unterminated_quote: Option<usize>,
}

/// The kernel's `isspace()` for the ASCII range.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Split `cmdline` into parameters (see the module docs for the rules).
pub(crate) fn tokenize(cmdline: &str) -> Tokens<'_> {
    let bytes = cmdline.as_bytes();
    let mut tokens = Tokens::default();
    let mut i = 0;
    while i < bytes.len() {
        if is_space(bytes[i]) {
            i += 1;
            continue;
        }
        let param_start = i;
        let quoted = bytes[i] == b'"';
        let start = if quoted { i + 1 } else { i };
        let mut in_quote = quoted;
        let mut equals = None;
        let mut end = start;
        while end < bytes.len() && (in_quote || !is_space(bytes[end])) {
            match bytes[end] {
                b'=' if equals.is_none() => equals = Some(end),
                b'"' => in_quote = !in_quote,
                _ => {}
            }
            end += 1;
        }
        i = end;
        if in_quote {
            tokens.unterminated_quote.get_or_insert(param_start);
        }

        let (key_end, mut value_start, value_quoted) = match equals {
            Some(eq) => {
                let value_quoted = bytes.get(eq + 1) == Some(&b'"');
                (eq, eq + 1 + usize::from(value_quoted), value_quoted)
            }
            None => (end, end, false),
        };
        // The closing quote goes only if something opened one; `end - 1 >= value_start`
        // keeps a lone `"` value from being stripped twice.
        let mut content_end = end;
        if (quoted || value_quoted)
            && end > start
            && bytes[end - 1] == b'"'
            && (equals.is_none() || end > value_start)
        {
            content_end = end - 1;
        }
        value_start = value_start.min(content_end);
        let key = &cmdline[start..key_end.min(content_end)];
        if equals.is_none() && key == "--" {
            break;
        }
        tokens.params.push(Param {
            key,
            key_offset: start,
            value: equals.map(|_| &cmdline[value_start..content_end]),
            value_offset: value_start,
        });
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(cmdline: &str) -> Vec<(&str, Option<&str>)> {
        tokenize(cmdline).params.iter().map(|p| (p.key, p.value)).collect()
    }

    #[test]
    fn splits_on_whitespace_and_first_equals() {
        assert_eq!(
            pairs("  console=ttyS0,115200\tquiet ip=a=b  "),
            [("console", Some("ttyS0,115200")), ("quiet", None), ("ip", Some("a=b"))]
        );
    }

    #[test]
    fn strips_edge_quotes_only() {
        assert_eq!(
            pairs(r#"talos.hostname="a b" "ip=x y" k="in"ner"" e="#),
            [
                ("talos.hostname", Some("a b")),
                ("ip", Some("x y")),
                ("k", Some(r#"in"ner""#)),
                ("e", Some("")),
            ]
        );
        assert_eq!(pairs(r#"k="""#), [("k", Some(""))]);
        assert_eq!(pairs(r#"k=""#), [("k", Some(""))]);
    }

    #[test]
    fn offsets_point_into_the_line() {
        let line = r#"a=1 "b=22" c="333""#;
        let t = tokenize(line);
        for p in &t.params {
            assert_eq!(&line[p.key_offset..p.key_offset + p.key.len()], p.key);
            let v = p.value.unwrap_or_default();
            assert_eq!(&line[p.value_offset..p.value_offset + v.len()], v);
        }
        assert_eq!(t.params[1].value_offset, 7);
        assert_eq!(t.params[2].value_offset, 14);
    }

    #[test]
    fn double_dash_ends_kernel_params() {
        assert_eq!(pairs("a=1 -- ip=dhcp"), [("a", Some("1"))]);
        assert_eq!(pairs("a=--"), [("a", Some("--"))]);
    }

    #[test]
    fn unterminated_quote_runs_to_the_end() {
        let t = tokenize(r#"x=1 k="a b c"#);
        assert_eq!(t.unterminated_quote, Some(4));
        assert_eq!(t.params[1].value, Some("a b c"));
    }
}
