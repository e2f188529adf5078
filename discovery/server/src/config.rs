// SPDX-License-Identifier: Apache-2.0
//! Command-line flags.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use lexopt::ValueExt;

use crate::registry::Limits;

pub const USAGE: &str = "usage: keelson-discovery-server [flags]
  --addr ADDR                 listen address (default [::]:3000); gRPC, / and /stats
  --cert PEM --key PEM        serve TLS (ALPN h2) with this chain and key; plaintext h2c without
  --redirect HOST:PORT        tell every client (in Hello) to use this server instead
  --snapshot PATH             keep the state in PATH across restarts (default: memory only)
  --snapshot-interval DUR     how often to write it (default 10m; also at SIGTERM)
  --gc-interval DUR           how often expired entries are dropped (default 1m)
  --trust-proxy-headers       take the client address from x-real-ip / x-forwarded-for
  --rate N --burst N          calls per second and burst per client address (default 15, 60)
  --max-affiliates N          affiliates per cluster (default 1024)
  --max-endpoints N           endpoints per affiliate (default 64)
  --max-data BYTES            data bytes per affiliate (default 2048)
  --max-clusters N            clusters in total (default 100000)
  --max-watchers N            watchers per cluster (default 4096)
  --max-connections N         connections in total (default 8192)
  --max-connections-per-ip N  connections per client address (default 1024)
  --ipv6-prefix N             IPv6 clients share rate limits and connection caps per /N
                              (default 64); IPv4 clients per address
  --max-queued BYTES          response bytes one connection may hold unsent (default 8 MiB);
                              answers past it are reset, repeated ones close the connection
DUR is a number with ms, s, m or h (for example 500ms, 30s, 10m), at most 30 days.";

/// The default per-connection budget: above the largest answer the default limits allow
/// (1024 affiliates of at most about 4.5 KB: 4.6 MB), with room for a few small ones.
pub const DEFAULT_MAX_QUEUED: usize = 8 << 20;

/// Everything the flags set.
#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub redirect: Option<String>,
    pub snapshot: Option<PathBuf>,
    pub snapshot_interval: Duration,
    pub gc_interval: Duration,
    pub trust_proxy_headers: bool,
    pub rate: f64,
    pub burst: u32,
    pub limits: Limits,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    /// Bytes of response one connection may hold (queued behind its flow-control windows or
    /// not yet written to its socket).
    pub max_queued: usize,
    /// IPv6 clients are rate-limited and capped per prefix of this length.
    pub ipv6_prefix: u8,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: SocketAddr::from(([0u16; 8], 3000)),
            cert: None,
            key: None,
            redirect: None,
            snapshot: None,
            snapshot_interval: Duration::from_secs(600),
            gc_interval: Duration::from_secs(60),
            trust_proxy_headers: false,
            rate: 15.0,
            burst: 60,
            limits: Limits::default(),
            max_connections: 8192,
            max_connections_per_ip: 1024,
            max_queued: DEFAULT_MAX_QUEUED,
            ipv6_prefix: crate::ratelimit::DEFAULT_V6_PREFIX,
        }
    }
}

/// A bad command line.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Args(#[from] lexopt::Error),
    #[error("{flag}: {value:?} is not {what}")]
    Value { flag: &'static str, value: String, what: &'static str },
    #[error("--cert and --key go together")]
    HalfTls,
    #[error("help")]
    Help,
}

/// Parse `500ms`, `30s`, `10m`, `1h`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.checked_mul(60)?),
        "h" => Duration::from_secs(n.checked_mul(3600)?),
        _ => return None,
    };
    // Up to 30 days: the intervals are added to the clock, which must not overflow.
    (!d.is_zero() && d <= Duration::from_secs(30 * 86_400)).then_some(d)
}

fn value<T: std::str::FromStr>(
    p: &mut lexopt::Parser,
    flag: &'static str,
    what: &'static str,
) -> Result<T, ConfigError> {
    let v = p.value()?.string()?;
    v.parse().map_err(|_| ConfigError::Value { flag, value: v, what })
}

fn duration(p: &mut lexopt::Parser, flag: &'static str) -> Result<Duration, ConfigError> {
    let v = p.value()?.string()?;
    parse_duration(&v).ok_or(ConfigError::Value { flag, value: v, what: "a duration such as 30s" })
}

