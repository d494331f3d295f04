//! Files on disk, for the tests that check what a store creates beside itself. Included by
//! path (`#[path = "common/files.rs"] mod files;`) or through `common` and the CLI support.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::path::Path;

/// The names of the files in `dir`, sorted.
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
