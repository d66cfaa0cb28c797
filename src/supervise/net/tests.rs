use super::*;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn sock(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

#[test]
fn every_local_class_is_named_in_both_families_and_through_mapping() {
    let cases = [
        ("127.0.0.1", Some(LocalClass::Loopback)),
        ("127.3.4.5", Some(LocalClass::Loopback)),
        ("::1", Some(LocalClass::Loopback)),
        ("::ffff:127.0.0.1", Some(LocalClass::Loopback)),
        ("::127.0.0.1", Some(LocalClass::Loopback)),
        ("0.0.0.0", Some(LocalClass::Unspecified)),
        ("::", Some(LocalClass::Unspecified)),
        ("::ffff:0.0.0.0", Some(LocalClass::Unspecified)),
        ("10.255.255.53", Some(LocalClass::Private)),
        ("172.16.0.1", Some(LocalClass::Private)),
        ("172.31.255.255", Some(LocalClass::Private)),
        ("192.168.1.1", Some(LocalClass::Private)),
        ("100.64.0.1", Some(LocalClass::Private)),
        ("fd12::1", Some(LocalClass::Private)),
        ("fc00::1", Some(LocalClass::Private)),
        ("::ffff:10.0.0.1", Some(LocalClass::Private)),
        ("169.254.169.254", Some(LocalClass::LinkLocal)),
        ("fe80::1", Some(LocalClass::LinkLocal)),
        ("::ffff:169.254.1.1", Some(LocalClass::LinkLocal)),
        ("255.255.255.255", Some(LocalClass::Broadcast)),
        ("224.0.0.251", Some(LocalClass::Broadcast)),
        ("ff02::1", Some(LocalClass::Broadcast)),
        ("8.8.8.8", None),
        ("172.32.0.1", None),
        ("100.128.0.1", None),
        ("2606:4700::1111", None),
        ("::ffff:1.1.1.1", None),
        ("fec0::1", None),
    ];
    for (text, class) in cases {
        assert_eq!(classify(ip(text)), class, "{text}");
    }
}

#[test]
fn allow_entries_parse_cover_and_print() {
    let entry: NetAllow = "127.0.0.1:5432".parse().unwrap();
    assert!(entry.covers(sock("127.0.0.1:5432")));
    assert!(entry.covers(sock("[::ffff:127.0.0.1]:5432")), "v4-mapped");
    assert!(!entry.covers(sock("127.0.0.1:5433")));
    assert!(!entry.covers(sock("127.0.0.2:5432")));
    assert_eq!(entry.to_string(), "127.0.0.1:5432");

    let net: NetAllow = "10.0.0.0/8".parse().unwrap();
    assert!(net.covers(sock("10.9.8.7:1")));
    assert!(!net.covers(sock("11.0.0.1:1")));
    assert!(!net.covers(sock("[fd00::1]:1")));
    assert_eq!(net.to_string(), "10.0.0.0/8");

    let v6: NetAllow = "[fd00::/8]:6379".parse().unwrap();
    assert!(v6.covers(sock("[fd12::3]:6379")));
    assert!(!v6.covers(sock("[fd12::3]:6380")));
    assert_eq!(v6.to_string(), "[fd00::/8]:6379");
    let bare: NetAllow = "::1".parse().unwrap();
    assert!(bare.covers(sock("[::1]:9")));
    assert!(!bare.covers(sock("127.0.0.1:9")));
    let any: NetAllow = "0.0.0.0/0".parse().unwrap();
    assert!(any.covers(sock("192.168.0.1:80")));

    for bad in [
        "",
        "localhost:5432",
        "10.0.0.0/33",
        "127.0.0.1:0",
        "127.0.0.1:x",
        "10.0.0.1/8",
        "[::1:5",
    ] {
        assert!(bad.parse::<NetAllow>().is_err(), "{bad:?}");
    }
    let round: NetAllow = serde_json::from_str("\"[::1]:80\"").unwrap();
    assert_eq!(serde_json::to_string(&round).unwrap(), "\"[::1]:80\"");
}

#[test]
fn urls_and_resolv_conf_name_their_destinations() {
    assert_eq!(
        url_destinations("http://127.0.0.1:41234/v1"),
        vec![sock("127.0.0.1:41234")]
    );
    assert_eq!(
        url_destinations("https://user:pw@[fd00::5]/x"),
        vec![sock("[fd00::5]:443")]
    );
    assert_eq!(
        url_destinations("socks5h://10.1.2.3"),
        vec![sock("10.1.2.3:1080")]
    );
    assert_eq!(url_destinations("http://localhost:8080").len(), 2);
    assert!(url_destinations("https://api.example.com/v1").is_empty());
    assert!(url_destinations("/usr/bin").is_empty());
    assert_eq!(
        nameservers("# c\nnameserver 10.255.255.53\nsearch x\nnameserver fe80::1%eth0\n"),
        vec![sock("10.255.255.53:53"), sock("[fe80::1]:53")]
    );
}
