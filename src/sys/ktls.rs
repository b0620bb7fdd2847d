//! Kernel TLS (kTLS): the `tls` upper-layer protocol on a TCP socket, the
//! transmit keys handed to it, and records of a type other than
//! application data sent through it.
//!
//! Why here: these are raw `setsockopt`/`sendmsg` calls with C structs and
//! control messages. The TLS side (which keys, when) is the transport's
//! (`worker::conn::transport::kernel`); this file only speaks the kernel's
//! interface (Documentation/networking/tls.rst): `TCP_ULP "tls"` on an
//! established socket, then `SOL_TLS`/`TLS_TX` with a `tls12_crypto_info_*`
//! struct (for TLS 1.3 too, with `version` 0x0304); a second `TLS_TX` is a
//! TLS 1.3 key update (Linux 6.14 and later; earlier kernels refuse it).
//! Once `TLS_TX` is set, every byte written is sealed into records of type
//! application data; another type (an alert, a KeyUpdate) goes by `sendmsg`
//! with a `TLS_SET_RECORD_TYPE` control message.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The AEADs the kernel seals TLS 1.3 records with (and that servery's TLS
/// 1.3 suites use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

/// One direction's keys as the kernel takes them (`struct
/// tls12_crypto_info_*`, version TLS 1.3).
pub enum CryptoInfo {
    Aes128Gcm(libc::tls12_crypto_info_aes_gcm_128),
    Aes256Gcm(libc::tls12_crypto_info_aes_gcm_256),
    Chacha20Poly1305(libc::tls12_crypto_info_chacha20_poly1305),
}

/// Why a cipher's key material was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("kTLS: a {cipher:?} key of {key} bytes or IV of {iv} bytes")]
pub struct BadKey {
    pub cipher: Cipher,
    pub key: usize,
    pub iv: usize,
}

impl CryptoInfo {
    /// TLS 1.3 keys: `key`, the 12-byte `iv` (RFC 8446 §5.3), and the
    /// sequence number of the next record. For AES-GCM the kernel wants
    /// the IV split as TLS 1.2 has it: its first 4 bytes the salt, the
    /// other 8 the explicit part; ChaCha20-Poly1305 takes all 12 as `iv`.
    pub fn tls13(cipher: Cipher, key: &[u8], iv: &[u8], seq: u64) -> Result<CryptoInfo, BadKey> {
        let bad = BadKey {
            cipher,
            key: key.len(),
            iv: iv.len(),
        };
        if iv.len() != 12 {
            return Err(bad);
        }
        let info = |cipher_type| libc::tls_crypto_info {
            version: libc::TLS_1_3_VERSION,
            cipher_type,
        };
        let rec_seq = seq.to_be_bytes();
        Ok(match cipher {
            Cipher::Aes128Gcm => CryptoInfo::Aes128Gcm(libc::tls12_crypto_info_aes_gcm_128 {
                info: info(libc::TLS_CIPHER_AES_GCM_128),
                iv: iv[4..].try_into().map_err(|_| bad)?,
                key: key.try_into().map_err(|_| bad)?,
                salt: iv[..4].try_into().map_err(|_| bad)?,
                rec_seq,
            }),
            Cipher::Aes256Gcm => CryptoInfo::Aes256Gcm(libc::tls12_crypto_info_aes_gcm_256 {
                info: info(libc::TLS_CIPHER_AES_GCM_256),
                iv: iv[4..].try_into().map_err(|_| bad)?,
                key: key.try_into().map_err(|_| bad)?,
                salt: iv[..4].try_into().map_err(|_| bad)?,
                rec_seq,
            }),
            Cipher::Chacha20Poly1305 => {
                CryptoInfo::Chacha20Poly1305(libc::tls12_crypto_info_chacha20_poly1305 {
                    info: info(libc::TLS_CIPHER_CHACHA20_POLY1305),
                    iv: iv.try_into().map_err(|_| bad)?,
                    key: key.try_into().map_err(|_| bad)?,
                    salt: [],
                    rec_seq,
                })
            }
        })
    }

