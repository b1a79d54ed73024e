//! MODULE: Darner loads no modules (they are Redis C shared libraries, built against Redis's
//! internals). MODULE LIST answers an empty list; LOAD and LOADEX fail as a module that
//! cannot be loaded fails in Redis (after the same argument checks, logged the same way);
//! UNLOAD finds no module of that name. Like Redis, LOAD, LOADEX and UNLOAD are refused
//! unless `enable-module-command` allows them.

use super::help_reply;
use crate::cmd::{eq, ConnCtx, Reg};
use crate::log;
use darner_resp::ReplyWriter;

pub fn register(r: &mut Reg) {
    r.conn("module|list", list);
    r.conn("module|help", help);
    r.conn("module|load", load);
    r.conn("module|loadex", loadex);
    r.conn("module|unload", unload);
}

const ERR_LOAD: &[u8] = b"ERR Error loading the extension. Please check the server logs.";

fn list(_: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    w.array(0);
}

fn help(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    help_reply(
        w,
        args[0],
        &[
            "LIST",
            "    List the loaded modules (Darner loads none).",
            "LOAD <path> [<arg> ...]",
            "    Load a module: not supported by Darner, always fails.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module with configurations: not supported by Darner, always fails.",
            "UNLOAD <name>",
            "    Unload a module (there is none to unload).",
        ],
    );
}

fn refuse(path: &[u8], w: &mut ReplyWriter) {
    log::warning(&format!(
        "Module {} failed to load: modules are not supported by Darner",
        String::from_utf8_lossy(path)
    ));
    w.error(ERR_LOAD);
}

fn load(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    refuse(args[2], w);
}

/// LOADEX's arguments are checked as Redis checks them (a CONFIG without its name and value,
/// an unknown word), each failure logged and answered with the loading error.
fn loadex(_: &mut ConnCtx, args: &[&[u8]], w: &mut ReplyWriter) {
    let mut j = 3;
    while j < args.len() {
        if eq(args[j], "config") {
            if j + 2 >= args.len() {
                log::notice("CONFIG specified without name value pair");
                return w.error(ERR_LOAD);
            }
            j += 3;
        } else if eq(args[j], "args") {
            break;
        } else {
            log::notice(&format!(
                "Syntax Error from arguments to loadex around {}.",
                String::from_utf8_lossy(args[j])
            ));
            return w.error(ERR_LOAD);
        }
    }
    refuse(args[2], w);
}

fn unload(_: &mut ConnCtx, _: &[&[u8]], w: &mut ReplyWriter) {
    w.error(b"ERR Error unloading module: no such module with that name");
}
