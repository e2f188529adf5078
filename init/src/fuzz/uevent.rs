// SPDX-License-Identifier: Apache-2.0
//! Kernel uevent messages (`pid1::uevent::parse`), as read from the netlink socket.
//!
//! Oracles: no panic; an accepted event's fields are printable ASCII taken from the message
//! (never longer than it), its action and devpath agree with the `ACTION@DEVPATH` header; the
//! event written back out as the kernel would parses to itself.

use testkit::fuzzkit::{run, Mutator, Target, Verdict};

use crate::pid1::uevent::{parse, Uevent};

fn write(ev: &Uevent) -> Vec<u8> {
    let mut out = format!(
        "{}@{}\0ACTION={}\0DEVPATH={}\0SUBSYSTEM={}\0",
        ev.action, ev.devpath, ev.action, ev.devpath, ev.subsystem
    );
    if let Some(m) = &ev.modalias {
        out.push_str(&format!("MODALIAS={m}\0"));
    }
    out.push_str("SEQNUM=1234\0");
    out.into_bytes()
}

#[test]
fn fuzz_target_uevent() {
    let seeds = vec![
        write(&Uevent {
            action: "add".into(),
            devpath: "/devices/pci0000:00/0000:00:03.0/virtio0/net/eth0".into(),
            subsystem: "net".into(),
            modalias: None,
        }),
        write(&Uevent {
            action: "add".into(),
            devpath: "/devices/pci0000:00/0000:00:03.0".into(),
            subsystem: "pci".into(),
            modalias: Some("pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00".into()),
        }),
        b"libudev\0\xfe\xed\xca\xfe\x28\x00\x00\x00".to_vec(),
        b"remove@/devices/x\0ACTION=remove\0DEVPATH=/devices/x\0".to_vec(),
    ];
    let target = Target {
        name: "uevent",
        crate_dir: super::CRATE_DIR,
        seeds,
        mutator: Mutator {
            dict: &[
                b"\0",
                b"=",
                b"@",
                b"ACTION=",
                b"DEVPATH=",
                b"MODALIAS=",
                b"SUBSYSTEM=",
                b"add",
                b"\n",
                b"\x1b[2J",
                b"\xc3\xa9",
            ],
            lengths: None,
            max_len: 8192,
        },
        default_iters: 150_000,
    };
    run(target, |b| {
        let Some(ev) = parse(b) else { return Ok(Verdict::Refused) };
        let fields = [&ev.action, &ev.devpath, &ev.subsystem];
        let all = fields.into_iter().chain(ev.modalias.as_ref());
        for f in all {
            if f.len() > b.len() || !f.bytes().all(|c| c.is_ascii_graphic() || c == b' ') {
                return Err(format!("field {f:?}"));
            }
        }
        let header = b.split(|c| *c == 0).next().unwrap_or_default();
        if header != format!("{}@{}", ev.action, ev.devpath).as_bytes() {
            return Err(format!("{ev:?} from header {:?}", String::from_utf8_lossy(header)));
        }
        let again = parse(&write(&ev));
        if again.as_ref() != Some(&ev) {
            return Err(format!("{ev:?} written back parsed as {again:?}"));
        }
        Ok(Verdict::Accepted)
    });
}