    /// The struct's bytes, as `setsockopt` reads them.
    pub fn as_bytes(&self) -> &[u8] {
        let (ptr, len) = match self {
            CryptoInfo::Aes128Gcm(i) => (i as *const _ as *const u8, size_of_val(i)),
            CryptoInfo::Aes256Gcm(i) => (i as *const _ as *const u8, size_of_val(i)),
            CryptoInfo::Chacha20Poly1305(i) => (i as *const _ as *const u8, size_of_val(i)),
        };
        // SAFETY: each struct is `repr(C)` of `u16`s and byte arrays with no
        // padding (the kernel's layout: 4 + 8 + 16 + 4 + 8, 4 + 8 + 32 + 4
        // + 8, 4 + 12 + 32 + 0 + 8 bytes), so all `len` bytes are
        // initialised, and the slice borrows `self`.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

impl Drop for CryptoInfo {
    /// The key does not outlive its hand-off in our memory.
    fn drop(&mut self) {
        match self {
            CryptoInfo::Aes128Gcm(i) => zero(&mut i.key),
            CryptoInfo::Aes256Gcm(i) => zero(&mut i.key),
            CryptoInfo::Chacha20Poly1305(i) => zero(&mut i.key),
        }
    }
}

fn zero(key: &mut [u8]) {
    for b in key.iter_mut() {
        // SAFETY: `b` is a valid, aligned, exclusive reference; a volatile
        // write keeps the compiler from dropping the store as dead.
        unsafe { std::ptr::write_volatile(b, 0) };
    }
}

fn setsockopt(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &[u8],
) -> io::Result<()> {
    // SAFETY: `value` is a readable slice of the length passed; the fd is
    // borrowed, so open.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            value.as_ptr().cast(),
            value.len() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Put the `tls` upper-layer protocol on an established TCP socket. Fails
/// with ENOENT where the kernel has no TLS (no `CONFIG_TLS`, or the module
/// cannot be loaded), EEXIST when a ULP is already set.
pub fn attach(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_ULP, b"tls\0")
}

/// Hand the transmit keys to the kernel (after [`attach`]): from here
/// every byte written is sealed by it. A second call on the same socket
/// is a TLS 1.3 key update (Linux 6.14 and later).
pub fn set_tx(fd: BorrowedFd<'_>, info: &CryptoInfo) -> io::Result<()> {
    setsockopt(fd, libc::SOL_TLS, libc::TLS_TX, info.as_bytes())
}

/// Send `data` as one record of content type `typ` (an alert, a handshake
/// message), without blocking: `WouldBlock` when the socket's buffer is
/// full (wait for it to be writable and call again).
pub fn send_record(fd: BorrowedFd<'_>, typ: u8, data: &[u8]) -> io::Result<usize> {
    const SPACE: usize = 32;
    // CMSG_SPACE(1) is 24 on 64-bit Linux; the buffer is aligned for
    // `cmsghdr` and larger than it needs.
    #[repr(C, align(8))]
    struct Control([u8; SPACE]);
    let mut control = Control([0; SPACE]);
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data, zero is a valid "nothing" for each field.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE only computes a size.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(1) } as usize;
    debug_assert!(msg.msg_controllen <= SPACE);
    // SAFETY: `msg` points at `control`, which has room for one cmsghdr
    // and its byte (checked above), so CMSG_FIRSTHDR is non-null and the
    // header and data written lie inside it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_TLS;
        (*cmsg).cmsg_type = libc::TLS_SET_RECORD_TYPE;
        (*cmsg).cmsg_len = libc::CMSG_LEN(1) as usize;
        *libc::CMSG_DATA(cmsg) = typ;
    }
    // SAFETY: `msg`, its iovec (reading `data`, which outlives the call)
    // and its control buffer are valid for the call; the fd is borrowed.
    let n = unsafe {
        libc::sendmsg(
            fd.as_raw_fd(),
            &msg,
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Both ends of a loopback TCP connection made for a probe (the ULP needs
/// an established socket): the accepted end first.
fn loopback() -> io::Result<(std::net::TcpStream, std::net::TcpStream)> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    let client = std::net::TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    Ok((server, client))
}

/// Throwaway TLS 1.3 AES-128-GCM send keys, for probes.
fn throwaway_keys(b: u8) -> io::Result<CryptoInfo> {
    CryptoInfo::tls13(Cipher::Aes128Gcm, &[b; 16], &[b; 12], 0).map_err(io::Error::other)
}

/// Whether this kernel seals TLS records: the `tls` ULP and throwaway send
/// keys set on a loopback connection made for the purpose (the ULP alone
/// can load while the AEAD the keys need cannot). `Err` says why not.
pub fn probe() -> io::Result<()> {
    use std::os::fd::AsFd;
    let (server, _client) = loopback()?;
    attach(server.as_fd())?;
    set_tx(server.as_fd(), &throwaway_keys(1)?)
}

/// Whether this kernel takes new send keys on a socket that has some (a
/// TLS 1.3 key update: Linux 6.14, or a backport), asked once per process
/// on a loopback connection with throwaway keys.
pub fn can_rekey() -> bool {
    static ANSWER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ANSWER.get_or_init(|| {
        let rekey = || -> io::Result<()> {
            use std::os::fd::AsFd;
            let (server, _client) = loopback()?;
            let fd = server.as_fd();
            attach(fd)?;
            set_tx(fd, &throwaway_keys(1)?)?;
            set_tx(fd, &throwaway_keys(2)?)
        };
        rekey().is_ok()
    })
}

/// The errors that say the kernel has no TLS at all (so trying again on
/// another connection is pointless), as opposed to one socket's refusal.
pub fn unavailable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENOPROTOOPT) | Some(libc::EOPNOTSUPP)
    )
}

