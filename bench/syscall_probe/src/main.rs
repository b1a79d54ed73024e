//! A probe of the kernel's share of an unpipelined request: a server that does no work (each
//! chunk it receives is answered with one fixed bulk reply, which is what an unpipelined GET
//! looks like on the wire), once with edge-triggered epoll + recv + send (darner's loop), once
//! with io_uring (multishot accept and recv with provided buffers, sends batched into the one
//! `io_uring_enter` that also waits). The difference between the two is the most io_uring could
//! save darner per request; `run.sh` measures ops per server CPU-second like bench/compare.py.
use std::os::fd::AsRawFd;
const REPLY: &[u8] = b"$3\r\nxxx\r\n";

fn epoll(port: u16) {
    use mio::{Events, Interest, Poll, Token};
    let mut poll = Poll::new().unwrap();
    let mut l = mio::net::TcpListener::bind(format!("127.0.0.1:{port}").parse().unwrap()).unwrap();
    poll.registry().register(&mut l, Token(usize::MAX), Interest::READABLE).unwrap();
    let mut conns: Vec<Option<mio::net::TcpStream>> = Vec::new();
    let mut ev = Events::with_capacity(1024);
    let mut buf = vec![0u8; 16384];
    let mut dirty: Vec<usize> = Vec::new();
    loop {
        poll.poll(&mut ev, None).unwrap();
        for e in ev.iter() {
            if e.token() == Token(usize::MAX) {
                while let Ok((mut s, _)) = l.accept() {
                    s.set_nodelay(true).unwrap();
                    let i = conns.len();
                    poll.registry().register(&mut s, Token(i), Interest::READABLE).unwrap();
                    conns.push(Some(s));
                }
                continue;
            }
            let i = e.token().0;
            let Some(s) = conns[i].as_ref() else { continue };
            let n = unsafe { libc::recv(s.as_raw_fd(), buf.as_mut_ptr() as _, buf.len(), 0) };
            if n == 0 { conns[i] = None; continue; }
            if n > 0 { dirty.push(i); }
        }
        for i in dirty.drain(..) {
            if let Some(s) = conns[i].as_ref() {
                unsafe { libc::send(s.as_raw_fd(), REPLY.as_ptr() as _, REPLY.len(), libc::MSG_NOSIGNAL) };
            }
        }
    }
}

fn uring(port: u16) {
    use io_uring::{opcode, squeue, types, IoUring};
    let l = std::net::TcpListener::bind(format!("127.0.0.1:{port}")).unwrap();
    let mut ring: IoUring = IoUring::builder().build(4096).unwrap();
    const NB: u16 = 1024; const BS: usize = 4096; const BGID: u16 = 7;
    let mut bufs = vec![0u8; NB as usize * BS];
    // provide buffers (legacy)
    let pb = opcode::ProvideBuffers::new(bufs.as_mut_ptr(), BS as i32, NB, BGID, 0).build().user_data(u64::MAX - 1);
    unsafe { ring.submission().push(&pb).unwrap() };
    ring.submit_and_wait(1).unwrap();
    ring.completion().for_each(drop);
    let accept = opcode::AcceptMulti::new(types::Fd(l.as_raw_fd())).build().user_data(u64::MAX);
    unsafe { ring.submission().push(&accept).unwrap() };
    let mut fds: Vec<i32> = Vec::new();
    let mut sends: Vec<usize> = Vec::new();
    let mut reprov: Vec<u16> = Vec::new();
    loop {
        // queue sends and buffer returns
        for i in sends.drain(..) {
            let e = opcode::Send::new(types::Fd(fds[i]), REPLY.as_ptr(), REPLY.len() as u32).flags(libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT).build().user_data(1 << 40 | i as u64).flags(squeue::Flags::SKIP_SUCCESS);
            unsafe { ring.submission().push(&e).unwrap() };
        }
        for b in reprov.drain(..) {
            let e = opcode::ProvideBuffers::new(unsafe { bufs.as_mut_ptr().add(b as usize * BS) }, BS as i32, 1, BGID, b).build().user_data(u64::MAX - 1).flags(squeue::Flags::SKIP_SUCCESS);
            unsafe { ring.submission().push(&e).unwrap() };
        }
        ring.submit_and_wait(1).unwrap();
        let cq: Vec<(u64, i32, u32)> = ring.completion().map(|c| (c.user_data(), c.result(), c.flags())).collect();
        for (ud, res, flags) in cq {
            if ud == u64::MAX {
                if res >= 0 {
                    let fd = res;
                    let one: i32 = 1;
                    unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, &one as *const _ as _, 4) };
                    let i = fds.len(); fds.push(fd);
                    let r = opcode::RecvMulti::new(types::Fd(fd), BGID).build().user_data(i as u64);
                    unsafe { ring.submission().push(&r).unwrap() };
                }
                continue;
            }
            if ud == u64::MAX - 1 || ud >> 40 == 1 { continue; }
            let i = ud as usize;
            if let Some(b) = io_uring::cqueue::buffer_select(flags) { reprov.push(b); }
            if res > 0 { sends.push(i); }
            if !io_uring::cqueue::more(flags) && res > 0 {
                let r = opcode::RecvMulti::new(types::Fd(fds[i]), BGID).build().user_data(i as u64);
                unsafe { ring.submission().push(&r).unwrap() };
            }
            if res <= 0 && res != -libc::ENOBUFS { unsafe { libc::close(fds[i]) }; }
        }
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let port: u16 = a[2].parse().unwrap();
    if a[1] == "epoll" { epoll(port) } else { uring(port) }
}
