//! The geo commands (Redis 7.2's geo.c, geohash.c, geohash_helper.c), built on the sorted set
//! type: a point is a sorted set member whose score is its 52-bit geohash (26 bits of
//! latitude and 26 of longitude, interleaved, latitude in the even bits), so a geo key *is* a
//! sorted set (TYPE zset, every Z command works on it).
//!
//! A search follows Redis step by step, because which points it returns near the edge of the
//! area, their order and their printed distances depend on it: the geohash step is estimated
//! from the radius, the centre's box and its 8 neighbours at that step are computed (some
//! dropped when the area cannot reach them), each box is a score range `[min, max)` read in
//! set order, and every candidate is kept only after the exact Haversine (or box) test.
//! Results are sorted by distance with a stable sort (glibc's qsort merge-sorts, so ties keep
//! the order in which the boxes were read), or, when COUNT cuts the list, with Redis's own
//! partial quicksort, so that equally distant points come out in Redis's order.
//!
//! GEORADIUS, GEORADIUSBYMEMBER and GEOSEARCHSTORE may write to a key on another shard: they
//! are `Tx` handlers (the source is searched in one hop, the result stored in a second one,
//! both shards locked). The other commands are `Key` handlers.

use super::sorted_set::{store_set, write};
use super::ERR_WRONGTYPE;
use super::{views, with_writer, Locks, Reg, TxFuture, ERR_NOT_FLOAT, ERR_NOT_INT, ERR_SYNTAX};
use crate::exec::Tx;
use crate::notify::{notify, GENERIC, ZSET};
use crate::shard::ShardCtx;
use bytes::Bytes;
use darner_engine::types::zset::{AddFlags, Added};
use darner_engine::types::ZSet;
use darner_engine::{DbView, Entry, Value, ValueRef};
use darner_resp::ReplyWriter;
use std::cmp::Ordering;

pub fn register(r: &mut Reg) {
    r.key("geoadd", geoadd);
    r.key("geodist", geodist);
    r.key("geohash", geohash);
    r.key("geopos", geopos);
    r.key("geosearch", geosearch);
    r.key("georadius_ro", georadius_ro);
    r.key("georadiusbymember_ro", georadiusbymember_ro);
    r.tx("georadius", Locks::Keys, georadius);
    r.tx("georadiusbymember", Locks::Keys, georadiusbymember);
    r.tx("geosearchstore", Locks::Keys, geosearchstore);
}

// ---- geohash (facts and algorithms of Redis's geohash.c / geohash_helper.c) -----------------

const STEP_MAX: u8 = 26;
const LON_MIN: f64 = -180.0;
const LON_MAX: f64 = 180.0;
const LAT_MIN: f64 = -85.05112878;
const LAT_MAX: f64 = 85.05112878;
const EARTH_RADIUS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hash {
    bits: u64,
    step: u8,
}

impl Hash {
    const ZERO: Hash = Hash { bits: 0, step: 0 };
}

#[derive(Clone, Copy, Debug)]
struct Range {
    min: f64,
    max: f64,
}

#[derive(Clone, Copy, Debug)]
struct Area {
    lon: Range,
    lat: Range,
}

const LON_RANGE: Range = Range {
    min: LON_MIN,
    max: LON_MAX,
};
const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

fn deg_rad(a: f64) -> f64 {
    a * D_R
}

fn rad_deg(a: f64) -> f64 {
    a / D_R
}

/// The low 32 bits of `v` spread to the even bits of the result.
fn spread(v: u32) -> u64 {
    let mut x = v as u64;
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// The even bits of `v`, packed: the inverse of [`spread`].
fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    ((x | (x >> 16)) & 0xFFFF_FFFF) as u32
}

/// Encodes a point at `step` bits per coordinate, or None outside the WGS84 limits or the
/// ranges. The offsets are truncated as C's double -> uint32 conversion does (a point on the
/// upper edge yields 2^step, one bit beyond the step, exactly as in Redis).
fn encode(lon_r: Range, lat_r: Range, lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.min || lat > lat_r.max || lon < lon_r.min || lon > lon_r.max {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_r.min) / (lat_r.max - lat_r.min) * scale;
    let lon_off = (lon - lon_r.min) / (lon_r.max - lon_r.min) * scale;
    Some(Hash {
        bits: spread(lat_off as u32) | (spread(lon_off as u32) << 1),
        step,
    })
}

