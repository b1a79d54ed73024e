//! The two system calls of the request path, made directly, and the event loop's alarm clock.
//!
//! glibc's `recv` and `send` are thread-cancellation points: each call is wrapped in
//! `__pthread_enable_asynccancel` / `__pthread_disable_asynccancel`, which showed as 2% of an
//! unpipelined GET's CPU time (one `recv` and one `send` per request). Darner never cancels a
//! thread, so the event loop calls the kernel through `syscall(2)` instead, which has no such
//! wrapper. Elsewhere (accept, set-up, shutdown) the standard library's calls are fine.
//!
//! [`Alarm`] is why a thread with nothing to do sleeps in `epoll_wait` without a timeout: a
//! timeout arms a kernel timer at every sleep and cancels it at every wake-up, which in a VM
//! can mean reprogramming the (emulated) local APIC timer each time. Unpipelined clients make
//! a thread sleep and wake every few requests (about 16,000 times a second here); sleeping
//! without the timer cost ~3% less CPU per unpipelined GET or SET (A/B runs). The alarm is set
//! only when its deadline moves earlier or after it rang: one set and one read per cron period
//! on an idle thread.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

/// Receives into `buf`'s uninitialized bytes; returns how many the kernel wrote (0 at EOF).
pub fn recv(sock: &impl AsRawFd, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    recv_flags(sock, buf, 0)
}

/// [`recv`] that never waits, whether the socket blocks or not (MSG_DONTWAIT): what has
/// come, or WouldBlock.
pub fn recv_ready(sock: &impl AsRawFd, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    recv_flags(sock, buf, libc::MSG_DONTWAIT)
}

