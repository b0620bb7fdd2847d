//! One order through instant-acme: the account, then authorizations,
//! answers, polling, finalization and the chain (RFC 8555 §7.4).
//!
//! Every request to the CA is bounded ([`REQUEST_TIMEOUT`]) and so is the
//! wait for the authorizations ([`POLL`]) and for the certificate; the
//! published answers are withdrawn when the authorizations are decided, or
//! when the order fails or is dropped before that ([`Published`]).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use instant_acme::{
    Account, AuthorizationStatus, BodyWrapper, BytesResponse, ChallengeType, HttpClient,
    Identifier, NewAccount, NewOrder, OrderStatus, RetryPolicy,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use super::{answer, store, Answer, Certificate, Challenge, Error, Order, Responder, Settings};
use crate::tls::Material;

/// The bound on one HTTP request to the CA.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Polling for the authorizations' outcome: 0.25 s, then 1.5× per step, for
/// 90 s at most (about a dozen requests).
const POLL: RetryPolicy = RetryPolicy::new()
    .initial_delay(Duration::from_millis(250))
    .backoff(1.5)
    .timeout(Duration::from_secs(90));
/// Polling for the certificate after finalization: the CA signs in seconds.
const POLL_CERT: RetryPolicy = RetryPolicy::new()
    .initial_delay(Duration::from_millis(250))
    .backoff(1.5)
    .timeout(Duration::from_secs(60));

fn acme(step: &'static str) -> impl FnOnce(instant_acme::Error) -> Error {
    move |source| match source {
        instant_acme::Error::Timeout(_) => Error::Timeout { what: step },
        source => Error::Acme { step, source },
    }
}

/// The account: the one in `account.json`, or a new one (terms agreed),
/// stored before it is used.
pub(super) async fn account(settings: &Settings) -> Result<Account, Error> {
    let http = || client(settings.ca_roots.as_deref());
    let dir = &settings.state_dir;
    if let Some(credentials) = store::account(dir, &settings.directory)? {
        return Account::builder_with_http(http()?)
            .from_credentials(credentials)
            .await
            .map_err(acme("directory"));
    }
    let contact: Vec<&str> = settings.contact.iter().map(String::as_str).collect();
    let new = NewAccount {
        contact: &contact,
        terms_of_service_agreed: true,
        only_return_existing: false,
    };
    let eab = (settings.eab.as_ref())
        .map(|e| instant_acme::ExternalAccountKey::new(e.kid.clone(), &e.hmac_key));
    let (account, credentials) = Account::builder_with_http(http()?)
        .create(&new, settings.directory.clone(), eab.as_ref())
        .await
        .map_err(acme("new account"))?;
    store::save_account(dir, &settings.directory, credentials)?;
    tracing::info!(id = account.id(), "ACME account created");
    Ok(account)
}

/// The HTTPS client to the CA: `roots` alone if given, else the platform's
/// verifier; every request bounded by [`REQUEST_TIMEOUT`].
fn client(roots: Option<&Path>) -> Result<Box<dyn HttpClient>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match roots {
        Some(path) => {
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| Error::Roots {
                    path: path.to_owned(),
                    detail: e.to_string(),
                })?
                .with_root_certificates(load_roots(path)?)
                .with_no_client_auth();
            builder.with_tls_config(config)
        }
        None => builder
            .with_provider_and_platform_verifier(provider)
            .map_err(|e| Error::Roots {
                path: "(the platform's verifier)".into(),
                detail: e.to_string(),
            })?,
    };
    let connector = builder.https_only().enable_http1().build();
    let hyper = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector);
    Ok(Box::new(Bounded(Box::new(hyper))))
}

/// Every PEM certificate in `path`, as trust anchors (at least one).
pub(super) fn load_roots(path: &Path) -> Result<rustls::RootCertStore, Error> {
    let bad = |detail: String| Error::Roots {
        path: path.to_owned(),
        detail,
    };
    let mut store = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(e.to_string()))? {
        let cert = cert.map_err(|e| bad(e.to_string()))?;
        store.add(cert).map_err(|e| bad(e.to_string()))?;
    }
    if store.is_empty() {
        return Err(bad("no PEM certificate".into()));
    }
    Ok(store)
}

/// An [`HttpClient`] whose requests fail after [`REQUEST_TIMEOUT`].
struct Bounded(Box<dyn HttpClient>);

impl HttpClient for Bounded {
    fn request(
        &self,
        req: http::Request<BodyWrapper<bytes::Bytes>>,
    ) -> Pin<Box<dyn Future<Output = Result<BytesResponse, instant_acme::Error>> + Send>> {
        let fut = self.0.request(req);
        Box::pin(async move {
            match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
                Ok(r) => r,
                Err(elapsed) => Err(instant_acme::Error::Other(Box::new(elapsed))),
            }
        })
    }
}

