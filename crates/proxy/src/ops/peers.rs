//! Connections that have not sent a complete request head yet, counted per peer.
//!
//! A request head that never finishes costs its sender one socket write and the proxy one
//! connection slot until the header deadline: 1,100 of them from one process used to fill
//! the connection limit and take the proxy offline for everyone for 30 s. So each peer may
//! hold at most `limits.max_unfinished_heads_per_peer` such connections; a newer one closes
//! the peer's oldest. Closing the oldest rather than refusing the newest keeps the peer's
//! own fresh connections working (an agent, or a health check, on the same host as the
//! attacker): a stalled head is old by the time anyone else arrives.
//!
//! A connection leaves the count when its first head is complete. Connections that carry
//! requests are never counted, however many: many agents on one host behind one proxy is
//! the normal case.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// Who a connection comes from, for the count: an IPv4 address, or an IPv6 /64 (one
/// subscriber usually holds a whole /64, so counting single IPv6 addresses would let one
/// client pass as millions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Peer {
    V4(u32),
    V6Prefix(u64),
}

impl Peer {
    /// The peer `address` counts as (an IPv4-mapped IPv6 address is its IPv4 address).
    pub(crate) fn of(address: IpAddr) -> Self {
        match address.to_canonical() {
            IpAddr::V4(v4) => Peer::V4(u32::from(v4)),
            IpAddr::V6(v6) => Peer::V6Prefix((u128::from(v6) >> 64) as u64),
        }
    }
}

/// The unfinished connections of every peer.
#[derive(Debug)]
pub(crate) struct UnfinishedHeads {
    per_peer: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// Per peer, its unfinished connections by age (ids grow), each with the sender that
    /// tells it it was closed to make room.
    peers: HashMap<Peer, BTreeMap<u64, oneshot::Sender<()>>>,
}

/// How a connection's wait for its first complete head ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstHead {
    /// The head arrived: the connection is served like any other.
    Complete,
    /// A newer connection of the same peer took its place.
    Evicted,
}

/// One connection's place in the count; dropping it leaves the count.
#[derive(Debug)]
pub(crate) struct Ticket {
    id: u64,
    peer: Peer,
    done: AtomicBool,
    heads: Arc<UnfinishedHeads>,
}

impl UnfinishedHeads {
    /// At most `per_peer` (at least 1) unfinished connections per peer.
    pub(crate) fn new(per_peer: usize) -> Arc<Self> {
        Arc::new(UnfinishedHeads {
            per_peer: per_peer.max(1),
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Only counts: a panic elsewhere mid-update leaves them usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a new connection from `address`, closing the peer's oldest unfinished one
    /// when it already holds as many as allowed (returns whether it did). The receiver
    /// completes with `Ok` when this connection is evicted in turn, with `Err` once its
    /// head is complete.
    pub(crate) fn admit(
        self: &Arc<Self>,
        address: IpAddr,
    ) -> (Arc<Ticket>, oneshot::Receiver<()>, bool) {
        let peer = Peer::of(address);
        let (sender, receiver) = oneshot::channel();
        let mut state = self.state();
        let id = state.next_id;
        state.next_id += 1;
        let open = state.peers.entry(peer).or_default();
        let mut evicted = false;
        while open.len() >= self.per_peer {
            let Some((_, oldest)) = open.pop_first() else {
                break;
            };
            // The oldest may have ended already (its receiver gone): nothing to tell.
            let _ = oldest.send(());
            evicted = true;
        }
        open.insert(id, sender);
        drop(state);
        let ticket = Ticket {
            id,
            peer,
            done: AtomicBool::new(false),
            heads: self.clone(),
        };
        (Arc::new(ticket), receiver, evicted)
    }

    /// Unfinished connections of the peer `address` counts as.
    #[cfg(test)]
    pub(crate) fn unfinished(&self, address: IpAddr) -> usize {
        (self.state().peers.get(&Peer::of(address))).map_or(0, BTreeMap::len)
    }

    /// Peers with an unfinished connection (the map never keeps an empty entry).
    #[cfg(test)]
    fn peers(&self) -> usize {
        self.state().peers.len()
    }
}

impl Ticket {
    /// The connection's head is complete (or the connection ended): it leaves the count.
    /// Returns whether it was still counted, i.e. neither evicted nor finished before.
    pub(crate) fn finish(&self) -> bool {
        if self.done.swap(true, Ordering::AcqRel) {
            return false;
        }
        let mut state = self.heads.state();
        let Some(open) = state.peers.get_mut(&self.peer) else {
            return false;
        };
        let removed = open.remove(&self.id).is_some();
        if open.is_empty() {
            state.peers.remove(&self.peer);
        }
        removed
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Waits until the first head of the connection holding `evicted`'s ticket is complete
/// or the connection is evicted.
pub(crate) async fn first_head(evicted: oneshot::Receiver<()>) -> FirstHead {
    match evicted.await {
        Ok(()) => FirstHead::Evicted,
        // The sender went with the ticket's entry: the head is complete.
        Err(_) => FirstHead::Complete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_peer_over_its_cap_loses_its_oldest_unfinished_connection() {
        let heads = UnfinishedHeads::new(2);
        let (first, mut first_rx, _) = heads.admit(ip("10.0.0.1"));
        let (_second, mut second_rx, _) = heads.admit(ip("10.0.0.1"));
        let (_other, _, evicted) = heads.admit(ip("10.0.0.2"));
        assert!(!evicted, "another peer has its own count");
        let (_third, _third_rx, evicted) = heads.admit(ip("10.0.0.1"));
        assert!(evicted);
        assert_eq!(first_rx.try_recv(), Ok(()));
        assert!(second_rx.try_recv().is_err());
        assert_eq!(heads.unfinished(ip("10.0.0.1")), 2);
        assert!(
            !first.finish(),
            "an evicted connection is no longer counted"
        );
    }

    #[test]
    fn a_complete_head_leaves_the_count_and_tells_its_connection() {
        let heads = UnfinishedHeads::new(1);
        let (ticket, receiver, _) = heads.admit(ip("::1"));
        assert!(ticket.finish());
        assert!(!ticket.finish());
        assert_eq!(
            pollster::block_on(first_head(receiver)),
            FirstHead::Complete
        );
        // Finished connections never count: the peer may open any number more.
        let (_again, _, evicted) = heads.admit(ip("::1"));
        assert!(!evicted);
        drop(ticket);
        assert_eq!(heads.unfinished(ip("::1")), 1);
    }

    #[test]
    fn dropping_a_ticket_forgets_the_peer() {
        let heads = UnfinishedHeads::new(4);
        let (ticket, _, _) = heads.admit(ip("192.0.2.7"));
        assert_eq!(heads.peers(), 1);
        drop(ticket);
        assert_eq!(heads.peers(), 0);
    }

    #[test]
    fn an_ipv6_slash_64_is_one_peer_and_mapped_ipv4_is_ipv4() {
        assert_eq!(
            Peer::of(ip("2001:db8:1:2::1")),
            Peer::of(ip("2001:db8:1:2:ffff::9"))
        );
        assert_ne!(
            Peer::of(ip("2001:db8:1:2::1")),
            Peer::of(ip("2001:db8:1:3::1"))
        );
        assert_eq!(Peer::of(ip("::ffff:127.0.0.1")), Peer::of(ip("127.0.0.1")));
    }
}