fn decode(h: Hash) -> Area {
    let scale = (1u64 << h.step) as f64;
    let ilat = squash(h.bits);
    let ilon = squash(h.bits >> 1);
    let lat_scale = LAT_MAX - LAT_MIN;
    let lon_scale = LON_MAX - LON_MIN;
    Area {
        lat: Range {
            min: LAT_MIN + (ilat as f64 / scale) * lat_scale,
            max: LAT_MIN + (ilat.wrapping_add(1) as f64 / scale) * lat_scale,
        },
        lon: Range {
            min: LON_MIN + (ilon as f64 / scale) * lon_scale,
            max: LON_MIN + (ilon.wrapping_add(1) as f64 / scale) * lon_scale,
        },
    }
}

/// The centre of a cell, clamped to the WGS84 limits: (longitude, latitude).
fn area_center(a: &Area) -> (f64, f64) {
    let lon = ((a.lon.min + a.lon.max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((a.lat.min + a.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// C's `(uint64_t)score` on x86-64 (what gcc emits: cvttsd2si, with the 2^63 adjustment);
/// scores written by ZADD may be anything, and Redis decodes them this way.
fn score_bits(s: f64) -> u64 {
    const T: f64 = 9_223_372_036_854_775_808.0;
    if s < T {
        if s >= -T {
            s as i64 as u64
        } else {
            1 << 63
        }
    } else {
        let d = s - T;
        if d < T {
            (d as i64 as u64) ^ (1 << 63)
        } else {
            0
        }
    }
}

/// A member's position from its score: (longitude, latitude).
fn decode_score(score: f64) -> (f64, f64) {
    area_center(&decode(Hash {
        bits: score_bits(score),
        step: STEP_MAX,
    }))
}

/// The 52-bit score of a valid point.
fn encode_score(lon: f64, lat: f64) -> f64 {
    match encode(LON_RANGE, LAT_RANGE, lon, lat, STEP_MAX) {
        Some(h) => h.bits as f64,
        None => 0.0,
    }
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Haversine distance in meters, with Redis's shortcut when the longitudes are equal.
fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS * a.sqrt().asin()
}

fn move_x(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let shift = 64 - h.step as u32 * 2;
    let zz = 0x5555_5555_5555_5555u64.checked_shr(shift).unwrap_or(0);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64.checked_shr(shift).unwrap_or(0);
    h.bits = x | y;
}

fn move_y(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = h.bits & 0x5555_5555_5555_5555;
    let shift = 64 - h.step as u32 * 2;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64.checked_shr(shift).unwrap_or(0);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64.checked_shr(shift).unwrap_or(0);
    h.bits = x | y;
}

fn neighbour(h: Hash, dx: i8, dy: i8) -> Hash {
    let mut n = h;
    move_x(&mut n, dx);
    move_y(&mut n, dy);
    n
}

fn estimate_steps(mut range: f64, lat: f64) -> u8 {
    if range == 0.0 {
        return STEP_MAX;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2; // so that the radius fits in most cases
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, STEP_MAX as i32) as u8
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Circle { radius: f64 },
    Rect { width: f64, height: f64 },
}

#[derive(Clone, Copy, Debug)]
struct Shape {
    lon: f64,
    lat: f64,
    /// Meters per unit.
    conv: f64,
    kind: Kind,
}

/// (min_lon, min_lat, max_lon, max_lat) of the area searched.
fn bounding_box(s: &Shape) -> [f64; 4] {
    let (h, w) = match s.kind {
        Kind::Circle { radius } => (radius, radius),
        Kind::Rect { width, height } => (height / 2.0, width / 2.0),
    };
    let height = s.conv * h;
    let width = s.conv * w;
    let lat_delta = rad_deg(height / EARTH_RADIUS);
    let top = rad_deg(width / EARTH_RADIUS / deg_rad(s.lat + lat_delta).cos());
    let bottom = rad_deg(width / EARTH_RADIUS / deg_rad(s.lat - lat_delta).cos());
    // The hemispheres' widest edge is on opposite sides.
    let d = if s.lat < 0.0 { bottom } else { top };
    [s.lon - d, s.lat - lat_delta, s.lon + d, s.lat + lat_delta]
}

/// The boxes to scan, in Redis's order: centre, N, S, E, W, NE, NW, SE, SW (a dropped one is
/// [`Hash::ZERO`]).
fn search_boxes(s: &Shape) -> [Hash; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(s);
    let radius = match s.kind {
        Kind::Circle { radius } => radius,
        Kind::Rect { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    } * s.conv;
    let mut steps = estimate_steps(radius, s.lat);
    let at = |step: u8| {
        let h = encode(LON_RANGE, LAT_RANGE, s.lon, s.lat, step).unwrap_or(Hash { bits: 0, step });
        let n = [
            h,
            neighbour(h, 0, 1),
            neighbour(h, 0, -1),
            neighbour(h, 1, 0),
            neighbour(h, -1, 0),
            neighbour(h, 1, 1),
            neighbour(h, -1, 1),
            neighbour(h, 1, -1),
            neighbour(h, -1, -1),
        ];
        (n, decode(h))
    };
    let (mut n, mut area) = at(steps);
    // A neighbour may still be too close to the area's edge to cover it: one step coarser.
    let decrease = decode(n[1]).lat.max < max_lat
        || decode(n[2]).lat.min > min_lat
        || decode(n[3]).lon.max < max_lon
        || decode(n[4]).lon.min > min_lon;
    if steps > 1 && decrease {
        steps -= 1;
        (n, area) = at(steps);
    }
    // Drop the boxes the area cannot reach.
    if steps >= 2 {
        let mut zero = |idx: [usize; 3]| {
            for i in idx {
                n[i] = Hash::ZERO;
            }
        };
        if area.lat.min < min_lat {
            zero([2, 8, 7]);
        }
        if area.lat.max > max_lat {
            zero([1, 5, 6]);
        }
        if area.lon.min < min_lon {
            zero([4, 8, 6]);
        }
        if area.lon.max > max_lon {
            zero([3, 7, 5]);
        }
    }
    n
}

struct Point {
    member: Vec<u8>,
    score: f64,
    lon: f64,
    lat: f64,
    dist: f64,
}

/// The distance from the shape's centre to (lon, lat) when the point is inside the shape.
fn within(s: &Shape, lon: f64, lat: f64) -> Option<f64> {
    match s.kind {
        Kind::Circle { radius } => {
            let d = distance(s.lon, s.lat, lon, lat);
            (d <= radius * s.conv).then_some(d)
        }
        Kind::Rect { width, height } => {
            // The latitude test is cheaper: first.
            if lat_distance(lat, s.lat) > height * s.conv / 2.0 {
                return None;
            }
            if distance(lon, lat, s.lon, lat) > width * s.conv / 2.0 {
                return None;
            }
            Some(distance(s.lon, s.lat, lon, lat))
        }
    }
}

/// The points of `z` inside the shape, box by box (at most `limit` when not 0).
fn points_in_shape(z: &ZSet, s: &Shape, limit: usize) -> Vec<Point> {
    let boxes = search_boxes(s);
    let mut out: Vec<Point> = Vec::new();
    let mut last: usize = 0;
    for i in 0..boxes.len() {
        let b = boxes[i];
        if b == Hash::ZERO {
            continue;
        }
        // Huge radii make neighbours coincide: skip a box equal to the last one scanned
        // (Redis never compares with the centre box, hence `last != 0`).
        if last != 0 && b == boxes[last] {
            continue;
        }
        if limit != 0 && out.len() >= limit {
            break;
        }
        let shift = 52 - b.step as u32 * 2;
        let min = (b.bits << shift) as f64;
        let max = ((b.bits + 1) << shift) as f64;
        let start = z.partition_point(|sc, _| sc < min);
        let end = z.partition_point(|sc, _| sc < max);
        z.range(start, end, false, |m, sc| {
            if limit != 0 && out.len() >= limit {
                return;
            }
            let (lon, lat) = decode_score(sc);
            if let Some(dist) = within(s, lon, lat) {
                out.push(Point {
                    member: m.to_vec(),
                    score: sc,
                    lon,
                    lat,
                    dist,
                });
            }
        });
        last = i;
    }
    out
}

// ---- reply formatting -----------------------------------------------------------------------

/// A distance with 4 decimals (Redis 7.2's `fixedpoint_d2string`: the value times 10^4,
/// rounded half to even, then laid out), as a bulk string in both protocols.
fn reply_distance(w: &mut ReplyWriter, d: f64) {
    w.bulk(distance_text(d).as_bytes());
}

fn distance_text(d: f64) -> String {
    let v = (d * 10_000.0).round_ties_even();
    if v == 0.0 {
        return "0.0000".to_string();
    }
    let neg = v < 0.0;
    let u = v.abs() as u64;
    format!(
        "{}{}.{:04}",
        if neg { "-" } else { "" },
        u / 10_000,
        u % 10_000
    )
}

/// A coordinate as Redis's `addReplyHumanLongDouble` writes it: `%.17Lf` with trailing zeros
/// removed; a bulk string in RESP2, a double in RESP3.
fn reply_coord(w: &mut ReplyWriter, v: f64) {
    let mut s = format!("{:.17}", v);
    if s.contains('.') {
        let t = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(t);
    }
    if s == "-0" {
        s = "0".to_string();
    }
    if w.resp3 {
        w.raw(b",");
        w.raw(s.as_bytes());
        w.raw(b"\r\n");
    } else {
        w.bulk(s.as_bytes());
    }
}

// ---- argument helpers -----------------------------------------------------------------------

/// The bytes before the first NUL (what `strcasecmp` sees).
fn cstr(a: &[u8]) -> &[u8] {
    match a.iter().position(|&c| c == 0) {
        Some(i) => &a[..i],
        None => a,
    }
}

fn kw(a: &[u8], word: &str) -> bool {
    cstr(a).eq_ignore_ascii_case(word.as_bytes())
}

type Err = Vec<u8>;

fn err(s: &[u8]) -> Err {
    s.to_vec()
}

/// Redis's `extractUnitOrReply`: meters per unit.
fn unit(a: &[u8]) -> Result<f64, Err> {
    if kw(a, "m") {
        Ok(1.0)
    } else if kw(a, "km") {
        Ok(1000.0)
    } else if kw(a, "ft") {
        Ok(0.3048)
    } else if kw(a, "mi") {
        Ok(1609.34)
    } else {
        Err(err(
            b"ERR unsupported unit provided. please use M, KM, FT, MI",
        ))
    }
}

fn float(a: &[u8], msg: &[u8]) -> Result<f64, Err> {
    darner_resp::parse_f64_strict(a).ok_or_else(|| err(msg))
}

/// Redis's `extractLongLatOrReply`: (longitude, latitude) within the WGS84 limits.
fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), Err> {
    let x = float(lon, ERR_NOT_FLOAT)?;
    let y = float(lat, ERR_NOT_FLOAT)?;
    if !(LON_MIN..=LON_MAX).contains(&x) || !(LAT_MIN..=LAT_MAX).contains(&y) {
        return Err(format!("ERR invalid longitude,latitude pair {:.6},{:.6}", x, y).into_bytes());
    }
    Ok((x, y))
}

/// Redis's `extractDistanceOrReply`: (radius, meters per unit).
fn radius_arg(r: &[u8], u: &[u8]) -> Result<(f64, f64), Err> {
    let d = float(r, b"ERR need numeric radius")?;
    if d < 0.0 {
        return Err(err(b"ERR radius cannot be negative"));
    }
    Ok((d, unit(u)?))
}

/// Redis's `extractBoxOrReply`: (width, height, meters per unit).
fn box_arg(w: &[u8], h: &[u8], u: &[u8]) -> Result<(f64, f64, f64), Err> {
    let wd = float(w, b"ERR need numeric width")?;
    let ht = float(h, b"ERR need numeric height")?;
    if ht < 0.0 || wd < 0.0 {
        return Err(err(b"ERR height or width cannot be negative"));
    }
    Ok((wd, ht, unit(u)?))
}

/// A sorted set for reading: Ok(None) when missing, Err on another type.
fn read<'a>(db: &'a mut DbView<'_>, key: &[u8]) -> Result<Option<&'a ZSet>, ()> {
    match db.get(key) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::ZSet(z) => Ok(Some(z)),
            _ => Err(()),
        },
    }
}

// ---- GEOADD, GEODIST, GEOHASH, GEOPOS -------------------------------------------------------

/// GEOADD key [NX | XX] [CH] longitude latitude member [...]: ZADD with computed scores.
fn geoadd(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let key = args[1];
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut idx = 2;
    while idx < args.len() {
        let o = args[idx];
        if kw(o, "nx") {
            nx = true;
        } else if kw(o, "xx") {
            xx = true;
        } else if kw(o, "ch") {
            ch = true;
        } else {
            break;
        }
        idx += 1;
    }
    let rest = args.len() - idx;
    if !rest.is_multiple_of(3) || (nx && xx) {
        return w.error(ERR_SYNTAX);
    }
    let elements = rest / 3;
    let mut pairs: Vec<(&[u8], f64)> = Vec::with_capacity(elements);
    for j in 0..elements {
        let a = idx + j * 3;
        match lon_lat(args[a], args[a + 1]) {
            Ok((lon, lat)) => pairs.push((args[a + 2], encode_score(lon, lat))),
            Err(e) => return w.error(&e),
        }
    }
    // ZADD's own check (GEOADD key CH NX passes GEOADD's).
    if elements == 0 {
        return w.error(ERR_SYNTAX);
    }
    let f = AddFlags {
        nx,
        xx,
        ..AddFlags::default()
    };
    let limits = ctx.limits();
    let lru = ctx.clock.lru;
    let (mut added, mut updated) = (0i64, 0i64);
    let mut apply = |z: &mut ZSet| {
        for a in z.add_many(&pairs, f, &limits) {
            match a {
                Added::New(_) => added += 1,
                Added::Updated(_) => updated += 1,
                _ => {}
            }
        }
    };
    let mut db = ctx.db();
    match write(&mut db, key) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(Some(z)) => {
            z.maybe_convert(elements, &limits);
            apply(z);
            if added + updated > 0 {
                db.signal(key);
            }
        }
        Ok(None) => {
            if !xx {
                let mut z = ZSet::create(elements, pairs[0].0.len(), &limits);
                apply(&mut z);
                if !z.is_empty() {
                    db.set(Entry::new_value(key, Value::ZSet(z), None, lru));
                }
            }
        }
    }
    if added + updated > 0 {
        // GEOADD is ZADD underneath in Redis, and notifies as ZADD.
        notify(ctx, ZSET, "zadd", key);
    }
    w.int(if ch { added + updated } else { added })
}

/// GEODIST key member1 member2 [unit]
fn geodist(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut to_meter = 1.0;
    if args.len() == 5 {
        match unit(args[4]) {
            Ok(u) => to_meter = u,
            Err(e) => return w.error(&e),
        }
    } else if args.len() > 5 {
        return w.error(ERR_SYNTAX);
    }
    let mut db = ctx.db();
    let z = match read(&mut db, args[1]) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(None) => return w.null(),
        Ok(Some(z)) => z,
    };
    match (z.score(args[2]), z.score(args[3])) {
        (Some(a), Some(b)) => {
            let (x1, y1) = decode_score(a);
            let (x2, y2) = decode_score(b);
            reply_distance(w, distance(x1, y1, x2, y2) / to_meter)
        }
        _ => w.null(),
    }
}

const BASE32: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";

/// GEOHASH key [member ...]: the standard 11-character geohash (latitude range -90..90).
fn geohash(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    let z = match read(&mut db, args[1]) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(z) => z,
    };
    w.array(args.len() - 2);
    for m in &args[2..] {
        match z.and_then(|z| z.score(m)) {
            None => w.null(),
            Some(sc) => {
                let (lon, lat) = decode_score(sc);
                let std_lat = Range {
                    min: -90.0,
                    max: 90.0,
                };
                let bits = encode(LON_RANGE, std_lat, lon, lat, STEP_MAX).map_or(0, |h| h.bits);
                let mut buf = [b'0'; 11];
                // 52 bits make 10 characters; the 11th is always '0' (as in Redis).
                for (i, c) in buf.iter_mut().enumerate().take(10) {
                    *c = BASE32[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
                }
                w.bulk(&buf);
            }
        }
    }
}

/// GEOPOS key [member ...]
fn geopos(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut db = ctx.db();
    let z = match read(&mut db, args[1]) {
        Err(()) => return w.error(ERR_WRONGTYPE),
        Ok(z) => z,
    };
    w.array(args.len() - 2);
    for m in &args[2..] {
        match z.and_then(|z| z.score(m)) {
            None => w.null_array(),
            Some(sc) => {
                let (lon, lat) = decode_score(sc);
                w.array(2);
                reply_coord(w, lon);
                reply_coord(w, lat);
            }
        }
    }
}

// ---- GEOSEARCH and the GEORADIUS family -----------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Flavor {
    Radius,
    RadiusRo,
    ByMember,
    ByMemberRo,
    Search,
    SearchStore,
}

