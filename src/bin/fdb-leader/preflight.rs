//! Checks made before anything is started, opened or campaigned for: that the command exists
//! and may be executed, that the store file may be read and written, and that it is not on a
//! network file system. A problem found here costs no ballot and leaves no file behind.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::errno::Errno;
use nix::unistd::AccessFlags;

use crate::classify::{Cause, fix};
use crate::exit::Failure;

/// Where `program` is, as `execvp` would find it: itself if it holds a `/`, else the first
/// executable file of that name in `$PATH`.
fn find_program(program: &OsStr) -> Result<PathBuf, String> {
    let name = program.to_string_lossy();
    if program.is_empty() {
        return Err("the command is empty".to_owned());
    }
    if program.as_bytes().contains(&b'/') {
        let path = PathBuf::from(program);
        return match executable(&path) {
            Ok(()) => Ok(path),
            Err(why) => Err(format!("{name}: {why}")),
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    let mut found_but = None;
    for dir in std::env::split_paths(&search) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(program);
        match executable(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(why) if candidate.exists() => {
                found_but.get_or_insert(format!("{}: {why}", candidate.display()));
            }
            Err(_) => {}
        }
    }
    Err(found_but.unwrap_or_else(|| format!("{name}: command not found in PATH")))
}

/// Whether `path` is a file this user may execute.
fn executable(path: &Path) -> Result<(), &'static str> {
    let meta = std::fs::metadata(path).map_err(|_| "no such file")?;
    if meta.is_dir() {
        return Err("is a directory");
    }
    nix::unistd::access(path, AccessFlags::X_OK).map_err(|_| "not executable by this user")
}

/// The first command word of a shell script, if it is a plain word (not an assignment,
/// quoted, or other shell syntax, which only running it can check).
fn first_word(script: &str) -> Option<&str> {
    let word = script.split_whitespace().next()?;
    let plain = word
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_./+-".contains(&b));
    (plain && !word.is_empty()).then_some(word)
}

/// Runs `sh ARGS…` quietly; its status and standard error.
fn sh(args: &[&OsStr]) -> Result<(bool, String), String> {
    let out = Command::new("sh")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    ))
}

/// Checks that `script` parses (`sh -n`), and that its first command exists (`command -v`).
fn check_script(what: &str, script: &OsStr, first_command: bool) -> Result<(), Failure> {
    let (ok, err) = sh(&[OsStr::new("-n"), OsStr::new("-c"), script]).map_err(Failure::command)?;
    if !ok {
        return Err(Failure::command(format!(
            "{what} does not parse as a shell script: {err}"
        )));
    }
    if !first_command {
        return Ok(());
    }
    if let Some(word) = script.to_str().and_then(first_word) {
        let (ok, _) = sh(&[
            OsStr::new("-c"),
            OsStr::new("command -v -- \"$1\" >/dev/null"),
            OsStr::new("sh"),
            OsStr::new(word),
        ])
        .map_err(Failure::command)?;
        if !ok {
            return Err(Failure::command(format!(
                "{what}: its first command {word:?} is not found (not a shell builtin, and not in \
                 PATH)"
            )));
        }
    }
    Ok(())
}

/// Checks, before campaigning, that the child command and the hooks can run.
pub(crate) fn check_commands(
    command: &[OsString],
    shell: bool,
    hooks: &[(&str, Option<&String>)],
) -> Result<(), Failure> {
    if shell {
        let script = command.join(OsStr::new(" "));
        check_script("the --shell command", &script, true)?;
    } else {
        let Some(program) = command.first() else {
            return Err(Failure::usage("run: no command given"));
        };
        find_program(program).map_err(|why| {
            Failure::command(format!(
                "cannot run the command: {why} (nothing was started, no ballot used)"
            ))
        })?;
    }
    for (what, script) in hooks {
        if let Some(script) = script {
            check_script(what, OsStr::new(script.as_str()), false)?;
        }
    }
    Ok(())
}

/// The directory that holds `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// What a failed `access` call means for the store.
fn access_cause(errno: Errno) -> Option<Cause> {
    match errno {
        Errno::EROFS | Errno::EPERM | Errno::ETXTBSY => Some(Cause::ReadOnly),
        Errno::EACCES => Some(Cause::PermissionDenied),
        _ => None,
    }
}

/// Checks that this user may read and write the store at `path`, the `-wal` and `-shm` files
/// beside it, and its directory (where SQLite creates them): before opening, so that a store
/// that cannot be used is refused at once, with nothing created.
pub(crate) fn check_store_access(path: &Path, writes: bool) -> Result<(), Failure> {
    let refuse = |cause: Cause, what: &Path, errno: Errno| {
        Failure::store(format!(
            "the store cannot be used: {}: {} ({})",
            what.display(),
            errno.desc(),
            fix(cause, path)
        ))
    };
    // A command that only reads needs to read the files, nothing more: the store opens
    // read-only (SqliteOptions::read_only) and creates nothing beside them.
    let rw = if writes {
        AccessFlags::R_OK | AccessFlags::W_OK
    } else {
        AccessFlags::R_OK
    };
    // A directory, a FIFO or a device is refused by the store itself
    // (`SqliteOpenError::NotAFile`), before it creates anything.
    let mut files = vec![path.to_path_buf()];
    for suffix in ["-wal", "-shm"] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        files.push(PathBuf::from(side));
    }
    for file in &files {
        if !file.exists() {
            continue;
        }
        if let Err(errno) = nix::unistd::access(file.as_path(), rw) {
            if let Some(cause) = access_cause(errno) {
                return Err(refuse(cause, file, errno));
            }
        }
    }
    let dir = parent_dir(path);
    if writes && dir.is_dir() {
        if let Err(errno) =
            nix::unistd::access(dir.as_path(), AccessFlags::W_OK | AccessFlags::X_OK)
        {
            if let Some(cause) = access_cause(errno) {
                return Err(refuse(cause, &dir, errno));
            }
        }
    }
    Ok(())
}

