//! A config answer whose last byte waits for its served record to be durable.
//!
//! Owns: the response body of a 200 that carries a served record ([`super::commit`]).
//! Must not touch: records, the group commit's counters, metrics (the caller hands in the wait
//! and what to do when it ends).
//!
//! Why: a machine has its config only once it has read the whole body. Ignition reads a body
//! to its `Content-Length` and retries on a short one (an unexpected EOF is a failed fetch,
//! like a refused connection), so a body that stops one byte short is no answer at all. The
//! body is therefore sent at once but for its last byte, which goes only when the write
//! carrying the record has succeeded (or the wait's bound passed). The promise of
//! [`super::commit`] holds: a replica that dies before its write succeeded has told no machine
//! anything (the machine retries, another replica answers). And the write overlaps the
//! transfer: a new machine's answer used to be handshake, then the wait for the write, then
//! megabytes of body; now the body is on the wire while the write is on its way, and for a
//! config of megabytes the transfer is the longer of the two (benches/README.md, the cluster
//! rows' new-address row).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// How many bytes at the end of the body wait for the record: one is enough (the JSON is not
/// complete without its closing brace, and the body is short of its `Content-Length`).
const HELD_BYTES: usize = 1;

/// The body: everything but the last byte at once, the last byte once `release` resolves.
pub struct HeldTail {
    head: Option<Bytes>,
    tail: Option<Bytes>,
    release: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl HeldTail {
    /// `body` with its last byte held until `release` resolves. `release` is polled only once
    /// the rest of the body has been handed to the connection; whatever it reports (a metric
    /// for an answer sent before its record was durable) it reports then.
    pub fn new(body: Bytes, release: impl Future<Output = ()> + Send + 'static) -> Self {
        let mut head = body;
        let tail = head.split_off(head.len().saturating_sub(HELD_BYTES));
        HeldTail {
            head: (!head.is_empty()).then_some(head),
            tail: (!tail.is_empty()).then_some(tail),
            release: Some(Box::pin(release)),
        }
    }

    fn remaining(&self) -> u64 {
        let len = |part: &Option<Bytes>| part.as_ref().map_or(0, Bytes::len);
        u64::try_from(len(&self.head) + len(&self.tail)).unwrap_or(u64::MAX)
    }
}

impl Body for HeldTail {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(head) = self.head.take() {
            return Poll::Ready(Some(Ok(Frame::data(head))));
        }
        if let Some(release) = self.release.as_mut() {
            if release.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.release = None;
        }
        Poll::Ready(self.tail.take().map(|tail| Ok(Frame::data(tail))))
    }

    fn is_end_stream(&self) -> bool {
        self.head.is_none() && self.tail.is_none() && self.release.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn all_but_the_last_byte_at_once_then_the_last_byte_once_released() {
        let (release, released) = oneshot::channel::<()>();
        let mut body = HeldTail::new(Bytes::from_static(b"{\"ignition\":{}}"), async {
            let _ = released.await;
        });
        assert_eq!(body.size_hint().exact(), Some(15));
        let head = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&head[..], b"{\"ignition\":{}");
        assert_eq!(body.size_hint().exact(), Some(1));

        let mut rest = Box::pin(body.frame());
        assert!(
            futures::poll!(rest.as_mut()).is_pending(),
            "the last byte waits for the release"
        );
        release.send(()).unwrap();
        let tail = rest.await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&tail[..], b"}");
        assert!(body.is_end_stream());
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn the_release_runs_once_even_for_a_one_byte_body() {
        let ran = Arc::new(AtomicBool::new(false));
        let body = HeldTail::new(Bytes::from_static(b"x"), {
            let ran = ran.clone();
            async move { assert!(!ran.swap(true, Ordering::SeqCst)) }
        });
        let collected = body.collect().await.unwrap().to_bytes();
        assert_eq!(&collected[..], b"x");
        assert!(ran.load(Ordering::SeqCst));
    }
}
