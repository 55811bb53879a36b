//! The accept loop: HTTP/1.1 connections, bounded in number and in how long a client
//! may take to send a request's head.
//!
//! `axum::serve` neither limits connections nor sets hyper's timer, so a client that
//! opens sockets and sends nothing (or a byte a minute) would hold a task and a file
//! descriptor each, without bound. Here every connection holds a permit of a
//! semaphore (at the limit, new connections wait in the kernel's backlog, as in
//! mini-redis), and a request head must arrive whole within `header_read_timeout`,
//! including the idle wait before the next request on a kept-alive connection. The
//! time a handler takes is not bounded here: a long-poll may wait its full timeout.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Connection bounds of the HTTP server.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// Most connections open at once.
    pub max_connections: usize,
    /// Longest wait for a request's head (and for the next one on an idle connection).
    pub header_read_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            header_read_timeout: Duration::from_secs(60),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` completes, then stops accepting, lets
/// requests in flight finish, and returns once every connection has closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) {
    let permits = Arc::new(Semaphore::new(opts.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(opts.header_read_timeout)
        .keep_alive(true);
    let service = TowerToHyperService::new(app);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Answers are written whole; Nagle would only delay the last segment.
        let _ = stream.set_nodelay(true);
        let stream = super::unparsable::JsonParseErrors::new(stream);
        let conn = http.serve_connection(TokioIo::new(stream), service.clone());
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::trace!(error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// A failed accept: a connection reset before it was taken is routine; anything else
/// (out of file descriptors) is logged and waited out, so the loop does not spin.
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accept failed; pausing");
    tokio::time::sleep(Duration::from_millis(100)).await;
}
