// SPDX-License-Identifier: Apache-2.0
//! A kernel module file's bytes for `init_module(2)`: `.ko` files go to the kernel as they are
//! (`finit_module`), `.ko.zst` files are decompressed here first, because Debian's kernel is
//! built without `CONFIG_MODULE_DECOMPRESS` and so cannot take a compressed file itself.
//!
//! The file comes from the disk and is treated as hostile: the compressed file, the zstd
//! window and the decompressed module are each bounded, so a corrupt or crafted file fails
//! that one module with one error and never makes PID 1 allocate without limit.

use std::io::Read;

/// The largest module decompressed. Debian's largest (`amdgpu`) is about 15 MiB; a network
/// driver is well under 1 MiB.
pub const MAX_MODULE: u64 = 64 << 20;
/// The largest compressed file read (a module never grows when zstd compresses it).
pub const MAX_FILE: u64 = MAX_MODULE;
/// The largest zstd window accepted: the decoder allocates the window a frame declares before
/// it decodes anything. `zstd -19` uses at most 8 MiB.
pub const MAX_WINDOW: u64 = 16 << 20;

/// How a module file is stored, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `.ko`: handed to the kernel as a file.
    Plain,
    /// `.ko.zst`: decompressed by keelson.
    Zstd,
}

/// Why a module file's bytes could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KoError {
    /// Compressed some other way (`.ko.xz`, `.ko.gz`): the kernel cannot take it and keelson
    /// does not decompress it.
    #[error("compressed as {0}, which keelson does not decompress (ship .ko or .ko.zst)")]
    Unsupported(String),
    /// Reading the file failed.
    #[error("read: {0}")]
    Read(std::io::Error),
    /// The compressed file is larger than [`MAX_FILE`].
    #[error("compressed file larger than {} MiB", MAX_FILE >> 20)]
    FileTooLarge,
    /// The zstd frame header is bad or asks for more than [`MAX_WINDOW`].
    #[error("zstd frame header: {0}")]
    Header(String),
    /// The frame says (or turns out) to decompress to more than [`MAX_MODULE`].
    #[error("decompresses to more than {} MiB", MAX_MODULE >> 20)]
    TooLarge,
    /// The compressed data is corrupt (at the given decompressed offset).
    #[error("zstd data corrupt after {at} decompressed bytes: {reason}")]
    Corrupt {
        /// Decompressed bytes produced before the error.
        at: usize,
        /// The decoder's reason.
        reason: String,
    },
    /// Decompressed to nothing: not a module.
    #[error("decompresses to nothing")]
    Empty,
}

/// How `path` is stored, or why it cannot be loaded.
pub fn kind(path: &str) -> Result<Kind, KoError> {
    let file = path.rsplit('/').next().unwrap_or(path);
    if file.ends_with(".ko.zst") {
        Ok(Kind::Zstd)
    } else if let Some((_, ext)) = file.rsplit_once(".ko.") {
        Err(KoError::Unsupported(net::names::escape(ext, 16)))
    } else {
        Ok(Kind::Plain)
    }
}

/// Decompress one zstd frame from `source` into memory, at most [`MAX_MODULE`] bytes.
pub fn decompress_zstd(source: impl Read) -> Result<Vec<u8>, KoError> {
    decompress_zstd_bounded(source, MAX_MODULE, MAX_WINDOW)
}

/// [`decompress_zstd`] with explicit bounds (tests use small ones).
pub fn decompress_zstd_bounded(
    source: impl Read,
    max_out: u64,
    max_window: u64,
) -> Result<Vec<u8>, KoError> {
    let mut decoder =
        ruzstd::decoding::StreamingDecoder::new_with_max_window_size(source, max_window)
            .map_err(|e| KoError::Header(e.to_string()))?;
    // The declared size (0 when the frame does not say) sizes the buffer once; it is a hint
    // only, the limit below holds whatever the frame declared.
    let declared = decoder.decoder.content_size();
    if declared > max_out {
        return Err(KoError::TooLarge);
    }
    let mut out = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
    // One byte more than allowed tells "exactly at the limit" from "over it".
    let read = (&mut decoder).take(max_out.saturating_add(1)).read_to_end(&mut out);
    if let Err(e) = read {
        return Err(KoError::Corrupt { at: out.len(), reason: e.to_string() });
    }
    if out.len() as u64 > max_out {
        return Err(KoError::TooLarge);
    }
    if out.is_empty() {
        return Err(KoError::Empty);
    }
    Ok(out)
}