/// The file systems on which SQLite's locking cannot be trusted, by `statfs` magic number.
pub(crate) fn network_fs(magic: i64) -> Option<&'static str> {
    Some(match magic {
        0x6969 => "NFS",
        0x517B => "SMB",
        0xFF53_4D42 => "CIFS",
        0xFE53_4D42 => "SMB2",
        0x6573_5546 => "FUSE (sshfs, s3fs and other network mounts)",
        0x0102_1997 => "9p",
        0x00C3_6400 => "Ceph",
        0x5346_414F => "AFS",
        0x7375_7245 => "Coda",
        0x0BD0_0BD0 => "Lustre",
        0x0116_1970 => "GFS2",
        0x7461_636F => "OCFS2",
        _ => return None,
    })
}

/// The file system type of the directory that holds `path` (the file may not exist yet).
fn fs_magic(path: &Path) -> Option<i64> {
    // Tests cannot mount a network file system: a build with the feature planted-faults (the
    // tests') takes the type from here.
    #[cfg(feature = "planted-faults")]
    if let Some(forced) = std::env::var_os("FDB_LEADER_DEBUG_FS_MAGIC") {
        let text = forced.to_string_lossy();
        let digits = text.trim_start_matches("0x");
        return i64::from_str_radix(digits, 16).ok();
    }
    let dir = parent_dir(path);
    let stat = nix::sys::statfs::statfs(dir.as_path()).ok()?;
    #[allow(
        clippy::unnecessary_cast,
        reason = "the field's type differs between targets"
    )]
    Some(stat.filesystem_type().0 as i64)
}

/// Refuses a store on a network file system, unless `allow`.
pub(crate) fn check_local_fs(path: &Path, allow: bool) -> Result<(), Failure> {
    let Some(name) = fs_magic(path).and_then(network_fs) else {
        return Ok(());
    };
    if allow {
        tracing::warn!(
            store = %path.display(),
            "the store is on a network file system ({name}); --allow-network-fs accepts it"
        );
        return Ok(());
    }
    Err(Failure::store(format!(
        "{} is on a network file system ({name}): SQLite's file locking is unreliable there, so \
         two processes could both believe they lead; put the store on a local file system \
         (processes on several hosts need FoundationDB, --cluster-file), or pass \
         --allow-network-fs if this file system is known to lock correctly",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_like_execvp() {
        assert!(find_program(OsStr::new("sh")).is_ok());
        let missing = find_program(OsStr::new("surely-no-such-command-x"));
        assert!(missing.is_err_and(|e| e.contains("not found in PATH")));
        let dir = find_program(OsStr::new("/tmp"));
        assert!(dir.is_err_and(|e| e.contains("is a directory")));
        assert!(find_program(OsStr::new("")).is_err());
    }

    #[test]
    fn first_words_are_plain_or_nothing() {
        assert_eq!(first_word("  nosuchcmd --flag"), Some("nosuchcmd"));
        assert_eq!(first_word("./run.sh"), Some("./run.sh"));
        assert_eq!(first_word("FOO=1 prog"), None);
        assert_eq!(first_word("\"quoted\" x"), None);
        assert_eq!(first_word("   "), None);
    }

    #[test]
    fn scripts_are_checked_for_syntax_and_their_first_command() {
        let ok = check_commands(&["echo".into(), "hi".into()], true, &[]);
        assert!(ok.is_ok());
        let missing = check_commands(&["nosuchcmd-xyz".into()], true, &[]);
        assert!(missing.is_err_and(|f| f.to_string().contains("\"nosuchcmd-xyz\" is not found")));
        let syntax = check_commands(&["echo".into(), "(".into()], true, &[]);
        assert!(syntax.is_err_and(|f| f.to_string().contains("does not parse")));
        let hook = "if then".to_owned();
        let bad_hook = check_commands(&["true".into()], false, &[("--begin-command", Some(&hook))]);
        assert!(bad_hook.is_err_and(|f| f.to_string().starts_with("--begin-command")));
    }

    #[test]
    fn network_file_systems_are_named() {
        assert_eq!(network_fs(0x6969), Some("NFS"));
        assert!(network_fs(0x6573_5546).is_some_and(|n| n.starts_with("FUSE")));
        assert_eq!(network_fs(0xEF53), None); // ext4
        assert_eq!(network_fs(0x0102_1994), None); // tmpfs
    }

    #[test]
    fn access_errors_map_to_causes() {
        assert_eq!(access_cause(Errno::EROFS), Some(Cause::ReadOnly));
        assert_eq!(access_cause(Errno::EPERM), Some(Cause::ReadOnly));
        assert_eq!(access_cause(Errno::EACCES), Some(Cause::PermissionDenied));
        assert_eq!(access_cause(Errno::ENOENT), None);
    }
}
