//! Opening files beneath a directory, with the kernel enforcing containment.
//!
//! openat2(2) (Linux 5.6) with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`
//! refuses any resolution that leaves the directory — `..` past it, absolute
//! symlinks, symlinks whose target climbs out, `/proc/self/fd` magic links —
//! atomically, so no rename race can smuggle a path out of the root. Where
//! openat2 is missing (ENOSYS, or seccomp's EPERM) the fallback walks one
//! component at a time with `O_NOFOLLOW`, which refuses every symlink: the
//! same containment, with in-root links lost. The choice is probed once.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

/// How to open the final component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A file or directory, opened read-only (O_RDONLY).
    Read,
    /// Only a handle for fstat/openat (O_PATH).
    Path,
}

/// Which symbolic links resolution may follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Links whose resolution stays beneath the directory.
    Beneath,
    /// None at all (RESOLVE_NO_SYMLINKS, or O_NOFOLLOW at every step).
    None,
    /// Any link, anywhere: containment then rests on the relative path alone
    /// (which never holds `..`).
    Any,
}

/// Which resolver this kernel gives us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// openat2 with RESOLVE_BENEATH.
    Openat2,
    /// Component walk with O_NOFOLLOW.
    NoFollowWalk,
}

/// Probe once whether openat2 works here.
pub fn resolver() -> Resolver {
    static PROBE: OnceLock<Resolver> = OnceLock::new();
    *PROBE.get_or_init(|| {
        let r = match std::fs::File::open("/") {
            Ok(root) => {
                let fd = std::os::fd::AsFd::as_fd(&root);
                match raw_openat2(fd, ".", Target::Path, libc::RESOLVE_BENEATH) {
                    Err(e)
                        if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) =>
                    {
                        Resolver::NoFollowWalk
                    }
                    _ => Resolver::Openat2,
                }
            }
            Err(_) => Resolver::Openat2,
        };
        tracing::info!(resolver = ?r, "file containment resolver chosen");
        r
    })
}

/// Open `relative` (no leading `/`, `/`-separated, already free of `.`/`..`)
/// beneath `dir`. An empty path opens `dir` itself.
pub fn open_beneath(
    dir: BorrowedFd<'_>,
    relative: &str,
    target: Target,
    links: Links,
) -> io::Result<OwnedFd> {
    let relative = if relative.is_empty() { "." } else { relative };
    if links == Links::Any {
        if relative.split('/').any(|p| p == "..") {
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        }
        return raw_openat(dir, relative, target_flags(target));
    }
    let resolve = match links {
        Links::None => {
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_SYMLINKS
        }
        _ => libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
    };
    match resolver() {
        Resolver::Openat2 => loop {
            match raw_openat2(dir, relative, target, resolve) {
                // openat2(2): EAGAIN when a concurrent rename raced the
                // lookup under RESOLVE_BENEATH; retrying is the documented fix.
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => continue,
                other => return other,
            }
        },
        Resolver::NoFollowWalk => walk_nofollow(dir, relative, target),
    }
}

fn target_flags(target: Target) -> libc::c_int {
    libc::O_CLOEXEC
        | match target {
            Target::Read => libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK,
            Target::Path => libc::O_PATH,
        }
}

fn raw_openat2(
    dir: BorrowedFd<'_>,
    relative: &str,
    target: Target,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let path = CString::new(relative).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: open_how is a plain C struct of integers; all-zero is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = target_flags(target) as u64;
    how.resolve = resolve;
    // SAFETY: `path` is a NUL-terminated string and `how` a valid open_how
    // that both outlive the call; the size passed is the struct's size.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a non-negative return of openat2 is a new descriptor that
    // nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as libc::c_int) })
}

fn raw_openat(dir: BorrowedFd<'_>, name: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
    let name = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `name` is NUL-terminated and outlives the call.
    let rc = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a non-negative return of openat is a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(rc) })
}

fn walk_nofollow(dir: BorrowedFd<'_>, relative: &str, target: Target) -> io::Result<OwnedFd> {
    let parts: Vec<&str> = relative.split('/').collect();
    if parts.contains(&"..") {
        return Err(io::Error::from_raw_os_error(libc::EXDEV));
    }
    let mut current: Option<OwnedFd> = None;
    for (i, part) in parts.iter().enumerate() {
        let at = match &current {
            Some(fd) => std::os::fd::AsFd::as_fd(fd),
            None => dir,
        };
        let last = i + 1 == parts.len();
        let flags = if last {
            target_flags(target) | libc::O_NOFOLLOW
        } else {
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC
        };
        let next = raw_openat(at, part, flags)?;
        current = Some(next);
    }
    current.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn refuses_escaping_symlinks_and_allows_inner_files() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(tmp.path().join("secret"), b"s").unwrap();
        std::fs::write(root.join("ok.txt"), b"ok").unwrap();
        std::os::unix::fs::symlink("../secret", root.join("escape")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("abs")).unwrap();
        let dir = std::fs::File::open(&root).unwrap();
        std::os::unix::fs::symlink("ok.txt", root.join("inner")).unwrap();
        let open = |p: &str, l: Links| open_beneath(dir.as_fd(), p, Target::Read, l).is_ok();
        assert!(open("ok.txt", Links::Beneath));
        assert!(open("inner", Links::Beneath));
        assert!(!open("escape", Links::Beneath));
        assert!(!open("abs", Links::Beneath));
        assert!(!open("inner", Links::None));
        assert!(open("ok.txt", Links::None));
        assert!(open("escape", Links::Any));
        assert!(!open("../root/ok.txt", Links::Any));
        assert!(walk_nofollow(dir.as_fd(), "escape", Target::Read).is_err());
        assert!(walk_nofollow(dir.as_fd(), "ok.txt", Target::Read).is_ok());
    }
}
