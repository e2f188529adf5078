// SPDX-License-Identifier: Apache-2.0
//! Reading input whose size and kind a stranger may choose: a config path that is a FIFO, a
//! device such as `/dev/zero` or a multi-gigabyte file; a socket peer that never ends its line.
//! Every reader here stops at a stated limit and never blocks on open.

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest machine configuration read (Talos's own configs are a few hundred KiB).
pub const CONFIG_LIMIT: u64 = 16 << 20;

/// Why a bounded read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Opening or reading failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The path names something other than a regular file.
    #[error("not a regular file (a {0})")]
    NotRegular(&'static str),
    /// The input is longer than the limit.
    #[error("larger than the limit of {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// A line is longer than the limit.
    #[error("line longer than the limit of {limit} bytes")]
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// The file is not UTF-8.
    #[error("not UTF-8 text (byte {0})")]
    NotUtf8(usize),
}

fn kind_of(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "directory"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// Read a regular file of at most `limit` bytes. Symlinks are followed (a ConfigMap-style
/// `..data` link is the usual way a config is replaced), but the open never blocks: a FIFO
/// opens at once with `O_NONBLOCK` and is then refused, like every non-regular file.
pub fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(ReadError::NotRegular(kind_of(meta.file_type())));
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge { limit });
    }
    read_bounded(file, limit)
}

/// [`read_file`], as UTF-8 text.
pub fn read_text(path: &Path, limit: u64) -> Result<String, ReadError> {
    let bytes = read_file(path, limit)?;
    String::from_utf8(bytes).map_err(|e| ReadError::NotUtf8(e.utf8_error().valid_up_to()))
}

/// Read to the end, but not past `limit` bytes: a file that grows while read (or lies about
/// its size, as files in `/proc` and `/sys` do) is still bounded.
fn read_bounded(file: File, limit: u64) -> Result<Vec<u8>, ReadError> {
    let mut buf = Vec::new();
    let n = file.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if n as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(buf)
}

/// Read one `\n`-terminated line into `buf` (the newline kept), of at most `limit` bytes
/// including the newline. Returns the bytes read; 0 means end of input. A longer line is an
/// error and leaves `buf` holding its first `limit` bytes.
pub fn read_line(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    limit: usize,
) -> Result<usize, ReadError> {
    let start = buf.len();
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        if chunk.is_empty() {
            return Ok(buf.len() - start);
        }
        let room = limit - (buf.len() - start);
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) if i < room => (i + 1, true),
            _ => (chunk.len().min(room), false),
        };
        buf.extend_from_slice(&chunk[..take]);
        r.consume(take);
        if done {
            return Ok(buf.len() - start);
        }
        if buf.len() - start == limit {
            return Err(ReadError::LineTooLong { limit });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("keelson-bounded-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn regular_file_within_limit() {
        let dir = scratch("ok");
        let p = dir.join("f");
        std::fs::write(&p, "abc").unwrap();
        assert_eq!(read_text(&p, 3).unwrap(), "abc");
        assert!(matches!(read_text(&p, 2), Err(ReadError::TooLarge { limit: 2 })));
    }

    #[test]
    fn fifo_is_refused_without_blocking() {
        let dir = scratch("fifo");
        let p = dir.join("fifo");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Nobody opens the write end: a blocking open would hang this test forever.
        assert!(matches!(read_file(&p, 10), Err(ReadError::NotRegular("FIFO"))));
    }

    #[test]
    fn devices_and_directories_are_refused() {
        assert!(matches!(read_file(Path::new("/dev/zero"), 10), Err(ReadError::NotRegular(_))));
        assert!(matches!(read_file(Path::new("/"), 10), Err(ReadError::NotRegular("directory"))));
    }

    #[test]
    fn a_file_lying_about_its_size_is_still_bounded() {
        // /proc files report size 0 and may be any length.
        let f = File::open("/proc/self/maps").unwrap();
        assert!(matches!(read_bounded(f, 8), Err(ReadError::TooLarge { limit: 8 })));
    }

    #[test]
    fn symlinks_are_followed() {
        let dir = scratch("link");
        std::fs::write(dir.join("real"), "x: 1\n").unwrap();
        std::os::unix::fs::symlink("real", dir.join("link")).unwrap();
        assert_eq!(read_text(&dir.join("link"), 100).unwrap(), "x: 1\n");
    }

    #[test]
    fn not_utf8_names_the_byte() {
        let dir = scratch("utf8");
        let p = dir.join("f");
        std::fs::write(&p, b"ab\xffc").unwrap();
        assert!(matches!(read_text(&p, 100), Err(ReadError::NotUtf8(2))));
    }

    #[test]
    fn lines_are_bounded() {
        let mut r = BufReader::with_capacity(4, &b"one\ntwo-long\nend"[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 8).unwrap(), 4);
        assert_eq!(buf, b"one\n");
        buf.clear();
        assert!(matches!(read_line(&mut r, &mut buf, 8), Err(ReadError::LineTooLong { limit: 8 })));
        assert_eq!(buf, b"two-long");
        buf.clear();
        let mut r = BufReader::new(&b"end"[..]);
        assert_eq!(read_line(&mut r, &mut buf, 8).unwrap(), 3);
        assert_eq!(read_line(&mut r, &mut buf, 8).unwrap(), 0);
    }

    #[test]
    fn an_endless_line_stops_at_the_limit() {
        let mut r = BufReader::new(io::repeat(b'x'));
        let mut buf = Vec::new();
        assert!(read_line(&mut r, &mut buf, 1 << 16).is_err());
        assert_eq!(buf.len(), 1 << 16);
    }
}
