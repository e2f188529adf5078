// SPDX-License-Identifier: Apache-2.0
//! Just enough DER (X.690) to read a certificate's subject: the attributes of its
//! distinguished name, each with its OID, string tag and value. Roles live in the subject's
//! Organization (as Talos puts them), and a CA's subject is copied into the certificates it
//! issues. Pure, bounded by the input: every length is checked against what is left.

/// Why a certificate could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed certificate: {0}")]
pub struct DerError(&'static str);

/// One attribute of a distinguished name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// The attribute type's OID, DER-encoded content (no tag or length).
    pub oid: Vec<u8>,
    /// The value's tag (PrintableString 0x13, UTF8String 0x0c, ...).
    pub tag: u8,
    /// The value's bytes.
    pub value: Vec<u8>,
}

/// id-at-organizationName, 2.5.4.10.
pub const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];
/// id-at-commonName, 2.5.4.3.
#[cfg(test)]
pub const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

/// One TLV: (tag, content, rest).
pub(crate) fn tlv(input: &[u8]) -> Result<(u8, &[u8], &[u8]), DerError> {
    let (&tag, rest) = input.split_first().ok_or(DerError("truncated"))?;
    let (&first, rest) = rest.split_first().ok_or(DerError("truncated length"))?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return Err(DerError("bad length"));
        }
        let (bytes, rest) = rest.split_at(n);
        (bytes.iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b)), rest)
    };
    if rest.len() < len {
        return Err(DerError("length past the end"));
    }
    let (content, rest) = rest.split_at(len);
    Ok((tag, content, rest))
}

pub(crate) fn expect<'a>(
    input: &'a [u8],
    want: u8,
    what: &'static str,
) -> Result<(&'a [u8], &'a [u8]), DerError> {
    let (tag, content, rest) = tlv(input)?;
    if tag != want {
        return Err(DerError(what));
    }
    Ok((content, rest))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;

/// The TBSCertificate from its subject on (subject, subjectPublicKeyInfo, ...).
fn from_subject(cert: &[u8]) -> Result<&[u8], DerError> {
    let (cert, _) = expect(cert, SEQUENCE, "not a SEQUENCE")?;
    let (tbs, _) = expect(cert, SEQUENCE, "no TBSCertificate")?;
    let mut rest = tbs;
    // [0] EXPLICIT version, optional.
    if rest.first() == Some(&0xa0) {
        rest = tlv(rest)?.2;
    }
    // serialNumber, signature, issuer, validity: skipped.
    for _ in 0..4 {
        rest = tlv(rest)?.2;
    }
    Ok(rest)
}

/// The end of a DER certificate's validity (notAfter), in seconds since the Unix epoch: when
/// a certificate a signer chose the lifetime of is to be renewed.
pub fn not_after(cert: &[u8]) -> Result<i64, DerError> {
    let (cert, _) = expect(cert, SEQUENCE, "not a SEQUENCE")?;
    let (tbs, _) = expect(cert, SEQUENCE, "no TBSCertificate")?;
    let mut rest = tbs;
    if rest.first() == Some(&0xa0) {
        rest = tlv(rest)?.2;
    }
    // serialNumber, signature, issuer: skipped.
    for _ in 0..3 {
        rest = tlv(rest)?.2;
    }
    let (validity, _) = expect(rest, SEQUENCE, "no validity")?;
    let (_, _, rest) = tlv(validity)?;
    let (tag, text, _) = tlv(rest)?;
    time_of(tag, text)
}

/// UTCTime (`YYMMDDHHMMSSZ`, years 1950-2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`), as
/// RFC 5280 §4.1.2.5 has certificates write them, to Unix seconds.
fn time_of(tag: u8, text: &[u8]) -> Result<i64, DerError> {
    const BAD: DerError = DerError("bad time");
    // The decimal number in text[at..at + n].
    let num = |at: usize, n: usize| -> Result<i64, DerError> {
        let part = text.get(at..at + n).ok_or(BAD)?;
        part.iter().try_fold(0i64, |v, &c| {
            if c.is_ascii_digit() {
                Ok(v * 10 + i64::from(c - b'0'))
            } else {
                Err(BAD)
            }
        })
    };
    let (year, at) = match (tag, text.len()) {
        (0x17, 13) => {
            let yy = num(0, 2)?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, 2)
        }
        (0x18, 15) => (num(0, 4)?, 4),
        _ => return Err(BAD),
    };
    if text.last() != Some(&b'Z') {
        return Err(BAD);
    }
    let small = |i: usize| num(at + i, 2).and_then(|v| u8::try_from(v).map_err(|_| BAD));
    let month = time::Month::try_from(small(0)?).map_err(|_| BAD)?;
    let year = i32::try_from(year).map_err(|_| BAD)?;
    let date = time::Date::from_calendar_date(year, month, small(2)?).map_err(|_| BAD)?;
    let at = date.with_hms(small(4)?, small(6)?, small(8)?).map_err(|_| BAD)?;
    Ok(at.assume_utc().unix_timestamp())
}

