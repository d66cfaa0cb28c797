//! Who serves an internet address on this machine: the sockets bound to it in the caller's
//! network namespace (`/proc/<tid>/net/{tcp,tcp6,udp,udp6}`) and the processes holding them
//! (`/proc/<pid>/fd`). Asked only for connects to loopback, private, link-local and this host's
//! own addresses (`policy::decide_connect`); public destinations never pay for it.
//!
//! Invariant: a destination is served by a set of processes only when a socket that would
//! receive the connection (a TCP listener, or a bound UDP socket, on the port and on the address
//! or the wildcard) is held by one of them; a table or descriptor that cannot be read serves
//! nobody.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::supervise::net;

/// The transport a socket speaks, as sockfs names it (`system.sockprotoname`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
}

/// `/proc/net/tcp` state of a listening socket.
const TCP_LISTEN: &str = "0A";

/// One row of a `/proc/net/{tcp,udp}{,6}` table: local address, state, inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub local: SocketAddr,
    pub state: String,
    pub inode: u64,
}

/// Parses a table's rows (the header and malformed rows are skipped). Addresses are written
/// as the kernel's in-memory words in hex: IPv4 one 32-bit word, IPv6 four of them.
pub fn parse_table(text: &str) -> Vec<Row> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (address, port) = fields.get(1)?.split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let ip = parse_hex_ip(address)?;
            Some(Row {
                local: SocketAddr::new(ip, port),
                state: (*fields.get(3)?).to_owned(),
                inode: fields.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

fn parse_hex_ip(text: &str) -> Option<IpAddr> {
    let word = |chunk: &str| u32::from_str_radix(chunk, 16).ok().map(u32::to_ne_bytes);
    match text.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(text)?))),
        32 => {
            let mut octets = [0u8; 16];
            for (index, slot) in octets.chunks_mut(4).enumerate() {
                slot.copy_from_slice(&word(text.get(index * 8..index * 8 + 8)?)?);
            }
            Some(IpAddr::V6(Ipv6Addr::from(octets)))
        }
        _ => None,
    }
}

/// Whether a socket bound to `local` receives a connection to `destination`: same port, and the
/// same address or a wildcard (v4-mapped addresses compare as IPv4; an IPv6 wildcard also
/// receives IPv4 unless the socket is v6-only, which the table does not say: counted).
pub fn receives(local: SocketAddr, destination: SocketAddr) -> bool {
    if local.port() != destination.port() {
        return false;
    }
    let (bound, wanted) = (net::canonical(local.ip()), net::canonical(destination.ip()));
    bound.is_unspecified() || bound == wanted
}

/// TCP's LISTEN state, and UDP's unconnected (CLOSE) and connected (ESTABLISHED) states, as
/// `sock_diag` state bits.
const DIAG_TCP_LISTEN: u32 = 1 << 10;
const DIAG_UDP_BOUND: u32 = (1 << 7) | (1 << 1);

/// The inodes of the sockets that would receive a connection to `destination` over
/// `transport` (`None`: either) in `tid`'s network namespace: asked of the kernel with
/// `sock_diag` when that is ours (listeners only: a short walk), else read from its tables.
pub fn receiving_inodes(
    tid: i32,
    destination: SocketAddr,
    transport: Option<Transport>,
) -> BTreeSet<u64> {
    let same_namespace = std::fs::read_link(format!("/proc/{tid}/ns/net"))
        .ok()
        .is_some_and(|theirs| std::fs::read_link("/proc/self/ns/net").ok() == Some(theirs));
    if same_namespace && let Some(inodes) = diag_inodes(destination, transport) {
        return inodes;
    }
    table_inodes(tid, destination, transport)
}

/// [`receiving_inodes`] through `sock_diag`; `None` when a dump failed.
fn diag_inodes(destination: SocketAddr, transport: Option<Transport>) -> Option<BTreeSet<u64>> {
    let mut inodes = BTreeSet::new();
    for (kind, protocol, states) in [
        (Transport::Tcp, libc::IPPROTO_TCP, DIAG_TCP_LISTEN),
        (Transport::Udp, libc::IPPROTO_UDP, DIAG_UDP_BOUND),
    ] {
        if transport.is_some_and(|wanted| wanted != kind) {
            continue;
        }
        for family in [libc::AF_INET, libc::AF_INET6] {
            let sockets = super::sys::sock_diag(family as u8, protocol as u8, states).ok()?;
            inodes.extend(
                sockets
                    .into_iter()
                    .filter(|(local, inode)| *inode != 0 && receives(*local, destination))
                    .map(|(_, inode)| inode),
            );
        }
    }
    Some(inodes)
}

