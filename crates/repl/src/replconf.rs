//! `REPLCONF <option> <value> ...` as a primary reads it (Redis 7.2's `replconfCommand`): what
//! a replica says about itself before `PSYNC`, and its acknowledgements after.
//!
//! Options are taken in order and each takes effect as it is read; an error stops at that
//! option (the ones before it stay applied) and `ack` / `getack` end the command with no reply
//! at all, whatever follows them. [`parse`] gives the options read and how the command ends,
//! with Redis's error texts; the server applies the options and sends the reply.

/// One option read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opt {
    ListeningPort(i64),
    IpAddress(Vec<u8>),
    /// `capa eof`: diskless snapshots framed by a mark.
    CapaEof,
    /// `capa psync2`: `+CONTINUE <id>` understood.
    CapaPsync2,
    /// `ack <offset> [fack <aof offset>]`: how far the replica has processed (and fsynced).
    Ack {
        offset: i64,
        fack: Option<i64>,
    },
    /// `getack *`: the primary asks its replica (this server) for an ACK now.
    GetAck,
    RdbOnly(bool),
    /// `rdb-filter-only <filters>`: only the function libraries (`functions`) or nothing.
    RdbFilterOnly {
        functions: bool,
    },
}

/// How the command ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// `+OK`.
    Ok,
    /// No reply (`ack`, `getack`, or an `ack` whose offset is not a number).
    Silent,
    /// An error reply (the text after `-`).
    Error(String),
}

/// Redis's NET_HOST_STR_LEN: an address at least this long is refused.
const HOST_MAX: usize = 256;

/// Reads `REPLCONF`'s arguments (after the command name).
pub fn parse(args: &[&[u8]]) -> (Vec<Opt>, End) {
    let mut opts = Vec::new();
    if args.len() % 2 == 1 {
        return (opts, End::Error("ERR syntax error".into()));
    }
    const NOT_INT: &str = "ERR value is not an integer or out of range";
    let int = |b: &[u8]| darner_resp::parse_i64_strict(b);
    for (i, pair) in args.chunks(2).enumerate() {
        let (name, value) = (pair[0], pair[1]);
        let opt = match name.to_ascii_lowercase().as_slice() {
            b"listening-port" => match int(value) {
                Some(p) => Opt::ListeningPort(p),
                None => return (opts, End::Error(NOT_INT.into())),
            },
            b"ip-address" => {
                if value.len() >= HOST_MAX {
                    return (
                        opts,
                        End::Error(format!(
                            "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                            value.len()
                        )),
                    );
                }
                Opt::IpAddress(value.to_vec())
            }
            b"capa" => {
                if value.eq_ignore_ascii_case(b"eof") {
                    Opt::CapaEof
                } else if value.eq_ignore_ascii_case(b"psync2") {
                    Opt::CapaPsync2
                } else {
                    // Capabilities this primary does not know are ignored.
                    continue;
                }
            }
            b"ack" => {
                let Some(offset) = int(value) else {
                    return (opts, End::Silent);
                };
                let rest = &args[2 * i + 2..];
                let fack = match rest {
                    [f, v, ..] if f.eq_ignore_ascii_case(b"fack") => match int(v) {
                        Some(v) => Some(v),
                        None => return (opts, End::Silent),
                    },
                    _ => None,
                };
                opts.push(Opt::Ack { offset, fack });
                return (opts, End::Silent);
            }
            b"getack" => {
                opts.push(Opt::GetAck);
                return (opts, End::Silent);
            }
            b"rdb-only" => match int(value) {
                Some(v @ (0 | 1)) => Opt::RdbOnly(v == 1),
                Some(_) => {
                    return (
                        opts,
                        End::Error("ERR value is out of range, value must between 0 and 1".into()),
                    )
                }
                None => return (opts, End::Error(NOT_INT.into())),
            },
            b"rdb-filter-only" => {
                let Some(filters) = darner_resp::split_args(value) else {
                    return (
                        opts,
                        End::Error("ERR Missing rdb-filter-only values".into()),
                    );
                };
                let mut functions = false;
                for f in filters {
                    if f.eq_ignore_ascii_case(b"functions") {
                        functions = true;
                    } else {
                        return (
                            opts,
                            End::Error(format!(
                                "ERR Unsupported rdb-filter-only option: {}",
                                String::from_utf8_lossy(&f)
                            )),
                        );
                    }
                }
                Opt::RdbFilterOnly { functions }
            }
            _ => {
                return (
                    opts,
                    End::Error(format!(
                        "ERR Unrecognized REPLCONF option: {}",
                        String::from_utf8_lossy(name)
                    )),
                )
            }
        };
        opts.push(opt);
    }
    (opts, End::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> (Vec<Opt>, End) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse(&args)
    }

    #[test]
    fn a_replica_s_handshake_options_are_read_in_order() {
        assert_eq!(
            p(&[
                "listening-port",
                "7001",
                "CAPA",
                "eof",
                "capa",
                "psync2",
                "capa",
                "x"
            ]),
            (
                vec![Opt::ListeningPort(7001), Opt::CapaEof, Opt::CapaPsync2],
                End::Ok
            )
        );
        assert_eq!(p(&[]), (vec![], End::Ok));
    }

    #[test]
    fn errors_carry_redis_texts_and_keep_what_came_before() {
        assert_eq!(p(&["a"]).1, End::Error("ERR syntax error".into()));
        let (opts, end) = p(&["capa", "eof", "foo", "1"]);
        assert_eq!(opts, vec![Opt::CapaEof]);
        assert_eq!(
            end,
            End::Error("ERR Unrecognized REPLCONF option: foo".into())
        );
        assert_eq!(
            p(&["rdb-only", "5"]).1,
            End::Error("ERR value is out of range, value must between 0 and 1".into())
        );
        assert_eq!(
            p(&["listening-port", "x"]).1,
            End::Error("ERR value is not an integer or out of range".into())
        );
        assert_eq!(
            p(&["ip-address", &"a".repeat(300)]).1,
            End::Error(
                "ERR REPLCONF ip-address provided by replica instance is too long: 300 bytes"
                    .into()
            )
        );
        assert_eq!(
            p(&["rdb-filter-only", "foo"]).1,
            End::Error("ERR Unsupported rdb-filter-only option: foo".into())
        );
        assert_eq!(
            p(&["rdb-filter-only", "\"a"]).1,
            End::Error("ERR Missing rdb-filter-only values".into())
        );
    }

    #[test]
    fn ack_and_getack_end_the_command_without_a_reply() {
        assert_eq!(
            p(&["ack", "100", "fack", "90"]),
            (
                vec![Opt::Ack {
                    offset: 100,
                    fack: Some(90)
                }],
                End::Silent
            )
        );
        assert_eq!(
            p(&["getack", "*", "bogus", "x"]),
            (vec![Opt::GetAck], End::Silent)
        );
        assert_eq!(p(&["ack", "x"]), (vec![], End::Silent));
    }
}
