//! MONITOR through the proxy. One node's MONITOR shows the commands that node runs, so the
//! proxy opens a connection of the client's own to every node that runs the client's commands
//! (every primary, and every replica when the read policy may send reads there), sends
//! MONITOR on each, and answers the client's MONITOR with `+OK` only once every node has: from
//! that `+OK` on, every command any node runs is shown, as a client of one Redis expects.
//! Each node's lines go to the client whole, as the node wrote them, in the order they reach
//! the proxy (nodes' clocks and the network order them no better than that).
//!
//! While monitoring, the client may send what a monitoring client of Redis may: QUIT (`+OK`,
//! then the connection closes), RESET (the monitor connections close, `+RESET`), PING and
//! ECHO; a command that touches the keyspace gets Redis's own refusal (a monitoring client is
//! a replica to Redis), and any other command a clear error. A monitor connection that fails
//! ends the client's connection, as its node going away would end a client of that node.
//!
//! A node that starts running the client's commands later (a new primary, or a new replica
//! where reads may go to replicas) is watched from the topology refresh that names it on: a
//! monitor connection is added, whose `+OK` is the proxy's own (the client had its `+OK`); a
//! node that cannot be reached then is tried again at the next refresh.

use std::time::Instant;

use darner_commands::{flags, lookup};

use super::{error_wire, Owner, Role, Worker, SUBSCRIBER_OUT_MAX};
use crate::replicas::ReadPolicy;
use crate::route::{self, Identity, Plan, Session};
use crate::slots::SlotMap;

/// The request each monitor connection sends.
const MONITOR_REQUEST: &[u8] = b"*1\r\n$7\r\nMONITOR\r\n";

/// A client's monitoring: its connections, and the lines held until its `+OK` goes out.
#[derive(Debug, Default)]
pub(super) struct Monitoring {
    /// MONITOR was parsed: the connections open once every earlier reply is out.
    pub(super) pending: bool,
    /// The monitor connections (also in the client's `dedicated`).
    pub(super) conns: Vec<usize>,
    /// Nodes whose `+OK` has not come yet: until none is left, the client's `+OK` waits and
    /// so do the lines of the nodes that answered first, and its input is not read.
    pub(super) waiting: usize,
    /// Those lines.
    pub(super) early: Vec<u8>,
}

impl Monitoring {
    /// A line from one of the monitor connections, for the client's `out` (or held until its
    /// `+OK`); false when the client reads too slowly to keep (it is then closed, as a
    /// subscriber is).
    pub(super) fn line(&mut self, out: &mut Vec<u8>, line: &[u8]) -> bool {
        if out.len() + self.early.len() + line.len() > SUBSCRIBER_OUT_MAX {
            return false;
        }
        if self.waiting > 0 {
            self.early.extend_from_slice(line);
        } else {
            out.extend_from_slice(line);
        }
        true
    }

    /// Between MONITOR and its `+OK`: the client's later input waits.
    pub(super) fn starting(&self) -> bool {
        self.pending || self.waiting > 0
    }

    /// Monitoring (or starting to).
    pub(super) fn active(&self) -> bool {
        self.starting() || !self.conns.is_empty()
    }
}

/// What a monitoring client's request does.
#[derive(Debug, PartialEq)]
pub(super) enum WhileMonitoring {
    /// QUIT: `+OK`, then close.
    Quit,
    /// RESET: the monitor connections close; `+RESET`.
    Reset,
    /// Answered by the proxy (PING, ECHO, an error).
    Reply(Vec<u8>),
}

/// A monitoring client's request, decided as Redis decides for a monitoring client.
pub(super) fn while_monitoring(
    args: &[&[u8]],
    s: &mut Session,
    me: &Identity,
    map: &SlotMap,
) -> WhileMonitoring {
    let name = String::from_utf8_lossy(&args[0][..args[0].len().min(64)]).to_ascii_lowercase();
    let keyspace = lookup(name.as_bytes()).is_some_and(|spec| {
        spec.has(flags::READONLY) || spec.has(flags::WRITE) || spec.has(flags::MAY_REPLICATE)
    });
    match name.as_str() {
        "quit" => WhileMonitoring::Quit,
        "reset" if args.len() == 1 => WhileMonitoring::Reset,
        "ping" | "echo" => match route::plan(args, s, me, map) {
            Plan::Reply { bytes, .. } => WhileMonitoring::Reply(bytes),
            _ => WhileMonitoring::Reply(error_wire("ERR unexpected plan")),
        },
        _ if keyspace => {
            WhileMonitoring::Reply(error_wire("ERR Replica can't interact with the keyspace"))
        }
        _ => WhileMonitoring::Reply(error_wire(&format!(
            "ERR command '{name}' is not supported by darner proxy while MONITOR is on"
        ))),
    }
}

impl Worker {
    /// Opens the client's monitor connections, its earlier replies being all out. Nothing of
    /// its own is in flight, so no command it sent before MONITOR can show up after the `+OK`.
    pub(super) fn start_monitor(&mut self, idx: usize) {
        let id = self.clients[idx].id;
        self.clients[idx].monitor.pending = false;
        let nodes = self.monitored_nodes();
        if nodes.is_empty() {
            let c = &mut self.clients[idx];
            c.out
                .extend_from_slice(&error_wire("CLUSTERDOWN Hash slot not served"));
            self.resume.push(idx);
            return;
        }
        let mut opened = Vec::new();
        for node in &nodes {
            match self.open_backend(node, false) {
                Ok(b) => opened.push(b),
                Err(e) => {
                    for b in opened {
                        self.drop_backend(b);
                    }
                    let c = &mut self.clients[idx];
                    c.out
                        .extend_from_slice(&error_wire(&format!("ERR upstream {node}: {e}")));
                    self.resume.push(idx);
                    return;
                }
            }
        }
        let now = Instant::now();
        for &b in &opened {
            let be = &mut self.backends[b];
            be.role = Role::Monitor { idx, id };
            be.queue_own(Owner::MonitorStart { idx, id }, MONITOR_REQUEST, now);
            self.dirty_backends.push(b);
        }
        let c = &mut self.clients[idx];
        c.dedicated.extend_from_slice(&opened);
        c.monitor.waiting = opened.len();
        c.monitor.conns = opened;
    }

