//! CLIENT TRACKING for the server and the proxy alike: its arguments, parsed and checked as
//! Redis 7.2 does (its errors, in its order; the two differ only in what a REDIRECT may name,
//! the caller's `redirect` closure, and in what they do with the result), and the
//! invalidation messages a client is sent.

use darner_resp::ReplyWriter;

/// An invalidation as the client told of it gets it (Redis's sendTrackingMessage): a RESP3
/// push `invalidate` (`resp3`), or, to a RESP2 redirect target in pub/sub mode
/// (`subscribed`), a message on `__redis__:invalidate`; a RESP2 client not subscribed gets
/// nothing (`None`). `keys` is None for the null invalidation of a flush, whose null is
/// written in `null_resp3`'s protocol: Redis writes that of the client whose tracking it is,
/// which may not be the target's.
pub fn invalidation_frame<K: AsRef<[u8]>>(
    keys: Option<&[K]>,
    resp3: bool,
    subscribed: bool,
    null_resp3: bool,
) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, resp3);
    if resp3 {
        w.push(2);
        w.bulk(b"invalidate");
    } else if subscribed {
        w.array(3);
        w.bulk(b"message");
        w.bulk(b"__redis__:invalidate");
    } else {
        return None;
    }
    match keys {
        Some(keys) => {
            w.array(keys.len());
            for k in keys {
                w.bulk(k.as_ref());
            }
        }
        None => out.extend_from_slice(if null_resp3 { b"_\r\n" } else { b"$-1\r\n" }),
    }
    Some(out)
}

/// BCAST's new `prefixes` added to those `held` (sorted, each once; `make` turns a prefix into
/// the caller's type): no PREFIX means every key, the empty prefix, which Redis adds even next
/// to prefixes already held.
pub fn add_bcast_prefixes<P: AsRef<[u8]>>(
    held: &mut Vec<P>,
    mut prefixes: Vec<&[u8]>,
    make: impl Fn(&[u8]) -> P,
) {
    if prefixes.is_empty() {
        prefixes.push(b"");
    }
    for p in prefixes {
        if let Err(at) = held.binary_search_by(|x| x.as_ref().cmp(p)) {
            held.insert(at, make(p));
        }
    }
}

/// The push a RESP3 tracking client gets when its redirect target has gone.
pub fn redirect_broken_frame(redirect: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, true);
    w.push(2);
    w.bulk(b"tracking-redir-broken");
    w.int(redirect as i64);
    out
}

/// What CLIENT TRACKING asked for, once its checks passed.
#[derive(Debug, PartialEq, Eq)]
pub enum TrackingRequest<'a> {
    /// CLIENT TRACKING off (whatever options came with it).
    Off,
    /// CLIENT TRACKING on, with its options.
    On {
        /// REDIRECT's client id (0: none), as the caller's closure resolved it.
        redirect: u64,
        /// BCAST.
        bcast: bool,
        /// OPTIN.
        optin: bool,
        /// OPTOUT.
        optout: bool,
        /// NOLOOP.
        noloop: bool,
        /// BCAST's new prefixes, in the order given, none overlapping another or one held.
        prefixes: Vec<&'a [u8]>,
    },
}

/// A client's tracking as it stands (the checks of a new request depend on it).
#[derive(Debug)]
pub struct TrackingNow<'a, P> {
    /// BCAST.
    pub bcast: bool,
    /// OPTIN.
    pub optin: bool,
    /// OPTOUT.
    pub optout: bool,
    /// The BCAST prefixes held, sorted and free of overlaps.
    pub prefixes: &'a [P],
}

// By hand: derived, they would ask `P: Copy` of the prefixes, of which this holds a slice.
impl<P> Clone for TrackingNow<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P> Copy for TrackingNow<'_, P> {}