const _: () = {
    assert!(size_of::<libc::tls12_crypto_info_aes_gcm_128>() == 40);
    assert!(size_of::<libc::tls12_crypto_info_aes_gcm_256>() == 56);
    assert!(size_of::<libc::tls12_crypto_info_chacha20_poly1305>() == 56);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aes_gcm_keys_split_the_iv_into_salt_and_explicit_part() {
        let key: Vec<u8> = (1..=16).collect();
        let iv: Vec<u8> = (101..=112).collect();
        let info = CryptoInfo::tls13(Cipher::Aes128Gcm, &key, &iv, 0x0102_0304_0506_0708).unwrap();
        let b = info.as_bytes();
        assert_eq!(b.len(), 40);
        // version 0x0304 and cipher 51, native-endian u16s.
        assert_eq!(u16::from_ne_bytes([b[0], b[1]]), 0x0304);
        assert_eq!(u16::from_ne_bytes([b[2], b[3]]), 51);
        assert_eq!(&b[4..12], &iv[4..]);
        assert_eq!(&b[12..28], &key[..]);
        assert_eq!(&b[28..32], &iv[..4]);
        assert_eq!(&b[32..40], &[1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn aes_256_and_chacha_have_their_layouts() {
        let key: Vec<u8> = (1..=32).collect();
        let iv: Vec<u8> = (101..=112).collect();
        let aes = CryptoInfo::tls13(Cipher::Aes256Gcm, &key, &iv, 7).unwrap();
        let b = aes.as_bytes();
        assert_eq!(u16::from_ne_bytes([b[2], b[3]]), 52);
        assert_eq!(&b[4..12], &iv[4..]);
        assert_eq!(&b[12..44], &key[..]);
        assert_eq!(&b[44..48], &iv[..4]);
        assert_eq!(&b[48..56], &7u64.to_be_bytes());
        let chacha = CryptoInfo::tls13(Cipher::Chacha20Poly1305, &key, &iv, 9).unwrap();
        let b = chacha.as_bytes();
        assert_eq!(u16::from_ne_bytes([b[2], b[3]]), 54);
        assert_eq!(&b[4..16], &iv[..]);
        assert_eq!(&b[16..48], &key[..]);
        assert_eq!(&b[48..56], &9u64.to_be_bytes());
    }

    #[test]
    fn a_key_of_the_wrong_length_is_refused() {
        let iv = [0u8; 12];
        assert!(CryptoInfo::tls13(Cipher::Aes128Gcm, &[0; 32], &iv, 0).is_err());
        assert!(CryptoInfo::tls13(Cipher::Aes256Gcm, &[0; 16], &iv, 0).is_err());
        assert!(CryptoInfo::tls13(Cipher::Chacha20Poly1305, &[0; 32], &[0; 8], 0).is_err());
    }

    #[test]
    fn the_probe_agrees_with_the_kernels_list_of_ulps() {
        let listed = || {
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
                .is_ok_and(|l| l.split_whitespace().any(|u| u == "tls"))
        };
        match probe() {
            // Whatever loaded for the probe is listed now.
            Ok(()) => assert!(listed(), "the probe worked but tls is not listed"),
            Err(e) => {
                assert!(unavailable(&e), "{e}");
                assert!(!can_rekey(), "no TLS, no key updates");
            }
        }
    }
}