/// Read and decompress the `.ko.zst` file at `path` (a loader thread's work, never the
/// event loop's).
pub fn read_zstd_file(path: &std::path::Path) -> Result<Vec<u8>, KoError> {
    let file = std::fs::File::open(path).map_err(KoError::Read)?;
    let len = file.metadata().map_err(KoError::Read)?.len();
    if len > MAX_FILE {
        return Err(KoError::FileTooLarge);
    }
    // Buffered: the decoder reads the file a few bytes at a time.
    let reader = std::io::BufReader::with_capacity(64 << 10, file.take(MAX_FILE));
    decompress_zstd(reader)
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A zstd frame of raw blocks (the format's own uncompressed block type), written by hand
    /// so the tests need no compressor: magic, frame header (an 8 MiB window in byte 5, a
    /// 4-byte content size when `declare`), then blocks of at most 128 KiB.
    pub(crate) fn raw_frame(data: &[u8], declare: Option<u32>) -> Vec<u8> {
        let mut f = 0xFD2F_B528u32.to_le_bytes().to_vec();
        // Frame_Content_Size_flag 2 (4 bytes) or 0 (none); never single segment, so the
        // window descriptor (2^(10+13)) follows.
        f.push(if declare.is_some() { 0b1000_0000 } else { 0 });
        f.push(13 << 3);
        if let Some(n) = declare {
            f.extend_from_slice(&n.to_le_bytes());
        }
        let chunks: Vec<&[u8]> =
            if data.is_empty() { vec![&[]] } else { data.chunks(128 << 10).collect() };
        for (i, chunk) in chunks.iter().enumerate() {
            let last = u32::from(i + 1 == chunks.len());
            // Block_Header: Last_Block bit, Block_Type 0 (raw), Block_Size.
            let header = last | ((chunk.len() as u32) << 3);
            f.extend_from_slice(&header.to_le_bytes()[..3]);
            f.extend_from_slice(chunk);
        }
        f
    }

    fn module(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn kinds_by_name() {
        assert_eq!(kind("kernel/drivers/net/virtio_net.ko").unwrap(), Kind::Plain);
        assert_eq!(kind("kernel/drivers/net/virtio_net.ko.zst").unwrap(), Kind::Zstd);
        assert!(matches!(kind("a/e1000.ko.xz"), Err(KoError::Unsupported(e)) if e == "xz"));
        assert!(matches!(kind("a/e1000.ko.gz"), Err(KoError::Unsupported(_))));
        // A directory named like a module does not make the file compressed.
        assert_eq!(kind("x.ko.zst/e1000.ko").unwrap(), Kind::Plain);
    }

    #[test]
    fn raw_frames_round_trip_with_and_without_declared_size() {
        let m = module(300_000);
        assert_eq!(decompress_zstd(&raw_frame(&m, Some(300_000))[..]).unwrap(), m);
        assert_eq!(decompress_zstd(&raw_frame(&m, None)[..]).unwrap(), m);
    }

    #[test]
    fn exactly_at_the_limit_loads_one_byte_over_does_not() {
        let m = module(1000);
        assert_eq!(decompress_zstd_bounded(&raw_frame(&m, None)[..], 1000, MAX_WINDOW).unwrap(), m);
        assert!(matches!(
            decompress_zstd_bounded(&raw_frame(&m, None)[..], 999, MAX_WINDOW),
            Err(KoError::TooLarge)
        ));
    }

    #[test]
    fn a_declared_size_over_the_limit_fails_before_decoding() {
        // The frame claims 4 GiB - 1 with a few bytes of data: refused on the header alone.
        let f = raw_frame(b"abc", Some(u32::MAX));
        assert!(matches!(decompress_zstd(&f[..]), Err(KoError::TooLarge)));
    }

    #[test]
    fn a_frame_lying_about_its_size_is_still_bounded() {
        // Declares 10 bytes, carries 5000: the limit, not the declaration, holds.
        let m = module(5000);
        let r = decompress_zstd_bounded(&raw_frame(&m, Some(10))[..], 4096, MAX_WINDOW);
        assert!(r.is_err(), "{r:?}");
    }

    #[test]
    fn a_window_over_the_limit_is_refused_before_allocating() {
        let mut f = raw_frame(b"abc", None);
        // Window descriptor: exponent 31 - 10 = 21, i.e. a 2 GiB window.
        f[5] = 21 << 3;
        assert!(matches!(decompress_zstd(&f[..]), Err(KoError::Header(_))));
    }

    #[test]
    fn corrupt_truncated_and_foreign_data_fail_cleanly() {
        let m = module(4000);
        let f = raw_frame(&m, None);
        assert!(matches!(decompress_zstd(&f[..f.len() - 100]), Err(KoError::Corrupt { .. })));
        assert!(matches!(decompress_zstd(&b"\x7fELF\x02\x01\x01"[..]), Err(KoError::Header(_))));
        assert!(matches!(decompress_zstd(&b""[..]), Err(KoError::Header(_))));
        assert!(matches!(decompress_zstd(&raw_frame(b"", None)[..]), Err(KoError::Empty)));
        // A reserved block type (3) in the block header.
        let mut bad = raw_frame(&m, None);
        bad[6] |= 0b110;
        assert!(decompress_zstd(&bad[..]).is_err());
    }

    /// `data` as the zstd tool compresses it at -19 (what the image builder does).
    pub(crate) fn zstd_tool(data: &[u8]) -> Vec<u8> {
        let dir = std::env::temp_dir().join(format!("keelson-zstd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("{}.ko", data.len()));
        std::fs::write(&file, data).unwrap();
        let out = std::process::Command::new("zstd").args(["-q", "-19", "-c"]).arg(&file).output();
        let out = out.unwrap();
        std::fs::remove_file(&file).unwrap();
        assert!(out.status.success(), "zstd: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    }

    #[test]
    fn what_the_zstd_tool_writes_decodes() {
        let m: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 1000).to_le_bytes()).collect();
        let packed = zstd_tool(&m);
        assert!(packed.len() < m.len() / 4, "{} bytes", packed.len());
        assert_eq!(decompress_zstd(&packed[..]).unwrap(), m);
    }

    #[test]
    fn a_file_larger_than_allowed_is_not_read() {
        let dir = std::env::temp_dir().join(format!("keelson-kofile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.ko.zst");
        let f = std::fs::File::create(&big).unwrap();
        // Sparse: no disk space used.
        f.set_len(MAX_FILE + 1).unwrap();
        assert!(matches!(read_zstd_file(&big), Err(KoError::FileTooLarge)));
        let good = dir.join("good.ko.zst");
        std::fs::write(&good, raw_frame(&module(70_000), Some(70_000))).unwrap();
        assert_eq!(read_zstd_file(&good).unwrap(), module(70_000));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
