//! Which IP addresses are public, and what the others are, in words for error messages.
//!
//! The lists follow the IANA special-purpose address registries. IPv6 forms that carry an
//! IPv4 address (mapped, compatible, NAT64, 6to4) are judged by the IPv4 address inside,
//! since that is where a connection to them ends up.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv4 ranges that are not public: first address, prefix length, what it is.
const V4: &[([u8; 4], u8, &str)] = &[
    ([0, 0, 0, 0], 8, "unspecified (\"this network\")"),
    ([10, 0, 0, 0], 8, "private"),
    (
        [100, 64, 0, 0],
        10,
        "shared address space (carrier-grade NAT, where some clouds serve metadata)",
    ),
    ([127, 0, 0, 0], 8, "loopback"),
    (
        [169, 254, 0, 0],
        16,
        "link-local (where clouds serve instance metadata and credentials)",
    ),
    ([172, 16, 0, 0], 12, "private"),
    ([192, 0, 0, 0], 24, "reserved for IETF protocol assignments"),
    ([192, 0, 2, 0], 24, "reserved for documentation"),
    ([192, 168, 0, 0], 16, "private"),
    ([198, 18, 0, 0], 15, "reserved for benchmarking"),
    ([198, 51, 100, 0], 24, "reserved for documentation"),
    ([203, 0, 113, 0], 24, "reserved for documentation"),
    ([224, 0, 0, 0], 4, "multicast"),
    (
        [240, 0, 0, 0],
        4,
        "reserved (including the broadcast address 255.255.255.255)",
    ),
];

/// IPv6 ranges that are not public, inside or outside the global unicast range 2000::/3.
const V6: &[(u128, u8, &str)] = &[
    (0, 128, "unspecified"),
    (1, 128, "loopback"),
    (0x0100 << 112, 64, "reserved for discarding"),
    (
        0x0064_ff9b_0001 << 80,
        48,
        "reserved for local NAT64 translation",
    ),
    (
        0x2001 << 112,
        23,
        "reserved for IETF protocol assignments (Teredo, benchmarking, ...)",
    ),
    (0x2001_0db8 << 96, 32, "reserved for documentation"),
    (0x3fff << 112, 20, "reserved for documentation"),
    (
        0xfc00 << 112,
        7,
        "unique local, IPv6's private range (where clouds serve instance metadata, e.g. fd00:ec2::254)",
    ),
    (
        0xfe80 << 112,
        10,
        "link-local (where clouds serve instance metadata)",
    ),
    (0xfec0 << 112, 10, "site-local (deprecated private range)"),
    (0xff00 << 112, 8, "multicast"),
];

/// What `ip` is when it is not a public address; `None` when it is public.
pub(super) fn non_public(ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4).map(str::to_owned),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

/// The IPv4 address an IPv6 address carries, and the name of that form.
pub(super) fn embedded_v4(ip: Ipv6Addr) -> Option<(Ipv4Addr, &'static str)> {
    let bits = u128::from(ip);
    let low = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some((v4, "IPv4-mapped"));
    }
    // :: and ::1 are IPv6's own unspecified and loopback addresses, not IPv4 in disguise.
    if bits >> 32 == 0 && bits > 1 {
        return Some((low, "IPv4-compatible"));
    }
    if bits >> 32 == 0x0064_ff9b_0000_0000_0000_0000 {
        return Some((low, "NAT64"));
    }
    if bits >> 112 == 0x2002 {
        return Some((Ipv4Addr::from((bits >> 80) as u32), "6to4"));
    }
    None
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let bits = u32::from(ip);
    V4.iter()
        .find(|(first, len, _)| bits >> (32 - len) == u32::from_be_bytes(*first) >> (32 - len))
        .map(|(_, _, what)| *what)
}

fn non_public_v6(ip: Ipv6Addr) -> Option<String> {
    if let Some((v4, form)) = embedded_v4(ip) {
        return non_public_v4(v4).map(|what| format!("{what}: {v4} in {form} IPv6 form"));
    }
    let bits = u128::from(ip);
    if let Some((_, _, what)) = V6
        .iter()
        .find(|(first, len, _)| bits >> (128 - len) == first >> (128 - len))
    {
        return Some((*what).to_owned());
    }
    // Everything outside 2000::/3 that is not listed above is unassigned.
    (bits >> 125 != 1).then(|| "outside the global unicast range 2000::/3".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn what(ip: &str) -> Option<String> {
        non_public(ip.parse().unwrap())
    }

    #[test]
    fn loopback_private_link_local_and_metadata_addresses_are_not_public() {
        for (ip, want) in [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("::1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("fd12::1", "unique local"),
            ("169.254.169.254", "metadata"),
            ("169.254.170.2", "link-local"),
            ("fe80::1", "link-local"),
            ("fd00:ec2::254", "fd00:ec2::254"),
            ("100.100.100.200", "carrier-grade NAT"),
            ("0.0.0.0", "unspecified"),
            ("::", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("ff02::1", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("192.0.0.170", "IETF"),
            ("198.18.0.1", "benchmarking"),
            ("2001:db8::1", "documentation"),
            ("2001::1", "Teredo"),
            ("fec0::1", "site-local"),
            ("100::1", "discarding"),
            ("4000::1", "outside the global unicast range"),
        ] {
            let got = what(ip).unwrap_or_else(|| panic!("{ip} should not be public"));
            assert!(got.contains(want), "{ip}: {got:?} should mention {want:?}");
        }
    }

    #[test]
    fn ipv6_forms_of_ipv4_addresses_are_judged_by_the_address_inside() {
        for (ip, want) in [
            (
                "::ffff:127.0.0.1",
                "loopback: 127.0.0.1 in IPv4-mapped IPv6 form",
            ),
            ("::ffff:169.254.169.254", "link-local"),
            ("::127.0.0.1", "127.0.0.1 in IPv4-compatible"),
            ("64:ff9b::a00:1", "private: 10.0.0.1 in NAT64"),
            ("2002:c0a8:101::1", "private: 192.168.1.1 in 6to4"),
        ] {
            let got = what(ip).unwrap_or_else(|| panic!("{ip} should not be public"));
            assert!(got.contains(want), "{ip}: {got:?} should contain {want:?}");
        }
        for public in ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"] {
            assert_eq!(what(public), None, "{public}");
        }
    }

    #[test]
    fn ordinary_internet_addresses_are_public() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "169.255.0.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001:82b::200e",
        ] {
            assert_eq!(what(ip), None, "{ip}");
        }
    }
}
