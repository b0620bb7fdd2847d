//! tower services (an axum `Router`) on the workers: the `tower` feature.
//!
//! [`Tower`] wraps any `tower::Service<http::Request<RequestBody>>` whose
//! response body is an `http_body::Body` of `Bytes`, and is itself a
//! servery [`Service`]: one clone per worker, made on the worker's thread
//! by the factory ([`factory`]), and its futures polled there, on the
//! worker's monoio runtime. Each call clones the worker's copy first (as
//! `tower::ServiceExt::oneshot` does; an axum `Router` clone is a reference
//! count), waits for `poll_ready`, and calls it with the request as an
//! `http::Request` (the [`Connection`](super::Connection) in its
//! extensions). An error from the service is a 500; a panic is the same
//! 500 and closed connection as any service's.
//!
//! No tokio runtime is needed to route, extract or serialize: axum without
//! its `tokio` feature pulls in none (docs/decisions/0006). Code that does
//! need one (`tokio::spawn`, `tokio::time`, tokio-based clients) panics
//! without it ("there is no reactor running"), answered 500. For such
//! apps the `tokio` feature offers [`SideRuntime`]: a small multi-thread
//! tokio runtime beside the workers, entered on each worker thread, so
//! those calls find it (spawned tasks run on its threads; timers and
//! sockets are driven there and wake the worker's task).

use std::future::poll_fn;

use bytes::Bytes;

use super::ServiceFactory;
use super::{into_body, Body, BoxError, MakeError, Request, RequestBody, Response, Service};
use crate::http::error::{on_error, Refusal};

/// A tower service as a servery service.
#[derive(Debug, Clone)]
pub struct Tower<T> {
    service: T,
}

impl<T> Tower<T> {
    pub fn new(service: T) -> Tower<T> {
        Tower { service }
    }
}

impl<T, B> Service for Tower<T>
where
    T: tower_service::Service<http::Request<RequestBody>, Response = http::Response<B>>
        + Clone
        + 'static,
    T::Error: Into<BoxError>,
    T::Future: 'static,
    B: http_body::Body<Data = Bytes, Error: Into<BoxError>> + 'static,
{
    type Body = Body;

    async fn call(&self, req: Request) -> Response<Body> {
        let mut service = self.service.clone();
        if let Err(e) = poll_fn(|cx| service.poll_ready(cx)).await {
            return failed(e.into());
        }
        match service.call(req.into_http()).await {
            Ok(resp) => resp.map(into_body),
            Err(e) => failed(e.into()),
        }
    }
}

/// The 500 for a tower service's error.
fn failed(e: BoxError) -> Response<Body> {
    tracing::error!(error = %e, "tower service failed: answered 500");
    super::response::from_static(on_error(&Refusal::Internal))
}

/// A factory serving `service` (`Send + Sync`, as an axum `Router` is):
/// each worker gets its own clone.
pub fn factory<T>(service: T) -> impl ServiceFactory<Service = Tower<T>>
where
    T: Clone + Send + Sync + 'static,
    Tower<T>: Service,
{
    move |_worker: usize| Ok::<_, MakeError>(Tower::new(service.clone()))
}

#[cfg(feature = "tokio")]
pub use side::{SideRuntime, WithTokio, DEFAULT_SIDE_THREADS};

#[cfg(feature = "tokio")]
mod side {
    use std::io;
    use std::sync::Arc;

    use crate::app::{MakeError, ServiceFactory};

    /// Threads of the side runtime unless said: it runs what apps spawn
    /// and drives tokio timers and sockets; requests stay on the workers.
    pub const DEFAULT_SIDE_THREADS: usize = 1;

    /// A tokio runtime beside the workers, for apps that need one.
    #[derive(Debug, Clone)]
    pub struct SideRuntime {
        runtime: Arc<tokio::runtime::Runtime>,
    }

    impl SideRuntime {
        /// A runtime of `threads` threads (named `servery-tokio`), with its
        /// timer and I/O drivers.
        pub fn new(threads: usize) -> io::Result<SideRuntime> {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads.max(1))
                .thread_name("servery-tokio")
                .enable_all()
                .build()?;
            Ok(SideRuntime {
                runtime: Arc::new(runtime),
            })
        }

        /// The runtime's handle, to spawn on it from anywhere.
        pub fn handle(&self) -> &tokio::runtime::Handle {
            self.runtime.handle()
        }

        /// Make the runtime this thread's current tokio runtime for the
        /// rest of the thread's life (a worker thread's: it serves until
        /// it ends). The guard is kept by never dropping it: tokio's
        /// guards must be dropped in reverse order of entry, and this one
        /// is the thread's last.
        pub fn enter_for_thread(&self) {
            std::mem::forget(self.runtime.enter());
        }

        /// `factory`, its services made on threads that entered this runtime.
        pub fn serve<F: ServiceFactory>(&self, factory: F) -> WithTokio<F> {
            WithTokio {
                runtime: self.clone(),
                factory,
            }
        }
    }

    /// A factory whose workers enter a [`SideRuntime`] before making their
    /// services (made by [`SideRuntime::serve`]).
    pub struct WithTokio<F> {
        runtime: SideRuntime,
        factory: F,
    }

    impl<F: ServiceFactory> ServiceFactory for WithTokio<F> {
        type Service = F::Service;
        fn make(&self, index: usize) -> Result<F::Service, MakeError> {
            // Once per worker thread: a reload's new workers are new threads.
            if tokio::runtime::Handle::try_current().is_err() {
                self.runtime.enter_for_thread();
            }
            self.factory.make(index)
        }
    }
}