/// Parses `CLIENT TRACKING on|off [REDIRECT id] [PREFIX p]... [BCAST] [OPTIN] [OPTOUT]
/// [NOLOOP]` (`args` whole, from `CLIENT`), given the client's tracking now (`None`: off).
/// `redirect` resolves REDIRECT's argument to a client id or answers the error to reply.
/// The error is the whole line to reply, `ERR ...`.
pub fn parse_client_tracking<'a, P: AsRef<[u8]>>(
    args: &[&'a [u8]],
    now: Option<TrackingNow<'_, P>>,
    mut redirect: impl FnMut(&[u8]) -> Result<u64, String>,
) -> Result<TrackingRequest<'a>, String> {
    const SYNTAX: &str = "ERR syntax error";
    if args.len() < 3 {
        return Err(SYNTAX.to_string());
    }
    let (mut redirect_id, mut bcast, mut optin, mut optout, mut noloop) =
        (0u64, false, false, false, false);
    let mut prefixes: Vec<&[u8]> = Vec::new();
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let a = args[j];
        if a.eq_ignore_ascii_case(b"redirect") && more {
            j += 1;
            if redirect_id != 0 {
                return Err("ERR A client can only redirect to a single other client".into());
            }
            redirect_id = redirect(args[j])?;
        } else if a.eq_ignore_ascii_case(b"bcast") {
            bcast = true;
        } else if a.eq_ignore_ascii_case(b"optin") {
            optin = true;
        } else if a.eq_ignore_ascii_case(b"optout") {
            optout = true;
        } else if a.eq_ignore_ascii_case(b"noloop") {
            noloop = true;
        } else if a.eq_ignore_ascii_case(b"prefix") && more {
            j += 1;
            prefixes.push(args[j]);
        } else {
            return Err(SYNTAX.into());
        }
        j += 1;
    }
    if args[2].eq_ignore_ascii_case(b"off") {
        return Ok(TrackingRequest::Off);
    }
    if !args[2].eq_ignore_ascii_case(b"on") {
        return Err(SYNTAX.into());
    }
    if !bcast && !prefixes.is_empty() {
        return Err("ERR PREFIX option requires BCAST mode to be enabled".into());
    }
    if now.is_some_and(|t| t.bcast != bcast) {
        return Err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.".into());
    }
    if bcast && (optin || optout) {
        return Err("ERR OPTIN and OPTOUT are not compatible with BCAST".into());
    }
    if optin && optout {
        return Err("ERR You can't specify both OPTIN mode and OPTOUT mode".into());
    }
    if now.is_some_and(|t| (optin && t.optout) || (optout && t.optin)) {
        return Err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.".into());
    }
    if bcast {
        let held: &[P] = now.map_or(&[], |t| t.prefixes);
        if let Some(msg) = prefix_overlap(held, &prefixes) {
            return Err(msg);
        }
    }
    Ok(TrackingRequest::On {
        redirect: redirect_id,
        bcast,
        optin,
        optout,
        noloop,
        prefixes,
    })
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Whether one of two prefixes starts with the other (a client's prefixes must not overlap).
fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

fn overlaps_held(new: &[u8], old: &[u8]) -> String {
    format!(
        "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
        lossy(new),
        lossy(old)
    )
}

fn overlaps_given(a: &[u8], b: &[u8]) -> String {
    format!(
        "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
        lossy(a),
        lossy(b)
    )
}

/// Up to this many prefixes (given and held), overlaps are looked for pair by pair, in the
/// order Redis reports the first one; past it (a hostile request), in sorted order, so that a
/// request with many prefixes costs n log n, not n².
const EXACT_OVERLAP_CHECK: usize = 256;

/// The error for the first overlap among the `given` prefixes and the `held` ones.
fn prefix_overlap<P: AsRef<[u8]>>(held: &[P], given: &[&[u8]]) -> Option<String> {
    if held.len() + given.len() > EXACT_OVERLAP_CHECK {
        return overlap_sorted(held, given);
    }
    for (i, p) in given.iter().enumerate() {
        if let Some(e) = held.iter().find(|e| overlaps(e.as_ref(), p)) {
            return Some(overlaps_held(p, e.as_ref()));
        }
        if let Some(q) = given[i + 1..].iter().find(|q| overlaps(p, q)) {
            return Some(overlaps_given(p, q));
        }
    }
    None
}

/// An overlap among `held` (free of overlaps) and `given`, found by sorting: a prefix of
/// another sorts right before it or before strings that start with it too, so neighbours
/// suffice.
fn overlap_sorted<P: AsRef<[u8]>>(held: &[P], given: &[&[u8]]) -> Option<String> {
    let mut all: Vec<(&[u8], bool)> = held.iter().map(|e| (e.as_ref(), true)).collect();
    all.extend(given.iter().map(|g| (*g, false)));
    all.sort_unstable();
    all.windows(2).find_map(|w| {
        let ((a, a_old), (b, b_old)) = (w[0], w[1]);
        if !overlaps(a, b) || (a_old && b_old) {
            return None;
        }
        Some(if a_old || b_old {
            let (new, old) = if a_old { (b, a) } else { (a, b) };
            overlaps_held(new, old)
        } else {
            overlaps_given(a, b)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(
        args: &[&str],
        now: Option<TrackingNow<'_, Vec<u8>>>,
    ) -> Result<TrackingRequest<'static>, String> {
        let owned: Vec<&'static [u8]> = args
            .iter()
            .map(|a| &*Box::leak(a.as_bytes().to_vec().into_boxed_slice()))
            .collect();
        parse_client_tracking(&owned, now, |_| Err("ERR no redirect here".into()))
    }

    #[test]
    fn options_and_redis_s_errors_in_its_order() {
        assert_eq!(
            parse(&["client", "tracking", "off", "bogus"], None).unwrap_err(),
            "ERR syntax error"
        );
        assert_eq!(
            parse(&["client", "tracking", "off"], None).unwrap(),
            TrackingRequest::Off
        );
        assert_eq!(
            parse(&["client", "tracking", "on", "prefix", "a"], None).unwrap_err(),
            "ERR PREFIX option requires BCAST mode to be enabled"
        );
        assert_eq!(
            parse(&["client", "tracking", "on", "bcast", "optin"], None).unwrap_err(),
            "ERR OPTIN and OPTOUT are not compatible with BCAST"
        );
        assert_eq!(
            parse(&["client", "tracking", "on", "redirect", "7"], None).unwrap_err(),
            "ERR no redirect here"
        );
        let held = [b"ab".to_vec()];
        let now = TrackingNow {
            bcast: true,
            optin: false,
            optout: false,
            prefixes: &held[..],
        };
        assert_eq!(
            parse(&["client", "tracking", "on", "bcast", "prefix", "a"], Some(now)).unwrap_err(),
            "ERR Prefix 'a' overlaps with an existing prefix 'ab'. Prefixes for a single client must not overlap."
        );
        assert_eq!(
            parse(&["client", "tracking", "on", "bcast", "prefix", "x", "prefix", "xy"], Some(now))
                .unwrap_err(),
            "ERR Prefix 'x' overlaps with another provided prefix 'xy'. Prefixes for a single client must not overlap."
        );
        assert_eq!(
            parse(&["client", "tracking", "on", "optin", "noloop"], None).unwrap(),
            TrackingRequest::On {
                redirect: 0,
                bcast: false,
                optin: true,
                optout: false,
                noloop: true,
                prefixes: vec![]
            }
        );
    }

    #[test]
    fn many_prefixes_are_checked_in_n_log_n() {
        // 100,000 distinct prefixes of equal length: no overlap, and no n² scan either.
        let given: Vec<Vec<u8>> = (0..100_000u32)
            .map(|i| format!("{i:08}").into_bytes())
            .collect();
        let refs: Vec<&[u8]> = given.iter().map(|g| g.as_slice()).collect();
        assert_eq!(prefix_overlap::<Vec<u8>>(&[], &refs), None);
        let mut with_overlap = refs.clone();
        with_overlap.push(b"0000");
        let msg = prefix_overlap::<Vec<u8>>(&[], &with_overlap).unwrap();
        assert!(
            msg.contains("overlaps with another provided prefix"),
            "{msg}"
        );
    }
}