/// The public key a DER certificate certifies: the subjectPublicKey BIT STRING's bits (for
/// Ed25519 the 32-byte key, for ECDSA the encoded point), to compare with a private key's.
pub fn subject_public_key(cert: &[u8]) -> Result<Vec<u8>, DerError> {
    let (_, _, rest) = tlv(from_subject(cert)?)?;
    let (spki, _) = expect(rest, SEQUENCE, "no subjectPublicKeyInfo")?;
    let (_, _, rest) = tlv(spki)?;
    let (bits, _) = expect(rest, 0x03, "no subjectPublicKey")?;
    match bits.split_first() {
        Some((0, key)) => Ok(key.to_vec()),
        _ => Err(DerError("bad subjectPublicKey")),
    }
}

/// The subject of a DER certificate, attribute by attribute, in order.
pub fn subject(cert: &[u8]) -> Result<Vec<Attribute>, DerError> {
    let (name, _) = expect(from_subject(cert)?, SEQUENCE, "no subject")?;
    let mut attrs = Vec::new();
    let mut rdns = name;
    while !rdns.is_empty() {
        let (set, next) = expect(rdns, SET, "bad RDN")?;
        rdns = next;
        let mut items = set;
        while !items.is_empty() {
            let (atv, next) = expect(items, SEQUENCE, "bad attribute")?;
            items = next;
            let (oid, value) = expect(atv, 0x06, "bad attribute type")?;
            let (tag, value, _) = tlv(value)?;
            attrs.push(Attribute { oid: oid.to_vec(), tag, value: value.to_vec() });
        }
    }
    Ok(attrs)
}

/// The subject's Organization values (Talos's roles: `os:admin`, `os:reader`, ...).
pub fn organizations(cert: &[u8]) -> Result<Vec<String>, DerError> {
    Ok(subject(cert)?
        .into_iter()
        .filter(|a| a.oid == OID_ORGANIZATION)
        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_read_as_rfc_5280_writes_them() {
        assert_eq!(super::time_of(0x17, b"700101000000Z"), Ok(0));
        assert_eq!(super::time_of(0x17, b"491231235959Z"), Ok(2_524_607_999));
        assert_eq!(super::time_of(0x18, b"20500101000000Z"), Ok(2_524_608_000));
        for bad in [&b"700101000000"[..], b"7001010000000", b"70010100000aZ", b"701301000000Z"] {
            assert!(super::time_of(0x17, bad).is_err(), "{bad:?}");
        }
        assert!(super::time_of(0x04, b"700101000000Z").is_err());
    }

    use super::*;

    #[test]
    fn reads_the_subject_of_a_generated_certificate() {
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "os:reader");
        params.distinguished_name.push(rcgen::DnType::CommonName, "someone");
        let key = rcgen::KeyPair::generate().unwrap_or_else(|e| unreachable!("{e}"));
        let cert = params.self_signed(&key).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(organizations(cert.der()), Ok(vec!["os:reader".to_owned()]));
        let attrs = subject(cert.der()).unwrap_or_default();
        assert!(attrs.iter().any(|a| a.oid == OID_COMMON_NAME && a.value == b"someone"));
        assert_eq!(subject_public_key(cert.der()).ok(), Some(key.public_key_raw().to_vec()));
    }

    #[test]
    fn refuses_garbage_without_panicking() {
        for bad in
            [&b""[..], b"\x30", b"\x30\x84\xff\xff\xff\xff", b"\x30\x03\x30\x01", b"\x04\x00"]
        {
            assert!(subject(bad).is_err(), "{bad:?}");
        }
        // Every truncation of a real certificate fails cleanly.
        let key = rcgen::KeyPair::generate().unwrap_or_else(|e| unreachable!("{e}"));
        let cert = rcgen::CertificateParams::default()
            .self_signed(&key)
            .unwrap_or_else(|e| unreachable!("{e}"));
        let der = cert.der().to_vec();
        for n in 0..der.len() {
            let _ = subject(&der[..n]);
            let _ = subject_public_key(&der[..n]);
        }
        assert!(subject(&der).is_ok());
    }
}
