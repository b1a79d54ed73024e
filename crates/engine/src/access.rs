//! What the entry's two-byte access clock means: the last access time under an LRU policy
//! (and without maxmemory), or a logarithmic access counter under an LFU one.
//!
//! The entry has two bytes for it (entry.rs: memory per key is the product, and a third byte
//! would cost a whole size class for many keys). Redis has 24 bits in its object header.
//!
//! **LRU**: seconds, wrapping at 2^16 (18.2 hours), the resolution Redis's LRU clock has (1 s),
//! so OBJECT IDLETIME reads exactly as in Redis for any idle time under 18 hours. A coarser
//! unit would make the horizon longer but IDLETIME and DEBUG OBJECT's lru_seconds_idle would
//! jump in steps (a client that waits 2 s and expects `>= 2` would see 0). What the wrap costs:
//! a key untouched for more than 18.2 hours reads as idle for (its idle time mod 18.2 h), so
//! it may look younger than it is. Under memory pressure that does not happen in practice:
//! keys idle for 18 hours are the first evicted long before they wrap; it matters only for
//! keys that survived 18 idle hours without pressure, which then age again as a random cohort.
//!
//! **LFU** (Redis: 16 bits of minutes and an 8-bit counter): the low byte is the counter
//! (Redis's log counter, 0..=255, a new key starting at [`LFU_INIT_VAL`] = 5, incremented with
//! probability 1 / ((counter - 5) * lfu-log-factor + 1)); the high byte is the minute of the
//! last access, mod 256. The counter decays by one per `lfu-decay-time` minutes since that
//! minute, when it is read (OBJECT FREQ, the eviction sampler) and before each increment, and
//! an access stores the decayed, incremented counter with the current minute, all as Redis.
//! The 8-bit minute wraps every 256 minutes (4.3 hours), where Redis's wraps every 45 days: a
//! key untouched for longer decays by (elapsed mod 256) / decay-time periods instead of
//! reaching 0. With the default decay time (1 minute) a counter of 255 needs 255 idle
//! minutes to reach 0 in any case, so only keys idle for more than 4.3 hours and touched
//! rarely before are affected: what tests and OBJECT FREQ can see within an hour is Redis's.
//!
//! The mode and parameters are process-wide (CONFIG SET maxmemory-policy, lfu-log-factor,
//! lfu-decay-time), read once per command into its [`crate::Clock`]. Switching between LRU and
//! LFU reinterprets the existing clocks, as it does in Redis (its OBJECT FREQ error says so).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// The counter a new key starts with (Redis's LFU_INIT_VAL).
pub const LFU_INIT_VAL: u8 = 5;

static LFU_ON: AtomicBool = AtomicBool::new(false);
static LOG_FACTOR: AtomicU32 = AtomicU32::new(10);
static DECAY_TIME: AtomicU32 = AtomicU32::new(1);

/// Sets the process-wide access-clock mode (the server calls it when the policy or the LFU
/// parameters change).
pub fn set_mode(lfu: bool, log_factor: u32, decay_minutes: u32) {
    LOG_FACTOR.store(log_factor, Ordering::Relaxed);
    DECAY_TIME.store(decay_minutes, Ordering::Relaxed);
    LFU_ON.store(lfu, Ordering::Relaxed);
}

/// The LFU parameters in force at `now_ms`, or None under LRU.
#[inline]
pub fn lfu_at(now_ms: i64) -> Option<Lfu> {
    if !LFU_ON.load(Ordering::Relaxed) {
        return None;
    }
    Some(Lfu {
        log_factor: LOG_FACTOR.load(Ordering::Relaxed),
        decay: DECAY_TIME.load(Ordering::Relaxed),
        minute: ((now_ms / 60_000) & 0xff) as u8,
    })
}

/// LFU parameters and the current minute (mod 256), as one command sees them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lfu {
    pub log_factor: u32,
    /// lfu-decay-time, minutes per decrement (0: no decay).
    pub decay: u32,
    pub minute: u8,
}

impl Lfu {
    /// The clock of a new key.
    pub fn init(&self) -> u16 {
        pack(self.minute, LFU_INIT_VAL)
    }

    /// The counter of clock `v`, decayed to now (Redis's LFUDecrAndReturn).
    pub fn counter(&self, v: u16) -> u8 {
        let (minute, counter) = ((v >> 8) as u8, v as u8);
        if self.decay == 0 {
            return counter;
        }
        let periods = u32::from(self.minute.wrapping_sub(minute)) / self.decay;
        counter.saturating_sub(periods.min(255) as u8)
    }

    /// Clock `v` after one access: decayed, incremented logarithmically, stamped now.
    pub fn touched(&self, v: u16) -> u16 {
        pack(self.minute, log_incr(self.counter(v), self.log_factor))
    }
}

fn pack(minute: u8, counter: u8) -> u16 {
    (minute as u16) << 8 | counter as u16
}

thread_local! {
    static RNG: Cell<u64> = const { Cell::new(0) };
}

/// A uniform number in [0, 1) from a per-thread xorshift (Redis uses rand()).
fn random_unit() -> f64 {
    RNG.with(|r| {
        let mut x = r.get();
        if x == 0 {
            x = (r as *const Cell<u64> as u64) ^ 0x9E37_79B9_7F4A_7C15;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        r.set(x);
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// Redis's LFULogIncr: the greater the counter, the less likely an increment.
pub fn log_incr(counter: u8, log_factor: u32) -> u8 {
    if counter == 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let p = 1.0 / (base * log_factor as f64 + 1.0);
    if random_unit() < p {
        counter + 1
    } else {
        counter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_keys_start_at_five_and_grow_logarithmically() {
        let l = Lfu {
            log_factor: 10,
            decay: 1,
            minute: 7,
        };
        let mut v = l.init();
        assert_eq!(l.counter(v), LFU_INIT_VAL);
        // The first increments (counter 5) always happen.
        v = l.touched(v);
        assert_eq!(l.counter(v), 6);
        for _ in 0..10_000 {
            v = l.touched(v);
        }
        // Redis's table for factor 10: about 10k hits give a counter near 50-60.
        let c = l.counter(v);
        assert!((25..=100).contains(&c), "{c}");
        let f0 = Lfu { log_factor: 0, ..l };
        let mut w = f0.init();
        for _ in 0..300 {
            w = f0.touched(w);
        }
        assert_eq!(f0.counter(w), 255);
    }

    #[test]
    fn the_counter_decays_per_decay_time_and_wraps_the_minute() {
        let at = |minute, decay| Lfu {
            log_factor: 10,
            decay,
            minute,
        };
        let v = pack(250, 20);
        assert_eq!(at(250, 1).counter(v), 20);
        assert_eq!(at(255, 1).counter(v), 15);
        // 250 -> 4 is 10 minutes later, across the wrap.
        assert_eq!(at(4, 1).counter(v), 10);
        assert_eq!(at(4, 5).counter(v), 18);
        assert_eq!(at(4, 0).counter(v), 20);
        assert_eq!(at(249, 1).counter(v), 0);
        // An access stores the decayed counter (plus its increment) with the new minute.
        let t = at(4, 1).touched(v);
        assert_eq!(t >> 8, 4);
        assert!((10..=11).contains(&(t & 0xff)));
    }
}
