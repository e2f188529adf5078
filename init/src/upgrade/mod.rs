// SPDX-License-Identifier: Apache-2.0
//! `Upgrade`: keelson runs from its initramfs, so an upgrade is "boot this kernel and
//! initramfs now". The request's `image` names a manifest ([`manifest`]); a worker thread
//! fetches it and both files (bounded, each checked against its SHA-256), loads them with
//! `kexec_file_load` ([`kexec`]), and reports; the node loop then stops services, flushes the
//! state and boots them with `reboot(RB_KEXEC)`. The state partition is not touched: the new
//! image boots with the same config, identity and keys. Any refusal is one line and the
//! node keeps running what it runs. docs/upgrade.md says what is and is not upgraded.

pub mod kexec;
pub mod manifest;

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::time::{Duration, Instant};

use crate::fetch::client;
use crate::fetch::url::Url;
use manifest::{Manifest, MAX_ARTIFACT, MAX_MANIFEST};

/// The whole download (manifest, kernel, initramfs) must finish within this.
const DOWNLOAD: Duration = Duration::from_secs(600);
/// How often the loop looks for the worker's answer while it runs.
const POLL: Duration = Duration::from_millis(250);

/// How an upgrade ended on its worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Loaded for `RB_KEXEC`: the node may stop and boot it.
    Loaded { version: String },
    /// Downloaded and verified, not loaded: `keelson run` never replaces its host's kernel.
    Verified { version: String },
    /// The manifest names the version this node runs already: nothing downloaded or loaded
    /// (a repeated upgrade after the kexec, as Talos's clients repeat one).
    Current { version: String },
    /// Refused: one line.
    Failed(String),
}

/// An upgrade under way.
#[derive(Debug)]
pub struct Job {
    rx: Receiver<Outcome>,
    /// The manifest's URL, for the log (query elided).
    pub shown: String,
    /// The request's `image`, as given: a repeat of it is the same upgrade.
    pub image: String,
}

impl Job {
    /// The outcome, once the worker has one.
    pub fn poll(&self) -> Option<Outcome> {
        match self.rx.try_recv() {
            Ok(o) => Some(o),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                Some(Outcome::Failed("the upgrade worker ended without an answer".into()))
            }
        }
    }

    /// When to look again.
    pub fn poll_at(&self) -> Instant {
        Instant::now() + POLL
    }
}

/// The manifest URL `image` names, if it is one keelson takes.
pub fn manifest_url(image: &str) -> Result<Url, String> {
    if image.is_empty() {
        return Err("image: empty (keelson wants the URL of an upgrade manifest)".into());
    }
    let url = Url::parse(image).map_err(|_| {
        format!("image: {:?} is not an https:// URL (keelson boots from RAM: it wants the URL of an upgrade manifest, not a container image)", net::names::escape(image, 96))
    })?;
    manifest::check_url(&url).map_err(|e| format!("image: {e}"))?;
    Ok(url)
}

/// Start the download of what `url` describes on a worker; `boot`: load it for kexec
/// (PID 1), otherwise only verify it.
pub fn start(image: &str, url: Url, roots: Vec<PathBuf>, boot: bool) -> Result<Job, String> {
    let (tx, rx) = mpsc::channel();
    let shown = url.redacted();
    let running = format!("v{}", crate::machine::version());
    evloop::spawn_worker("upgrade", move || {
        let _ = tx.send(run(&url, &roots, boot, &running));
    })
    .map_err(|e| format!("cannot start the upgrade worker: {e}"))?;
    Ok(Job { rx, shown, image: image.to_owned() })
}

/// Whether a manifest naming `version` is the image this node runs (`running`, its
/// `Version` tag): then there is nothing to download.
pub fn is_current(version: &str, running: &str) -> bool {
    !version.is_empty() && version == running
}

/// The worker: manifest, both files, digests, kexec.
fn run(url: &Url, roots: &[PathBuf], boot: bool, running: &str) -> Outcome {
    let deadline = Instant::now() + DOWNLOAD;
    let fetch = |what: &str, url: &Url, limit: usize| {
        client::fetch_limited(url, roots, deadline, limit)
            .map(|f| f.body)
            .map_err(|e| format!("{what} from {}: {e}", url.redacted()))
    };
    let m: Manifest = match fetch("manifest", url, MAX_MANIFEST)
        .and_then(|body| manifest::parse(&body, url).map_err(|e| e.to_string()))
    {
        Ok(m) => m,
        Err(e) => return Outcome::Failed(e),
    };
    if is_current(&m.version, running) {
        return Outcome::Current { version: m.version };
    }
    log::info!(target: "upgrade", "manifest for {}: kernel {}, initramfs {}", m.version, m.kernel.url.redacted(), m.initramfs.url.redacted());
    // Each download goes into a memfd once verified (only PID 1 loads it), so at most one
    // buffer is held at a time.
    let mut fds = Vec::new();
    for (what, a) in [("kernel", &m.kernel), ("initramfs", &m.initramfs)] {
        let data = match fetch(what, &a.url, MAX_ARTIFACT) {
            Ok(d) => d,
            Err(e) => return Outcome::Failed(e),
        };
        if let Err(e) = manifest::verify(what, &data, &a.sha256) {
            return Outcome::Failed(e.to_string());
        }
        log::info!(target: "upgrade", "{what}: {} bytes, sha256 {} as the manifest says", data.len(), &manifest::hex(&a.sha256)[..16]);
        if boot {
            match kexec::memfd(what, &data) {
                Ok(fd) => fds.push(fd),
                Err(e) => return Outcome::Failed(e.to_string()),
            }
        }
    }
    let version = m.version.clone();
    if !boot {
        return Outcome::Verified { version };
    }
    let cmdline = match m.cmdline {
        Some(c) => c,
        None => match net::bounded::read_text(std::path::Path::new("/proc/cmdline"), 4096) {
            Ok(c) => c.trim().to_owned(),
            Err(e) => return Outcome::Failed(format!("/proc/cmdline: {e}")),
        },
    };
    let [kernel, initramfs] = fds.as_slice() else {
        return Outcome::Failed("the downloads went missing".into());
    };
    match kexec::load(kernel, initramfs, &cmdline) {
        Ok(()) => Outcome::Loaded { version },
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::is_current;

    #[test]
    fn only_the_running_tag_is_current() {
        assert!(is_current("v0.1.0", "v0.1.0"));
        assert!(!is_current("v0.1.1", "v0.1.0"));
        assert!(!is_current("v0.1.0", "v0.1.0-dirty"));
        assert!(!is_current("", ""));
    }
}
