// SPDX-License-Identifier: Apache-2.0
//! The variables of a config URL, as Talos's metal platform has them: `${uuid}`, `${serial}`,
//! `${mac}`, `${hostname}` (names matched without regard to case), and the older form
//! `?uuid=` with an empty value, which gets the system UUID. A variable is substituted only
//! once its value is known (the hostname may come from DHCP); until then the fetch waits.
//! Values are percent-encoded (everything but RFC 3986's unreserved characters), so a serial
//! number with `/`, `&` or `#` in it stays one path segment or one query value.
//!
//! Where keelson goes further than Talos, which substitutes in the query only: variables are
//! substituted in the path too (`http://server/${mac}.yaml`). `${code}` needs Talos's META
//! partition, which keelson does not have: a URL using it is refused. Anything else that looks
//! like a variable (`${foo}`) is sent as written.

/// One variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Var {
    /// SMBIOS system UUID.
    Uuid,
    /// SMBIOS system serial number.
    Serial,
    /// The MAC of the first physical link by name.
    Mac,
    /// The node's hostname.
    Hostname,
}

impl Var {
    const ALL: [Self; 4] = [Self::Uuid, Self::Serial, Self::Mac, Self::Hostname];

    /// Its name inside `${}`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Uuid => "uuid",
            Self::Serial => "serial",
            Self::Mac => "mac",
            Self::Hostname => "hostname",
        }
    }
}

/// Why a URL's variables cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VarError {
    /// `${code}`.
    #[error(
        "${{code}} is not supported (it needs Talos's META partition, which keelson does not have)"
    )]
    Code,
}

/// The values known so far; an empty one is not known yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Values {
    /// SMBIOS UUID.
    pub uuid: String,
    /// SMBIOS serial.
    pub serial: String,
    /// First physical MAC, `aa:bb:...`.
    pub mac: String,
    /// Hostname.
    pub hostname: String,
}

impl Values {
    fn get(&self, v: Var) -> &str {
        match v {
            Var::Uuid => &self.uuid,
            Var::Serial => &self.serial,
            Var::Mac => &self.mac,
            Var::Hostname => &self.hostname,
        }
    }
}

/// Byte offsets of `${name}` (any case) in `s`.
fn find_all(s: &str, v: Var) -> Vec<usize> {
    let pat = format!("${{{}}}", v.name());
    let lower = s.to_ascii_lowercase();
    lower.match_indices(&pat).map(|(i, _)| i).collect()
}

/// Is there a query parameter `uuid` with an empty value (the older form)?
fn legacy_uuid(s: &str) -> bool {
    s.split_once('?').is_some_and(|(_, q)| {
        q.split('&').any(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            k == "uuid" && v.trim().is_empty()
        })
    })
}

/// The variables `template` uses, in a fixed order.
pub fn used(template: &str) -> Result<Vec<Var>, VarError> {
    if template.to_ascii_lowercase().contains("${code}") {
        return Err(VarError::Code);
    }
    Ok(Var::ALL
        .into_iter()
        .filter(|v| {
            !find_all(template, *v).is_empty() || (*v == Var::Uuid && legacy_uuid(template))
        })
        .collect())
}

/// Percent-encode all but RFC 3986's unreserved characters.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Why a URL cannot be made from its template yet, or at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubstError {
    /// These variables have no value yet: wait.
    #[error("waiting for URL variables")]
    Missing(Vec<Var>),
    /// The value of this variable would make a dot-segment (`.` or `..`) of the URL's path,
    /// as it is or once percent-decoded: a server that normalises the path would serve
    /// another file. Refused, not encoded: `%2E` is `.` (RFC 3986 section 2.3), and servers
    /// decode it before removing dot-segments.
    #[error("the value of ${{{}}} would make a dot-segment (. or ..) in the URL's path", .0.name())]
    DotSegment(Var),
}

