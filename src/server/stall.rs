//! An I/O wrapper that fails a connection whose peer stops making progress.
//!
//! hyper bounds how long request headers may take (and, since it re-arms that timer whenever it
//! waits for the next request, how long a keep-alive connection may idle), but nothing bounds a
//! response write to a client that stopped reading: such a connection would hold its buffers
//! forever. [`StallGuard`] turns "a write made no progress for `timeout`" into a `TimedOut` error,
//! which ends the connection.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Wraps `inner`; a write pending for longer than `timeout` without progress fails.
pub struct StallGuard<S> {
    inner: S,
    timeout: Duration,
    /// Armed while a write is pending; reset whenever a write makes progress.
    write_deadline: Option<Pin<Box<Sleep>>>,
}

impl<S> StallGuard<S> {
    pub fn new(inner: S, timeout: Duration) -> Self {
        StallGuard {
            inner,
            timeout,
            write_deadline: None,
        }
    }

    /// Passes a write-side poll through: progress disarms the deadline; a pending poll arms it
    /// and turns into `TimedOut` once it has passed.
    fn guard<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.write_deadline = None;
            return poll;
        }
        let timeout = self.timeout;
        let deadline = self
            .write_deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + timeout)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("peer stopped reading for {timeout:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for StallGuard<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for StallGuard<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.guard(cx, poll)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.guard(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_flush(cx);
        this.guard(cx, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt as _;

    #[tokio::test(start_paused = true)]
    async fn a_peer_that_stops_reading_fails_the_write() {
        // A 1 KiB pipe nobody reads from.
        let (client, _server) = tokio::io::duplex(1024);
        let mut guarded = StallGuard::new(client, Duration::from_secs(5));
        let error = guarded.write_all(&vec![0u8; 64 * 1024]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_but_reading_peer_is_fine() {
        use tokio::io::AsyncReadExt as _;
        let (client, mut server) = tokio::io::duplex(1024);
        let reader = tokio::spawn(async move {
            let mut total = 0;
            let mut buf = [0u8; 512];
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                match server.read(&mut buf).await {
                    Ok(0) | Err(_) => return total,
                    Ok(n) => total += n,
                }
            }
        });
        let mut guarded = StallGuard::new(client, Duration::from_secs(5));
        guarded.write_all(&vec![0u8; 8 * 1024]).await.unwrap();
        guarded.shutdown().await.unwrap();
        drop(guarded);
        assert_eq!(reader.await.unwrap(), 8 * 1024);
    }
}
