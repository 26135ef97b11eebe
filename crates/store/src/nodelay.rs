//! `TCP_NODELAY` on the connections to PostgreSQL.
//!
//! sqlx 0.9.0 leaves Nagle's algorithm on for its TCP connections (the releases before set
//! `TCP_NODELAY`, as libpq does). A statement whose messages do not fit the socket's send
//! buffer in one write — a multi-row `INSERT`, an `IN` list of 500 digests — then has its
//! last part held back until the server acknowledges the first, and PostgreSQL delays that
//! acknowledgement by 40 ms on Linux. The vendor refresh spent most of its time idle in
//! those waits. sqlx gives no access to its socket, so after each connection is made the
//! store sets the option on this process's TCP sockets to the database's port.

/// Sets `TCP_NODELAY` on every TCP socket of this process connected to `port`. Sockets that
/// already have it, and file descriptors that are not such sockets, are left as they are.
#[cfg(target_os = "linux")]
pub(crate) fn set_on_sockets_to(port: u16) {
    use std::os::fd::{BorrowedFd, RawFd};

    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<RawFd>().ok())
        else {
            continue;
        };
        // SAFETY: `fd` was listed as open by this process a moment ago and the borrow ends
        // within this iteration. Should another thread close it in between, the calls below
        // fail with EBADF, or reach whatever descriptor took its number; they only read the
        // peer address, which fails on anything but a socket, and set a TCP option.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let to_port = rustix::net::getpeername(fd)
            .ok()
            .flatten()
            .and_then(|peer| std::net::SocketAddr::try_from(peer).ok())
            .is_some_and(|peer| peer.port() == port);
        if to_port
            && !rustix::net::sockopt::tcp_nodelay(fd).unwrap_or(true)
            && let Err(e) = rustix::net::sockopt::set_tcp_nodelay(fd, true)
        {
            tracing::debug!(error = %e, "could not set TCP_NODELAY on a database connection");
        }
    }
}

/// Elsewhere the connections keep the driver's defaults.
#[cfg(not(target_os = "linux"))]
pub(crate) fn set_on_sockets_to(_port: u16) {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn only_connections_to_the_port_get_nodelay() {
        let database = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let to_database = TcpStream::connect(database.local_addr().unwrap()).unwrap();
        let to_other = TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert!(!to_database.nodelay().unwrap(), "Nagle is on by default");

        super::set_on_sockets_to(database.local_addr().unwrap().port());

        assert!(to_database.nodelay().unwrap());
        assert!(!to_other.nodelay().unwrap());
    }
}