/// Parse the command line (without the program name).
pub fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Config, ConfigError> {
    use lexopt::Arg::Long;
    let mut c = Config::default();
    let mut p = lexopt::Parser::from_args(args);
    const N: &str = "a positive number";
    while let Some(arg) = p.next()? {
        match arg {
            Long("addr") => c.addr = value(&mut p, "--addr", "an address such as [::]:3000")?,
            Long("cert") => c.cert = Some(p.value()?.into()),
            Long("key") => c.key = Some(p.value()?.into()),
            Long("redirect") => c.redirect = Some(p.value()?.string()?),
            Long("snapshot") => c.snapshot = Some(p.value()?.into()),
            Long("snapshot-interval") => {
                c.snapshot_interval = duration(&mut p, "--snapshot-interval")?
            }
            Long("gc-interval") => c.gc_interval = duration(&mut p, "--gc-interval")?,
            Long("trust-proxy-headers") => c.trust_proxy_headers = true,
            Long("rate") => c.rate = value(&mut p, "--rate", N)?,
            Long("burst") => c.burst = value(&mut p, "--burst", N)?,
            Long("max-affiliates") => {
                c.limits.affiliates_per_cluster = value(&mut p, "--max-affiliates", N)?
            }
            Long("max-endpoints") => {
                c.limits.endpoints_per_affiliate = value(&mut p, "--max-endpoints", N)?
            }
            Long("max-data") => c.limits.data_max = value(&mut p, "--max-data", N)?,
            Long("max-clusters") => c.limits.clusters = value(&mut p, "--max-clusters", N)?,
            Long("max-watchers") => {
                c.limits.watchers_per_cluster = value(&mut p, "--max-watchers", N)?
            }
            Long("max-connections") => c.max_connections = value(&mut p, "--max-connections", N)?,
            Long("max-connections-per-ip") => {
                c.max_connections_per_ip = value(&mut p, "--max-connections-per-ip", N)?
            }
            Long("ipv6-prefix") => {
                c.ipv6_prefix = value(&mut p, "--ipv6-prefix", "a prefix length of 1 to 128")?;
                if !(1..=128).contains(&c.ipv6_prefix) {
                    return Err(ConfigError::Value {
                        flag: "--ipv6-prefix",
                        value: c.ipv6_prefix.to_string(),
                        what: "a prefix length of 1 to 128",
                    });
                }
            }
            Long("max-queued") => c.max_queued = value(&mut p, "--max-queued", N)?,
            Long("help") | lexopt::Arg::Short('h') => return Err(ConfigError::Help),
            other => return Err(other.unexpected().into()),
        }
    }
    if c.cert.is_some() != c.key.is_some() {
        return Err(ConfigError::HalfTls);
    }
    if !c.rate.is_finite() || c.rate < 0.0 {
        return Err(ConfigError::Value { flag: "--rate", value: c.rate.to_string(), what: N });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_flags() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("0s"), None);
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration("1d"), None);
        assert_eq!(parse_duration("720h"), Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_duration("721h"), None);
        assert_eq!(parse_duration("99999999999999999h"), None);
        let c = parse(
            ["--addr", "127.0.0.1:9", "--gc-interval", "100ms", "--max-affiliates", "5"]
                .map(Into::into),
        )
        .unwrap();
        assert_eq!(c.addr, "127.0.0.1:9".parse().unwrap());
        assert_eq!(c.gc_interval, Duration::from_millis(100));
        assert_eq!(c.limits.affiliates_per_cluster, 5);
        assert!(!c.trust_proxy_headers);
        assert!(matches!(parse(["--cert", "x"].map(Into::into)), Err(ConfigError::HalfTls)));
        assert!(parse(["--bogus"].map(Into::into)).is_err());
        assert_eq!(Config::default().ipv6_prefix, 64);
        assert_eq!(parse(["--ipv6-prefix", "56"].map(Into::into)).unwrap().ipv6_prefix, 56);
        assert!(parse(["--ipv6-prefix", "0"].map(Into::into)).is_err());
        assert!(parse(["--ipv6-prefix", "129"].map(Into::into)).is_err());
    }
}