impl Flavor {
    fn by_coords(self) -> bool {
        matches!(self, Flavor::Radius | Flavor::RadiusRo)
    }
    fn by_member(self) -> bool {
        matches!(self, Flavor::ByMember | Flavor::ByMemberRo)
    }
    fn nostore(self) -> bool {
        matches!(self, Flavor::RadiusRo | Flavor::ByMemberRo)
    }
    fn search(self) -> bool {
        matches!(self, Flavor::Search | Flavor::SearchStore)
    }
}

/// What a store variant writes: `items` (sorted in set order) at `key`, deleting it when
/// empty; the reply is the number of items.
struct StoreReq {
    key: Vec<u8>,
    items: Vec<(Vec<u8>, f64)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// Redis's `georadiusGeneric`, on the source key's shard. Writes the reply (or an error) to
/// `w`, or returns what to store (the caller then replies with the count).
fn search_generic(
    ctx: &mut ShardCtx,
    args: &[&[u8]],
    fl: Flavor,
    w: &mut ReplyWriter,
) -> Option<StoreReq> {
    let src = if fl == Flavor::SearchStore { 2 } else { 1 };
    let mut db = ctx.db();
    let z = match read(&mut db, args[src]) {
        Err(()) => {
            w.error(ERR_WRONGTYPE);
            return None;
        }
        Ok(z) => z,
    };
    match parse_and_search(z, args, fl, w.resp3) {
        Err(e) => {
            w.error(&e);
            None
        }
        Ok(Outcome::Reply(bytes)) => {
            w.raw(&bytes);
            None
        }
        Ok(Outcome::Store(s)) => Some(s),
    }
}

enum Outcome {
    Reply(Vec<u8>),
    Store(StoreReq),
}

fn parse_and_search(
    z: Option<&ZSet>,
    args: &[&[u8]],
    fl: Flavor,
    resp3: bool,
) -> Result<Outcome, Err> {
    let mut shape = Shape {
        lon: 0.0,
        lat: 0.0,
        conv: 1.0,
        kind: Kind::Circle { radius: 0.0 },
    };
    let mut store: Option<&[u8]> = None;
    let mut storedist = false;
    let base;
    if fl.by_coords() {
        base = 6;
        (shape.lon, shape.lat) = lon_lat(args[2], args[3])?;
        let (r, c) = radius_arg(args[4], args[5])?;
        shape.kind = Kind::Circle { radius: r };
        shape.conv = c;
    } else if fl.by_member() {
        base = 5;
        // Without a source key, parsing goes on only to choose the reply.
        if let Some(z) = z {
            let sc = z
                .score(args[2])
                .ok_or_else(|| err(b"ERR could not decode requested zset member"))?;
            (shape.lon, shape.lat) = decode_score(sc);
            let (r, c) = radius_arg(args[3], args[4])?;
            shape.kind = Kind::Circle { radius: r };
            shape.conv = c;
        }
    } else if fl == Flavor::SearchStore {
        base = 3;
        store = Some(args[1]);
    } else {
        base = 2;
    }

    let (mut withdist, mut withhash, mut withcoord) = (false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut any = false;
    let mut count: i64 = 0;
    let opts = &args[base.min(args.len())..];
    let n = opts.len();
    let mut i = 0;
    while i < n {
        let a = opts[i];
        if kw(a, "withdist") {
            withdist = true;
        } else if kw(a, "withhash") {
            withhash = true;
        } else if kw(a, "withcoord") {
            withcoord = true;
        } else if kw(a, "any") {
            any = true;
        } else if kw(a, "asc") {
            sort = Sort::Asc;
        } else if kw(a, "desc") {
            sort = Sort::Desc;
        } else if kw(a, "count") && i + 1 < n {
            count = super::parse_int(opts[i + 1]).ok_or_else(|| err(ERR_NOT_INT))?;
            if count <= 0 {
                return Err(err(b"ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (kw(a, "store") || kw(a, "storedist"))
            && i + 1 < n
            && !fl.nostore()
            && !fl.search()
        {
            store = Some(opts[i + 1]);
            storedist = kw(a, "storedist");
            i += 1;
        } else if kw(a, "storedist") && fl == Flavor::SearchStore {
            storedist = true;
        } else if kw(a, "frommember") && i + 1 < n && fl.search() && !fromloc {
            if let Some(z) = z {
                let sc = z
                    .score(opts[i + 1])
                    .ok_or_else(|| err(b"ERR could not decode requested zset member"))?;
                (shape.lon, shape.lat) = decode_score(sc);
            }
            frommember = true;
            i += 1;
        } else if kw(a, "fromlonlat") && i + 2 < n && fl.search() && !frommember {
            (shape.lon, shape.lat) = lon_lat(opts[i + 1], opts[i + 2])?;
            fromloc = true;
            i += 2;
        } else if kw(a, "byradius") && i + 2 < n && fl.search() && !bybox {
            let (r, c) = radius_arg(opts[i + 1], opts[i + 2])?;
            shape.kind = Kind::Circle { radius: r };
            shape.conv = c;
            byradius = true;
            i += 2;
        } else if kw(a, "bybox") && i + 3 < n && fl.search() && !byradius {
            let (wd, ht, c) = box_arg(opts[i + 1], opts[i + 2], opts[i + 3])?;
            shape.kind = Kind::Rect {
                width: wd,
                height: ht,
            };
            shape.conv = c;
            bybox = true;
            i += 3;
        } else {
            return Err(err(ERR_SYNTAX));
        }
        i += 1;
    }

    if store.is_some() && (withdist || withhash || withcoord) {
        let who: &[u8] = if fl == Flavor::SearchStore {
            b"GEOSEARCHSTORE"
        } else {
            b"STORE option in GEORADIUS"
        };
        let mut e = b"ERR ".to_vec();
        e.extend_from_slice(who);
        e.extend_from_slice(b" is not compatible with WITHDIST, WITHHASH and WITHCOORD options");
        return Err(e);
    }
    if fl.search() && !(frommember || fromloc) {
        let mut e = b"ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for ".to_vec();
        e.extend_from_slice(cstr(args[0]));
        return Err(e);
    }
    if fl.search() && !(byradius || bybox) {
        let mut e = b"ERR exactly one of BYRADIUS and BYBOX can be specified for ".to_vec();
        e.extend_from_slice(cstr(args[0]));
        return Err(e);
    }
    if any && count == 0 {
        return Err(err(b"ERR the ANY argument requires COUNT argument"));
    }

    let z = match z {
        Some(z) => z,
        None => {
            return Ok(match store {
                Some(k) => Outcome::Store(StoreReq {
                    key: k.to_vec(),
                    items: Vec::new(),
                }),
                None => Outcome::Reply(with_writer(resp3, |w| w.array(0))),
            })
        }
    };

    // COUNT without an order returns the nearest ones (unless ANY).
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let limit = if any { count as usize } else { 0 };
    let mut pts = points_in_shape(z, &shape, limit);
    if pts.is_empty() && store.is_none() {
        return Ok(Outcome::Reply(with_writer(resp3, |w| w.array(0))));
    }
    let returned = if count == 0 || (pts.len() as i64) < count {
        pts.len()
    } else {
        count as usize
    };
    if sort != Sort::None {
        let cmp = |a: &Point, b: &Point| {
            let o = a.dist.partial_cmp(&b.dist).unwrap_or(Ordering::Equal);
            if sort == Sort::Desc {
                o.reverse()
            } else {
                o
            }
        };
        if returned == pts.len() {
            // glibc's qsort merge-sorts: stable, as `sort_by`.
            pts.sort_by(cmp);
        } else {
            let n = pts.len();
            pqsort(&mut pts, 0, n, &cmp, 0, returned - 1);
        }
    }
    pts.truncate(returned);
    for p in &mut pts {
        p.dist /= shape.conv;
    }

    if let Some(k) = store {
        let mut items: Vec<(Vec<u8>, f64)> = pts
            .into_iter()
            .map(|p| (p.member, if storedist { p.dist } else { p.score }))
            .collect();
        items.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        return Ok(Outcome::Store(StoreReq {
            key: k.to_vec(),
            items,
        }));
    }
    let opts_len = withdist as usize + withhash as usize + withcoord as usize;
    Ok(Outcome::Reply(with_writer(resp3, |w| {
        w.array(pts.len());
        for p in &pts {
            if opts_len > 0 {
                w.array(opts_len + 1);
            }
            w.bulk(&p.member);
            if withdist {
                reply_distance(w, p.dist);
            }
            if withhash {
                w.int(p.score as i64);
            }
            if withcoord {
                w.array(2);
                reply_coord(w, p.lon);
                reply_coord(w, p.lat);
            }
        }
    })))
}

/// Redis's partial quicksort (pqsort.c, a BSD qsort that skips the partitions outside
/// `lrange..=rrange`): only the first COUNT results need their final order, and which of
/// several equally distant points come first depends on this exact algorithm.
fn pqsort<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    cmp: &impl Fn(&T, &T) -> Ordering,
    lrange: usize,
    rrange: usize,
) {
    let med3 = |v: &[T], x: usize, y: usize, z: usize| -> usize {
        if cmp(&v[x], &v[y]) == Ordering::Less {
            if cmp(&v[y], &v[z]) == Ordering::Less {
                y
            } else if cmp(&v[x], &v[z]) == Ordering::Less {
                z
            } else {
                x
            }
        } else if cmp(&v[y], &v[z]) == Ordering::Greater {
            y
        } else if cmp(&v[x], &v[z]) == Ordering::Less {
            x
        } else {
            z
        }
    };
    let vecswap = |v: &mut [T], x: usize, y: usize, k: usize| {
        for i in 0..k {
            v.swap(x + i, y + i);
        }
    };
    loop {
        if n < 7 {
            for pm in a + 1..a + n {
                let mut pl = pm;
                while pl > a && cmp(&v[pl - 1], &v[pl]) == Ordering::Greater {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d);
                pm = med3(v, pm - d, pm, pm + d);
                pn = med3(v, pn - 2 * d, pn - d, pn);
            }
            pm = med3(v, pl, pm, pn);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        // pc and pd may step to a - 1 in C (pointers); keep them offset by one.
        let (mut pc, mut pd) = (a + n, a + n);
        loop {
            while pb < pc {
                let c = cmp(&v[pb], &v[a]);
                if c == Ordering::Greater {
                    break;
                }
                if c == Ordering::Equal {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb < pc {
                let c = cmp(&v[pc - 1], &v[a]);
                if c == Ordering::Less {
                    break;
                }
                if c == Ordering::Equal {
                    v.swap(pc - 1, pd - 1);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb >= pc {
                break;
            }
            v.swap(pb, pc - 1);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && !((lrange < a && rrange < a) || (lrange > a + r - 1 && rrange > a + r - 1)) {
            pqsort(v, a, r, cmp, lrange, rrange);
        }
        let r = pd - pc;
        if r <= 1 {
            return;
        }
        a = pn - r;
        n = r;
        if (lrange < a && rrange < a) || (lrange > a + r - 1 && rrange > a + r - 1) {
            return;
        }
    }
}

fn search_key(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter, fl: Flavor) {
    // Read-only flavors never return a store request.
    let _ = search_generic(ctx, args, fl, w);
}

fn geosearch(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    search_key(ctx, args, w, Flavor::Search)
}

fn georadius_ro(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    search_key(ctx, args, w, Flavor::RadiusRo)
}

fn georadiusbymember_ro(ctx: &mut ShardCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    search_key(ctx, args, w, Flavor::ByMemberRo)
}

/// The store-capable flavors: search on the source's shard, then store on the
/// destination's (both locked for the whole command).
fn search_tx(tx: Tx, args: Vec<Bytes>, fl: Flavor) -> TxFuture {
    Box::pin(async move {
        let resp3 = tx.resp3();
        let src = if fl == Flavor::SearchStore { 2 } else { 1 };
        let shard = tx.shard_of(&args[src]);
        let (reply, store) = tx
            .run(shard, move |ctx| {
                let mut out = Vec::new();
                let mut w = ReplyWriter::new(&mut out, resp3);
                let st = search_generic(ctx, &views(&args), fl, &mut w);
                (out, st)
            })
            .await;
        let Some(st) = store else {
            return reply;
        };
        let n = st.items.len() as i64;
        let dst = st.key;
        let items = st.items;
        tx.run(tx.shard_of(&dst), move |ctx| {
            if items.is_empty() {
                if ctx.db().remove(&dst).is_some() {
                    notify(ctx, GENERIC, "del", &dst);
                }
            } else {
                let z = store_set(&items, &ctx.limits());
                let lru = ctx.clock.lru;
                ctx.db()
                    .set(Entry::new_value(&dst, Value::ZSet(z), None, lru));
                let event = if fl == Flavor::SearchStore {
                    "geosearchstore"
                } else {
                    "georadiusstore"
                };
                notify(ctx, ZSET, event, &dst);
            }
        })
        .await;
        with_writer(resp3, |w| w.int(n))
    })
}

fn georadius(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    search_tx(tx, args, Flavor::Radius)
}

fn georadiusbymember(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    search_tx(tx, args, Flavor::ByMember)
}

fn geosearchstore(tx: Tx, args: Vec<Bytes>) -> TxFuture {
    search_tx(tx, args, Flavor::SearchStore)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palermo_score_and_hash() {
        // Values Redis returns for GEOADD Sicily 13.361389 38.115556 Palermo.
        assert_eq!(encode_score(13.361389, 38.115556), 3479099956230698.0);
        let (lon, lat) = decode_score(3479099956230698.0);
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
        let (x2, y2) = decode_score(encode_score(15.087269, 37.502669));
        assert_eq!(distance_text(distance(lon, lat, x2, y2)), "166274.1516");
    }

    #[test]
    fn interleave_roundtrip() {
        for v in [0u32, 1, 0xdead_beef, u32::MAX, 1 << 26] {
            assert_eq!(squash(spread(v)), v);
            assert_eq!(squash(spread(v) << 1 >> 1), v);
        }
    }

    #[test]
    fn distance_format() {
        assert_eq!(distance_text(0.0), "0.0000");
        assert_eq!(distance_text(0.00004), "0.0000");
        assert_eq!(distance_text(1.23456), "1.2346");
        assert_eq!(distance_text(12345.6), "12345.6000");
    }

    #[test]
    fn pqsort_orders_the_requested_prefix() {
        // Model check against a full sort, on inputs with many ties (LCG-generated).
        let mut seed: u64 = 42;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        for _ in 0..300 {
            let n = (next() % 120) as usize + 1;
            let keys = (next() % 20) + 1;
            let mut v: Vec<u64> = (0..n).map(|_| next() % keys).collect();
            let mut want = v.clone();
            want.sort();
            let upto = (next() as usize % n) + 1;
            pqsort(&mut v, 0, n, &|a: &u64, b: &u64| a.cmp(b), 0, upto - 1);
            assert_eq!(v[..upto], want[..upto], "n={n} upto={upto}");
            v.sort();
            assert_eq!(v, want, "a permutation");
        }
    }

    #[test]
    fn steps() {
        assert_eq!(estimate_steps(0.0, 0.0), 26);
        assert_eq!(estimate_steps(1e9, 0.0), 1);
        assert!(estimate_steps(1000.0, 0.0) > estimate_steps(1000.0, 85.0));
    }
}
