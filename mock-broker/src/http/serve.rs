//! The accept loop: HTTP/1.1 connections, bounded in number and in how long a client
//! may take to send a request's head.
//!
//! `axum::serve` neither limits connections nor sets hyper's timer, so a client that
//! opens sockets and sends nothing (or a byte a minute) would hold a task and a file
//! descriptor each, without bound. Here every connection holds a permit of a
//! semaphore, and a request head must arrive whole within `header_read_timeout`,
//! including the idle wait before the next request on a kept-alive connection. The
//! time a handler takes is not bounded here: a long-poll may wait its full timeout.
//!
//! At the limit, a new connection does not wait for a slot while others sit idle: the
//! connection idle the longest (no request in a handler: between two requests, or
//! still sending a head or a body) is closed for it, as nginx closes kept-alive
//! connections under pressure. Without that, idle keep-alive connections or slow
//! clients holding every slot shut a working client out for up to the head timeout (a
//! request waited more than 10 s behind 600 of them against a limit of 200, measured in
//! `tests/connections.rs`). Connections busy in a handler are never closed for another.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::{Body as _, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore, watch};

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
    let max = opts.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let permits = Arc::new(Semaphore::new(max));
    let conns = Arc::new(Connections::default());
    let (stopping, stop) = watch::channel(false);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(opts.header_read_timeout)
        .keep_alive(true);
    let service = TowerToHyperService::new(app);
    let mut shutdown = std::pin::pin!(shutdown);
    'accept: loop {
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
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => p,
            // At the limit: make room by closing the connection idle the longest (its
            // permit comes back as its task ends); with every connection busy in a
            // handler, wait, and look again whenever one becomes idle.
            Err(_) => loop {
                conns.evict_longest_idle();
                tokio::select! {
                    p = permits.clone().acquire_owned() => break p.expect("the semaphore is never closed"),
                    () = conns.idle.notified() => {}
                    () = &mut shutdown => break 'accept,
                }
            },
        };
        // Answers are written whole; Nagle would only delay the last segment.
        let _ = stream.set_nodelay(true);
        let stream = super::unparsable::JsonParseErrors::new(stream);
        let me = conns.open();
        let svc = {
            let (service, me) = (service.clone(), me.clone());
            hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                // Busy once the body is all in: a client stalling its body stays
                // idle (closable), a handler at work or a long-poll does not.
                let busy = Arc::new(Mutex::new(None));
                if req.body().is_end_stream() {
                    *busy.lock().unwrap_or_else(|e| e.into_inner()) = Some(me.busy());
                }
                let req = req.map(|inner| Tracked {
                    inner,
                    conn: me.clone(),
                    busy: busy.clone(),
                });
                let answer = hyper::service::Service::call(&service, req);
                async move {
                    let answer = answer.await;
                    drop(busy.lock().unwrap_or_else(|e| e.into_inner()).take());
                    answer
                }
            })
        };
        let conn = http.serve_connection(TokioIo::new(stream), svc);
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                ended = conn.as_mut() => {
                    if let Err(e) = ended {
                        tracing::trace!(error = %e, "connection ended with an error");
                    }
                }
                // Chosen while idle, for a new connection waiting for its slot: closed
                // now, unless a request reached a handler since (then it finishes).
                () = me.evicted() => {
                    if me.is_busy() {
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.await;
                    }
                }
                () = stopped(&mut stop) => {
                    // Requests in flight finish; an idle connection closes at once.
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            me.close();
            drop(permit);
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    // Every connection's task gives its permit back as it ends.
    let _ = permits.acquire_many(max as u32).await;
}

/// Resolves once the server stops (the guard `wait_for` answers is not `Send`, so it
/// is dropped here, not held across the connection's select).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// The open connections: which are idle, since when, and how to close one.
///
/// A request's start and end touch only its connection's own atomics (the map's lock is
/// taken to open, close and evict, never per request), so the registry costs the
/// request path two atomic operations.
struct Connections {
    next: AtomicU64,
    /// What `Slot::idle_since` counts from.
    epoch: Instant,
    open: Mutex<HashMap<u64, Arc<Slot>>>,
    /// Signalled when a connection's last request is answered, for an accept waiting
    /// at the limit.
    idle: Notify,
}

