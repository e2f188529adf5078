// SPDX-License-Identifier: Apache-2.0
//! Certificate subjects as the TLS layer hands them over (`api::der`): what the API server
//! reads its roles from, in certificates rustls has already verified or, for the CA's own
//! file, as read from disk.
//!
//! Oracles: no panic; attributes never hold more bytes than the certificate; the attributes
//! written back into a minimal certificate parse to the same list; the organizations are
//! exactly the subject's organization attributes.

use testkit::fuzzkit::{run, LenField, Mutator, Target, Verdict};

use crate::api::der::{organizations, subject, Attribute, OID_ORGANIZATION};

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend_from_slice(&bytes);
    }
    out.extend_from_slice(content);
    out
}

/// A certificate whose subject is `attrs`, one attribute per RDN, the rest placeholders.
fn certificate(attrs: &[Attribute]) -> Vec<u8> {
    let mut name = Vec::new();
    for a in attrs {
        let atv = [tlv(0x06, &a.oid), tlv(a.tag, &a.value)].concat();
        name.extend(tlv(0x31, &tlv(0x30, &atv)));
    }
    let tbs = [
        tlv(0xa0, &tlv(0x02, &[2])),
        tlv(0x02, &[1]),
        tlv(0x30, &[]),
        tlv(0x30, &[]),
        tlv(0x30, &[]),
        tlv(0x30, &name),
    ]
    .concat();
    tlv(0x30, &[tlv(0x30, &tbs), tlv(0x30, &[]), tlv(0x03, &[0])].concat())
}

/// Every TLV's length byte, walking into constructed values.
fn lengths(b: &[u8]) -> Vec<LenField> {
    fn walk(b: &[u8], start: usize, end: usize, depth: u8, out: &mut Vec<LenField>) {
        let mut at = start;
        while at + 2 <= end {
            let (tag, first) = (b[at], b[at + 1]);
            let (len, head) = if first < 0x80 {
                (usize::from(first), 2)
            } else {
                let n = usize::from(first & 0x7f);
                if n == 0 || n > 4 || at + 2 + n > end {
                    return;
                }
                let len =
                    b[at + 2..at + 2 + n].iter().fold(0usize, |a, x| (a << 8) | usize::from(*x));
                (len, 2 + n)
            };
            out.push(LenField::be(at + 1, head - 1));
            let body = at + head;
            if body + len > end {
                return;
            }
            if tag & 0x20 != 0 && depth < 8 {
                walk(b, body, body + len, depth + 1, out);
            }
            at = body + len;
        }
    }
    let mut out = Vec::new();
    walk(b, 0, b.len(), 0, &mut out);
    out
}

fn generated(org: &[&str], cn: &str) -> Vec<u8> {
    let mut params = rcgen::CertificateParams::default();
    for o in org {
        params.distinguished_name.push(rcgen::DnType::OrganizationName, *o);
    }
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().der().to_vec()
}

#[test]
fn fuzz_target_der() {
    let seeds = vec![
        generated(&["os:admin"], "admin"),
        generated(&["os:reader", "os:operator"], "a rather longer common name for the length"),
        certificate(&[
            Attribute { oid: OID_ORGANIZATION.to_vec(), tag: 0x0c, value: b"os:admin".to_vec() },
            Attribute { oid: vec![0x55, 4, 3], tag: 0x13, value: vec![b'x'; 300] },
        ]),
    ];
    let target = Target {
        name: "der",
        crate_dir: super::CRATE_DIR,
        seeds,
        mutator: Mutator {
            dict: &[
                b"\x30",
                b"\x31",
                b"\x06\x03\x55\x04\x0a",
                b"\x0c",
                b"\x13",
                b"\xa0",
                b"\x84\xff\xff\xff\xff",
                b"\x82\x01\x00",
                b"\x80",
            ],
            lengths: Some(lengths),
            max_len: 8192,
        },
        default_iters: 50_000,
    };
    run(target, |b| {
        let Ok(attrs) = subject(b) else {
            return if organizations(b).is_ok() {
                Err("organizations read a subject that does not parse".into())
            } else {
                Ok(Verdict::Refused)
            };
        };
        let bytes: usize = attrs.iter().map(|a| a.oid.len() + a.value.len() + 4).sum();
        if bytes > b.len() {
            return Err(format!("{} attributes hold {bytes} bytes of {}", attrs.len(), b.len()));
        }
        let again = subject(&certificate(&attrs));
        if again.as_ref() != Ok(&attrs) {
            return Err(format!("{attrs:?} written back parsed as {again:?}"));
        }
        let orgs: Vec<String> = attrs
            .iter()
            .filter(|a| a.oid == OID_ORGANIZATION)
            .map(|a| String::from_utf8_lossy(&a.value).into_owned())
            .collect();
        if organizations(b).as_ref() != Ok(&orgs) {
            return Err(format!("organizations differ from the subject's: {orgs:?}"));
        }
        Ok(Verdict::Accepted)
    });
}
