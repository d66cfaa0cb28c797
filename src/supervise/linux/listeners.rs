//! Who serves an internet address on this machine (and this host's own addresses): the sockets bound to it in the caller's
//! network namespace (`/proc/<tid>/net/{tcp,tcp6,udp,udp6}`) and the processes holding them
//! (`/proc/<pid>/fd`). Asked only for connects to loopback, private, link-local and this host's
//! own addresses (`policy::decide_connect`); public destinations never pay for it.
//!
//! Invariant: a destination is served by a set of processes only when a socket that would
//! receive the connection (a TCP listener, or a bound UDP socket, on the port and on the address
//! or the wildcard) is held by one of them; a table or descriptor that cannot be read serves
//! nobody.

use std::collections::BTreeSet;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

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
            let sockets = sock_diag(family as u8, protocol as u8, states).ok()?;
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
    let name = sockprotoname(&format!("/proc/{tid}/fd/{fd}"))?;
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

// ------------------------------------------------------------------ raw calls

/// The protocol name sockfs gives the socket behind `path` (a `/proc/<pid>/fd/<n>` link):
/// the `system.sockprotoname` attribute (`TCP`, `UDPv6`, `UNIX`, …); `None` when unreadable.
pub fn sockprotoname(path: &str) -> Option<String> {
    let path = std::ffi::CString::new(path).ok()?;
    let mut buf = [0u8; 32];
    // SAFETY: both names are NUL-terminated strings we own; the kernel writes at most
    // `buf.len()` bytes into `buf`.
    let rc = unsafe {
        libc::getxattr(
            path.as_ptr(),
            c"system.sockprotoname".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    let len = usize::try_from(rc).ok()?;
    let name = buf.get(..len)?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Some(String::from_utf8_lossy(name.get(..end)?).into_owned())
}

/// The sockets of one address family and protocol in `states` (a bit per TCP state number)
/// in this process's network namespace, as `NETLINK_SOCK_DIAG` dumps them: each one's local
/// address and inode. The kernel walks only the tables those states live in (listeners alone
/// are a short walk, unlike `/proc/net/tcp` with every TIME_WAIT row).
pub fn sock_diag(
    family: u8,
    protocol: u8,
    states: u32,
) -> io::Result<Vec<(std::net::SocketAddr, u64)>> {
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const HEADER: usize = 16;
    // SAFETY: socket(2) with integer arguments; the result is owned below.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just returned to us.
    let socket = unsafe { OwnedFd::from_raw_fd(raw) };
    // nlmsghdr (16) + inet_diag_req_v2 (family, protocol, ext, pad, states, sockid of 48).
    let mut request = [0u8; HEADER + 56];
    request[0..4].copy_from_slice(&((HEADER + 56) as u32).to_ne_bytes());
    request[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    request[6..8].copy_from_slice(&flags.to_ne_bytes());
    request[HEADER] = family;
    request[HEADER + 1] = protocol;
    request[HEADER + 4..HEADER + 8].copy_from_slice(&states.to_ne_bytes());
    // SAFETY: send(2) of a buffer we own, to the kernel (the socket's default peer).
    let sent = unsafe {
        libc::send(
            socket.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            0,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: recv(2) into a buffer we own, bounded by its length.
        let got = unsafe { libc::recv(socket.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let got = usize::try_from(got).map_err(|_| io::Error::last_os_error())?;
        if got == 0 {
            return Ok(out);
        }
        let mut at = 0usize;
        while at + HEADER <= got {
            let word = |range: std::ops::Range<usize>| -> Option<u32> {
                Some(u32::from_ne_bytes(buf.get(range)?.try_into().ok()?))
            };
            let length = word(at..at + 4).unwrap_or(0) as usize;
            let kind = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
            if length < HEADER || at + length > got {
                return Err(io::Error::other("sock_diag: a malformed message"));
            }
            match i32::from(kind) {
                libc::NLMSG_DONE => return Ok(out),
                libc::NLMSG_ERROR => {
                    let errno = word(at + HEADER..at + HEADER + 4).unwrap_or(0) as i32;
                    return Err(io::Error::from_raw_os_error(-errno));
                }
                _ => {
                    // inet_diag_msg: family, state, timer, retrans, sockid (sport at 4, src
                    // at 8..24), …, inode at 68.
                    let body = buf.get(at + HEADER..at + length).unwrap_or_default();
                    if let (Some(port), Some(src), Some(inode)) =
                        (body.get(4..6), body.get(8..24), body.get(68..72))
                    {
                        let port = u16::from_be_bytes([port[0], port[1]]);
                        let ip = if body.first() == Some(&(libc::AF_INET as u8)) {
                            std::net::IpAddr::V4(std::net::Ipv4Addr::new(
                                src[0], src[1], src[2], src[3],
                            ))
                        } else {
                            let mut octets = [0u8; 16];
                            octets.copy_from_slice(src);
                            std::net::IpAddr::V6(std::net::Ipv6Addr::from(octets))
                        };
                        let inode = u32::from_ne_bytes([inode[0], inode[1], inode[2], inode[3]]);
                        out.push((std::net::SocketAddr::new(ip, port), u64::from(inode)));
                    }
                }
            }
            // Messages are 4-byte aligned.
            at += (length + 3) & !3;
        }
    }
}

/// This host's own internet addresses (every interface's, as `getifaddrs` lists them now).
pub fn own_addresses() -> Vec<std::net::IpAddr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cursor = list;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a node of the list getifaddrs returned, alive until freeifaddrs;
        // each address is read as the structure its family names.
        unsafe {
            let entry = &*cursor;
            let addr = entry.ifa_addr;
            if !addr.is_null() {
                match i32::from((*addr).sa_family) {
                    libc::AF_INET => {
                        let v4 = &*(addr as *const libc::sockaddr_in);
                        out.push(std::net::IpAddr::V4(std::net::Ipv4Addr::from(
                            u32::from_be(v4.sin_addr.s_addr),
                        )));
                    }
                    libc::AF_INET6 => {
                        let v6 = &*(addr as *const libc::sockaddr_in6);
                        out.push(std::net::IpAddr::V6(std::net::Ipv6Addr::from(
                            v6.sin6_addr.s6_addr,
                        )));
                    }
                    _ => {}
                }
            }
            cursor = entry.ifa_next;
        }
    }
    // SAFETY: the list getifaddrs allocated, freed once.
    unsafe { libc::freeifaddrs(list) };
    out.sort();
    out.dedup();
    out
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
        // The listener is no longer this process's. (The kernel may still list it for an
        // instant: another test of this process that forks between the bind and the drop gives
        // its child a copy of the descriptor until that child's exec closes it.)
        assert!(!held_by(&[own], &inodes));
    }
}
