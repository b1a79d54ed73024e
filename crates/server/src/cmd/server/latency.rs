//! LATENCY: the latency monitor's events (LATEST, HISTORY, RESET, GRAPH, DOCTOR) and the
//! per-command latency histograms (HISTOGRAM). The data is in `crate::latency`.

use super::{help_reply, info::latency_counts};
use crate::cmd::{registry, ConnCtx, Reg};
use crate::latency::Series;
use crate::shared::Shared;
use darner_resp::ReplyWriter;
use std::fmt::Write;
use std::sync::atomic::Ordering;

pub fn register(r: &mut Reg) {
    r.conn("latency|latest", latest);
    r.conn("latency|history", history);
    r.conn("latency|reset", reset);
    r.conn("latency|graph", graph);
    r.conn("latency|doctor", doctor);
    r.conn("latency|histogram", histogram);
    r.conn("latency|help", help);
}

fn now_s() -> i64 {
    Shared::now_ms() / 1000
}

/// Per event: its name, the time and latency of its latest sample, its all-time maximum.
fn latest(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    let events = ctx.shared.latency.events.lock().unwrap();
    w.array(events.len());
    for (name, s) in events.iter() {
        let last = s.latest();
        w.array(4);
        w.bulk(name.as_bytes());
        w.int(last.time);
        w.int(last.latency as i64);
        w.int(s.max as i64);
    }
}

/// An event's samples, oldest first, as (time, latency) pairs; none for an unknown event.
fn history(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let events = ctx.shared.latency.events.lock().unwrap();
    let Some(s) = find(&events, args[2]) else {
        return w.array(0);
    };
    let samples: Vec<_> = s.in_order().collect();
    w.array(samples.len());
    for sample in samples {
        w.array(2);
        w.int(sample.time);
        w.int(sample.latency as i64);
    }
}

fn find<'a>(
    events: &'a std::collections::BTreeMap<&'static str, Series>,
    name: &[u8],
) -> Option<&'a Series> {
    events
        .iter()
        .find(|(n, _)| n.as_bytes() == name)
        .map(|(_, s)| s)
}

/// Forgets the named events (all without names); answers how many were forgotten.
fn reset(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut events = ctx.shared.latency.events.lock().unwrap();
    if args.len() == 2 {
        let n = events.len();
        events.clear();
        return w.int(n as i64);
    }
    let mut n = 0;
    for name in &args[2..] {
        let key = events.keys().find(|k| k.as_bytes() == *name).copied();
        if let Some(k) = key {
            events.remove(k);
            n += 1;
        }
    }
    w.int(n);
}

fn graph(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let events = ctx.shared.latency.events.lock().unwrap();
    match find(&events, args[2]) {
        Some(s) => {
            let name = String::from_utf8_lossy(args[2]);
            w.verbatim(b"txt", crate::latency::graph(&name, s, now_s()).as_bytes());
        }
        None => w.error(
            format!(
                "ERR No samples available for event '{}'",
                String::from_utf8_lossy(args[2])
            )
            .as_bytes(),
        ),
    }
}

/// A plain-text summary of the recorded events (Darner's own wording).
fn doctor(ctx: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    let threshold = ctx
        .shared
        .config
        .hot
        .latency_monitor_threshold
        .load(Ordering::Relaxed);
    let events = ctx.shared.latency.events.lock().unwrap();
    let mut out = String::new();
    if threshold == 0 && events.is_empty() {
        out.push_str(
            "The latency monitor is off: enable it with \
             CONFIG SET latency-monitor-threshold <milliseconds>.\n",
        );
    } else if events.is_empty() {
        let _ = writeln!(
            out,
            "No latency spike of {threshold} ms or more was recorded since the start \
             (or the last LATENCY RESET)."
        );
    } else {
        let now = now_s();
        let _ = writeln!(
            out,
            "Latency spikes recorded (latency-monitor-threshold: {threshold} ms):\n"
        );
        for (i, (name, s)) in events.iter().enumerate() {
            let samples: Vec<_> = s.in_order().collect();
            let n = samples.len().max(1) as f64;
            let avg = samples.iter().map(|x| x.latency as f64).sum::<f64>() / n;
            let dev = samples
                .iter()
                .map(|x| (x.latency as f64 - avg).abs())
                .sum::<f64>()
                / n;
            let first = samples.first().map_or(now, |x| x.time);
            let _ = writeln!(
                out,
                "{}. {name}: {} spike(s) in the last {} s, average {avg:.0} ms, mean \
                 deviation {dev:.0} ms, highest ever {} ms.",
                i + 1,
                samples.len(),
                (now - first).max(1),
                s.max
            );
        }
        let has = |e: &str| events.contains_key(e);
        if has("command") || has("fast-command") {
            out.push_str(
                "\nSlow commands: SLOWLOG GET shows which; LATENCY HISTOGRAM shows how each \
                 command's latency is distributed.\n",
            );
        }
        if has("expire-cycle") {
            out.push_str(
                "\nThe active expiry cycle was slow: many keys expiring at the same time \
                 make it work longer (spread their TTLs).\n",
            );
        }
    }
    w.verbatim(b"txt", out.as_bytes());
}

/// Per command with samples: its calls and its cumulative histogram in microseconds. With
/// names, only those commands (a container names all its subcommands); unknown ones are
/// skipped.
fn histogram(ctx: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let names: Vec<String> = args[2..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let wanted = |full: &str| {
        names.is_empty()
            || names.iter().any(|n| {
                full == n
                    || full
                        .strip_prefix(n.as_str())
                        .is_some_and(|r| r.starts_with('|'))
            })
    };
    let mut out = Vec::new();
    for c in &registry().list {
        if !wanted(c.spec.full_name) {
            continue;
        }
        let counts = latency_counts(ctx.shared, c.id);
        let total = counts.total();
        if total > 0 {
            out.push((c.spec.full_name, total, counts.cumulative_buckets()));
        }
    }
    w.map(out.len());
    for (name, total, buckets) in out {
        w.bulk(name.as_bytes());
        w.map(2);
        w.bulk(b"calls");
        w.int(total as i64);
        w.bulk(b"histogram_usec");
        w.map(buckets.len());
        for (us, n) in buckets {
            w.int(us as i64);
            w.int(n as i64);
        }
    }
}

fn help(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    help_reply(
        w,
        args[0],
        &[
            "DOCTOR",
            "    A summary of the latency spikes recorded, in words.",
            "GRAPH <event>",
            "    An ASCII graph of the event's latency samples.",
            "HISTORY <event>",
            "    The event's samples: [time, latency] pairs, oldest first.",
            "LATEST",
            "    Per event: [name, time of the latest sample, its latency, highest latency].",
            "RESET [<event> ...]",
            "    Forget the samples of the given events, or of all events.",
            "HISTOGRAM [<command> ...]",
            "    Per command: its calls and the cumulative distribution of its latency in",
            "    microseconds (latency-tracking). All commands with samples when none given.",
        ],
    );
}
