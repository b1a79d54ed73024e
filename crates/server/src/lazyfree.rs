//! Freeing big values off the request path (Redis's "lazyfree").
//!
//! Freeing a collection of millions of elements means millions of `free` calls: hundreds of
//! milliseconds during which the shard's thread would serve nobody. So a big value that leaves
//! the keyspace (DEL, UNLINK, an overwrite, expiry, FLUSHALL) is only unlinked on the request
//! path; the engine puts its entry in the database's graveyard, the worker hands graveyards
//! to one background thread at the end of each loop turn, and that thread drops them. The
//! allocator (mimalloc) takes frees from any thread; the owning thread collects its emptied
//! pages once a second (alloc.rs). The thread runs at nice 10: where it shares a core with a
//! worker, the worker's requests come first (at nice 0 the scheduler gave it the core for
//! milliseconds at a time, the very stall lazy freeing exists to avoid), and it still gets
//! about a tenth of a saturated core, so memory is always given back.
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
                lower_priority();
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

/// Nice 10 for the calling thread (see the module documentation); best effort.
fn lower_priority() {
    // SAFETY: gettid and setpriority take plain integers and touch no memory of ours; on
    // Linux PRIO_PROCESS with a thread id applies to that one thread.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10) };
    if r != 0 {
        log::verbose("lazyfree: could not lower the thread's priority");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_freeing_thread_runs_at_nice_10() {
        let lf = super::LazyFree::default();
        let metrics = std::sync::Arc::new(crate::cmd::server::Metrics::default());
        lf.free(&metrics, Box::new(vec![0u8; 1 << 20]), 1);
        // The thread is named; find it and read its nice value (field 19 of its stat).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let nice = std::fs::read_dir("/proc/self/task").unwrap().find_map(|t| {
                let dir = t.unwrap().path();
                let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
                (comm.trim() == "lazyfree").then(|| {
                    let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
                    let after = stat.rsplit(')').next().unwrap().to_string();
                    after
                        .split_whitespace()
                        .nth(16)
                        .unwrap()
                        .parse::<i64>()
                        .unwrap()
                })
            });
            if nice == Some(10) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "nice {nice:?}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        while metrics.lazyfreed.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
