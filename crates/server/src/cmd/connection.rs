//! Connection commands: PING, ECHO, SELECT, QUIT, HELLO, AUTH, RESET, CLIENT.

use super::{ConnCtx, Reg};
use bytes::Bytes;
use darner_resp::ReplyWriter;

pub fn register(r: &mut Reg) {
    r.conn("ping", ping);
    r.conn("echo", echo);
    r.conn("select", select);
    r.conn("quit", quit);
}

fn ping(_: &mut ConnCtx, args: &[Bytes], w: &mut ReplyWriter) {
    match args.len() {
        1 => w.simple(b"PONG"),
        2 => w.bulk(&args[1]),
        _ => w.error(&super::arity_error(
            darner_commands::lookup(b"ping").unwrap(),
        )),
    }
}

fn echo(_: &mut ConnCtx, args: &[Bytes], w: &mut ReplyWriter) {
    w.bulk(&args[1]);
}

fn select(ctx: &mut ConnCtx, args: &[Bytes], w: &mut ReplyWriter) {
    match super::parse_int(&args[1]) {
        None => w.error(super::ERR_NOT_INT),
        Some(i) if i < 0 || i as usize >= ctx.shared.databases => w.error(super::ERR_DB_INDEX),
        Some(i) => {
            ctx.client.db = i as usize;
            w.ok();
        }
    }
}

fn quit(ctx: &mut ConnCtx, _: &[Bytes], w: &mut ReplyWriter) {
    ctx.client.close_after_reply = true;
    w.ok();
}