impl Default for Connections {
    fn default() -> Self {
        Self {
            next: AtomicU64::new(0),
            epoch: Instant::now(),
            open: Mutex::default(),
            idle: Notify::new(),
        }
    }
}

#[derive(Default)]
struct Slot {
    /// Requests in a handler now.
    busy: AtomicU32,
    /// When it last became idle (opened, or its last request answered), in ns since
    /// `Connections::epoch`.
    idle_since: AtomicU64,
    evict: Notify,
}

impl Connections {
    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Slot>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// A new connection, idle until its first request reaches a handler.
    fn open(self: &Arc<Self>) -> Conn {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot::default());
        slot.idle_since.store(self.now(), Ordering::Relaxed);
        self.slots().insert(id, slot.clone());
        Conn {
            id,
            conns: self.clone(),
            slot,
        }
    }

    /// Closes the connection idle the longest, if any is idle (the older one first on a
    /// tie). O(open connections), and only at the limit.
    fn evict_longest_idle(&self) {
        let mut slots = self.slots();
        let longest = slots
            .iter()
            .filter(|(_, s)| s.busy.load(Ordering::Acquire) == 0)
            .min_by_key(|(id, s)| (s.idle_since.load(Ordering::Relaxed), **id))
            .map(|(id, _)| *id);
        if let Some(slot) = longest.and_then(|id| slots.remove(&id)) {
            // `notify_one` keeps the wake-up for a task not waiting yet.
            slot.evict.notify_one();
        }
    }
}

/// One connection's handle on its slot.
#[derive(Clone)]
struct Conn {
    id: u64,
    conns: Arc<Connections>,
    slot: Arc<Slot>,
}

impl Conn {
    /// Marks a request in a handler until the guard drops.
    fn busy(&self) -> Busy {
        self.slot.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    fn is_busy(&self) -> bool {
        self.slot.busy.load(Ordering::Acquire) > 0
    }

    /// Resolves when the connection is chosen to make room.
    async fn evicted(&self) {
        self.slot.evict.notified().await;
    }

    fn close(&self) {
        self.conns.slots().remove(&self.id);
    }
}

/// A request's body that marks its connection busy once the last of it has arrived.
struct Tracked {
    inner: Incoming,
    conn: Conn,
    busy: Arc<Mutex<Option<Busy>>>,
}

impl hyper::body::Body for Tracked {
    type Data = hyper::body::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(frame, Poll::Ready(None)) || self.inner.is_end_stream() {
            let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
            if busy.is_none() {
                *busy = Some(self.conn.busy());
            }
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// A request in a handler; the connection is idle again when the last one drops.
struct Busy(Conn);

impl Drop for Busy {
    fn drop(&mut self) {
        let c = &self.0;
        if c.slot.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            c.slot.idle_since.store(c.conns.now(), Ordering::Relaxed);
            c.conns.idle.notify_one();
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_idle_the_longest_is_chosen_and_a_busy_one_never() {
        let conns = Arc::new(Connections::default());
        let (a, b, c) = (conns.open(), conns.open(), conns.open());
        let busy_a = a.busy();
        // A stored `notify_one` completes at once.
        let notified = |x: &Conn| futures::FutureExt::now_or_never(x.evicted()).is_some();
        conns.evict_longest_idle();
        assert!(!notified(&a), "a is busy in a handler");
        // b became idle before c (both at open): the older goes first.
        assert!(notified(&b));
        // a's request ends later than c opened.
        std::thread::sleep(Duration::from_millis(1));
        drop(busy_a);
        conns.evict_longest_idle();
        assert!(notified(&c), "c was idle before a finished its request");
        conns.evict_longest_idle();
        assert!(notified(&a));
        conns.evict_longest_idle();
        assert!(conns.slots().is_empty());
    }
}