/// `template` with every variable it uses substituted.
pub fn substitute(template: &str, values: &Values) -> Result<String, SubstError> {
    let vars = used(template).unwrap_or_default();
    let missing: Vec<Var> = vars.iter().copied().filter(|v| values.get(*v).is_empty()).collect();
    if !missing.is_empty() {
        return Err(SubstError::Missing(missing));
    }
    // Where each variable lands, in template order (names do not overlap: each starts with
    // `${` and ends with `}`).
    let mut at: Vec<(usize, Var)> = vars
        .iter()
        .flat_map(|v| find_all(template, *v).into_iter().map(move |i| (i, *v)))
        .collect();
    at.sort_unstable();
    let mut out = String::with_capacity(template.len());
    // For each substituted value: its byte range in `out` and its variable.
    let mut placed: Vec<(std::ops::Range<usize>, Var)> = Vec::new();
    let mut from = 0;
    for (i, v) in at {
        out.push_str(template.get(from..i).unwrap_or_default());
        let start = out.len();
        out.push_str(&encode(values.get(v)));
        placed.push((start..out.len(), v));
        from = i + v.name().len() + 3;
    }
    out.push_str(template.get(from..).unwrap_or_default());
    if let Some(v) = dot_segment(&out, &placed) {
        return Err(SubstError::DotSegment(v));
    }
    if legacy_uuid(&out) {
        if let Some((base, q)) = out.split_once('?') {
            let uuid = encode(&values.uuid);
            let q: Vec<String> = q
                .split('&')
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    if k == "uuid" && v.trim().is_empty() {
                        format!("uuid={uuid}")
                    } else {
                        kv.to_owned()
                    }
                })
                .collect();
            out = format!("{base}?{}", q.join("&"));
        }
    }
    Ok(out)
}

/// The variable whose value makes a segment of `url`'s path (before `?` or `#`) a
/// dot-segment: the segment holds substituted bytes and, percent-decoded as often as it
/// decodes, is `.` or `..`, or has one between `/` or `\` (a server that decodes `%2F` before
/// normalising splits there). Segments the template wrote alone are the operator's.
fn dot_segment(url: &str, placed: &[(std::ops::Range<usize>, Var)]) -> Option<Var> {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    let mut start = 0;
    for segment in url.get(..end).unwrap_or_default().split('/') {
        let range = start..start + segment.len();
        start = range.end + 1;
        let Some((_, var)) =
            placed.iter().find(|(r, _)| r.start < range.end && range.start < r.end)
        else {
            continue;
        };
        let decoded = decode_fully(segment.as_bytes());
        if decoded.split(|b| *b == b'/' || *b == b'\\').any(|p| p == b"." || p == b"..") {
            return Some(*var);
        }
    }
    None
}

/// Percent-decode until nothing changes (each round shortens the text, so this ends; bounded
/// anyway). A `%` not followed by two hex digits stays as it is.
fn decode_fully(s: &[u8]) -> Vec<u8> {
    let mut cur = s.to_vec();
    for _ in 0..8 {
        let next = decode_once(&cur);
        if next == cur {
            break;
        }
        cur = next;
    }
    cur
}

