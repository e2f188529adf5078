// SPDX-License-Identifier: Apache-2.0
//! A staged config: `apply-config --mode staged` writes the config beside the node's config
//! file (`config.yaml.staged`) without applying it; the next start of the node moves it over
//! the config file and boots into it (as Talos applies a staged config at the next reboot).
//! The move is one `rename`, so a power cut leaves the old config with the staged one beside
//! it, or the new config: never a mix.

use std::path::{Path, PathBuf};

/// Where a config staged for `config` is kept.
pub fn path_for(config: &Path) -> PathBuf {
    let name = config.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    config.with_file_name(format!("{name}.staged"))
}

/// Move a staged config over `config`, if there is one; true when it did. The config file's
/// directory is synced, so the move survives a power cut right after it.
pub fn promote(config: &Path) -> Result<bool, String> {
    let staged = path_for(config);
    match std::fs::symlink_metadata(&staged) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(format!("{}: not a regular file; left alone", staged.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("{}: {e}", staged.display())),
    }
    std::fs::rename(&staged, config).map_err(|e| format!("{}: {e}", staged.display()))?;
    // Best effort: the move is done; a failed directory sync only weakens its durability.
    let _ = net::atomic_file::sync_parent(config);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promote_moves_the_staged_config_over_the_current_one() {
        let dir = std::env::temp_dir().join(format!("keelson-staged-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let config = dir.join("config.yaml");
        let _ = std::fs::write(&config, "old");
        assert_eq!(path_for(&config), dir.join("config.yaml.staged"));
        assert_eq!(promote(&config), Ok(false), "nothing staged");
        let _ = std::fs::write(path_for(&config), "new");
        assert_eq!(promote(&config), Ok(true));
        assert_eq!(std::fs::read_to_string(&config).unwrap_or_default(), "new");
        assert!(!path_for(&config).exists());
        let _ = std::fs::create_dir(path_for(&config));
        assert!(promote(&config).is_err(), "a directory is not a config");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
