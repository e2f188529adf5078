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

/// `template` with every variable it uses substituted; `Err` lists those not known yet.
pub fn substitute(template: &str, values: &Values) -> Result<String, Vec<Var>> {
    let vars = used(template).unwrap_or_default();
    let missing: Vec<Var> = vars.iter().copied().filter(|v| values.get(*v).is_empty()).collect();
    if !missing.is_empty() {
        return Err(missing);
    }
    let mut out = template.to_owned();
    for v in vars {
        let value = encode(values.get(v));
        // From the end, so earlier offsets stay valid.
        let len = v.name().len() + 3;
        for i in find_all(&out, v).into_iter().rev() {
            out.replace_range(i..i + len, &value);
        }
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
        assert_eq!(substitute("http://x/?h=${hostname}&m=${mac}", &v), Err(vec![Var::Hostname]));
        assert_eq!(substitute("http://x/?uuid=", &Values::default()), Err(vec![Var::Uuid]));
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
            substitute("http://x/${hostname}", &v),
            Ok("http://x/a%3Fb%3Dc%23d%2F..%2Fe%25".into())
        );
    }
}