/// The answers published for one order: withdrawn once, on
/// [`Published::withdraw`] or when dropped (a failed or abandoned order).
struct Published<'a> {
    responder: &'a dyn Responder,
    answers: Vec<Answer>,
}

impl Published<'_> {
    fn publish(&mut self, answer: Answer) {
        self.responder.publish(&answer);
        self.answers.push(answer);
    }

    fn withdraw(&mut self) {
        for a in self.answers.drain(..) {
            self.responder.withdraw(&a);
        }
    }
}

impl Drop for Published<'_> {
    fn drop(&mut self) {
        self.withdraw();
    }
}

/// Carry out `order`: a new certificate for its domains, not yet stored.
pub(super) async fn issue(
    account: &Account,
    order: &Order,
    challenge: Challenge,
    responder: &dyn Responder,
) -> Result<Certificate, Error> {
    let ids: Vec<Identifier> = order.domains.iter().cloned().map(Identifier::Dns).collect();
    let mut o = account
        .new_order(&NewOrder::new(&ids))
        .await
        .map_err(acme("new order"))?;
    let kind = match challenge {
        Challenge::Http01 => ChallengeType::Http01,
        Challenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
    };

    let mut published = Published {
        responder,
        answers: Vec::new(),
    };
    let mut authorizations = o.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz.map_err(acme("authorization"))?;
        let domain = authz.identifier().to_string();
        match authz.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => continue,
            other => {
                return Err(Error::Challenge {
                    domain,
                    detail: format!("the authorization is {other:?}"),
                })
            }
        }
        let Some(mut ch) = authz.challenge(kind.clone()) else {
            return Err(Error::NoChallenge { domain, challenge });
        };
        let key_authorization = ch.key_authorization();
        published.publish(answer::make(
            challenge,
            &domain,
            &ch.token,
            key_authorization.as_str(),
        )?);
        ch.set_ready().await.map_err(acme("challenge ready"))?;
    }

    let polled = o.poll_ready(&POLL).await;
    published.withdraw();
    match polled {
        Ok(OrderStatus::Ready) => {}
        Ok(_) | Err(instant_acme::Error::Api(_)) => return Err(why_invalid(&mut o).await),
        Err(e) => return Err(acme("authorizations")(e)),
    }

    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|source| {
        Error::Key {
            what: "a certificate key",
            source,
        }
    })?;
    let csr = csr(&order.domains, &key)?;
    o.finalize_csr(&csr).await.map_err(acme("finalize"))?;
    let chain_pem = o
        .poll_certificate(&POLL_CERT)
        .await
        .map_err(acme("certificate"))?;
    let material = Material {
        chain_pem,
        key_pem: key.serialize_pem(),
    };
    store::certificate(material, "the CA")
}

/// A CSR for `domains` (SANs, empty subject: RFC 8555 §7.4 takes the names
/// from the SANs) signed by `key`.
fn csr(domains: &[String], key: &rcgen::KeyPair) -> Result<Vec<u8>, Error> {
    let err = |source| Error::Key {
        what: "a CSR",
        source,
    };
    let mut params = rcgen::CertificateParams::new(domains.to_vec()).map_err(err)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    Ok(params.serialize_request(key).map_err(err)?.der().to_vec())
}

/// Why an order went invalid: the first failed challenge's problem detail
/// (what the CA saw, e.g. "Connection refused"), else the order's own error.
async fn why_invalid(o: &mut instant_acme::Order) -> Error {
    let mut authorizations = o.authorizations();
    while let Some(Ok(mut authz)) = authorizations.next().await {
        let domain = authz.identifier().to_string();
        let Ok(state) = authz.refresh().await else {
            continue;
        };
        if let Some(problem) = state.challenges.iter().find_map(|c| c.error.as_ref()) {
            return Error::Challenge {
                domain,
                detail: problem_text(problem),
            };
        }
    }
    match o.refresh().await {
        Ok(state) => Error::OrderInvalid {
            detail: state.error.as_ref().map_or_else(
                || format!("status {:?}, no problem document", state.status),
                problem_text,
            ),
        },
        Err(e) => acme("order")(e),
    }
}

/// A problem document as a line: its detail, else its type.
fn problem_text(p: &instant_acme::Problem) -> String {
    match (&p.detail, &p.r#type) {
        (Some(detail), _) => detail.clone(),
        (None, Some(t)) => t.clone(),
        (None, None) => "no detail".into(),
    }
}
