//! The two system calls of the request path, made directly.
//!
//! glibc's `recv` and `send` are thread-cancellation points: each call is wrapped in
//! `__pthread_enable_asynccancel` / `__pthread_disable_asynccancel`, which showed as 2% of an
//! unpipelined GET's CPU time (one `recv` and one `send` per request). Darner never cancels a
//! thread, so the event loop calls the kernel through `syscall(2)` instead, which has no such
//! wrapper. Elsewhere (accept, set-up, shutdown) the standard library's calls are fine.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;

/// Receives into `buf`'s uninitialized bytes; returns how many the kernel wrote (0 at EOF).
pub fn recv(sock: &impl AsRawFd, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    // SAFETY: recvfrom writes at most `buf.len()` bytes into `buf`, which is valid for writes of
    // that many bytes for the duration of the call (MaybeUninit: no initialized data is
    // assumed); the address arguments are null, which recvfrom accepts.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            sock.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
            0,
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

#[cfg(test)]
mod tests {
    use std::io::{ErrorKind, Read, Write};
    use std::mem::MaybeUninit;
    use std::net::{TcpListener, TcpStream};

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
        // SAFETY: recv initialized the first n bytes.
        let got: Vec<u8> = buf[..n]
            .iter()
            .map(|x| unsafe { x.assume_init() })
            .collect();
        assert_eq!(got, b"PING\r\n");
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
}
