//! Freeing big values off the request path (Redis's "lazyfree").
//!
//! Freeing a collection of millions of elements means millions of `free` calls: hundreds of
//! milliseconds during which the shard's thread would serve nobody. So a big value that leaves
//! the keyspace (DEL, UNLINK, an overwrite, expiry, FLUSHALL) is only unlinked on the request
//! path; the engine puts its entry in the database's graveyard, the worker hands graveyards
//! to one background thread at the end of each loop turn, and that thread drops them. The
//! allocator (mimalloc) takes frees from any thread; the owning thread's pages get their
//! blocks back in small steps as it allocates.
//!
//! Darner does this whatever the `lazyfree-lazy-*` directives say: Redis's synchronous mode
//! only exists to avoid its background thread's overhead, and blocking all clients to free
//! a big key is exactly what Darner promises never to do.

use crate::cmd::server::Metrics;
use crate::log;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};

type Job = (Box<dyn Send>, u64);

/// The background freeing thread, started on first use.
#[derive(Default)]
pub struct LazyFree {
    sender: Mutex<Option<Sender<Job>>>,
}

impl LazyFree {
    /// Drops `garbage` (holding `objects` keys or elements, for INFO) on the background thread.
    pub fn free(&self, metrics: &Arc<Metrics>, garbage: Box<dyn Send>, objects: u64) {
        metrics
            .lazyfree_pending
            .fetch_add(objects, Ordering::Relaxed);
        let mut sender = self.sender.lock().unwrap_or_else(|e| e.into_inner());
        if sender.is_none() {
            *sender = Self::start(metrics.clone());
        }
        let job = match sender.as_ref() {
            Some(s) => match s.send((garbage, objects)) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => (garbage, objects),
        };
        // No background thread: free here rather than keep the memory.
        drop(job.0);
        metrics
            .lazyfree_pending
            .fetch_sub(objects, Ordering::Relaxed);
        metrics.lazyfreed.fetch_add(objects, Ordering::Relaxed);
    }

    fn start(metrics: Arc<Metrics>) -> Option<Sender<Job>> {
        let (tx, rx) = channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("lazyfree".into())
            .spawn(move || {
                for (garbage, objects) in rx {
                    drop(garbage);
                    metrics
                        .lazyfree_pending
                        .fetch_sub(objects, Ordering::Relaxed);
                    metrics.lazyfreed.fetch_add(objects, Ordering::Relaxed);
                }
            });
        match spawned {
            Ok(_) => Some(tx),
            Err(e) => {
                log::warning(&format!(
                    "Can't start the lazyfree thread ({e}): big values are freed inline"
                ));
                None
            }
        }
    }
}
