//! Two network namespaces joined by a veth pair, made for a measurement (or a test) and removed when
//! it drops: traffic that never leaves the machine and never touches its own interfaces. Each
//! namespace is journalled before it is made, so a run killed with SIGKILL has them deleted by the
//! next punctual run (or `punctual shield --restore`).

use crate::TrafficError;
use nix::sched::{setns, CloneFlags};
use std::process::Command;

/// Namespaces `ns[0]` and `ns[1]` with veth ends `dev[0]` (address `ip[0]`) and `dev[1]` (`ip[1]`),
/// named after this process and a tag. Deleting a namespace removes its veth end, so dropping the
/// pair removes everything it made.
pub struct Pair {
    pub ns: [String; 2],
    pub dev: [String; 2],
    pub ip: [String; 2],
    /// Deleting each namespace, journalled: the guards delete them (and with them the veth ends)
    /// when the pair drops.
    made: Vec<punctual_rt::journal::ChangeGuard>,
}

fn ip(args: &[&str]) -> Result<String, TrafficError> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| TrafficError::System(format!("running ip (iproute2): {e}")))?;
    if !o.status.success() {
        return Err(TrafficError::System(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

impl Pair {
    /// `tag`: a few letters naming the user; `net`: the second octet of its 10.net.0.0/24.
    pub fn new(tag: &str, net: u8) -> Result<Pair, TrafficError> {
        if !nix::unistd::geteuid().is_root() {
            return Err(TrafficError::System(
                "network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN)".into(),
            ));
        }
        let pid = std::process::id();
        let mut p = Pair {
            ns: [format!("pt{pid}{tag}a"), format!("pt{pid}{tag}b")],
            dev: [format!("pv{pid}{tag}a"), format!("pv{pid}{tag}b")],
            ip: [format!("10.{net}.0.1"), format!("10.{net}.0.2")],
            made: Vec::new(),
        };
        // Built after `p` exists: a failure halfway removes what was made.
        for ns in p.ns.clone() {
            let guard = punctual_rt::journal::global()
                .record(punctual_rt::journal::Change::RemoveNetns { name: ns.clone() })
                .map_err(|e| TrafficError::System(format!("writing the journal: {e}")))?;
            p.made.push(guard);
            ip(&["netns", "add", &ns])?;
        }
        ip(&[
            "link", "add", &p.dev[0], "netns", &p.ns[0], "type", "veth", "peer", "name", &p.dev[1],
            "netns", &p.ns[1],
        ])?;
        for i in 0..2 {
            let addr = format!("{}/24", p.ip[i]);
            ip(&["-n", &p.ns[i], "addr", "add", &addr, "dev", &p.dev[i]])?;
            ip(&["-n", &p.ns[i], "link", "set", &p.dev[i], "up"])?;
            ip(&["-n", &p.ns[i], "link", "set", "lo", "up"])?;
        }
        Ok(p)
    }

    /// Moves the calling thread into namespace `i` (only this thread: setns is per thread).
    pub fn enter(&self, i: usize) -> Result<(), TrafficError> {
        let f = std::fs::File::open(format!("/run/netns/{}", self.ns[i]))
            .map_err(|e| TrafficError::System(format!("opening namespace {}: {e}", self.ns[i])))?;
        setns(f, CloneFlags::CLONE_NEWNET)
            .map_err(|e| TrafficError::System(format!("entering namespace {}: {e}", self.ns[i])))
    }

    /// The MAC address of veth end `i`.
    pub fn mac(&self, i: usize) -> Result<[u8; 6], TrafficError> {
        let out = ip(&["-n", &self.ns[i], "-o", "link", "show", "dev", &self.dev[i]])?;
        let hex = out
            .split_whitespace()
            .skip_while(|w| *w != "link/ether")
            .nth(1)
            .ok_or_else(|| TrafficError::System(format!("no MAC address for {}", self.dev[i])))?;
        let mut mac = [0u8; 6];
        let parts: Vec<&str> = hex.split(':').collect();
        if parts.len() != 6 {
            return Err(TrafficError::System(format!("odd MAC address '{hex}'")));
        }
        for (m, p) in mac.iter_mut().zip(parts) {
            *m = u8::from_str_radix(p, 16)
                .map_err(|_| TrafficError::System(format!("odd MAC address '{hex}'")))?;
        }
        Ok(mac)
    }
}
