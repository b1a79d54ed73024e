//! End-to-end tests of CONFIG SET port / bind at run time: the new listeners open on every
//! thread before the old ones close, and a failure changes nothing. Error texts are
//! redis-server 7.0's.

use crate::common::{free_port, Server};
use std::net::TcpStream;
use std::time::Duration;

fn connect(ip: &str, port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://{ip}:{port}/"))
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect {ip}:{port}: {e}"))
}

/// Whether a TCP connection to `ip:port` is refused now.
fn refused(ip: &str, port: u16) -> bool {
    match TcpStream::connect((ip, port)) {
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionRefused,
    }
}

fn config_set(c: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<()> {
    let mut q = redis::cmd("CONFIG");
    q.arg("SET");
    for a in args {
        q.arg(*a);
    }
    q.query(c)
}

fn config_get(c: &mut redis::Connection, name: &str) -> String {
    let v: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    assert_eq!(v.len(), 2, "CONFIG GET {name}");
    v[1].clone()
}

fn info_field(c: &mut redis::Connection, name: &str) -> String {
    let text: String = redis::cmd("INFO").arg("server").query(c).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO"))
        .to_string()
}

fn ping(c: &mut redis::Connection) {
    let pong: String = redis::cmd("PING").query(c).unwrap();
    assert_eq!(pong, "PONG");
}

/// The error text of a failed reply (code and detail, as the server sent it).
fn error_text(r: redis::RedisResult<()>) -> String {
    let e = r.expect_err("an error reply");
    format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or(""))
}

#[test]
fn config_set_port_moves_every_thread_to_the_new_port() {
    let s = Server::start(&["--threads", "2"]);
    let mut old = s.client();
    let new_port = free_port();
    config_set(&mut old, &["port", &new_port.to_string()]).unwrap();
    // The reply leaves once every thread has swapped: the old port refuses already.
    assert!(refused("127.0.0.1", s.port), "old port still listens");
    // A connection made before keeps working.
    ping(&mut old);
    assert_eq!(config_get(&mut old, "port"), new_port.to_string());
    assert_eq!(info_field(&mut old, "tcp_port"), new_port.to_string());
    assert_eq!(
        info_field(&mut old, "listener0"),
        format!("name=tcp,bind=127.0.0.1,port={new_port}")
    );
    // Both threads accept on the new port: the kernel spreads connections over their
    // listeners, and one left in a listener nobody accepts on would never answer.
    let mut conns: Vec<redis::Connection> =
        (0..20).map(|_| connect("127.0.0.1", new_port)).collect();
    for c in conns.iter_mut() {
        ping(c);
    }
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut old).unwrap();
    assert_eq!(list.lines().count(), 21, "{list}");
    // And back.
    config_set(&mut conns[0], &["port", &s.port.to_string()]).unwrap();
    assert!(refused("127.0.0.1", new_port));
    ping(&mut connect("127.0.0.1", s.port));
    ping(&mut conns[1]);
}

