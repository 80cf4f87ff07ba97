//! Which address a daemon listens on for its peers.
//!
//! `listen_host` in instance.toml names it: an address, a network in CIDR notation, an
//! interface name, or `auto` (the first non-loopback IPv4 address). The choice among the
//! host's interfaces is a pure function ([`choose`]) of the setting and the interface list;
//! [`resolve`] feeds it the host's real interfaces.

use std::net::IpAddr;
use tessera_core::{Errno, FsError, FsResult};

/// What `listen_host` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenSpec {
    Addr(IpAddr),
    Network { base: IpAddr, prefix: u8 },
    Interface(String),
    Auto,
}

impl ListenSpec {
    pub fn parse(s: &str) -> FsResult<ListenSpec> {
        let s = s.trim();
        let bad = |why: &str| {
            FsError::new(
                Errno::Inval,
                format!(
                    "listen_host = '{s}': {why}; give an address (10.1.0.5), a network (10.1.0.0/16), an interface name (eth0) or `auto`"
                ),
            )
        };
        if s.is_empty() {
            return Err(bad("empty"));
        }
        if s == "auto" {
            return Ok(ListenSpec::Auto);
        }
        if let Ok(a) = s.parse::<IpAddr>() {
            return Ok(ListenSpec::Addr(a));
        }
        if let Some((base, prefix)) = s.split_once('/') {
            let base: IpAddr = base.parse().map_err(|_| bad("not a network address"))?;
            let prefix: u8 = prefix.parse().map_err(|_| bad("not a prefix length"))?;
            let max = if base.is_ipv4() { 32 } else { 128 };
            if prefix > max {
                return Err(bad("prefix length too long"));
            }
            return Ok(ListenSpec::Network { base, prefix });
        }
        if s.len() > 15
            || !s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-@:".contains(c))
        {
            return Err(bad("not an interface name"));
        }
        Ok(ListenSpec::Interface(s.to_string()))
    }
}

/// Whether `addr` lies in the network `base/prefix`.
pub fn in_network(addr: IpAddr, base: IpAddr, prefix: u8) -> bool {
    match (addr, base) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

/// The address to listen on, given the host's interfaces as (name, address). In a multi-host
/// instance (any setting but a loopback address) a loopback address is never chosen.
pub fn choose(spec: &ListenSpec, interfaces: &[(String, IpAddr)]) -> FsResult<IpAddr> {
    let usable = |a: &IpAddr| !a.is_loopback() && !a.is_unspecified();
    let found = match spec {
        ListenSpec::Addr(a) => return Ok(*a),
        ListenSpec::Auto => interfaces
            .iter()
            .map(|(_, a)| *a)
            .find(|a| a.is_ipv4() && usable(a)),
        ListenSpec::Network { base, prefix } => interfaces
            .iter()
            .map(|(_, a)| *a)
            .find(|a| usable(a) && in_network(*a, *base, *prefix)),
        ListenSpec::Interface(name) => interfaces
            .iter()
            .filter(|(n, a)| n == name && usable(a))
            .map(|(_, a)| *a)
            .min_by_key(|a| !a.is_ipv4()),
    };
    found.ok_or_else(|| {
        let have: Vec<String> = interfaces.iter().map(|(n, a)| format!("{n} {a}")).collect();
        FsError::new(
            Errno::AddrNotAvail,
            format!(
                "no non-loopback address of this host matches listen_host = {}; its interfaces: {}",
                describe(spec),
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                }
            ),
        )
    })
}

fn describe(spec: &ListenSpec) -> String {
    match spec {
        ListenSpec::Addr(a) => a.to_string(),
        ListenSpec::Network { base, prefix } => format!("{base}/{prefix}"),
        ListenSpec::Interface(n) => n.clone(),
        ListenSpec::Auto => "auto".to_string(),
    }
}

/// The address this host's daemon listens on, from the real interfaces.
pub fn resolve(listen_host: &str) -> FsResult<IpAddr> {
    let spec = ListenSpec::parse(listen_host)?;
    if let ListenSpec::Addr(a) = spec {
        return Ok(a);
    }
    let interfaces: Vec<(String, IpAddr)> = if_addrs::get_if_addrs()
        .map_err(|e| FsError::io("listing this host's network interfaces", &e))?
        .into_iter()
        .map(|i| (i.name.clone(), i.ip()))
        .collect();
    choose(&spec, &interfaces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ifs() -> Vec<(String, IpAddr)> {
        vec![
            ("lo".into(), "127.0.0.1".parse().unwrap()),
            ("eth0".into(), "fe80::1".parse().unwrap()),
            ("eth0".into(), "10.9.0.3".parse().unwrap()),
            ("ib0".into(), "192.168.7.20".parse().unwrap()),
        ]
    }

    #[test]
    fn each_kind_of_setting_picks_its_address() {
        let pick = |s: &str| choose(&ListenSpec::parse(s).unwrap(), &ifs());
        assert_eq!(pick("auto").unwrap().to_string(), "10.9.0.3");
        assert_eq!(pick("192.168.0.0/16").unwrap().to_string(), "192.168.7.20");
        assert_eq!(pick("eth0").unwrap().to_string(), "10.9.0.3");
        assert_eq!(pick("127.0.0.1").unwrap().to_string(), "127.0.0.1");
        let e = pick("172.16.0.0/12").unwrap_err();
        assert_eq!(e.errno, Errno::AddrNotAvail);
        assert!(e.message.contains("ib0 192.168.7.20"), "{}", e.message);
    }

    #[test]
    fn loopback_is_never_chosen_for_a_network_setting() {
        let only_lo = vec![("lo".to_string(), "127.0.0.1".parse().unwrap())];
        for s in ["auto", "127.0.0.0/8", "lo"] {
            assert!(
                choose(&ListenSpec::parse(s).unwrap(), &only_lo).is_err(),
                "{s}"
            );
        }
    }

    #[test]
    fn bad_settings_are_named() {
        for s in ["", "10.0.0.0/40", "x/y", "a b", "averyveryverylongname"] {
            let e = ListenSpec::parse(s).unwrap_err();
            assert!(e.message.contains("listen_host"), "{s}: {}", e.message);
        }
    }

    proptest! {
        #[test]
        fn network_membership_agrees_with_a_prefix_comparison(a: u32, b: u32, prefix in 0u8..=32) {
            let bits = |x: u32| format!("{x:032b}");
            let expect = bits(a)[..prefix as usize] == bits(b)[..prefix as usize];
            prop_assert_eq!(
                in_network(IpAddr::V4(a.into()), IpAddr::V4(b.into()), prefix),
                expect
            );
        }
    }
}
