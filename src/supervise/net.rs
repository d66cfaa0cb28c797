//! Which internet addresses a confined family may reach without proof of ownership: the
//! address classes that lead to processes on this machine or its private network (loopback,
//! private, link-local, unspecified), and the user's `allow_connect` entries.
//!
//! Pure data and arithmetic; the boundary (`linux::policy`) asks these questions at each
//! connect, and `run::confine` parses the user's entries.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why an address reaches this machine or its local network (the connect is then gated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LocalClass {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 0.0.0.0/8, :: (the kernel connects them to the local host).
    Unspecified,
    /// 10/8, 172.16/12, 192.168/16, 100.64/10 (shared address space), fc00::/7.
    Private,
    /// 169.254/16, fe80::/10.
    LinkLocal,
    /// 255.255.255.255 and 224/4, ff00::/8: every listener on the segment.
    Broadcast,
}

impl LocalClass {
    pub fn as_str(self) -> &'static str {
        match self {
            LocalClass::Loopback => "loopback",
            LocalClass::Unspecified => "unspecified",
            LocalClass::Private => "private",
            LocalClass::LinkLocal => "link-local",
            LocalClass::Broadcast => "broadcast/multicast",
        }
    }
}

/// An IPv4-mapped (`::ffff:a.b.c.d`) or IPv4-compatible (`::a.b.c.d`) IPv6 address as the IPv4
/// address it reaches; any other address unchanged.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let segments = v6.segments();
            // ::a.b.c.d (deprecated, still routed to the IPv4 address by some stacks); `::`
            // and `::1` are IPv6's own.
            if segments[..6] == [0; 6] && v6 != Ipv6Addr::UNSPECIFIED && v6 != Ipv6Addr::LOCALHOST {
                let octets = v6.octets();
                return IpAddr::V4(Ipv4Addr::new(
                    octets[12], octets[13], octets[14], octets[15],
                ));
            }
            IpAddr::V6(v6)
        }
        v4 => v4,
    }
}

/// The local class of `ip` (after [`canonical`]); `None`: a public address.
pub fn classify(ip: IpAddr) -> Option<LocalClass> {
    match canonical(ip) {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_loopback() {
                Some(LocalClass::Loopback)
            } else if a == 0 {
                Some(LocalClass::Unspecified)
            } else if v4.is_private() || (a == 100 && (64..128).contains(&b)) {
                Some(LocalClass::Private)
            } else if v4.is_link_local() {
                Some(LocalClass::LinkLocal)
            } else if v4.is_broadcast() || v4.is_multicast() {
                Some(LocalClass::Broadcast)
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some(LocalClass::Loopback)
            } else if v6.is_unspecified() {
                Some(LocalClass::Unspecified)
            } else if first & 0xfe00 == 0xfc00 {
                Some(LocalClass::Private)
            } else if first & 0xffc0 == 0xfe80 {
                Some(LocalClass::LinkLocal)
            } else if v6.is_multicast() {
                Some(LocalClass::Broadcast)
            } else {
                None
            }
        }
    }
}

/// One allowed destination: a network (an address is a /32 or /128) and, optionally, one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetAllow {
    pub network: IpAddr,
    pub prefix: u8,
    pub port: Option<u16>,
}

/// Why an `allow_connect` entry does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetAllowSyntax {
    #[error(
        "{entry:?} is not an address: write `ADDRESS`, `ADDRESS:PORT`, `NETWORK/PREFIX`, `[IPV6]:PORT` or `[IPV6/PREFIX]:PORT`"
    )]
    NotAnAddress { entry: String },
    #[error("{entry:?} has a prefix longer than the address ({max} bits)")]
    PrefixTooLong { entry: String, max: u8 },
    #[error("{entry:?} has a port that is not 1-65535")]
    BadPort { entry: String },
    #[error("{entry:?} has host bits set beyond its /{prefix} prefix")]
    HostBits { entry: String, prefix: u8 },
}

fn mask(ip: IpAddr, prefix: u8) -> u128 {
    let (bits, width) = match canonical(ip) {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32u8),
        IpAddr::V6(v6) => (u128::from(v6), 128u8),
    };
    let keep = u32::from(prefix.min(width));
    let drop = u32::from(width) - keep;
    if drop >= 128 {
        0
    } else {
        (bits >> drop) << drop
    }
}

