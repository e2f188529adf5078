// SPDX-License-Identifier: Apache-2.0
//! Talos's trustd on a control plane (port 50001): `securityapi.SecurityService/Certificate`
//! signs a worker's certificate signing request with `machine.ca`. The caller proves itself
//! with `machine.token` in the `token` metadata (checked at the request's head, before its
//! body is read, in constant time, never logged); the request is bounded, parsed and its
//! signature checked ([`pki::csr`]); only its key and its DNS and IP names are signed.

use grpc::h2::{self, field};
use grpc::{code, Status};
use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::resource::Namespace;
use runtime::Runtime;
use talos_api::security::{CertificateRequest, CertificateResponse, CERTIFICATE};

use super::dispatch::{decode, Call, Method, Reply};
use crate::api::remote::decode as unbase64;

/// The service.
pub const METHODS: &[Method] = &[Method {
    path: CERTIFICATE,
    // A request and its protobuf framing.
    max_request: pki::csr::MAX_CSR + 64,
    handler: certificate,
}];

/// Equal without a timing that tells how much of it matched.
fn same(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

/// Check the caller's `token` against `machine.token`: `Unauthenticated` when it is missing
/// or wrong, as Talos's token check answers.
pub fn authenticate(fields: &[h2::Field], rt: &Runtime) -> Result<(), Status> {
    let store = rt.store();
    let config = store.get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID);
    let Some(want) = config.and_then(|c| c.machine.token.clone()) else {
        return Err(Status::new(code::UNAVAILABLE, "this node has no machine.token"));
    };
    match field(fields, "token") {
        Some(got) if same(got, want.as_bytes()) => Ok(()),
        Some(_) => Err(Status::new(code::UNAUTHENTICATED, "invalid token")),
        None => Err(Status::new(code::UNAUTHENTICATED, "no token in the call's metadata")),
    }
}

fn certificate(call: &mut Call<'_>, body: &[u8]) -> Result<Reply, Status> {
    let req: CertificateRequest = decode(body)?;
    let store = call.rt.store();
    let config = store.get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID);
    let Some((crt, Some(key))) = config.and_then(|c| c.machine.ca.clone()).map(|c| (c.crt, c.key))
    else {
        return Err(Status::new(code::UNAVAILABLE, "this node has no machine.ca key"));
    };
    let internal = |e: String| {
        log::error!(target: "trustd", "machine.ca: {e}");
        Status::new(code::INTERNAL, "the CA cannot sign")
    };
    let crt_pem = unbase64(&crt, "crt").map_err(internal)?;
    let key_pem = unbase64(&key, "key").map_err(internal)?;
    let ca =
        pki::identity::Ca::from_pem(&crt_pem, &key_pem).map_err(|e| internal(e.to_string()))?;
    let csr = pki::csr::parse(&req.csr).map_err(|e| {
        log::warn!(target: "trustd", "refused: {e}");
        Status::new(code::INVALID_ARGUMENT, e.to_string())
    })?;
    // What rcgen refuses is in the request (a name it cannot encode), not the CA.
    let signed = match call.effects.trustd_lifetime {
        Some(lifetime) => ca.sign_csr_for(&csr, lifetime),
        None => ca.sign_csr(&csr),
    };
    let signed = signed.map_err(|e| {
        log::warn!(target: "trustd", "refused: {e}");
        Status::new(code::INVALID_ARGUMENT, e.to_string())
    })?;
    log::info!(target: "trustd", "signed a certificate for {}", names(&csr));
    Reply::unary(&CertificateResponse { ca: crt_pem.into_bytes(), crt: signed.into_bytes() })
}

fn names(csr: &pki::csr::Csr) -> String {
    let mut all: Vec<String> = csr.dns.iter().map(|d| base::names::escape(d, 64)).collect();
    all.extend(csr.ips.iter().map(ToString::to_string));
    all.truncate(8);
    all.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc.def", b"abc.def"));
        assert!(!same(b"abc.def", b"abc.deg"));
        assert!(!same(b"abc.def", b"abc.de"));
        assert!(!same(b"abc", b"abc.def"));
        assert!(!same(b"", b"x"));
        assert!(same(b"", b""));
    }
}
