// SPDX-License-Identifier: Apache-2.0
//! `securityapi.SecurityService` (Talos's trustd, port 50001): a worker sends a certificate
//! signing request and gets its API certificate signed by `machine.ca`. Field numbers from
//! siderolabs/talos `api/security/security.proto`.

/// The method's HTTP/2 path.
pub const CERTIFICATE: &str = "/securityapi.SecurityService/Certificate";

/// `securityapi.CertificateRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CertificateRequest {
    /// The certificate signing request, PEM.
    #[prost(bytes = "vec", tag = "1")]
    pub csr: Vec<u8>,
}

/// `securityapi.CertificateResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CertificateResponse {
    /// The CA certificate that signed it, PEM.
    #[prost(bytes = "vec", tag = "1")]
    pub ca: Vec<u8>,
    /// The signed certificate, PEM.
    #[prost(bytes = "vec", tag = "2")]
    pub crt: Vec<u8>,
}
