//! Reach to local internet addresses from a room, with real processes: a server the family
//! starts on 127.0.0.1 is reachable; a server started outside the family on 127.0.0.1 is
//! refused (connect, UDP sendto and sendmsg alike) unless the room allows its address; without a room
//! the same connects go through (a control: a refusal is the room's doing).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use autocode::supervise::{self, Exit, LaunchSpec, Room, StdinSource, StdioMode};

/// Tries each `kind:arg` and prints `{op: "ok" | errno name}` as JSON. `serve_and_connect`
/// starts a TCP server in a child process of the family and connects to it.
const PROBE: &str = r#"
import errno, json, socket, subprocess, sys
results = {}
for op in sys.argv[1:]:
    kind, _, arg = op.partition(":")
    try:
        if kind == "tcp":
            s = socket.create_connection(("127.0.0.1", int(arg)), timeout=10)
            s.close()
        elif kind == "tcp6mapped":
            s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(("::ffff:127.0.0.1", int(arg)))
            s.close()
        elif kind == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"x", ("127.0.0.1", int(arg)))
            s.close()
        elif kind == "udpmsg":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendmsg([b"x"], [], 0, ("127.0.0.1", int(arg)))
            s.close()
        elif kind == "serve_and_connect":
            server = subprocess.Popen([sys.executable, "-c",
                "import socket,sys\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(1)\n"
                "print(s.getsockname()[1],flush=True)\nc,_=s.accept()\nc.sendall(b'hi')\n"],
                stdout=subprocess.PIPE)
            port = int(server.stdout.readline())
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            assert s.recv(2) == b"hi"
            s.close()
            server.wait()
        else:
            raise SystemExit("unknown op " + kind)
        results[op] = "ok"
    except OSError as e:
        results[op] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(results))
"#;

/// A server outside every family: a TCP listener and a UDP socket on 127.0.0.1, ports printed.
struct Outside {
    child: Child,
    tcp: u16,
    udp: u16,
}

impl Outside {
    fn start() -> Self {
        let mut child = Command::new("python3")
            .args([
                "-c",
                "import socket,time\nt=socket.socket()\nt.bind(('127.0.0.1',0))\nt.listen(8)\n\
                 u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nu.bind(('127.0.0.1',0))\n\
                 print(t.getsockname()[1],u.getsockname()[1],flush=True)\ntime.sleep(120)\n",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let mut ports = line.split_whitespace().map(|p| p.parse::<u16>().unwrap());
        let (tcp, udp) = (ports.next().unwrap(), ports.next().unwrap());
        Outside { child, tcp, udp }
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn probe(room: Option<Room>, ops: &[String]) -> (BTreeMap<String, String>, supervise::Receipt) {
    let dir = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    let mut args: Vec<OsString> = vec!["-c".into(), PROBE.into()];
    args.extend(ops.iter().map(OsString::from));
    let spec = LaunchSpec {
        label: "netreach test".into(),
        program: "python3".into(),
        args,
        env: std::env::vars_os().collect(),
        cwd: cwd.clone(),
        stdin: StdinSource::Null,
        stdio: StdioMode::Captured { limit: 1 << 20 },
        timeout: Some(Duration::from_secs(60)),
        room: room.map(|room| Room {
            writable: vec![cwd],
            ..room
        }),
    };
    let finished = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(supervise::run(spec))
        .expect("launch");
    let stdout = String::from_utf8_lossy(&finished.stdout);
    assert_eq!(
        finished.exit,
        Exit::Code(0),
        "probe failed: {stdout} {}",
        String::from_utf8_lossy(&finished.stderr)
    );
    let verdicts = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|error| panic!("probe output {stdout:?}: {error}"));
    (verdicts, finished.receipt)
}

#[test]
fn loopback_reaches_only_the_familys_own_servers_and_allowed_addresses() {
    let outside = Outside::start();
    let ops = [
        "serve_and_connect:".to_owned(),
        format!("tcp:{}", outside.tcp),
        format!("tcp6mapped:{}", outside.tcp),
        format!("udp:{}", outside.udp),
        format!("udpmsg:{}", outside.udp),
    ];
    let (verdicts, receipt) = probe(Some(Room::default()), &ops);
    assert_eq!(
        verdicts[&ops[0]], "ok",
        "the family's own server: {verdicts:?}"
    );
    for refused in &ops[1..] {
        assert_eq!(verdicts[refused], "ECONNREFUSED", "{refused}: {verdicts:?}");
    }
    let reasons: Vec<&str> = receipt.denied.iter().map(|d| d.reason.as_str()).collect();
    let named = format!("127.0.0.1:{}", outside.tcp);
    assert!(
        reasons
            .iter()
            .any(|r| r.contains(&named) && r.contains("allow_connect")),
        "{reasons:?}"
    );

    // Allowed by address (a test database): reachable; the other port stays refused.
    let allowed = Room {
        allow_connect: vec![format!("127.0.0.1:{}", outside.tcp).parse().unwrap()],
        ..Room::default()
    };
    let (verdicts, receipt) = probe(Some(allowed), &ops[1..]);
    let room = receipt.room.expect("a room receipt");
    assert!(room.unix_connect_gated);
    assert!(
        room.local_connect_allowed
            .iter()
            .any(|allowed| allowed.to_string() == named),
        "{:?}",
        room.local_connect_allowed
    );
    assert_eq!(verdicts[&ops[1]], "ok", "{verdicts:?}");
    assert_eq!(verdicts[&ops[2]], "ok", "v4-mapped: {verdicts:?}");
    assert_eq!(verdicts[&ops[3]], "ECONNREFUSED", "{verdicts:?}");
    assert_eq!(verdicts[&ops[4]], "ECONNREFUSED", "{verdicts:?}");

    // Without a room the same connects go through.
    let (verdicts, _) = probe(None, &ops[1..]);
    for op in &ops[1..] {
        assert_eq!(verdicts[op], "ok", "{op}: {verdicts:?}");
    }
}
