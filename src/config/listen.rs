//! Where the server listens: `--bind`, `--admin` and `--listener`.
//!
//! Owns the address rules (an address is `IP:PORT`, none given twice), the
//! default bind (loopback, unless only TLS listeners are asked for), the
//! admin address's clash with a bind, and [`ListenerMode`]. Does not own the
//! TLS listeners' own rules (`tls`) nor binding the sockets (`net`).

use std::net::SocketAddr;

use super::raw::{field, Checked};
use super::setting::Field;
use super::Error;
use crate::choice::choice;

/// Default listen address: loopback, so a first run exposes nothing.
pub const DEFAULT_BIND: &str = "127.0.0.1:8080";
/// One socket per worker lets the kernel spread connections without a
/// shared accept queue (nginx's `reuseport`).
pub const DEFAULT_LISTENER: ListenerMode = ListenerMode::ReusePort;

choice! {
    /// How workers get their listening sockets.
    pub enum ListenerMode {
        /// One SO_REUSEPORT socket per worker: the kernel spreads connections.
        ReusePort = "reuseport",
        /// One socket bound by the supervisor; each worker accepts on a dup.
        Shared = "shared",
    }
}

/// One address; `example` shows the form in the error.
pub(crate) fn addr(
    example: &'static str,
) -> impl FnOnce(Field, String) -> Result<SocketAddr, Error> {
    move |field, text| {
        text.parse()
            .map_err(|_| field.invalid(format!("{text:?} is not IP:PORT (e.g. {example})")))
    }
}

/// A list of addresses, none given twice.
pub(crate) fn addrs(
    example: &'static str,
) -> impl FnOnce(Field, Vec<String>) -> Result<Vec<SocketAddr>, Error> {
    move |field, texts| {
        let mut out: Vec<SocketAddr> = Vec::new();
        for text in texts {
            let a = addr(example)(field, text)?;
            if out.contains(&a) {
                return Err(field.invalid(format!("{a} is given twice")));
            }
            out.push(a);
        }
        Ok(out)
    }
}

/// The plain listeners: those given, else [`DEFAULT_BIND`], except that a
/// config asking only for TLS listeners gets no plain one.
pub(super) fn binds(c: &Checked) -> Result<Vec<SocketAddr>, Error> {
    match &c.bind {
        Some(given) if !given.is_empty() => Ok(given.clone()),
        _ if !c.tls_bind.is_empty() => Ok(Vec::new()),
        _ => addrs(BIND_EXAMPLE)(field::bind, vec![DEFAULT_BIND.to_owned()]),
    }
}

/// The form `--bind` errors show.
pub(super) const BIND_EXAMPLE: &str = "127.0.0.1:8080 or [::1]:8080";
/// The form `--admin` errors show.
pub(super) const ADMIN_EXAMPLE: &str = "127.0.0.1:9090";

/// `--admin` may not take a plain listener's address (port 0 excepted: the
/// kernel picks distinct ports).
pub(super) fn admin(c: &Checked, binds: &[SocketAddr]) -> Result<Option<SocketAddr>, Error> {
    match c.admin {
        Some(a) if a.port() != 0 && binds.contains(&a) => {
            Err(field::admin.invalid(format!("{a} is also a --bind address; pick another port")))
        }
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{err, raw, set};
    use crate::config::{RawConfig, DEFAULT_BIND};

    fn binds(r: RawConfig) -> Vec<String> {
        let c = r.validate_with(&set(&[0]), &[0]).unwrap();
        c.binds.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn default_bind_unless_only_tls_is_asked_for() {
        assert_eq!(binds(raw()), [DEFAULT_BIND]);
        let empty = RawConfig {
            bind: Some(vec![]),
            ..raw()
        };
        assert_eq!(binds(empty), [DEFAULT_BIND]);
        let tls_only = RawConfig {
            tls_bind: Some(vec!["127.0.0.1:8443".into()]),
            tls_self_signed: true,
            ..raw()
        };
        assert!(binds(tls_only).is_empty());
    }

    #[test]
    fn an_address_given_twice_is_refused() {
        let r = RawConfig {
            bind: Some(vec!["127.0.0.1:1".into(), "127.0.0.1:1".into()]),
            ..raw()
        };
        assert_eq!(err(r), "--bind: 127.0.0.1:1 is given twice");
    }

    #[test]
    fn admin_may_not_share_a_bind_address() {
        let r = RawConfig {
            admin: Some(DEFAULT_BIND.into()),
            ..raw()
        };
        assert_eq!(
            err(r),
            "--admin: 127.0.0.1:8080 is also a --bind address; pick another port"
        );
        let r = RawConfig {
            bind: Some(vec!["127.0.0.1:0".into()]),
            admin: Some("127.0.0.1:0".into()),
            ..raw()
        };
        assert!(r.validate_with(&set(&[0]), &[0]).is_ok());
    }
}