/// [`receiving_inodes`] from `/proc/<tid>/net/{tcp,tcp6,udp,udp6}`.
fn table_inodes(tid: i32, destination: SocketAddr, transport: Option<Transport>) -> BTreeSet<u64> {
    let mut tables: Vec<(&str, Transport)> = Vec::new();
    for (name, kind) in [
        ("tcp", Transport::Tcp),
        ("tcp6", Transport::Tcp),
        ("udp", Transport::Udp),
        ("udp6", Transport::Udp),
    ] {
        if transport.is_none_or(|wanted| wanted == kind) {
            tables.push((name, kind));
        }
    }
    let mut inodes = BTreeSet::new();
    for (name, kind) in tables {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{tid}/net/{name}")) else {
            continue;
        };
        for row in parse_table(&text) {
            let ready = kind == Transport::Udp || row.state == TCP_LISTEN;
            if ready && row.inode != 0 && receives(row.local, destination) {
                inodes.insert(row.inode);
            }
        }
    }
    inodes
}

/// The socket inode behind `/proc/<pid>/fd/<name>` (`socket:[N]`).
fn socket_inode(link: &std::path::Path) -> Option<u64> {
    let target = std::fs::read_link(link).ok()?;
    let text = target.to_str()?;
    text.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The transport of the caller's socket `fd` (sockfs's protocol name: `TCP`, `TCPv6`, `UDP`,
/// `UDPv6`, `UDPLITE`, …); `None` when it cannot be read or is neither.
pub fn transport_of(tid: i32, fd: i32) -> Option<Transport> {
    let name = super::sys::sockprotoname(&format!("/proc/{tid}/fd/{fd}"))?;
    if name.starts_with("TCP") || name.starts_with("MPTCP") {
        Some(Transport::Tcp)
    } else if name.starts_with("UDP") {
        Some(Transport::Udp)
    } else {
        None
    }
}

/// Whether one of `holders` holds one of `inodes`.
pub fn held_by(holders: &[i32], inodes: &BTreeSet<u64>) -> bool {
    if inodes.is_empty() {
        return false;
    }
    holders.iter().any(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|entries| {
            entries.flatten().any(|entry| {
                socket_inode(&entry.path()).is_some_and(|inode| inodes.contains(&inode))
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_parse_in_both_families() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n";
        let rows = parse_table(v4);
        assert_eq!(
            rows,
            vec![Row {
                local: "127.0.0.1:8080".parse().unwrap(),
                state: "0A".into(),
                inode: 4242
            }]
        );
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 00000000000000000000000001000000:0035 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(parse_table(v6)[0].local, "[::1]:53".parse().unwrap());
        assert!(parse_table("header\ngarbage line\n").is_empty());
    }

    #[test]
    fn wildcards_and_mapped_addresses_receive() {
        let to = |text: &str| text.parse::<SocketAddr>().unwrap();
        assert!(receives(to("0.0.0.0:80"), to("127.0.0.1:80")));
        assert!(receives(to("[::]:80"), to("10.0.0.1:80")));
        assert!(receives(to("127.0.0.1:80"), to("[::ffff:127.0.0.1]:80")));
        assert!(!receives(to("127.0.0.1:80"), to("127.0.0.2:80")));
        assert!(!receives(to("0.0.0.0:80"), to("127.0.0.1:81")));
    }

    #[test]
    fn a_listener_of_this_process_is_found_and_attributed() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let own = std::process::id() as i32;
        let inodes = receiving_inodes(own, addr, Some(Transport::Tcp));
        assert_eq!(inodes.len(), 1, "{inodes:?}");
        assert!(held_by(&[own], &inodes));
        assert!(receiving_inodes(own, addr, Some(Transport::Udp)).is_empty());
        // Both ways of asking agree (sock_diag in our namespace, the tables in any).
        assert_eq!(diag_inodes(addr, None), Some(inodes.clone()));
        assert_eq!(table_inodes(own, addr, None), inodes);
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let udp_addr = udp.local_addr().unwrap();
        assert_eq!(
            diag_inodes(udp_addr, Some(Transport::Udp)).map(|found| found.len()),
            Some(1)
        );
        assert_eq!(table_inodes(own, udp_addr, Some(Transport::Udp)).len(), 1);
        let client = std::net::TcpStream::connect(addr).unwrap();
        use std::os::fd::AsRawFd;
        assert_eq!(transport_of(own, client.as_raw_fd()), Some(Transport::Tcp));
        drop(listener);
        assert!(receiving_inodes(own, addr, Some(Transport::Tcp)).is_empty());
    }
}