fn recv_flags(
    sock: &impl AsRawFd,
    buf: &mut [MaybeUninit<u8>],
    flags: libc::c_int,
) -> io::Result<usize> {
    // SAFETY: recvfrom writes at most `buf.len()` bytes into `buf`, which is valid for writes of
    // that many bytes for the duration of the call (MaybeUninit: no initialized data is
    // assumed); the address arguments are null, which recvfrom accepts.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            sock.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
            flags,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Sends from `buf` (MSG_NOSIGNAL: a closed peer is an error, not a SIGPIPE).
pub fn send(sock: &impl AsRawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: sendto reads at most `buf.len()` bytes from `buf`, valid for reads for the call;
    // a null address with length 0 is how a connected socket is sent on.
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            sock.as_raw_fd(),
            buf.as_ptr(),
            buf.len(),
            libc::MSG_NOSIGNAL,
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::socklen_t,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// A one-shot alarm clock (a non-blocking `timerfd` on the monotonic clock) that an event loop
/// registers for readability: it becomes readable once the deadline it was set for passes.
pub struct Alarm {
    fd: OwnedFd,
    /// The deadline it is set for; None when unset or once it has rung.
    armed: Option<Instant>,
}

impl Alarm {
    pub fn new() -> io::Result<Alarm> {
        // SAFETY: timerfd_create takes two integer flags and returns a new descriptor or -1.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by timerfd_create and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Alarm { fd, armed: None })
    }

    /// Makes the alarm ring by `at` (`now` is the current time): sets it when it is unset or
    /// set for later; an alarm set for earlier is left to ring early (the caller then finds
    /// nothing due and sets it again), which saves a system call per change of mind.
    pub fn set(&mut self, at: Instant, now: Instant) -> io::Result<()> {
        if self.armed.is_some_and(|a| a <= at) {
            return Ok(());
        }
        // Relative to a moment no later than the call: it rings at `at` or after, never
        // before. Zero would disarm the timer, so at least 1 ns.
        let d = at.saturating_duration_since(now);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: if d.is_zero() {
                    1
                } else {
                    d.subsec_nanos() as libc::c_long
                },
            },
        };
        // SAFETY: `spec` lives on this stack frame and is only read during the call; a null
        // old-value pointer is allowed; the descriptor is a timerfd we own.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed = Some(at);
        Ok(())
    }

    /// After the alarm's readiness event: consumes the ring, so the next `set` arms it anew.
    pub fn rang(&mut self) {
        let mut count = [0u8; 8];
        // SAFETY: read writes at most 8 bytes into `count`, which lives for the call; on a
        // non-blocking timerfd that has not rung it fails with EAGAIN, which is fine.
        unsafe { libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
        self.armed = None;
    }
}

impl AsRawFd for Alarm {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use std::io::{ErrorKind, Read, Write};
    use std::mem::MaybeUninit;
    use std::net::{TcpListener, TcpStream};

    /// The first `n` bytes of `buf`, which a receive reported it wrote.
    fn received(buf: &[MaybeUninit<u8>], n: usize) -> Vec<u8> {
        buf[..n]
            .iter()
            // SAFETY: the receive that returned `n` initialized the first n bytes.
            .map(|x| unsafe { x.assume_init() })
            .collect()
    }

    #[test]
    fn recv_ready_never_waits_on_a_blocking_socket() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let mut buf = [MaybeUninit::<u8>::uninit(); 64];
        // Blocking socket, nothing sent: WouldBlock at once, not a hang.
        assert_eq!(
            super::recv_ready(&b, &mut buf).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        a.write_all(b"PING\r\n").unwrap();
        let mut n = 0;
        for _ in 0..100 {
            match super::recv_ready(&b, &mut buf) {
                Ok(got) => {
                    n = got;
                    break;
                }
                Err(e) => assert_eq!(e.kind(), ErrorKind::WouldBlock),
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(n, 6);
        assert_eq!(received(&buf, n), b"PING\r\n");
        drop(a);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(super::recv_ready(&b, &mut buf).unwrap(), 0);
    }

    #[test]
    fn send_and_recv_over_a_socket_pair() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        assert_eq!(super::send(&b, b"+PONG\r\n").unwrap(), 7);
        let mut got = [0u8; 7];
        a.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"+PONG\r\n");
        a.write_all(b"PING\r\n").unwrap();
        let mut buf = [MaybeUninit::<u8>::uninit(); 64];
        let n = super::recv(&b, &mut buf).unwrap();
        assert_eq!(n, 6);
        assert_eq!(received(&buf, n), b"PING\r\n");
        // Non-blocking and empty: WouldBlock, not a hang; after the peer closes: 0.
        b.set_nonblocking(true).unwrap();
        assert_eq!(
            super::recv(&b, &mut buf).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        drop(a);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(super::recv(&b, &mut buf).unwrap(), 0);
        // Sending to a closed peer fails with an error (no SIGPIPE kills the test).
        let mut failed = false;
        for _ in 0..100 {
            if super::send(&b, &[0u8; 1024]).is_err() {
                failed = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(failed);
    }

    #[test]
    fn the_alarm_rings_once_its_deadline_passes_and_not_before() {
        use std::time::{Duration, Instant};
        let mut poll = mio::Poll::new().unwrap();
        let mut events = mio::Events::with_capacity(4);
        let mut alarm = super::Alarm::new().unwrap();
        poll.registry()
            .register(
                &mut mio::unix::SourceFd(&std::os::fd::AsRawFd::as_raw_fd(&alarm)),
                mio::Token(7),
                mio::Interest::READABLE,
            )
            .unwrap();
        let t0 = Instant::now();
        alarm.set(t0 + Duration::from_millis(30), t0).unwrap();
        // A later deadline leaves the earlier one set.
        alarm
            .set(t0 + Duration::from_secs(60), Instant::now())
            .unwrap();
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert!(t0.elapsed() >= Duration::from_millis(30));
        assert_eq!(
            events.iter().map(|e| e.token()).collect::<Vec<_>>(),
            [mio::Token(7)]
        );
        alarm.rang();
        // Rung and consumed: nothing more until it is set again.
        poll.poll(&mut events, Some(Duration::from_millis(50)))
            .unwrap();
        assert!(events.is_empty());
        // A deadline already past rings at once (not "disarmed" by a zero interval).
        let now = Instant::now();
        alarm.set(now, now).unwrap();
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(events.iter().count(), 1);
        alarm.rang();
        // An earlier deadline replaces a later one.
        let now = Instant::now();
        alarm.set(now + Duration::from_secs(60), now).unwrap();
        alarm.set(now + Duration::from_millis(10), now).unwrap();
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(events.iter().count(), 1);
        assert!(now.elapsed() < Duration::from_secs(5));
    }
}