fn decode_once(s: &[u8]) -> Vec<u8> {
    let hex = |b: u8| char::from(b).to_digit(16).and_then(|d| u8::try_from(d).ok());
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while let Some(&b) = s.get(i) {
        let pair = (s.get(i + 1).copied().and_then(hex), s.get(i + 2).copied().and_then(hex));
        match (b, pair) {
            (b'%', (Some(h), Some(l))) => {
                out.push((h << 4) | l);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> Values {
        Values {
            uuid: "0000-1234".into(),
            serial: "SN 42/A&b".into(),
            mac: "12:34:56:78:90:ab".into(),
            hostname: "node-1".into(),
        }
    }

    #[test]
    fn no_variables() {
        assert_eq!(used("https://example.com?foo=bar"), Ok(vec![]));
        assert_eq!(
            substitute("https://example.com?foo=bar", &Values::default()),
            Ok("https://example.com?foo=bar".into())
        );
    }

    #[test]
    fn query_and_path_any_case() {
        let t =
            "http://10.0.2.2:8000/${MAC}/c.yaml?uuid=${uuid}&no=${Serial}&h=${hostname}&u2=${uuid}";
        assert_eq!(used(t), Ok(vec![Var::Uuid, Var::Serial, Var::Mac, Var::Hostname]));
        assert_eq!(
            substitute(t, &values()),
            Ok("http://10.0.2.2:8000/12%3A34%3A56%3A78%3A90%3Aab/c.yaml?uuid=0000-1234&no=SN%2042%2FA%26b&h=node-1&u2=0000-1234".into())
        );
    }

    #[test]
    fn legacy_uuid_form() {
        assert_eq!(used("https://example.com?uuid="), Ok(vec![Var::Uuid]));
        assert_eq!(
            substitute("https://example.com?a=1&uuid=&b=2", &values()),
            Ok("https://example.com?a=1&uuid=0000-1234&b=2".into())
        );
        assert_eq!(
            substitute("https://example.com?uuid", &values()),
            Ok("https://example.com?uuid=0000-1234".into())
        );
        // A uuid parameter with a value is left alone, as are other keys and the path.
        assert_eq!(used("https://example.com/uuid=?uuid=x&UUID="), Ok(vec![]));
    }

    #[test]
    fn waits_for_unknown_values() {
        let v = Values { hostname: String::new(), ..values() };
        assert_eq!(
            substitute("http://x/?h=${hostname}&m=${mac}", &v),
            Err(SubstError::Missing(vec![Var::Hostname]))
        );
        assert_eq!(
            substitute("http://x/?uuid=", &Values::default()),
            Err(SubstError::Missing(vec![Var::Uuid]))
        );
    }

    #[test]
    fn unknown_and_unsupported() {
        assert_eq!(
            substitute("http://x/${foo}?a=${uuid", &values()),
            Ok("http://x/${foo}?a=${uuid".into())
        );
        assert_eq!(used("http://x/?c=${CODE}"), Err(VarError::Code));
    }

    #[test]
    fn values_cannot_inject() {
        let v = Values { hostname: "a?b=c#d/../e%".into(), ..values() };
        assert_eq!(
            substitute("http://x/?h=${hostname}", &v),
            Ok("http://x/?h=a%3Fb%3Dc%23d%2F..%2Fe%25".into())
        );
        // In the path, `%2F..%2F` is `/../` to a server that decodes before normalising.
        assert_eq!(
            substitute("http://x/${hostname}", &v),
            Err(SubstError::DotSegment(Var::Hostname))
        );
    }

    /// A serial of `.` or `..` (or one that decodes to it) never becomes a path segment of
    /// its own: a server that normalises the path would serve another machine's config.
    #[test]
    fn values_never_make_dot_segments() {
        let with = |serial: &str| Values { serial: serial.into(), ..values() };
        for serial in ["..", ".", "%2E%2E", "%2e.", "%252E%252E", "./..", "..\\x", "a/../b"] {
            for template in [
                "http://x/configs/${serial}/node.yaml",
                "http://x/configs/${serial}",
                "http://x/${SERIAL}?a=b",
                "http://x/a/${serial}#f",
            ] {
                assert_eq!(
                    substitute(template, &with(serial)),
                    Err(SubstError::DotSegment(Var::Serial)),
                    "{serial:?} in {template}"
                );
            }
        }
        // With the template's own text a value can still make one.
        assert_eq!(
            substitute("http://x/.${serial}/n.yaml", &with(".")),
            Err(SubstError::DotSegment(Var::Serial))
        );
        // Dots that make no dot-segment, and dot values in the query, are fine.
        for (serial, template, want) in [
            ("...", "http://x/${serial}/n.yaml", "http://x/.../n.yaml"),
            ("..", "http://x/c/${serial}.yaml", "http://x/c/...yaml"),
            ("1.2", "http://x/${serial}", "http://x/1.2"),
            ("..", "http://x/c.yaml?serial=${serial}", "http://x/c.yaml?serial=.."),
            ("..", "http://x/c.yaml?a=1#${serial}", "http://x/c.yaml?a=1#.."),
        ] {
            assert_eq!(
                substitute(template, &with(serial)),
                Ok(want.into()),
                "{serial:?} in {template}"
            );
        }
        // The template's own dot-segments are the operator's.
        assert_eq!(
            substitute("http://x/a/../${serial}", &with("SN1")),
            Ok("http://x/a/../SN1".into())
        );
        let e = SubstError::DotSegment(Var::Serial).to_string();
        assert_eq!(
            e,
            "the value of ${serial} would make a dot-segment (. or ..) in the URL's path"
        );
    }
}