#[test]
fn config_set_port_in_use_fails_and_keeps_the_old_port() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().port().to_string();
    assert_eq!(
        error_text(config_set(&mut c, &["port", &busy])),
        "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs."
    );
    // With other directives: all or nothing.
    assert_eq!(
        error_text(config_set(&mut c, &["hz", "50", "port", &busy])),
        "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs."
    );
    assert_eq!(config_get(&mut c, "hz"), "10");
    assert_eq!(config_get(&mut c, "port"), s.port.to_string());
    assert_eq!(info_field(&mut c, "tcp_port"), s.port.to_string());
    ping(&mut c);
    ping(&mut connect("127.0.0.1", s.port));
    // The other socket still has its port to itself: nothing of ours joined it.
    taken.set_nonblocking(true).unwrap();
    drop(TcpStream::connect(("127.0.0.1", taken.local_addr().unwrap().port())).unwrap());
    let mut accepted = false;
    for _ in 0..500 {
        if taken.accept().is_ok() {
            accepted = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(accepted, "the connection went elsewhere");
}

#[test]
fn config_set_bind_changes_the_addresses() {
    let s = Server::start(&["--threads", "2"]);
    let mut c = s.client();
    config_set(&mut c, &["bind", "127.0.0.2"]).unwrap();
    assert!(refused("127.0.0.1", s.port));
    for _ in 0..10 {
        ping(&mut connect("127.0.0.2", s.port));
    }
    assert_eq!(config_get(&mut c, "bind"), "127.0.0.2");
    assert_eq!(
        info_field(&mut c, "listener0"),
        format!("name=tcp,bind=127.0.0.2,port={}", s.port)
    );
    ping(&mut c);
    // Back, with the port in the same CONFIG SET.
    let new_port = free_port();
    config_set(
        &mut c,
        &["bind", "127.0.0.1", "port", &new_port.to_string()],
    )
    .unwrap();
    assert!(refused("127.0.0.2", s.port));
    assert!(refused("127.0.0.1", s.port));
    for _ in 0..10 {
        ping(&mut connect("127.0.0.1", new_port));
    }
    // Every IPv4 address, overlapping the address held: no "in use" from our own listeners.
    config_set(&mut c, &["bind", "*"]).unwrap();
    ping(&mut connect("127.0.0.1", new_port));
    ping(&mut connect("127.0.0.3", new_port));
    config_set(&mut c, &["bind", "127.0.0.1"]).unwrap();
    assert!(refused("127.0.0.3", new_port));
    // An address kept across a change keeps its listeners.
    config_set(&mut c, &["bind", "127.0.0.1 127.0.0.4"]).unwrap();
    ping(&mut connect("127.0.0.4", new_port));
    ping(&mut connect("127.0.0.1", new_port));
    config_set(&mut c, &["bind", "127.0.0.1"]).unwrap();
    assert!(refused("127.0.0.4", new_port));
    ping(&mut connect("127.0.0.1", new_port));
    ping(&mut c);
}

#[test]
fn config_set_bind_failures_change_nothing() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let failed = "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.";
    // 192.0.2.1 (TEST-NET-1) is no address of this machine.
    for bad in [
        "192.0.2.1",
        "127.0.0.1 192.0.2.1",
        "999.999.999.999",
        "127.0.0.1 127.0.0.1",
    ] {
        assert_eq!(
            error_text(config_set(&mut c, &["bind", bad])),
            failed,
            "{bad}"
        );
    }
    let many = (1..=17)
        .map(|i| format!("127.0.0.{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(
        error_text(config_set(&mut c, &["bind", &many])),
        "ERR CONFIG SET failed (possibly related to argument 'bind') - Too many bind addresses specified."
    );
    assert_eq!(config_get(&mut c, "bind"), "127.0.0.1");
    ping(&mut connect("127.0.0.1", s.port));
    // "-" marks an address that may fail.
    config_set(&mut c, &["bind", "-192.0.2.1 127.0.0.1"]).unwrap();
    assert_eq!(config_get(&mut c, "bind"), "-192.0.2.1 127.0.0.1");
    ping(&mut connect("127.0.0.1", s.port));
    ping(&mut c);
}

#[test]
fn config_set_port_0_or_no_bind_address_stops_listening() {
    let s = Server::start(&["--threads", "2"]);
    let mut c = s.client();
    config_set(&mut c, &["port", "0"]).unwrap();
    assert!(refused("127.0.0.1", s.port));
    assert_eq!(info_field(&mut c, "tcp_port"), "0");
    ping(&mut c);
    // Inside a transaction too.
    let (r,): (String,) = redis::pipe()
        .atomic()
        .cmd("CONFIG")
        .arg("SET")
        .arg("port")
        .arg(s.port.to_string())
        .query(&mut c)
        .unwrap();
    assert_eq!(r, "OK");
    for _ in 0..10 {
        ping(&mut connect("127.0.0.1", s.port));
    }
    // No address: no listener either.
    config_set(&mut c, &["bind", ""]).unwrap();
    assert_eq!(config_get(&mut c, "bind"), "");
    assert!(refused("127.0.0.1", s.port));
    ping(&mut c);
    config_set(&mut c, &["bind", "127.0.0.1"]).unwrap();
    ping(&mut connect("127.0.0.1", s.port));
}

#[test]
fn start_up_without_any_listener_is_refused() {
    for args in [["--port", "0"], ["--bind", ""]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_darner"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            text.contains("Configured to not listen anywhere, exiting."),
            "{args:?}: {text}"
        );
    }
}

#[test]
fn concurrent_config_set_bind_all_succeed_and_agree() {
    // Clients on different threads change bind at once: an address one change drops while
    // the next adds it back must not look "in use" (by our own listeners not closed yet), and
    // every thread must end with the listeners of the last change.
    let s = Server::start(&["--threads", "4"]);
    let clients: Vec<std::thread::JoinHandle<()>> = (0..6)
        .map(|k| {
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = connect("127.0.0.1", port);
                for i in 0..40 {
                    let bind = if (i + k) % 2 == 0 {
                        "127.0.0.1"
                    } else {
                        "127.0.0.1 127.0.0.2"
                    };
                    config_set(&mut c, &["bind", bind]).unwrap();
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let mut c = s.client();
    let bind = config_get(&mut c, "bind");
    assert_eq!(refused("127.0.0.2", s.port), bind == "127.0.0.1", "{bind}");
    for _ in 0..20 {
        ping(&mut connect("127.0.0.1", s.port));
        if bind != "127.0.0.1" {
            ping(&mut connect("127.0.0.2", s.port));
        }
    }
}
