// SPDX-License-Identifier: Apache-2.0
//! `serve`'s boot flags (their own module: the command line's parser takes them from here).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

/// `serve`'s boot flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `--boot-http ADDR:PORT`
    pub http: Option<SocketAddr>,
    /// `--boot-url URL`: what scripts point at, when clients reach the service at another
    /// address than the one it listens on (NAT, a proxy).
    pub url: Option<String>,
    /// `--tftp ADDR:PORT`
    pub tftp: Option<SocketAddr>,
    /// `--tftp-root DIR` (default `/usr/lib/ipxe`)
    pub tftp_root: Option<PathBuf>,
    /// `--proxy-dhcp IFACE`
    pub proxy_dhcp: Option<String>,
}

/// `serve`'s boot flags, for its usage text.
pub const SERVE_USAGE: &str = "\
\x20 --boot-http ADDR:PORT     serve iPXE scripts, images and configs over HTTP (docs/pxe.md)
  --boot-url URL            the service's URL as machines reach it (default: http://ADDR:PORT
                            as each client reached it)
  --tftp ADDR:PORT          serve the iPXE binaries over TFTP (read-only)
  --tftp-root DIR           the TFTP directory (default /usr/lib/ipxe)
  --proxy-dhcp IFACE        answer PXE clients of known MACs on IFACE with boot files only
                            (proxyDHCP; needs --boot-http, and --tftp for the first stage)
";

/// Whether `flag` (without `--`) is one of `serve`'s boot flags.
pub fn is_serve_flag(flag: &str) -> bool {
    matches!(flag, "boot-http" | "boot-url" | "tftp" | "tftp-root" | "proxy-dhcp")
}

/// Take one boot flag's value.
pub fn serve_flag(o: &mut Options, flag: &str, value: OsString) -> Result<(), String> {
    let text = || value.to_str().map(str::to_owned).ok_or_else(|| format!("--{flag}: not UTF-8"));
    let addr = |s: String| s.parse::<SocketAddr>().map_err(|_| format!("--{flag}: ADDR:PORT"));
    match flag {
        "boot-http" => o.http = Some(addr(text()?)?),
        "tftp" => o.tftp = Some(addr(text()?)?),
        "tftp-root" => o.tftp_root = Some(PathBuf::from(&value)),
        "proxy-dhcp" => {
            let i = text()?;
            // IFNAMSIZ less its NUL; no '/' or whitespace (a kernel interface name).
            if i.is_empty() || i.len() > 15 || i.bytes().any(|c| c == b'/' || !c.is_ascii_graphic())
            {
                return Err("--proxy-dhcp: an interface name".into());
            }
            o.proxy_dhcp = Some(i);
        }
        "boot-url" => {
            let u = text()?;
            let ok = (u.starts_with("http://") || u.starts_with("https://"))
                && u.len() <= 256
                && u.bytes().all(|c| c.is_ascii_graphic() && c != b'$');
            if !ok {
                return Err("--boot-url: an http:// or https:// URL".into());
            }
            o.url = Some(u.trim_end_matches('/').to_owned());
        }
        _ => return Err(format!("--{flag}: not a boot flag")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_flags() {
        let mut o = Options::default();
        serve_flag(&mut o, "boot-http", "127.0.0.1:8080".into()).unwrap();
        serve_flag(&mut o, "boot-url", "http://10.0.2.2:8080/".into()).unwrap();
        assert_eq!(o.http, Some("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(o.url.as_deref(), Some("http://10.0.2.2:8080"));
        assert!(serve_flag(&mut o, "boot-http", "8080".into()).is_err());
        assert!(serve_flag(&mut o, "boot-url", "ftp://x".into()).is_err());
        assert!(serve_flag(&mut o, "boot-url", "http://x/${y}".into()).is_err());
        assert!(is_serve_flag("tftp") && !is_serve_flag("prefix"));
    }
}
