//! Running futures side by side without a runtime: the core does no I/O and owns no
//! executor, yet ④'s chunk summaries and the summaries prepared ahead are independent calls
//! that should overlap.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use crate::BoxFuture;

/// Polls every future to completion concurrently, without a runtime; results in order.
pub(crate) async fn join_all<T>(futures: Vec<BoxFuture<'_, T>>) -> Vec<T> {
    let mut pending: Vec<Option<Pin<Box<dyn Future<Output = T> + Send + '_>>>> =
        futures.into_iter().map(Some).collect();
    let mut done: Vec<Option<T>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (slot, out) in pending.iter_mut().zip(done.iter_mut()) {
            if let Some(future) = slot
                && let Poll::Ready(value) = future.as_mut().poll(cx)
            {
                *out = Some(value);
                *slot = None;
            }
        }
        if pending.iter().all(Option::is_none) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_all_keeps_order() {
        let futures: Vec<BoxFuture<'_, usize>> = (0..5usize)
            .map(|i| Box::pin(std::future::ready(i)) as BoxFuture<'_, usize>)
            .collect();
        assert_eq!(pollster::block_on(join_all(futures)), vec![0, 1, 2, 3, 4]);
    }
}