impl NetAllow {
    /// Whether a connect to `addr` is covered (v4-mapped addresses compare as IPv4).
    pub fn covers(&self, addr: SocketAddr) -> bool {
        let (ip, network) = (canonical(addr.ip()), canonical(self.network));
        if ip.is_ipv4() != network.is_ipv4() {
            return false;
        }
        if self.port.is_some_and(|port| port != addr.port()) {
            return false;
        }
        mask(ip, self.prefix) == mask(network, self.prefix)
    }

    /// A single destination (`host:port`, as the stage's endpoint or a nameserver names it).
    pub fn exact(addr: SocketAddr) -> Self {
        let network = canonical(addr.ip());
        NetAllow {
            network,
            prefix: if network.is_ipv4() { 32 } else { 128 },
            port: (addr.port() != 0).then_some(addr.port()),
        }
    }
}

impl FromStr for NetAllow {
    type Err = NetAllowSyntax;

    fn from_str(entry: &str) -> Result<Self, Self::Err> {
        let not = || NetAllowSyntax::NotAnAddress {
            entry: entry.to_owned(),
        };
        let trimmed = entry.trim();
        // `[v6(/n)]:port`, `[v6(/n)]`, `v4(/n):port`, `v4(/n)`, `v6(/n)`.
        let (host, port) = if let Some(rest) = trimmed.strip_prefix('[') {
            let (host, after) = rest.split_once(']').ok_or_else(not)?;
            match after {
                "" => (host, None),
                _ => (host, Some(after.strip_prefix(':').ok_or_else(not)?)),
            }
        } else if trimmed.matches(':').count() == 1 {
            let (host, port) = trimmed.split_once(':').ok_or_else(not)?;
            (host, Some(port))
        } else {
            (trimmed, None)
        };
        let port = match port {
            None => None,
            Some(text) => match text.parse::<u16>() {
                Ok(0) | Err(_) => {
                    return Err(NetAllowSyntax::BadPort {
                        entry: entry.to_owned(),
                    });
                }
                Ok(port) => Some(port),
            },
        };
        let (address, prefix) = match host.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (host, None),
        };
        let network: IpAddr = address.parse().map_err(|_| not())?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(text) => text.parse::<u8>().map_err(|_| not())?,
        };
        if prefix > max {
            return Err(NetAllowSyntax::PrefixTooLong {
                entry: entry.to_owned(),
                max,
            });
        }
        if mask(network, prefix) != mask(network, max) {
            return Err(NetAllowSyntax::HostBits {
                entry: entry.to_owned(),
                prefix,
            });
        }
        Ok(NetAllow {
            network,
            prefix,
            port,
        })
    }
}

impl fmt::Display for NetAllow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = if self.network.is_ipv4() { 32 } else { 128 };
        let host = if self.prefix == full {
            self.network.to_string()
        } else {
            format!("{}/{}", self.network, self.prefix)
        };
        match (self.network, self.port) {
            (IpAddr::V6(_), Some(port)) => write!(f, "[{host}]:{port}"),
            (_, Some(port)) => write!(f, "{host}:{port}"),
            (_, None) => write!(f, "{host}"),
        }
    }
}

impl Serialize for NetAllow {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for NetAllow {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The destination a URL names, when its host is an IP literal or `localhost` (a name resolved
/// elsewhere is reached through the resolver, whose addresses are gated as they come). The
/// default port follows the scheme.
pub fn url_destinations(url: &str) -> Vec<SocketAddr> {
    let Some((scheme, rest)) = url.trim().split_once("://") else {
        return Vec::new();
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        "socks" | "socks4" | "socks4a" | "socks5" | "socks5h" => 1080,
        _ => return Vec::new(),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = if let Some(inner) = host_port.strip_prefix('[') {
        match inner.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => return Vec::new(),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    let port = match port {
        None | Some("") => default_port,
        Some(text) => match text.parse::<u16>() {
            Ok(port) => port,
            Err(_) => return Vec::new(),
        },
    };
    if host.eq_ignore_ascii_case("localhost") {
        return vec![
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port),
        ];
    }
    host.parse::<IpAddr>()
        .map(|ip| vec![SocketAddr::new(ip, port)])
        .unwrap_or_default()
}

/// The nameservers of a resolv.conf text (port 53).
pub fn nameservers(resolv_conf: &str) -> Vec<SocketAddr> {
    resolv_conf
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("nameserver")).then(|| words.next())?
        })
        .filter_map(|word| {
            // A scoped address (`fe80::1%eth0`) is the address for this purpose.
            word.split('%').next()?.parse::<IpAddr>().ok()
        })
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}

#[cfg(test)]
mod tests;