    /// The nodes that run the clients' commands: every primary, and every replica when the
    /// read policy may read there.
    fn monitored_nodes(&self) -> Vec<String> {
        let primaries: Vec<String> = self.map.primaries().into_iter().map(String::from).collect();
        let mut nodes = primaries.clone();
        if self.read_policy != ReadPolicy::Master {
            for p in &primaries {
                nodes.extend(self.replicas.of(p).iter().map(|r| r.node.clone()));
            }
        }
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// After a topology refresh: each monitoring client (past its `+OK`) gets a monitor
    /// connection to every node it does not watch yet.
    pub(super) fn monitor_new_nodes(&mut self) {
        let monitoring: Vec<usize> = self
            .clients
            .iter()
            .filter(|(_, c)| !c.monitor.conns.is_empty() && !c.monitor.starting())
            .map(|(idx, _)| idx)
            .collect();
        if monitoring.is_empty() {
            return;
        }
        let nodes = self.monitored_nodes();
        let now = Instant::now();
        for idx in monitoring {
            let c = &self.clients[idx];
            let id = c.id;
            let watched: Vec<String> = c
                .monitor
                .conns
                .iter()
                .filter_map(|&b| self.backends.get(b).map(|be| be.node.clone()))
                .collect();
            for node in nodes.iter().filter(|n| !watched.contains(n)) {
                // Unreachable now: the next refresh tries again.
                let Ok(b) = self.open_backend(node, false) else {
                    continue;
                };
                let be = &mut self.backends[b];
                be.role = Role::Monitor { idx, id };
                // Its `+OK` finds the client's `waiting` at 0: dropped.
                be.queue_own(Owner::MonitorStart { idx, id }, MONITOR_REQUEST, now);
                self.dirty_backends.push(b);
                let c = &mut self.clients[idx];
                c.dedicated.push(b);
                c.monitor.conns.push(b);
            }
        }
    }

    /// A node's answer to MONITOR: the client's `+OK` (and the lines held) once every node
    /// has answered; a node's refusal (an ACL without MONITOR, say) ends the monitoring and
    /// goes to the client.
    pub(super) fn monitor_answered(&mut self, idx: usize, id: u64, reply: &[u8]) {
        let Some(c) = self.clients.get_mut(idx).filter(|c| c.id == id) else {
            return;
        };
        if c.monitor.waiting == 0 {
            return;
        }
        if reply.first() == Some(&b'-') {
            self.stop_monitor(idx);
            let c = &mut self.clients[idx];
            c.out.extend_from_slice(reply);
        } else {
            c.monitor.waiting -= 1;
            if c.monitor.waiting > 0 {
                return;
            }
            c.out.extend_from_slice(b"+OK\r\n");
            let early = std::mem::take(&mut c.monitor.early);
            c.out.extend_from_slice(&early);
        }
        self.dirty_clients.push(idx);
        // Its input, held since MONITOR, is read now.
        self.clients[idx].input_paused = true;
        self.resume.push(idx);
    }

    /// Closes the client's monitor connections (RESET, a refused MONITOR).
    pub(super) fn stop_monitor(&mut self, idx: usize) {
        let Some(c) = self.clients.get_mut(idx) else {
            return;
        };
        let conns = std::mem::take(&mut c.monitor);
        c.dedicated.retain(|b| !conns.conns.contains(b));
        for b in conns.conns {
            self.drop_backend(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str], s: &mut Session) -> WhileMonitoring {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let me = Identity {
            host: "127.0.0.1".into(),
            port: 7000,
            node_id: "x".into(),
        };
        while_monitoring(&args, s, &me, &SlotMap::default())
    }

    #[test]
    fn monitoring_clients_may_do_what_redis_allows_them() {
        let mut s = Session::default();
        assert_eq!(run(&["QUIT"], &mut s), WhileMonitoring::Quit);
        assert_eq!(run(&["reset"], &mut s), WhileMonitoring::Reset);
        assert_eq!(
            run(&["PING"], &mut s),
            WhileMonitoring::Reply(b"+PONG\r\n".to_vec())
        );
        assert_eq!(
            run(&["ECHO", "x"], &mut s),
            WhileMonitoring::Reply(b"$1\r\nx\r\n".to_vec())
        );
        for keyspace in [
            &["GET", "k"][..],
            &["SET", "k", "v"],
            &["EVAL", "return 1", "0"],
        ] {
            assert_eq!(
                run(keyspace, &mut s),
                WhileMonitoring::Reply(
                    b"-ERR Replica can't interact with the keyspace\r\n".to_vec()
                ),
                "{keyspace:?}"
            );
        }
        let WhileMonitoring::Reply(e) = run(&["CLIENT", "ID"], &mut s) else {
            panic!("not a reply")
        };
        assert!(
            e.starts_with(b"-ERR command 'client' is not supported by darner proxy while MONITOR")
        );
    }
}
