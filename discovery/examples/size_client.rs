// SPDX-License-Identifier: Apache-2.0
//! The size baseline (`size_baseline`) plus a running discovery client.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
use std::io::{Read, Write};
use std::sync::Arc;
fn main() {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(Arc::new(rustls::RootCertStore::empty()))
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(std::env::args().nth(1).unwrap_or_default())
        .unwrap();
    let mut c = rustls::ClientConnection::new(Arc::new(cfg), name).unwrap();
    let mut s = std::net::TcpStream::connect("127.0.0.1:1").unwrap();
    c.complete_io(&mut s).unwrap();
    c.writer().write_all(b"x").unwrap();
    let mut b = [0u8; 10];
    let _ = c.reader().read(&mut b);
    let _ = c.alpn_protocol();

    // What keelson links anyway: AES blocks (aes-siv), ipnet, nix signal masks, threads and
    // channels, Duration from f64, Debug formatting.
    use aes::cipher::{generic_array::GenericArray, BlockDecrypt, BlockEncrypt, KeyInit};
    let k = aes::Aes256::new(GenericArray::from_slice(&[7u8; 32]));
    let mut blk = [0u8; 16];
    k.encrypt_block(GenericArray::from_mut_slice(&mut blk));
    k.decrypt_block(GenericArray::from_mut_slice(&mut blk));
    let net: ipnet::IpNet = std::env::args().nth(3).unwrap_or_default().parse().unwrap();
    let old = nix::sys::signal::SigSet::all()
        .thread_swap_mask(nix::sys::signal::SigmaskHow::SIG_BLOCK)
        .ok();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(format!("{net:?} {blk:?} {old:?}")).unwrap());
    println!(
        "{:?} {:?}",
        rx.recv_timeout(std::time::Duration::from_secs_f64(0.5)),
        std::time::Instant::now()
    );
    let dcfg = discovery::Config {
        target: discovery::Target::from_url(&std::env::args().nth(2).unwrap_or_default()).unwrap(),
        cluster_id: "c".into(),
        affiliate_id: "a".into(),
        key: [0; 32],
        client_version: "v".into(),
        ttl: std::time::Duration::from_secs(1800),
        roots: Arc::new(rustls::RootCertStore::empty()),
    };
    let h = discovery::spawn(dcfg, Box::new(|e| println!("{e:?}"))).unwrap();
    h.send(discovery::Command::Publish(discovery::LocalData::default()));
    std::thread::sleep(std::time::Duration::from_secs(1));
}
