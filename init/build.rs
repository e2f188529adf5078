// SPDX-License-Identifier: Apache-2.0
//! Link options for the static PID 1 binary (the musl target only; host builds are untouched).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("musl") {
        return;
    }
    // The static-PIE keeps ASLR, so the kernel loads it anywhere and musl's start-up code
    // applies one relative relocation per pointer in read-only data (vtables, string tables):
    // about 6,500 of them, 24 bytes each as RELA. Packed as RELR (a base and bitmaps, which
    // musl applies since 1.2.4; the toolchain's is 1.2.5) they take about 2 KB:
    // 155 KB less on disk, same addresses at run time. Needs GNU ld 2.38 or lld.
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    // The toolchain's own lld (rustup ships it with rustc) folds functions whose machine code
    // and relocations are identical, which generics produce by the hundred (drops, clones,
    // serde visitors): about 58 KB. lld leaves functions with a landing pad alone, so unwinding
    // is unchanged; what changes is only that two such functions may share an address, which
    // keelson never compares. Without it the link falls back to the system linker.
    match gcc_ld_dir() {
        Some(dir) => {
            println!("cargo:rustc-link-arg-bins=-fuse-ld=lld");
            println!("cargo:rustc-link-arg-bins=-B{}", dir.display());
            println!("cargo:rustc-link-arg-bins=-Wl,--icf=all");
        }
        None => println!(
            "cargo:warning=rust-lld not found in the toolchain: linking without identical \
             code folding (the static binary is about 58 KB larger)"
        ),
    }
}

/// The toolchain's `gcc-ld` directory: an `ld.lld` there runs `rust-lld` for `cc -fuse-ld=lld`.
fn gcc_ld_dir() -> Option<PathBuf> {
    let rustc = std::env::var_os("RUSTC")?;
    let host = std::env::var("HOST").ok()?;
    let out = Command::new(rustc).args(["--print", "sysroot"]).output().ok()?;
    let sysroot = String::from_utf8(out.stdout).ok()?;
    let dir = PathBuf::from(sysroot.trim()).join("lib/rustlib").join(host).join("bin/gcc-ld");
    dir.join("ld.lld").is_file().then_some(dir)
}
